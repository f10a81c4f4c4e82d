#!/usr/bin/env bash
# Retries with backoff, commands that cannot run, time limits that kill grandchildren.
. "$(dirname "$0")/lib.sh"

t "retries: a task that fails twice then succeeds, with a checkpoint dir kept across attempts"
id=$(drover submit --retries 3 --backoff 0.2,0.4 -- sh -c '
    n=$(cat "$DROVER_CHECKPOINT_DIR/n" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$DROVER_CHECKPOINT_DIR/n"
    echo "attempt $DROVER_ATTEMPT"; [ $n -ge 3 ]')
drover wait "$id"
expect_eq "$(field_of "$id" '["attempts"]')" 3 "attempts"
expect_eq "$(drover logs "$id" --attempt 1)" "attempt 1" "log of attempt 1"
expect_eq "$(drover logs "$id")" "attempt 3" "log of the latest attempt"
python3 - "$(drover show "$id" --json)" <<'PY'
import json, sys
t = json.loads(sys.argv[1])
a = t["attempt_list"]
assert [x["exit_code"] for x in a] == [1, 1, 0], a
# Backoff: attempt 2 starts >= 0.2 s after attempt 1 ended, attempt 3 >= 0.4 s after attempt 2.
assert a[1]["start_time"] - a[0]["end_time"] >= 190, a
assert a[2]["start_time"] - a[1]["end_time"] >= 390, a
PY

t "retries run out: failed, after retries + 1 attempts"
id=$(drover submit --retries 2 --backoff 0 -- false)
expect_exit 1 drover wait "$id"
expect_eq "$(state_of "$id")" failed
expect_eq "$(field_of "$id" '["attempts"]')" 3

t "a task waiting out its backoff is 'retrying'"
id=$(drover submit --retries 1 --backoff 60 -- false)
wait_until 10 state_is "$id" retrying
drover show "$id" | grep -q "retrying in" || fail "show does not say when it retries"
drover cancel "$id"
expect_eq "$(state_of "$id")" cancelled

t "a command that cannot be executed fails at once, with the reason, and is not retried"
id=$(drover submit --retries 3 -- /nonexistent/command arg)
expect_exit 1 drover wait "$id"
expect_eq "$(field_of "$id" '["attempts"]')" 1 "not retried"
drover show "$id" | grep -q "cannot execute.*No such file or directory" || fail "reason: $(drover show "$id")"
touch "$TMP/notexec"
chmod 644 "$TMP/notexec"
id=$(drover submit --retries 2 -- "$TMP/notexec")
expect_exit 1 drover wait "$id"
drover show "$id" | grep -q "Permission denied" || fail "non-executable reason"
expect_eq "$(field_of "$id" '["attempts"]')" 1

t "a time limit kills the task and its grandchildren"
id=$(drover submit --timeout 1s -- sh -c "sleep 300 & echo \$! > $TMP/grandchild; sleep 300")
expect_exit 1 drover wait "$id"
expect_eq "$(state_of "$id")" timed_out
gc=$(cat "$TMP/grandchild")
gone() { proc_gone "$gc"; }
wait_until 15 gone
drover show "$id" | grep -q "time limit" || fail "timeout reason"

t "a task that ignores SIGTERM is killed after the grace period"
id=$(drover submit --timeout 500ms -- sh -c 'trap "" TERM; sleep 300')
expect_exit 1 drover wait "$id"
expect_eq "$(state_of "$id")" timed_out
done_testing
