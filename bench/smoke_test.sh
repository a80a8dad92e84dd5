#!/usr/bin/env bash
# ctest entry: corolock_bench runs every scenario end to end in smoke mode
# (tiny counts) against a throwaway redis-server, and writes valid JSON with
# every scenario ok. It checks that the benchmark still works, never how
# fast anything is: speed is scripts/bench.sh's business.
#
#   bench/smoke_test.sh SOURCE_DIR BENCH_BINARY [ETCD_BENCH [PG_BENCH [ZK_BENCH [TOPOLOGY_BENCH]]]]
#
# Each backend's program given (not "-") whose server is found also runs
# once in smoke mode against a throwaway server of its own (scripts/lib),
# leader election's figures (ELECT) included,
# and so do its peers (scripts/lib/peers_bench.sh), a few cycles each.
# TOPOLOGY_BENCH, when given, runs RedLock's R3 once on three throwaway
# servers: its figures are printed, never judged.
set -euo pipefail
src=$1
bench=$2
bench_etcd=${3:-}
bench_pg=${4:-}
bench_zk=${5:-}
bench_topology=${6:-}
work=$(mktemp -d)
# shellcheck source=../scripts/lib/throwaway_redis.sh
source "$src/scripts/lib/throwaway_redis.sh"
cleanup() {
  throwaway_redis_stop
  rm -rf "$work"
}
trap cleanup EXIT
throwaway_redis_start "$work"

# S1 and S2 as scripts/bench.sh runs them: rounds of the scenario alone,
# each paired with a baseline sample (made-up ones here), imported by the
# orchestrator.
for scenario in s1 s2; do
  for round in 1 2 3; do
    timeout 60 "$bench" --port "$REDIS_PORT" --mode smoke --scenario "$scenario" --seconds 0.2 \
      >"$work/$scenario.$round.tsv"
  done
done

timeout 100 "$bench" --port "$REDIS_PORT" --mode smoke --flush \
  --s1-round "$work/s1.1.tsv,5000" --s1-round "$work/s1.2.tsv,6000" --s1-round "$work/s1.3.tsv,7000" \
  --s2-round "$work/s2.1.tsv,20000" --s2-round "$work/s2.2.tsv,30000" --s2-round "$work/s2.3.tsv,40000" \
  --out "$work/results.json" --data-dir "$work" --machine "s1_placement=server on CPU 0" \
  --baseline ping_c1=10000,0.1 --baseline evalsha_c1=5000,0.2 \
  --baseline evalsha_c50=20000,1 --baseline evalsha_c50_p16=50000,1

# A round that produced nothing, or whose sample is missing, fails S1 with
# a reason; the run itself still completes and writes its JSON.
: >"$work/s1.empty.tsv"
if timeout 30 "$bench" --port "$REDIS_PORT" --mode smoke --only s1 \
  --s1-round "$work/s1.empty.tsv,5000" --s1-round "$work/s1.1.tsv," \
  --out "$work/failed.json" >/dev/null; then
  echo "bench smoke: a failed S1 round did not fail the run" >&2
  exit 1
fi
python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["scenarios"]["s1"]; sys.exit(0 if not s["ok"] and "no result" in s["failure"] else f"bench smoke: failed S1 round reported as {s}")' "$work/failed.json"

python3 - "$work/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = {"s1", "s2", "s3", "s4", "s5", "s6"}
got = d["scenarios"]
missing = want - set(got)
bad = [k for k, v in got.items() if not v.get("ok")]
if missing or bad:
    sys.exit(f"bench smoke: missing {sorted(missing)}, failed {sorted(bad)}")
if not d["targets"]:
    sys.exit("bench smoke: no targets evaluated")
if d["machine"].get("s1_placement") != "server on CPU 0":
    sys.exit(f"bench smoke: --machine not kept: {d['machine']}")
# S1 and S2 came from their three paired rounds: each ratio is the median
# of the rounds' ratios.
for name, sample, ops in (("s1", "evalsha_c1", [5000, 6000, 7000]),
                          ("s2", "evalsha_c50", [20000, 30000, 40000])):
    sc = got[name]
    key = f"round_{sample}_ops_per_s"
    if sc.get("rounds") != 3 or sc.get(key) != ops:
        sys.exit(f"bench smoke: {name} rounds not imported: {sc}")
    ratios = sorted(2 * c / b for c, b in zip(sc["round_cycles_per_s"], sc[key]))
    target = next(t for t in d["targets"]
                  if t["scenario"] == name.upper() and t["what"].startswith("2 x cycles/s"))
    if abs(target["value"] - ratios[1]) > 1e-4 * ratios[1] or sc["cycles_per_s"] <= 0:
        sys.exit(f"bench smoke: {name} ratio {target['value']} is not the median of {ratios}")
