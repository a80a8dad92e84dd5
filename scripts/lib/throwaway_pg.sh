# Sourced by scripts and shell tests that need a PostgreSQL server of their own.
#
#   source scripts/lib/throwaway_pg.sh
#   throwaway_pg_available         # true when initdb and postgres are found
#   throwaway_pg_start DIR         # sets PG_PORT, PG_PID and PG_URL, or returns 1
#   ...
#   throwaway_pg_stop              # by the PID it started; safe to call twice
#
# As test/support/pg_server.cpp does it: initdb (trust, user corolock) in a
# temporary directory, postgres listening on 127.0.0.1 only with its socket
# in that directory, fsync=off unless COROLOCK_BENCH_FSYNC=on; as root both
# run as the user postgres (else nobody). Its log is DIR/postgres.log. The
# binaries are in $COROLOCK_PG_BINDIR, else beside postgres on PATH, else
# the newest /usr/lib/postgresql/*/bin. Ready when pg_isready says so.

# shellcheck source=stop_pid.sh
source "$(dirname "${BASH_SOURCE[0]}")/stop_pid.sh"

PG_PORT=""
PG_PID=""
PG_URL=""
_pg_dir=""

_pg_bindir() {
  local p
  if [[ -n ${COROLOCK_PG_BINDIR:-} ]]; then
    [[ -x $COROLOCK_PG_BINDIR/postgres ]] && echo "$COROLOCK_PG_BINDIR"
    return 0
  fi
  if p=$(command -v postgres) && p=$(dirname "$(readlink -f "$p")") && [[ -x $p/initdb ]]; then
    echo "$p"
    return 0
  fi
  p=$(printf '%s\n' /usr/lib/postgresql/*/bin/postgres | sort -rV | head -n 1)
  [[ -x $p ]] && dirname "$p"
  return 0
}

throwaway_pg_available() { [[ -n $(_pg_bindir) ]]; }

throwaway_pg_start() {
  local log bin as=() owner="" port
  log=$(cd "$1" && pwd)/postgres.log || return 1
  bin=$(_pg_bindir)
  [[ -n $bin ]] || { echo "postgres and initdb not found (COROLOCK_PG_BINDIR)" >&2; return 1; }
  _pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-pg-XXXXXX") || return 1
  if ((EUID == 0)); then
    owner=postgres
    getent passwd postgres >/dev/null || owner=nobody
    chown "$owner:" "$_pg_dir" 2>/dev/null || chown "$owner" "$_pg_dir" || return 1
    as=(setpriv --reuid="$owner" --regid="$(id -g "$owner")" --clear-groups --)
  fi
  if ! timeout 120 "${as[@]}" "$bin/initdb" -D "$_pg_dir/data" -U corolock -A trust -E UTF8 \
    --no-sync --no-instructions >"$log" 2>&1; then
    echo "initdb failed:" >&2
    cat "$log" >&2
    return 1
  fi
  # Random ports below Linux's ephemeral range; a taken one makes postgres
  # exit at once and we try another.
  for _ in $(seq 10); do
    port=$((20000 + RANDOM % 12000))
    "${as[@]}" "$bin/postgres" -D "$_pg_dir/data" -p "$port" -k "$_pg_dir" \
      -c listen_addresses=127.0.0.1 -c "fsync=${COROLOCK_BENCH_FSYNC:-off}" \
      -c max_connections=200 -c shared_buffers=16MB -c log_min_messages=fatal >>"$log" 2>&1 &
    PG_PID=$!
    # Up to 30 s for it to accept connections, or to die trying.
    for _ in $(seq 300); do
      kill -0 "$PG_PID" 2>/dev/null || break
      if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 2>/dev/null; then
        PG_PORT=$port
        PG_URL="postgresql://corolock@127.0.0.1:$port/postgres"
        return 0
      fi
      sleep 0.1
    done
    stop_pid "$PG_PID" KILL
    PG_PID=""
  done
  echo "could not start postgres on a free loopback port:" >&2
  cat "$log" >&2
  return 1
}

throwaway_pg_stop() {
  # SIGINT: a fast shutdown (clients are disconnected, no checkpoint wait).
  stop_pid "$PG_PID" INT
  PG_PID=""
  [[ -n $_pg_dir ]] && rm -rf "$_pg_dir"
  _pg_dir=""
}
