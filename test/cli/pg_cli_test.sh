#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool over PostgreSQL: run,
# elect (one case, in url_cases),
# status, list and break with a postgresql:// URL, against a
# throwaway server that this script makes (initdb) and starts on a free
# loopback port, as test/support/pg_server.cpp does (as root, as the user
# postgres or nobody).
#
#   pg_cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: run exclusion inspect (default: all); the cases are
# store_cli_cases.sh's, shared with zk_cli_test.sh. Needs PostgreSQL's initdb
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

pg_bindir=${COROLOCK_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-pg-cli-test.XXXXXX")
url=""

# The shared harness: assertions, spawn/reap, free_port, cl, json_field,
# stop_pid, trap_node_cleanup (the server's pid goes in node_pids).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap_node_cleanup

start_server() { pg_start; }

service=PostgreSQL
over="over pg"
backend=postgresql
holder_re='^session: +server pid [0-9]+$'
removed_re='\(ended its session, server pid [0-9]+\)'

url_cases() {
  cl 10 run --url "postgresql://corolock:s3cret@127.0.0.1:5432/postgres?nosuchoption=1" r3 -- true
  expect_status "run: a malformed PostgreSQL URL" 64 "$last_status"
  expect_match "run: says what is wrong" "malformed PostgreSQL URL in --url: " "$tmp_dir/err"
  expect_no_match "run: the password is not echoed" "s3cret" "$tmp_dir/err"
  cl 10 run --url "postgres://corolock@${url#postgresql://corolock@}" r4 -- true
  expect_status "run: a postgres:// URL works too" 0 "$last_status" "$(cat "$tmp_dir/err")"
  cl 20 elect --url "$url" --value v el -- sh -c 'test "$COROLOCK_LEADER_VALUE" = v && test -n "$COROLOCK_EPOCH"'
  expect_status "elect: leads on PostgreSQL, the command sees its epoch and value" 0 "$last_status" "$(cat "$tmp_dir/err")"

  # A role that may read the lock table but not end another role's session
  # (docs/security.md, "The minimal permissions"): break says PostgreSQL
  # refused it, in the server's words, and the holder keeps the lock.
  if [ -x "$pg_bindir/psql" ]; then
    timeout 20 "$pg_bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "$url" \
      -c "CREATE ROLE viewer LOGIN; GRANT SELECT ON corolock_locks TO viewer" >"$tmp_dir/psql.log" 2>&1
    local made=$?
    expect_status "break: the role viewer is made" 0 "$made" "$(cat "$tmp_dir/psql.log")"
    spawn 60 "$bin" run --url "$url" perm -- \
      sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/perm-token'; $(long_child 30)"
    local holder=$last_pid
    expect_true "break: holder acquired" wait_until 15 test -s "$tmp_dir/perm-token"
    cl 10 break --url "postgresql://viewer@${url#postgresql://corolock@}" perm
    expect_status "break without the right to signal the holder: 76" 76 "$last_status" "$(cat "$tmp_dir/err")"
    expect_match "break: PostgreSQL refused it, in its words" \
      "PostgreSQL at 127\.0\.0\.1:[0-9]+ refused it for lack of permission: .*superuser" \
      "$tmp_dir/err"
    expect_true "break: the lock is still held" is_held perm
    signal_corolock TERM "$holder"
    reap "$holder"
  fi
}

dead_url() { echo "postgresql://corolock:s3cret@127.0.0.1:$1/postgres"; }

source "$(dirname "${BASH_SOURCE[0]}")/store_cli_cases.sh"
run_groups "$@"
