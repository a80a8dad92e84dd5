#!/usr/bin/env bash
# corolock elect and corolock leader (docs/cli.md, docs/election.md "From the
# shell") end to end, against throwaway redis-servers this script starts on
# free loopback ports: one serves the election, all three make the RedLock
# that elect refuses.
#
#   elect_cli_test.sh COROLOCK_BIN [GROUP...]
#
# GROUPs: usage elect handover watch refused (default: all of them).
# Needs redis-server and redis-cli (from PATH, or COROLOCK_REDIS_SERVER and
# COROLOCK_REDIS_CLI); python3 (or COROLOCK_PYTHON) to read --json output.
#
# Every command runs under `timeout`, every wait loop is bounded in count
# and time, and only processes started here are ever signalled. The last
# line is "N passed, M failed"; the exit status is non-zero on any failure.
set -u

bin=${1:?usage: elect_cli_test.sh COROLOCK_BIN [GROUP...]}
shift
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(usage elect handover watch refused)
redis_cli=${COROLOCK_REDIS_CLI:-redis-cli}
python=${COROLOCK_PYTHON:-python3}

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/corolock-elect-cli-test.XXXXXX")

# The shared harness (assertions, spawn/reap, start_nodes, rcli PORT, cl,
# json_field, ...).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

trap_node_cleanup

port=""
url=""
r() { rcli "$port" "$@"; }
# The election's fair mutex: held, or not.
term_held() { [ "$(r EXISTS "corolock:{$1}")" = "1" ]; }
term_free() { [ "$(r EXISTS "corolock:{$1}")" = "0" ]; }
# N candidates wait in the name's queue.
queued() { [ "$(r ZCARD "corolock:{$1}:queue")" = "$2" ]; }
# Nothing of NAME is left on the server at PORT.
nothing_left() {  # PORT NAME
  [ -z "$(rcli "$1" --scan --pattern "corolock:{$2}*" | grep -v ':fence$')" ]
}
# The file FILE has at least N lines.
has_lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }

# ---- usage errors and help: no server needed ----

group_usage() {
  cl 5 help elect
  expect_status "help elect" 0 "$last_status"
  expect_match "help elect documents COROLOCK_EPOCH" 'COROLOCK_EPOCH' "$tmp_dir/out"
  expect_match "help elect documents --value" '--value TEXT' "$tmp_dir/out"
  cl 5 help leader
  expect_status "help leader" 0 "$last_status"
  expect_match "help leader documents --watch" '--watch' "$tmp_dir/out"
  cl 5 --help
  expect_match "--help lists elect" '^  elect ' "$tmp_dir/out"
  expect_match "--help lists leader" '^  leader ' "$tmp_dir/out"

  cl 5 elect --url "redis://127.0.0.1:1" e0
  expect_status "elect without COMMAND" 64 "$last_status"
  expect_match "elect without COMMAND: says so" '^corolock: elect: missing COMMAND' "$tmp_dir/err"
  expect_match "elect without COMMAND: a usage line" "^Try 'corolock elect --help'" "$tmp_dir/err"
  cl 5 elect --url "redis://127.0.0.1:1" e0 --
  expect_status "elect with nothing after --" 64 "$last_status"
  cl 5 elect --url "redis://127.0.0.1:1" "" -- true
  expect_status "elect with an empty NAME" 64 "$last_status"
  expect_match "elect with an empty NAME: says so" 'elect: bad lock NAME' "$tmp_dir/err"
  cl 5 elect --url "redis://127.0.0.1:1" "$(printf 'n%.0s' $(seq 513))" -- true
  expect_status "elect with a 513-byte NAME" 64 "$last_status"
  cl 5 elect --url "redis://127.0.0.1:1" a b -- true
  expect_status "elect with two NAMEs" 64 "$last_status"
  cl 5 elect --url "redis://127.0.0.1:1" --fair e0 -- true
  cl 5 elect --url "redis://127.0.0.1:1" --value "$(head -c 65537 /dev/zero | tr '\0' v)" e0 -- true
  expect_status "elect with a --value over 64 KiB" 64 "$last_status"
  expect_match "elect with a --value over 64 KiB: says so" 'elect: --value is 65537 bytes long; at most 65536' "$tmp_dir/err"
  expect_status "elect refuses run's lock-kind options" 64 "$last_status"
  cl 5 leader --url "redis://127.0.0.1:1"
  expect_status "leader without NAME" 64 "$last_status"
  cl 5 leader --url "redis://127.0.0.1:1" ""
  expect_status "leader with an empty NAME" 64 "$last_status"
}

