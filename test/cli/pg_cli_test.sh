#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool over PostgreSQL: run and
# status with a postgresql:// URL (list and break are refused), against a
# throwaway server that this script makes (initdb) and starts on a free
# loopback port, as test/support/pg_server.cpp does (as root, as the user
# postgres or nobody).
#
#   pg_cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: run exclusion inspect (default: all). Needs PostgreSQL's initdb
# and postgres (COROLOCK_PG_BINDIR, else the newest
# /usr/lib/postgresql/*/bin), and python3 (or COROLOCK_PYTHON) for --json
# output.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: pg_cli_test.sh COROLOCK_BIN [GROUP...]}
shift
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(run exclusion inspect)

pg_bindir=${COROLOCK_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-pg-cli-test.XXXXXX")
url=""

# The shared harness: assertions, spawn/reap, free_port, cl, json_field,
# stop_pid, trap_node_cleanup (the server's pid goes in node_pids).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap_node_cleanup

# status of NAME, quietly, into $tmp_dir/st.
st() { timeout 10 "$bin" status --url "$url" "$1" >"$tmp_dir/st" 2>&1; }
is_held() { st "$1" && grep -Eq '^held: +yes$' "$tmp_dir/st"; }
is_free() { st "$1" && grep -Eq '^held: +no$' "$tmp_dir/st"; }
has_waiters() { st "$1" && grep -Eq "^waiters: +$2\$" "$tmp_dir/st"; }

host=$(hostname)

# As root, the server runs as postgres (or nobody): it refuses root.
as_owner=()
if [ "$(id -u)" = 0 ]; then
  owner=postgres
  id "$owner" >/dev/null 2>&1 || owner=nobody
  as_owner=(setpriv --reuid="$owner" --regid="$(id -g "$owner")" --clear-groups --)
  chown "$owner" "$tmp_dir"
fi

pg_serving() {  # PORT: the server accepts a connection (pg_isready)
  "$pg_bindir/pg_isready" -q -h 127.0.0.1 -p "$1" -t 1
}

start_pg() {
  local port
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

# ---- run ----

group_run() {
  cl 30 run --url "$url" r1 -- sh -c "echo \"\$COROLOCK_NAME \$COROLOCK_TOKEN\" >'$tmp_dir/r1-token'; exit 7"
  expect_status "run over pg passes the command's status" 7 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "run over pg: COROLOCK_NAME and COROLOCK_TOKEN (the fence)" grep -Eqx 'r1 [1-9][0-9]*' "$tmp_dir/r1-token"
  cl 30 run --url "$url" r1 -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/r1-token2'"
  expect_status "run over pg: a second run of a released lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  local t1 t2
  t1=$(cut -d' ' -f2 "$tmp_dir/r1-token")
  t2=$(cat "$tmp_dir/r1-token2")
  expect_cond "run over pg: the second token is higher ($t1 < $t2)" '[ -n "$t1" ] && [ -n "$t2" ] && [ "$t1" -lt "$t2" ]'
  expect_true "run over pg: the lock is free afterwards" is_free r1

  cl 30 run --url "$url" -v r2 -- true
  expect_status "run -v over pg" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run -v over pg: says the lock was free" "lock 'r2' is free" "$tmp_dir/err"
  expect_match "run -v over pg: says it acquired" "acquired lock 'r2' \(token [0-9]+" "$tmp_dir/err"

  # Several NAMEs: a multi_lock, a fence per name.
  cl 30 run --url "$url" rm2 rm1 -- sh -c 'echo "$COROLOCK_LOCKS $COROLOCK_NAME_1=$COROLOCK_TOKEN_1 $COROLOCK_NAME_2=$COROLOCK_TOKEN_2"'
  expect_status "run over pg with two NAMEs" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run over pg with two NAMEs: both, in order, with tokens" '^2 rm1=[1-9][0-9]* rm2=[1-9][0-9]*$' "$tmp_dir/out"

  # Options the backend does not offer, and the Redis-only ones, refused.
  local opt what
  while IFS='|' read -r what opt; do
    cl 10 run --url "$url" $opt r3 -- touch "$tmp_dir/r3-ran"
    expect_status "run over pg: $what is a usage error" 64 "$last_status"
    expect_match "run over pg: $what: says why" "$what" "$tmp_dir/err"
  done <<'EOF'
--fair|--fair
--capacity|--capacity 2
-s \(--shared\)|-s
-x \(--exclusive\)|-x
--replicas|--replicas 1
--tls-insecure applies to Redis URLs only|--tls-insecure
--password-file applies to Redis URLs only|--password-file /dev/null
EOF
  expect_true "run over pg: no refused run ran its command" [ ! -e "$tmp_dir/r3-ran" ]

  cl 10 run --url "postgresql://corolock:s3cret@127.0.0.1:5432/postgres?nosuchoption=1" r3 -- true
  expect_status "run: a malformed PostgreSQL URL" 64 "$last_status"
  expect_match "run: says what is wrong" "malformed PostgreSQL URL in --url: " "$tmp_dir/err"
  expect_no_match "run: the password is not echoed" "s3cret" "$tmp_dir/err"
  cl 10 run --url "postgres://corolock@${url#postgresql://corolock@}" r4 -- sh -c 'echo $COROLOCK_TOKEN'
  expect_status "run: a postgres:// URL works too" 0 "$last_status" "$(cat "$tmp_dir/err")"

  local dead
  dead=$(free_port)
  cl 30 run --url "postgresql://corolock:s3cret@127.0.0.1:$dead/postgres" r3 -- touch "$tmp_dir/r3-ran"
  expect_status "run: PostgreSQL unreachable" 69 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run: names PostgreSQL and the endpoint" "cannot reach PostgreSQL at 127.0.0.1:$dead" "$tmp_dir/err"
  expect_no_match "run: unreachable: the password is not echoed" "s3cret" "$tmp_dir/err"
  expect_true "run: the command did not run" [ ! -e "$tmp_dir/r3-ran" ]
}

# ---- two runs on one name ----

group_exclusion() {
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
  cl 20 run --url "$url" --wait 1s ex -- touch "$tmp_dir/ex-ran"
  expect_status "exclusion: --wait 1s on a held lock" 75 "$last_status"
  expect_true "exclusion: neither ran its command" [ ! -e "$tmp_dir/ex-ran" ]
  expect_true "exclusion: the runs that gave up left the queue" has_waiters ex 1
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

# ---- status (list and break refused) ----

group_inspect() {
  cl 10 status --url "$url" ins
  expect_status "status of a free lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "status: not held" '^held: +no$' "$tmp_dir/out"
  cl 10 status --url "$url" --json ins
  expect_true "status --json: held is false" [ "$(json_field "$tmp_dir/out" held)" = "false" ]

  spawn 60 "$bin" run --url "$url" ins -- \
    sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/ins-token'; $(long_child 30)"
  local holder=$last_pid
  expect_true "status: holder acquired" wait_until 15 test -s "$tmp_dir/ins-token"
  local token holder_pid
  token=$(cat "$tmp_dir/ins-token")
  holder_pid=$(corolock_pid "$holder")
  cl 10 status --url "$url" ins
  expect_status "status of a held lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "status: held" '^held: +yes$' "$tmp_dir/out"
  expect_match "status: owner" '^owner: +[0-9a-f]{32}$' "$tmp_dir/out"
  expect_match "status: the holder is the run's host and pid" "^holder: +$host:$holder_pid\$" "$tmp_dir/out"
  expect_match "status: the label is the run's command" "^label: +sh -c echo .*ins-token" "$tmp_dir/out"
  expect_match "status: last token is the holder's token" "^last token: +$token\$" "$tmp_dir/out"
  expect_match "status: the holding session" '^session: +server pid [0-9]+$' "$tmp_dir/out"
  cl 10 status --url "$url" --json ins
  expect_true "status --json: held is true" [ "$(json_field "$tmp_dir/out" held)" = "true" ]
  expect_true "status --json: last_token" [ "$(json_field "$tmp_dir/out" last_token)" = "$token" ]
  expect_true "status --json: pid" [ "$(json_field "$tmp_dir/out" pid)" = "$holder_pid" ]
  expect_true "status --json: backend" [ "$(json_field "$tmp_dir/out" backend)" = '"postgresql"' ]

  cl 10 list --url "$url"
  expect_status "list over pg is refused" 64 "$last_status"
  expect_match "list: says what is offered" "list is not offered on PostgreSQL yet: run and status are" "$tmp_dir/err"
  cl 10 break --url "$url" ins
  expect_status "break over pg is refused" 64 "$last_status"
  expect_true "break: the lock is still held" is_held ins

  signal_corolock TERM "$holder"
  reap "$holder"
  expect_status "status: the holder ends on SIGTERM" 143 "$last_status"
  expect_true "status: free after the holder ended" wait_until 10 is_free ins
}

# ---- main ----

for g in "${groups[@]}"; do
  case $g in
    run | exclusion | inspect) ;;
    *) echo "unknown group '$g'" >&2; exit 2 ;;
  esac
done
start_pg || exit 1
for g in "${groups[@]}"; do
  echo "# $g"
  "group_$g"
done

finish
