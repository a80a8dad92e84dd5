#!/usr/bin/env bash
# ctest entry: corolock_bench runs every scenario end to end in smoke mode
# (tiny counts) against a throwaway redis-server, and writes valid JSON with
# every scenario ok. It checks that the benchmark still works, never how
# fast anything is: speed is scripts/bench.sh's business.
#
#   bench/smoke_test.sh SOURCE_DIR BENCH_BINARY
set -euo pipefail
src=$1
bench=$2
work=$(mktemp -d)
# shellcheck source=../scripts/lib/throwaway_redis.sh
source "$src/scripts/lib/throwaway_redis.sh"
cleanup() {
  throwaway_redis_stop
  rm -rf "$work"
}
trap cleanup EXIT
throwaway_redis_start "$work"

# S1 as scripts/bench.sh runs it: rounds of the scenario alone, each paired
# with a baseline sample (made-up ones here), imported by the orchestrator.
for round in 1 2 3; do
  timeout 60 "$bench" --port "$REDIS_PORT" --mode smoke --scenario s1 --seconds 0.2 \
    >"$work/s1.$round.tsv"
done

timeout 100 "$bench" --port "$REDIS_PORT" --mode smoke --flush \
  --s1-round "$work/s1.1.tsv,5000" --s1-round "$work/s1.2.tsv,6000" --s1-round "$work/s1.3.tsv,7000" \
  --out "$work/results.json" --data-dir "$work" \
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
# S1 came from the three paired rounds: its ratio is their median.
s1 = got["s1"]
ratios = sorted(2 * c / b for c, b in zip(s1["round_cycles_per_s"], s1["round_evalsha_c1_ops_per_s"]))
if s1.get("rounds") != 3 or s1["round_evalsha_c1_ops_per_s"] != [5000, 6000, 7000]:
    sys.exit(f"bench smoke: S1 rounds not imported: {s1}")
s1_target = next(t for t in d["targets"] if t["scenario"] == "S1")
if abs(s1_target["value"] - ratios[1]) > 1e-4 * ratios[1] or s1["cycles_per_s"] <= 0:
    sys.exit(f"bench smoke: S1 ratio {s1_target['value']} is not the median of {ratios}")
# Targets that are correctness, not speed, must hold even in a smoke run.
exact = ("counter == acquisitions", "SUBSCRIBE commands for all waiters", "leases lost while held")
broken = [t["what"] for t in d["targets"] if t["what"].startswith(exact) and not t["met"]]
if broken:
    sys.exit(f"bench smoke: correctness targets broken: {broken}")
print(f"bench smoke: {len(got)} scenarios ok, {len(d['targets'])} targets evaluated")
PY
