# Sourced by scripts that need a Redis Cluster of their own (scripts/bench.sh).
#
#   source scripts/lib/throwaway_redis.sh     # for stop_pid
#   source scripts/lib/throwaway_cluster.sh
#   throwaway_cluster_start DIR [REPLICAS]    # sets CLUSTER_PORTS, CLUSTER_PIDS; or returns 1
#   ...
#   throwaway_cluster_stop                    # by the PIDs it started; safe to call twice
#
# Three primaries (and REPLICAS replicas of each, default 0), each a
# redis-server --cluster-enabled yes on 127.0.0.1 with nothing on disk but
# its nodes file, in DIR/node-PORT/, joined by `redis-cli --cluster create
# --cluster-yes`. Returns once every node says cluster_state:ok (bounded).
# Ports are random in 20000-21999, so that each cluster bus port (+10000)
# stays below Linux's ephemeral range too.

CLUSTER_PORTS=()
CLUSTER_PIDS=()

throwaway_cluster_start() {
  local dir bin=${COROLOCK_REDIS_SERVER:-redis-server} replicas=${2:-0} want node_dir port pid ok
  dir=$(cd "$1" && pwd) || return 1
  want=$((3 * (1 + replicas)))
  for _ in $(seq $((want * 10))); do
    ((${#CLUSTER_PORTS[@]} < want)) || break
    port=$((20000 + RANDOM % 2000))
    [[ " ${CLUSTER_PORTS[*]} " == *" $port "* ]] && continue
    node_dir=$dir/node-$port
    mkdir -p "$node_dir"
    : >"$node_dir/redis.log"
    "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
      --dir "$node_dir" --logfile "$node_dir/redis.log" --daemonize no &
    pid=$!
    # Up to 5 s for it to listen (port and bus port), or to die trying.
    for _ in $(seq 100); do
      grep -q 'Ready to accept connections' "$node_dir/redis.log" && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null && grep -q 'Ready to accept connections' "$node_dir/redis.log"; then
      CLUSTER_PORTS+=("$port")
      CLUSTER_PIDS+=("$pid")
    else
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if ((${#CLUSTER_PORTS[@]} < want)); then
    echo "could not start $want cluster nodes on free loopback ports" >&2
    return 1
  fi
  local addrs=()
  for port in "${CLUSTER_PORTS[@]}"; do addrs+=("127.0.0.1:$port"); done
  if ! timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" \
    --cluster-yes >"$dir/cluster-create.log" 2>&1; then
    echo "redis-cli --cluster create failed:" >&2
    cat "$dir/cluster-create.log" >&2
    return 1
  fi
  # Up to 30 s for every node to see the whole slot map served.
  for _ in $(seq 300); do
    ok=1
    for port in "${CLUSTER_PORTS[@]}"; do
      timeout 5 redis-cli -p "$port" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok' || { ok=0; break; }
    done
    ((ok)) && return 0
    sleep 0.1
  done
  echo "the cluster did not reach cluster_state:ok" >&2
  return 1
}

# The ports of the primaries, one per line (CLUSTER NODES of the first node).
throwaway_cluster_primaries() {
  timeout 5 redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER NODES |
    awk '$3 ~ /master/ { split($2, a, "[:@]"); print a[2] }'
}

# The port of the primary serving KEY.
throwaway_cluster_node_of() {
  local slot
  slot=$(timeout 5 redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER KEYSLOT "$1") || return 1
  timeout 5 redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER NODES |
    awk -v slot="$slot" '$3 ~ /master/ {
      split($2, a, "[:@]")
      for (i = 9; i <= NF; i++) {
        n = split($i, r, "-")
        lo = r[1]; hi = (n > 1 ? r[2] : r[1])
        if ($i !~ /^\[/ && slot + 0 >= lo + 0 && slot + 0 <= hi + 0) print a[2]
      }
    }'
}

throwaway_cluster_stop() {
  local pid
  for pid in "${CLUSTER_PIDS[@]}"; do stop_pid "$pid"; done
  CLUSTER_PIDS=()
  CLUSTER_PORTS=()
}
