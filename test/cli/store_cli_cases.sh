# The cases zk_cli_test.sh and pg_cli_test.sh share: run, status, list,
# break and check over a lock service other than Redis and etcd. Sourced after lib.sh,
# once the script has set:
#
#   url        the running server's URL
#   service    its name in messages: ZooKeeper, PostgreSQL
#   over       "over zk", "over pg": in the case names
#   backend    status --json's backend field: zk, postgresql
#   holder_re  the status line naming where the holder is (node, session)
#   removed_re what break prints after "held by OWNER " (node, session)
#
# and defined url_cases (the backend's malformed URLs) and dead_url PORT (a
# URL of the service on a port nobody listens on).

# status of NAME, quietly, into $tmp_dir/st.
st() { timeout 10 "$bin" status --url "$url" "$1" >"$tmp_dir/st" 2>&1; }
is_held() { st "$1" && grep -Eq '^held: +yes$' "$tmp_dir/st"; }
# status exits 1 for a free lock (0 held), as test(1).
is_free() { st "$1"; [ $? = 1 ] && grep -Eq '^held: +no$' "$tmp_dir/st"; }
has_waiters() { st "$1" && grep -Eq "^waiters: +$2\$" "$tmp_dir/st"; }

host=$(hostname)

group_run() {
  cl 30 run --url "$url" r1 -- sh -c "echo \"\$COROLOCK_NAME \$COROLOCK_TOKEN\" >'$tmp_dir/r1-token'; exit 7"
  expect_status "run $over passes the command's status" 7 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "run $over: COROLOCK_NAME and COROLOCK_TOKEN" grep -Eqx 'r1 [1-9][0-9]*' "$tmp_dir/r1-token"
  cl 30 run --url "$url" r1 -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/r1-token2'"
  expect_status "run $over: a second run of a released lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  local t1 t2
  t1=$(cut -d' ' -f2 "$tmp_dir/r1-token")
  t2=$(cat "$tmp_dir/r1-token2")
  expect_cond "run $over: the second token is higher ($t1 < $t2)" '[ -n "$t1" ] && [ -n "$t2" ] && [ "$t1" -lt "$t2" ]'
  expect_true "run $over: the lock is free afterwards" is_free r1

  cl 30 run --url "$url" -v r2 -- true
  expect_status "run -v $over" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run -v $over: says the lock was free" "lock 'r2' is free" "$tmp_dir/err"
  expect_match "run -v $over: says it acquired" "acquired lock 'r2' \(token [0-9]+" "$tmp_dir/err"

  # Several NAMEs: a multi_lock, a token per name.
  cl 30 run --url "$url" rm2 rm1 -- sh -c 'echo "$COROLOCK_LOCKS $COROLOCK_NAME_1=$COROLOCK_TOKEN_1 $COROLOCK_NAME_2=$COROLOCK_TOKEN_2"'
  expect_status "run $over with two NAMEs" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run $over with two NAMEs: both, in order, with tokens" '^2 rm1=[1-9][0-9]* rm2=[1-9][0-9]*$' "$tmp_dir/out"

  # Options the backend does not offer, and the Redis-only ones, refused.
  local opt what
  while IFS='|' read -r what opt; do
    cl 10 run --url "$url" $opt r3 -- touch "$tmp_dir/r3-ran"
    expect_status "run $over: $what is a usage error" 64 "$last_status"
    expect_match "run $over: $what: says why" "$what" "$tmp_dir/err"
  done <<'CASES'
--fair is offered on Redis only|--fair
--capacity is not supported|--capacity 2
-s \(--shared\) is not supported|-s
-x \(--exclusive\) is not supported|-x
--replicas is not supported|--replicas 1
--tls-insecure applies to Redis URLs only|--tls-insecure
CASES
  # ZooKeeper takes --password-file for a URL that names its user.
  cl 10 run --url "$url" --password-file /dev/null r3 -- touch "$tmp_dir/r3-ran"
  expect_status "run $over: --password-file is a usage error" 64 "$last_status"
  expect_match "run $over: --password-file: says why" \
    "${password_file_refusal:---password-file applies to Redis URLs only}" "$tmp_dir/err"
  expect_true "run $over: no refused run ran its command" [ ! -e "$tmp_dir/r3-ran" ]

  url_cases

  local dead
  dead=$(free_port)
  cl 30 run --url "$(dead_url "$dead")" r3 -- touch "$tmp_dir/r3-ran"
  expect_status "run: $service unreachable" 69 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "run: names $service and the endpoint" "cannot reach $service at 127.0.0.1:$dead" "$tmp_dir/err"
  expect_no_match "run: unreachable: no password echoed" "s3cret" "$tmp_dir/err"
  expect_true "run: the command did not run" [ ! -e "$tmp_dir/r3-ran" ]
}

group_exclusion() { exclusion_cases; }

