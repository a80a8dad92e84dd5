#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool over etcd: run, status,
# list and break with an etcd:// URL, against a throwaway single-member etcd
# that this script starts on free loopback ports.
#
#   etcd_cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: run exclusion inspect list (default: all). Needs etcd (from PATH, or
# COROLOCK_ETCD) and python3 (or COROLOCK_PYTHON) to parse --json output.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: etcd_cli_test.sh COROLOCK_BIN [GROUP...]}
shift
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(run exclusion inspect list)

etcd_bin=${COROLOCK_ETCD:-etcd}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-etcd-cli-test.XXXXXX")
url=""
etcd_pid=""

# The shared harness: assertions, spawn/reap, free_port, cl, json_field, stop_pid.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cleanup() {
  stop_started
  stop_pid "$etcd_pid"
  rm -rf "$tmp_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# status of NAME, quietly, into $tmp_dir/st.
st() { timeout 10 "$bin" status --url "$url" "$1" >"$tmp_dir/st" 2>&1; }
is_held() { st "$1" && grep -Eq '^held: +yes$' "$tmp_dir/st"; }
# status exits 1 for a free lock (0 held), as test(1).
is_free() { st "$1"; [ $? = 1 ] && grep -Eq '^held: +no$' "$tmp_dir/st"; }
has_waiters() { st "$1" && grep -Eq "^waiters: +$2\$" "$tmp_dir/st"; }

host=$(hostname)
tab=$'\t'
since_re='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

etcd_healthy() {  # PORT
  local reply
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
    cat <&3' _ "$1" 2>/dev/null)
  grep -q '"health":"true"' <<<"$reply"
}

start_etcd() {
  local client peer
  client=$(free_port) || return 1
  peer=$(free_port) || return 1
  [ "$client" = "$peer" ] && peer=$((peer + 1))
  "$etcd_bin" --name cli --data-dir "$tmp_dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "cli=http://127.0.0.1:$peer" --log-level error --logger zap \
    >"$tmp_dir/etcd.log" 2>&1 &
  etcd_pid=$!
  url="etcd://127.0.0.1:$client"
  # Up once its /health says so (asked without the tool under test).
  if ! wait_until 20 etcd_healthy "$client"; then
    echo "etcd did not start:" >&2
    tail -n 20 "$tmp_dir/etcd.log" >&2
    return 1
  fi
}

# ---- run ----

group_run() {
  cl 30 run --url "$url" r1 -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/r1-token'; exit 7"
  expect_status "run over etcd passes the command's status" 7 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "run over etcd: COROLOCK_TOKEN is a revision" grep -Eqx '[1-9][0-9]*' "$tmp_dir/r1-token"
  cl 30 run --url "$url" r1 -- true
  expect_status "run over etcd: a second run of a released lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "run over etcd: the lock is free afterwards" is_free r1

  cl 30 run --url "$url" -v r2 -- true
  expect_status "run -v over etcd" 0 "$last_status"
  expect_match "run -v over etcd: says the lock was free" "lock 'r2' is free" "$tmp_dir/err"
  expect_match "run -v over etcd: says it acquired" "acquired lock 'r2' \(token [0-9]+" "$tmp_dir/err"

  # Several NAMEs: a multi_lock on etcd, a revision per name.
  cl 30 run --url "$url" rm2 rm1 -- sh -c 'echo "$COROLOCK_LOCKS $COROLOCK_NAME_1=$COROLOCK_TOKEN_1 $COROLOCK_NAME_2=$COROLOCK_TOKEN_2"'
  expect_status "run over etcd with two NAMEs" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run over etcd with two NAMEs: both, in order, with revisions" '^2 rm1=[1-9][0-9]* rm2=[1-9][0-9]*$' "$tmp_dir/out"
  expect_true "run over etcd with two NAMEs: both free afterwards" is_free rm1
  expect_true "run over etcd with two NAMEs: both free afterwards (rm2)" is_free rm2

  # Options that only mean something on Redis are refused, not ignored.
  cl 10 run --url "$url" --tls-insecure r3 -- touch "$tmp_dir/r3-ran"
  expect_status "run over etcd: --tls-insecure is a usage error" 64 "$last_status"
  expect_match "run over etcd: says it is for Redis" "--tls-insecure applies to Redis URLs only" "$tmp_dir/err"
  expect_true "run over etcd: the command did not run" [ ! -e "$tmp_dir/r3-ran" ]
  cl 10 run --url "etcd://127.0.0.1" r3 -- true
  expect_status "run: an etcd URL without a port" 64 "$last_status"
  expect_match "run: says what is wrong" "malformed etcd URL in --url: .*port" "$tmp_dir/err"

  local dead
  dead=$(free_port)
  cl 30 run --url "etcd://127.0.0.1:$dead" r3 -- touch "$tmp_dir/r3-ran"
  expect_status "run: etcd unreachable" 69 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run: names etcd" "cannot reach etcd at 127.0.0.1:$dead" "$tmp_dir/err"
  expect_true "run: the command did not run" [ ! -e "$tmp_dir/r3-ran" ]

  # The run's metrics, from the etcd backend.
  cl 30 run --url "$url" --metrics-file "$tmp_dir/r4.prom" r4 -- true
  expect_status "run over etcd with --metrics-file" 0 "$last_status"
  expect_match "run over etcd: metrics written" 'corolock_run_exit_status\{lock="r4"\} 0' "$tmp_dir/r4.prom"
}

