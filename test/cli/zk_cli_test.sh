#!/usr/bin/env bash
# End-to-end tests of the corolock command-line tool over ZooKeeper: run,
# status, list and break with a zk:// URL, against a throwaway
# standalone ZooKeeper that this script starts on a free loopback port (java
# with Debian's zookeeper.jar, as test/support/zk_server.cpp runs it).
#
#   zk_cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: run exclusion inspect (default: all); the cases are
# store_cli_cases.sh's, shared with pg_cli_test.sh. Needs java (or COROLOCK_JAVA)
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

java=${COROLOCK_JAVA:-java}
jar=${COROLOCK_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-zk-cli-test.XXXXXX")
url=""

# The shared harness: assertions, spawn/reap, free_port, cl, json_field,
# stop_pid, trap_node_cleanup (the server's pid goes in node_pids).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap_node_cleanup

zk_serving() {  # PORT: "srvr" answers once the server serves
  local reply
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf srvr >&3
    cat <&3' _ "$1" 2>/dev/null)
  grep -q '^Mode: standalone' <<<"$reply"
}

start_server() {
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


service=ZooKeeper
over="over zk"
backend=zk
holder_re='^node: +_c_.*-lock-[0-9]+$'
removed_re='\(deleted its node _c_.*-lock-[0-9]+\)'

password_file_refusal='--password-file needs the user in the ZooKeeper URL'

url_cases() {
  cl 10 run --url "zk://127.0.0.1" r3 -- true
  expect_status "run: a zk URL without a port" 64 "$last_status"
  expect_match "run: says what is wrong" "malformed ZooKeeper URL in --url: .*port" "$tmp_dir/err"
  cl 10 run --url "zk://s3cret@127.0.0.1:2181" r3 -- true
  expect_status "run: a zk URL with a lone word before '@'" 64 "$last_status"
  expect_no_match "run: the lone word is not echoed" "s3cret" "$tmp_dir/err"

  # Without credentials: it works, and says once that the nodes are open.
  cl 20 run --url "$url" r5 -- true
  expect_status "run: without credentials" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "run: without credentials: warned once" [ "$(grep -c 'has no credentials' "$tmp_dir/err")" = 1 ]
  # Digest credentials, in the URL or the password from --password-file:
  # no warning, nothing echoed; another identity is refused by the nodes.
  local server=${url#zk://}
  server=${server%%/*}
  local auth="zk://app:s3cret@$server/cli-auth"
  cl 20 run --url "$auth" r6 -- true
  expect_status "run: with digest credentials" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_no_match "run: with credentials: no warning" 'no credentials' "$tmp_dir/err"
  printf 's3cret\n' >"$tmp_dir/zk-pw"
  cl 20 run --url "zk://app@$server/cli-auth" --password-file "$tmp_dir/zk-pw" r6 -- true
  expect_status "run: the password from --password-file" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_no_match "run: --password-file: the password is not echoed" "s3cret" "$tmp_dir/err"
  cl 20 run --url "zk://app:wrong@$server/cli-auth" -n r6 -- touch "$tmp_dir/r6-ran"
  expect_status "run: a wrong password is refused by the nodes" 76 "$last_status" "$(cat "$tmp_dir/err")"
  expect_no_match "run: a wrong password is not echoed" "wrong" "$tmp_dir/err"
  expect_true "run: the refused run did not run its command" [ ! -e "$tmp_dir/r6-ran" ]
}

dead_url() { echo "zk://127.0.0.1:$1"; }

source "$(dirname "${BASH_SOURCE[0]}")/store_cli_cases.sh"
run_groups "$@"
