#!/usr/bin/env bash
# The corolock tool on a Redis Cluster (redis+cluster:// URLs): run, status,
# list and break, against three primaries this script starts on free
# loopback ports and joins with redis-cli --cluster create (one cluster for
# the whole file: it costs seconds to make).
#
#   cluster_cli_test.sh COROLOCK_BIN
#
# Needs redis-server and redis-cli (from PATH, or COROLOCK_REDIS_SERVER and
# COROLOCK_REDIS_CLI) and python3 (or COROLOCK_PYTHON) to read --json.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: cluster_cli_test.sh COROLOCK_BIN}
redis_cli=${COROLOCK_REDIS_CLI:-redis-cli}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-cluster-cli-test.XXXXXX")

# The shared harness (assertions, spawn/reap, free_port, cl, ...) and the
# throwaway server helper: throwaway_redis_start, stop_pid.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

trap_node_cleanup

cluster_ok() {
  local p
  for p in "${node_ports[@]}"; do
    rcli "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}

start_cluster() {
  start_nodes 3 --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout 5000 || return 1
  timeout 30 "$redis_cli" --cluster create "127.0.0.1:${node_ports[0]}" \
    "127.0.0.1:${node_ports[1]}" "127.0.0.1:${node_ports[2]}" --cluster-replicas 0 \
    --cluster-yes >"$tmp_dir/create.log" 2>&1 || { cat "$tmp_dir/create.log"; return 1; }
  wait_until 15 cluster_ok
}

# The port of the primary serving NAME's lock key (the slot of its hash
# tag): the only node that answers for the key instead of redirecting.
owner_of() {  # NAME
  local p answer
  for p in "${node_ports[@]}"; do
    answer=$(rcli "$p" EXISTS "corolock:{$1}" 2>&1)
    case $answer in [01]) echo "$p"; return 0 ;; esac
  done
  return 1
}

# The owners of the names used below, looked up once.
declare -A owner
lock_exists() { [ "$(rcli "${owner[$1]}" EXISTS "corolock:{$1}")" = "1" ]; }
lock_absent() { [ "$(rcli "${owner[$1]}" EXISTS "corolock:{$1}")" = "0" ]; }

if ! start_cluster; then
  fail "start a three-primary cluster" "$(tail -n 20 "$tmp_dir"/node*/redis.log 2>/dev/null)"
  finish
  exit 1
fi
pass "a three-primary cluster on ports ${node_ports[*]}"
# Two seeds of three: the tool finds the third from the slot map.
url="redis+cluster://127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]}"

