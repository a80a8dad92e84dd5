#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool against a throwaway
# redis-server that this script starts on a free loopback port.
#
#   cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: usage run multi inspect loss delay refused exclusion signals flock
# job credentials escape tls acl setuid metrics (default: all of them). tls needs openssl.
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
[ ${#groups[@]} -eq 0 ] && groups=(usage run multi inspect loss delay refused exclusion signals flock job credentials escape tls acl setuid metrics)

redis_cli=${COROLOCK_REDIS_CLI:-redis-cli}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-cli-test.XXXXXX")
port=""
url=""

# The shared harness (assertions, spawn/reap, free_port, cl, ...) and the
# throwaway server helper: throwaway_redis_start/stop, stop_pid.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

redis_stopped=0

cleanup() {
  # A test that stopped the server (SIGSTOP) lets it go on before stopping it.
  [ "$redis_stopped" = 1 ] && [ -n "$REDIS_PID" ] && kill -CONT "$REDIS_PID" 2>/dev/null
  stop_started
  throwaway_redis_stop
  rm -rf "$tmp_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rcli() { timeout 5 "$redis_cli" -h 127.0.0.1 -p "$port" "$@"; }

lock_exists() { [ "$(rcli EXISTS "corolock:{$1}")" = "1" ]; }
lock_absent() { [ "$(rcli EXISTS "corolock:{$1}")" = "0" ]; }
# At least one process waits on the lock's unlock channel.
has_waiter() { local n; n=$(rcli PUBSUB NUMSUB "corolock:{$1}:unlock" | tail -n 1); [ "${n:-0}" -ge 1 ]; }
no_waiter() { ! has_waiter "$1"; }
# A fair mutex has N entries in its queue.
fair_queued() { [ "$(rcli ZCARD "corolock:{$1}:queue")" = "$2" ]; }

start_server() {
  throwaway_redis_start "$tmp_dir" || return 1
  port=$REDIS_PORT
  url="redis://127.0.0.1:$port"
}

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
  local opt
  for opt in '-n, --no-wait' '-w, --wait SECONDS' '-E, --conflict-exit-code N' '-q, --quiet' \
    '--no-process-group' '--pass-credentials' '--password-file FILE' 'COROLOCK_PASSWORD' \
    '--metrics-file FILE' '--replicas N' '--fair' '-s, --shared' '-x, --exclusive'; do
    expect_true "help run documents $opt" grep -qF -- "$opt" "$tmp_dir/out"
  done
  cl 5 --help
  for opt in '--tls-ca FILE' '--tls-server-name NAME' '--sentinel-tls-server-name NAME' '--tls-insecure' '77   corolock was installed set-user-ID'; do
    expect_true "--help documents $opt" grep -qF -- "$opt" "$tmp_dir/out"
  done
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
    "missing COMMAND|run: missing COMMAND after NAME$|run x"
    "-c and a COMMAND|run: -c takes the whole command as one argument|run x -c true false"
    "flock's -u|run: -u \\(--unlock\\) is not offered: .*corolock break NAME|run -u x true"
    "flock's -F|run: -F \\(--no-fork\\) is not offered: |run -F x true"
    "unknown option after NAME|run: unknown option '--bogus'|run x --bogus true"
    "missing COMMAND|run: missing COMMAND after '--'|run x --"
    "garbage --lease|run: bad --lease value 'soon': expected a whole number and a unit|run --lease soon x -- true"
    "garbage duration|run: bad --wait value 'soon': expected a whole number and a unit|run --wait soon x -- true"
    "unknown duration unit|run: bad --wait value '3d': unknown unit 'd'|run --wait 3d x -- true"
    "lease below the minimum|run: --lease must be at least 100ms \\(got 50ms\\)|run --lease 50ms x -- true"
    "bad --on-lost|run: bad --on-lost value 'maybe': expected kill or ignore|run --on-lost maybe x -- true"
    "--wait with --no-wait|run: --wait and --no-wait cannot be used together|run --wait 1s --no-wait x -- true"
    "--fair with --replicas|run: --replicas is not offered with --fair|run --fair --replicas 1 x -- true"
    "-s with -x|run: -s \\(--shared\\) and -x \\(--exclusive\\) cannot be used together|run -s -x x -- true"
    "-s with --fair|run: -s \\(--shared\\) and --fair cannot be used together|run -s --fair x -- true"
    "-x with --capacity|run: -x \\(--exclusive\\) and --capacity cannot be used together|run --exclusive --capacity 2 x -- true"
    "-s with --replicas|run: --replicas is not offered with -s \\(--shared\\)|run -sn --replicas 1 x -- true"
    "-s over etcd|-s \\(--shared\\) is not supported on etcd|run --url etcd://127.0.0.1:1 -s x -- true"
    "option without its value|run: option --lease needs a value|run x --lease"
    "unknown scheme|run: unsupported URL scheme 'http' in --url: corolock accepts redis, rediss, .*etcd, etcds, zk, postgresql, postgres \\(SCHEME://...\\)$|run --url http://example x -- true"
    "scheme without //|status: malformed Redis URL in --url: the scheme is followed by ':/' instead of '://'|status --url redis:/127.0.0.1 x"
    "etcd scheme without //|status: malformed etcd URL in --url: the scheme is followed by ':/' instead of '://'|status --url etcd:/127.0.0.1 x"
    "name with a brace|status: bad lock NAME 'a\\{b'|status a{b"
    "status without NAME|status: missing NAME|status"
    "status with two NAMEs|status: unexpected argument 'b'|status a b"
    "flag given a value|status: option --json takes no value|status --json=yes a"
    "break unknown option|break: unknown option '--force'|break --force a"
    "list pattern with a brace|list: bad PATTERN 'a\\{b': lock names never contain|list a{b"
    "list with two PATTERNs|list: unexpected argument 'b' \\(give at most one PATTERN\\)|list a b"
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

  # The flock(1)-style and credential options' own usage errors.
  local -a new_cases=(
    "bad -w value|run: bad -w value 'soon': expected a whole number and a unit|run -w soon x -- true"
    "-w with -n|run: --wait and --no-wait cannot be used together|run -w 1 -n x -- true"
    "bad -E value|run: bad -E value '256': expected an exit status from 0 to 255|run -E 256 x -- true"
    "bad --conflict-exit-code|run: bad --conflict-exit-code value 'x': expected an exit status|run --conflict-exit-code x y -- true"
    "unreadable --password-file|status: cannot read --password-file '/nonexistent/corolock-pw'|status --password-file /nonexistent/corolock-pw x"
    "--tls-cert without --tls-key|status: --tls-cert and --tls-key go together|status --tls-cert /dev/null x"
    "unreadable --tls-ca|status: cannot read --tls-ca '/nonexistent/ca.crt'|status --tls-ca /nonexistent/ca.crt x"
  )
  for entry in "${new_cases[@]}"; do
    IFS='|' read -r what pattern args <<<"$entry"
    # shellcheck disable=SC2086 # the arguments are split on purpose
    cl 5 $args
    expect_status "usage: $what" 64 "$last_status"
    expect_match "usage: $what: message" "^corolock: $pattern" "$tmp_dir/err"
  done
  : >"$tmp_dir/empty-pw"
  cl 5 status --password-file "$tmp_dir/empty-pw" x
  expect_status "usage: empty --password-file" 64 "$last_status"
  expect_match "usage: empty --password-file: message" "is empty \\(the password is its first line\\)" "$tmp_dir/err"

  # A user part that is probably a password is never echoed.
  cl 5 run --url "redis://s3cretpw@127.0.0.1:1" x -- true
  expect_status "usage: URL with a user and no password" 64 "$last_status"
  expect_match "usage: URL with a user and no password: message" "malformed Redis URL in --url" "$tmp_dir/err"
  expect_no_match "usage: URL with a user and no password: not echoed" 's3cretpw' "$tmp_dir/err"
  REDIS_URL="redis://s3cretpw@127.0.0.1:1" timeout 5 "$bin" status x >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "usage: REDIS_URL with a user and no password" 64 $?
  expect_no_match "usage: REDIS_URL with a user and no password: not echoed" 's3cretpw' "$tmp_dir/err"

  # Names in messages are escaped: no raw control byte reaches the terminal,
  # and a newline cannot start a line of its own.
  cl 5 run $'\e[2J\e[H{x}' -- true
  expect_status "usage: a bad name holding an escape sequence" 64 "$last_status"
  expect_no_match "usage: the escape sequence is not printed raw" $'\e' "$tmp_dir/err"
  expect_true "usage: the escape sequence is shown escaped" grep -qF "bad lock NAME '\\x1b[2J\\x1b[H{x}'" "$tmp_dir/err"
  cl 5 run $'{x}\ncorolock: released lock cleanly' -- true
  expect_no_match "usage: a newline in a name forges no line" '^corolock: released lock cleanly' "$tmp_dir/err"
  expect_true "usage: the newline is shown as \\n" grep -qF "'{x}\\ncorolock: released lock cleanly'" "$tmp_dir/err"

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

  # --fair takes a fair mutex; a plain run on the same name is refused while
  # it holds (kind is a field the mutex never writes).
  cl 20 run --url "$url" --fair fair1 -- sh -c 'echo "token=$COROLOCK_TOKEN"'
  expect_status "run --fair: child exits 0" 0 "$last_status"
  expect_match "run --fair: the child gets a token" '^token=[0-9]+$' "$tmp_dir/out"
  expect_true "run --fair: lock released" lock_absent fair1

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

# ---- several NAMEs: a multi_lock ----

group_multi() {
  # Canonical order, duplicates merged, numbered variables; the single-NAME
  # ones and inherited numbered ones removed.
  COROLOCK_NAME=stale COROLOCK_TOKEN=stale COROLOCK_NAME_9=stale COROLOCK_TOKEN_3=stale \
    cl 20 run --url "$url" mc ma mb ma -- sh -c 'env | grep "^COROLOCK_" | sort'
  expect_status "multi: child exits 0" 0 "$last_status"
  expect_match "multi: COROLOCK_LOCKS counts distinct names" '^COROLOCK_LOCKS=3$' "$tmp_dir/out"
  expect_cond "multi: names in canonical order" \
    '[ "$(sed -n "s/^COROLOCK_NAME_\([0-9]*\)=\(.*\)/\1\2/p" "$tmp_dir/out" | tr "\n" " ")" = "1ma 2mb 3mc " ]'
  expect_cond "multi: a token per name" '[ "$(grep -cE "^COROLOCK_TOKEN_[123]=[0-9]+\$" "$tmp_dir/out")" = 3 ]'
  expect_no_match "multi: no single-NAME or stale variables" '^COROLOCK_(NAME|TOKEN)=|=stale$|^COROLOCK_NAME_9=' "$tmp_dir/out"
  expect_true "multi: every name released" lock_absent ma
  expect_true "multi: every name released (mc)" lock_absent mc
  # The tokens are the names' own: each rises with the next single run.
  local before after
  before=$(sed -n 's/^COROLOCK_TOKEN_2=//p' "$tmp_dir/out")
  cl 20 run --url "$url" mb -- sh -c 'echo "$COROLOCK_TOKEN"; echo "${COROLOCK_LOCKS-unset}"'
  after=$(head -n 1 "$tmp_dir/out")
  expect_cond "multi: token of mb rises (${before:-?} < ${after:-?})" '[ -n "$before" ] && [ -n "$after" ] && [ "$after" -gt "$before" ]'
  expect_match "multi: one NAME gets no COROLOCK_LOCKS" '^unset$' "$tmp_dir/out"

  # All or none: one name held elsewhere, none is taken and COMMAND waits.
  spawn 60 "$bin" run --url "$url" mb -- sh -c "$(long_child 30)"
  local holder=$last_pid
  if wait_until 10 lock_exists mb; then pass "multi: mb held by another run"; else fail "multi: mb held by another run"; fi
  cl 20 run --url "$url" -n ma mb mc -- touch "$tmp_dir/ran-multi"
  expect_status "multi: --no-wait with one name held" 75 "$last_status"
  expect_match "multi: the message names the locks" "corolock: locks 'ma', 'mb', 'mc' are not all free \(--no-wait\)" "$tmp_dir/err"
  expect_true "multi: COMMAND did not run" [ ! -e "$tmp_dir/ran-multi" ]
  expect_true "multi: ma was given back" lock_absent ma
  expect_true "multi: mc was never taken" lock_absent mc
  spawn 30 "$bin" run --url "$url" --wait 20 mc mb ma -- touch "$tmp_dir/ran-multi-wait"
  local waiter=$last_pid
  # It took ma and waits for mb (subscribed to mb's unlock channel).
  expect_true "multi: the waiter waits for mb" wait_until 10 has_waiter mb
  expect_true "multi: the waiter has not run while mb is held" [ ! -e "$tmp_dir/ran-multi-wait" ]
  kill -TERM "$holder" 2>/dev/null
  reap "$holder"
  reap "$waiter"
  expect_status "multi: the waiter runs once mb is free" 0 "$last_status"
  expect_true "multi: the waiter's COMMAND ran" [ -e "$tmp_dir/ran-multi-wait" ]
  expect_true "multi: all released after the waiter" lock_absent mb

  # A plain lock each: the other kinds are refused.
  local flag
  for flag in --fair "--capacity 2" -s -x; do
    # shellcheck disable=SC2086
    cl 10 run --url "$url" $flag ma mb -- true
    expect_status "multi: $flag with several NAMEs" 64 "$last_status"
    expect_match "multi: $flag: message" "run: several NAMEs take a plain lock each \(all or none\); not with" "$tmp_dir/err"
  done
  cl 10 run --url "$url" ma 'm{b}' -- true
  expect_status "multi: a bad second NAME" 64 "$last_status"
}

# ---- status and break ----

# A waiter started before a break at START (ms): it must exit 0 within 3 s
# of the break, having run its command (FILE is not empty).
expect_waiter_after_break() {
  local label=$1 pid=$2 start=$3 file=$4 elapsed
  reap "$pid"
  elapsed=$(($(now_ms) - start))
  expect_status "$label: the waiter ran" 0 "$last_status"
  expect_true "$label: the waiter got in quickly (${elapsed} ms < 3000)" [ "$elapsed" -lt 3000 ]
  expect_true "$label: the waiter's command ran" test -s "$file"
}

group_inspect() {
  cl 20 status --url "$url" --json never-used
  expect_status "status --json of an unknown lock: free, exit 1 (as test(1))" 1 "$last_status"
  expect_true "status --json: one exact object when not held" \
    grep -qxF '{"name":"never-used","held":false,"owner":"","ttl_ms":0,"levels":0,"last_token":0,"host":null,"pid":null,"label":null,"since":null,"held_for_ms":null,"kind":"mutex","queued":0,"capacity":0,"permits_in_use":0,"holder_count":0,"lock_delay_ms":0,"in_lock_delay":false,"delayed_for_ms":0,"delayed_until":null,"holders":[]}' "$tmp_dir/out"

  # The holder keeps the lock until the test says go (bounded to 55 s),
  # however slowly the checks in between run (a loaded machine, ASan).
  local held1_go=$tmp_dir/held1-go
  spawn 60 "$bin" run --url "$url" --lease 20s held1 -- \
    sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/held1-token'; for i in \$(seq 550); do [ -e '$held1_go' ] && break; sleep 0.1; done" --api-key=s3cret-arg
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
  # Who holds it: this host, the corolock process, its COMMAND, since when.
  local host pid label since held_for run_pid
  run_pid=$(corolock_pid "$holder")
  host=$(json_field "$tmp_dir/out" host 2>&1)
  pid=$(json_field "$tmp_dir/out" pid 2>&1)
  label=$(json_field "$tmp_dir/out" label 2>&1)
  since=$(json_field "$tmp_dir/out" since 2>&1)
  held_for=$(json_field "$tmp_dir/out" held_for_ms 2>&1)
  expect_true "status --json: host is this host ($host)" [ "$host" = "\"$(hostname)\"" ]
  expect_true "status --json: pid is corolock run's ($pid = ${run_pid:-?})" [ -n "$run_pid" ] && [ "$pid" = "$run_pid" ]
  # The label is COMMAND's program name: its arguments (here a secret) are
  # not published to whoever may read the lock.
  expect_true "status --json: label is the program's name ($label)" [ "$label" = '"sh"' ]
  expect_no_match "status --json: no argument of COMMAND is published" 's3cret-arg' "$tmp_dir/out"
  expect_true "status --json: since is an RFC 3339 UTC time ($since)" \
    grep -Eqx '"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"' <<<"$since"
  expect_cond "status --json: held_for_ms is a count of ms ($held_for)" '[ "$held_for" -ge 0 ] 2>/dev/null'
  check_cases "over redis" held1 "$token"

  cl 20 status --url "$url" held1
  expect_status "status (text) of a held lock" 0 "$last_status"
  expect_match "status (text): held" '^held: +yes$' "$tmp_dir/out"
  expect_match "status (text): owner" '^owner: +[0-9a-f]{32}$' "$tmp_dir/out"
  expect_match "status (text): levels" '^levels: +1$' "$tmp_dir/out"
  expect_match "status (text): last token" "^last token: +$token\$" "$tmp_dir/out"
  expect_match "status (text): holder" "^holder: +$(hostname):$run_pid\$" "$tmp_dir/out"
  expect_match "status (text): label" '^label: +sh$' "$tmp_dir/out"
  expect_match "status (text): since and held for" \
    '^since: +[0-9-]{10}T[0-9:]{8}\.[0-9]{3}Z \(held for [0-9]+\.[0-9]{3}s\)$' "$tmp_dir/out"

  # list: the held lock with its holder; free locks and other keys are not shown.
  rcli SET "corolock:{held1}x:fence" 3 >/dev/null
  rcli HSET "other-hash" owner someone >/dev/null
  cl 20 list --url "$url"
  expect_status "list (text)" 0 "$last_status"
  expect_true "list (text): a header and one lock" [ "$(wc -l <"$tmp_dir/out")" -eq 2 ]
  list_tabs "$tmp_dir/out" >"$tmp_dir/list.tsv"
  expect_match "list (text): the header" $'^NAME\tKIND\tSTATE\tHOLDER\tSINCE\tHELD\\(s\\)\tTTL\\(s\\)\tDELAY\\(s\\)\tWAITERS\tPERMITS\tLABEL$' "$tmp_dir/list.tsv"
  expect_list_columns_documented "list (text)" "$tmp_dir/out"
  # One unit a column: seconds with milliseconds for HELD(s) and TTL(s).
  expect_match "list (text): the lock and its holder" \
    $'^held1\tmutex\theld\t'"$(hostname):$run_pid"$'\t[0-9TZ:.-]+\t[0-9]+\\.[0-9]{3}\t[0-9]+\\.[0-9]{3}\t-\t-\t-\tsh$' "$tmp_dir/list.tsv"
  expect_true "list (text): the columns are aligned (HOLDER starts at one offset)" \
    [ "$(head -n 1 "$tmp_dir/out" | grep -bo HOLDER | cut -d: -f1)" = "$(sed -n 2p "$tmp_dir/out" | grep -bo "$(hostname):$run_pid" | cut -d: -f1)" ]
  cl 20 list --url "$url" --json
  expect_status "list --json" 0 "$last_status"
  local listed
  listed=$("$python" -c '
import json, sys
doc = json.load(open(sys.argv[1]))
print(doc["truncated"], ",".join(l["name"] + "@" + str(l["pid"]) for l in doc["locks"]))
' "$tmp_dir/out" 2>&1)
  expect_true "list --json: held1 and its pid ($listed)" [ "$listed" = "False held1@$run_pid" ]
  cl 20 list --url "$url" 'held*'
  expect_status "list PATTERN" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "list PATTERN: the match" '^held1 ' "$tmp_dir/out"
  expect_true "list PATTERN: a header and one lock" [ "$(wc -l <"$tmp_dir/out")" -eq 2 ]
  cl 20 list --url "$url" --json 'nomatch*'
  expect_true "list PATTERN: no match" grep -qx '{"locks":\[\],"truncated":false}' "$tmp_dir/out"

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
  touch "$held1_go"
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
  expect_waiter_after_break "break" "$waiter" "$start" "$tmp_dir/brk-waiter"
  cl 20 break --url "$url" brk
  expect_status "break a free lock" 0 "$last_status"
  expect_match "break: not held" '^lock brk was not held$' "$tmp_dir/out"
  # The broken holder learns on release that its lease had ended: exit 70.
  # Signalled itself, not through `timeout`: timeout would also signal its
  # whole process group and could end with 143 of its own.
  signal_corolock TERM "$holder"
  reap "$holder"
  expect_status "break: the broken holder reports the loss" 70 "$last_status"

  inspect_kinds
}

# status, list and break of a semaphore and of a fair mutex with a waiter.
inspect_kinds() {
  spawn 90 "$bin" run --url "$url" --capacity 3 --permits 2 --lease 60s ksem -- \
    sh -c "touch '$tmp_dir/ksem-in'; $(long_child 40)"
  local ksem=$last_pid
  expect_true "kinds: the semaphore's holder acquired" wait_until 10 test -e "$tmp_dir/ksem-in"
  cl 20 status --url "$url" ksem
  expect_status "kinds: status of a semaphore" 0 "$last_status"
  expect_match "kinds: semaphore: kind" '^kind: +semaphore$' "$tmp_dir/out"
  expect_match "kinds: semaphore: held" '^held: +yes$' "$tmp_dir/out"
  expect_match "kinds: semaphore: capacity" '^capacity: +3$' "$tmp_dir/out"
  expect_match "kinds: semaphore: permits" '^permits: +2 in use$' "$tmp_dir/out"
  expect_match "kinds: semaphore: holders" '^holders: +1$' "$tmp_dir/out"
  expect_match "kinds: semaphore: the holder's line" \
    "^  [0-9a-f]{32}: 2 permits, 1 level, ttl [0-9]+ ms; $(hostname):$(corolock_pid "$ksem") since " "$tmp_dir/out"
  cl 20 status --url "$url" --json ksem
  local fields
  fields=$("$python" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["kind"], d["held"], d["capacity"], d["permits_in_use"], d["holder_count"],
      len(d["holders"]), d["holders"][0]["permits"], d["holders"][0]["pid"])
' "$tmp_dir/out" 2>&1)
  expect_true "kinds: semaphore: status --json ($fields)" \
    [ "$fields" = "semaphore True 3 2 1 1 2 $(corolock_pid "$ksem")" ]

  spawn 90 "$bin" run --url "$url" --fair --lease 60s kfair -- sh -c "$(long_child 40)"
  local kfair=$last_pid
  expect_true "kinds: the fair mutex's holder acquired" wait_until 10 lock_exists kfair
  spawn 60 "$bin" run --url "$url" --fair --wait 20s kfair -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/kfair-waiter'"
  local fwaiter=$last_pid
  expect_true "kinds: the fair waiter is queued" \
    wait_until 10 fair_queued kfair 1
  cl 20 status --url "$url" kfair
  expect_status "kinds: status of a fair mutex" 0 "$last_status"
  expect_match "kinds: fair: kind" '^kind: +fair$' "$tmp_dir/out"
  expect_match "kinds: fair: owner" '^owner: +[0-9a-f]{32}$' "$tmp_dir/out"
  expect_match "kinds: fair: queued" '^queued: +1$' "$tmp_dir/out"
  cl 20 status --url "$url" --json kfair
  fields=$("$python" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["kind"], d["held"], d["levels"], d["queued"], d["holder_count"])
' "$tmp_dir/out" 2>&1)
  expect_true "kinds: fair: status --json ($fields)" [ "$fields" = "fair True 1 1 1" ]

  cl 20 list --url "$url" 'k*'
  expect_status "kinds: list" 0 "$last_status"
  expect_true "kinds: list: a header and two locks, no queue keys" [ "$(wc -l <"$tmp_dir/out")" -eq 3 ]
  list_tabs "$tmp_dir/out" >"$tmp_dir/list.tsv"
  expect_match "kinds: list: the fair mutex, 1 waiting" $'^kfair\tfair\theld\t.*\t1\t-\t[^\t]+$' "$tmp_dir/list.tsv"
  expect_match "kinds: list: the semaphore, 2 of 3 permits" $'^ksem\tsemaphore\theld\t.*\t-\t2/3\t[^\t]+$' "$tmp_dir/list.tsv"

  local start elapsed
  start=$(now_ms)
  cl 20 break --url "$url" kfair
  expect_status "kinds: break a fair mutex" 0 "$last_status"
  expect_match "kinds: break fair: what it removed" '^removed lock kfair held by [0-9a-f]{32} \(1 level\)$' "$tmp_dir/out"
  expect_match "kinds: break fair: the queue stays" '^1 queued waiters keep their places' "$tmp_dir/out"
  expect_waiter_after_break "kinds: break fair" "$fwaiter" "$start" "$tmp_dir/kfair-waiter"

  spawn 60 "$bin" run --url "$url" --capacity 3 --permits 2 --wait 20s ksem -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/ksem-waiter'"
  local swaiter=$last_pid
  expect_true "kinds: the semaphore's waiter is waiting" wait_until 10 has_waiter ksem
  start=$(now_ms)
  cl 20 break --url "$url" ksem
  expect_status "kinds: break a semaphore" 0 "$last_status"
  expect_match "kinds: break semaphore: what it removed" \
    '^removed semaphore ksem: 2 permits held by 1 owner \(1 level\)$' "$tmp_dir/out"
  expect_waiter_after_break "kinds: break semaphore" "$swaiter" "$start" "$tmp_dir/ksem-waiter"
  for p in "$kfair" "$ksem"; do
    signal_corolock TERM "$p"
    reap "$p"
    expect_status "kinds: a broken holder reports the loss" 70 "$last_status"
  done
}

# ---- lease loss ----

group_loss() {
  local start elapsed
  # --on-lost kill (the default): the child gets SIGTERM, run exits 70.
  spawn 60 "$bin" run --url "$url" --lease 1s lost1 -- \
    sh -c "trap 'echo term >\"$tmp_dir/lost1-term\"; exit 0' TERM; : >\"$tmp_dir/lost1-ready\"; $(long_child 30)"
  local runner=$last_pid
  if wait_until 10 lock_exists lost1; then pass "loss: holder acquired"; else fail "loss: holder acquired"; fi
  # The child's trap is set (it says so after setting it).
  expect_true "loss: the child set its trap" wait_until 10 test -e "$tmp_dir/lost1-ready"
  start=$(now_ms)
  rcli DEL "corolock:{lost1}" >/dev/null
  reap "$runner"
  elapsed=$(($(now_ms) - start))
  expect_status "loss: --on-lost kill exits 70" 70 "$last_status"
  expect_true "loss: the child got SIGTERM" test -s "$tmp_dir/lost1-term"
  expect_true "loss: noticed within a renewal period or two (${elapsed} ms < 3000)" [ "$elapsed" -lt 3000 ]

  # A child that ignores SIGTERM gets SIGKILL after --grace.
  spawn 60 "$bin" run --url "$url" --lease 1s --grace 1s lost2 -- \
    sh -c "trap '' TERM; : >\"$tmp_dir/lost2-ready\"; $(long_child 30)"
  runner=$last_pid
  expect_true "loss: second holder acquired" wait_until 10 lock_exists lost2
  expect_true "loss: the second child set its trap" wait_until 10 test -e "$tmp_dir/lost2-ready"
  start=$(now_ms)
  rcli DEL "corolock:{lost2}" >/dev/null
  reap "$runner"
  elapsed=$(($(now_ms) - start))
  expect_status "loss: a child ignoring SIGTERM is killed; exit 70" 70 "$last_status"
  expect_cond "loss: SIGKILL after the 1 s grace (${elapsed} ms within 900..5000)" '[ "$elapsed" -ge 900 ] && [ "$elapsed" -lt 5000 ]'

  # --on-lost ignore: a warning, and the child runs to its end.
  spawn 60 "$bin" run --url "$url" --lease 1s --on-lost ignore lost3 -- \
    sh -c ": >\"$tmp_dir/lost3-ready\"; $(long_child 2); echo done >\"$tmp_dir/lost3-done\"; exit 4"
  runner=$last_pid
  expect_true "loss: third holder acquired" wait_until 10 lock_exists lost3
  # The loss comes while the child runs (it says so when it starts).
  expect_true "loss: the third child started" wait_until 10 test -e "$tmp_dir/lost3-ready"
  rcli DEL "corolock:{lost3}" >/dev/null
  wait "$runner" 2>/dev/null
  last_status=$?
  expect_status "loss: --on-lost ignore passes the child's status" 4 "$last_status"
  expect_true "loss: --on-lost ignore let the child finish" test -s "$tmp_dir/lost3-done"
}

# ---- lock-delay in status and list (issue 47) ----

in_lock_delay() {  # NAME
  timeout 10 "$bin" status --url "$url" --json "$1" 2>/dev/null | grep -q '"in_lock_delay":true'
}

group_delay() {
  # A free name shows no lock-delay.
  cl 20 status --url "$url" ld-free
  expect_status "lock-delay: a free name is free (1)" 1 "$last_status"
  expect_no_match "lock-delay: a free name shows none" 'lock-delay' "$tmp_dir/out"

  # A holder killed with kill -9 (no release) leaves its name in lock-delay
  # once its lease has run out; the delay (a minute) outlasts every check.
  spawn 60 "$bin" run --url "$url" --lease 1s --lock-delay 1m ld1 -- sh -c "$(long_child 30)"
  local runner=$last_pid
  expect_true "lock-delay: the holder acquired" wait_until 10 lock_exists ld1
  cl 20 status --url "$url" ld1
  expect_match "lock-delay: a live holder shows the delay it asked for" \
    '^lock-delay: 60\.000 s \(if the holder ends without a release\)$' "$tmp_dir/out"
  expect_match "lock-delay: a live holder is held" '^held: +yes$' "$tmp_dir/out"
  signal_corolock KILL "$runner"
  reap "$runner"
  expect_true "lock-delay: the name enters lock-delay after the lease" wait_until 15 in_lock_delay ld1
  cl 20 status --url "$url" ld1
  expect_status "lock-delay: status exits 0 (not free to take)" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "lock-delay: status says so" '^held: +in lock-delay ' "$tmp_dir/out"
  expect_match "lock-delay: status says until when and how much longer" \
    '^lock-delay: 60\.000 s, until 20[0-9-]+T[0-9:.]+Z \(([1-5]?[0-9])\.[0-9]{3} s more; nobody can take it before\)$' "$tmp_dir/out"
  cl 20 status --url "$url" --json ld1
  expect_status "lock-delay: status --json exits 0" 0 "$last_status"
  expect_true "lock-delay: status --json fields" [ "$(json_eval "$tmp_dir/out" \
    "j['in_lock_delay'] is True and j['lock_delay_ms'] == 60000 and 0 < j['delayed_for_ms'] <= 60000 and j['delayed_until'].endswith('Z')")" = True ]
  cl 20 list --url "$url" 'ld*'
  list_tabs "$tmp_dir/out" >"$tmp_dir/list.tsv"
  expect_match "lock-delay: list shows the state and the delay left" \
    $'^ld1\tmutex\tlock-delay\t[^\t]+:[0-9]+\t[0-9TZ:.-]+\t[0-9]+\\.[0-9]{3}\t[0-9]+\\.[0-9]{3}\t[0-9]+\\.[0-9]{3}\t-\t-\tsh$' "$tmp_dir/list.tsv"
  cl 20 run --url "$url" -n ld1 -- true
  expect_status "lock-delay: nobody takes it meanwhile" 75 "$last_status" "$(cat "$tmp_dir/err")"
}

# ---- a closed port is reported at once, as redis-cli does ----

group_refused() {
  local p u start elapsed c
  p=$(free_port)
  u="redis://127.0.0.1:$p"
  local -a commands=("status --url $u x" "list --url $u" "break --url $u x" "run --url $u x -- true")
  for c in "${commands[@]}"; do
    start=$(now_ms)
    # shellcheck disable=SC2086 # the arguments are split on purpose
    cl 10 $c
    elapsed=$(($(now_ms) - start))
    expect_status "refused: ${c%% *}: exit 69" 69 "$last_status" "$(cat "$tmp_dir/err")"
    expect_match "refused: ${c%% *}: names the address and the cause" \
      "cannot reach Redis at 127\.0\.0\.1:$p \(from --url\): connection refused\$" "$tmp_dir/err"
    # Loose: the library's default would wait out its connect window (2 s).
    expect_cond "refused: ${c%% *}: at once (${elapsed} ms < 1000)" '[ "$elapsed" -lt 1000 ]'
  done
  # So does a Cluster URL whose seed refuses (its first slot map is asked
  # of nobody), and status on a Sentinel URL whose Sentinel refuses.
  for u in "redis+cluster://127.0.0.1:$p" "redis+sentinel://127.0.0.1:$p/mymaster"; do
    start=$(now_ms)
    cl 10 status --url "$u" x
    elapsed=$(($(now_ms) - start))
    expect_status "refused: ${u%%:*}: exit 69" 69 "$last_status" "$(cat "$tmp_dir/err")"
    expect_match "refused: ${u%%:*}: names the address" "127\.0\.0\.1:$p" "$tmp_dir/err"
    expect_cond "refused: ${u%%:*}: at once (${elapsed} ms < 1000)" '[ "$elapsed" -lt 1000 ]'
  done
  # etcd reports a closed port at once too.
  start=$(now_ms)
  cl 10 status --url "etcd://127.0.0.1:$p" x
  elapsed=$(($(now_ms) - start))
  expect_status "refused: etcd: exit 69" 69 "$last_status"
  expect_match "refused: etcd: names the cause" "127\.0\.0\.1:$p.*connection refused" "$tmp_dir/err"
  expect_cond "refused: etcd: at once (${elapsed} ms < 1000)" '[ "$elapsed" -lt 1000 ]'
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

  # A semaphore of 2 (--capacity): two runs hold a permit each at once, a
  # third is refused with -n, and gets in once a holder ends; a lock on
  # the same name is refused by the server.
  spawn 60 "$bin" run --url "$url" --capacity 2 sem2 -- sh -c "touch '$tmp_dir/sem-a'; $(long_child 30)"
  local sem_a=$last_pid
  spawn 60 "$bin" run --url "$url" --capacity 2 sem2 -- sh -c "touch '$tmp_dir/sem-b'; $(long_child 30)"
  local sem_b=$last_pid
  expect_true "semaphore: two runs hold at once" \
    wait_until 10 test -e "$tmp_dir/sem-a" -a -e "$tmp_dir/sem-b"
  cl 10 run --url "$url" --capacity 2 -n sem2 -- true
  expect_status "semaphore: a third run with -n is refused" 75 "$last_status"
  cl 10 run --url "$url" --capacity 2 --permits 3 sem2 -- true
  expect_status "semaphore: more permits than the capacity is a usage error" 64 "$last_status"
  cl 10 run --url "$url" -n sem2 -- true
  expect_status "semaphore: a lock on the semaphore's name is refused" 76 "$last_status"
  signal_corolock TERM "$sem_a"
  reap "$sem_a"
  cl 20 run --url "$url" --capacity 2 -w 10 sem2 -- true
  expect_status "semaphore: a third run gets in once a holder ends" 0 "$last_status"
  signal_corolock TERM "$sem_b"
  reap "$sem_b"

  # A shared mutex (-s, -x): two readers hold at once, a writer with -n is
  # refused while they do, a plain lock on the name is refused by the
  # server, and the writer gets in once the readers end.
  spawn 60 "$bin" run --url "$url" -s rw1 -- sh -c "touch '$tmp_dir/rw-a'; $(long_child 30)"
  local rw_a=$last_pid
  spawn 60 "$bin" run --url "$url" --shared rw1 -- sh -c "touch '$tmp_dir/rw-b'; $(long_child 30)"
  local rw_b=$last_pid
  expect_true "shared: two -s runs hold at once" \
    wait_until 10 test -e "$tmp_dir/rw-a" -a -e "$tmp_dir/rw-b"
  cl 10 run --url "$url" -xn rw1 -- true
  expect_status "shared: -x with -n is refused while readers hold" 75 "$last_status"
  cl 10 run --url "$url" -n rw1 -- true
  expect_status "shared: a lock on the shared mutex's name is refused" 76 "$last_status"
  signal_corolock TERM "$rw_a"
  reap "$rw_a"
  signal_corolock TERM "$rw_b"
  reap "$rw_b"
  cl 20 run --url "$url" --exclusive -w 10 rw1 -- sh -c 'echo "token=$COROLOCK_TOKEN"'
  expect_status "shared: -x gets in once the readers end" 0 "$last_status"
  expect_match "shared: the writer gets a token" '^token=[0-9]+$' "$tmp_dir/out"
}

# ---- signals ----

group_signals() {
  # SIGTERM to corolock reaches the child; the child's status is passed on,
  # and the lock is released afterwards.
  spawn 60 "$bin" run --url "$url" sig1 -- \
    sh -c "trap 'echo term >\"$tmp_dir/sig1-term\"; exit 0' TERM; : >\"$tmp_dir/sig1-ready\"; $(long_child 30)"
  local runner=$last_pid
  expect_true "signals: holder acquired" wait_until 10 lock_exists sig1
  expect_true "signals: the child set its trap" wait_until 10 test -e "$tmp_dir/sig1-ready"
  signal_corolock TERM "$runner"
  reap "$runner"
  expect_status "signals: SIGTERM forwarded; run exits with the child's status" 0 "$last_status"
  expect_true "signals: the child's TERM trap ran" test -s "$tmp_dir/sig1-term"
  expect_true "signals: the lock is gone afterwards" lock_absent sig1

  # A child that does not trap SIGTERM dies of it: 128+15. It says when it
  # runs, then becomes `sleep 30`.
  spawn 60 "$bin" run --url "$url" sig2 -- sh -c ": >\"$tmp_dir/sig2-ready\"; exec sleep 30"
  runner=$last_pid
  expect_true "signals: second holder acquired" wait_until 10 lock_exists sig2
  expect_true "signals: the second child runs" wait_until 10 test -e "$tmp_dir/sig2-ready"
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

# ---- flock(1)-style options and -v ----

group_flock() {
  spawn 60 "$bin" run --url "$url" fl -- sh -c "$(long_child 30)"
  local holder=$last_pid
  expect_true "flock: holder acquired" wait_until 10 lock_exists fl

  cl 20 run --url "$url" -n fl -- touch "$tmp_dir/fl-ran"
  expect_status "flock: -n on a held lock" 75 "$last_status"
  expect_match "flock: -n: message" "lock 'fl' is held by another owner \(--no-wait\)" "$tmp_dir/err"
  # Without -v, the line a cron mail shows names the holder.
  expect_match "flock: -n names the holder without -v" "lock 'fl' is held by another owner \(--no-wait\): [^ ]+:[0-9]+ since 20[0-9-]+T[0-9:.]+Z \(held for [^,]+, label 'sh'\)$" "$tmp_dir/err"
  cl 20 run --url "$url" -n -q fl -- touch "$tmp_dir/fl-ran"
  expect_status "flock: -n -q on a held lock" 75 "$last_status"
  expect_true "flock: -q: nothing on stderr" [ ! -s "$tmp_dir/err" ]
  cl 20 run --url "$url" -nq -E 3 fl -- touch "$tmp_dir/fl-ran"
  expect_status "flock: -nq -E 3: the conflict exit code" 3 "$last_status"
  expect_true "flock: -nq -E 3: silent" [ ! -s "$tmp_dir/err" ]
  cl 20 run --url "$url" --no-wait --conflict-exit-code=0 --quiet fl -- touch "$tmp_dir/fl-ran"
  expect_status "flock: --conflict-exit-code=0" 0 "$last_status"

  local start elapsed
  start=$(now_ms)
  cl 20 run --url "$url" -w 0.3 fl -- touch "$tmp_dir/fl-ran"
  elapsed=$(($(now_ms) - start))
  expect_status "flock: -w 0.3 on a held lock" 75 "$last_status"
  expect_match "flock: -w 0.3: message" "lock 'fl' not acquired within 300ms" "$tmp_dir/err"
  expect_match "flock: -w 0.3 names the holder without -v" "lock 'fl' not acquired within 300ms; held by [^ ]+:[0-9]+ since 20[0-9-]+T[0-9:.]+Z \(held for [^,]+, label 'sh'\)$" "$tmp_dir/err"
  expect_cond "flock: -w 0.3 waited about 300 ms (${elapsed} ms)" '[ "$elapsed" -ge 250 ] && [ "$elapsed" -lt 5000 ]'
  start=$(now_ms)
  cl 20 run --url "$url" -w1 fl -- touch "$tmp_dir/fl-ran"
  elapsed=$(($(now_ms) - start))
  expect_status "flock: -w1 on a held lock" 75 "$last_status"
  expect_cond "flock: -w1 waited about 1 s (${elapsed} ms)" '[ "$elapsed" -ge 950 ] && [ "$elapsed" -lt 6000 ]'
  cl 20 run --url "$url" --wait 0.2 fl -- touch "$tmp_dir/fl-ran"
  expect_status "flock: --wait takes seconds too" 75 "$last_status"
  expect_match "flock: --wait 0.2: message" "not acquired within 200ms" "$tmp_dir/err"
  cl 20 run --url "$url" -w 500ms fl -- touch "$tmp_dir/fl-ran"
  expect_status "flock: -w takes a duration too" 75 "$last_status"

  # -v: whom it waits for, and how long it waited.
  cl 20 run --url "$url" -v -w 0.3 fl -- touch "$tmp_dir/fl-ran"
  expect_match "flock: -v names the holder: host:pid, since, held for, its command" "lock 'fl' is held by [^ ]+:[0-9]+ since 20[0-9-]+T[0-9:.]+Z \(held for [0-9]+\.[0-9]{3}s, label 'sh'\) \(lease ends in [0-9]+ ms" "$tmp_dir/err"
  expect_match "flock: -v says how long it waits" "waiting up to 300ms" "$tmp_dir/err"
  expect_match "flock: -v says how long it waited" "gave up on lock 'fl' after [0-9]+\.[0-9]{3} s" "$tmp_dir/err"
  expect_true "flock: COMMAND never ran on a conflict" [ ! -e "$tmp_dir/fl-ran" ]

  signal_corolock TERM "$holder"
  reap "$holder"
  # A holder until it is told to end (not for a fixed second, which a slow
  # start of the waiter could outlast), and a -v waiter that gets the lock
  # after it: the holder ends once the waiter says it waits.
  spawn 60 "$bin" run --url "$url" fl2 -- sleep 30
  holder=$last_pid
  expect_true "flock: second holder acquired" wait_until 10 lock_exists fl2
  spawn 30 "$bin" run --url "$url" -v fl2 -- true 2>"$tmp_dir/fl2-err"
  local waiter=$last_pid
  expect_true "flock: -v waiter says it waits" wait_until 10 grep -q "waiting until it is free" "$tmp_dir/fl2-err"
  signal_corolock TERM "$holder"
  reap "$holder"
  reap "$waiter"
  expect_status "flock: -v waiter ran" 0 "$last_status" "$(cat "$tmp_dir/fl2-err")"
  expect_match "flock: -v: waiting until free" "lock 'fl2' is held by [^ ]+:[0-9]+ since .*label 'sleep'.*waiting until it is free" "$tmp_dir/fl2-err"
  expect_match "flock: -v: acquired after waiting" "acquired lock 'fl2' \(token [0-9]+, lease 30s\) after waiting [0-9]+\.[0-9]{3} s" "$tmp_dir/fl2-err"

  # flock's command line: NAME COMMAND without '--', -c, -o, bare seconds.
  cl 20 run --url "$url" fl4 sh -c 'printf %s "$COROLOCK_NAME" >"$1"' sh "$tmp_dir/fl4-out"
  expect_status "flock: NAME COMMAND without --" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "flock: COMMAND ran with the lock" grep -qx fl4 "$tmp_dir/fl4-out"
  cl 20 run --url "$url" fl4 echo -n hi
  expect_status "flock: COMMAND's own options stay COMMAND's" 0 "$last_status"
  expect_true "flock: echo got its -n" [ "$(cat "$tmp_dir/out")" = hi ]
  cl 20 run --url "$url" -n -o fl4 -c 'printf %s "$COROLOCK_NAME" >'"$tmp_dir/fl4-c"
  expect_status "flock: -c runs a shell command line" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "flock: -c ran with the lock" grep -qx fl4 "$tmp_dir/fl4-c"
  cl 20 run --url "$url" -v --lease 5 -w 2 fl4 true
  expect_status "flock: --lease 5 -w 2" 0 "$last_status"
  expect_match "flock: --lease 5 is 5 seconds" "acquired lock 'fl4' \(token [0-9]+, lease 5s\)" "$tmp_dir/err"
  cl 20 run --url "$url" --lock-delay 1 fl4 true
  expect_status "flock: --lock-delay on Redis" 0 "$last_status" "$(cat "$tmp_dir/err")"

  # A plain lock on a semaphore's name: add --capacity.
  spawn 60 "$bin" run --url "$url" --capacity 2 fsem -- sh -c "touch '$tmp_dir/fsem-in'; $(long_child 30)"
  local sem_holder=$last_pid
  expect_true "flock: semaphore holder acquired" wait_until 10 test -e "$tmp_dir/fsem-in"
  cl 20 status --url "$url" fsem
  expect_status "flock: status of a held semaphore: 0" 0 "$last_status"
  expect_match "flock: one permit is '1 permit'" "^  [0-9a-f]{32}: 1 permit, 1 level, ttl " "$tmp_dir/out"
  cl 20 run --url "$url" -n fsem true
  expect_status "flock: a plain lock on a semaphore" 76 "$last_status"
  expect_match "flock: a plain lock on a semaphore: add --capacity" "lock 'fsem': the name is a semaphore of 2 permits, not a lock: add --capacity 2" "$tmp_dir/err"
  signal_corolock TERM "$sem_holder"
  reap "$sem_holder"

  # -vv: each renewal (lease 300ms: one every 100 ms).
  cl 20 run --url "$url" -vv --lease 300ms fl3 -- sleep 0.6
  expect_status "flock: -vv run" 0 "$last_status"
  expect_match "flock: -vv notes renewals" "renewed the lease on lock 'fl3'; valid for [0-9]+ ms from now" "$tmp_dir/err"
}

# ---- the whole job: process group, terminal signals, corolock's death ----

proc_gone() {  # PID: no such process, or only a zombie left
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' ')
  [ -z "$st" ] || [ "${st#Z}" != "$st" ]
}

# The process whose PID the file holds is gone (or a zombie).
pid_file_gone() { [ -s "$1" ] && proc_gone "$(cat "$1")"; }

group_job() {
  # A background grandchild that ignores SIGTERM: lease loss must stop it
  # too (SIGTERM to the group; SIGKILL to what is left once the command has
  # exited), or it keeps writing without the lock.
  local writer="read p _ </proc/self/stat; echo \$p >'$tmp_dir/job1-pid'; trap '' TERM; for i in \$(seq 400); do echo x >>'$tmp_dir/job1-writes'; sleep 0.05; done"
  spawn 60 "$bin" run --url "$url" --lease 1s job1 -- sh -c "( $writer ) & wait"
  local runner=$last_pid
  expect_true "job: holder acquired" wait_until 10 lock_exists job1
  expect_true "job: the grandchild writes" wait_until 5 test -s "$tmp_dir/job1-writes"
  rcli DEL "corolock:{job1}" >/dev/null
  reap "$runner"
  expect_status "job: lease lost: exit 70" 70 "$last_status"
  expect_true "job: the grandchild was killed after the loss" wait_until 5 pid_file_gone "$tmp_dir/job1-pid"

  # The same with a command that ignores SIGTERM too: SIGKILL after --grace
  # reaches the whole group.
  spawn 60 "$bin" run --url "$url" --lease 1s --grace 500ms job2 -- sh -c "trap '' TERM; ( ${writer//job1/job2} ) & wait"
  runner=$last_pid
  expect_true "job: second holder acquired" wait_until 10 lock_exists job2
  expect_true "job: the second grandchild writes" wait_until 5 test -s "$tmp_dir/job2-writes"
  rcli DEL "corolock:{job2}" >/dev/null
  reap "$runner"
  expect_status "job: lease lost, SIGTERM ignored: exit 70" 70 "$last_status"
  expect_true "job: the second grandchild was killed" wait_until 5 pid_file_gone "$tmp_dir/job2-pid"

  # Forwarded signals reach the whole group: the grandchild's trap runs.
  spawn 60 "$bin" run --url "$url" job3 -- \
    sh -c "( trap 'echo term >\"$tmp_dir/job3-gc\"; exit 0' TERM; : >\"$tmp_dir/job3-ready\"; $(long_child 30) ) & wait"
  runner=$last_pid
  expect_true "job: third holder acquired" wait_until 10 lock_exists job3
  expect_true "job: the grandchild set its trap" wait_until 10 test -e "$tmp_dir/job3-ready"
  signal_corolock TERM "$runner"
  reap "$runner"
  expect_true "job: SIGTERM to corolock reached the grandchild" wait_until 5 test -s "$tmp_dir/job3-gc"

  # COMMAND leads its own process group; --no-process-group keeps it in ours.
  cl 20 run --url "$url" job4 -- sh -c 'echo "pid=$$ pgid=$(ps -o pgid= -p $$ | tr -d " ")"'
  expect_match "job: COMMAND leads its own process group" '^pid=([0-9]+) pgid=\1$' "$tmp_dir/out"
  cl 20 run --url "$url" --no-process-group job4 -- sh -c 'echo "pid=$$ pgid=$(ps -o pgid= -p $$ | tr -d " ")"'
  expect_status "job: --no-process-group" 0 "$last_status"
  expect_no_match "job: --no-process-group: not a group of its own" '^pid=([0-9]+) pgid=\1$' "$tmp_dir/out"

  # SIGKILL of corolock: the command dies with it (PR_SET_PDEATHSIG).
  spawn 60 "$bin" run --url "$url" --lease 2s job5 -- sh -c "echo \$\$ >'$tmp_dir/job5-pid'; $(long_child 30)"
  runner=$last_pid
  expect_true "job: fifth holder started its command" wait_until 10 test -s "$tmp_dir/job5-pid"
  local child
  child=$(cat "$tmp_dir/job5-pid")
  signal_corolock KILL "$runner"
  reap "$runner"
  expect_status "job: corolock killed" 137 "$last_status"
  expect_true "job: the command died with corolock (pid $child)" wait_until 5 proc_gone "$child"

  # After a lost lease in a partition (Redis stopped), run exits as soon as
  # the command has stopped: the release that cannot happen gets 200 ms.
  spawn 60 "$bin" run --url "$url" --lease 1s job6 -- \
    sh -c "trap 'date +%s%N >\"$tmp_dir/job6-term\"; exit 0' TERM; $(long_child 30)"
  runner=$last_pid
  expect_true "job: sixth holder acquired" wait_until 10 lock_exists job6
  kill -STOP "$REDIS_PID"
  redis_stopped=1
  reap "$runner"
  local exited
  exited=$(now_ms)
  kill -CONT "$REDIS_PID"
  redis_stopped=0
  expect_status "job: partition: exit 70" 70 "$last_status"
  local termed
  termed=$(($(cat "$tmp_dir/job6-term" 2>/dev/null || echo 0) / 1000000))
  local linger=$((exited - termed))
  expect_cond "job: partition: exits within 1 s of the command's SIGTERM (${linger} ms)" '[ "$termed" -gt 0 ] && [ "$linger" -lt 1000 ]'
  expect_true "job: Redis answers again" wait_until 5 sh -c "[ \"\$($redis_cli -h 127.0.0.1 -p $port PING)\" = PONG ]"
}

# ---- credentials ----

group_credentials() {
  rcli ACL SETUSER alice on '>s3cret-pw' '~*' '&*' '+@all' >/dev/null
  printf 's3cret-pw\n' >"$tmp_dir/pw"
  cl 20 run --url "redis://alice@127.0.0.1:$port" --password-file "$tmp_dir/pw" cred1 -- true
  expect_status "credentials: --password-file with a user in the URL" 0 "$last_status"
  cl 20 status --url "redis://alice@127.0.0.1:$port" --password-file "$tmp_dir/pw" cred1
  expect_status "credentials: status with --password-file (free: 1)" 1 "$last_status"
  COROLOCK_PASSWORD=s3cret-pw timeout 20 "$bin" run --url "redis://alice:wrong@127.0.0.1:$port" cred1 -- true \
    >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "credentials: COROLOCK_PASSWORD overrides the URL's password" 0 $?
  printf 'wrong\n' >"$tmp_dir/bad-pw"
  cl 20 run --url "redis://alice@127.0.0.1:$port" --password-file "$tmp_dir/bad-pw" cred1 -- true
  expect_status "credentials: a wrong password in the file" 69 "$last_status"
  expect_match "credentials: wrong password: message" "rejected the credentials" "$tmp_dir/err"
  expect_no_match "credentials: wrong password: not echoed" 'wrong' "$tmp_dir/err"

  # COMMAND never gets the password: COROLOCK_PASSWORD removed, REDIS_URL
  # without user and password.
  REDIS_URL="redis://alice:s3cret-pw@127.0.0.1:$port/0" COROLOCK_PASSWORD=s3cret-pw timeout 20 "$bin" run cred2 -- \
    sh -c 'echo "url=$REDIS_URL pw=${COROLOCK_PASSWORD-unset}"' >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "credentials: run with REDIS_URL and COROLOCK_PASSWORD" 0 $?
  expect_true "credentials: COMMAND sees REDIS_URL without credentials" grep -qx "url=redis://127.0.0.1:$port/0 pw=unset" "$tmp_dir/out"
  expect_no_match "credentials: no password in COMMAND's environment" 's3cret' "$tmp_dir/out"
  REDIS_URL="redis://alice:s3cret-pw@127.0.0.1:$port" timeout 20 "$bin" run --pass-credentials cred2 -- \
    sh -c 'echo "url=$REDIS_URL"' >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_true "credentials: --pass-credentials keeps them" grep -qx "url=redis://alice:s3cret-pw@127.0.0.1:$port" "$tmp_dir/out"
  rcli ACL DELUSER alice >/dev/null

  # A server that wants a password, and none given: say how to give one.
  rcli CONFIG SET requirepass cred-pw >/dev/null
  cl 20 status --url "redis://127.0.0.1:$port" cred4
  expect_status "credentials: no password for a server that requires one" 69 "$last_status"
  expect_match "credentials: no password: says how to give one" "rejected the credentials: it requires a password; give it in the URL .*--password-file FILE, or in COROLOCK_PASSWORD" "$tmp_dir/err"
  REDISCLI_AUTH=cred-pw rcli CONFIG SET requirepass "" >/dev/null
  expect_true "credentials: the server's password is off again" [ "$(rcli PING)" = PONG ]

  # corolock holds the password while it runs: it is not dumpable (no core
  # file, no ptrace or /proc/PID/mem for the same user), which the kernel
  # shows by giving its /proc files to root. Run by 'nobody', COMMAND (its
  # child) reads the owner of corolock's /proc/PID/environ.
  if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    local nodir
    nodir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-dump.XXXXXX")
    chmod 755 "$nodir"
    cp "$bin" "$nodir/corolock"
    timeout 20 setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
      "$nodir/corolock" run --url "$url" cred3 -- sh -c 'stat -c %u /proc/$PPID/environ; stat -c %u /proc/$$/environ' \
      >"$tmp_dir/out" 2>"$tmp_dir/err"
    expect_status "credentials: run as nobody" 0 $?
    expect_true "credentials: corolock is not dumpable (its /proc files are root's)" \
      [ "$(sed -n 1p "$tmp_dir/out")" = 0 ]
    expect_true "credentials: COMMAND is dumpable again (its /proc files are its own)" \
      [ "$(sed -n 2p "$tmp_dir/out")" = "$(id -u nobody)" ]
    rm -rf "$nodir"
  else
    pass "credentials: not-dumpable check skipped (needs root, a 'nobody' user and setpriv)"
  fi
}

# ---- output that cannot be forged ----

group_escape() {
  # A name with a newline cannot forge a line of status or break output.
  local forged=$'x\ncorolock: released lock cleanly'
  cl 20 status --url "$url" "$forged"
  expect_status "escape: status of a name with a newline (free: 1)" 1 "$last_status"
  expect_true "escape: status prints seven lines" [ "$(wc -l <"$tmp_dir/out")" -eq 7 ]
  expect_true "escape: the newline is shown as \\n" grep -qxF 'lock:       x\ncorolock: released lock cleanly' "$tmp_dir/out"
  cl 20 break --url "$url" "$forged"
  expect_true "escape: break prints one line" [ "$(wc -l <"$tmp_dir/out")" -eq 1 ]
  expect_no_match "escape: break forges no line" '^corolock: released' "$tmp_dir/out"

  # An owner id holding terminal escapes (written behind corolock's back).
  rcli HSET "corolock:{esc}" owner $'\e[2J\e[Hevil' fence 7 l:1 7 >/dev/null
  rcli PEXPIRE "corolock:{esc}" 60000 >/dev/null
  cl 20 status --url "$url" esc
  expect_status "escape: status of a lock with a hostile owner" 0 "$last_status"
  expect_no_match "escape: status prints no raw escape" $'\e' "$tmp_dir/out"
  expect_true "escape: status shows the owner escaped" grep -qxF 'owner:      \x1b[2J\x1b[Hevil' "$tmp_dir/out"
  cl 20 run --url "$url" -v -n esc -- true
  expect_status "escape: run -n against the hostile owner" 75 "$last_status"
  expect_no_match "escape: run -v prints no raw escape" $'\e' "$tmp_dir/err"
  cl 20 break --url "$url" esc
  expect_status "escape: break of the hostile owner's lock" 0 "$last_status"
  expect_true "escape: break shows the owner escaped" grep -qxF 'removed lock esc held by \x1b[2J\x1b[Hevil (1 level)' "$tmp_dir/out"
  # JSON output was already escaped; it stays so.
  cl 20 status --url "$url" --json "$forged"
  expect_true "escape: --json is one line" [ "$(wc -l <"$tmp_dir/out")" -eq 1 ]

  # A held lock whose name and COMMAND hold a newline and an escape: list
  # and status show them escaped, each lock on one line.
  rcli DEL "corolock:{esc}" >/dev/null
  local nl_name=$'nl\nname'
  spawn 60 "$bin" run --url "$url" --lease 20s --label $'sh \e[31mred\nline' "$nl_name" -- sh -c "$(long_child 30)"
  local holder=$last_pid
  expect_true "escape: the newline lock is held" wait_until 10 lock_exists "$nl_name"
  cl 20 list --url "$url"
  expect_true "escape: list prints a header and one line" [ "$(wc -l <"$tmp_dir/out")" -eq 2 ]
  expect_match "escape: list shows the name escaped" '^nl\\nname ' "$tmp_dir/out"
  expect_no_match "escape: list prints no raw escape" $'\e' "$tmp_dir/out"
  expect_match "escape: list shows the label escaped, last" ' sh \\x1b\[31mred\\nline$' "$tmp_dir/out"
  cl 20 status --url "$url" "$nl_name"
  expect_true "escape: status shows the label escaped" grep -qF 'label:      sh \x1b[31mred\nline' "$tmp_dir/out"
  expect_no_match "escape: status prints no raw escape" $'\e' "$tmp_dir/out"
  cl 20 list --url "$url" --json
  local parsed
  parsed=$("$python" -c '
import json, sys
doc = json.load(open(sys.argv[1]))
l = doc["locks"][0]
print(len(doc["locks"]), l["name"] == "nl\nname", l["label"].endswith("\x1b[31mred\nline"))
' "$tmp_dir/out" 2>&1)
  expect_true "escape: list --json parses back name and label ($parsed)" [ "$parsed" = "1 True True" ]
  expect_true "escape: list --json is one line" [ "$(wc -l <"$tmp_dir/out")" -eq 1 ]
  signal_corolock TERM "$holder"
  reap "$holder"
}

# ---- TLS ----

tls_pid=""
tls_port=""

make_tls_files() {  # DIR
  local d=$1
  cat >"$d/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = corolock-test
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[v3_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
CNF
  local key=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  export OPENSSL_CONF="$d/openssl.cnf"
  openssl req -x509 -config "$d/openssl.cnf" -extensions v3_ca "${key[@]}" -keyout "$d/ca.key" \
    -out "$d/ca.crt" -days 2 -subj "/CN=corolock cli test CA" 2>/dev/null || return 1
  local who
  for who in server client; do
    openssl req -new -config "$d/openssl.cnf" "${key[@]}" -keyout "$d/$who.key" -out "$d/$who.csr" \
      -subj "/CN=$who" 2>/dev/null || return 1
    openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -set_serial "$RANDOM" \
      -extfile "$d/openssl.cnf" -extensions "v3_$who" -days 2 -out "$d/$who.crt" 2>/dev/null || return 1
  done
  unset OPENSSL_CONF
}

# A second throwaway server, TLS only, that asks for client certificates.
start_tls_server() {
  local d=$tmp_dir/tls candidate
  mkdir -p "$d" && make_tls_files "$d" || return 1
  for _ in $(seq 20); do
    candidate=$((20000 + RANDOM % 12000))
    port_is_free "$candidate" || continue
    : >"$d/redis.log"
    "${COROLOCK_REDIS_SERVER:-redis-server}" --port 0 --tls-port "$candidate" --bind 127.0.0.1 \
      --tls-cert-file "$d/server.crt" --tls-key-file "$d/server.key" --tls-ca-cert-file "$d/ca.crt" \
      --tls-auth-clients yes --save '' --appendonly no --dir "$d" --logfile "$d/redis.log" \
      --daemonize no &
    tls_pid=$!
    started_pids+=("$tls_pid")
    for _ in $(seq 100); do
      grep -q 'Ready to accept connections' "$d/redis.log" && break
      kill -0 "$tls_pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$tls_pid" 2>/dev/null && grep -q 'Ready to accept connections' "$d/redis.log"; then
      tls_port=$candidate
      return 0
    fi
    stop_pid "$tls_pid"
  done
  return 1
}

group_tls() {
  if ! start_tls_server; then
    fail "tls: could not start a TLS redis-server" "$(tail -5 "$tmp_dir/tls/redis.log" 2>/dev/null)"
    return
  fi
  local d=$tmp_dir/tls turl="rediss://127.0.0.1:$tls_port"
  local -a client=(--tls-cert "$d/client.crt" --tls-key "$d/client.key")
  cl 20 status --url "$turl" --tls-ca "$d/ca.crt" "${client[@]}" tls1
  expect_status "tls: status with --tls-ca, --tls-cert, --tls-key (free: 1)" 1 "$last_status"
  cl 20 run --url "$turl" --tls-ca "$d/ca.crt" "${client[@]}" tls1 -- sh -c 'echo "token=$COROLOCK_TOKEN"'
  expect_status "tls: run" 0 "$last_status"
  expect_match "tls: run: COMMAND ran with a token" '^token=[0-9]+$' "$tmp_dir/out"
  cl 20 status --url "redis://127.0.0.1:$tls_port" --tls-ca "$d/ca.crt" "${client[@]}" tls1
  expect_status "tls: a --tls-* option turns TLS on for redis:// (free: 1)" 1 "$last_status"
  cl 20 status --url "$turl" --tls-ca "$d/ca.crt" --tls-server-name localhost "${client[@]}" tls1
  expect_status "tls: --tls-server-name matching the certificate (free: 1)" 1 "$last_status"
  cl 20 status --url "$turl" --tls-ca "$d/ca.crt" --tls-server-name wrong.invalid "${client[@]}" tls1
  expect_status "tls: --tls-server-name not in the certificate" 69 "$last_status"
  cl 20 status --url "$turl" "${client[@]}" tls1
  expect_status "tls: the system's CAs do not trust the test CA" 69 "$last_status"
  cl 20 status --url "$turl" --tls-insecure "${client[@]}" tls1
  expect_status "tls: --tls-insecure skips verification (free: 1)" 1 "$last_status"
  cl 20 status --url "$turl/0?tls_ca=$d/ca.crt&tls_server_name=localhost" "${client[@]}" tls1
  expect_status "tls: tls_ca and tls_server_name in the URL's query (free: 1)" 1 "$last_status"
  cl 20 status --url "$turl?tls_verify=no" "${client[@]}" tls1
  expect_status "tls: tls_verify=no in the URL's query (free: 1)" 1 "$last_status"
  cl 20 status --url "$turl?tls_ca=/nonexistent/ca.crt" "${client[@]}" tls1
  expect_status "tls: an unreadable tls_ca in the URL's query" 64 "$last_status"
  expect_true "tls: the unreadable file is named by its query key" \
    grep -qF "cannot read the file in the URL's tls_ca" "$tmp_dir/err"
  cl 20 status --url "$turl" --tls-ca "$d/ca.crt" tls1
  expect_status "tls: no client certificate where the server asks for one" 69 "$last_status"
  stop_pid "$tls_pid"
  # TLS spoken to a plain Redis port: the message says TLS failed.
  cl 20 status --url "rediss://127.0.0.1:$port" tls1
  expect_status "tls: rediss:// to a plain server" 69 "$last_status"
  expect_match "tls: rediss:// to a plain server: says TLS failed" "TLS failed: no TLS session within .*a plain Redis port takes redis://" "$tmp_dir/err"
}

# ---- ACL: NOPERM ----

group_acl() {
  rcli ACL SETUSER limited on '>pw' '~other:*' '&*' '+@all' >/dev/null
  local lurl="redis://limited:pw@127.0.0.1:$port"
  cl 20 run --url "$lurl" acl1 -- touch "$tmp_dir/acl-ran"
  expect_status "acl: run denied by NOPERM" 76 "$last_status"
  expect_match "acl: run: message" 'denied the command \(NOPERM\)' "$tmp_dir/err"
  expect_true "acl: COMMAND did not run" [ ! -e "$tmp_dir/acl-ran" ]
  cl 20 status --url "$lurl" acl1
  expect_status "acl: status denied by NOPERM" 76 "$last_status"
  cl 20 break --url "$lurl" acl1
  expect_status "acl: break denied by NOPERM" 76 "$last_status"
  cl 20 status --url "redis://limited:wrong@127.0.0.1:$port" acl1
  expect_status "acl: a wrong password is still 69" 69 "$last_status"
  rcli ACL DELUSER limited >/dev/null
}

# ---- set-user-ID ----

group_setuid() {
  if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
    pass "setuid: skipped (needs root and a 'nobody' user to make a set-user-ID copy)"
    return
  fi
  if ldd "$bin" 2>/dev/null | grep -q libasan; then
    # LeakSanitizer cannot run in a set-user-ID process: it ends it with
    # status 1 after the refusal is printed. The plain build checks this.
    pass "setuid: skipped under AddressSanitizer"
    return
  fi
  local copy=$tmp_dir/setuid/corolock
  mkdir -p "$tmp_dir/setuid" && chmod 755 "$tmp_dir/setuid"
  cp "$bin" "$copy" && chown nobody "$copy" && chmod 4755 "$copy"
  if findmnt -no OPTIONS --target "$tmp_dir" 2>/dev/null | grep -qw nosuid; then
    pass "setuid: skipped ($tmp_dir is mounted nosuid)"
    return
  fi
  timeout 5 "$copy" --version >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "setuid: a set-user-ID corolock refuses to run" 77 $?
  expect_match "setuid: message" '^corolock: refusing to run set-user-ID or set-group-ID' "$tmp_dir/err"
  expect_true "setuid: printed nothing else" [ ! -s "$tmp_dir/out" ]

  # File capabilities raise privileges without a set-user-ID bit: the
  # kernel's AT_SECURE says so. Run by 'nobody', who gains the capability.
  if ! command -v setcap >/dev/null || ! command -v setpriv >/dev/null; then
    pass "setuid: file capabilities skipped (needs setcap and setpriv)"
    return
  fi
  local capdir
  capdir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-cap.XXXXXX")
  chmod 755 "$capdir"
  cp "$bin" "$capdir/corolock"
  if ! setcap cap_net_bind_service+ep "$capdir/corolock" 2>/dev/null; then
    rm -rf "$capdir"
    pass "setuid: file capabilities skipped (setcap failed: no xattrs here?)"
    return
  fi
  timeout 5 setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
    "$capdir/corolock" --version >"$tmp_dir/out" 2>"$tmp_dir/err"
  expect_status "setuid: a corolock with file capabilities refuses to run" 77 $?
  expect_match "setuid: message (capabilities)" 'or with file capabilities' "$tmp_dir/err"
  expect_true "setuid: printed nothing else (capabilities)" [ ! -s "$tmp_dir/out" ]
  rm -rf "$capdir"
}

# ---- run --metrics-file: a Prometheus textfile, written atomically ----

# Checks FILE against the text exposition format: HELP/TYPE before each
# family's samples, every sample `name{labels} value`, histogram buckets
# cumulative with +Inf equal to _count. Prints what is wrong.
prom_well_formed() {  # FILE
  "$python" - "$1" <<'PY'
import re, sys
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? (\S+)$')
label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
types, buckets, counts, bad = {}, {}, {}, []
text = open(sys.argv[1], encoding='utf-8').read()
if not text.endswith('\n'):
    bad.append('no final newline')
for line in text.splitlines():
    if line.startswith('# HELP ') or line.startswith('# TYPE '):
        parts = line.split(' ', 3)
        if len(parts) < 4:
            bad.append('short comment: ' + line)
        elif parts[1] == 'TYPE':
            types[parts[2]] = parts[3]
        continue
    m = sample.match(line)
    if not m:
        bad.append('not a sample: ' + line)
        continue
    name, labels, value = m.group(1), dict(label.findall(m.group(3) or '')), m.group(4)
    float(value)
    family = re.sub(r'_(bucket|sum|count)$', '', name) if re.sub(r'_(bucket|sum|count)$', '', name) in types else name
    if family not in types:
        bad.append('no TYPE before ' + name)
    if name.endswith('_bucket'):
        buckets.setdefault(family, []).append((labels.get('le'), float(value)))
    elif name.endswith('_count') and types.get(family) == 'histogram':
        counts[family] = float(value)
for family, bs in buckets.items():
    values = [v for _, v in bs]
    if values != sorted(values):
        bad.append(family + ': buckets not cumulative')
    if bs[-1][0] != '+Inf' or bs[-1][1] != counts.get(family):
        bad.append(family + ': +Inf bucket is not _count')
if bad:
    print('\n'.join(bad))
sys.exit(1 if bad else 0)
PY
}

# FILE has exactly this sample line.
prom_has() {  # FILE LINE
  grep -qxF -- "$2" "$1"
}

group_metrics() {
  local dir=$tmp_dir/textfiles
  mkdir -p "$dir"
  local file=$dir/job.prom
  local old_umask
  old_umask=$(umask)
  umask 022
  cl 20 run --url "$url" --metrics-file "$file" mt -- true
  umask "$old_umask"
  expect_status "metrics: a run with --metrics-file" 0 "$last_status"
  expect_true "metrics: the file exists" [ -s "$file" ]
  expect_true "metrics: well-formed" prom_well_formed "$file"
  expect_true "metrics: one acquisition" prom_has "$file" 'corolock_acquisitions_total{lock="mt"} 1'
  expect_true "metrics: its wait observed once" prom_has "$file" 'corolock_acquire_wait_seconds_count{lock="mt"} 1'
  expect_true "metrics: exit status 0" prom_has "$file" 'corolock_run_exit_status{lock="mt"} 0'
  expect_match "metrics: an end time" '^corolock_run_end_time_seconds\{lock="mt"\} [0-9]{10}$' "$file"
  expect_true "metrics: no temporary file left" [ "$(ls -A "$dir")" = "job.prom" ]
  expect_true "metrics: readable by the collector's user (mode 644 under umask 022)" \
    [ "$(stat -c %a "$file")" = "644" ]

  # A failing COMMAND: the file is replaced, with its status.
  cl 20 run --url "$url" --metrics-file "$file" mt -- sh -c 'exit 3'
  expect_status "metrics: a failing COMMAND" 3 "$last_status"
  expect_true "metrics: written for a failing COMMAND" prom_has "$file" 'corolock_run_exit_status{lock="mt"} 3'
  expect_true "metrics: well-formed after a failure" prom_well_formed "$file"

  # A conflict: nothing acquired, the conflict's status recorded.
  spawn 60 "$bin" run --url "$url" mt2 -- sh -c "$(long_child 30)"
  local holder=$last_pid
  expect_true "metrics: holder acquired" wait_until 10 lock_exists mt2
  cl 20 run --url "$url" -nq -E 9 --metrics-file "$file" mt2 -- true
  expect_status "metrics: a conflict" 9 "$last_status"
  expect_true "metrics: written on a conflict" prom_has "$file" 'corolock_run_exit_status{lock="mt2"} 9'
  expect_true "metrics: no acquisition on a conflict" prom_has "$file" 'corolock_acquisitions_total{lock="mt2"} 0'
  expect_true "metrics: well-formed after a conflict" prom_well_formed "$file"
  signal_corolock TERM "$holder"
  reap "$holder"

  # Redis unreachable: still written.
  local closed
  closed=$(free_port)
  cl 20 run --url "redis://127.0.0.1:$closed" --metrics-file "$file" mt -- true
  expect_status "metrics: Redis unreachable" 69 "$last_status"
  expect_true "metrics: written when Redis is unreachable" prom_has "$file" 'corolock_run_exit_status{lock="mt"} 69'
  expect_true "metrics: no temporary file left after failures" [ "$(ls -A "$dir")" = "job.prom" ]

  # A directory that cannot be written: a usage error, before anything runs.
  cl 20 run --url "$url" --metrics-file "$tmp_dir/no-such-dir/x.prom" mt -- touch "$tmp_dir/mt-ran"
  expect_status "metrics: an unwritable --metrics-file" 64 "$last_status"
  expect_match "metrics: says why" "run: bad --metrics-file '.*/no-such-dir/x.prom': cannot write to its directory" "$tmp_dir/err"
  expect_true "metrics: COMMAND did not run" [ ! -e "$tmp_dir/mt-ran" ]
}

# ---- main ----

need_server=0
for g in "${groups[@]}"; do
  case $g in
    usage | refused) ;;
    setuid) ;;
    run | multi | inspect | loss | delay | exclusion | signals | flock | job | credentials | escape | tls | acl | metrics) need_server=1 ;;
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

finish