# ---- one candidate: the command, its environment, its status ----

group_elect() {
  # A server that does not answer: 69, said as elect's.
  cl 20 elect --url "redis://127.0.0.1:$(free_port)" e0 -- touch "$tmp_dir/e0-ran"
  expect_status "elect: an unreachable server" 69 "$last_status"
  expect_match "elect: says so as elect" '^corolock: elect: cannot reach Redis at' "$tmp_dir/err"
  expect_true "elect: COMMAND never ran" [ ! -e "$tmp_dir/e0-ran" ]

  # The command runs with the epoch and the value; its status is elect's;
  # the term is resigned as it exits.
  cl 20 elect --url "$url" --value "host-a:8080" e1 -- \
    sh -c 'echo "epoch=$COROLOCK_EPOCH value=$COROLOCK_LEADER_VALUE name=$COROLOCK_NAME token=${COROLOCK_TOKEN-unset}"; exit 3'
  expect_status "elect: exits with the command's status" 3 "$last_status"
  expect_match "elect: COMMAND gets the epoch, the value and the name" \
    '^epoch=[0-9]+ value=host-a:8080 name=e1 token=unset$' "$tmp_dir/out"
  local epoch1
  epoch1=$(sed -n 's/^epoch=\([0-9]*\) .*/\1/p' "$tmp_dir/out")
  expect_true "elect: resigned when the command exited" term_free e1
  cl 10 leader --url "$url" e1
  expect_status "leader: nobody leads after the resignation" 1 "$last_status"
  expect_match "leader: says so" "^no leader of 'e1'$" "$tmp_dir/out"

  # flock's form (no --), and a second term's epoch is larger.
  cl 20 elect --url "$url" e1 sh -c 'echo "epoch=$COROLOCK_EPOCH value=[$COROLOCK_LEADER_VALUE]"'
  expect_status "elect: flock's form" 0 "$last_status"
  local epoch2
  epoch2=$(sed -n 's/^epoch=\([0-9]*\) .*/\1/p' "$tmp_dir/out")
  expect_match "elect: the default value is empty" 'value=\[\]$' "$tmp_dir/out"
  expect_cond "elect: the next term's epoch is larger ($epoch2 > $epoch1)" \
    '[ -n "$epoch2" ] && [ -n "$epoch1" ] && [ "$epoch2" -gt "$epoch1" ]'

  # While it leads, leader shows it: value, epoch, and the holder is the
  # elect process itself.
  spawn 60 "$bin" elect --url "$url" --value "v 2" e2 -- \
    sh -c "echo \$COROLOCK_EPOCH >'$tmp_dir/e2-epoch'; $(long_child 30)"
  local runner=$last_pid
  expect_true "elect: the leader's command runs" wait_until 10 test -s "$tmp_dir/e2-epoch"
  cl 10 leader --url "$url" e2
  expect_status "leader: a leader" 0 "$last_status"
  expect_match "leader: the line" "^leader of 'e2': epoch $(cat "$tmp_dir/e2-epoch"), value 'v 2', .*:[0-9]+ since " "$tmp_dir/out"
  cl 10 leader --url "$url" --json e2
  expect_status "leader --json: a leader" 0 "$last_status"
  expect_true "leader --json: the epoch is COMMAND's" [ "$(json_field "$tmp_dir/out" epoch)" = "$(cat "$tmp_dir/e2-epoch")" ]
  expect_true "leader --json: the value" [ "$(json_field "$tmp_dir/out" value)" = '"v 2"' ]
  expect_true "leader --json: the holder's pid is the elect process" \
    [ "$(json_field "$tmp_dir/out" pid)" = "$(corolock_pid "$runner")" ]
  signal_corolock TERM "$runner"
  reap "$runner"
  expect_status "elect: SIGTERM while leading passes the command's death on" 143 "$last_status"
  expect_true "elect: resigned after SIGTERM" term_free e2
  cl 10 leader --url "$url" --json e2
  expect_status "leader --json: no leader" 1 "$last_status"
  expect_true "leader --json: leader false" [ "$(json_field "$tmp_dir/out" leader)" = "false" ]

  # A lost term stops the command and exits 70 (as run).
  spawn 60 "$bin" elect --url "$url" --lease 1s e3 -- \
    sh -c "trap 'echo term >\"$tmp_dir/e3-term\"; exit 0' TERM; : >\"$tmp_dir/e3-ready\"; $(long_child 30)"
  runner=$last_pid
  expect_true "loss: the leader's command set its trap" wait_until 10 test -e "$tmp_dir/e3-ready"
  r DEL "corolock:{e3}" >/dev/null
  reap "$runner"
  expect_status "loss: elect exits 70" 70 "$last_status"
  expect_true "loss: the command got SIGTERM" test -s "$tmp_dir/e3-term"

  # --wait bounds the campaign: exit 75, and the queue place is given up.
  spawn 60 "$bin" elect --url "$url" e4 -- sh -c ": >'$tmp_dir/e4-ready'; $(long_child 30)"
  runner=$last_pid
  expect_true "wait: a leader" wait_until 10 test -e "$tmp_dir/e4-ready"
  cl 20 elect --url "$url" -w 0.5 e4 -- touch "$tmp_dir/e4-second-ran"
  expect_status "wait: not elected within --wait" 75 "$last_status"
  expect_match "wait: says so" 'the leadership of .e4. not acquired within' "$tmp_dir/err"
  expect_true "wait: the second command never ran" [ ! -e "$tmp_dir/e4-second-ran" ]
  expect_true "wait: the queue place was given up" wait_until 5 queued e4 0
  signal_corolock TERM "$runner"
  reap "$runner"
}

