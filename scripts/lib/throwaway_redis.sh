# Sourced by scripts and shell tests that need a redis-server of their own.
#
#   source scripts/lib/throwaway_redis.sh
#   throwaway_redis_start DIR [ARG...]  # sets REDIS_PORT and REDIS_PID, or returns 1
#   ...
#   throwaway_redis_stop           # by the PID it started; safe to call twice
#
# The server listens on 127.0.0.1 only, keeps nothing on disk (--save '',
# --appendonly no) and writes its log to DIR/redis.log; ARGs go to
# redis-server after those (--cluster-enabled yes ...). The binary is
# $COROLOCK_REDIS_SERVER, else redis-server from PATH.

REDIS_PORT=""
REDIS_PID=""

throwaway_redis_start() {
  local dir bin=${COROLOCK_REDIS_SERVER:-redis-server} candidate
  # Absolute: redis-server changes into --dir before it opens --logfile.
  dir=$(cd "$1" && pwd) || return 1
  command -v "$bin" >/dev/null || { echo "redis-server is not installed (scripts/setup.sh installs it)" >&2; return 1; }
  # A random port below Linux's ephemeral range (so a client's own source
  # port can never take it); if it is taken the server exits at once and we
  # try another. Binding is the only reliable check.
  for _ in $(seq 20); do
    candidate=$((20000 + RANDOM % 12000))
    : >"$dir/redis.log"
    "$bin" --port "$candidate" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir" --logfile "$dir/redis.log" --daemonize no "${@:2}" &
    REDIS_PID=$!
    # Up to 5 s for the server to say it listens, or to die trying.
    for _ in $(seq 100); do
      grep -q 'Ready to accept connections' "$dir/redis.log" && break
      kill -0 "$REDIS_PID" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$REDIS_PID" 2>/dev/null && grep -q 'Ready to accept connections' "$dir/redis.log"; then
      REDIS_PORT=$candidate
      return 0
    fi
    kill -KILL "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
  done
  echo "could not start redis-server on a free loopback port:" >&2
  cat "$dir/redis.log" >&2
  return 1
}

# shellcheck source=stop_pid.sh
source "$(dirname "${BASH_SOURCE[0]}")/stop_pid.sh"

throwaway_redis_stop() {
  stop_pid "$REDIS_PID"
  REDIS_PID=""
}
