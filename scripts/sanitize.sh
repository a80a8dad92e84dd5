#!/usr/bin/env bash
# Runs corolock's tests under the sanitizers:
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer):
#      the unit and integration tiers, the gate's run (ASAN_ALL=1: every
#      tier, and the benchmarks' smoke test, as scripts/extended.sh runs it),
#      in ./build-asan.
#   2. ThreadSanitizer: the threads tier (several threads running one
#      io_context), in ./build-tsan.
# Any report fails the run: the sanitizers are built to abort on the first.
#
#   scripts/sanitize.sh            # both
#   scripts/sanitize.sh asan       # only ASan + UBSan
#   scripts/sanitize.sh tsan       # only TSan
#   scripts/sanitize.sh asan-build # one half of a run: build only, or run
#   scripts/sanitize.sh asan-test  # an existing build's tests only (the same
#                                  # for tsan-build, tsan-test)
#   JOBS=4 scripts/sanitize.sh     # build and ctest parallelism
#   LINKER=bfd scripts/sanitize.sh # another linker (-fuse-ld=; default lld)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tiers.sh

# lld: the linker these builds use (see linker= below).
COROLOCK_EXTRA_PACKAGES="lld ${COROLOCK_EXTRA_PACKAGES:-}" scripts/setup.sh

which=${1:-all}
jobs=${JOBS:-$(nproc)}
# Debug (-O0): a third of the compile time of an optimised build on two
# cores (6 against 16 minutes for ASan), and the tests are bound by I/O.
build_type=${BUILD_TYPE:-Debug}
# What these trees leave out, for compile time alone (one unity source of
# the integration tier under ASan + UBSan, 2026-12-02: 77 s as CMake's
# Debug builds it, 69 s with -g1, 56 s with -g1 and no hardening):
#   - full debug information: -g1 keeps the line tables a sanitizer's
#     stack trace needs (file:line of every frame), without the types and
#     local variables only a debugger reads;
#   - COROLOCK_HARDEN's flags (stack protector, stack clash, CET): the
#     sanitizers check memory far more closely, and the hardening of what
#     users run is checked in the Release build (scripts/check_hardening.sh).
debug_flags=(-DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 -DCOROLOCK_HARDEN=OFF)
# The linker: lld, which links the Debug test executables (hundreds of MB
# of debug information under ASan) in a third of ld.bfd's CPU time
# (docs/reliability.md, "CI time").
linker=${LINKER:-lld}

# Sanitizer run-time options, exported so that the worker processes the
# fault tests start (and the CLI the cli tests run) report the same way.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

asan_dir=${ASAN_BUILD_DIR:-build-asan}
tsan_dir=${TSAN_BUILD_DIR:-build-tsan}

asan_build() {
  local dir=$asan_dir
  echo "sanitize: building for ASan + UBSan in $dir"
  # Without the benchmarks (their smoke test runs in the extended run's
  # Release build, and the library paths they drive run in the tiers below)
  # and without the fault tier's executables, which this run leaves out.
  local all=OFF
  [ "${ASAN_ALL:-0}" = 1 ] && all=ON
  # The gate's tree leaves out UBSan's vptr check (the dynamic type of
  # every member call through a polymorphic pointer): a fifth of its compile
  # time (user CPU of one integration unity source, 2026-12-02: 109 s with
  # it, 88 s without). Use-after-free, which it also catches, ASan reports
  # anyway; the extended run's tree (ASAN_ALL=1) keeps it, over every tier.
  local except=vptr
  [ "${ASAN_ALL:-0}" = 1 ] && except=
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$build_type" -DCOROLOCK_SANITIZE=address,undefined \
    -DCOROLOCK_SANITIZE_EXCEPT="$except" "${debug_flags[@]}" -DCOROLOCK_LINKER="$linker" -DCOROLOCK_WERROR=ON -DCOROLOCK_UNITY_TESTS=ON -DCOROLOCK_PCH=ON -DCOROLOCK_BUILD_BENCH="$all" -DCOROLOCK_BUILD_FAULT_TESTS="$all"
  # Only the programs the gate's run starts (asan_test below): the unit and
  # integration tiers' and the worker.
  local target=corolock_unit_integration_programs
  [ "${ASAN_ALL:-0}" = 1 ] && target=all
  cmake --build "$dir" -j "$jobs" --target "$target"
}

asan_test() {
  local dir=$asan_dir
  # The gate's run: the unit and integration tiers (every backend's and
  # topology's integration tests, which run the library's code paths and
  # the worker processes they start), without the extended run's tests
  # (scripts/lib/tiers.sh). ASAN_ALL=1 (scripts/extended.sh) runs every
  # tier: fault, acl, the conformance suite on every backend, the cli
  # tests and scripts, threads and the demo (no package tier: a sanitizer
  # build registers none).
  local selection=(-L "$asan_gate_labels" -LE "$gate_excluded_labels")
  if [ "${ASAN_ALL:-0}" = 1 ]; then
    # Every tier, in two phases as the gate runs its own: the tests without
    # a time bound first, then those with one (test/labels/timed.txt), so
    # that no timed test shares the CPU with an untimed one (a conformance
    # fleet, a cli script) under the sanitizer's slowdown.
    echo "sanitize: ASan + UBSan, every tier, in $dir: first without a time bound"
    local status=0
    run_ctest "$dir" junit-asan-untimed.xml -j "$jobs" -LE "$timed_labels" || status=$?
    echo "sanitize: ASan + UBSan, every tier, in $dir: the tests with a time bound"
    run_ctest "$dir" junit-asan.xml -j "$jobs" -L "$timed_labels" || status=$?
    return "$status"
  fi
  echo "sanitize: ASan + UBSan, ${selection[*]}, in $dir"
  run_ctest "$dir" junit-asan.xml -j "$jobs" "${selection[@]}"
}
tsan_build() {
  local dir=$tsan_dir
  echo "sanitize: building for TSan in $dir"
  # Only the threads tier: the examples, tools and benchmarks are
  # single-threaded programs ASan already covers, and so is the unit tier
  # (no unit test starts a thread; the one that hands an answer to Asio's
  # system executor is left out under TSan, see docs/reliability.md).
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$build_type" -DCOROLOCK_SANITIZE=thread -DCOROLOCK_WERROR=ON -DCOROLOCK_UNITY_TESTS=ON -DCOROLOCK_PCH=ON "${debug_flags[@]}" \
    -DCOROLOCK_LINKER="$linker" -DCOROLOCK_BUILD_EXAMPLES=OFF -DCOROLOCK_BUILD_TOOLS=OFF -DCOROLOCK_BUILD_BENCH=OFF
  cmake --build "$dir" -j "$jobs" --target corolock_threads_tests
}

tsan_test() {
  local dir=$tsan_dir
  echo "sanitize: TSan, the threads tier, in $dir"
  run_ctest "$dir" junit-tsan.xml -j "$jobs" -L '^threads$'
}

case "$which" in
  all) asan_build; asan_test; tsan_build; tsan_test ;;
  asan) asan_build; asan_test ;;
  tsan) tsan_build; tsan_test ;;
  asan-build) asan_build ;;
  asan-test) asan_test ;;
  tsan-build) tsan_build ;;
  tsan-test) tsan_test ;;
  *) echo "usage: $0 [all|asan|tsan|asan-build|asan-test|tsan-build|tsan-test]" >&2; exit 2 ;;
esac
echo "sanitize: $which passed"