group_inspect() {
  cl 10 status --url "$url" ins
  expect_status "status of a free lock: exit 1" 1 "$last_status" "$(cat "$tmp_dir/err")"
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
  expect_match "status: the label is the run's program" "^label: +sh$" "$tmp_dir/out"
  expect_match "status: last token is the holder's token" "^last token: +$token\$" "$tmp_dir/out"
  expect_match "status: where the holder is" "$holder_re" "$tmp_dir/out"
  expect_match "status: no waiters" '^waiters: +0$' "$tmp_dir/out"
  cl 10 status --url "$url" --json ins
  expect_true "status --json: held is true" [ "$(json_field "$tmp_dir/out" held)" = "true" ]
  expect_true "status --json: last_token" [ "$(json_field "$tmp_dir/out" last_token)" = "$token" ]
  expect_true "status --json: pid" [ "$(json_field "$tmp_dir/out" pid)" = "$holder_pid" ]
  expect_true "status --json: backend" [ "$(json_field "$tmp_dir/out" backend)" = "\"$backend\"" ]

  check_cases "$over" ins "$token"
  list_break_while_held ins "$holder_pid"

  signal_corolock TERM "$holder"
  reap "$holder"
  expect_status "status: the holder ends on SIGTERM" 143 "$last_status"
  expect_true "status: free after the holder ended" wait_until 10 is_free ins
  cl 10 check --url "$url" ins "$token"
  expect_status "check $over: the token of a freed lock is stale (1)" 1 "$last_status" "$(cat "$tmp_dir/err")"

  list_break_after
}

# list and break while NAME is held by the run on HOLDER_PID (which still
# holds it after).
list_break_while_held() {  # NAME HOLDER_PID
  local name=$1 holder_pid=$2
  cl 10 list --url "$url"
  expect_status "list $over" 0 "$last_status" "$(cat "$tmp_dir/err")"
  list_tabs "$tmp_dir/out" >"$tmp_dir/list.tsv"
  expect_match "list: the header" '^NAME	KIND	STATE	HOLDER	SINCE	HELD\(s\)	TTL\(s\)	DELAY\(s\)	WAITERS	PERMITS	LABEL$' "$tmp_dir/list.tsv"
  expect_list_columns_documented "list $over" "$tmp_dir/out"
  expect_match "list: the held lock, its holder, no TTL, no waiters, a mutex" \
    "^$name	mutex	held	$host:$holder_pid	[0-9T:.-]+Z	[0-9]+\\.[0-9]{3}	-	-	0	-	sh\$" "$tmp_dir/list.tsv"
  expect_true "list: only the held lock (r1, r2, ... are free)" [ "$(wc -l <"$tmp_dir/out")" -eq 2 ]
  cl 10 list --url "$url" 'other*'
  expect_status "list $over with a pattern" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "list: a pattern that matches nothing: the header only" [ "$(wc -l <"$tmp_dir/out")" -eq 1 ]
  cl 10 list --url "$url" --json "${name:0:2}*"
  expect_status "list --json $over" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_true "list --json: the lock, its pid, not truncated" [ "$(json_eval "$tmp_dir/out" \
    '[l["name"] for l in j["locks"]] == ["'"$name"'"] and j["locks"][0]["pid"] == '"$holder_pid"' and j["truncated"] is False and j["backend"] == "'"$backend"'"')" = True ]
  cl 10 break --url "$url" "$name-free"
  expect_status "break $over of a free lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "break: says it was not held" "^lock $name-free was not held\$" "$tmp_dir/out"
}

# break: the holder's node (ZooKeeper) or session (PostgreSQL) goes, the
# holder is told at once (its run ends with 70, its command terminated),
# and the waiter in line takes the lock.
list_break_after() {
  spawn 60 "$bin" run --url "$url" brk -- \
    sh -c "trap 'echo >\"$tmp_dir/brk-term\"; exit 143' TERM
           echo \$COROLOCK_TOKEN >'$tmp_dir/brk-token'; $(long_child 40)"
  local holder=$last_pid
  expect_true "break: holder acquired" wait_until 15 test -s "$tmp_dir/brk-token"
  spawn 60 "$bin" run --url "$url" brk -- sh -c "echo \$COROLOCK_TOKEN >'$tmp_dir/brk-next'"
  local waiter=$last_pid
  expect_true "break: a waiter in line" wait_until 15 has_waiters brk 1
  cl 10 break --url "$url" brk
  expect_status "break $over of a held lock" 0 "$last_status" "$(cat "$tmp_dir/err")"
  expect_match "break: says what it removed" "^removed lock brk held by [0-9a-f]{32} $removed_re\$" "$tmp_dir/out"
  expect_match "break: the waiter keeps its place" '^1 waiters keep their places; the first takes the lock$' "$tmp_dir/out"
  # Told at once (a watch of its node, its session's end), not when its
  # command ends (40 s).
  expect_true "break: the holder's command is terminated at once" wait_until 10 test -e "$tmp_dir/brk-term"
  reap "$waiter"
  expect_status "break: the waiter got the lock" 0 "$last_status"
  expect_cond "break: the waiter's token is higher" \
    '[ "$(cat "$tmp_dir/brk-next")" -gt "$(cat "$tmp_dir/brk-token")" ]'
  reap "$holder"
  expect_status "break: the broken holder's run is told: lost (70)" 70 "$last_status" "$(cat "$tmp_dir/err")"
}

# Runs the GROUPs given (run exclusion inspect, default all) against the
# server start_server starts; the last line is "N passed, M failed".
run_groups() {  # GROUP...
  local g
  local -a chosen=("$@")
  [ ${#chosen[@]} -eq 0 ] && chosen=(run exclusion inspect)
  for g in "${chosen[@]}"; do
    case $g in
      run | exclusion | inspect) ;;
      *) echo "unknown group '$g'" >&2; exit 2 ;;
    esac
  done
  start_server || exit 1
  for g in "${chosen[@]}"; do
    echo "# $g"
    "group_$g"
  done
  finish
}
