#!/usr/bin/env bash
# Builds corolock without its optional backends (ZooKeeper, PostgreSQL), as
# a user without libzookeeper-mt-dev or libpq-dev gets it, and runs the unit
# tier there: every `COROLOCK_HAVE_*` branch of the library, the corolock
# tool, the examples, the benchmarks and the tests must build both ways.
#
#   scripts/build_without_backends.sh       # in ./build-without-backends
#   BUILD_DIR=out scripts/build_without_backends.sh
#
# Debug (-O0) with lld: it checks that the code builds and the unit tier
# passes, in a third of an optimised build's compile time. Warnings fail
# it, as in scripts/test.sh. .ci/run runs it in the background.
set -euo pipefail
cd "$(dirname "$0")/.."

COROLOCK_EXTRA_PACKAGES="lld ${COROLOCK_EXTRA_PACKAGES:-}" scripts/setup.sh

build_dir=${BUILD_DIR:-build-without-backends}
jobs=${JOBS:-$(nproc)}

# The fault tier is left out: it needs the servers, and its programs
# differ from the integration tier's only in what they run.
configured=$(cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Debug -DCOROLOCK_LINKER=lld \
  -DCOROLOCK_WITH_ZOOKEEPER=OFF -DCOROLOCK_WITH_POSTGRESQL=OFF \
  -DCOROLOCK_WERROR=ON -DCOROLOCK_UNITY_TESTS=ON -DCOROLOCK_BUILD_FAULT_TESTS=OFF)
echo "$configured"
# CMakeLists.txt says so for each backend it leaves out.
for lib in libpq libzookeeper_st; do
  if ! grep -q "corolock: $lib not found or disabled" <<<"$configured"; then
    echo "build_without_backends: the build still has the backend that needs $lib" >&2
    exit 1
  fi
done
cmake --build "$build_dir" -j "$jobs"

cd "$build_dir"
ctest --output-on-failure -j "$jobs" -L unit
