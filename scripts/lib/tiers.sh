# What the gate runs and what it leaves to the extended run: the one home of
# that split, sourced by scripts/test.sh, scripts/extended.sh,
# scripts/sanitize.sh and scripts/flake-hunt.sh.
#
# Labels come from test/CMakeLists.txt: each tier's (unit, integration,
# fault, ...) and the named ones of test/labels/*.txt (`extended`, `timed`).

# ctest label regex of what the gate leaves out: the tests named in
# test/labels/extended.txt (long fault variants, soak) and the benchmarks'
# smoke test (bench/ measures speed; a test never asserts it).
gate_excluded_labels='^(extended|bench)$'

# CMake options of the Release build each run makes (scripts/test.sh): the
# gate leaves the benchmarks out (bench/ measures speed; the extended run
# builds them and runs their smoke test).
gate_cmake_args=(-DCOROLOCK_BUILD_BENCH=OFF)
extended_cmake_args=(-DCOROLOCK_BUILD_BENCH=ON)

# ctest label regex of the extended run's own tests (the same set).
extended_labels=$gate_excluded_labels

# ctest label regex of the gate's ASan + UBSan run (scripts/sanitize.sh):
# the unit and integration tiers, every backend's and topology's.
asan_gate_labels='^(unit|integration)$'

# ctest label regex of the tests with a time bound: scripts/flake-hunt.sh
# repeats them under load (test/labels/timed.txt names them).
timed_labels='^timed$'

# What the gate's first phase leaves out when a build runs beside it
# (scripts/test.sh, COROLOCK_BESIDE_UNTIMED): the extended run's tests and
# every test with a time bound, which run in the second phase, alone.
gate_untimed_excluded_labels='^(extended|bench|timed)$'

# ctest's output of a failed test in full (ctest cuts it at 300 KB by
# default), into the console and the JUnit file.
ctest_output_size=(--test-output-size-failed 4194304)

# run_ctest BUILD_DIR JUNIT_NAME ARGS...: ctest in BUILD_DIR with ARGS,
# writing BUILD_DIR/JUNIT_NAME; on failure prints each failed test's whole
# output, its fault seed and the command that replays it
# (scripts/lib/report_failures.py), and returns ctest's status.
run_ctest() {
  local dir=$1 junit=$2
  shift 2
  local status=0
  # No test selected is an error (a label that matched nothing would
  # otherwise pass), and no older JUnit file is reported after a failure.
  rm -f "$dir/$junit"
  (cd "$dir" && ctest --output-on-failure --no-tests=error "${ctest_output_size[@]}" \
    --output-junit "$junit" "$@") || status=$?
  if ((status != 0)) && [[ -f "$dir/$junit" ]]; then
    python3 "$(dirname "${BASH_SOURCE[0]}")/report_failures.py" "$dir/$junit" "$dir" || true
  fi
  return "$status"
}
