#!/usr/bin/env bash
# Group commit (daemon/group.c): the submissions of one loop turn share one transaction, and each
# is acknowledged only once it is committed. The daemon is stopped (SIGSTOP) while clients connect
# and send, so that it reads them all in one turn when it goes on; a kill -9 while their group is
# still open must lose only submissions nobody was told were accepted.
. "$(dirname "$0")/lib.sh"
cd "$TMP"
N=20

commits() { drover gpus --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["store_commits"])'; }
# blocked_in_read PID…: every client has sent its request and waits for the answer (read(2),
# system call 0 on x86-64, 63 on arm64; poll: 7 / ppoll 73); a client that is gone counts too.
all_waiting() {
    local p s
    for p in "$@"; do
        s=$(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null) || continue
        case "$s" in 0 | 7 | 63 | 73) ;; *) return 1 ;; esac
    done
}
# submit_clients N DIR: N clients in the background, each `drover submit` printing into DIR/I;
# their pids in $pids.
submit_clients() {
    pids=()
    for i in $(seq "$1"); do
        "$DROVER" submit -- true >"$2/$i" 2>"$2/$i.err" &
        pids+=($!)
    done
}

t "$N clients at once: one commit, every one answered with its own task"
drover drain >/dev/null # nothing starts: the only commits are the submissions'
pid=$(cat "$DROVER_HOME/daemon.lock")
# A failure while the daemon is stopped must not leave it so: cleanup's shutdown would hang.
trap 'rc=$?; kill -CONT "$pid" 2>/dev/null; (exit $rc); cleanup' EXIT
before=$(commits)
mkdir out
kill -STOP "$pid"
submit_clients "$N" out
wait_until 20 all_waiting "${pids[@]}"
kill -CONT "$pid"
for p in "${pids[@]}"; do wait "$p" || fail "a client failed: $(cat out/*.err)"; done
expect_eq "$(cat out/[0-9]* | sort -u | wc -l)" "$N" "distinct ids answered"
expect_eq "$(drover ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
    "$N" "tasks stored"
after=$(commits)
# One for the group; the loop may commit something of its own (telemetry) meanwhile, but never
# one per submission as without the group.
[ $((after - before)) -ge 1 ] && [ $((after - before)) -le 3 ] ||
    fail "$N submissions took $((after - before)) commits"

t "a lone client is answered at once, and a bad submission alone refused"
id=$(drover submit -- true)
[ -n "$id" ] || fail "no id"
kill -STOP "$pid"
mkdir mixed
submit_clients 3 mixed
"$DROVER" submit --gpus 3 -- true >mixed/bad 2>mixed/bad.err &
bad=$!
wait_until 20 all_waiting "${pids[@]}" "$bad"
kill -CONT "$pid"
for p in "${pids[@]}"; do wait "$p" || fail "a client failed: $(cat mixed/*.err)"; done
rc=0
wait "$bad" || rc=$?
expect_eq "$rc" 2 "the bad submission's exit code"
grep -q "GPU" mixed/bad.err || fail "the bad submission's error: $(cat mixed/bad.err)"
expect_eq "$(cat mixed/[0-9]* | sort -u | wc -l)" 3 "the good ones, answered"

t "kill -9 while the group is open: nothing unanswered is kept, nothing answered is lost"
stored=$(drover ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
kill -STOP "$pid"
mkdir lost
submit_clients 5 lost
wait_until 20 all_waiting "${pids[@]}"
kill -9 "$pid"
kill -CONT "$pid" 2>/dev/null || true
for p in "${pids[@]}"; do wait "$p" || true; done
answered=$(cat lost/[0-9]* 2>/dev/null | grep -c '^[0-9]' || true)
# The next command starts a new daemon on the same store.
now=$(drover ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
# The daemon was stopped before it read anything: no client can have been answered, and what
# the store holds is what it held.
expect_eq "$answered" 0 "clients told their task was accepted"
expect_eq "$now" "$stored" "tasks after the restart"
