#!/usr/bin/env bash
# Who may do what on a shared machine (system mode, real users): anyone lists and shows every
# task, with its owner (ls USER column, --mine, --user, --json user/uid); only the owner or an
# admin (the admins group) cancels, holds, releases, retries or reads the logs of a task, or
# stops an experiment — others get exit 4 and one line naming the owner, whatever uid or user
# their raw requests claim; drain/undrain/shutdown and priorities above 0 are for admins;
# idempotency keys and experiment names are per owner; the audit log (admins only) records who
# did what; `drover users` shows each user. Needs root (useradd): exits 77 otherwise.
. "$(dirname "$0")/lib.sh"

system_setup perms
system_group G g
system_user A a
system_user B b
system_user C c -G "$G"
system_daemon_start "admins = $G"

# raw USER: the JSON request on stdin sent as USER straight to the socket; prints the reply.
raw() { as "$1" python3 -c "$SEND_REQUEST_PY" "$SOCK"; }
# not_permitted OWNER CMD…: CMD exits 4 with one line naming OWNER.
not_permitted() {
    local owner=$1
    shift
    expect_exit 4 "$@"
    expect_eq "$(printf '%s\n' "$ERR" | wc -l)" 1 "lines of the refusal of '$*'"
    case "$ERR" in *"not permitted: "*"belongs to $owner"*) ;; *) fail "'$*': $ERR" ;; esac
}

t "A's tasks: one running, one that ended"
run=$(as "$A" "$DROVER" submit --name long -- sleep 300)
done_id=$(as "$A" "$DROVER" submit -- false)
as "$A" "$DROVER" wait "$done_id" >/dev/null && fail "task $done_id should have failed"
wait_until 20 state_is "$run" running

t "B may not cancel, hold, release, retry or read the logs of A's tasks: exit 4, naming A"
not_permitted "$A" as "$B" "$DROVER" cancel "$run"
not_permitted "$A" as "$B" "$DROVER" hold "$run"
not_permitted "$A" as "$B" "$DROVER" release "$run"
not_permitted "$A" as "$B" "$DROVER" retry "$done_id"
not_permitted "$A" as "$B" "$DROVER" logs "$run"
case "$ERR" in *"task $run belongs to $A"*) ;; *) fail "the refusal names no task: $ERR" ;; esac
expect_eq "$(state_of "$run")" running "A's task after B's attempts"
expect_eq "$(state_of "$done_id")" failed "A's ended task after B's retry"

t "one of several ids being someone else's refuses them all"
mine=$(as "$B" "$DROVER" submit --hold -- true)
not_permitted "$A" as "$B" "$DROVER" cancel "$mine" "$run"
expect_eq "$(state_of "$mine")" held "B's own task, named beside A's"

t "raw requests claiming A's identity change nothing"
out=$(printf '{"v":1,"op":"cancel","ids":[%s],"uid":%s,"user":"%s","admin":true}' \
    "$run" "$(id -u "$A")" "$A" | raw "$B")
expect_eq "$(printf '%s' "$out" | json_get '["code"]')" 4 "code of a cancel claiming A's uid"
expect_eq "$(state_of "$run")" running "A's task after a raw cancel by B"
out=$(printf '{"v":1,"op":"ls","mine":true,"uid":%s,"user":"%s"}' "$(id -u "$A")" "$A" | raw "$B")
expect_eq "$(printf '%s' "$out" | json_get '["tasks"][0]["id"]')" "$mine" "--mine claiming A's uid lists B's"
expect_eq "$(printf '%s' "$out" | json_get '["tasks"].__len__()')" 1 "tasks B's raw --mine lists"

