# Sourced by scripts and shell tests that need a ZooKeeper server of their own.
#
#   source scripts/lib/throwaway_zk.sh
#   throwaway_zk_available         # true when java and zookeeper.jar are found
#   throwaway_zk_start DIR         # sets ZK_PORT, ZK_PID and ZK_URL, or returns 1
#   ...
#   throwaway_zk_stop              # by the PID it started; safe to call twice
#
# One standalone server as test/support/zk_server.cpp runs it (Debian's
# zookeeper.jar by java; $COROLOCK_ZOOKEEPER_JAR and $COROLOCK_JAVA override
# them), listening on 127.0.0.1 only, the admin server off, its data and
# zoo.cfg in DIR/zk, its log in DIR/zk.log. The transaction log is not
# fsynced (forceSync=no) unless COROLOCK_BENCH_FSYNC=on. Ready when the
# four-letter word srvr reports a mode.

# shellcheck source=stop_pid.sh
source "$(dirname "${BASH_SOURCE[0]}")/stop_pid.sh"

ZK_PORT=""
ZK_PID=""
ZK_URL=""

_zk_java() { command -v "${COROLOCK_JAVA:-java}"; }
_zk_jar() { echo "${COROLOCK_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"; }

throwaway_zk_available() { _zk_java >/dev/null && [[ -f $(_zk_jar) ]]; }

# The four-letter word $2 to 127.0.0.1:$1; its answer, within a second.
_zk_four_letters() {
  timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2" \
    2>/dev/null
}

throwaway_zk_start() {
  local dir java jar cp port sync=no
  dir=$(cd "$1" && pwd)/zk || return 1
  throwaway_zk_available || { echo "java or $(_zk_jar) not found (scripts/setup.sh installs them)" >&2; return 1; }
  java=$(_zk_java)
  jar=$(_zk_jar)
  cp=$jar
  [[ -f /usr/share/java/slf4j-simple.jar ]] && cp+=:/usr/share/java/slf4j-simple.jar
  [[ ${COROLOCK_BENCH_FSYNC:-off} == on ]] && sync=yes
  # Random ports below Linux's ephemeral range; a taken one makes the server
  # exit (or never serve) and we try another.
  for _ in $(seq 5); do
    port=$((20000 + RANDOM % 12000))
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
forceSync=$sync
EOF
    "$java" -Xms16m -Xmx256m -XX:+UseSerialGC -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -Dzookeeper.log.dir="$dir" -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain \
      "$dir/zoo.cfg" >"$dir.log" 2>&1 &
    ZK_PID=$!
    # Up to 60 s for it to serve (a JVM starts slowly on a busy machine).
    for _ in $(seq 300); do
      kill -0 "$ZK_PID" 2>/dev/null || break
      if _zk_four_letters "$port" srvr | grep -q '^Mode: '; then
        ZK_PORT=$port
        ZK_URL="zk://127.0.0.1:$port"
        return 0
      fi
      sleep 0.2
    done
    stop_pid "$ZK_PID" KILL
    ZK_PID=""
  done
  echo "could not start ZooKeeper on a free loopback port:" >&2
  tail -c 4096 "$dir.log" >&2
  return 1
}

throwaway_zk_stop() {
  stop_pid "$ZK_PID"
  ZK_PID=""
}
