# Sourced by scripts/bench.sh: the RedLock scenarios (docs/benchmarks.md,
# "RedLock"), run by run_redlock against five throwaway redis-servers (the
# 3-node RedLock uses the first three). Reads bench.sh's mode, build_dir,
# run_dir, plots, update_docs, bench (corolock_bench, for the acquire
# script's SCRIPT LOAD) and bench_topology (corolock_bench_topology); uses
# topology_value and topology_median of topology_bench.sh, sourced before.
#
#  R1 uncontended cycles: one coroutine, acquire -> release on fresh names,
#     on a RedLock of 3 and of 5 nodes and on the single-node mutex of the
#     first node, in the same process one after the other (the order
#     alternates by round), each round beside a 1-client redis-benchmark
#     sample of the acquire script on the first node; the ratios are the
#     medians of the rounds' RedLock / single-node and RedLock / (EVALSHA/2).
#  R2 handoff to a waiter on another client: two backends take turns on one
#     lock (each starts waiting while the other holds), on a RedLock of 3
#     and of 5 nodes, then on the single-node mutex; percentiles, over PING
#     p50 on the first node (a redis-benchmark sample beside each run).
#  R3 the fan-out under per-node latency: each node behind a reply-delaying
#     proxy of its own (the delays are corolock_bench_topology's), one
#     coroutine cycling on a RedLock of 3 and of 5 nodes and on the
#     single-node mutex of the slowest, in rounds (the order alternates);
#     the medians of the rounds' cycle p50 ratios, beside what a sequential
#     fan-out would cost. A ratio over the program's bound is printed as a
#     WARN and kept in the JSON; it fails nothing.

# shellcheck shell=bash disable=SC2154 # mode, build_dir, run_dir, bench, plots...: bench.sh's

REDLOCK_PIDS=()
REDLOCK_PORTS=()

redlock_nodes_stop() {
  local pid
  for pid in "${REDLOCK_PIDS[@]}"; do stop_pid "$pid"; done
  REDLOCK_PIDS=()
  REDLOCK_PORTS=()
}

redlock_flush() {
  local p
  for p in "${REDLOCK_PORTS[@]}"; do timeout 30 redis-cli -p "$p" FLUSHALL >/dev/null; done
}

# Starts COUNT throwaway redis-servers in DIR/node1... (REDLOCK_PORTS,
# REDLOCK_PIDS); a throwaway server the caller runs keeps its REDIS_PID.
redlock_nodes_start() {
  local dir=$1 count=$2 i status=0 caller_pid=$REDIS_PID caller_port=$REDIS_PORT
  for i in $(seq "$count"); do
    mkdir -p "$dir/node$i"
    throwaway_redis_start "$dir/node$i" || { status=1; break; }
    REDLOCK_PIDS+=("$REDIS_PID")
    REDLOCK_PORTS+=("$REDIS_PORT")
  done
  REDIS_PID=$caller_pid
  REDIS_PORT=$caller_port
  ((status == 0)) || redlock_nodes_stop
  return "$status"
}

# The URLs of the first COUNT nodes, comma-separated.
redlock_urls() {
  local i
  for i in $(seq 0 $(($1 - 1))); do printf 'redis://127.0.0.1:%s\n' "${REDLOCK_PORTS[$i]}"; done | paste -sd,
}

# A "key<TAB>value" file as JSON members (nan as null).
redlock_tsv_json() {
  awk -F'\t' '{ printf "%s\"%s\": %s", (NR > 1 ? ", " : ""), $1, ($2 == "nan" || $2 == "-nan" ? "null" : $2) }' "$1"
}

