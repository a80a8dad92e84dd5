#!/usr/bin/env bash
# Runs corolock's benchmarks against a throwaway redis-server, next to
# redis-benchmark's figures for the same server, so that results read as
# ratios. Benchmarks are not tests: nothing here fails on a slow figure.
#
#   scripts/bench.sh                 # full run (about 140 seconds after the build,
#                                    # about 100 more for the topology scenarios
#                                    # and 90 more for RedLock's)
#   scripts/bench.sh --quick         # shorter scenarios, for a first look
#   scripts/bench.sh --update-docs   # also copy the plots to docs/plots/
#   BUILD_DIR=out JOBS=2 scripts/bench.sh
#   COROLOCK_BENCH_S1_CPUS=shared scripts/bench.sh   # S1's CPU placement (below)
#   scripts/bench.sh --topology      # only the Redis Cluster and Sentinel
#                                    # scenarios C1, C2, T1 (about 100 s)
#                                    # and RedLock's R1, R2, R3 (about 90 s)
#   scripts/bench.sh --redlock       # only the RedLock scenarios R1, R2, R3
#   scripts/bench.sh --no-topology   # everything but C1, C2, T1, R1, R2, R3
#   scripts/bench.sh --backends      # only the etcd, PostgreSQL and ZooKeeper
#                                    # backends against their own servers
#                                    # (leader election's figures too),
#                                    # then their peers (about 60 s each)
#   COROLOCK_BENCH_FSYNC=on scripts/bench.sh --backends
#                                    # PostgreSQL and ZooKeeper with fsync on
#   COROLOCK_BENCH_CLUSTER_REPLICAS=1 scripts/bench.sh --topology
#                                    # a replica per cluster primary (default 0)
#
# Writes BUILD_DIR/bench-results.json (its path is printed at the end),
# BUILD_DIR/bench-run/ (raw redis-benchmark output, plot data, the Markdown
# table) and BUILD_DIR/bench-run/plots/*.png, and prints a short table. The
# topology scenarios (after the rest, or alone with --topology) write
# BUILD_DIR/bench-topology-results.json and BUILD_DIR/bench-run/topology/,
# the RedLock ones BUILD_DIR/bench-redlock-results.json and
# BUILD_DIR/bench-run/redlock/, the etcd, PostgreSQL and ZooKeeper ones
# BUILD_DIR/bench-{etcd,pg,zk}-results.json.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
update_docs=0
topology=1  # 0: skip the topology scenarios; 2: run only them; 3: only RedLock's; 4: only the backends'
for arg in "$@"; do
  case $arg in
    --quick) mode=quick ;;
    --smoke) mode=smoke ;;  # seconds: checks this script end to end
    --update-docs) update_docs=1 ;;
    --topology) topology=2 ;;
    --no-topology) topology=0 ;;
    --redlock) topology=3 ;;
    --backends) topology=4 ;;
    *) echo "usage: scripts/bench.sh [--quick] [--update-docs] [--topology | --redlock | --backends | --no-topology]" >&2; exit 64 ;;
  esac
done

started=$SECONDS
build_dir=${BUILD_DIR:-build-release}
jobs=${JOBS:-$(nproc)}
run_dir=$build_dir/bench-run
results=$build_dir/bench-results.json

# Required: the toolchain, redis-server and redis-benchmark (redis-tools).
scripts/setup.sh
# Optional: gnuplot for the plots. Checked with dpkg-query first, so an
# installed machine never touches apt; without it the numbers still come out.
plots=1
if [[ "$(dpkg-query -W -f='${Status}' gnuplot-nox 2>/dev/null)" != "install ok installed" ]] &&
   ! command -v gnuplot >/dev/null; then
  if ! COROLOCK_EXTRA_PACKAGES=gnuplot-nox scripts/setup.sh; then
    echo "bench: gnuplot-nox could not be installed; no plots this time" >&2
    plots=0
  fi
fi

# A Release build of its own, without -Werror: warnings are the test builds'
# business (they build the same sources with it), and a new compiler's new
# warning should not stop a measurement.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCOROLOCK_WERROR=OFF \
  -DCOROLOCK_BUILD_TESTS=OFF -DCOROLOCK_BUILD_EXAMPLES=OFF -DCOROLOCK_BUILD_TOOLS=OFF >/dev/null
# corolock_backend_benches: corolock_bench_etcd, and _pg and _zk when their
# client libraries are installed.
cmake --build "$build_dir" -j "$jobs" --target corolock_bench corolock_backend_benches corolock_bench_topology
bench=$build_dir/bench/corolock_bench
# shellcheck disable=SC2034 # read by lib/topology_bench.sh
bench_topology=$build_dir/bench/corolock_bench_topology
built=$SECONDS