# ---- two candidates: a resignation hands over at once ----

group_handover() {
  # A long lease: a handover within it was the resignation's, not the
  # lease's end.
  spawn 60 "$bin" elect --url "$url" --lease 30s --value A h1 -- \
    sh -c "trap 'exit 0' TERM; echo \$COROLOCK_EPOCH >'$tmp_dir/h-a'; $(long_child 50)"
  local a=$last_pid
  expect_true "handover: A leads" wait_until 10 test -s "$tmp_dir/h-a"
  spawn 60 "$bin" elect --url "$url" --lease 30s --value B h1 -- \
    sh -c "echo \$COROLOCK_EPOCH \$COROLOCK_LEADER_VALUE >'$tmp_dir/h-b'; $(long_child 50)"
  local b=$last_pid
  expect_true "handover: B waits in the queue" wait_until 10 queued h1 1
  expect_true "handover: B's command has not run" [ ! -e "$tmp_dir/h-b" ]
  # A third candidate, stopped while campaigning: it leaves the queue, and
  # its command never runs.
  spawn 60 "$bin" elect --url "$url" --lease 30s h1 -- touch "$tmp_dir/h-c-ran"
  local c=$last_pid
  expect_true "handover: C waits behind B" wait_until 10 queued h1 2
  signal_corolock TERM "$c"
  reap "$c"
  expect_status "handover: SIGTERM while campaigning" 143 "$last_status"
  expect_true "handover: C left the queue" wait_until 5 queued h1 1
  expect_true "handover: C's command never ran" [ ! -e "$tmp_dir/h-c-ran" ]

  local start elapsed
  start=$(now_ms)
  signal_corolock TERM "$a"
  reap "$a"
  expect_status "handover: A exits with its command's status" 0 "$last_status"
  expect_true "handover: B leads" wait_until 10 test -s "$tmp_dir/h-b"
  elapsed=$(($(now_ms) - start))
  expect_cond "handover: B leads at once, not at A's lease end (${elapsed} ms < 5000)" '[ "$elapsed" -lt 5000 ]'
  expect_cond "handover: B's epoch is larger than A's" \
    '[ "$(cut -d" " -f1 "$tmp_dir/h-b")" -gt "$(cat "$tmp_dir/h-a")" ]'
  cl 10 leader --url "$url" --json h1
  expect_true "handover: leader names B" [ "$(json_field "$tmp_dir/out" value)" = '"B"' ]
  signal_corolock TERM "$b"
  reap "$b"
  expect_true "handover: nothing of h1 is left but its fence" nothing_left "$port" h1
}

