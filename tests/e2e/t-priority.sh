#!/usr/bin/env bash
# drover priority N ID…: a new priority for waiting tasks changes which starts next, survives a
# daemon restart and is audited; a running or ended task, a bad number and an unknown id are
# refused with one line.
export DROVER_FAKE_GPUS=1x16G
. "$(dirname "$0")/lib.sh"

# One GPU, held by a task that waits for $TMP/gate; each later task appends its letter to
# $TMP/order when it starts.
gate=$(drover submit --gpus 1 -- sh -c "while [ ! -f $TMP/gate ]; do sleep 0.05; done")
wait_until 10 state_is "$gate" running
letter() { drover submit --gpus 1 --name "$1" -- sh -c "echo $1 >> $TMP/order"; }
a=$(letter a)
b=$(letter b)
c=$(letter c)
h=$(drover submit --hold --gpus 1 -- sh -c "echo h >> $TMP/order")

t "raise one, lower another (a negative N is an argument, not an option)"
drover priority 5 "$c"
drover priority -2 "$a"
expect_eq "$(field_of "$c" '["priority"]')" 5 "c's priority"
expect_eq "$(field_of "$a" '["priority"]')" -2 "a's priority"
expect_eq "$(state_of "$c")" queued "a queued task stays queued"

t "a held task takes one too, and several ids at once"
drover priority 3 "$h" "$b"
expect_eq "$(state_of "$h")" held "still held"
expect_eq "$(field_of "$h" '["priority"]')" 3 "h's priority"
expect_eq "$(field_of "$b" '["priority"]')" 3 "b's priority"

t "refusals: running, ended, unknown id, bad numbers, missing arguments"
expect_exit 1 drover priority 1 "$gate"
[[ "$ERR" == "drover priority: cannot change the priority of task $gate: it is running"* ]] ||
    fail "running: $ERR"
done_id=$(drover submit --gpus 0 -- true)
drover wait "$done_id"
expect_exit 1 drover priority 1 "$done_id"
[[ "$ERR" == *"task $done_id: it has already ended (succeeded)"* ]] || fail "ended: $ERR"
expect_exit 2 drover priority 1 999999
[[ "$ERR" == "drover priority: no task 999999" ]] || fail "unknown id: $ERR"
for bad in abc 1.5 2000000 -2000000 ""; do
    expect_exit 2 drover priority "$bad" "$a"
    [[ "$ERR" == "drover priority: '$bad' is not a priority (a whole number from -1000000 to 1000000)" ]] ||
        fail "priority '$bad': $ERR"
done
expect_exit 2 drover priority 1 x7
[[ "$ERR" == *"'x7' is not a task id"* ]] || fail "bad id: $ERR"
expect_exit 2 drover priority 1
expect_exit 2 drover priority
out=$(printf '{"v":1,"op":"priority","ids":[%s]}' "$a" | send_request)
[[ "$out" == *'"no priority given"'* ]] || fail "a request without a priority: $out"
out=$(printf '{"v":1,"op":"priority","ids":[%s],"priority":"9"}' "$a" | send_request)
[[ "$out" == *"'priority' must be a whole number from -1000000 to 1000000"* ]] ||
    fail "a string priority: $out"
expect_eq "$(field_of "$a" '["priority"]')" -2 "a's priority after the refusals"

t "the changes are audited, the refusals not"
drover audit --json | python3 -c '
import json, sys
recs = [r for r in json.load(sys.stdin) if r["op"] == "priority"]
got = sorted((r["target"], r["detail"]) for r in recs)
want = sorted([("task %s" % sys.argv[1], "priority 5"), ("task %s" % sys.argv[2], "priority -2"),
               ("task %s" % sys.argv[3], "priority 3"), ("task %s" % sys.argv[4], "priority 3")])
assert got == want, got
' "$c" "$a" "$h" "$b" || fail "audit: $(drover audit)"

t "the next starts follow the new priorities: c (5), b (3), a (-2)"
touch "$TMP/gate"
drover wait "$gate" "$a" "$b" "$c"
expect_eq "$(tr '\n' ' ' < "$TMP/order")" "c b a " "start order"

t "a priority survives a daemon restart"
rm -f "$TMP/gate" "$TMP/order"
gate=$(drover submit --gpus 1 -- sh -c "while [ ! -f $TMP/gate ]; do sleep 0.05; done")
wait_until 10 state_is "$gate" running
d=$(letter d)
e=$(letter e)
drover priority 2 "$e"
drover shutdown
wait_until 10 bash -c "! [ -S '$DROVER_HOME/drover.sock' ]"
expect_eq "$(field_of "$e" '["priority"]')" 2 "e's priority after the restart"
expect_eq "$(field_of "$h" '["priority"]')" 3 "h's priority after the restart"
touch "$TMP/gate"
drover wait "$gate" "$d" "$e"
expect_eq "$(tr '\n' ' ' < "$TMP/order")" "e d " "start order after the restart"
drover release "$h"
drover wait "$h"
done_testing