rm -rf "$run_dir"
mkdir -p "$run_dir/plots"

# shellcheck source=lib/throwaway_redis.sh
source scripts/lib/throwaway_redis.sh
# shellcheck source=lib/topology_bench.sh
source scripts/lib/topology_bench.sh
# shellcheck source=lib/redlock_bench.sh
source scripts/lib/redlock_bench.sh
# shellcheck source=lib/throwaway_etcd.sh
source scripts/lib/throwaway_etcd.sh
# shellcheck source=lib/throwaway_pg.sh
source scripts/lib/throwaway_pg.sh
# shellcheck source=lib/throwaway_zk.sh
source scripts/lib/throwaway_zk.sh
# shellcheck source=lib/peers_bench.sh
source scripts/lib/peers_bench.sh
trap 'throwaway_redis_stop; throwaway_etcd_stop; throwaway_pg_stop; throwaway_zk_stop' EXIT

# The etcd, PostgreSQL and ZooKeeper backends (bench/backend_bench.hpp), each
# against a throwaway server of its own on a free loopback port, stopped by
# PID: ratios to raw round trips that the program takes itself, on the same
# server, in the same run, leader election's (ELECT) among them; then the peers' own lock cycle on that server
# (bench/peers/peer_cycles.py: kazoo, the etcd gateway's /v3/lock,
# python-etcd3, a raw pg_advisory_lock cycle) and corolock's cycles/s over
# the best peer's. A backend whose server (or client library, so
# its program) is missing is skipped with a message.
# ELECT on a backend (bench/backend_bench.hpp): its figures against their
# floors from the program's JSON, with the targets of issue 48, printed.
elect_summary() {
  python3 - "$1" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
def f(key):
    v = d.get(key)
    return math.nan if v is None else float(v)
def verdict(v, bound):
    return "n/a" if math.isnan(v) else ("met" if v <= bound else "missed")
if d.get("dead_leader_ends") is None:
    sys.exit(0)  # no ELECT figures (the run failed before them)
ratio = f("resign_over_mutex_handoff_p50")
print(f"ELECT resign-to-leader p50 {f('resign_handoff_p50_us'):.0f} us / mutex handoff p50 "
      f"{f('handoff_p50_us'):.0f} us = {ratio:.2f}x (target <= 1.2x: {verdict(ratio, 1.2)})")
ends = {"lease": f"the lease ({f('failover_lease_ms'):.0f} ms)",
        "session": f"the session timeout ({f('failover_lease_ms'):.0f} ms)",
        "connection": "the kill (the lock ends with the connection)"}[d["dead_leader_ends"]]
rtts = f("failover_beyond_floor_rtts_max")
print(f"ELECT failover after kill -9 (rounds: {f('failovers'):.0f}): p50 {f('failover_after_kill_p50_us') / 1e3:.1f} ms "
      f"after the kill; the worst {f('failover_beyond_floor_max_us') / 1e3:.1f} ms beyond {ends} = "
      f"{rtts:.1f} round trips of {f('elect_rtt_us'):.0f} us (target <= 2: {verdict(rtts, 2)})")
print(f"ELECT observe p50 {f('observe_p50_us'):.0f} us = {f('observe_over_rtt'):.1f} round trips")
PY
}

run_backends() {
  local name label result status=0
  for name in etcd pg zk; do
    case $name in
      etcd) label=etcd ;;
      pg) label=PostgreSQL ;;
      zk) label=ZooKeeper ;;
    esac
    if [[ ! -x $build_dir/bench/corolock_bench_$name ]]; then
      echo "bench: $label: corolock_bench_$name not built (no client library): skipped"
      continue
    fi
    if ! "throwaway_${name}_available"; then
      echo "bench: $label: no server binaries (scripts/setup.sh installs them): skipped"
      continue
    fi
    if ! "throwaway_${name}_start" "$run_dir"; then
      status=1
      continue
    fi
    local url_var=${name^^}_URL pid_var=${name^^}_PID
    echo "bench: $label at ${!url_var} (pid ${!pid_var})"
    result=$build_dir/bench-$name-results.json
    timeout 300 "$build_dir/bench/corolock_bench_$name" --url "${!url_var}" --mode "$mode" \
      --out "$result" | sed "s/^/bench: $name: /" || status=1
    if [[ -s $result ]]; then
      elect_summary "$result" | sed "s/^/bench: $name: /" || status=1
    fi
    # The peers on the same server, right after (scripts/lib/peers_bench.sh).
    peers_run "$name" "$mode" "$build_dir/bench-$name-peers.json" "$result" |
      sed "s/^/bench: $name: /" || status=1
    "throwaway_${name}_stop"
    echo "bench: $label results in $result, the peers' in $build_dir/bench-$name-peers.json"
  done
  return "$status"
}

