# Sourced by scripts/bench.sh: the Redis Cluster and Sentinel scenarios
# (docs/benchmarks.md, "Topologies"), run by run_topology. Reads bench.sh's
# mode, build_dir, run_dir, plots, update_docs, bench (corolock_bench, for
# the acquire script's SCRIPT LOAD) and bench_topology (corolock_bench_topology).
#
#  C1 cluster throughput: 64 coroutines on one redis+cluster:// backend
#     cycling over fresh names (spread over the three primaries), in paired
#     rounds beside a `redis-benchmark --cluster` sample of 50 clients
#     running the acquire script on the same cluster; the ratio is
#     2 x cycles/s over the sample's EVALSHA/s (a cycle is two scripts), the
#     median of the rounds' ratios, as S2.
#  C2 cluster handoff: 2 processes x 4 coroutines on one lock (S3's shape);
#     handoff p50 over PING p50 on the lock's primary, a PING sample
#     beside each round, the median of the rounds' ratios.
#  T1 Sentinel failover: corolock_bench_topology --sentinel starts its own
#     1 primary + 2 replicas + 3 Sentinels per repetition (test/support's
#     sentinel_fleet settings) and SIGKILLs the primary.

# shellcheck shell=bash disable=SC2154 # mode, build_dir, run_dir, bench, plots...: bench.sh's
# shellcheck source=throwaway_cluster.sh
source scripts/lib/throwaway_cluster.sh

# "key<TAB>value" file, key -> value (empty when absent).
topology_value() { awk -F'\t' -v k="$2" '$1 == k { print $2 }' "$1"; }

# The median of the numbers on stdin.
topology_median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# FLUSHALL on every primary, so that no round runs against another's keys.
topology_flush() {
  local p
  for p in $(throwaway_cluster_primaries); do
    timeout 30 redis-cli -p "$p" FLUSHALL >/dev/null
  done
}

