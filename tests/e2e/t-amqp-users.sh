#!/usr/bin/env bash
# The RabbitMQ door of a system daemon, with real users (docs/AMQP.md): messages act as
# amqp-user — its tasks run as that user and are its, and what it may not do (a priority above 0
# is for admins) is rejected with the reason; amqp-user may not be root, and a system daemon
# needs one.
. "$(dirname "$0")/lib.sh"
system_setup amqpusers
. "$(dirname "$0")/amqp-lib.sh"
amqp_start
system_user BOT b
amqp_tool bind "$AMQP_URL" drover.events ev '#'
said() { "$@" 2>&1 || true; }

t "a system daemon needs amqp-user, and not root"
printf 'amqp = %s\n' "$AMQP_URL" > "$SYS/bad.conf"
said "$DROVER" daemon --system --state-dir "$SYS/bad" --socket "$SYS/bad.sock" --config "$SYS/bad.conf" |
    grep -q "amqp needs amqp-user on a system daemon" || fail "no amqp-user not refused"
printf 'amqp = %s\namqp-user = root\n' "$AMQP_URL" > "$SYS/bad.conf"
said "$DROVER" daemon --system --state-dir "$SYS/bad" --socket "$SYS/bad.sock" --config "$SYS/bad.conf" |
    grep -q "amqp-user must not be root" || fail "root not refused"

t "messages act as amqp-user: its tasks run as it, and are its"
system_daemon_start "amqp = $AMQP_URL" "amqp-user = $BOT"
amqp_up() { [ "$("$DROVER" gpus --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["amqp"]["up"])')" = True ]; }
wait_until 30 amqp_up
# (The test user has no home, the default workdir: its working directory is given.)
amqp_tool publish "$AMQP_URL" drover.submit "{\"command\": [\"sh\", \"-c\", \"id -un\"], \"name\": \"who\", \"workdir\": \"$SYS/b-work\"}" --message-id w1
who_id() { "$DROVER" ls --all --json | python3 -c 'import json,sys; print(" ".join(str(t["id"]) for t in json.load(sys.stdin) if t.get("name")=="who"))'; }
who_exists() { [ -n "$(who_id)" ]; }
wait_until 30 who_exists
id=$(who_id)
"$DROVER" wait "$id" >/dev/null
expect_eq "$(field_of "$id" '["user"]')" "$BOT" "the task's owner"
expect_eq "$("$DROVER" logs "$id")" "$BOT" "whom it ran as"

t "what amqp-user may not do is rejected with the reason (a priority above 0: admins only)"
amqp_tool publish "$AMQP_URL" drover.submit "{\"command\": \"true\", \"priority\": 5, \"workdir\": \"$SYS/b-work\"}" --message-id p1
rejected() { amqp_tool drain "$AMQP_URL" ev | grep '"routing_key": "intake.p1.rejected"' >> "$SYS/p1"; [ -s "$SYS/p1" ]; }
wait_until 30 rejected
python3 -c 'import json,sys; b=json.loads(json.loads(open(sys.argv[1]).readline())["body"]); assert "priority" in b["error"] and b["message_id"] == "p1", b' "$SYS/p1"
expect_eq "$("$DROVER" ls --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1 "tasks"

done_testing
