#!/usr/bin/env bash
# The RabbitMQ door against a real broker (tests/e2e/amqp-lib.sh starts a private node;
# docs/AMQP.md): submissions taken from the queue run and their events arrive on a bound queue in
# order; a redelivered message (the daemon killed -9 between its commit and its ack) makes one
# task; a message without an idempotency key, one that is not JSON and one with a bad field are
# rejected (not requeued) with an intake.<id>.rejected event; an experiment by message; the
# broker stopped while tasks run: scheduling goes on, the events wait in the store and arrive
# once it is back, none lost or twice; the door's user's limits apply; bad settings.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/amqp-lib.sh"
amqp_start
mkdir -p "$DROVER_HOME"
cd "$TMP"
tool() { amqp_tool "$@"; }
said() { "$@" 2>&1 || true; }
amqp_json() { drover gpus --json | python3 -c "import json,sys; v=json.load(sys.stdin)['amqp']$1; print(json.dumps(v) if not isinstance(v,str) else v)"; }
amqp_up() { [ "$(amqp_json '["up"]')" = true ]; }
amqp_down() { [ "$(amqp_json '["up"]')" = false ]; }
waiting_is() { [ "$(amqp_json '["events_waiting"]')" = "$1" ]; }
queue_empty() { [ "$(tool count "$AMQP_URL" drover.submit)" = 0 ]; }
task_named() { drover ls --all --json | python3 -c 'import json,sys; t=[t["id"] for t in json.load(sys.stdin) if t.get("name")==sys.argv[1]]; print(" ".join(map(str,t)))' "$1"; }
has_task() { [ -n "$(task_named "$1")" ]; }

http_port
cat > "$DROVER_HOME/drover.conf" <<EOF
amqp = $AMQP_URL
user-queued = 3
http = 127.0.0.1:$PORT
EOF
# Every event the daemon publishes, on a durable queue of the test's own.
tool bind "$AMQP_URL" drover.events ev '#'

t "a submission from the queue runs; its events arrive in order, persistent, with message-ids"
drover ls >/dev/null # starts the daemon, which connects
wait_until 30 amqp_up
drover gpus | grep -q "^amqp: connected to 127.0.0.1:$AMQP_PORT, queue drover.submit, exchange drover.events" ||
    fail "gpus: $(drover gpus)"
tool publish "$AMQP_URL" drover.submit '{"command": ["sh", "-c", "echo hi"], "name": "q1"}' --message-id m1
wait_until 30 has_task q1
q1=$(task_named q1)
drover wait "$q1" >/dev/null
expect_eq "$(drover logs "$q1")" hi "its output"
expect_eq "$(field_of "$q1" '["user"]')" "$(id -un)" "whom it ran as (the door's user)"
wait_until 30 waiting_is 0
tool drain "$AMQP_URL" ev > "$TMP/ev1"
python3 - "$TMP/ev1" "$q1" <<'PY'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
task = sys.argv[2]
mine = [m for m in msgs if m["routing_key"].startswith("task.%s." % task)]
states = [m["routing_key"].split(".")[2] for m in mine]
want = [s for s in ["pending", "queued", "running", "succeeded"] if s in states]
assert want[-3:] == ["queued", "running", "succeeded"], states
assert states == sorted(states, key=["pending", "queued", "running", "succeeded"].index), states
for m in mine:
    body = json.loads(m["body"])
    assert body["event"] == "task" and str(body["task"]) == task, body
    assert body["state"] == m["routing_key"].split(".")[2], (body, m)
    assert m["delivery_mode"] == 2 and m["message_id"], m
ids = [int(m["message_id"]) for m in msgs]
assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
PY

t "/healthz and /metrics say it (promtool checks the metrics)"
curl -s "$URL/healthz" | python3 -c 'import json,sys; a=json.load(sys.stdin)["amqp"]; assert a["up"] and a["queue"] == "drover.submit", a' ||
    fail "/healthz: $(curl -s "$URL/healthz")"
curl -s "$URL/metrics" > "$TMP/metrics.txt"
for m in 'drover_amqp_up 1' 'drover_amqp_events_waiting 0' 'drover_amqp_messages_total{result="accepted"} 1' \
         drover_amqp_events_dropped_total drover_amqp_events_published_total; do
    grep -q "^$m" "$TMP/metrics.txt" || fail "/metrics has no $m: $(grep amqp "$TMP/metrics.txt")"