if ((topology == 4)); then
  status=0
  run_backends || status=$?
  echo "bench: build $((built - started)) s, run $((SECONDS - built)) s"
  exit "$status"
fi
if ((topology >= 2)); then
  status=0
  if ((topology == 2)); then run_topology || status=$?; fi
  run_redlock || status=$?
  echo "bench: build $((built - started)) s, run $((SECONDS - built)) s"
  exit "$status"
fi
throwaway_redis_start "$run_dir"
echo "bench: redis-server on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"

# redis-benchmark has no time limit of its own, only a request count; the
# counts are sized for a few seconds each and `timeout` bounds a stall.
case $mode in
  full)  n_ping=20000 n_c1=20000 n_c50=100000 n_p16=400000 ;;
  quick) n_ping=5000  n_c1=5000  n_c50=25000  n_p16=100000 ;;
  smoke) n_ping=500   n_c1=500   n_c50=2000   n_p16=8000 ;;
esac
# Paired rounds (below): how many, each scenario run's seconds, and the
# request count of the EVALSHA sample beside it (a second or two: about as
# long as the round itself).
case $mode in
  full)  s1_rounds=21 s1_seconds=1   n_pair1=14000 s2_rounds=7 s2_seconds=2   n_pair50=120000 ;;
  quick) s1_rounds=3  s1_seconds=1   n_pair1=10000 s2_rounds=3 s2_seconds=1   n_pair50=60000 ;;
  smoke) s1_rounds=1  s1_seconds=0.3 n_pair1=500   s2_rounds=1 s2_seconds=0.3 n_pair50=2000 ;;
esac

# What client processes run under: nothing, or `taskset -c N` while S1's
# rounds pin them (below).
client_cpu=()

# One redis-benchmark sample: appends "ops_per_s,p50_ms" to NAME.samples,
# from its --csv output, whose columns are: test, rps, avg, min, p50, p95,
# p99, max (all quoted). The raw CSV is kept as NAME.ROUND.csv.
redis_bench() {
  local name=$1 round=$2
  shift 2
  timeout 120 "${client_cpu[@]}" redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" --csv "$@" \
    >"$run_dir/$name.$round.csv"
  awk -F'","' 'NR == 2 { print $2 "," $5 }' "$run_dir/$name.$round.csv" >>"$run_dir/$name.samples"
}