# ---- two runs on one name (lib.sh) ----

group_exclusion() { exclusion_cases; }

# ---- status and break ----

group_inspect() {
  cl 10 status --url "$url" ins
  expect_status "status of a free lock: exit 1" 1 "$last_status"
  expect_match "status: not held" '^held: +no$' "$tmp_dir/out"
  cl 10 status --url "$url" --json ins
  expect_status "status --json of a free lock: exit 1" 1 "$last_status"
  expect_true "status --json: held is false" [ "$(json_field "$tmp_dir/out" held)" = "false" ]

  spawn 90 "$bin" run --url "$url" --lease 20s ins -- \
    sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/ins-token'; $(long_child 40)" 2>"$tmp_dir/ins-holder-err"
  local holder=$last_pid
  expect_true "status: holder acquired" wait_until 10 test -s "$tmp_dir/ins-token"
  local token
  token=$(cat "$tmp_dir/ins-token")
  cl 10 status --url "$url" ins
  expect_status "status of a held lock" 0 "$last_status"
  expect_match "status: held" '^held: +yes$' "$tmp_dir/out"
  expect_match "status: owner" '^owner: +[0-9a-f]{32}$' "$tmp_dir/out"
  local owner holder_pid
  owner=$(sed -n 's/^owner: *//p' "$tmp_dir/out")
  holder_pid=$(corolock_pid "$holder")
  # The holder record, as on Redis: host:pid, COMMAND as the label, since.
  expect_match "status: the holder is the run's host and pid" "^holder: +$host:$holder_pid\$" "$tmp_dir/out"
  expect_match "status: the label is the run's program" "^label: +sh$" "$tmp_dir/out"
  expect_match "status: since and held for" "^since: +$since_re \(held for [0-9.]+s, by the hosts' clocks\)\$" "$tmp_dir/out"
  expect_no_match "status: no raw value line" '^value:' "$tmp_dir/out"
  expect_match "status: last token is the holder's token" "^last token: +$token\$" "$tmp_dir/out"
  expect_match "status: ttl from the lease" '^ttl: +([1-9]|1[0-9]|20) s \(lease [0-9a-f]+\)$' "$tmp_dir/out"
  expect_match "status: no waiters" '^waiters: +0$' "$tmp_dir/out"
  check_cases "over etcd" ins "$token"
  cl 10 status --url "$url" --json ins
  expect_status "status --json of a held lock" 0 "$last_status"
  expect_true "status --json: held is true" [ "$(json_field "$tmp_dir/out" held)" = "true" ]
  expect_true "status --json: owner" [ "$(json_field "$tmp_dir/out" owner)" = "\"$owner\"" ]
  expect_true "status --json: kind is mutex" [ "$(json_field "$tmp_dir/out" kind)" = "\"mutex\"" ]
  expect_true "status --json: last_token" [ "$(json_field "$tmp_dir/out" last_token)" = "$token" ]
  expect_true "status --json: host" [ "$(json_field "$tmp_dir/out" host)" = "\"$host\"" ]
  expect_true "status --json: pid" [ "$(json_field "$tmp_dir/out" pid)" = "$holder_pid" ]
  expect_true "status --json: label" [ "$(json_eval "$tmp_dir/out" "j['label'] == 'sh'")" = "True" ]
  expect_true "status --json: since" [ "$(json_eval "$tmp_dir/out" "bool(__import__('re').fullmatch(r'$since_re', j['since']))")" = "True" ]
  expect_true "status --json: held_for_ms" [ "$(json_eval "$tmp_dir/out" "j['held_for_ms'] >= 0")" = "True" ]
  expect_true "status --json: the holder's key carries the record" [ "$(json_eval "$tmp_dir/out" "j['holder']['pid']")" = "$holder_pid" ]

  # A waiter shows in status; break removes the holder and the waiter runs.
  spawn 60 "$bin" run --url "$url" --wait 20s ins -- sh -c "echo ran >'$tmp_dir/ins-waiter'"
  local waiter=$last_pid
  expect_true "status: the waiter is listed" wait_until 10 has_waiters ins 1
  expect_match "status: the waiter's host, pid and since" "^  [0-9a-f]{32} \(created at revision [0-9]+; $host:[0-9]+ waiting since $since_re\)\$" "$tmp_dir/st"
  cl 10 break --url "$url" ins
  expect_status "break a held lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "break: says what it removed" "^removed lock ins held by $owner \\(deleted its key\\)\$" "$tmp_dir/out"
  reap "$waiter"
  expect_status "break: the waiter ran" 0 "$last_status"
  expect_true "break: the waiter's command ran" test -s "$tmp_dir/ins-waiter"
  cl 10 break --url "$url" ins
  expect_status "break a free lock" 0 "$last_status"
  expect_match "break: not held" '^lock ins was not held$' "$tmp_dir/out"
  expect_true "status: free after the break" is_free ins
  # The broken holder sees its key deleted (its watch) and stops the
  # command: exit 70, as on Redis. Given 10 s, then signalled.
  if wait_until 10 eval "! kill -0 $holder 2>/dev/null"; then
    pass "break: the broken holder stopped by itself"
  else
    fail "break: the broken holder stopped by itself" "$(cat "$tmp_dir/ins-holder-err")"
    local hp
    hp=$(corolock_pid "$holder")
    [ -n "$hp" ] && kill -TERM "$hp" 2>/dev/null
  fi
  reap "$holder"
  expect_status "break: the broken holder reports the loss" 70 "$last_status"
  expect_match "break: the holder says the lease was lost" "lost the lease on lock 'ins'" "$tmp_dir/ins-holder-err"
}