run_redlock() {
  local dir=$run_dir/redlock out=$build_dir/bench-redlock-results.json
  local rounds seconds r2_seconds r3_rounds r3_seconds n_c1 n_ping i n round sha urls json=()
  case $mode in
    full)  rounds=5 seconds=1   r2_seconds=8 r3_rounds=3 r3_seconds=2   n_c1=10000 n_ping=10000 ;;
    quick) rounds=3 seconds=1   r2_seconds=4 r3_rounds=2 r3_seconds=1   n_c1=5000  n_ping=5000 ;;
    smoke) rounds=1 seconds=0.3 r2_seconds=1 r3_rounds=1 r3_seconds=0.3 n_c1=500   n_ping=500 ;;
  esac
  rm -rf "$dir"
  mkdir -p "$dir"
  trap 'redlock_nodes_stop; throwaway_redis_stop' EXIT
  redlock_nodes_start "$dir" 5 || return 1
  echo "bench: RedLock nodes on ports ${REDLOCK_PORTS[*]} (pids ${REDLOCK_PIDS[*]})"
  for i in "${REDLOCK_PORTS[@]}"; do sha=$("$bench" --port "$i" --load-acquire-script); done
  local acquire=(EVALSHA "$sha" 2 'corolock:{__rand_int__}' 'corolock:{__rand_int__}:fence' owner 30000 1
                 '4242 bench-host corolock_bench')
  local first=${REDLOCK_PORTS[0]}

  for n in 3 5; do
    urls=$(redlock_urls "$n")
    # R1 in rounds beside an EVALSHA sample on the first node; both orders alternate.
    echo "bench: R1 (RedLock on $n nodes, uncontended cycles) in $rounds rounds, each beside a 1-client EVALSHA sample"
    local over_single=() over_eval=() r1_rl=() r1_single=() r1_eval=()
    r1_round() {
      redlock_flush
      timeout 120 "$bench_topology" --redlock "$urls" --cycles --seconds "$seconds" \
        --redlock-first $((round % 2)) >"$dir/r1.n$n.$round.tsv" || echo "bench: R1 round $round failed" >&2
    }
    for round in $(seq "$rounds"); do
      ((round % 2 == 0)) && r1_round
      redlock_flush
      timeout 120 redis-benchmark -h 127.0.0.1 -p "$first" --csv -c 1 -n "$n_c1" -r 100000 "${acquire[@]}" \
        >"$dir/evalsha_c1.n$n.$round.csv" || echo "bench: R1 round $round: redis-benchmark failed" >&2
      ((round % 2 == 1)) && r1_round
      local rl one ev
      rl=$(topology_value "$dir/r1.n$n.$round.tsv" redlock_cycles_per_s)
      one=$(topology_value "$dir/r1.n$n.$round.tsv" single_cycles_per_s)
      ev=$(awk -F'","' 'NR == 2 { print $2 }' "$dir/evalsha_c1.n$n.$round.csv")
      r1_rl+=("$rl")
      r1_single+=("$one")
      r1_eval+=("$ev")
      [[ -n $rl && -n $one ]] && over_single+=("$(awk -v a="$rl" -v b="$one" 'BEGIN { print a / b }')")
      [[ -n $rl && -n $ev ]] && over_eval+=("$(awk -v a="$rl" -v b="$ev" 'BEGIN { print 2 * a / b }')")
    done
    local m_single m_eval m_rl m_one m_ev
    m_single=$(printf '%s\n' "${over_single[@]}" | topology_median)
    m_eval=$(printf '%s\n' "${over_eval[@]}" | topology_median)
    m_rl=$(printf '%s\n' "${r1_rl[@]}" | topology_median)
    m_one=$(printf '%s\n' "${r1_single[@]}" | topology_median)
    m_ev=$(printf '%s\n' "${r1_eval[@]}" | topology_median)
    echo "bench:   R1 rounds (RedLock cycles/s, single-node cycles/s, EVALSHA/s): $(paste -d, <(printf '%s\n' "${r1_rl[@]}") <(printf '%s\n' "${r1_single[@]}") <(printf '%s\n' "${r1_eval[@]}") | paste -sd' ')"
    echo "bench:   R1 RedLock/single = ${m_single:-n/a}, 2 x RedLock cycles/s / EVALSHA/s = ${m_eval:-n/a} (medians of ${#over_single[@]} rounds)"

    # R2: one run, beside a PING sample on the first node.
    echo "bench: R2 (RedLock on $n nodes, handoff to another client) for ${r2_seconds} s, then the single node"
    redlock_flush
    timeout 120 redis-benchmark -h 127.0.0.1 -p "$first" --csv -t ping_mbulk -c 1 -n "$n_ping" \
      >"$dir/ping_c1.n$n.csv" || echo "bench: R2: redis-benchmark failed" >&2
    timeout 180 "$bench_topology" --redlock "$urls" --handoff --seconds "$r2_seconds" \
      --data "$dir/r2_handoff_cdf.n$n.dat" >"$dir/r2.n$n.tsv" || echo "bench: R2 on $n nodes failed" >&2
    local ping_us
    ping_us=$(awk -F'","' 'NR == 2 { print $5 * 1000 }' "$dir/ping_c1.n$n.csv")
    local k
    for k in redlock_ single_; do
      echo "bench:   R2 ${k%_}: $(topology_value "$dir/r2.n$n.tsv" "${k}handoffs") handoffs, p50 $(topology_value "$dir/r2.n$n.tsv" "${k}handoff_p50_us") us," \
        "p90 $(topology_value "$dir/r2.n$n.tsv" "${k}handoff_p90_us") us, p99 $(topology_value "$dir/r2.n$n.tsv" "${k}handoff_p99_us") us" \
        "(PING p50 ${ping_us:-n/a} us)"
    done
    local r2
    r2=$(redlock_tsv_json "$dir/r2.n$n.tsv")

    # R3: rounds, the order alternating; each round's figures kept whole.
    echo "bench: R3 (RedLock on $n nodes, fan-out under per-node reply delays) in $r3_rounds rounds of ${r3_seconds} s a side"
    local r3_ratios=() r3_rounds_json=() r3_tsv
    for round in $(seq "$r3_rounds"); do
      r3_tsv=$dir/r3.n$n.$round.tsv
      redlock_flush
      timeout 120 "$bench_topology" --redlock "$urls" --fanout --seconds "$r3_seconds" \
        --redlock-first $((round % 2)) >"$r3_tsv" || echo "bench: R3 round $round failed" >&2
      [[ -s $r3_tsv ]] || continue
      r3_ratios+=("$(topology_value "$r3_tsv" redlock_over_single_p50)")
      r3_rounds_json+=("{$(redlock_tsv_json "$r3_tsv")}")
      echo "bench:   R3 round $round: cycle p50 RedLock $(topology_value "$r3_tsv" redlock_cycle_p50_us) us," \
        "slowest single node $(topology_value "$r3_tsv" single_cycle_p50_us) us;" \
        "acquire p50 $(topology_value "$r3_tsv" redlock_acquire_p50_us) / $(topology_value "$r3_tsv" single_acquire_p50_us) us," \
        "release p50 $(topology_value "$r3_tsv" redlock_release_p50_us) / $(topology_value "$r3_tsv" single_release_p50_us) us"
    done
    local m_r3 seq_r3 warn_r3 r3_warn=false
    m_r3=$(printf '%s\n' "${r3_ratios[@]}" | topology_median)
    [[ -s ${r3_tsv:-} ]] && seq_r3=$(topology_value "$r3_tsv" sequential_over_single) &&
      warn_r3=$(topology_value "$r3_tsv" fanout_warn_above)
    echo "bench:   R3 RedLock / slowest single node, cycle p50 = ${m_r3:-n/a} (median of ${#r3_ratios[@]} rounds;" \
      "a sequential fan-out: ${seq_r3:-n/a})"
    if [[ -n $m_r3 && -n ${warn_r3:-} ]] && awk -v r="$m_r3" -v w="$warn_r3" 'BEGIN { exit !(r > w) }'; then
      r3_warn=true
      echo "bench: WARN R3 on $n nodes: RedLock / slowest single node $m_r3 > $warn_r3: the fan-out does not look concurrent" >&2
    fi
    json+=("\"n$n\": {\"r1\": {\"redlock_over_single_median\": ${m_single:-null}, \"redlock_over_half_evalsha_c1_median\": ${m_eval:-null}, \"redlock_cycles_per_s_median\": ${m_rl:-null}, \"single_cycles_per_s_median\": ${m_one:-null}, \"evalsha_c1_ops_per_s_median\": ${m_ev:-null}, \"round_ratios_over_single\": [$(IFS=,; echo "${over_single[*]}")]}, \"r2\": {$r2, \"ping_p50_us\": ${ping_us:-null}}, \"r3\": {\"redlock_over_single_p50_median\": ${m_r3:-null}, \"warn\": $r3_warn, \"rounds\": [$(IFS=,; echo "${r3_rounds_json[*]}")]}}")
    [[ $n = 3 ]] && redlock_ping_us=$ping_us
  done
  redlock_nodes_stop

  # R2's plot: the handoff CDFs of 3 and 5 nodes and of the single node.
  if ((plots)) && [[ -s $dir/r2_handoff_cdf.n3.dat && -n ${redlock_ping_us:-} ]]; then
    timeout 60 gnuplot <<EOF || echo "bench: R2 plot failed" >&2