run_topology() {
  local dir=$run_dir/topology out=$build_dir/bench-topology-results.json
  local rounds seconds c2_seconds n_c50 n_ping reps round p url sha node lock
  case $mode in
    full)  rounds=5 seconds=2   c2_seconds=3   n_c50=60000 n_ping=10000 reps=5 ;;
    quick) rounds=3 seconds=1   c2_seconds=2   n_c50=30000 n_ping=5000  reps=3 ;;
    smoke) rounds=1 seconds=0.3 c2_seconds=0.5 n_c50=2000  n_ping=500   reps=1 ;;
  esac
  rm -rf "$dir"
  mkdir -p "$dir"
  trap 'throwaway_cluster_stop; throwaway_redis_stop' EXIT
  local replicas=${COROLOCK_BENCH_CLUSTER_REPLICAS:-0}
  throwaway_cluster_start "$dir" "$replicas" || return 1
  echo "bench: cluster of 3 primaries ($replicas replicas each) on ports ${CLUSTER_PORTS[*]} (pids ${CLUSTER_PIDS[*]})"
  url="redis+cluster://127.0.0.1:${CLUSTER_PORTS[0]},127.0.0.1:${CLUSTER_PORTS[1]}"

  # The acquire script on every primary, for redis-benchmark's EVALSHA. The
  # keys carry redis-benchmark's {tag}, which it replaces with a hash tag
  # of a slot its client's node serves: both keys of a call route together
  # (one slot), and its 50 clients are spread over the primaries. As in
  # S2's baseline, each __rand_int__ is its own number: the same work.
  for p in $(throwaway_cluster_primaries); do
    sha=$("$bench" --port "$p" --load-acquire-script)
  done
  local acquire=(EVALSHA "$sha" 2 'corolock:{tag}:__rand_int__' 'corolock:{tag}:__rand_int__:fence'
                 owner 30000 1 '4242 bench-host corolock_bench')

  # C1 in paired rounds; the order alternates as in S1/S2.
  echo "bench: C1 (cluster throughput) in $rounds rounds, each beside a 50-client redis-benchmark --cluster sample"
  local ratios=() c1_cycles=() c1_samples=() c1_cpus=()
  c1_round() {
    topology_flush
    timeout 60 "$bench_topology" --cluster "$url" --cycles --seconds "$seconds" \
      >"$dir/c1.$round.tsv" || echo "bench: C1 round $round failed" >&2
  }
  for round in $(seq "$rounds"); do
    ((round % 2 == 0)) && c1_round
    topology_flush
    timeout 120 redis-benchmark --cluster -h 127.0.0.1 -p "${CLUSTER_PORTS[0]}" --csv \
      -c 50 -n "$n_c50" -r 100000 "${acquire[@]}" >"$dir/evalsha_c50_cluster.$round.csv" ||
      echo "bench: C1 round $round: redis-benchmark failed" >&2
    ((round % 2 == 1)) && c1_round
    local cps ops
    cps=$(topology_value "$dir/c1.$round.tsv" cycles_per_s)
    # --cluster prints the nodes it found before the CSV.
    ops=$(awk -F'","' '/^"test"/ { h = NR } h && NR == h + 1 { print $2 }' "$dir/evalsha_c50_cluster.$round.csv")
    c1_cycles+=("$cps")
    c1_cpus+=("$(topology_value "$dir/c1.$round.tsv" client_cpu_us_per_cycle)")
    c1_samples+=("$ops")
    [[ -n $cps && -n $ops ]] && ratios+=("$(awk -v c="$cps" -v o="$ops" 'BEGIN { print 2 * c / o }')")
  done
  local c1_ratio c1_cps c1_ops c1_cpu
  c1_cpu=$(printf '%s\n' "${c1_cpus[@]}" | topology_median)
  c1_ratio=$(printf '%s\n' "${ratios[@]}" | topology_median)
  c1_cps=$(printf '%s\n' "${c1_cycles[@]}" | topology_median)
  c1_ops=$(printf '%s\n' "${c1_samples[@]}" | topology_median)
  echo "bench:   C1 rounds (cycles/s, EVALSHA/s): $(paste -d, <(printf '%s\n' "${c1_cycles[@]}") <(printf '%s\n' "${c1_samples[@]}") | paste -sd' ')"
  echo "bench:   C1 2 x cycles/s / EVALSHA/s = ${c1_ratio:-n/a} (median of ${#ratios[@]} rounds)," \
    "client CPU ${c1_cpu:-n/a} us per cycle"

  # C2: the lock's primary, PING there beside each round.
  lock=bench:c2:$$
  node=$(throwaway_cluster_node_of "corolock:{$lock}")
  echo "bench: C2 (cluster handoff) on lock $lock, primary 127.0.0.1:$node, $rounds rounds beside a PING sample there"
  local c2_ratios=() c2_cross_ratios=() c2_p50s=() c2_cross_p50s=() pings=()
  for round in $(seq "$rounds"); do
    topology_flush
    timeout 120 redis-benchmark -h 127.0.0.1 -p "$node" --csv -t ping_mbulk -c 1 -n "$n_ping" \
      >"$dir/ping_c1_node.$round.csv" || echo "bench: C2 round $round: redis-benchmark failed" >&2
    timeout 120 "$bench_topology" --cluster "$url" --handoff --lock "$lock" --seconds "$c2_seconds" \
      --data "$dir/c2_handoff_cdf.$round.dat" >"$dir/c2.$round.tsv" || echo "bench: C2 round $round failed" >&2
    local ping_us h50 x50
    ping_us=$(awk -F'","' 'NR == 2 { print $5 * 1000 }' "$dir/ping_c1_node.$round.csv")
    h50=$(topology_value "$dir/c2.$round.tsv" handoff_p50_us)
    x50=$(topology_value "$dir/c2.$round.tsv" handoff_cross_process_p50_us)
    pings+=("$ping_us")
    c2_p50s+=("$h50")
    c2_cross_p50s+=("$x50")
    [[ -n $ping_us && -n $h50 ]] && c2_ratios+=("$(awk -v h="$h50" -v p="$ping_us" 'BEGIN { print h / p }')")
    [[ -n $ping_us && -n $x50 ]] && c2_cross_ratios+=("$(awk -v h="$x50" -v p="$ping_us" 'BEGIN { print h / p }')")
  done
  local c2_ratio c2_cross_ratio c2_ping c2_p50 c2_cross_p50
  c2_ratio=$(printf '%s\n' "${c2_ratios[@]}" | topology_median)
  c2_cross_ratio=$(printf '%s\n' "${c2_cross_ratios[@]}" | topology_median)
  c2_ping=$(printf '%s\n' "${pings[@]}" | topology_median)
  c2_p50=$(printf '%s\n' "${c2_p50s[@]}" | topology_median)
  c2_cross_p50=$(printf '%s\n' "${c2_cross_p50s[@]}" | topology_median)
  echo "bench:   C2 rounds (handoff p50 us, across processes p50 us, PING p50 us): $(paste -d, <(printf '%s\n' "${c2_p50s[@]}") <(printf '%s\n' "${c2_cross_p50s[@]}") <(printf '%s\n' "${pings[@]}") | paste -sd' ')"
  echo "bench:   C2 handoff p50 / PING p50 = ${c2_ratio:-n/a}, across processes ${c2_cross_ratio:-n/a}"
  throwaway_cluster_stop

  # C2's plot: every round's handoff CDF, PING p50 on the lock's node marked.
  if ((plots)) && [[ -n $c2_ping ]] && compgen -G "$dir/c2_handoff_cdf.*.dat" >/dev/null; then
    local curves=() f n
    for f in "$dir"/c2_handoff_cdf.*.dat; do
      n=${f%.dat}
      [[ -s $f ]] && curves+=("\"$f\" using 1:2 with lines lw 2 title \"round ${n##*.}\"")
    done
    timeout 60 gnuplot <<EOF || echo "bench: C2 plot failed" >&2
