#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool against a throwaway
# redis-server that this script starts on a free loopback port.
#
#   cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: usage run inspect loss exclusion signals (default: all of them).
# Needs redis-server and redis-cli (from PATH, or COROLOCK_REDIS_SERVER and
# COROLOCK_REDIS_CLI); python3 (or COROLOCK_PYTHON) to parse --json output.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: cli_test.sh COROLOCK_BIN [GROUP...]}
shift
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(usage run inspect loss exclusion signals)

redis_cli=${COROLOCK_REDIS_CLI:-redis-cli}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-cli-test.XXXXXX")
passed=0
failed=0
port=""
url=""
started_pids=()

# The shared throwaway server helper: throwaway_redis_start/stop, stop_pid.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/throwaway_redis.sh"

cleanup() {
  local pid
  for pid in "${started_pids[@]}"; do stop_pid "$pid"; done
  throwaway_redis_stop
  rm -rf "$tmp_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- assertions: each one counts, and each one can fail ----

pass() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1"; shift; [ $# -gt 0 ] && printf '       %s\n' "$@"; }

expect_status() {  # DESCRIPTION EXPECTED ACTUAL [context...]
  local what=$1 want=$2 got=$3
  shift 3
  if [ "$got" = "$want" ]; then pass "$what (exit $got)"; else fail "$what: exit $got, want $want" "$@"; fi
}

expect_match() {  # DESCRIPTION EXTENDED_REGEX FILE
  if grep -Eq -- "$2" "$3"; then pass "$1"; else fail "$1: no line matches /$2/" "$(head -c 600 "$3")"; fi
}

expect_no_match() {  # DESCRIPTION EXTENDED_REGEX FILE
  if grep -Eq -- "$2" "$3"; then fail "$1: unexpected /$2/" "$(head -c 600 "$3")"; else pass "$1"; fi
}

expect_true() {  # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

expect_cond() {  # DESCRIPTION SHELL_CONDITION (evaluated here, e.g. '[ "$a" -lt 5 ]')
  if eval "$2"; then pass "$1"; else fail "$1" "condition: $2"; fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Polls COMMAND every 50 ms, at most SECONDS long. Returns its last status.
wait_until() {  # SECONDS COMMAND...
  local tries=$(($1 * 20))
  shift
  for _ in $(seq "$tries"); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}

rcli() { timeout 5 "$redis_cli" -h 127.0.0.1 -p "$port" "$@"; }

lock_exists() { [ "$(rcli EXISTS "corolock:{$1}")" = "1" ]; }
lock_absent() { [ "$(rcli EXISTS "corolock:{$1}")" = "0" ]; }
# At least one process waits on the lock's unlock channel.
has_waiter() { local n; n=$(rcli PUBSUB NUMSUB "corolock:{$1}:unlock" | tail -n 1); [ "${n:-0}" -ge 1 ]; }
no_waiter() { ! has_waiter "$1"; }

# The corolock process under a `timeout` we started. Signals for corolock
# itself go there: signalling `timeout` would also hit the whole process
# group, COMMAND included, and prove nothing about forwarding.
corolock_pid() {  # TIMEOUT_PID
  local pid=""
  for _ in $(seq 40); do
    pid=$(ps -o pid= --ppid "$1" 2>/dev/null | head -n 1 | tr -d ' ')
    [ -n "$pid" ] && break
    sleep 0.05
  done
  echo "$pid"
}

signal_corolock() {  # SIGNAL TIMEOUT_PID
  local pid
  pid=$(corolock_pid "$2")
  if [ -n "$pid" ]; then kill "-$1" "$pid"; else echo "no corolock process under pid $2" >&2; fi
}

# Starts a command in the background, bounded by `timeout`, and remembers it
# for cleanup. The pid lands in $last_pid.
spawn() {  # SECONDS COMMAND...
  local secs=$1
  shift
  timeout "$secs" "$@" &
  last_pid=$!
  started_pids+=("$last_pid")
}

# Waits for a background job, which is bounded by its own timeout. The
# status lands in $last_status.
reap() { wait "$1"; last_status=$?; }

# A loopback port nobody listens on, for the "Redis unreachable" cases.
port_is_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local candidate
  for _ in $(seq 50); do
    candidate=$((20000 + RANDOM % 12000))
    if port_is_free "$candidate"; then echo "$candidate"; return 0; fi
  done
  return 1
}

start_server() {
  throwaway_redis_start "$tmp_dir" || return 1
  port=$REDIS_PORT
  url="redis://127.0.0.1:$port"
}

# Runs corolock, bounded, with stdout/stderr captured in $tmp_dir/out and
# $tmp_dir/err; the status lands in $last_status.
cl() {  # SECONDS ARGS...
  local secs=$1
  shift
  timeout "$secs" "$bin" "$@" >"$tmp_dir/out" 2>"$tmp_dir/err"
  last_status=$?
}

# A child that runs up to SECONDS in short sleeps, so a signal's trap runs
# within 0.1 s and no long sleep outlives it.
long_child() { echo "for i in \$(seq $(($1 * 10))); do sleep 0.1; done"; }

# ---- usage errors and help: no server needed ----

group_usage() {
  cl 5 --help
  expect_status "--help" 0 "$last_status"
  expect_match "--help lists the exit statuses" '^ *75 +run: the lock was not acquired' "$tmp_dir/out"
  expect_match "--help names REDIS_URL" 'REDIS_URL' "$tmp_dir/out"
  cl 5 help run
  expect_status "help run" 0 "$last_status"
  expect_match "help run documents --on-lost" '--on-lost ACTION' "$tmp_dir/out"
  expect_match "help run documents COROLOCK_TOKEN" 'COROLOCK_TOKEN' "$tmp_dir/out"
  cl 5 status --help
  expect_status "status --help" 0 "$last_status"
  expect_match "status --help shows --json" '--json' "$tmp_dir/out"
  cl 5 --version
  expect_status "--version" 0 "$last_status"
  expect_match "--version prints a version" '^corolock [0-9]+\.[0-9]+\.[0-9]+$' "$tmp_dir/out"

  local -a cases=(
    "no arguments|missing COMMAND|"
    "unknown command|unknown command 'frobnicate'|frobnicate"
    "unknown top-level option|unknown option '--frob'|--frob"
    "unknown run option|run: unknown option '--bogus'|run --bogus x -- true"
    "missing NAME|run: missing NAME$|run"
    "missing NAME before --|run: missing NAME before '--'|run -- true"
    "missing --|run: missing '--' and COMMAND after NAME|run x"
    "COMMAND without --|run: unexpected argument 'echo' after NAME: put '--' before COMMAND|run x echo hi"
    "missing COMMAND|run: missing COMMAND after '--'|run x --"
    "bare number duration|run: bad --lease value '5': no unit|run --lease 5 x -- true"
    "garbage duration|run: bad --wait value 'soon': expected a whole number and a unit|run --wait soon x -- true"
    "unknown duration unit|run: bad --wait value '3d': unknown unit 'd'|run --wait 3d x -- true"
    "lease below the minimum|run: --lease must be at least 100ms \\(got 50ms\\)|run --lease 50ms x -- true"
    "bad --on-lost|run: bad --on-lost value 'maybe': expected kill or ignore|run --on-lost maybe x -- true"
    "--wait with --no-wait|run: --wait and --no-wait cannot be used together|run --wait 1s --no-wait x -- true"
    "option without its value|run: option --lease needs a value|run x --lease"
    "malformed URL|run: malformed Redis URL in --url|run --url http://example x -- true"
    "name with a brace|status: bad lock NAME 'a\\{b'|status a{b"
    "status without NAME|status: missing NAME|status"
    "status with two NAMEs|status: unexpected argument 'b'|status a b"
    "flag given a value|status: option --json takes no value|status --json=yes a"
    "break unknown option|break: unknown option '--force'|break --force a"
    "help for an unknown command|no help for unknown command 'nope'|help nope"
  )
  local entry what pattern args
  for entry in "${cases[@]}"; do
    IFS='|' read -r what pattern args <<<"$entry"
    # shellcheck disable=SC2086 # the arguments are split on purpose
    cl 5 $args
    expect_status "usage: $what" 64 "$last_status"
    expect_match "usage: $what: message" "^corolock: $pattern" "$tmp_dir/err"
  done

  # A malformed REDIS_URL is reported as coming from there.
  REDIS_URL="redis://host:notaport" timeout 5 "$bin" status x >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "usage: malformed REDIS_URL" 64 $?
  expect_match "usage: malformed REDIS_URL: message" 'malformed Redis URL in REDIS_URL' "$tmp_dir/err"

  # Unreachable Redis: a free loopback port with nothing listening.
  local dead_port start elapsed
  dead_port=$(free_port)
  start=$(now_ms)
  cl 20 run --url "redis://127.0.0.1:$dead_port" unreachable -- true
  elapsed=$(($(now_ms) - start))
  expect_status "run: Redis unreachable" 69 "$last_status"
  expect_match "run: Redis unreachable: message" "cannot reach Redis at 127.0.0.1:$dead_port" "$tmp_dir/err"
  expect_true "run: Redis unreachable: fails fast (${elapsed} ms < 10000)" [ "$elapsed" -lt 10000 ]
  REDIS_URL="redis://127.0.0.1:$dead_port" timeout 20 "$bin" status x >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "status: Redis unreachable via REDIS_URL" 69 $?
  expect_match "status: unreachable: says where the URL came from" 'from REDIS_URL' "$tmp_dir/err"
  cl 20 break --url "redis://127.0.0.1:$dead_port" x
  expect_status "break: Redis unreachable" 69 "$last_status"
}

# ---- run: statuses, environment, tokens, release ----

group_run() {
  cl 20 run --url "$url" r1 -- true
  expect_status "run: child exits 0" 0 "$last_status"
  cl 20 run --url "$url" r1 -- sh -c 'exit 3'
  expect_status "run: child exits 3" 3 "$last_status"
  cl 20 run --url "$url" r1 -- sh -c 'kill -KILL $$'
  expect_status "run: child killed by SIGKILL" 137 "$last_status"
  cl 20 run --url "$url" r1 -- sh -c 'kill -USR1 $$'
  expect_status "run: child killed by SIGUSR1" $((128 + $(kill -l USR1))) "$last_status"
  cl 20 run --url "$url" r1 -- corolock-test-no-such-command
  expect_status "run: command not found" 127 "$last_status"
  expect_match "run: command not found: message" 'corolock-test-no-such-command: command not found' "$tmp_dir/err"
  : >"$tmp_dir/not-executable"
  chmod 644 "$tmp_dir/not-executable"
  cl 20 run --url "$url" r1 -- "$tmp_dir/not-executable"
  expect_status "run: command not executable" 126 "$last_status"
  expect_true "run: lock released after every run" lock_absent r1

  # The environment, and tokens rising across runs.
  cl 20 run --url "$url" env1 -- sh -c 'echo "token=$COROLOCK_TOKEN name=$COROLOCK_NAME"'
  expect_status "run: env child" 0 "$last_status"
  expect_match "run: COROLOCK_TOKEN and COROLOCK_NAME are set" '^token=[0-9]+ name=env1$' "$tmp_dir/out"
  local first second
  first=$(sed -n 's/^token=\([0-9]*\) .*/\1/p' "$tmp_dir/out")
  COROLOCK_TOKEN=stale cl 20 run --url "$url" env1 -- sh -c 'echo "token=$COROLOCK_TOKEN"'
  second=$(sed -n 's/^token=\([0-9]*\)$/\1/p' "$tmp_dir/out")
  expect_cond "run: COROLOCK_TOKEN replaces an inherited one and rises (${first:-?} < ${second:-?})" \
    '[ -n "$first" ] && [ -n "$second" ] && [ "$second" -gt "$first" ]'

  # Arguments reach the child untouched, including ones that look like options.
  cl 20 run --url "$url" args1 -- printf '%s|' --lease "two words" -- ''
  expect_match "run: arguments after -- are passed verbatim" '^--lease\|two words\|--\|\|$' "$tmp_dir/out"

  # REDIS_URL is the default for --url.
  REDIS_URL=$url timeout 20 "$bin" run envurl -- true >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "run: REDIS_URL used when --url is absent" 0 $?

  # Not acquired: another run holds the lock.
  spawn 60 "$bin" run --url "$url" busy -- sh -c "$(long_child 30)"
  local holder=$last_pid
  if wait_until 10 lock_exists busy; then pass "run: holder acquired"; else fail "run: holder acquired"; fi
  cl 20 run --url "$url" --no-wait busy -- touch "$tmp_dir/ran-no-wait"
  expect_status "run --no-wait on a held lock" 75 "$last_status"
  expect_match "run --no-wait: message" "lock 'busy' is held by another owner" "$tmp_dir/err"
  local start elapsed
  start=$(now_ms)
  cl 20 run --url "$url" --wait 300ms busy -- touch "$tmp_dir/ran-wait"
  elapsed=$(($(now_ms) - start))
  expect_status "run --wait 300ms on a held lock" 75 "$last_status"
  expect_match "run --wait: message" "lock 'busy' not acquired within 300ms" "$tmp_dir/err"
  expect_cond "run --wait 300ms: waited about 300 ms (${elapsed} ms)" '[ "$elapsed" -ge 250 ] && [ "$elapsed" -lt 5000 ]'
  expect_cond "run: COMMAND never ran without the lock" '[ ! -e "$tmp_dir/ran-no-wait" ] && [ ! -e "$tmp_dir/ran-wait" ]'
  kill -TERM "$holder" 2>/dev/null
  reap "$holder"
  expect_true "run: holder released on exit" wait_until 5 lock_absent busy
}

# ---- status and break ----

json_field() {  # FILE FIELD: prints the field of the one JSON object in FILE
  "$python" -c '
import json, sys
with open(sys.argv[1]) as f:
    lines = f.read().splitlines()
assert len(lines) == 1, "expected exactly one line, got %d" % len(lines)
value = json.loads(lines[0])[sys.argv[2]]
print(json.dumps(value))
' "$1" "$2"
}

group_inspect() {
  cl 20 status --url "$url" --json never-used
  expect_status "status --json of an unknown lock" 0 "$last_status"
  expect_true "status --json: one exact object when not held" \
    grep -qx '{"name":"never-used","held":false,"owner":"","ttl_ms":0,"levels":0,"last_token":0}' "$tmp_dir/out"

  spawn 60 "$bin" run --url "$url" --lease 20s held1 -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/held1-token'; $(long_child 30)"
  local holder=$last_pid
  expect_true "status: holder acquired" wait_until 10 test -s "$tmp_dir/held1-token"
  local token
  token=$(cat "$tmp_dir/held1-token" 2>/dev/null)
  cl 20 status --url "$url" --json held1
  expect_status "status --json of a held lock" 0 "$last_status"
  local held owner levels ttl last name
  held=$(json_field "$tmp_dir/out" held 2>&1)
  owner=$(json_field "$tmp_dir/out" owner 2>&1)
  levels=$(json_field "$tmp_dir/out" levels 2>&1)
  ttl=$(json_field "$tmp_dir/out" ttl_ms 2>&1)
  last=$(json_field "$tmp_dir/out" last_token 2>&1)
  name=$(json_field "$tmp_dir/out" name 2>&1)
  expect_true "status --json: held is true ($held)" [ "$held" = "true" ]
  expect_true "status --json: owner is a 32-hex-digit id ($owner)" grep -Eqx '"[0-9a-f]{32}"' <<<"$owner"
  expect_true "status --json: levels is 1 ($levels)" [ "$levels" = "1" ]
  expect_cond "status --json: 0 < ttl_ms <= 20000 ($ttl)" '[ "$ttl" -gt 0 ] 2>/dev/null && [ "$ttl" -le 20000 ]'
  expect_cond "status --json: last_token is the holder's token ($last = ${token:-?})" '[ -n "$token" ] && [ "$last" = "$token" ]'
  expect_true "status --json: name ($name)" [ "$name" = '"held1"' ]

  cl 20 status --url "$url" held1
  expect_status "status (text) of a held lock" 0 "$last_status"
  expect_match "status (text): held" '^held: +yes$' "$tmp_dir/out"
  expect_match "status (text): owner" '^owner: +[0-9a-f]{32}$' "$tmp_dir/out"
  expect_match "status (text): levels" '^levels: +1$' "$tmp_dir/out"
  expect_match "status (text): last token" "^last token: +$token\$" "$tmp_dir/out"

  # JSON escaping of awkward names.
  cl 20 status --url "$url" --json 'we"ird\name'
  expect_true "status --json escapes quotes and backslashes" \
    grep -qF '{"name":"we\"ird\\name","held":false' "$tmp_dir/out"
  if [ "$(json_field "$tmp_dir/out" name 2>&1)" = '"we\"ird\\name"' ]; then pass "status --json: escaped name parses back"; else fail "status --json: escaped name parses back" "$(cat "$tmp_dir/out")"; fi

  # The key holds something else: Redis answers with an error.
  rcli SET "corolock:{not-a-lock}" plain >/dev/null
  cl 20 status --url "$url" not-a-lock
  expect_status "status of a key that is not a lock" 76 "$last_status"

  # Break wakes a waiter: it gets the lock within a second or two, far
  # sooner than the holder's 60 s lease.
  kill -TERM "$holder" 2>/dev/null
  reap "$holder"
  spawn 90 "$bin" run --url "$url" --lease 60s brk -- sh -c "$(long_child 40)"
  holder=$last_pid
  expect_true "break: holder acquired" wait_until 10 lock_exists brk
  spawn 60 "$bin" run --url "$url" --wait 20s brk -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/brk-waiter'"
  local waiter=$last_pid
  if wait_until 10 has_waiter brk; then pass "break: the waiter is waiting"; else fail "break: the waiter is waiting"; fi
  local start elapsed
  start=$(now_ms)
  cl 20 break --url "$url" brk
  expect_status "break a held lock" 0 "$last_status"
  expect_match "break: says what it removed" '^removed lock brk held by [0-9a-f]{32} \(1 level\)$' "$tmp_dir/out"
  reap "$waiter"
  elapsed=$(($(now_ms) - start))
  expect_status "break: the waiter ran" 0 "$last_status"
  expect_true "break: the waiter got the lock quickly (${elapsed} ms < 3000)" [ "$elapsed" -lt 3000 ]
  expect_true "break: the waiter's command ran" test -s "$tmp_dir/brk-waiter"
  cl 20 break --url "$url" brk
  expect_status "break a free lock" 0 "$last_status"
  expect_match "break: not held" '^lock brk was not held$' "$tmp_dir/out"
  # The broken holder learns on release that its lease had ended: exit 70.
  # Signalled itself, not through `timeout`: timeout would also signal its
  # whole process group and could end with 143 of its own.
  signal_corolock TERM "$holder"
  reap "$holder"
  expect_status "break: the broken holder reports the loss" 70 "$last_status"
}

# ---- lease loss ----

group_loss() {
  local start elapsed
  # --on-lost kill (the default): the child gets SIGTERM, run exits 70.
  spawn 60 "$bin" run --url "$url" --lease 1s lost1 -- \
    sh -c "trap 'echo term >\"$tmp_dir/lost1-term\"; exit 0' TERM; $(long_child 30)"
  local runner=$last_pid
  if wait_until 10 lock_exists lost1; then pass "loss: holder acquired"; else fail "loss: holder acquired"; fi
  sleep 0.5
  start=$(now_ms)
  rcli DEL "corolock:{lost1}" >/dev/null
  reap "$runner"
  elapsed=$(($(now_ms) - start))
  expect_status "loss: --on-lost kill exits 70" 70 "$last_status"
  expect_true "loss: the child got SIGTERM" test -s "$tmp_dir/lost1-term"
  expect_true "loss: noticed within a renewal period or two (${elapsed} ms < 3000)" [ "$elapsed" -lt 3000 ]

  # A child that ignores SIGTERM gets SIGKILL after --grace.
  spawn 60 "$bin" run --url "$url" --lease 1s --grace 1s lost2 -- sh -c "trap '' TERM; $(long_child 30)"
  runner=$last_pid
  expect_true "loss: second holder acquired" wait_until 10 lock_exists lost2
  sleep 0.3
  start=$(now_ms)
  rcli DEL "corolock:{lost2}" >/dev/null
  reap "$runner"
  elapsed=$(($(now_ms) - start))
  expect_status "loss: a child ignoring SIGTERM is killed; exit 70" 70 "$last_status"
  expect_cond "loss: SIGKILL after the 1 s grace (${elapsed} ms within 900..5000)" '[ "$elapsed" -ge 900 ] && [ "$elapsed" -lt 5000 ]'

  # --on-lost ignore: a warning, and the child runs to its end.
  spawn 60 "$bin" run --url "$url" --lease 1s --on-lost ignore lost3 -- \
    sh -c "$(long_child 2); echo done >\"$tmp_dir/lost3-done\"; exit 4"
  runner=$last_pid
  expect_true "loss: third holder acquired" wait_until 10 lock_exists lost3
  sleep 0.3
  rcli DEL "corolock:{lost3}" >/dev/null
  wait "$runner" 2>/dev/null
  last_status=$?
  expect_status "loss: --on-lost ignore passes the child's status" 4 "$last_status"
  expect_true "loss: --on-lost ignore let the child finish" test -s "$tmp_dir/lost3-done"
}

# ---- mutual exclusion across processes ----

group_exclusion() {
  local workers=8 rounds=5 w
  rcli SET excl:counter 0 >/dev/null
  : >"$tmp_dir/tokens"
  # Each critical section: a non-atomic read-sleep-write increment, and the
  # token appended to a log (appends happen in critical-section order).
  local body="v=\$($redis_cli -h 127.0.0.1 -p $port GET excl:counter); sleep 0.02; \
$redis_cli -h 127.0.0.1 -p $port SET excl:counter \$((v + 1)) >/dev/null; \
echo \$COROLOCK_TOKEN >>'$tmp_dir/tokens'"
  local -a worker_pids=()
  for w in $(seq "$workers"); do
    (
      for _ in $(seq "$rounds"); do
        timeout 60 "$bin" run --url "$url" --wait 50s excl -- sh -c "$body" || echo "worker $w: exit $?" >>"$tmp_dir/excl-errors"
      done
    ) &
    worker_pids+=($!)
    started_pids+=($!)
  done
  for w in "${worker_pids[@]}"; do wait "$w"; done
  local counter expected=$((workers * rounds))
  counter=$(rcli GET excl:counter)
  expect_true "exclusion: every run succeeded" [ ! -s "$tmp_dir/excl-errors" ]
  expect_true "exclusion: counter is exact ($counter = $expected)" [ "$counter" = "$expected" ]
  expect_true "exclusion: one token per critical section ($(wc -l <"$tmp_dir/tokens") = $expected)" \
    [ "$(wc -l <"$tmp_dir/tokens")" -eq "$expected" ]
  expect_true "exclusion: tokens strictly increase in critical-section order" \
    awk 'NR > 1 && $1 + 0 <= prev + 0 { bad = 1 } { prev = $1 } END { exit bad }' "$tmp_dir/tokens"
}

# ---- signals ----

group_signals() {
  # SIGTERM to corolock reaches the child; the child's status is passed on,
  # and the lock is released afterwards.
  spawn 60 "$bin" run --url "$url" sig1 -- \
    sh -c "trap 'echo term >\"$tmp_dir/sig1-term\"; exit 0' TERM; $(long_child 30)"
  local runner=$last_pid
  expect_true "signals: holder acquired" wait_until 10 lock_exists sig1
  sleep 0.2
  signal_corolock TERM "$runner"
  reap "$runner"
  expect_status "signals: SIGTERM forwarded; run exits with the child's status" 0 "$last_status"
  expect_true "signals: the child's TERM trap ran" test -s "$tmp_dir/sig1-term"
  expect_true "signals: the lock is gone afterwards" lock_absent sig1

  # A child that does not trap SIGTERM dies of it: 128+15.
  spawn 60 "$bin" run --url "$url" sig2 -- sleep 30
  runner=$last_pid
  expect_true "signals: second holder acquired" wait_until 10 lock_exists sig2
  sleep 0.2
  signal_corolock TERM "$runner"
  reap "$runner"
  expect_status "signals: child killed by the forwarded SIGTERM" 143 "$last_status"
  expect_true "signals: released after the child died" lock_absent sig2

  # A signal while waiting cancels the wait: exit 128+15, nothing leaks, and
  # the holder keeps the lock.
  spawn 60 "$bin" run --url "$url" sig3 -- sh -c "$(long_child 30)"
  local holder=$last_pid
  expect_true "signals: third holder acquired" wait_until 10 lock_exists sig3
  cl 20 status --url "$url" --json sig3
  local owner_before
  owner_before=$(json_field "$tmp_dir/out" owner 2>&1)
  spawn 60 "$bin" run --url "$url" sig3 -- touch "$tmp_dir/sig3-waiter-ran"
  local waiter=$last_pid
  expect_true "signals: the waiter is waiting" wait_until 10 has_waiter sig3
  signal_corolock TERM "$waiter"
  reap "$waiter"
  expect_status "signals: SIGTERM while waiting" 143 "$last_status"
  expect_true "signals: the waiter's command never ran" [ ! -e "$tmp_dir/sig3-waiter-ran" ]
  cl 20 status --url "$url" --json sig3
  expect_true "signals: the holder still holds the lock" [ "$(json_field "$tmp_dir/out" owner 2>&1)" = "$owner_before" ]
  expect_true "signals: the cancelled waiter left no subscription" wait_until 5 no_waiter sig3
  kill -TERM "$holder"
  reap "$holder"
  expect_true "signals: holder released" lock_absent sig3
}

# ---- main ----

need_server=0
for g in "${groups[@]}"; do
  case $g in
    usage) ;;
    run | inspect | loss | exclusion | signals) need_server=1 ;;
    *) echo "unknown group '$g'" >&2; exit 2 ;;
  esac
done
if [ "$need_server" = 1 ]; then
  start_server || exit 1
fi
for g in "${groups[@]}"; do
  echo "# $g"
  "group_$g"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
