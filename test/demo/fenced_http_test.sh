#!/usr/bin/env bash
# The fenced HTTP store example (examples/fenced_http_store.cpp) against a
# throwaway redis-server and the corolock CLI: a holder frozen past its lease
# (SIGSTOP) writes after the next holder did, and the store refuses it; a
# holder's write after its clean release is refused (the sequencer check);
# a current holder's write is taken.
#
#   fenced_http_test.sh SOURCE_DIR
#
# Needs COROLOCK_HTTP_STORE_BIN and COROLOCK_CLI_BIN; curl; redis-server from
# PATH or COROLOCK_REDIS_SERVER.
set -euo pipefail

source_dir=${1:?usage: fenced_http_test.sh SOURCE_DIR}
: "${COROLOCK_HTTP_STORE_BIN:?COROLOCK_HTTP_STORE_BIN must name the built corolock_fenced_http_store}"
: "${COROLOCK_CLI_BIN:?COROLOCK_CLI_BIN must name the built corolock}"
source "$source_dir/scripts/lib/throwaway_redis.sh"

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-http-store-test.XXXXXX")
server_pid=""
store_pid=""
frozen_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  [[ -n $frozen_pid ]] && kill -CONT "$frozen_pid" 2>/dev/null || true
  stop_pid "$frozen_pid"
  stop_pid "$store_pid"
  stop_pid "$server_pid"
  rm -rf "$tmp_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
# Waits (at most 20 s) until FILE is not empty.
await_file() {
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -s $1 ]] && return 0
    sleep 0.1
  done
  fail "timed out waiting for $1"
}

throwaway_redis_start "$tmp_dir" || fail "could not start redis-server"
server_pid=$REDIS_PID
url="redis://127.0.0.1:$REDIS_PORT"

"$COROLOCK_HTTP_STORE_BIN" --url "$url" --listen 127.0.0.1:0 >"$tmp_dir/store.out" 2>&1 &
store_pid=$!
await_file "$tmp_dir/store.out"
listening=$(head -n 1 "$tmp_dir/store.out")
[[ $listening == "listening on 127.0.0.1:"* ]] || fail "the store printed: $listening"
store="http://${listening#listening on }"

# put KEY VALUE LOCK TOKEN: prints the HTTP status.
put() {
  curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary "$2" \
    -H "Corolock-Lock: $3" -H "Corolock-Token: $4" "$store/$1"
}

[[ $(put k x job notanumber) == 400 ]] || fail "a bad token must get 400"

# A: takes the lock with a 1 s lease, writes its token down and waits for
# the go file before it writes: by then it has been frozen past its lease.
mkfifo "$tmp_dir/go-a"
"$COROLOCK_CLI_BIN" run --url "$url" --lease 1s --on-lost ignore job -- \
  sh -c 'echo "$COROLOCK_TOKEN" >"$0/token-a"; read -r _ <"$0/go-a";
         curl -s -o /dev/null -w "%{http_code}" -X PUT --data-binary A \
           -H "Corolock-Lock: job" -H "Corolock-Token: $COROLOCK_TOKEN" "$1/k" >"$0/code-a"' \
  "$tmp_dir" "$store" >"$tmp_dir/a.out" 2>&1 &
frozen_pid=$!
await_file "$tmp_dir/token-a"
token_a=$(cat "$tmp_dir/token-a")
kill -STOP "$frozen_pid"  # no renewals from here: the lease runs out

# B: waits for A's lease to end, then writes as the current holder.
"$COROLOCK_CLI_BIN" run --url "$url" -w 20 --lease 10s job -- \
  sh -c 'echo "$COROLOCK_TOKEN" >"$0/token-b";
         curl -s -o /dev/null -w "%{http_code}" -X PUT --data-binary B \
           -H "Corolock-Lock: job" -H "Corolock-Token: $COROLOCK_TOKEN" "$1/k" >"$0/code-b"' \
  "$tmp_dir" "$store" || fail "B could not take the lock after A's lease ran out"
token_b=$(cat "$tmp_dir/token-b")
(( token_b > token_a )) || fail "B's token $token_b is not above A's $token_a"
[[ $(cat "$tmp_dir/code-b") == 204 ]] || fail "B's write: $(cat "$tmp_dir/code-b"), not 204"

# A wakes and writes with its old token: refused.
kill -CONT "$frozen_pid"
echo go >"$tmp_dir/go-a"
status=0
wait "$frozen_pid" || status=$?
frozen_pid=""
[[ $(cat "$tmp_dir/code-a") == 409 ]] || fail "the stale write of A (token $token_a): $(cat "$tmp_dir/code-a"), not 409"
value=$(curl -s "$store/k")
[[ $value == B ]] || fail "the store holds '$value' after the stale write, not B"

# C: its token is the highest, but it released before writing: refused by
# the sequencer check (the store's own fence alone would take it).
"$COROLOCK_CLI_BIN" run --url "$url" job -- sh -c 'echo "$COROLOCK_TOKEN" >"$0/token-c"' "$tmp_dir" ||
  fail "C could not take the free lock"
token_c=$(cat "$tmp_dir/token-c")
[[ $(put k C job "$token_c") == 409 ]] || fail "a write after the release (token $token_c) must get 409"
[[ $(curl -s "$store/k") == B ]] || fail "the store changed after a refused write"

echo "ok: B (token $token_b) wrote; frozen A (token $token_a, run exit $status) and released C (token $token_c) were refused"
