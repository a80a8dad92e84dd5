#!/usr/bin/env bash
# The corolock tool on RedLock: `run` with several --url or one redlock://
# URL, against three
# independent redis-servers this script starts on free loopback ports.
#
#   redlock_cli_test.sh COROLOCK_BIN
#
# Needs redis-server and redis-cli (from PATH, or COROLOCK_REDIS_SERVER and
# COROLOCK_REDIS_CLI).
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: redlock_cli_test.sh COROLOCK_BIN}
redis_cli=${COROLOCK_REDIS_CLI:-redis-cli}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-redlock-cli-test.XXXXXX")

# The shared harness (assertions, spawn/reap, free_port, start_nodes, rcli,
# cl, ...).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

trap_node_cleanup

# How many of the three nodes hold NAME's key.
holders() {  # NAME
  local p n=0
  for p in "${node_ports[@]}"; do
    [ "$(rcli "$p" EXISTS "corolock:{$1}")" = "1" ] && n=$((n + 1))
  done
  echo "$n"
}
held_on() { [ "$(holders "$1")" = "$2" ]; }  # NAME COUNT
# NAME: a waiter is subscribed to the lock's unlock channel on some node.
waiting_on() {
  local p
  for p in "${node_ports[@]}"; do
    [ "$(rcli "$p" PUBSUB NUMSUB "corolock:{$1}:unlock" | tail -n 1)" -ge 1 ] 2>/dev/null && return 0
  done
  return 1
}

start_nodes 3 || exit 1
u1="redis://127.0.0.1:${node_ports[0]}"
u2="redis://127.0.0.1:${node_ports[1]}"
u3="redis://127.0.0.1:${node_ports[2]}"
urls=(--url "$u1" --url "$u2" --url "$u3")
down1=$(free_port)
down2=$(free_port)
while [ "$down2" = "$down1" ]; do down2=$(free_port); done

echo "# usage"
# Only an odd number of at least 3 distinct Redis servers makes a RedLock.
while IFS='|' read -r what message args; do
  # shellcheck disable=SC2086
  cl 10 $args
  expect_status "usage: $what" 64 "$last_status"
  expect_match "usage: $what: message" "$message" "$tmp_dir/err"