# Three lock names whose slots are served by three different primaries.
names=()
owners=" "
for candidate in alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima; do
  o=$(owner_of "job-$candidate") || continue
  case $owners in *" $o "*) continue ;; esac
  owners+="$o "
  owner[job-$candidate]=$o
  names+=("job-$candidate")
  [ ${#names[@]} -eq 3 ] && break
done
expect_cond "three lock names on three different primaries (${names[*]})" '[ ${#names[@]} -eq 3 ]'
[ ${#names[@]} -eq 3 ] || { finish; exit 1; }
a=${names[0]} b=${names[1]} c=${names[2]}

# ---- run: acquire, run COMMAND while held, release ----

cl 20 run --url "$url" --lease 5s --wait 5s "$a" -- \
  sh -c "$redis_cli -h 127.0.0.1 -p ${owner[$a]} EXISTS 'corolock:{$a}' >'$tmp_dir/during'"
expect_status "run on a cluster URL" 0 "$last_status" "$(cat "$tmp_dir/err")"
expect_cond "COMMAND ran while the lock was held" '[ "$(cat "$tmp_dir/during" 2>/dev/null)" = 1 ]'
expect_true "the lock is released after run" lock_absent "$a"
cl 20 run -v --url "$url" "$a" -- true
expect_status "run -v on a cluster URL" 0 "$last_status" "$(cat "$tmp_dir/err")"
expect_match "run -v looks at the lock before acquiring it" \
  "lock '$a' is free \(last token [1-9][0-9]*\)" "$tmp_dir/err"

# ---- two holders on two different primaries; exclusion ----

spawn 30 "$bin" run --url "$url" --lease 3s "$b" -- sh -c "$(long_child 25)"
holder_b=$last_pid
spawn 30 "$bin" run --url "$url" --lease 3s "$c" -- sh -c "$(long_child 25)"
holder_c=$last_pid
expect_true "the first holder acquired $b" wait_until 10 lock_exists "$b"
expect_true "the second holder acquired $c" wait_until 10 lock_exists "$c"

cl 10 run --url "$url" --no-wait "$b" -- true
expect_status "run --no-wait while another holds the lock" 75 "$last_status" "$(cat "$tmp_dir/err")"
expect_match "run --no-wait says who is in the way" "lock '$b' is held by another owner" "$tmp_dir/err"
cl 10 run --url "$url" --wait 300ms "$c" -- true
expect_status "run --wait 300ms while another holds the lock" 75 "$last_status" "$(cat "$tmp_dir/err")"

# ---- status, list, break ----

cl 10 status --url "$url" "$b"
expect_status "status on a cluster URL" 0 "$last_status" "$(cat "$tmp_dir/err")"
expect_match "status shows the lock held" '^held: +yes' "$tmp_dir/out"
expect_match "status shows the holder's program as its label" '^label: +sh$' "$tmp_dir/out"
cl 10 status --url "$url" --json "$a"
expect_status "status --json of a free lock: exit 1" 1 "$last_status" "$(cat "$tmp_dir/err")"
expect_cond "status --json: a free lock is not held" '[ "$(json_field "$tmp_dir/out" held)" = false ]'
expect_cond "status --json: its last token is kept" '[ "$(json_field "$tmp_dir/out" last_token)" -ge 1 ]'

cl 15 list --url "$url" --json
expect_status "list on a cluster URL" 0 "$last_status" "$(cat "$tmp_dir/err")"
listed=$(json_eval "$tmp_dir/out" '" ".join(sorted(l["name"] for l in j["locks"]))')
want=$(printf '%s\n' "$b" "$c" | LC_ALL=C sort | paste -sd ' ')
expect_cond "list finds the locks held on two different primaries ($listed)" '[ "$listed" = "$want" ]'
cl 15 list --url "$url" "$c"
expect_status "list PATTERN on a cluster URL" 0 "$last_status" "$(cat "$tmp_dir/err")"
expect_match "list PATTERN shows the matching lock" "^$c " "$tmp_dir/out"
expect_no_match "list PATTERN leaves the others out" "^$b " "$tmp_dir/out"

cl 10 break --url "$url" "$b"
expect_status "break on a cluster URL" 0 "$last_status" "$(cat "$tmp_dir/err")"
expect_match "break says what it removed" "^removed lock $b held by " "$tmp_dir/out"
expect_true "the broken lock is gone" lock_absent "$b"
cl 10 break --url "$url" "$c"
expect_status "break on another primary" 0 "$last_status" "$(cat "$tmp_dir/err")"
# Each holder's watchdog finds its lock gone and stops its command.
reap "$holder_b"
expect_status "the holder of a broken lock exits with lease lost" 70 "$last_status"
reap "$holder_c"
expect_status "the holder of the other broken lock exits with lease lost" 70 "$last_status"

# ---- fence install where one primary refuses FUNCTION LOAD ----
# (docs/fencing.md, "Installing": reported, not rolled back.) The ACL of the
# last node denies FUNCTION LOAD to the default user; the others take it.
library_on() { rcli "$1" FUNCTION LIST LIBRARYNAME corolock | grep -c '^corolock$'; }
refusing=${node_ports[2]}
rcli "$refusing" ACL SETUSER default -function\|load >/dev/null
cl 20 fence install --url "$url"
expect_status "fence install with a primary refusing FUNCTION LOAD: exit 76" 76 "$last_status"
expect_match "it counts the primaries that have it" 'loaded on 2 of 3 primaries' "$tmp_dir/err"
expect_match "it names the refusing primary and why" "missing on 127\.0\.0\.1:$refusing \(NOPERM" \
  "$tmp_dir/err"
expect_no_match "it names no primary that loaded it" \
  "missing on .*127\.0\.0\.1:(${node_ports[0]}|${node_ports[1]})[^0-9]" "$tmp_dir/err"
expect_cond "the two other primaries have the library" \
  '[ "$(library_on "${node_ports[0]}")$(library_on "${node_ports[1]}")" = 11 ]'
expect_cond "the refusing primary has none" '[ "$(library_on "$refusing")" = 0 ]'
rcli "$refusing" ACL SETUSER default +function\|load >/dev/null
cl 20 fence install --url "$url"
expect_status "once allowed, installing again completes it" 0 "$last_status" "$(cat "$tmp_dir/err")"
expect_cond "every primary has the library" '[ "$(library_on "$refusing")" = 1 ]'

# ---- what a cluster cannot do, and an unreachable one ----

cl 10 run --url "$url" --replicas 1 "$a" -- true
expect_status "run --replicas on a cluster URL is a usage error" 64 "$last_status"
expect_match "run --replicas on a cluster says why" \
  '--replicas is not supported on a Redis Cluster' "$tmp_dir/err"
expect_true "run --replicas on a cluster takes no lock" lock_absent "$a"

p1=$(free_port) p2=$(free_port)
cl 20 run --url "redis+cluster://127.0.0.1:$p1,127.0.0.1:$p2" "$a" -- true
expect_status "run on an unreachable cluster" 69 "$last_status" "$(cat "$tmp_dir/err")"
expect_match "run on an unreachable cluster says so" 'cannot reach Redis at cluster seeds' "$tmp_dir/err"

finish