# ---- leader --watch ----

group_watch() {
  local file=$tmp_dir/w1-watch
  # sh execs corolock, its stdout in the file.
  spawn 60 sh -c "exec \"\$0\" leader --url '$url' --watch w1 >'$file'" "$bin"
  local watcher=$last_pid
  expect_true "watch: the current state first" wait_until 10 has_lines "$file" 1
  # A term that lasts until the watcher reported it, then resigns.
  cl 30 elect --url "$url" --value one w1 -- \
    sh -c "for i in \$(seq 100); do grep -q \"value 'one'\" '$file' && exit 0; sleep 0.1; done; exit 9"
  expect_status "watch: the leader saw itself reported" 0 "$last_status"
  expect_true "watch: the resignation reported" wait_until 10 has_lines "$file" 3
  expect_true "watch: no leader, the term, no leader, in order" "$python" -c '
import re, sys
lines = open(sys.argv[1]).read().splitlines()
ok = (len(lines) == 3 and lines[0] == "no leader of '"'"'w1'"'"'" and lines[2] == lines[0]
      and re.match(r"^leader of '"'"'w1'"'"': epoch [0-9]+, value '"'"'one'"'"', ", lines[1]))
sys.exit(0 if ok else 1)' "$file"
  signal_corolock TERM "$watcher"
  reap "$watcher"
  expect_status "watch: SIGTERM ends it with 0" 0 "$last_status"
}

# ---- a backend without election: refused, nothing left ----

group_refused() {
  local rl_url="redlock://127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]},127.0.0.1:${node_ports[2]}"
  cl 20 elect --url "$rl_url" rf -- touch "$tmp_dir/rf-ran"
  expect_status "refused: elect on RedLock exits 76" 76 "$last_status"
  expect_match "refused: says that RedLock has no election" 'offers no leader election' "$tmp_dir/err"
  expect_true "refused: COMMAND never ran" [ ! -e "$tmp_dir/rf-ran" ]
  local p
  for p in "${node_ports[@]}"; do
    cl 10 status --url "redis://127.0.0.1:$p" rf
    expect_status "refused: status on node $p: not held" 1 "$last_status"
    expect_true "refused: nothing of rf on node $p" nothing_left "$p" rf
  done
}

# ---- main ----

for g in "${groups[@]}"; do
  case $g in
    usage | elect | handover | watch | refused) ;;
    *) echo "unknown group '$g'" >&2; exit 2 ;;
  esac
done
if [ "${groups[*]}" != usage ]; then
  start_nodes 3 || exit 1
  port=${node_ports[0]}
  url="redis://127.0.0.1:$port"
fi
for g in "${groups[@]}"; do
  echo "# $g"
  "group_$g"
done

finish
