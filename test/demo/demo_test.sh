#!/usr/bin/env bash
# Runs scripts/demo.sh against a redis-server this script starts on a free
# loopback port, and checks the summary the README promises.
#
#   demo_test.sh SOURCE_DIR safe      # the scenario: every claim must hold, exit 0
#   demo_test.sh SOURCE_DIR no-lock   # without the lock: the demo must report
#                                     # overselling and exit 1 (proves its checks bite)
#
# Needs COROLOCK_DEMO_BIN (the built corolock_demo); redis-server from PATH or
# COROLOCK_REDIS_SERVER.
set -euo pipefail

source_dir=${1:?usage: demo_test.sh SOURCE_DIR safe|no-lock}
mode=${2:?usage: demo_test.sh SOURCE_DIR safe|no-lock}
: "${COROLOCK_DEMO_BIN:?COROLOCK_DEMO_BIN must name the built corolock_demo}"
source "$source_dir/scripts/lib/throwaway_redis.sh"

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-demo-test.XXXXXX")
server_pid=""
demo_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$demo_pid"
  stop_pid "$server_pid"
  rm -rf "$tmp_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "FAIL: $*" >&2; exit 1; }

throwaway_redis_start "$tmp_dir" || fail "could not start redis-server"
server_pid=$REDIS_PID
port=$REDIS_PORT

args=()
[[ $mode == no-lock ]] && args+=(--no-lock)
status=0
REDIS_URL="redis://127.0.0.1:$port" "$source_dir/scripts/demo.sh" "${args[@]}" >"$tmp_dir/out" 2>&1 &
demo_pid=$!
wait "$demo_pid" || status=$?
demo_pid=""
out=$(cat "$tmp_dir/out")
echo "$out"
echo "(demo.sh exit status $status)"

# The value after "NAME: " on the summary line for NAME ('' when absent).
field() { { grep -E "^  $1 *: " <<<"$out" || true; } | head -n 1 | sed -E "s/^  $1 *: //"; }

acq=$(field acquisitions)
handoff=$(field 'handoff latency')
oversold=$(field oversold)
refused=$(field 'stale writes refused')
lost=$(field 'lost signals fired')

if [[ $mode == no-lock ]]; then
  [[ $status -eq 1 ]] || fail "without the lock the demo must fail with status 1, got $status"
  yes_re="^YES \\(sold ([0-9]+), stock ([0-9]+),"
  [[ $oversold =~ $yes_re ]] ||
    fail "without the lock the demo must report overselling: '$oversold'"
  (( BASH_REMATCH[1] > 200 - BASH_REMATCH[2] )) ||
    fail "the oversold line does not show more sales than units sold: '$oversold'"
  echo "PASS: without the lock the demo oversold and said so"
  exit 0
fi

[[ $status -eq 0 ]] || fail "demo.sh exited with $status"
[[ $acq =~ ^[0-9]+$ ]] && (( acq > 200 )) ||
  fail "acquisitions must exceed the 200 sales (each seller also finds the stock gone): '$acq'"
[[ $handoff =~ ^p50\ [0-9.]+\ ms,\ p99\ [0-9.]+\ ms ]] || fail "no handoff latency figures: '$handoff'"
[[ $oversold == 'no (sold 200, stock 0, counter 200)' ]] || fail "oversold line: '$oversold'"
# Patterns in variables: bash passes them to regcomp unaltered.
refused_re="^([0-9]+) \\(the paused worker's, token ([0-9]+) < ([0-9]+)\\)\$"
[[ $refused =~ $refused_re ]] ||
  fail "stale writes refused line: '$refused'"
(( BASH_REMATCH[1] >= 1 && BASH_REMATCH[2] < BASH_REMATCH[3] )) ||
  fail "the refused write's token must be below the store's fence: '$refused'"
[[ $lost =~ ^([0-9]+) ]] && (( BASH_REMATCH[1] >= 1 )) || fail "lost signals fired: '$lost'"
grep -q '^Shown: ' <<<"$out" || fail "no explanation line"
echo "PASS"