t "anyone lists and shows every task, with its owner"
expect_eq "$(as "$B" "$DROVER" show "$run" --json | json_get '["user"]')" "$A" "show --json user"
expect_eq "$(as "$B" "$DROVER" show "$run" --json | json_get '["uid"]')" "$(id -u "$A")" "show --json uid"
line=$(as "$B" "$DROVER" ls | awk -v id="$run" '$1 == id')
expect_eq "$(printf '%s' "$line" | awk '{print $4}')" "$A" "the USER column of task $run"
as "$B" "$DROVER" ls | head -1 | grep -q "^ID  *NAME  *STATE  *USER" || fail "ls header: $(as "$B" "$DROVER" ls | head -1)"
ids=$(as "$B" "$DROVER" ls --mine --json | python3 -c 'import json,sys; print([t["id"] for t in json.load(sys.stdin)])')
expect_eq "$ids" "[$mine]" "B's ls --mine"
ids=$(as "$B" "$DROVER" ls --user "$A" --json | python3 -c 'import json,sys; print(sorted(t["id"] for t in json.load(sys.stdin)))')
expect_eq "$ids" "[$run, $done_id]" "ls --user $A"
ids=$(as "$B" "$DROVER" ls --user "$(id -u "$A")" --json | python3 -c 'import json,sys; print(sorted(t["id"] for t in json.load(sys.stdin)))')
expect_eq "$ids" "[$run, $done_id]" "ls --user with A's uid"
expect_eq "$(as "$B" "$DROVER" ls --user nosuchuser_x --json)" "[]" "ls --user of a user with no tasks"
expect_exit 2 as "$B" "$DROVER" ls --mine --user "$A"

t "an admin (a member of the admins group) may act on A's task"
as "$C" "$DROVER" hold "$done_id" 2>/dev/null && fail "holding an ended task succeeded"
expect_exit 0 as "$C" "$DROVER" logs "$run"
expect_exit 0 as "$C" "$DROVER" retry "$done_id"

t "drain, undrain and shutdown are for admins"
expect_exit 4 as "$A" "$DROVER" drain
case "$ERR" in *"not permitted: drain is for admins"*) ;; *) fail "drain refusal: $ERR" ;; esac
expect_exit 4 as "$A" "$DROVER" undrain
expect_exit 4 as "$A" "$DROVER" shutdown
kill -0 "$DAEMON_PID" || fail "the daemon stopped on a user's shutdown"
expect_exit 0 as "$C" "$DROVER" drain
expect_exit 0 as "$C" "$DROVER" undrain

t "a priority above 0 is for admins; users may lower their own"
expect_exit 4 as "$A" "$DROVER" submit --priority 5 -- true
case "$ERR" in *"not permitted: a priority above 0 is for admins"*) ;; *) fail "got: $ERR" ;; esac
low=$(as "$A" "$DROVER" submit --priority -3 -- true)
expect_eq "$(state_of "$low" >/dev/null; field_of "$low" '["priority"]')" -3 "A's lowered priority"
hi=$(as "$C" "$DROVER" submit --priority 5 -- true)
expect_eq "$(field_of "$hi" '["priority"]')" 5 "the admin's priority"
w=$(as "$A" "$DROVER" submit --hold -- true)
not_permitted "$A" as "$B" "$DROVER" priority -1 "$w"
expect_exit 4 as "$A" "$DROVER" priority 5 "$w"
case "$ERR" in *"not permitted: a priority above 0 is for admins"*) ;; *) fail "got: $ERR" ;; esac
expect_exit 0 as "$A" "$DROVER" priority -4 "$w"
expect_eq "$(field_of "$w" '["priority"]')" -4 "A's task after drover priority -4"
expect_exit 0 as "$C" "$DROVER" priority 7 "$w"
expect_eq "$(field_of "$w" '["priority"]')" 7 "A's task after the admin's drover priority 7"
as "$A" "$DROVER" cancel "$w"

t "idempotency keys are per owner"
ka=$(as "$A" "$DROVER" submit --key shared-key -- true)
kb=$(as "$B" "$DROVER" submit --key shared-key -- true)
[ "$ka" != "$kb" ] || fail "B's key named A's task $ka"
expect_eq "$(as "$A" "$DROVER" submit --key shared-key -- true)" "$ka" "A's key again"
expect_eq "$(field_of "$kb" '["user"]')" "$B" "the owner of B's keyed task"

t "experiments: names are per user, owners recorded, stop is the owner's"
for u in a b; do
    cat > "$SYS/$u-work/sweep.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: sweep1 }
spec:
  command: [sleep, "300"]
YAML
    chmod 644 "$SYS/$u-work/sweep.yaml"
done
cat > "$SYS/a-work/urgent.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: urgent }
spec:
  command: [sleep, "300"]
  priority: 5
