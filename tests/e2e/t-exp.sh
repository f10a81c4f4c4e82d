#!/usr/bin/env bash
# Experiments end to end on the numpy example (examples/numpy/train.py, Debian's python3-numpy):
# a sweep whose losers ASHA stops early, a trial killed mid-way that resumes from its checkpoint,
# metrics from log lines, a failing line the circuit breaker pauses, and bad templates.
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "/usr/bin/python3 has no numpy (apt-get install python3-numpy)"
W=$TMP/exp
mkdir -p "$W" "$DROVER_HOME"
echo "sample = 200ms" > "$DROVER_HOME/drover.conf"

trials() { "$DROVER" exp show "$1" --json | python3 -c "import json,sys; d=json.load(sys.stdin); $2"; }
exp_state() { "$DROVER" exp show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
exp_state_is() { [ "$(exp_state "$1")" = "$2" ]; }

t "a 9-trial sweep: ASHA stops the losers early, the rest run to the end"
cat > "$W/sweep.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: spirals9 }
spec:
  hyperparameters: { lr: 0.3, hidden: 32, epochs: 6 }
  resources: { gpu_count: 0, cpus: 1 }
  env: { OPENBLAS_NUM_THREADS: "1" }
  command: [/usr/bin/python3, examples/numpy/train.py, "--lr=${hyperparameters.lr}",
            "--hidden=${hyperparameters.hidden}", "--epochs=${hyperparameters.epochs}",
            "--epoch-sleep=0.15"]
  sweep:
    method: grid
    parallel: 3
    parameters:
      hyperparameters.lr: [0.3, 0.03, 10]
      hyperparameters.hidden: [8, 32, 128]
  early_stopping: { type: asha, metric: val_accuracy, mode: max, grace: 1,
                    reduction_factor: 3, max_rung: 6 }
YAML
"$DROVER" exp run "$W/sweep.yaml" --dry-run > "$W/dry.txt"
grep -q "^9 tasks (sweep: grid, 9 configurations; parallel 3)" "$W/dry.txt" || fail "dry run: $(tail -1 "$W/dry.txt")"
expect_eq "$("$DROVER" exp ls --json)" "[]" "a dry run creates nothing"
"$DROVER" exp run "$W/sweep.yaml" >/dev/null
wait_until 120 exp_state_is spirals9 done
expect_eq "$(trials spirals9 'print(len(d["trials"]))')" 9 "trials"
stopped=$(trials spirals9 'print(sum(t["stopped_early"] for t in d["trials"]))')
finished=$(trials spirals9 'print(sum(t["state"] == "succeeded" for t in d["trials"]))')
[ "$stopped" -ge 3 ] || fail "only $stopped trials were stopped early"
[ "$finished" -ge 1 ] || fail "no trial ran to the end"
expect_eq "$((stopped + finished))" 9 "every trial either stopped early or succeeded"
trials spirals9 'assert all("rung" in t["reason"] for t in d["trials"] if t["stopped_early"]), d' ||
    fail "a stopped trial has no rung in its reason"
# The best trial ran all its epochs, and its metrics are stored per step.
best=$(trials spirals9 'print(max(d["trials"], key=lambda t: t["best"] or 0)["task"])')
expect_eq "$(field_of "$best" '["state"]')" succeeded "the best trial's task"
"$DROVER" exp export spirals9 --format csv | head -1 | grep -q "^trial,task,state,params,val_accuracy" ||
    fail "export csv header"
expect_eq "$("$DROVER" exp export spirals9 --format csv | wc -l)" 10 "export csv rows"

t "a trial killed mid-way resumes from its checkpoint, not from epoch 1"
cat > "$W/resume.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: resume1 }
spec:
  hyperparameters: { lr: 0.3 }
  retry: { attempts: 2, backoff: [1s] }
  command: [/usr/bin/python3, examples/numpy/train.py, "--lr=${hyperparameters.lr}",
            "--epochs=10", "--epoch-sleep=1"]
YAML
"$DROVER" exp run "$W/resume.yaml" >/dev/null
task=$(trials resume1 'print(d["trials"][0]["task"])')
epochs_seen() { [ "$(trials resume1 'print(d["trials"][0]["latest"].get("val_accuracy") is not None)')" = True ] &&
                [ -s "$DROVER_HOME/metrics/$task.jsonl" ] && [ "$(wc -l < "$DROVER_HOME/metrics/$task.jsonl")" -ge 3 ]; }
wait_until 30 epochs_seen
pgid=$(awk '{ print $2 }' "$DROVER_HOME/runs/$task/1/pid")
kill -KILL -- "-$pgid"
"$DROVER" wait "$task" >/dev/null || fail "task $task did not succeed on its retry: $(state_of "$task")"
expect_eq "$(field_of "$task" '["attempts"]')" 2 "attempts"
grep -q "^resumed from epoch \([3-9]\|10\)" "$DROVER_HOME/runs/$task/2/stdout" ||
    fail "attempt 2 did not resume: $(head -3 "$DROVER_HOME/runs/$task/2/stdout")"
grep -q "^epoch 1 " "$DROVER_HOME/runs/$task/2/stdout" && fail "attempt 2 started over at epoch 1"

t "metrics from log lines matched by the template's patterns"
cat > "$W/patterns.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: printer }
spec:
  metrics: { file: false, patterns: ["loss: {value}", "{name}={value}"] }
  command: [sh, -c, "echo 'step 1 loss: 0.9 acc=0.5'; echo 'loss: 0.4'; echo 'acc=0.75'"]
YAML
"$DROVER" exp run "$W/patterns.yaml" >/dev/null
wait_until 20 exp_state_is printer done
expect_eq "$(trials printer 'l=d["trials"][0]["latest"]; print(l.get("loss"), l.get("acc"))')" "0.4 0.75" "latest metrics"

t "the circuit breaker pauses a line of failing trials until resumed"
cat > "$W/failing.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: broken }
spec:
  hyperparameters: { x: 1 }
  command: [sh, -c, "exit 3"]
  sweep: { method: grid, parallel: 1, parameters: { hyperparameters.x: [1, 2, 3, 4, 5] } }
  circuit_breaker: { failures: 2 }
  retry: 0
YAML
"$DROVER" exp run "$W/failing.yaml" >/dev/null
wait_until 30 exp_state_is broken paused
"$DROVER" exp show broken | grep -q "paused after 2 consecutive trial failures" || fail "no reason shown"
expect_eq "$(trials broken 'print(sorted(t["state"] for t in d["trials"]))')" \
    "['failed', 'failed', 'held', 'held', 'held']" "trials while paused"
"$DROVER" exp resume broken >/dev/null
wait_until 30 exp_state_is broken paused
expect_eq "$(trials broken 'print(sum(t["state"] == "failed" for t in d["trials"]))')" 4 "failed after resuming"
"$DROVER" exp stop broken >/dev/null
expect_eq "$(exp_state broken)" stopped "after exp stop"

t "a trial that beats its baseline is archived with its checkpoint"
"$DROVER" exp run examples/validate.yaml >/dev/null
wait_until 60 exp_state_is spirals-validate passed
"$DROVER" exp show spirals-validate | grep -q "meets baseline 0.95 + 2%; archived in" ||
    fail "reason: $("$DROVER" exp show spirals-validate | head -1)"
test -s "$DROVER_HOME/archive/spirals-validate/checkpoint/ckpt.npz" || fail "no archived checkpoint"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["experiment"] == "spirals-validate" and m["metrics"] and "meets" in m["validation"], m' \
    "$DROVER_HOME/archive/spirals-validate/metadata.json" || fail "archive metadata"

t "validation fails: the next round of the search space, then the line stops"
cat > "$W/rounds.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: rounds }
spec:
  hyperparameters: { x: 0.1 }
  command: [sh, -c, "printf '{\"step\": 1, \"acc\": %s}\\n' ${hyperparameters.x} >> \"$DROVER_METRICS_FILE\""]
  sweep: { method: grid, max_trials: 2, parameters: { hyperparameters.x: [0.1, 0.2, 0.3, 0.4] } }
  validation: { metric: acc, mode: max, baseline: 0.9, improvement: 0 }
YAML
"$DROVER" exp run "$W/rounds.yaml" >/dev/null
wait_until 30 exp_state_is rounds failed
expect_eq "$(trials rounds 'print(len(d["trials"]))')" 4 "trials over two rounds"
"$DROVER" exp show rounds | head -1 | grep -q "falls short of baseline 0.9.*no configurations left" ||
    fail "reason: $("$DROVER" exp show rounds | head -1)"
expect_eq "$(trials rounds 'print(max(t["best"] for t in d["trials"]))')" 0.4 "the second round ran x=0.3, 0.4"

t "validation limits epoch time; a pipeline runs its stages after what they need"
cat > "$W/slow.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: slow }
spec:
  command: [sh, -c, "sleep 0.3; echo '{\"epoch\": 1, \"acc\": 1}' >> \"$DROVER_METRICS_FILE\""]
  validation: { metric: acc, baseline: 0.5, max_epoch_time: 100ms }
YAML
"$DROVER" exp run "$W/slow.yaml" >/dev/null
wait_until 30 exp_state_is slow failed
"$DROVER" exp show slow | head -1 | grep -q "an epoch, over 100ms" || fail "reason: $("$DROVER" exp show slow | head -1)"
cat > "$W/pipe.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: pipe }
spec:
  data: { out: /tmp }
  stages:
    - { name: evaluate, needs: [train-a, train-b], command: [sh, -c, "date +%s%N > $OUT/evaluate"] }
    - { name: prepare, command: [sh, -c, "date +%s%N > $OUT/prepare"] }
    - { name: train-a, needs: [prepare], command: [sh, -c, "sleep 0.2; date +%s%N > $OUT/a"] }
    - { name: train-b, needs: [prepare], command: [sh, -c, "sleep 0.2; date +%s%N > $OUT/b"] }
YAML
OUT=$W "$DROVER" exp run "$W/pipe.yaml" >/dev/null
wait_until 30 exp_state_is pipe done
[ "$(cat "$W/prepare")" -lt "$(cat "$W/a")" ] && [ "$(cat "$W/a")" -lt "$(cat "$W/evaluate")" ] &&
    [ "$(cat "$W/b")" -lt "$(cat "$W/evaluate")" ] || fail "stages ran out of order"
expect_eq "$(trials pipe 'print(sorted(t["stage"] for t in d["trials"]))')" \
    "['evaluate', 'prepare', 'train-a', 'train-b']" "stages"

t "a generator command proposes the next trials from the history"
cat > "$W/gen.py" <<'PY'
import json, sys
h = json.load(sys.stdin)
trials = [t for t in h["trials"] if t["trial"] >= 0]
# One more trial, x one higher, until there are three; then nothing: the line ends.
print(json.dumps([] if len(trials) >= 3 else [{"hyperparameters.x": len(trials) + 1}]))
PY
cat > "$W/gen.yaml" <<YAML
apiVersion: drover/v1
kind: Experiment
metadata: { name: generated }
spec:
  hyperparameters: { x: 0 }
  command: [sh, -c, "echo x=\${hyperparameters.x}"]
  generator: { command: [python3, "$W/gen.py"] }
YAML
"$DROVER" exp run "$W/gen.yaml" >/dev/null
wait_until 60 exp_state_is generated done
expect_eq "$(trials generated 'print([t["params"].get("hyperparameters.x") for t in d["trials"] if t["trial"] >= 0])')" \
    "[None, 2, 3]" "trials: the first (no sweep parameters), then the generator's"
expect_eq "$(trials generated 'print(sum(t["stage"] == "generator" for t in d["trials"]))')" 3 "generator runs"
"$DROVER" exp show generated | head -1 | grep -q "the generator proposed no more trials" ||
    fail "reason: $("$DROVER" exp show generated | head -1)"

t "bad templates: one line with file:line:column, exit 2, nothing submitted"
before=$(task_count)
bad() { # bad FILE-CONTENT EXPECTED-FRAGMENT
    printf '%s\n' "$1" > "$W/bad.yaml"
    expect_exit 2 "$DROVER" exp run "$W/bad.yaml"
    [ "$(printf '%s\n' "$ERR" | wc -l)" -eq 1 ] || fail "more than one line: $ERR"
    [[ "$ERR" == *"$W/bad.yaml:"[0-9]*:[0-9]*": "*"$2"* ]] || fail "expected '$2' with file:line:col, got: $ERR"
}
bad 'apiVersion: drover/v1
kind: Experiment
metadata: { name: x
spec: {}' ""
bad 'apiVersion: drover/v1
kind: Experiment
metadata: { name: x }
spec:
  comand: [true]' "did you mean 'command'"
bad 'apiVersion: drover/v1
kind: Experiment
metadata: { name: x }
spec:
  resources: { gpu_count: two }
  command: [true]' "gpu_count"
bad 'apiVersion: drover/v1
kind: Experiment
metadata: { name: x }
spec:
  hyperparameters: { lr: 1 }
  command: [echo, "${hyperparameters.lrr}"]' "hyperparameters.lrr"
bad 'apiVersion: drover/v1
kind: Pipeline
metadata: { name: x }
spec:
  stages:
    - { name: a, command: [true], needs: [b] }
    - { name: b, command: [true], needs: [a] }' "cycle"
bad 'apiVersion: drover/v1
kind: Experiment
metadata: { name: x }
spec: {}' "command"
expect_eq "$(task_count)" "$before" "tasks after bad templates"

done_testing
