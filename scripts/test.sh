#!/usr/bin/env bash
# Builds corolock and runs the gate's tests: the unit tier, the integration
# tiers against throwaway servers the tests start themselves on free
# loopback ports (Redis, Sentinel, Cluster, RedLock, etcd, ZooKeeper,
# PostgreSQL), one case of each fault class, the conformance suite on every
# backend, the CLI scripts and the packaging test. What the gate leaves out
# (long fault variants, the soak, the benchmarks' smoke test) runs in
# scripts/extended.sh; scripts/lib/tiers.sh says which. ctest writes
# BUILD_DIR/junit.xml; a failed test's whole output and the seed that
# replays it are printed at the end.
#
#   scripts/test.sh                  # Release build in ./build
#   BUILD_TYPE=Debug scripts/test.sh # another build type
#   BUILD_DIR=out scripts/test.sh    # another build folder
#   scripts/test.sh -R lock          # extra arguments go to ctest
#   TESTS=extended scripts/test.sh   # the extended run's tests instead
#   TESTS=all scripts/test.sh        # both
#
# COROLOCK_BESIDE_UNTIMED=COMMAND (what .ci/run sets, for its time): the
# gate's tests run in two phases. First the tests without a time bound
# (test/labels/timed.txt names the others), with COMMAND (the ASan tree's
# build) at nice 19 beside them, its output in BUILD_DIR/beside.log: it gets
# the CPU those tests leave idle, and yields to them. Then, once COMMAND has
# ended, the tests with a time bound, with nothing beside them. JUnit:
# BUILD_DIR/junit-untimed.xml and BUILD_DIR/junit.xml.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

# Warnings fail this build (COROLOCK_WERROR is OFF for users' builds).
# Release by default: the suite tests the optimisation level users ship
# (g++ at -O3 warns where -O2 does not), and CI needs no second build for
# the hardening check.
# The test programs as unity sources: about half their compile time
# (COROLOCK_UNITY_TESTS in CMakeLists.txt); the common headers precompiled
# (COROLOCK_PCH).
source scripts/lib/tiers.sh
case "${TESTS:-gate}" in
  gate) run_args=("${gate_cmake_args[@]}") ;;
  extended | all) run_args=("${extended_cmake_args[@]}") ;;
  *) echo "test.sh: TESTS is gate, extended or all, not '$TESTS'" >&2; exit 2 ;;
esac
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCOROLOCK_WERROR=ON -DCOROLOCK_UNITY_TESTS=ON -DCOROLOCK_PCH=ON "${run_args[@]}" ${CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$jobs"

# The unit, integration (every backend's, and the Cluster and RedLock
# families') and conformance tests run two at a time: each integration case
# starts its own servers on free ports and mostly waits on them. The fault
# tier, the Sentinel family, the conformance fleets, the cli scripts and the
# other multi-process tests are marked RUN_SERIAL in test/CMakeLists.txt, so
# ctest runs them one by one (under the sanitizers, the integration families
# too).
case "${TESTS:-gate}" in
  gate) selection=(-LE "$gate_excluded_labels"); junit=junit.xml ;;
  extended) selection=(-L "$extended_labels"); junit=junit-extended.xml ;;
  all) selection=(); junit=junit-all.xml ;;
esac
beside=${COROLOCK_BESIDE_UNTIMED:-}
if [[ -z "$beside" || "${TESTS:-gate}" != gate || $# -gt 0 ]]; then
  run_ctest "$build_dir" "$junit" -j "$jobs" "${selection[@]}" "$@"
  exit
fi
status=0
nice -n 19 bash -c "$beside" >"$build_dir/beside.log" 2>&1 &
beside_pid=$!
run_ctest "$build_dir" junit-untimed.xml -j "$jobs" -LE "$gate_untimed_excluded_labels" ||
  status=$?
beside_status=0
wait "$beside_pid" || beside_status=$?
if ((beside_status != 0)); then
  echo "test.sh: '$beside', run beside the tests, failed ($beside_status); its last lines:"
  tail -n 80 "$build_dir/beside.log"
fi
run_ctest "$build_dir" "$junit" -j "$jobs" -L "$timed_labels" -LE "$gate_excluded_labels" ||
  status=$?
((status == 0 && beside_status == 0))
