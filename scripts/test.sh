#!/usr/bin/env bash
# Builds corolock and runs its whole test suite: unit tests, integration
# tests against throwaway redis-servers the tests start themselves on free
# loopback ports, and the packaging test.
#
#   scripts/test.sh                  # Release build in ./build
#   BUILD_TYPE=Debug scripts/test.sh # another build type
#   BUILD_DIR=out scripts/test.sh    # another build folder
#   scripts/test.sh -R lock          # extra arguments go to ctest
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
# (COROLOCK_UNITY_TESTS in CMakeLists.txt).
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCOROLOCK_WERROR=ON -DCOROLOCK_UNITY_TESTS=ON ${CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$jobs"

# The unit, integration and conformance (redis, etcd) tests run in
# parallel: each integration case starts its own server on free ports (in
# a sanitizer build, COROLOCK_SANITIZE, only the unit tests do). The
# fault tier, the Sentinel and Cluster fleets, the cli scripts and the other
# multi-process tests are marked RUN_SERIAL in test/CMakeLists.txt, so ctest
# runs them one by one.
cd "$build_dir"
ctest --output-on-failure -j "$jobs" "$@"