YAML
chmod 644 "$SYS/a-work/urgent.yaml"
expect_exit 4 as "$A" "$DROVER" exp run urgent.yaml
case "$ERR" in *"not permitted: a priority above 0 is for admins"*) ;; *) fail "got: $ERR" ;; esac
out=$(as "$A" "$DROVER" exp run sweep.yaml 2>&1) || fail "A's exp run: $out"
expect_eq "$(as "$A" "$DROVER" exp ls --json | json_get '[0]["name"]')" "$A/sweep1" "A's experiment's name"
expect_exit 2 as "$A" "$DROVER" exp run sweep.yaml
case "$ERR" in *"experiment $A/sweep1 exists already"*"--set metadata.name=sweep1-2 "*) ;; *) fail "got: $ERR" ;; esac
out=$(as "$B" "$DROVER" exp run sweep.yaml 2>&1) || fail "B's sweep1 was refused beside A's: $out"
names=$(as "$B" "$DROVER" exp ls --json | python3 -c 'import json,sys; print(sorted((e["name"], e["user"]) for e in json.load(sys.stdin)))')
expect_eq "$names" "[('$A/sweep1', '$A'), ('$B/sweep1', '$B')]" "exp ls: names and owners"
owners=$("$DROVER" ls --json | python3 -c "import json,sys; print(sorted({t['user'] for t in json.load(sys.stdin) if t['command'] == ['sleep', '300']}))")
expect_eq "$owners" "['$A', '$B']" "the owners of the experiments' tasks"
not_permitted "$A" as "$B" "$DROVER" exp stop "$A/sweep1"
expect_exit 0 as "$A" "$DROVER" exp stop sweep1
expect_exit 0 as "$C" "$DROVER" exp stop "$B/sweep1"
[ -d "$STATE/archive/$A" ] || fail "no archive directory for $A"

t "drover users: each user's running and waiting tasks"
as "$B" "$DROVER" users --json > "$SYS/users.json"
got=$(python3 -c "import json,sys; u={x['user']: x for x in json.load(open(sys.argv[1]))}; print(u['$A']['running'], u['$A']['gpus'] >= 0, '$B' in u)" "$SYS/users.json")
expect_eq "$got" "1 True True" "A's line of drover users"
as "$B" "$DROVER" users | head -1 | grep -q "^USER  *RUNNING" || fail "users header"

t "the audit log: admins only; who did what"
not_permitted_audit() { expect_exit 4 as "$A" "$DROVER" audit; }
not_permitted_audit
case "$ERR" in *"not permitted: the audit log is for admins"*) ;; *) fail "got: $ERR" ;; esac
as "$C" "$DROVER" audit --json > "$SYS/audit.json"
check() {
    python3 - "$SYS/audit.json" "$@" <<'PY'
import json, sys
recs = json.load(open(sys.argv[1]))
user, op, target = sys.argv[2:5]
if not any(r["user"] == user and r["op"] == op and (target == "*" or r["target"] == target) for r in recs):
    sys.exit("no audit record of %s %s %s in %s" % (user, op, target, json.dumps(recs)))
PY
}
check "$A" submit "task $run" || fail "A's submit is not audited"
check "$C" retry "task $done_id" || fail "C's retry is not audited"
check "$C" drain "*" || fail "the drain is not audited"
check "$C" undrain "*" || fail "the undrain is not audited"
check "$A" exp_run "experiment $A/sweep1" || fail "A's exp run is not audited"
check "$A" exp_stop "experiment $A/sweep1" || fail "A's exp stop is not audited"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(any(x['user'] == '$B' and x['op'] == 'cancel' for x in r))" "$SYS/audit.json" ||
    fail "a refused cancel was audited"
expect_exit 0 as "$A" "$DROVER" cancel "$run"
as "$C" "$DROVER" audit --since 1h --json > "$SYS/audit.json"
check "$A" cancel "task $run" || fail "A's cancel is not audited"
expect_eq "$(as "$C" "$DROVER" audit --since 2099-01-01 --json)" "[]" "audit --since a future date"
expect_exit 2 as "$C" "$DROVER" audit --since yesterday

done_testing