# ---- list ----

group_list() {
  cl 10 list --url "$url"
  expect_status "list over etcd: nothing held" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "list: only the header" [ "$(list_tabs "$tmp_dir/out")" = "NAME${tab}KIND${tab}STATE${tab}HOLDER${tab}SINCE${tab}HELD(s)${tab}TTL(s)${tab}DELAY(s)${tab}WAITERS${tab}PERMITS${tab}LABEL" ]
  expect_list_columns_documented "list over etcd" "$tmp_dir/out"
  cl 10 list --url "$url" --json
  expect_status "list --json over etcd: nothing held" 0 "$last_status"
  expect_true "list --json: no locks" [ "$(json_field "$tmp_dir/out" locks)" = "[]" ]
  expect_true "list --json: not truncated" [ "$(json_field "$tmp_dir/out" truncated)" = "false" ]

  # Two holders, kept until the test says go; a waiter behind the first.
  local go=$tmp_dir/ls-go name
  local -a holders=()
  for name in ls-a ls-b; do
    spawn 60 "$bin" run --url "$url" --lease 20s "$name" -- \
      sh -c "touch '$tmp_dir/$name-held'; for i in \$(seq 300); do [ -e '$go' ] && break; sleep 0.1; done"
    holders+=("$last_pid")
  done
  expect_true "list: both holders acquired" wait_until 10 test -e "$tmp_dir/ls-a-held" -a -e "$tmp_dir/ls-b-held"
  local pid_a
  pid_a=$(corolock_pid "${holders[0]}")
  spawn 60 "$bin" run --url "$url" -v --wait 30s ls-a -- true 2>"$tmp_dir/ls-waiter-err"
  local waiter=$last_pid
  expect_true "list: the waiter waits" wait_until 10 has_waiters ls-a 1
  expect_match "run -v over etcd: names the holder" "lock 'ls-a' is held by $host:$pid_a since $since_re \(label 'sh'\)" "$tmp_dir/ls-waiter-err"

  cl 10 list --url "$url"
  expect_status "list over etcd" 0 "$last_status" "$(cat "$tmp_dir/err")"
  list_tabs "$tmp_dir/out" >"$tmp_dir/list.tsv"
  expect_match "list: ls-a with its holder, ttl (whole seconds), label and one waiter" \
    "^ls-a${tab}mutex${tab}held${tab}$host:$pid_a${tab}$since_re${tab}[0-9]+\\.[0-9]{3}${tab}([1-9]|1[0-9]|20)${tab}-${tab}1${tab}-${tab}sh\$" "$tmp_dir/list.tsv"
  expect_match "list: ls-b with no waiter" "^ls-b${tab}mutex${tab}held${tab}$host:[0-9]+${tab}.*${tab}0${tab}-${tab}sh\$" "$tmp_dir/list.tsv"
  expect_true "list: a header and two locks" [ "$(wc -l <"$tmp_dir/out")" = 3 ]
  cl 10 list --url "$url" 'ls-[b-z]*'
  expect_status "list over etcd with a PATTERN" 0 "$last_status"
  expect_true "list PATTERN: the header and ls-b only" [ "$(cut -d' ' -f1 "$tmp_dir/out" | tr '\n' ' ')" = "NAME ls-b " ]
  cl 10 list --url "$url" 'nothing-*'
  expect_true "list PATTERN: none matches" [ "$(wc -l <"$tmp_dir/out")" = 1 ]
  cl 10 list --url "$url" --json
  expect_status "list --json over etcd" 0 "$last_status"
  expect_true "list --json: the names" [ "$(json_eval "$tmp_dir/out" "[l['name'] for l in j['locks']]")" = "['ls-a', 'ls-b']" ]
  expect_true "list --json: ls-a's holder pid" [ "$(json_eval "$tmp_dir/out" "j['locks'][0]['pid']")" = "$pid_a" ]
  expect_true "list --json: ls-a's label" [ "$(json_eval "$tmp_dir/out" "j['locks'][0]['label'] == 'sh'")" = "True" ]
  expect_true "list --json: ls-a's waiters" [ "$(json_eval "$tmp_dir/out" "len(j['locks'][0]['waiters'])")" = "1" ]
  expect_true "list --json: ls-b's waiters" [ "$(json_eval "$tmp_dir/out" "len(j['locks'][1]['waiters'])")" = "0" ]
  expect_true "list --json: ttl_ms" [ "$(json_eval "$tmp_dir/out" "0 < j['locks'][0]['ttl_ms'] <= 20000")" = "True" ]
  expect_true "list --json: not truncated, one revision" [ "$(json_eval "$tmp_dir/out" "not j['truncated'] and j['revision'] > 0")" = "True" ]

  touch "$go"
  local h
  for h in "${holders[@]}"; do
    reap "$h"
    expect_status "list: a holder ends" 0 "$last_status"
  done
  reap "$waiter"
  expect_status "list: the waiter ran" 0 "$last_status"
  cl 10 list --url "$url"
  expect_true "list: nothing held at the end" [ "$(wc -l <"$tmp_dir/out")" = 1 ]
}

# ---- main ----

for g in "${groups[@]}"; do
  case $g in
    run | exclusion | inspect | list) ;;
    *) echo "unknown group '$g'" >&2; exit 2 ;;
  esac
done
start_etcd || exit 1
for g in "${groups[@]}"; do
  echo "# $g"
  "group_$g"
done

finish
