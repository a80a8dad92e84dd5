#!/usr/bin/env bash
# Fuzzes corolock's parsers with libFuzzer (clang, from Debian's packages)
# for a bounded time: every target of fuzz/ (fuzz/targets.hpp lists them),
# each starting from its seed corpus in fuzz/corpus/<target>/.
#
#   scripts/fuzz.sh          # 60 seconds
#   scripts/fuzz.sh 600      # ten minutes
#
# SECONDS is split evenly between the targets, at least 5 s each (so a
# short run takes 5 s per target: 65 s for the 13 of a full build). The
# seed corpora are copied to a temporary folder, so a run never changes the
# repository. A crash, a leak, a sanitizer report, a failed property check
# (each target's file says what it checks) or a single input slower than
# 10 s fails the run, after every target has had its turn; the input is
# kept as build-fuzz/artifacts/<target>/crash-*. Once the bug is fixed, copy
# the input into fuzz/corpus/<target>/: every ctest run replays the corpora
# through the same checks (unit tests "fuzz: the kept ... inputs pass the
# <target> target's checks"), and later fuzzing starts from them.
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
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target corolock_fuzz_all

# The targets this build has (ZooKeeper's and PostgreSQL's come with their
# backends' libraries).
read -r -a targets < <(tr ';' ' ' < "$dir/fuzz/targets.txt")
share=$((seconds / ${#targets[@]}))
((share >= 5)) || share=5

# The dictionary of a target's input language, if it has one.
dict_of() {
  case $1 in
    resp3 | sentinel) echo fuzz/resp3.dict ;;
    *_url) echo fuzz/url.dict ;;
    etcd_codec) echo fuzz/json.dict ;;
    *) echo "" ;;
  esac
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fuzz: ${#targets[@]} targets, $share s each"
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "$dir/artifacts/$t"
  cp fuzz/corpus/"$t"/* "$work/$t/"
  seeds=$(ls "fuzz/corpus/$t" | wc -l)
  dict=$(dict_of "$t")
  echo "fuzz: $t: $seeds seeds, $share s"
  status=0
  # -timeout: one input may take at most 10 s; -rss_limit_mb bounds memory.
  # The wrapping timeout only guards against libFuzzer itself not stopping.
  timeout --kill-after=30 $((share + 120)) \
    "$dir/fuzz/corolock_${t}_fuzz" "$work/$t" \
    -max_total_time="$share" -timeout=10 -rss_limit_mb=2048 \
    ${dict:+-dict="$dict"} -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$t/" || status=$?
  if ((status != 0)); then
    echo "fuzz: $t FAILED (exit $status); inputs kept in $dir/artifacts/$t/:" >&2
    ls -l "$dir/artifacts/$t/" >&2 || true
    failed+=("$t")
  else
    echo "fuzz: $t passed, corpus grew from $seeds to $(ls "$work/$t" | wc -l) inputs"
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed"