# The median of each column of NAME.samples, as "ops_per_s,p50_ms".
median_sample() {
  local file=$run_dir/$1.samples ops p50
  ops=$(cut -d, -f1 "$file" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  p50=$(cut -d, -f2 "$file" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  echo "$ops,$p50"
}

sha=$("$bench" --port "$REDIS_PORT" --load-acquire-script)
# The lock's acquire script on random names. redis-benchmark replaces each
# __rand_int__ with its own random number, so the two keys of one call name
# different locks: the same work for a single server (two key lookups, one
# INCR, one HSET, one PEXPIRE), but not a valid pair for Redis Cluster. The
# last argument is a holder ("<pid> <host> <label>") of a typical size.
acquire=(EVALSHA "$sha" 2 'corolock:{__rand_int__}' 'corolock:{__rand_int__}:fence' owner 30000 1
         '4242 bench-host corolock_bench')

# Each baseline is the median of three samples taken in rounds (every
# baseline once per round), so that one disturbed sample on a shared machine
# moves no ratio; the samples stay in BUILD_DIR/bench-run/*.samples.
echo "bench: redis-benchmark baselines (median of 3 rounds)"
for round in 1 2 3; do
  redis_bench ping_c1 "$round" -t ping_mbulk -c 1 -n "$n_ping"
  redis_bench evalsha_c1 "$round" -c 1 -n "$n_c1" -r 100000 "${acquire[@]}"
  redis_bench evalsha_c50 "$round" -c 50 -n "$n_c50" -r 100000 "${acquire[@]}"
  redis_bench evalsha_c50_p16 "$round" -c 50 -P 16 -n "$n_p16" -r 100000 "${acquire[@]}"
done
ping_c1=$(median_sample ping_c1)
evalsha_c1=$(median_sample evalsha_c1)
evalsha_c50=$(median_sample evalsha_c50)
evalsha_c50_p16=$(median_sample evalsha_c50_p16)
for name in ping_c1 evalsha_c1 evalsha_c50 evalsha_c50_p16; do
  echo "bench:   $name samples (ops/s,p50 ms): $(paste -sd' ' "$run_dir/$name.samples") -> median ${!name}"
done

# S1 and S2 are ratios of corolock's speed to redis-benchmark's, and this
# machine's speed drifts within seconds: a baseline taken a minute before can
# see a different machine. So each runs in short rounds, each beside an
# EVALSHA sample of its own (1 client for S1, 50 for S2), and its ratio is
# the median of the rounds' ratios (corolock_bench --s1-round/--s2-round;
# every round is kept). The order alternates (sample first in odd rounds,
# the scenario first in even ones), so that a steady drift of the machine's
# speed favours neither side. Every round and every sample starts from an
# empty server, so that neither runs against the other's keys: S2 leaves a
# fence counter per cycle, hundreds of thousands per round, and each
# redis-benchmark sample leaves one lock and one counter per random name
# (30 s lease), and on a server holding 100,000s of them its 1-client rate
# moves by 15% from one sample to the next.
round_args=()
paired_rounds() {
  local scenario=$1 rounds=$2 seconds=$3 clients=$4 requests=$5 flush=$6 round
  echo "bench: ${scenario^^} in $rounds rounds, each beside a $clients-client EVALSHA sample"
  # One round of the scenario (reads scenario, seconds, flush and round).
  run_scenario() {
    ((flush)) && timeout 30 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null
    timeout 60 "${client_cpu[@]}" "$bench" --port "$REDIS_PORT" --mode "$mode" --scenario "$scenario" \
      --seconds "$seconds" >"$run_dir/$scenario.$round.tsv" ||
      echo "bench: ${scenario^^} round $round failed" >&2
  }
  for round in $(seq "$rounds"); do
    ((round % 2 == 0)) && run_scenario
    ((flush)) && timeout 30 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null
    redis_bench "evalsha_c${clients}_pair" "$round" -c "$clients" -n "$requests" -r 100000 "${acquire[@]}"
    ((round % 2 == 1)) && run_scenario
    # This round's own sample (an empty one makes corolock_bench say so).
    local pair_ops
    pair_ops=$(awk -F'","' 'NR == 2 { print $2 }' "$run_dir/evalsha_c${clients}_pair.$round.csv")
    round_args+=("--$scenario-round" "$run_dir/$scenario.$round.tsv,$pair_ops")
  done
}

# S1 is one client in ping-pong with the server, and on a VM its speed
# depends first on where the scheduler puts the two processes. On one CPU
# they take turns and no wake-up crosses CPUs: both redis-benchmark and
# corolock run over twice as fast as on two, and the client's own CPU time
# decides. On two CPUs every round trip pays two cross-CPU wake-ups. Left to
# the scheduler, a run mixes the two, in a share that changes from run to
# run, and so did S1's ratio (0.87 to 1.03 over nine runs). So for S1's
# rounds the server is pinned to one CPU, and each client (the corolock
# round and the redis-benchmark sample alike) to another: a client and its
# server on separate cores, as with any remote server. Both sides of every
# pair run the same way. COROLOCK_BENCH_S1_CPUS=shared puts the clients on
# the server's CPU instead, and `any` leaves placement to the scheduler.
# Allowed CPUs come from this shell's affinity list; with fewer than two,
# placement is left to the scheduler whatever the setting.
allowed_cpus() {
  local list part
  list=$(taskset -pc $$ 2>/dev/null) || return 0
  IFS=, read -ra parts <<<"${list##*: }"
  for part in "${parts[@]}"; do
    part=${part%%:*}  # a stride (0-7:2) is read as the plain range
    if [[ $part == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
  done
}
mapfile -t cpus < <(allowed_cpus)
s1_cpus=${COROLOCK_BENCH_S1_CPUS:-separate}
case $s1_cpus in
  separate | shared | any) ;;
  *) echo "bench: COROLOCK_BENCH_S1_CPUS is separate, shared or any" >&2; exit 64 ;;
esac
((${#cpus[@]} >= 2)) || s1_cpus=any
if [[ $s1_cpus == any ]]; then
  s1_placement="left to the scheduler"
else
  server_cpu=${cpus[0]}
  [[ $s1_cpus == shared ]] && client_cpu=(taskset -c "$server_cpu") || client_cpu=(taskset -c "${cpus[1]}")
  s1_placement="server on CPU $server_cpu, clients on CPU ${client_cpu[2]}"
  taskset -a -p -c "$server_cpu" "$REDIS_PID" >/dev/null
fi
echo "bench: S1 placement: $s1_placement"
paired_rounds s1 "$s1_rounds" "$s1_seconds" 1 "$n_pair1" 1
# Everything else runs where the scheduler puts it.
client_cpu=()
[[ $s1_cpus == any ]] || taskset -a -p -c "$(IFS=,; echo "${cpus[*]}")" "$REDIS_PID" >/dev/null
paired_rounds s2 "$s2_rounds" "$s2_seconds" 50 "$n_pair50" 1

# corolock_bench runs every scenario of bench/scenarios.cpp, F1 (the fair
# mutex's handoff against the mutex's and PING, measured in its own run)
# included.
echo "bench: corolock_bench ($mode)"
status=0
timeout 900 "$bench" --port "$REDIS_PORT" --mode "$mode" --flush "${round_args[@]}" \
  --out "$results" --data-dir "$run_dir" --machine "s1_placement=$s1_placement" \
  --baseline "ping_c1=$ping_c1" --baseline "evalsha_c1=$evalsha_c1" \
  --baseline "evalsha_c50=$evalsha_c50" --baseline "evalsha_c50_p16=$evalsha_c50_p16" ||
  status=$?
throwaway_redis_stop

run_backends || status=1

if ((plots)) && [[ -s $run_dir/handoff_cdf.dat && -s $run_dir/cycles_vs_coroutines.dat ]]; then
  ping_p50_us=$(awk -F, '{ print $2 * 1000 }' <<<"$ping_c1")
  # A cycle is two scripts (acquire, release), so a baseline of N EVALSHA/s
  # is drawn as N/2 cycles/s.
  c1_half=$(awk -F, '{ print $1 / 2 }' <<<"$evalsha_c1")
  c50_half=$(awk -F, '{ print $1 / 2 }' <<<"$evalsha_c50")
  p16_half=$(awk -F, '{ print $1 / 2 }' <<<"$evalsha_c50_p16")
  timeout 60 gnuplot <<EOF
set terminal pngcairo size 900,560 font "DejaVu Sans,11"
set grid
set key bottom right
set output "$run_dir/plots/handoff_cdf.png"
set title "S3: lock handoff latency, 2 processes x 4 coroutines on one lock"
set xlabel "handoff: release called -> next acquire returns (microseconds, log scale)"
set ylabel "fraction of handoffs"
set logscale x
set yrange [0:1.02]
set arrow from $ping_p50_us, graph 0 to $ping_p50_us, graph 1 nohead lc rgb "#999999" dt 2
set label "PING p50" at $ping_p50_us, graph 0.95 offset 0.5,0 tc rgb "#666666"
set arrow from 5*$ping_p50_us, graph 0 to 5*$ping_p50_us, graph 1 nohead lc rgb "#cc3333" dt 2
set label "target: 5 x PING p50" at 5*$ping_p50_us, graph 0.85 offset 0.5,0 tc rgb "#cc3333"
plot "$run_dir/handoff_cdf.dat" using 1:2 with lines lw 2 lc rgb "#1f77b4" title "corolock handoff"

reset
set terminal pngcairo size 900,560 font "DejaVu Sans,11"
set output "$run_dir/plots/cycles_vs_coroutines.png"
set grid
set key below
set title "Uncontended acquire+release cycles on one client, fresh names"
set xlabel "coroutines (log scale)"
set ylabel "cycles per second"
set logscale x 2
set xrange [0.8:320]
set yrange [0:*]
plot "$run_dir/cycles_vs_coroutines.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "corolock", \
     $c1_half with lines dt 2 lc rgb "#2ca02c" title "redis-benchmark EVALSHA, 1 client (/2)", \
     $c50_half with lines dt 2 lc rgb "#ff7f0e" title "redis-benchmark EVALSHA, 50 clients (/2)", \
     $p16_half with lines dt 2 lc rgb "#d62728" title "redis-benchmark EVALSHA, 50 clients, pipeline 16 (/2)"
EOF
  if ((update_docs)); then
    mkdir -p docs/plots
    cp "$run_dir/plots/handoff_cdf.png" "$run_dir/plots/cycles_vs_coroutines.png" docs/plots/
    echo "bench: plots copied to docs/plots/"
  fi
fi

if ((topology)); then
  run_topology || status=1
  run_redlock || status=1
fi

echo "bench: results in $results"
echo "bench: build $((built - started)) s, run $((SECONDS - built)) s"
exit "$status"