# Targets that are correctness, not speed, must hold even in a smoke run.
exact = ("counter == acquisitions", "SUBSCRIBE commands for all waiters", "leases lost while held")
broken = [t["what"] for t in d["targets"] if t["what"].startswith(exact) and not t["met"]]
if broken:
    sys.exit(f"bench smoke: correctness targets broken: {broken}")
print(f"bench smoke: {len(got)} scenarios ok, {len(d['targets'])} targets evaluated")
PY

# shellcheck source=../scripts/lib/throwaway_etcd.sh
source "$src/scripts/lib/throwaway_etcd.sh"
# shellcheck source=../scripts/lib/throwaway_pg.sh
source "$src/scripts/lib/throwaway_pg.sh"
# shellcheck source=../scripts/lib/throwaway_zk.sh
source "$src/scripts/lib/throwaway_zk.sh"
# shellcheck source=../scripts/lib/peers_bench.sh
source "$src/scripts/lib/peers_bench.sh"
trap 'throwaway_etcd_stop; throwaway_pg_stop; throwaway_zk_stop; cleanup' EXIT
for name in etcd pg zk; do
  program_var=bench_$name
  program=${!program_var}
  if [[ -z $program || $program == - ]] || ! "throwaway_${name}_available"; then
    echo "bench smoke: $name skipped (no program or no server)"
    continue
  fi
  "throwaway_${name}_start" "$work"
  url_var=${name^^}_URL
  timeout 60 "$program" --url "${!url_var}" --mode smoke --out "$work/$name.json" >/dev/null
  # Each peer of scripts/bench.sh once (a few cycles) on the same server.
  peers_run "$name" smoke "$work/$name-peers.json" "$work/$name.json" | sed "s/^/bench smoke: $name: /"
  "throwaway_${name}_stop"
  python3 - "$work/$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
need = ("cycle_over_two_rtt", "cycle_over_raw_protocol_cycle", "handoff_over_rtt",
        "fairness_min_over_max",
        # ELECT: resign to new leader, observe, failover after kill -9
        "resign_over_mutex_handoff_p50", "observe_over_rtt", "failover_after_kill_p50_us",
        "failover_beyond_floor_rtts_max")
if not d.get("ok") or any(d.get(k) is None for k in need) or not d.get("handoffs") \
        or not d.get("resign_handoffs") or not d.get("failovers"):
    sys.exit(f"bench smoke: {sys.argv[2]} scenarios incomplete: {d}")
print(f"bench smoke: {sys.argv[2]} scenarios ok ({d['handoffs']:.0f} handoffs, "
      f"{d['resign_handoffs']:.0f} resign handoffs, {d['failovers']:.0f} failover)")
PY
done

# RedLock's R3 (scripts/lib/redlock_bench.sh runs it in rounds): it runs and
# reports both sides and its ratios. The ratio and its WARN are printed for
# the reader; a loaded machine must not fail this entry.
if [[ -n $bench_topology && $bench_topology != - ]]; then
  # shellcheck source=../scripts/lib/redlock_bench.sh
  source "$src/scripts/lib/redlock_bench.sh"
  trap 'redlock_nodes_stop; throwaway_etcd_stop; throwaway_pg_stop; throwaway_zk_stop; cleanup' EXIT
  mkdir -p "$work/redlock"
  redlock_nodes_start "$work/redlock" 3
  timeout 60 "$bench_topology" --redlock "$(redlock_urls 3)" --fanout --seconds 0.3 >"$work/r3.tsv"
  redlock_nodes_stop
  python3 - "$work/r3.tsv" <<'PY'
import math, sys
d = dict(line.rstrip("\n").split("\t") for line in open(sys.argv[1]))
need = ("redlock_cycles", "single_cycles", "redlock_over_single_p50", "sequential_over_single",
        "fanout_warn_above", "fanout_warn")
missing = [k for k in need if k not in d]
if missing or float(d["redlock_cycles"]) < 1 or float(d["single_cycles"]) < 1 \
        or not math.isfinite(float(d["redlock_over_single_p50"])):
    sys.exit(f"bench smoke: R3 incomplete (missing {missing}): {d}")
note = " WARN: over the bound" if d["fanout_warn"] != "0" else ""
print(f"bench smoke: R3 ok on 3 nodes: RedLock / slowest single node {float(d['redlock_over_single_p50']):.2f}"
      f" (sequential would be {d['sequential_over_single']}, bound {d['fanout_warn_above']}){note}")
PY
fi
