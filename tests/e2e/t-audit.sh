#!/usr/bin/env bash
# Ownership in per-user mode, and the audit log: every task and experiment records its owner
# (the daemon's user: ls USER column, --mine, --user, --json user/uid) and names and keys stay as
# they were; every state change a person caused is in `drover audit` (who, what, when), written
# with the change, filtered by --since; a raw request's "uid"/"user" fields are ignored; and
# `drover users` counts the user's tasks.
. "$(dirname "$0")/lib.sh"

me=$(id -un)
uid=$(id -u)
W="$TMP/work"
mkdir -p "$W"
cd "$W"

t "tasks record their owner: show --json, ls --json, the USER column"
run=$(drover submit --name long -- sleep 300)
wait_until 20 state_is "$run" running
expect_eq "$(field_of "$run" '["user"]')" "$me" "show --json user"
expect_eq "$(field_of "$run" '["uid"]')" "$uid" "show --json uid"
expect_eq "$(drover ls --json | python3 -c 'import json,sys; t=json.load(sys.stdin)[0]; print(t["user"], t["uid"])')" \
    "$me $uid" "ls --json user and uid"
drover ls | head -1 | grep -q "^ID  *NAME  *STATE  *USER  *PRI" || fail "ls header: $(drover ls | head -1)"
expect_eq "$(drover ls | awk -v id="$run" '$1 == id {print $4}')" "$me" "the USER column"

t "--mine and --user"
expect_eq "$(drover ls --mine --json | python3 -c 'import json,sys; print([t["id"] for t in json.load(sys.stdin)])')" \
    "[$run]" "ls --mine"
expect_eq "$(drover ls --user "$me" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1 "ls --user me"
expect_eq "$(drover ls --user "$uid" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1 "ls --user UID"
expect_eq "$(drover ls --user drvtst_nobody_here --json)" "[]" "ls --user of someone else"
expect_exit 2 drover ls --mine --user "$me"
case "$ERR" in *"--mine and --user cannot be used together"*) ;; *) fail "got: $ERR" ;; esac
out=$(printf '{"v":1,"op":"ls","user":7}' | send_request)
case "$out" in *"'user' must be a user name"*'"code":2'*) ;; *) fail "a numeric user field: $out" ;; esac

t "a raw request's uid and user fields are ignored"
out=$(printf '{"v":1,"op":"submit","command":["true"],"env":{},"workdir":"%s","uid":0,"user":"root"}' "$W" | send_request)
rid=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
expect_eq "$(field_of "$rid" '["user"]')" "$me" "the owner of a task whose request claimed root"
out=$(printf '{"v":1,"op":"ls","mine":true,"uid":12345}' | send_request)
expect_eq "$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tasks"]))')" 2 "--mine claiming another uid"

t "state changes are audited: submit, hold, release, cancel, retry, drain, undrain"
held=$(drover submit --hold -- false)
drover release "$held"
drover wait "$held" >/dev/null 2>&1 && fail "task $held should have failed"
drover retry "$held"
after=$(drover submit --after "$run" -- true)
drover hold "$after"
drover cancel "$after" "$run"
drover drain
drover undrain
drover audit --json > "$TMP/audit.json"
python3 - "$TMP/audit.json" "$me" "$uid" "$run" "$held" "$after" <<'PY' || fail "the audit log: $(cat "$TMP/audit.json")"
import json, sys, time
recs = json.load(open(sys.argv[1]))
me, uid, run, held, after = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
want = [("submit", "task " + run), ("submit", "task " + held), ("release", "task " + held),
        ("retry", "task " + held), ("hold", "task " + after), ("cancel", "task " + after),
        ("cancel", "task " + run),
        ("drain", None), ("undrain", None)]
got = [(r["op"], r["target"]) for r in recs]
pos = 0
for w in want:   # in this order (other records may come between)
    while pos < len(got) and got[pos] != w:
        pos += 1
    if pos == len(got):
        sys.exit("missing or out of order: %s in %s" % (w, got))
for r in recs:
    assert r["user"] == me and r["uid"] == uid, r
    assert abs(r["ts"] / 1000 - time.time()) < 600, r
assert [r["id"] for r in recs] == sorted(r["id"] for r in recs)
PY
drover audit | head -1 | grep -q "^TIME  *USER  *UID  *OP  *TARGET  *DETAIL" || fail "audit header"
drover audit | grep -q " cancel  *task $run " || fail "the cancel in the table: $(drover audit)"

t "a refused change is not audited"
n=$(drover audit --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_exit 1 drover cancel "$run"
expect_exit 2 drover hold 999999
expect_eq "$(drover audit --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" "$n" "records after refusals"

t "audit --since: a duration or a time"
expect_eq "$(drover audit --since 1h --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" "$n" "--since 1h"
expect_eq "$(drover audit --since 2099-01-01T00:00 --json)" "[]" "--since a future time"
expect_eq "$(drover audit --since 2000-01-01 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" "$n" "--since 2000-01-01"
expect_exit 2 drover audit --since soon
case "$ERR" in *"--since soon: expected a duration"*) ;; *) fail "got: $ERR" ;; esac

t "keys are the owner's, as before"
k=$(drover submit --key k1 -- true)
expect_eq "$(drover submit --key k1 -- true)" "$k" "the same key again"

t "experiments keep their names in per-user mode, with their owner"
cat > "$W/e.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: plain }
spec:
  command: [sh, -c, "exit 0"]
YAML
drover exp run e.yaml >/dev/null
expect_eq "$(drover exp ls --json | python3 -c 'import json,sys; e=json.load(sys.stdin)[0]; print(e["name"], e["user"], e["uid"])')" \
    "plain $me $uid" "exp ls --json"
drover exp ls | head -1 | grep -q "^NAME  *USER  *KIND" || fail "exp ls header"
expect_eq "$(drover exp show plain --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["user"])')" "$me" "exp show --json user"
drover audit --json | grep -q '"experiment plain"' || fail "the exp run is not audited"

t "drover users: the user's tasks"
drover submit --hold -- true >/dev/null
drover users --json > "$TMP/users.json"
expect_eq "$(python3 -c 'import json,sys; u=[x for x in json.load(open(sys.argv[1])) if x["user"] == sys.argv[2]][0]; print(u["uid"], u["waiting"] >= 1, sorted(u["limits"]))' "$TMP/users.json" "$me")" \
    "$uid True ['gpus', 'queued', 'running']" "drover users --json"

done_testing
