#!/usr/bin/env bash
# Fuzzes the RESP3 parser with libFuzzer (clang, from Debian's packages) for
# a bounded time, starting from the seed corpus in fuzz/corpus/.
#
#   scripts/fuzz.sh          # 60 seconds
#   scripts/fuzz.sh 600      # ten minutes
#
# The seed corpus is copied to a temporary folder, so a run never changes
# the repository. A crash, a leak, a sanitizer report, a disagreement
# between the ways the target feeds the input (see
# fuzz/resp3_parser_fuzz.cpp) or a single input slower than 10 s fails the
# run; the input is kept as build-fuzz/artifacts/crash-*. Once the bug is
# fixed, copy the input into fuzz/corpus/: every ctest run replays the
# corpus through the same checks (unit test "fuzz: every input kept in
# fuzz/corpus/ ..."), and later fuzzing starts from it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi

# clang and its run-time libraries (libFuzzer ships in libclang-rt).
COROLOCK_EXTRA_PACKAGES="clang libclang-rt-dev ${COROLOCK_EXTRA_PACKAGES:-}" scripts/setup.sh

dir=${FUZZ_BUILD_DIR:-build-fuzz}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCOROLOCK_BUILD_FUZZ=ON \
  -DCOROLOCK_BUILD_TESTS=OFF -DCOROLOCK_BUILD_EXAMPLES=OFF -DCOROLOCK_BUILD_TOOLS=OFF \
  -DCOROLOCK_BUILD_BENCH=OFF -DCOROLOCK_WERROR=ON
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target corolock_resp3_fuzz

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp fuzz/corpus/* "$work/"
mkdir -p "$dir/artifacts"

echo "fuzz: $(ls fuzz/corpus | wc -l) seeds, $seconds s"
status=0
# -timeout: one input may take at most 10 s; -rss_limit_mb bounds memory.
# The wrapping timeout only guards against libFuzzer itself not stopping.
timeout --kill-after=30 $((seconds + 120)) \
  "$dir/fuzz/corolock_resp3_fuzz" "$work" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -dict=fuzz/resp3.dict -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$dir/artifacts/" || status=$?

if ((status != 0)); then
  echo "fuzz: FAILED (exit $status); inputs kept in $dir/artifacts/:" >&2
  ls -l "$dir/artifacts/" >&2 || true
  exit 1
fi
echo "fuzz: passed, corpus grew from $(ls fuzz/corpus | wc -l) to $(ls "$work" | wc -l) inputs"
