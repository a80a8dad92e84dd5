#!/usr/bin/env bash
# End-to-end tests of `corolock fence install` (docs/fencing.md), against a
# throwaway redis-server and a throwaway PostgreSQL that this script starts
# on free loopback ports.
#
#   fence_cli_test.sh COROLOCK_BIN GROUP...
#
# GROUPs: redis (needs redis-server and redis-cli: COROLOCK_REDIS_SERVER,
# COROLOCK_REDIS_CLI), postgresql (needs initdb, postgres and psql:
# COROLOCK_PG_BINDIR, else the newest /usr/lib/postgresql/*/bin),
# pg_stale_writer (both: a Redis lock's frozen holder on the PostgreSQL fence).
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: fence_cli_test.sh COROLOCK_BIN GROUP...}
shift

redis_cli=${COROLOCK_REDIS_CLI:-redis-cli}
pg_bindir=${COROLOCK_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
python=${COROLOCK_PYTHON:-python3}
tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-fence-cli-test.XXXXXX")
url=""

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap_node_cleanup

group_redis() {
  start_nodes 1 || { fail "redis: the server starts"; return; }
  local port=${node_ports[0]}
  url="redis://127.0.0.1:$port"
  cl 20 fence install --url "$url"
  expect_status "redis: fence install exits 0" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_cond "redis: the library corolock is loaded" \
    '[ "$(rcli "$port" FUNCTION LIST LIBRARYNAME corolock | grep -c "^corolock$")" = 1 ]'
  cl 20 fence install --url "$url" -v
  expect_status "redis: a second install exits 0" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "redis: -v says what was installed" "library corolock is loaded" "$tmp_dir/err"
  # The functions work as documented: a stale token is refused.
  rcli "$port" FCALL corolock_fenced_set 2 f k 5 v5 >/dev/null
  local stale
  stale=$(rcli "$port" FCALL corolock_fenced_set 2 f k 4 v4)
  expect_cond "redis: an older token is refused with STALE" '[[ "$stale" == *STALE* ]]'
  expect_cond "redis: the newer write stands" '[ "$(rcli "$port" GET k)" = v5 ]'

  # A server without FUNCTION (as before Redis 7.0): a clear error, exit 76.
  mkdir -p "$tmp_dir/old"
  throwaway_redis_start "$tmp_dir/old" --rename-command FUNCTION corolock_test_renamed ||
    { fail "redis: the server without FUNCTION starts"; return; }
  node_pids+=("$REDIS_PID")
  REDIS_PID=""
  cl 20 fence install --url "redis://127.0.0.1:$REDIS_PORT"
  expect_status "redis without Functions: exit 76" 76 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "redis without Functions: the cause is named" "no Redis Functions \(Redis 7\.0 or later\)" \
    "$tmp_dir/err"

  # A server with requirepass: the password as every command takes it
  # (--password-file, COROLOCK_PASSWORD), parsed by the same definitions.
  mkdir -p "$tmp_dir/auth"
  throwaway_redis_start "$tmp_dir/auth" --requirepass fence-pw ||
    { fail "redis: the server with requirepass starts"; return; }
  node_pids+=("$REDIS_PID")
  REDIS_PID=""
  local auth_port=$REDIS_PORT
  auth_loaded() {
    REDISCLI_AUTH=fence-pw rcli "$auth_port" FUNCTION LIST LIBRARYNAME corolock | grep -c "^corolock$"
  }
  cl 20 fence install --url "redis://127.0.0.1:$auth_port"
  expect_cond "redis with requirepass, no password: refused" '[ "$last_status" -ne 0 ]'
  expect_match "redis with requirepass, no password: the cause is named" "requires a password" \
    "$tmp_dir/err"
  expect_cond "redis with requirepass, no password: nothing loaded" '[ "$(auth_loaded)" = 0 ]'
  printf 'fence-pw\n' >"$tmp_dir/auth/pw"
  cl 20 fence install --url "redis://127.0.0.1:$auth_port" --password-file "$tmp_dir/auth/pw"
  expect_status "redis with requirepass: --password-file installs" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_cond "redis with requirepass: the library is loaded" '[ "$(auth_loaded)" = 1 ]'
  REDISCLI_AUTH=fence-pw rcli "$auth_port" FUNCTION DELETE corolock >/dev/null
  COROLOCK_PASSWORD=fence-pw cl 20 fence install --url "redis://127.0.0.1:$auth_port"
  expect_status "redis with requirepass: COROLOCK_PASSWORD installs" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_cond "redis with requirepass: loaded again" '[ "$(auth_loaded)" = 1 ]'
  cl 10 fence install --url "redis://127.0.0.1:$auth_port" --password-file "$tmp_dir/auth/none"
  expect_status "an unreadable --password-file is a usage error" 64 "$last_status"
  expect_match "it names the file" "cannot read --password-file" "$tmp_dir/err"
  cl 10 fence install --url "redis://127.0.0.1:$auth_port" --tls-cert "$tmp_dir/auth/pw"
  expect_status "the TLS options are run's: --tls-cert alone is a usage error" 64 "$last_status"
  expect_match "it says why" "--tls-cert and --tls-key go together" "$tmp_dir/err"
  cl 10 fence install --url "redis://127.0.0.1:1" --url "redis://127.0.0.1:2"
  expect_status "two --url is a usage error" 64 "$last_status"

  cl 10 fence install --url "etcd://127.0.0.1:1"
  expect_status "an etcd URL is a usage error" 64 "$last_status"
  expect_match "it says where the fences live" "Redis or PostgreSQL URL" "$tmp_dir/err"
  cl 10 fence frobnicate
  expect_status "an unknown subcommand is a usage error" 64 "$last_status"
  cl 10 help fence
  expect_status "help fence exits 0" 0 "$last_status"
  expect_match "help fence shows the usage" "Usage: corolock fence install" "$tmp_dir/out"
  cl 10 fence --help
  expect_match "fence --help shows the same" "corolock_fenced_set" "$tmp_dir/out"
}

psql_value() {  # SQL: the one value it returns
  timeout 20 "$pg_bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$url" -c "$1"
}

group_postgresql() {
  pg_start || { fail "postgresql: the server starts"; return; }
  cl 30 fence install --url "$url"
  expect_status "postgresql: fence install exits 0" 0 "$last_status" "$(cat "$tmp_dir/err")"
  cl 30 fence install --url "$url"
  expect_status "postgresql: a second install exits 0" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_cond "postgresql: corolock.fence records a token" \
    '[ "$(psql_value "SELECT corolock.fence('"'r'"', 5)")" = 5 ]'
  local state
  state=$(timeout 20 "$pg_bindir/psql" -X -q -At -d "$url" \
    -c "\\set VERBOSITY sqlstate" -c "SELECT corolock.fence('r', 4)" 2>&1)
  expect_cond "postgresql: an older token raises CLF01" '[[ "$state" == *CLF01* ]]'

  # A role without CREATE on the database: a clear error, nothing left behind.
  psql_value "SET client_min_messages = warning; CREATE ROLE weak LOGIN; DROP SCHEMA corolock CASCADE" >/dev/null
  cl 30 fence install --url "postgresql://weak@${url#postgresql://corolock@}"
  expect_status "postgresql: a role that cannot create the schema: exit 76" 76 "$last_status" \
    "$(cat "$tmp_dir/err")"
  expect_match "postgresql: the cause is named" "may not create schema corolock" "$tmp_dir/err"
  expect_cond "postgresql: nothing was installed" \
    '[ "$(psql_value "SELECT count(*) FROM pg_namespace WHERE nspname = '"'corolock'"'")" = 0 ]'
}

# The stale writer on the PostgreSQL fence: holder A (a `corolock run` of a
# Redis lock with a 1 s lease) takes the lock, notes its token and is frozen
# with SIGSTOP before it writes; B waits for the lock (granted when A's lease
# runs out: the event, not a guess) and writes to a table fenced by the
# trigger of docs/fencing.md; A is resumed and writes with its older token:
# refused with CLF01, and the table keeps B's row.
group_pg_stale_writer() {
  pg_start || { fail "stale writer: postgresql starts"; return; }
  local pg_url=$url
  start_nodes 1 || { fail "stale writer: the redis-server for the lock starts"; return; }
  local lock_url="redis://127.0.0.1:${node_ports[0]}"
  cl 30 fence install --url "$pg_url"
  expect_status "stale writer: fence install exits 0" 0 "$last_status" "$(cat "$tmp_dir/err")"
  psql_value "CREATE TABLE stock (sku text PRIMARY KEY, token bigint NOT NULL, writer text)" >/dev/null
  # The trigger as docs/fencing.md gives it (the block after its marker).
  sed -n '/<!-- fence trigger example -->/,/^```$/p' "$(dirname "${BASH_SOURCE[0]}")/../../docs/fencing.md" |
    sed '1,2d;$d' >"$tmp_dir/trigger.sql"
  timeout 20 "$pg_bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "$pg_url" -f "$tmp_dir/trigger.sql" \
    >"$tmp_dir/trigger.out" 2>&1
  expect_status "stale writer: the documented trigger is created" 0 "$?" "$(cat "$tmp_dir/trigger.out")"

  # write.sh WHO [GO]: notes the token, waits for a line on GO when given,
  # then writes as WHO with its token, the SQLSTATE of a failure in psql-WHO.
  cat >"$tmp_dir/write.sh" <<'SCRIPT'
echo "$COROLOCK_TOKEN" >"$W_DIR/token-$1"
[ -n "${2:-}" ] && read -r _ <"$2"
timeout 20 "$W_PSQL" -X -q -At -d "$W_URL" -c '\set VERBOSITY sqlstate' \
  -c "BEGIN; SET LOCAL corolock.token = '$COROLOCK_TOKEN'; INSERT INTO stock VALUES ('sku-1', $COROLOCK_TOKEN, '$1') ON CONFLICT (sku) DO UPDATE SET token = excluded.token, writer = excluded.writer; COMMIT" \
  >"$W_DIR/psql-$1" 2>&1
echo $? >"$W_DIR/code-$1"
SCRIPT
  export W_DIR=$tmp_dir W_PSQL=$pg_bindir/psql W_URL=$pg_url
  mkfifo "$tmp_dir/go-a"
  spawn 90 "$bin" run --url "$lock_url" --lease 1s --on-lost ignore stock -- \
    sh "$tmp_dir/write.sh" a "$tmp_dir/go-a"
  local a_timeout=$last_pid a_pid
  expect_true "stale writer: A holds the lock" wait_until 20 test -s "$tmp_dir/token-a"
  a_pid=$(corolock_pid "$a_timeout")
  [ -n "$a_pid" ] || { fail "stale writer: A's corolock process"; return; }
  kill -STOP "$a_pid"  # no renewals from here: its lease runs out

  cl 40 run --url "$lock_url" -w 30 --lease 10s stock -- sh "$tmp_dir/write.sh" b
  expect_status "stale writer: B takes the lock once A's lease ran out" 0 "$last_status" \
    "$(cat "$tmp_dir/err")"
  local token_a token_b
  token_a=$(cat "$tmp_dir/token-a")
  token_b=$(cat "$tmp_dir/token-b" 2>/dev/null)
  expect_cond "stale writer: B's token $token_b is above A's $token_a" '[ "${token_b:-0}" -gt "$token_a" ]'
  expect_cond "stale writer: B's write is taken" '[ "$(cat "$tmp_dir/code-b")" = 0 ]'

  kill -CONT "$a_pid"
  echo go >"$tmp_dir/go-a"
  reap "$a_timeout"
  expect_cond "stale writer: A's late write fails" '[ "$(cat "$tmp_dir/code-a" 2>/dev/null)" != 0 ]'
  expect_match "stale writer: with the fence's SQLSTATE CLF01" "CLF01" "$tmp_dir/psql-a"
  expect_cond "stale writer: the table holds B's row" \
    '[ "$(psql_value "SELECT writer || '"' '"' || token FROM stock")" = "b $token_b" ]'
  expect_cond "stale writer: the fence records B's token" \
    '[ "$(psql_value "SELECT token FROM corolock.fences WHERE resource = '"'stock'"'")" = "$token_b" ]'
}

[ $# -eq 0 ] && set -- redis postgresql pg_stale_writer
for g in "$@"; do
  echo "# $g"
  "group_$g"
done
finish
