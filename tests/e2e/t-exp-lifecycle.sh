#!/usr/bin/env bash
# The experiment lifecycle (exp/lifecycle.c) end to end: stop and resume of a finished
# experiment change nothing and say so; stop then resume of a running one queues again what the
# stop cancelled and ends like any other; a sweep whose every trial failed and a pipeline whose
# stage failed end `failed` with the reason; an experiment left `running` with nothing live is
# settled when the daemon starts; a dry run names the tasks this machine can never run.
. "$(dirname "$0")/lib.sh"
W=$TMP/w
mkdir -p "$W" "$DROVER_HOME"
export DROVER_FAKE_MEM=23.5G DROVER_FAKE_CPUS=4

show() { "$DROVER" exp show "$1" --json | python3 -c "import json,sys; d=json.load(sys.stdin); $2"; }
exp_state() { show "$1" 'print(d["state"])'; }
exp_reason() { show "$1" 'print(d["reason"])'; }
exp_state_is() { [ "$(exp_state "$1")" = "$2" ]; }
# The experiment's tasks that have not ended.
live_tasks() {
    show "$1" 'print(sum(t["task_state"] not in ("succeeded", "failed", "timed_out", "cancelled", "upstream_failed") for t in d["trials"]))'
}
restart_daemon() {
    local pid
    pid=$(cat "$DROVER_HOME/daemon.lock")
    "$DROVER" shutdown >/dev/null
    wait_until 20 proc_gone "$pid"
    "$DROVER" ls >/dev/null # starts another
}

t "resume of a finished experiment changes nothing, says why, exits 1 — across restarts too"
cat > "$W/once.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: once }
spec:
  command: [sh, -c, "true"]
YAML
"$DROVER" exp run "$W/once.yaml" >/dev/null
wait_until 30 exp_state_is once done
reason=$(exp_reason once)
expect_eq "$reason" "every trial ended: 1 succeeded" "done's reason"
expect_exit 1 "$DROVER" exp resume once
expect_eq "$ERR" "drover exp: cannot resume experiment once: it has already ended (done); drover exp run starts another" "resume refused"
expect_eq "$(exp_state once)" done "state after the refused resume"
expect_eq "$(exp_reason once)" "$reason" "reason after the refused resume"
restart_daemon
expect_eq "$(exp_state once)" done "state after a restart"

t "stop of a passed experiment keeps its verdict, says why, exits 1"
cat > "$W/pass.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: pass }
spec:
  command: [sh, -c, "echo '{\"epoch\": 1, \"acc\": 0.9}' >> \"$DROVER_METRICS_FILE\""]
  validation: { metric: acc, baseline: 0.5 }
YAML
"$DROVER" exp run "$W/pass.yaml" >/dev/null
wait_until 30 exp_state_is pass passed
verdict=$(exp_reason pass)
[[ "$verdict" == "best acc 0.9 (trial 0) meets baseline 0.5; archived in $DROVER_HOME/archive/pass" ]] ||
    fail "verdict: $verdict"
expect_exit 1 "$DROVER" exp stop pass
expect_eq "$ERR" "drover exp: cannot stop experiment pass: it has already ended (passed); stopping it would change nothing" "stop refused"
expect_eq "$(exp_state pass)" passed "state after the refused stop"
expect_eq "$(exp_reason pass)" "$verdict" "verdict after the refused stop"
expect_exit 1 "$DROVER" exp resume pass
expect_eq "$(exp_reason pass)" "$verdict" "verdict after the refused resume"

t "stop, then resume, of a running sweep: what the stop cancelled runs again, then it ends"
cat > "$W/gate.yaml" <<YAML
apiVersion: drover/v1
kind: Experiment
metadata: { name: gated }
spec:
  hyperparameters: { x: 1 }
  command: [sh, -c, "echo \$DROVER_ATTEMPT >> $W/runs.\${hyperparameters.x}; while [ ! -e $W/go ]; do sleep 0.05; done"]
  retry: 0
  sweep: { method: grid, parallel: 2, parameters: { hyperparameters.x: [1, 2, 3] } }
