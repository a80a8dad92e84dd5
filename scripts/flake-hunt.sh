#!/usr/bin/env bash
# Hunts flaky tests: repeats the tests that have a time bound (the label
# `timed`, which test/labels/timed.txt gives by name) REPEAT times each
# (ctest --repeat until-fail:REPEAT) while a CPU hog keeps one core busy, as
# a loaded CI machine would. A test that fails here fails on a slow machine
# with correct code: make it wait for events instead (docs/reliability.md,
# "Mechanism, not clock"). Needs a build: scripts/test.sh makes ./build.
#
#   scripts/flake-hunt.sh                       # the timed tests, 20 times, with the hog
#   REPEAT=5 scripts/flake-hunt.sh -R network   # another ctest selection
#   HOG=0 scripts/flake-hunt.sh                 # without the hog
#   BUILD_DIR=out scripts/flake-hunt.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tiers.sh

build_dir=${BUILD_DIR:-build}
[[ -f "$build_dir/CTestTestfile.cmake" ]] || {
  echo "flake-hunt: no build in $build_dir (scripts/test.sh makes one)" >&2
  exit 2
}
repeat=${REPEAT:-20}
selection=("$@")
((${#selection[@]})) || selection=(-L "$timed_labels")

hog_pid=
if [[ "${HOG:-1}" == 1 ]]; then
  # One core kept busy, for at most HOG_SECONDS (a bound should the trap
  # not run), ended by PID when the hunt is over.
  timeout "${HOG_SECONDS:-21600}" bash -c 'while :; do :; done' &
  hog_pid=$!
fi
trap '[[ -z "$hog_pid" ]] || kill "$hog_pid" 2>/dev/null || true' EXIT

start=$(date +%s)
status=0
run_ctest "$build_dir" junit-flake-hunt.xml -j "${JOBS:-$(nproc)}" \
  --repeat "until-fail:$repeat" "${selection[@]}" || status=$?
echo "flake-hunt: ${repeat} repetitions of ${selection[*]}, hog ${HOG:-1}," \
  "$(( $(date +%s) - start )) s: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit "$status"
