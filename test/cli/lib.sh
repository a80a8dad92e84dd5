# The harness shared by the command-line tool's shell tests (cli_test.sh on
# Redis, etcd_cli_test.sh on etcd). Sourced, after the script has set:
#
#   bin      the corolock binary under test
#   tmp_dir  a private temporary directory (the script removes it)
#   python   python3, to read --json output
#
# It provides the counters (passed, failed), the assertions (each one counts,
# and each one can fail), bounded polling, background processes remembered
# for cleanup (spawn, reap, stop_started), free loopback ports, several
# servers (start_nodes, stop_nodes, rcli PORT; redis_cli names redis-cli
# for these), and cl to run
# the tool with its output captured, and exclusion_cases (two runs on one
# name, for the scripts of the other services). stop_pid comes from
# scripts/lib/throwaway_redis.sh, sourced here.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled.

# shellcheck source=../../scripts/lib/throwaway_redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/throwaway_redis.sh"

passed=0
failed=0
started_pids=()
last_status=""
last_pid=""

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

# The summary line, "N passed, M failed"; non-zero on any failure.
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
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

# ---- processes ----

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

# Stops every process spawn started (for the scripts' cleanup).
stop_started() {
  local pid
  for pid in "${started_pids[@]}"; do stop_pid "$pid"; done
}

# A child that runs up to SECONDS in short sleeps, so a signal's trap runs
# within 0.1 s and no long sleep outlives it.
long_child() { echo "for i in \$(seq $(($1 * 10))); do sleep 0.1; done"; }

# ---- ports ----

# A loopback port nobody listens on now (for servers, and for the
# "unreachable" cases).
port_is_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local candidate
  for _ in $(seq 50); do
    candidate=$((20000 + RANDOM % 12000))
    if port_is_free "$candidate"; then echo "$candidate"; return 0; fi
  done
  return 1
}

# ---- several servers (cluster_cli_test.sh, redlock_cli_test.sh) ----

node_pids=()
node_ports=()

# Starts N throwaway redis-servers in $tmp_dir/node1..N, ARGs to each; their
# pids and ports are appended to node_pids and node_ports.
start_nodes() {  # N [ARG...]
  local i n=$1
  shift
  for i in $(seq "$n"); do
    mkdir -p "$tmp_dir/node$i"
    throwaway_redis_start "$tmp_dir/node$i" "$@" || return 1
    node_pids+=("$REDIS_PID")
    node_ports+=("$REDIS_PORT")
    REDIS_PID=""
  done
}

# Stops what start_nodes started (for the scripts' cleanup).
stop_nodes() {
  local pid
  for pid in "${node_pids[@]}"; do stop_pid "$pid"; done
}

# redis-cli against one of them.
rcli() {  # PORT ARGS...
  local p=$1
  shift
  timeout 5 "$redis_cli" -h 127.0.0.1 -p "$p" "$@"
}

# ---- the tool ----

# Runs corolock, bounded, with stdout/stderr captured in $tmp_dir/out and
# $tmp_dir/err; the status lands in $last_status.
cl() {  # SECONDS ARGS...
  local secs=$1
  shift
  timeout "$secs" "$bin" "$@" >"$tmp_dir/out" 2>"$tmp_dir/err"
  last_status=$?
}

json_field() {  # FILE FIELD: prints the field of the one JSON object in FILE, as JSON
  "$python" -c '
import json, sys
with open(sys.argv[1]) as f:
    lines = f.read().splitlines()
assert len(lines) == 1, "expected exactly one line, got %d" % len(lines)
value = json.loads(lines[0])[sys.argv[2]]
print(json.dumps(value))
' "$1" "$2"
}

json_eval() {  # FILE EXPRESSION: prints a Python expression over j, the one JSON object in FILE
  "$python" -c '
import json, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
print(eval(sys.argv[2]))
' "$1" "$2"
}

