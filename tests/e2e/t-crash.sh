#!/usr/bin/env bash
# Nothing lost: kill -9 of the daemon with tasks running and queued; shutdown leaves tasks
# running; a restarted daemon re-adopts them and records their real exit status.
export DROVER_FAKE_GPUS=1x16G
. "$(dirname "$0")/lib.sh"

daemon_pid() { cat "$DROVER_HOME/daemon.lock"; }
kill_daemon() {
    local pid
    pid=$(daemon_pid)
    kill -9 "$pid"
    dead() { proc_gone "$pid"; }
    wait_until 10 dead
}
# Each task appends a line to its own file when it starts: a rerun would show as two lines.
starter() { echo "echo started >> $TMP/started.\$DROVER_TASK_ID; while [ ! -f $TMP/gate.\$DROVER_TASK_ID ]; do sleep 0.05; done; exit \$(cat $TMP/code.\$DROVER_TASK_ID 2>/dev/null || echo 0)"; }
starts() { cat "$TMP/started.$1" 2>/dev/null | wc -l; }

t "kill -9 with tasks running, queued and finished"
done_id=$(drover submit -- sh -c "echo started >> $TMP/started.\$DROVER_TASK_ID")
drover wait "$done_id"
r1=$(drover submit --gpus 1 --gpu-mem 8G -- sh -c "$(starter)")
r2=$(drover submit --gpus 1 --gpu-mem 8G -- sh -c "$(starter)")
q1=$(drover submit --gpus 1 -- sh -c "$(starter)")
wait_until 10 state_is "$r1" running
wait_until 10 state_is "$r2" running
expect_eq "$(state_of "$q1")" queued "the exclusive task waits"
kill_daemon

t "while the daemon is dead, r1 ends with exit code 7; r2 keeps running"
echo 7 > "$TMP/code.$r1"
touch "$TMP/gate.$r1"
wait_until 10 test -f "$DROVER_HOME/runs/$r1/1/status"

t "the next command restarts the daemon: nothing lost, nothing run twice"
expect_eq "$(task_count)" 4 "tasks after restart"
wait_until 10 state_is "$r1" failed
expect_eq "$(field_of "$r1" '["exit_code"]')" 7 "r1's real exit status"
expect_eq "$(state_of "$r2")" running "r2 re-adopted"
expect_eq "$(starts "$r2")" 1 "r2 not started again"
expect_eq "$(state_of "$q1")" queued "q1 still waits for the GPU r2 holds"
touch "$TMP/gate.$r2" "$TMP/gate.$q1"
drover wait "$r2" "$q1"
expect_eq "$(starts "$done_id")" 1 "a finished task is not run again"
expect_eq "$(starts "$r1")" 1 "r1 ran once"
expect_eq "$(starts "$q1")" 1 "q1 ran once"
grep -q "re-adopted 1 running" "$DROVER_HOME/daemon.log" || fail "no re-adoption logged"

t "drover shutdown leaves running tasks running"
s1=$(drover submit -- sh -c "$(starter)")
wait_until 10 state_is "$s1" running
drover shutdown
dead() { ! [ -S "$DROVER_HOME/drover.sock" ]; }
wait_until 10 dead
touch "$TMP/gate.$s1"
wait_until 10 test -f "$DROVER_HOME/runs/$s1/1/status"
drover wait "$s1"
expect_eq "$(starts "$s1")" 1 "ran once across the shutdown"

t "kill -9 of a supervisor: its task group is killed, the attempt is lost and retried"
lost=$(drover submit --retries 1 --backoff 0 -- sh -c "echo \$DROVER_ATTEMPT >> $TMP/lost.attempts; sleep 300 & echo \$! > $TMP/lost.child.\$DROVER_ATTEMPT; [ \$DROVER_ATTEMPT -ge 2 ] || sleep 300")
wait_until 10 test -s "$TMP/lost.child.1"
read -r sup _ < "$DROVER_HOME/runs/$lost/1/pid"
kill -9 "$sup"
drover wait "$lost"
expect_eq "$(field_of "$lost" '["attempt_list"][0]["outcome"]')" lost "first attempt's outcome"
expect_eq "$(tr -d '\n' < "$TMP/lost.attempts")" 12 "attempts run"
orphan=$(cat "$TMP/lost.child.1")
gone() { proc_gone "$orphan"; }
wait_until 10 gone

t "kill -9 during a burst of submissions: every printed id exists"
: > "$TMP/ids"
( for i in $(seq 1 200); do "$DROVER" submit -- true >> "$TMP/ids" 2>/dev/null || break; done ) &
burst=$!
wait_until 20 bash -c "[ \$(wc -l < '$TMP/ids') -ge 20 ]"
kill -9 "$(daemon_pid)"
wait "$burst" || true
n=$(wc -l < "$TMP/ids")
[ "$n" -ge 20 ] || fail "too few submissions before the kill"
drover ls --all --json > "$TMP/ls.json"
python3 - "$TMP/ids" "$TMP/ls.json" <<'PY'
import json, sys
printed = [int(l) for l in open(sys.argv[1]) if l.strip()]
known = {t["id"] for t in json.load(open(sys.argv[2]))}
missing = [i for i in printed if i not in known]
assert not missing, f"acknowledged but lost: {missing}"
PY
ids=$(cat "$TMP/ids")
drover wait $ids
done_testing