done
have_promtool=1
if command -v promtool >/dev/null; then
    promtool check metrics < "$TMP/metrics.txt" || fail "promtool rejects /metrics"
else
    have_promtool=0 # the rest runs; the test is reported skipped at the end
fi

t "the same message again (a redelivery), and the same key: no second task"
tool publish "$AMQP_URL" drover.submit '{"command": ["sh", "-c", "echo hi"], "name": "q1"}' --message-id m1
wait_until 30 queue_empty
expect_eq "$(task_named q1)" "$q1" "tasks named q1"
tool publish "$AMQP_URL" drover.submit '{"command": "true", "name": "k1", "key": "k-1"}' --message-id a
tool publish "$AMQP_URL" drover.submit '{"command": "true", "name": "k1", "key": "k-1"}' --message-id b
wait_until 30 has_task k1
wait_until 30 queue_empty
expect_eq "$(task_named k1 | wc -w)" 1 "tasks of key k-1"
expect_eq "$(amqp_json '["messages"]["duplicate"]')" 2 "duplicates counted"

t "killed -9 between the commit and the ack: the broker delivers it again, one task"
dpid=$(cat "$DROVER_HOME/daemon.lock")
drover shutdown >/dev/null
wait_until 30 proc_gone "$dpid"
# A test hook: this daemon commits the task and never acks, as one killed in between would.
DROVER_TEST_AMQP_HOLD_ACKS=1 drover ls >/dev/null
wait_until 30 amqp_up
tool publish "$AMQP_URL" drover.submit '{"command": "true", "name": "crash1"}' --message-id c1
wait_until 30 has_task crash1
dpid=$(cat "$DROVER_HOME/daemon.lock")
kill -9 "$dpid"
wait_until 30 proc_gone "$dpid"
drover ls >/dev/null
wait_until 30 amqp_up
wait_until 30 queue_empty
expect_eq "$(task_named crash1 | wc -w)" 1 "tasks made of the redelivered message"
drover wait "$(task_named crash1)" >/dev/null

t "malformed messages are rejected, not requeued, with an error event naming the message"
tool drain "$AMQP_URL" ev >/dev/null
tool publish "$AMQP_URL" drover.submit 'not json' --message-id bad1
tool publish "$AMQP_URL" drover.submit '{"command": "true", "gpus": "lots"}' --message-id bad2
tool publish "$AMQP_URL" drover.submit '{"command": "true"}'
tool publish "$AMQP_URL" drover.submit '{"experiment": 42}' --message-id bad4
wait_until 30 queue_empty
wait_until 30 waiting_is 0
tool drain "$AMQP_URL" ev > "$TMP/ev2"
python3 - "$TMP/ev2" <<'PY'
import json, sys
ev = {m["routing_key"]: json.loads(m["body"]) for m in map(json.loads, open(sys.argv[1])) }
b1 = ev["intake.bad1.rejected"]
assert b1["message_id"] == "bad1" and "not JSON" in b1["error"], b1
b2 = ev["intake.bad2.rejected"]
assert b2["field"] == "gpus" and "gpus" in b2["error"], b2
none = ev["intake.none.rejected"]
assert none["message_id"] is None and "no message-id and no 'key'" in none["error"], none
b4 = ev["intake.bad4.rejected"]
assert b4["field"] == "experiment", b4
PY
expect_eq "$(amqp_json '["messages"]["rejected"]')" 4 "rejected counted"

t "the door's user's limits apply (user-queued = 3): one over is rejected with the reason"
for i in 1 2 3 4; do
    tool publish "$AMQP_URL" drover.submit "{\"command\": \"true\", \"name\": \"h$i\", \"hold\": true}" --message-id "h$i"
done
wait_until 30 queue_empty
wait_until 30 waiting_is 0
held=$(drover ls --json | python3 -c 'import json,sys; print(len([t for t in json.load(sys.stdin) if (t.get("name") or "").startswith("h")]))')
expect_eq "$held" 3 "held tasks taken"
tool drain "$AMQP_URL" ev | grep -q '"routing_key": "intake.h4.rejected"' || fail "no rejection of h4"
for i in 1 2 3; do drover cancel "$(task_named "h$i")" >/dev/null; done