set terminal pngcairo size 900,560 font "DejaVu Sans,11"
set output "$run_dir/plots/redlock_handoff_cdf.png"
set grid
set key bottom right
set title "R2: lock handoff to a waiter on another client: RedLock and one server"
set xlabel "handoff: release called -> waiter's acquire returns (microseconds, log scale)"
set ylabel "fraction of handoffs"
set logscale x
set xrange [10:*]
set yrange [0:1.02]
set arrow from $redlock_ping_us, graph 0 to $redlock_ping_us, graph 1 nohead lc rgb "#999999" dt 2
set label "PING p50" at $redlock_ping_us, graph 0.95 offset 0.5,0 tc rgb "#666666"
plot "$dir/r2_handoff_cdf.n3.dat.single" using 1:2 with lines lw 2 title "single-node mutex (pub/sub)", \\
     "$dir/r2_handoff_cdf.n3.dat" using 1:2 with lines lw 2 title "RedLock, 3 nodes", \\
     "$dir/r2_handoff_cdf.n5.dat" using 1:2 with lines lw 2 title "RedLock, 5 nodes"
EOF
    if ((update_docs)) && [[ -s $run_dir/plots/redlock_handoff_cdf.png ]]; then
      mkdir -p docs/plots
      cp "$run_dir/plots/redlock_handoff_cdf.png" docs/plots/
      echo "bench: R2 plot copied to docs/plots/"
    fi
  fi

  printf '{"mode": "%s", %s}\n' "$mode" "$(IFS=,; echo "${json[*]}")" >"$out"
  echo "bench: RedLock results in $out"
  [[ -s $dir/r2.n3.tsv && -s $dir/r2.n5.tsv && -s $dir/r3.n3.1.tsv && -s $dir/r3.n5.1.tsv ]]
}
