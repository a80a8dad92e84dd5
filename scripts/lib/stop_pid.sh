# Sourced by the throwaway server helpers here (and through
# throwaway_redis.sh by the scripts and shell tests that use it).
#
#   stop_pid PID [SIGNAL]   # SIGNAL (TERM unless given), up to 5 s, then
#                           # KILL; reaped when it is this shell's child
#
# Ends a process this script started, by its PID; an empty PID is nothing.
stop_pid() {
  local pid=$1 sig=${2:-TERM}
  [[ -n $pid ]] || return 0
  if kill "-$sig" "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