set terminal pngcairo size 900,560 font "DejaVu Sans,11"
set output "$run_dir/plots/cluster_handoff_cdf.png"
set grid
set key bottom right
set title "C2: lock handoff on a 3-primary Redis Cluster, 2 processes x 4 coroutines on one lock"
set xlabel "handoff: release called -> next acquire returns (microseconds, log scale)"
set ylabel "fraction of handoffs"
set logscale x
set yrange [0:1.02]
set arrow from $c2_ping, graph 0 to $c2_ping, graph 1 nohead lc rgb "#999999" dt 2
set label "PING p50 on the lock's primary" at $c2_ping, graph 0.95 offset 0.5,0 tc rgb "#666666"
plot $(IFS=,; echo "${curves[*]}")
EOF
    if ((update_docs)) && [[ -s $run_dir/plots/cluster_handoff_cdf.png ]]; then
      mkdir -p docs/plots
      cp "$run_dir/plots/cluster_handoff_cdf.png" docs/plots/
      echo "bench: C2 plot copied to docs/plots/"
    fi
  fi

  # T1: the program starts and stops its own Sentinel deployments.
  echo "bench: T1 (Sentinel failover), $reps repetitions"
  local t1_status=0
  timeout $((reps * 70 + 30)) "$bench_topology" --sentinel --reps "$reps" >"$dir/t1.tsv" || t1_status=$?
  ((t1_status == 0)) || echo "bench: T1 failed (status $t1_status)" >&2
  local what
  for what in first_grant_ms lost_ms forgotten_grant_ms; do
    echo "bench:   T1 kill -> ${what%_ms}: min $(topology_value "$dir/t1.tsv" "${what}_min") ms," \
      "median $(topology_value "$dir/t1.tsv" "${what}_median") ms, max $(topology_value "$dir/t1.tsv" "${what}_max") ms" \
      "($(topology_value "$dir/t1.tsv" "${what}_n") of $reps)"
  done

  # One JSON file: the figures above, and every round's raw output.
  {
    printf '{"mode": "%s", "cluster_replicas_per_primary": %s,\n' "$mode" "$replicas"
    printf ' "c1": {"cycles_over_half_evalsha_median": %s, "cycles_per_s_median": %s, "evalsha_c50_cluster_ops_per_s_median": %s,\n' \
      "${c1_ratio:-null}" "${c1_cps:-null}" "${c1_ops:-null}"
    printf '        "client_cpu_us_per_cycle_median": %s, "round_ratios": [%s]},\n' \
      "${c1_cpu:-null}" "$(IFS=,; echo "${ratios[*]}")"
    printf ' "c2": {"handoff_over_ping_median": %s, "handoff_cross_process_over_ping_median": %s,\n' \
      "${c2_ratio:-null}" "${c2_cross_ratio:-null}"
    printf '        "handoff_p50_us_median": %s, "handoff_cross_process_p50_us_median": %s, "ping_p50_us_median": %s},\n' \
      "${c2_p50:-null}" "${c2_cross_p50:-null}" "${c2_ping:-null}"
    printf ' "t1": {'
    awk -F'\t' '{ printf "%s\"%s\": %s", (NR > 1 ? ", " : ""), $1, ($2 == "nan" || $2 == "-nan" ? "null" : $2) }' "$dir/t1.tsv"
    printf '}}\n'
  } >"$out"
  echo "bench: topology results in $out"
  [[ -n $c1_ratio && -n $c2_ratio ]] && ((t1_status == 0))
}