# For the multi-server scripts: on exit or a signal, end every process and
# node the script started and remove its $tmp_dir.
trap_node_cleanup() {
  node_cleanup() {
    stop_started
    stop_nodes
    rm -rf "$tmp_dir"
  }
  trap node_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# ---- a throwaway PostgreSQL (pg_cli_test.sh, fence_cli_test.sh) ----

# Needs pg_bindir (initdb, postgres, pg_isready). pg_start makes a cluster in
# $tmp_dir/data and starts postgres on a free loopback port, its socket in
# $tmp_dir; its pid goes in node_pids, its URL in $url.
pg_serving() {  # PORT: the server accepts a connection (pg_isready)
  "$pg_bindir/pg_isready" -q -h 127.0.0.1 -p "$1" -t 1
}

pg_start() {
  local port owner
  # As root, the server runs as postgres (or nobody): it refuses root.
  as_owner=()
  if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id "$owner" >/dev/null 2>&1 || owner=nobody
    as_owner=(setpriv --reuid="$owner" --regid="$(id -g "$owner")" --clear-groups --)
    chown "$owner" "$tmp_dir"
  fi
  port=$(free_port) || return 1
  if ! timeout 120 "${as_owner[@]}" "$pg_bindir/initdb" -D "$tmp_dir/data" -U corolock -A trust \
    -E UTF8 --no-sync --no-instructions >"$tmp_dir/initdb.log" 2>&1; then
    echo "initdb failed:" >&2
    tail -n 20 "$tmp_dir/initdb.log" >&2
    return 1
  fi
  "${as_owner[@]}" "$pg_bindir/postgres" -D "$tmp_dir/data" -p "$port" -k "$tmp_dir" \
    -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50 -c shared_buffers=16MB \
    -c log_min_messages=fatal >"$tmp_dir/pg.log" 2>&1 &
  node_pids+=("$!")
  url="postgresql://corolock@127.0.0.1:$port/postgres"
  if ! wait_until 30 pg_serving "$port"; then
    echo "postgres did not start:" >&2
    tail -n 20 "$tmp_dir/pg.log" >&2
    return 1
  fi
}

# corolock list's text output (aligned columns, two spaces or more apart;
# LABEL, the last, may hold single spaces) with a tab between columns.
list_tabs() { sed -E 's/ {2,}/\t/g' "$1"; }

# The columns `list` printed in FILE (its header) are those `help list`
# documents, in order: one table in tools/help.cpp makes both.
expect_list_columns_documented() {  # LABEL FILE
  local printed documented
  printed=$(head -n 1 "$2" | tr -s ' ' | sed 's/ $//')
  documented=$("$bin" help list | sed -n '/^Text output:/,/^Options:/p' |
    grep -oE '^  [A-Z][A-Za-z()]*' | tr -d ' ' | tr '\n' ' ' | sed 's/ $//')
  [ -n "$printed" ] || printed="(no header)"
  expect_true "$1: list's columns are help list's ($printed | $documented)" \
    [ "$printed" = "$documented" ]
}

# ---- two runs on one name (etcd_cli_test.sh, zk_cli_test.sh, pg_cli_test.sh) ----

# Needs $url, and is_held NAME / has_waiters NAME N from the script. The
# first holder keeps the lock until the test says go (bounded to 30 s),
# however slowly the checks in between run (under ASan, say); runs that give
# up (-n, --wait) must leave nothing queued, else they would hold up every
# later waiter until their lease ends.
exclusion_cases() {
  local log=$tmp_dir/ex.log
  local go=$tmp_dir/ex-go
  spawn 60 "$bin" run --url "$url" --wait 30s ex -- \
    sh -c "echo \"start \$COROLOCK_TOKEN\" >>'$log'; for i in \$(seq 300); do [ -e '$go' ] && break; sleep 0.1; done; echo end >>'$log'"
  local first=$last_pid
  expect_true "exclusion: the first run holds the lock" wait_until 15 is_held ex
  spawn 60 "$bin" run --url "$url" --wait 30s ex -- \
    sh -c "echo \"start \$COROLOCK_TOKEN\" >>'$log'; echo end >>'$log'"
  local second=$last_pid
  expect_true "exclusion: the second run waits" wait_until 15 has_waiters ex 1
  cl 20 run --url "$url" -n ex -- touch "$tmp_dir/ex-ran"
  expect_status "exclusion: --no-wait on a held lock" 75 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "exclusion: says it is held" "lock 'ex' is held by another owner \(--no-wait\)" "$tmp_dir/err"
  # Who holds it, without -v (the backend-neutral admin status): the first
  # run's host, pid, since and label.
  local first_pid
  first_pid=$(corolock_pid "$first")
  expect_match "exclusion: --no-wait names the holder without -v" \
    "held by another owner \(--no-wait\): $(hostname):$first_pid since 20[0-9-]+T[0-9:.]+Z \(held for [^,]+, label 'sh'\)\$" "$tmp_dir/err"
  cl 20 run --url "$url" --wait 1s ex -- touch "$tmp_dir/ex-ran"
  expect_status "exclusion: --wait 1s on a held lock" 75 "$last_status"
  expect_match "exclusion: --wait names the holder without -v" \
    "not acquired within 1s; held by $(hostname):$first_pid since " "$tmp_dir/err"
  expect_true "exclusion: neither ran its command" [ ! -e "$tmp_dir/ex-ran" ]
  expect_true "exclusion: the runs that gave up left nothing queued" has_waiters ex 1
  touch "$go"
  reap "$first"
  expect_status "exclusion: the first run" 0 "$last_status"
  reap "$second"
  expect_status "exclusion: the second run, after it" 0 "$last_status"
  local order
  order=$(sed 's/ .*//' "$log" | tr '\n' ' ')
  expect_true "exclusion: start end start end ($order)" [ "$order" = "start end start end " ]
  local t1 t2
  t1=$(sed -n '1s/^start //p' "$log")
  t2=$(sed -n '3s/^start //p' "$log")
  expect_cond "exclusion: the second token is higher ($t1 < $t2)" '[ -n "$t1" ] && [ -n "$t2" ] && [ "$t1" -lt "$t2" ]'
}

# check on $url while NAME is held under TOKEN: current (0), another token stale
# (1), a TOKEN that is no non-negative integer a usage error (64).
check_cases() {  # LABEL NAME TOKEN
  local over=$1 name=$2 token=$3
  cl 10 check --url "$url" "$name" "$token"
  expect_status "check $over: the holder's token is current (0)" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "check $over: says current" "^token $token is current for lock $name\$" "$tmp_dir/out"
  cl 10 check --url "$url" "$name" "$((token + 1))"
  expect_status "check $over: another token is stale (1)" 1 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "check $over: says stale" "^token $((token + 1)) is stale for lock $name\$" "$tmp_dir/out"
  local bad
  for bad in abc 1x '' 99999999999999999999999; do
    cl 10 check --url "$url" "$name" "$bad"
    expect_status "check $over: TOKEN '$bad' is a usage error (64)" 64 "$last_status"
    expect_match "check $over: TOKEN '$bad': says why" "non-negative integer" "$tmp_dir/err"
  done
}
