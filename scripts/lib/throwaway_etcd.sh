# Sourced by scripts and shell tests that need an etcd of their own.
#
#   source scripts/lib/throwaway_etcd.sh
#   throwaway_etcd_available       # true when the etcd binary is found
#   throwaway_etcd_start DIR       # sets ETCD_PORT, ETCD_PID and ETCD_URL, or returns 1
#   ...
#   throwaway_etcd_stop            # by the PID it started; safe to call twice
#
# One member listening on 127.0.0.1 only (client and peer ports), its data
# in DIR/etcd-data, its log in DIR/etcd.log. The binary is $COROLOCK_ETCD,
# else etcd from PATH. Ready when GET /health answers "true" (curl).

# shellcheck source=stop_pid.sh
source "$(dirname "${BASH_SOURCE[0]}")/stop_pid.sh"

ETCD_PORT=""
ETCD_PID=""
ETCD_URL=""

throwaway_etcd_available() { command -v "${COROLOCK_ETCD:-etcd}" >/dev/null; }

throwaway_etcd_start() {
  local dir bin=${COROLOCK_ETCD:-etcd} client peer
  dir=$(cd "$1" && pwd) || return 1
  command -v "$bin" >/dev/null || { echo "etcd is not installed (scripts/setup.sh installs it)" >&2; return 1; }
  command -v curl >/dev/null || { echo "throwaway_etcd needs curl" >&2; return 1; }
  # Random ports below Linux's ephemeral range; if one is taken etcd exits
  # at once and we try others. Binding is the only reliable check.
  for _ in $(seq 20); do
    client=$((20000 + RANDOM % 12000))
    peer=$((20000 + RANDOM % 12000))
    ((client != peer)) || continue
    rm -rf "$dir/etcd-data"
    "$bin" --name bench --data-dir "$dir/etcd-data" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "bench=http://127.0.0.1:$peer" --initial-cluster-state new \
      --logger zap --log-level error >"$dir/etcd.log" 2>&1 &
    ETCD_PID=$!
    # Up to 10 s for it to report healthy, or to die trying.
    for _ in $(seq 100); do
      kill -0 "$ETCD_PID" 2>/dev/null || break
      if curl -s --max-time 1 "http://127.0.0.1:$client/health" 2>/dev/null | grep -q '"health":"true"'; then
        ETCD_PORT=$client
        ETCD_URL="etcd://127.0.0.1:$client"
        return 0
      fi
      sleep 0.1
    done
    stop_pid "$ETCD_PID" KILL
    ETCD_PID=""
  done
  echo "could not start etcd on free loopback ports:" >&2
  cat "$dir/etcd.log" >&2
  return 1
}

throwaway_etcd_stop() {
  stop_pid "$ETCD_PID"
  ETCD_PID=""
}