YAML
"$DROVER" exp run "$W/gate.yaml" >/dev/null
lines_at_least() { [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }
wait_until 20 lines_at_least "$W/runs.1" 1
wait_until 20 lines_at_least "$W/runs.2" 1
expect_exit 1 "$DROVER" exp resume gated
expect_eq "$ERR" "drover exp: cannot resume experiment gated: it is running (only a paused or stopped experiment resumes)" "resume of a running one"
out=$("$DROVER" exp stop gated)
expect_eq "$out" "experiment gated stopped (3 tasks)" "stop"
expect_eq "$(exp_state gated)" stopped "after the stop"
expect_eq "$(live_tasks gated)" 0 "live tasks after the stop"
expect_exit 1 "$DROVER" exp stop gated
expect_eq "$ERR" "drover exp: cannot stop experiment gated: it is stopped already" "second stop"
# The stop's SIGTERM ends the running trials in a moment; until then a resume says so.
resumed() {
    local rc=0 err
    err=$("$DROVER" exp resume gated 2>&1 >/dev/null) || rc=$?
    [ "$rc" -eq 0 ] && return 0
    [[ "$err" == *"cannot resume experiment gated yet: task "*", which the stop cancelled, has not exited"* ]] ||
        fail "resume: $err"
    return 1
}
wait_until 20 resumed
expect_eq "$(exp_state gated)" running "after the resume"
expect_eq "$(exp_reason gated)" "resumed by user" "the resume's reason"
[ "$(live_tasks gated)" -eq 3 ] || fail "live tasks after the resume: $(live_tasks gated)"
wait_until 20 lines_at_least "$W/runs.1" 2
touch "$W/go"
wait_until 30 exp_state_is gated done
expect_eq "$(exp_reason gated)" "every trial ended: 3 succeeded" "the end after the resume"
# Trials 1 and 2 ran before the stop and again after; trial 3, queued when stopped, once.
expect_eq "$(cat "$W/runs.1" "$W/runs.2" "$W/runs.3" | tr '\n' ' ')" "1 2 1 2 1 " "attempts run"
restart_daemon
expect_eq "$(exp_state gated)" done "after a restart"

t "a sweep whose every trial failed ends failed, naming the last failure"
cat > "$W/fail9.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: fail9 }
spec:
  hyperparameters: { x: 1 }
  command: [sh, -c, "exit 1"]
  retry: 0
  circuit_breaker: { failures: 100 }
  sweep: { method: grid, parallel: 3, parameters: { hyperparameters.x: [1, 2, 3, 4, 5, 6, 7, 8, 9] } }
YAML
"$DROVER" exp run "$W/fail9.yaml" >/dev/null
wait_until 60 exp_state_is fail9 failed
reason=$(exp_reason fail9)
[[ "$reason" =~ ^all\ 9\ trials\ failed\;\ last:\ task\ [0-9]+,\ exit\ 1$ ]] || fail "reason: $reason"
last=$(echo "$reason" | sed 's/.*task \([0-9]*\),.*/\1/')
expect_eq "$(show fail9 "print(any(t['task'] == $last for t in d['trials']))")" True "the task named is a trial"

t "the circuit breaker tripping on the last trials does not leave it paused with nothing held"
cat > "$W/fail2.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: fail2 }
spec:
  hyperparameters: { x: 1 }
  command: [sh, -c, "exit 4"]
  retry: 0
  sweep: { method: grid, parameters: { hyperparameters.x: [1, 2] } }
YAML
"$DROVER" exp run "$W/fail2.yaml" >/dev/null
wait_until 30 exp_state_is fail2 failed
[[ "$(exp_reason fail2)" =~ ^all\ 2\ trials\ failed\;\ last:\ task\ [0-9]+,\ exit\ 4$ ]] ||
    fail "reason: $(exp_reason fail2)"

t "a pipeline whose train stage failed ends failed with that stage, not the ones skipped for it"
cat > "$W/pipe.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: pipe }
spec:
  retry: 0
  stages:
    - { name: prepare, command: [sh, -c, "true"] }
    - { name: train, needs: [prepare], command: [sh, -c, "exit 1"] }
    - { name: evaluate, needs: [train], command: [sh, -c, "true"] }
YAML
"$DROVER" exp run "$W/pipe.yaml" >/dev/null
wait_until 30 exp_state_is pipe failed
train=$(show pipe 'print([t["task"] for t in d["trials"] if t["stage"] == "train"][0])')
expect_eq "$(exp_reason pipe)" "stage train failed (task $train, exit 1)" "the pipeline's reason"
expect_eq "$(show pipe 'print([t["state"] for t in d["trials"] if t["stage"] == "evaluate"][0])')" \
    upstream_failed "the stage skipped"

t "an experiment recorded running with nothing live is settled when the daemon starts"
pid=$(cat "$DROVER_HOME/daemon.lock")
"$DROVER" shutdown >/dev/null
wait_until 20 proc_gone "$pid"
# What an older daemon left behind (a resume of a finished experiment used to do this).
python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE experiments SET state = '"'running'"', reason = NULL WHERE name IN ('"'once'"', '"'fail9'"')")
db.commit()' "$DROVER_HOME/drover.db"
"$DROVER" ls >/dev/null
expect_eq "$(exp_state once)" done "once, settled"
expect_eq "$(exp_reason once)" "every trial ended: 1 succeeded" "once's reason"
expect_eq "$(exp_state fail9)" failed "fail9, settled"
grep -q "experiment once was left running with no task live; settling it" "$DROVER_HOME/daemon.log" ||
    fail "the settling is not logged"

t "a dry run checks every task against this machine and stores nothing"
before=$(task_count)
# raw_exp_run PYTHON: sends an exp_run request with dry_run, after PYTHON has changed `req`;
# prints the reply (send_request).
raw_exp_run() {
    python3 - "$1" "$W" <<'PY' | send_request
import json, os, sys
def task(name, **kw):
    t = {"name": name, "trial": 0, "params": {}, "command": ["true"], "env": {}}
    t.update(kw)
    return t
req = {"v": 1, "op": "exp_run", "name": "dry", "kind": "Experiment",
       "spec": {"command": ["true"]}, "tasks": [task("dry-t0")], "dry_run": True,
       "parallel": 0, "space": 1, "seed": 1, "workdir": sys.argv[2],
       "env": {"PATH": os.environ["PATH"]}}
exec(sys.argv[1])
print(json.dumps(req))
PY
}
problems() { python3 -c 'import json,sys; r = json.loads(sys.argv[1]); assert r["ok"] and r["dry_run"], r; print(json.dumps(r["problems"]))' "$1"; }
reply=$(raw_exp_run 'pass')
expect_eq "$(problems "$reply")" "[]" "a task that fits"
reply=$(raw_exp_run 'req["tasks"] = [task("dry-t0", gpu_type="v100", gpus=1), task("dry-t1", trial=1, mem=32 << 30), task("dry-t2", trial=2, gpus=1)]')
expect_eq "$(problems "$reply")" \
    "[\"task dry-t0: no GPU here matches gpu_type 'v100'; the GPUs here are: Fake GPU 16G\", \"task dry-t1: asks for 32G of memory; the largest node has 23.5G\"]" \
    "what will never fit"
reply=$(raw_exp_run 'req["name"] = "once"')
expect_eq "$(problems "$reply")" '["experiment once exists already: run the template again under another name with --set metadata.name=once-2 (or change metadata.name in it)"]' "a name taken"
reply=$(raw_exp_run 'req["dry_run"] = "yes"')
python3 -c 'import json,sys; r = json.loads(sys.argv[1]); sys.exit(not (not r["ok"] and r["code"] == 2 and "dry_run" in r["error"]))' "$reply" ||
    fail "dry_run that is not a bool: $reply"
expect_eq "$(task_count)" "$before" "tasks after dry runs"
expect_eq "$("$DROVER" exp show dry 2>&1 >/dev/null || true)" "drover exp: no experiment dry" "no experiment stored"

done_testing