t "an experiment by message; its redelivery makes no second one"
exp_msg=$(python3 -c 'import json; print(json.dumps({"experiment": "apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: viaq}\nspec:\n  stages:\n    - name: one\n      command: [sh, -c, \"echo from-amqp\"]\n"}))')
tool publish "$AMQP_URL" drover.submit "$exp_msg" --message-id e1
tool publish "$AMQP_URL" drover.submit "$exp_msg" --message-id e1
wait_until 30 queue_empty
exp_done() { [ "$(drover exp show viaq --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = done ]; }
wait_until 60 exp_done
expect_eq "$(drover exp ls --json | python3 -c 'import json,sys; print(len([e for e in json.load(sys.stdin) if e["name"]=="viaq"]))')" 1 "experiments named viaq"
wait_until 30 waiting_is 0
tool drain "$AMQP_URL" ev | grep -q '"routing_key": "experiment.viaq.done"' || fail "no experiment event"

t "the broker away: scheduling goes on, events wait in the store, arrive once it is back"
tool drain "$AMQP_URL" ev >/dev/null
amqp_stop_broker
wait_until 60 amqp_down
[ -n "$(amqp_json '["error"]')" ] || fail "no error while down"
drover gpus | grep -q "^amqp: not connected: " || fail "gpus: $(drover gpus)"
ids=""
for i in 1 2 3; do ids="$ids $(drover submit --name "away$i" -- sh -c 'echo ok')"; done
for id in $ids; do drover wait "$id" >/dev/null; done
n=$(amqp_json '["events_waiting"]')
[ "$n" -ge 9 ] || fail "events kept while away: $n"
amqp_start_broker
wait_until 60 amqp_up
wait_until 30 waiting_is 0
tool drain "$AMQP_URL" ev > "$TMP/ev3"
python3 - "$TMP/ev3" $ids <<'PY'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ids = [int(m["message_id"]) for m in msgs]
assert len(set(ids)) == len(ids), "a duplicate: %s" % ids
for task in sys.argv[2:]:
    states = [m["routing_key"].split(".")[2] for m in msgs if m["routing_key"].startswith("task.%s." % task)]
    assert states[-3:] == ["queued", "running", "succeeded"], (task, states)
PY

t "the outbox is bounded (amqp-outbox): while away the oldest events go, counted"
amqp_stop_broker
wait_until 60 amqp_down
drover shutdown >/dev/null
wait_until 10 bash -c "! [ -S '$DROVER_HOME/drover.sock' ]"
echo "amqp-outbox = 3" >> "$DROVER_HOME/drover.conf"
before=$(amqp_json '["events_dropped"]' 2>/dev/null || echo 0)
for i in 1 2; do drover wait "$(drover submit --name "tiny$i" -- true)" >/dev/null; done
last=$(task_named tiny2)
[ "$(amqp_json '["events_waiting"]')" -le 3 ] || fail "more than 3 events kept: $(amqp_json '["events_waiting"]')"
[ "$(amqp_json '["events_dropped"]')" -ge 3 ] || fail "dropped: $(amqp_json '["events_dropped"]')"
amqp_start_broker
wait_until 60 amqp_up
wait_until 30 waiting_is 0
tool drain "$AMQP_URL" ev > "$TMP/ev4"
[ "$(wc -l < "$TMP/ev4")" -le 3 ] || fail "more than 3 events after the return: $(cat "$TMP/ev4")"
tail -1 "$TMP/ev4" | grep -q "\"routing_key\": \"task.$last.succeeded\"" || fail "the newest event is not the last one: $(cat "$TMP/ev4")"

t "bad settings: one line, the daemon does not start"
expect_exit 2 env DROVER_HOME="$TMP/bad" "$DROVER" daemon --amqp http://x
said env DROVER_HOME="$TMP/bad" "$DROVER" daemon --amqp http://x | grep -q "amqp 'http://x': expected amqp://" || fail "bad URL not explained"
said env DROVER_HOME="$TMP/bad" "$DROVER" daemon --amqp amqp://h:99999/ | grep -q "port" || fail "bad port not explained"
said env DROVER_HOME="$TMP/bad" "$DROVER" daemon --amqp "$AMQP_URL" --amqp-user nosuchuser | grep -q "amqp-user 'nosuchuser': no such user" || fail "bad user not explained"
printf 'guest:guest\n' > "$TMP/creds"
chmod 644 "$TMP/creds"
said env DROVER_HOME="$TMP/bad" "$DROVER" daemon --amqp amqp://127.0.0.1:1/ --amqp-credentials "$TMP/creds" | grep -q "mode 0600" || fail "open credentials not refused"

[ "$have_promtool" = 1 ] || skip "no promtool (apt-get install prometheus): /metrics unchecked"
done_testing
