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

timeout 100 "$bench" --port "$REDIS_PORT" --mode smoke --flush \
  --out "$work/results.json" --data-dir "$work" \
  --baseline ping_c1=10000,0.1 --baseline evalsha_c1=5000,0.2 \
  --baseline evalsha_c50=20000,1 --baseline evalsha_c50_p16=50000,1

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
# Targets that are correctness, not speed, must hold even in a smoke run.
exact = ("counter == acquisitions", "SUBSCRIBE commands for all waiters", "leases lost while held")
broken = [t["what"] for t in d["targets"] if t["what"].startswith(exact) and not t["met"]]
if broken:
    sys.exit(f"bench smoke: correctness targets broken: {broken}")
print(f"bench smoke: {len(got)} scenarios ok, {len(d['targets'])} targets evaluated")
PY
