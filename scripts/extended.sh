#!/usr/bin/env bash
# The extended run: everything the gate (.ci/run) leaves out to stay within
# 30 minutes, which must pass too. One step after another, so that nothing
# CPU-bound runs beside a test with a time bound:
#   1. the tests test/labels/extended.txt names (the long fault variants,
#      the soak) and the benchmarks' smoke test, in the Release build
#      (./build, as scripts/test.sh makes it);
#   2. ASan + UBSan over every tier (the gate: the unit and integration
#      tiers only);
#   3. TSan over the threads tier;
#   4. fuzzing every parser's target for FUZZ_SECONDS (default 600, split
#      between the targets) from the kept corpora (the gate replays them in
#      its unit tier);
#   5. a build without the optional backends (ZooKeeper, PostgreSQL) and its
#      unit tier.
# docs/reliability.md, "The gate and the extended run", gives each step's
# cost. About 60 minutes from scratch on a 2-core machine.
#
#   scripts/extended.sh              # every step
#   scripts/extended.sh tests asan   # some of them: tests asan tsan fuzz without-backends
set -euo pipefail
cd "$(dirname "$0")/.."

COROLOCK_EXTRA_PACKAGES="lld clang libclang-rt-dev" scripts/setup.sh

steps=("$@")
((${#steps[@]})) || steps=(tests asan tsan fuzz without-backends)
for step in "${steps[@]}"; do
  echo "extended: $step ($(date -u +%H:%M:%S))"
  case "$step" in
    tests) TESTS=extended bash scripts/test.sh ;;
    asan) ASAN_ALL=1 ASAN_BUILD_DIR=${ASAN_ALL_BUILD_DIR:-build-asan-all} bash scripts/sanitize.sh asan ;;
    tsan) bash scripts/sanitize.sh tsan ;;
    fuzz) bash scripts/fuzz.sh "${FUZZ_SECONDS:-600}" ;;
    without-backends) bash scripts/build_without_backends.sh ;;
    *) echo "usage: $0 [tests|asan|tsan|fuzz|without-backends]..." >&2; exit 2 ;;
  esac
done
echo "extended: passed (${steps[*]})"
