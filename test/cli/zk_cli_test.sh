#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool over ZooKeeper: run and
# status with a zk:// URL (list and break are refused), against a throwaway
# standalone ZooKeeper that this script starts on a free loopback port (java
# with Debian's zookeeper.jar, as test/support/zk_server.cpp runs it).
#
#   zk_cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: run exclusion inspect (default: all). Needs java (or COROLOCK_JAVA)
# and zookeeper.jar (COROLOCK_ZOOKEEPER_JAR, default
# /usr/share/java/zookeeper.jar), and python3 (or COROLOCK_PYTHON) for
# --json output.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: zk_cli_test.sh COROLOCK_BIN [GROUP...]}
shift
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(run exclusion inspect)

java=${COROLOCK_JAVA:-java}
jar=${COROLOCK_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-zk-cli-test.XXXXXX")
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

zk_serving() {  # PORT: "srvr" answers once the server serves
  local reply
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf srvr >&3
    cat <&3' _ "$1" 2>/dev/null)
  grep -q '^Mode: standalone' <<<"$reply"
}

start_zk() {
  local port
  port=$(free_port) || return 1
  mkdir -p "$tmp_dir/zk"
  cat >"$tmp_dir/zk/zoo.cfg" <<EOF
tickTime=500
dataDir=$tmp_dir/zk
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=srvr
forceSync=no
EOF
  local cp=$jar
  [ -e /usr/share/java/slf4j-simple.jar ] && cp="$cp:/usr/share/java/slf4j-simple.jar"
  "$java" -Xms16m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dzookeeper.log.dir="$tmp_dir/zk" \
    -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$tmp_dir/zk/zoo.cfg" \
    >"$tmp_dir/zk.log" 2>&1 &
  node_pids+=("$!")
  url="zk://127.0.0.1:$port/cli"
  if ! wait_until 30 zk_serving "$port"; then
    echo "ZooKeeper did not start:" >&2
    tail -n 20 "$tmp_dir/zk.log" >&2
    return 1
  fi
}

# ---- run ----

group_run() {
  cl 30 run --url "$url" r1 -- sh -c "echo \"\$COROLOCK_NAME \$COROLOCK_TOKEN\" >'$tmp_dir/r1-token'; exit 7"
  expect_status "run over zk passes the command's status" 7 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "run over zk: COROLOCK_NAME and COROLOCK_TOKEN (a zxid)" grep -Eqx 'r1 [1-9][0-9]*' "$tmp_dir/r1-token"
  cl 30 run --url "$url" r1 -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/r1-token2'"
  expect_status "run over zk: a second run of a released lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  local t1 t2
  t1=$(cut -d' ' -f2 "$tmp_dir/r1-token")
  t2=$(cat "$tmp_dir/r1-token2")
  expect_cond "run over zk: the second token is higher ($t1 < $t2)" '[ -n "$t1" ] && [ -n "$t2" ] && [ "$t1" -lt "$t2" ]'
  expect_true "run over zk: the lock is free afterwards" is_free r1

  cl 30 run --url "$url" -v r2 -- true
  expect_status "run -v over zk" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run -v over zk: says the lock was free" "lock 'r2' is free" "$tmp_dir/err"
  expect_match "run -v over zk: says it acquired" "acquired lock 'r2' \(token [0-9]+" "$tmp_dir/err"

  # Several NAMEs: a multi_lock, a zxid per name.
  cl 30 run --url "$url" rm2 rm1 -- sh -c 'echo "$COROLOCK_LOCKS $COROLOCK_NAME_1=$COROLOCK_TOKEN_1 $COROLOCK_NAME_2=$COROLOCK_TOKEN_2"'
  expect_status "run over zk with two NAMEs" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run over zk with two NAMEs: both, in order, with tokens" '^2 rm1=[1-9][0-9]* rm2=[1-9][0-9]*$' "$tmp_dir/out"

  # Options the backend does not offer, and the Redis-only ones, refused.
  local opt what
  while IFS='|' read -r what opt; do
    cl 10 run --url "$url" $opt r3 -- touch "$tmp_dir/r3-ran"
    expect_status "run over zk: $what is a usage error" 64 "$last_status"
    expect_match "run over zk: $what: says why" "$what" "$tmp_dir/err"
  done <<'EOF'
--fair|--fair
--capacity|--capacity 2
-s \(--shared\)|-s
-x \(--exclusive\)|-x
--replicas|--replicas 1
--tls-insecure applies to Redis URLs only|--tls-insecure
--password-file applies to Redis URLs only|--password-file /dev/null
EOF
  expect_true "run over zk: no refused run ran its command" [ ! -e "$tmp_dir/r3-ran" ]

  cl 10 run --url "zk://127.0.0.1" r3 -- true
  expect_status "run: a zk URL without a port" 64 "$last_status"
  expect_match "run: says what is wrong" "malformed ZooKeeper URL in --url: .*port" "$tmp_dir/err"
  cl 10 run --url "zk://user:s3cret@127.0.0.1:2181" r3 -- true
  expect_status "run: a zk URL with a password" 64 "$last_status"
  expect_no_match "run: the password is not echoed" "s3cret" "$tmp_dir/err"

  local dead
  dead=$(free_port)
  cl 30 run --url "zk://127.0.0.1:$dead" r3 -- touch "$tmp_dir/r3-ran"
  expect_status "run: ZooKeeper unreachable" 69 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run: names ZooKeeper and the endpoint" "cannot reach ZooKeeper at 127.0.0.1:$dead" "$tmp_dir/err"
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
  expect_true "exclusion: the runs that gave up left no node" has_waiters ex 1
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
  expect_match "status: the holder's node" '^node: +_c_.*-lock-[0-9]+$' "$tmp_dir/out"
  cl 10 status --url "$url" --json ins
  expect_true "status --json: held is true" [ "$(json_field "$tmp_dir/out" held)" = "true" ]
  expect_true "status --json: last_token" [ "$(json_field "$tmp_dir/out" last_token)" = "$token" ]
  expect_true "status --json: pid" [ "$(json_field "$tmp_dir/out" pid)" = "$holder_pid" ]
  expect_true "status --json: backend" [ "$(json_field "$tmp_dir/out" backend)" = '"zk"' ]

  cl 10 list --url "$url"
  expect_status "list over zk is refused" 64 "$last_status"
  expect_match "list: says what is offered" "list is not offered on ZooKeeper yet: run and status are" "$tmp_dir/err"
  cl 10 break --url "$url" ins
  expect_status "break over zk is refused" 64 "$last_status"
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
start_zk || exit 1
for g in "${groups[@]}"; do
  echo "# $g"
  "group_$g"
done

finish
