#!/usr/bin/env bash
# corolock in one command: installs what it needs, builds the demo, starts a
# throwaway redis-server on a free loopback port and runs the scenario:
# worker processes with many coroutines sell a limited stock under one
# corolock::mutex; one worker is frozen (SIGSTOP) past its lease while
# holding the lock, and its late write is refused by a fencing-checked store.
#
#   scripts/demo.sh                          # everything, from a fresh Debian 12
#   REDIS_URL=redis://127.0.0.1:6379 scripts/demo.sh   # use that server instead
#   scripts/demo.sh --no-lock                # the same sale without the lock: it oversells
#   scripts/demo.sh --workers 4 --stock 500  # arguments go to corolock_demo
#
# Environment:
#   REDIS_URL          use this server; no server is started
#   COROLOCK_DEMO_BIN  an already built corolock_demo: skips setup and build
#   BUILD_DIR          build folder (default ./build, shared with scripts/test.sh)
#
# Exit status is the demo's: 0 when every claim held (nothing oversold, the
# stale write refused, the lost signal fired).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/throwaway_redis.sh

build_dir=${BUILD_DIR:-build}
tmp_dir=""
server_pid=""
demo_pid=""

# Runs on every exit, including Ctrl-C: stops only the processes this
# script started, by their PIDs.
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  # The demo stops its own workers when told to.
  stop_pid "$demo_pid"
  stop_pid "$server_pid"
  [[ -n $tmp_dir ]] && rm -rf "$tmp_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

if [[ -n ${COROLOCK_DEMO_BIN:-} ]]; then
  bin=$COROLOCK_DEMO_BIN
  [[ -x $bin ]] || { echo "demo: COROLOCK_DEMO_BIN=$bin is not an executable" >&2; exit 2; }
else
  scripts/setup.sh
  mkdir -p "$build_dir"
  log="$build_dir/demo-build.log"
  echo "demo: building corolock_demo in $build_dir (the first build takes a minute; log in $log)"
  if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
         cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target corolock_demo; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "demo: the build failed; the whole log is $log" >&2
    exit 2
  fi
  bin="$build_dir/examples/corolock_demo"
fi

if [[ -n ${REDIS_URL:-} ]]; then
  url=$REDIS_URL
else
  tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-demo.XXXXXX")
  throwaway_redis_start "$tmp_dir" || exit 2
  server_pid=$REDIS_PID
  port=$REDIS_PORT
  url="redis://127.0.0.1:$port"
  echo "demo: throwaway redis-server (pid $server_pid) on 127.0.0.1:$port"
fi

# In the background and waited for, so that a signal to this script runs the
# cleanup at once instead of after the demo ends. The URL goes in the
# environment, not argv, because it may carry a password.
REDIS_URL=$url "$bin" "$@" &
demo_pid=$!
status=0
wait "$demo_pid" || status=$?
demo_pid=""
exit "$status"