done <<EOF
two --url|run: RedLock needs at least 3 --url .* and got 2|run --url $u1 --url $u2 x -- true
four --url|run: RedLock takes an odd number of --url \(3, 5, ...\) and got 4|run --url $u1 --url $u2 --url $u3 --url redis://127.0.0.1:$down1 x -- true
one server twice|run: --url #3 names 127.0.0.1:${node_ports[0]} again|run --url $u1 --url $u2 --url $u1 x -- true
an etcd node|run: RedLock's nodes are Redis servers, but --url #2 is a URL of etcd \(one --url names a whole etcd cluster\)|run --url $u1 --url etcd://127.0.0.1:2379 --url $u3 x -- true
a malformed node URL|run: malformed Redis URL in --url #3|run --url $u1 --url $u2 --url redis://:99999 x -- true
--fair|run: --fair is not offered with several --url|run --url $u1 --url $u2 --url $u3 --fair x -- true
--capacity|run: --capacity is not offered with several --url|run --url $u1 --url $u2 --url $u3 --capacity 2 x -- true
-s|run: -s \(--shared\) is not offered with several --url|run --url $u1 --url $u2 --url $u3 -s x -- true
--replicas|run: --replicas is not offered with several --url|run --url $u1 --url $u2 --url $u3 --replicas 1 x -- true
status|status: status reads one server: give one --url \(got 3|status --url $u1 --url $u2 --url $u3 x
break|break: break reads one server: give one --url|break --url $u1 --url $u2 --url $u3 x
list|list: list reads one server: give one --url|list --url $u1 --url $u2 --url $u3
EOF
expect_true "usage: nothing was locked" held_on x 0

echo "# run"
cl 20 run "${urls[@]}" rl1 -- sh -c "echo \"name=\${COROLOCK_NAME-unset} token=\${COROLOCK_TOKEN-unset}\"; for p in ${node_ports[*]}; do $redis_cli -h 127.0.0.1 -p \$p EXISTS 'corolock:{rl1}'; done"
expect_status "run: child exits 0" 0 "$last_status"
expect_match "run: COROLOCK_NAME set, no COROLOCK_TOKEN (not a fencing token)" '^name=rl1 token=unset$' "$tmp_dir/out"
expect_cond "run: the key is on all three nodes while COMMAND runs ($(grep -c '^1$' "$tmp_dir/out"))" \
  '[ "$(grep -c "^1\$" "$tmp_dir/out")" = 3 ]'
expect_true "run: released on every node" held_on rl1 0
COROLOCK_TOKEN=stale cl 20 run "${urls[@]}" rl1 -- sh -c 'echo "token=${COROLOCK_TOKEN-unset}"'
expect_match "run: an inherited COROLOCK_TOKEN is removed" '^token=unset$' "$tmp_dir/out"
cl 20 run "${urls[@]}" rl1 -- sh -c 'exit 7'
expect_status "run: COMMAND's status passed through" 7 "$last_status"

echo "# exclusion"
spawn 60 "$bin" run "${urls[@]}" busy -- sh -c "$(long_child 30)"
holder=$last_pid
expect_true "exclusion: holder acquired on all three" wait_until 10 held_on busy 3
cl 20 run "${urls[@]}" --no-wait busy -- touch "$tmp_dir/ran-no-wait"
expect_status "exclusion: --no-wait on a held RedLock" 75 "$last_status"
expect_match "exclusion: --no-wait message" "lock 'busy' is held by another owner" "$tmp_dir/err"
expect_match "exclusion: --no-wait names the holder without -v (from a node's record)" \
  "lock 'busy' is held by another owner \(--no-wait\): [^ ]+:[0-9]+ since 20[0-9-]+T[0-9:.]+Z \(held for [^,]+, label 'sh'\)\$" "$tmp_dir/err"
spawn 30 "$bin" run "${urls[@]}" --wait 20 busy -- touch "$tmp_dir/ran-after"
waiter=$last_pid
# The waiter found the lock held and waits (a contended RedLock acquire
# subscribes to the unlock channel on every node), then the holder ends.
expect_true "exclusion: the waiter waits" wait_until 10 waiting_on busy
expect_true "exclusion: the waiter has not run yet" [ ! -e "$tmp_dir/ran-after" ]
kill -TERM "$holder" 2>/dev/null
reap "$holder"
reap "$waiter"
expect_status "exclusion: the waiter runs once the holder is gone" 0 "$last_status"
expect_cond "exclusion: COMMAND ran only with the lock" '[ ! -e "$tmp_dir/ran-no-wait" ] && [ -e "$tmp_dir/ran-after" ]'
expect_true "exclusion: released on every node" held_on busy 0

echo "# majority"
# A single-node lock on one node: the other two still make a majority.
spawn 60 "$bin" run --url "$u1" part -- sh -c "$(long_child 30)"
one=$last_pid
expect_true "majority: a single-node holder on node 1" wait_until 10 held_on part 1
cl 20 run "${urls[@]}" --no-wait part -- true
expect_status "majority: RedLock granted on nodes 2 and 3" 0 "$last_status"
spawn 60 "$bin" run --url "$u2" part -- sh -c "$(long_child 30)"
two=$last_pid
expect_true "majority: a second single-node holder on node 2" wait_until 10 held_on part 2
cl 20 run "${urls[@]}" --no-wait --lease 1s part -- touch "$tmp_dir/ran-minority"
expect_status "majority: one free node of three is refused" 75 "$last_status"
expect_true "majority: COMMAND did not run" [ ! -e "$tmp_dir/ran-minority" ]
# The refused round's grant on node 3 is given back before run exits: its
# drain waits for every node's answer, then for the give-backs.
expect_true "majority: node 3 given back before the refused run exited" held_on part 2
kill -TERM "$one" "$two" 2>/dev/null
reap "$one"
reap "$two"

echo "# nodes down"
start=$(now_ms)
cl 20 run --url "$u1" --url "$u2" --url "redis://127.0.0.1:$down1" down -- sh -c "$redis_cli -h 127.0.0.1 -p ${node_ports[0]} EXISTS 'corolock:{down}'"
elapsed=$(($(now_ms) - start))
expect_status "nodes down: one of three down, run still runs" 0 "$last_status"
expect_match "nodes down: held on the live nodes" '^1$' "$tmp_dir/out"
expect_cond "nodes down: without waiting for the dead node's timeouts (${elapsed} ms)" '[ "$elapsed" -lt 2500 ]'
cl 20 run --url "$u1" --url "redis://127.0.0.1:$down1" --url "redis://127.0.0.1:$down2" down -- touch "$tmp_dir/ran-down"
expect_status "nodes down: two of three down is unreachable" 69 "$last_status"
expect_match "nodes down: names the nodes" "cannot reach a majority of the 3 RedLock nodes \(2 needed, 1 left\): .*127.0.0.1:$down1.*127.0.0.1:$down2" "$tmp_dir/err"
expect_true "nodes down: COMMAND did not run" [ ! -e "$tmp_dir/ran-down" ]
expect_true "nodes down: nothing left on the live node" held_on down 0

echo "# one redlock:// URL"
# The same nodes in one URL (the library's parser splits it): run works as
# with three --url; malformed ones are usage errors that never show the
# password.
rl_url="redlock://127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]},127.0.0.1:${node_ports[2]}"
cl 20 run --url "$rl_url?node_timeout_ms=150" rlu -- sh -c "for p in ${node_ports[*]}; do $redis_cli -h 127.0.0.1 -p \$p EXISTS 'corolock:{rlu}'; done"
expect_status "url: run on a redlock:// URL" 0 "$last_status"
expect_cond "url: the key is on all three nodes while COMMAND runs ($(grep -c '^1$' "$tmp_dir/out"))" \
  '[ "$(grep -c "^1\$" "$tmp_dir/out")" = 3 ]'
expect_true "url: released on every node" held_on rlu 0
REDIS_URL="$rl_url" cl 20 run rlu -- true
expect_status "url: from REDIS_URL" 0 "$last_status"
spawn 60 "$bin" run --url "$rl_url" rlbusy -- sh -c "$(long_child 30)"
url_holder=$last_pid
expect_true "url: holder acquired on all three" wait_until 10 held_on rlbusy 3
cl 20 run "${urls[@]}" --no-wait rlbusy -- true
expect_status "url: three --url see the URL's holder" 75 "$last_status"
kill -TERM "$url_holder" 2>/dev/null
reap "$url_holder"
expect_true "url: released after the holder's exit" held_on rlbusy 0
while IFS='|' read -r what message args; do
  # shellcheck disable=SC2086
  cl 10 $args
  expect_status "url usage: $what" 64 "$last_status"
  expect_match "url usage: $what: message" "$message" "$tmp_dir/err"
  expect_cond "url usage: $what: no password shown" '! grep -q pw-7c1e "$tmp_dir/err"'
done <<EOF
two hosts|run: malformed RedLock URL in --url: RedLock URL: names 2 hosts, at least 3|run --url redlock://u:pw-7c1e@127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]} x -- true
four hosts|run: RedLock takes an odd number of hosts in the redlock:// URL \(3, 5, ...\) and got 4|run --url redlock://u:pw-7c1e@127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]},127.0.0.1:${node_ports[2]},127.0.0.1:$down1 x -- true
a bad third host|run: malformed RedLock URL in --url: RedLock URL: host 3 of the URL's host list: invalid port |run --url redlock://u:pw-7c1e@127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]},127.0.0.1:99999 x -- true
a host twice|run: malformed RedLock URL in --url: RedLock URL: node 3 names host|run --url redlock://u:pw-7c1e@127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]},127.0.0.1:${node_ports[0]} x -- true
status|status: status reads one server, and a redlock:// URL names 3|status --url $rl_url x
EOF
expect_true "url usage: nothing was locked" held_on x 0

echo "# several names"
cl 20 run "${urls[@]}" rb ra -- sh -c 'echo "$COROLOCK_LOCKS ${COROLOCK_NAME_1} ${COROLOCK_NAME_2} ${COROLOCK_TOKEN_1-unset}"'
expect_status "several names: child exits 0" 0 "$last_status"
expect_match "several names: both names, no tokens" '^2 ra rb unset$' "$tmp_dir/out"
expect_true "several names: released" held_on ra 0

finish
