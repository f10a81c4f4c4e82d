#!/usr/bin/env bash
# An ASHA sweep whose trials run on Slurm (`resources: { backend: slurm }`): the trials report
# metrics into shared-dir, the daemon reads them there, stops the losers early by cancelling their
# Slurm jobs, and the leaderboard is the one the same sweep gives when run here.
# Needs root and Slurm (slurm-lib.sh; skipped otherwise).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up

trials() { drover exp show "$1" --json | python3 -c "import json,sys; d=json.load(sys.stdin); $2"; }
exp_state() { drover exp show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
exp_state_is() { [ "$(exp_state "$1")" = "$2" ]; }

# A trial of quality Q: nine epochs, 0.4 s each, val_accuracy Q * epoch / 9 appended to the
# metrics file at the start of each. Trial 0 is the best and the rest are worse in grid order,
# and two run at a time: trials 2-5 reach rung 1 (epoch 1) after both of the first two did, below
# them, so ASHA stops every one of them there, wherever the trials run. No numpy needed.
cat > "$SHARED/trial.sh" <<'SH'
q=$1
e=1
while [ "$e" -le 9 ]; do
    printf '{"epoch": %d, "val_accuracy": %s}\n' "$e" "$(awk -v q="$q" -v e="$e" 'BEGIN { printf "%.4f", q * e / 9 }')" \
        >> "$DROVER_METRICS_FILE"
    echo "epoch $e"
    sleep 0.4
    e=$((e + 1))
done
SH
# sweep NAME BACKEND: writes the sweep's template, $TMP/NAME.yaml.
sweep() {
    cat > "$TMP/$1.yaml" <<YAML
apiVersion: drover/v1
kind: Experiment
metadata: { name: $1 }
spec:
  hyperparameters: { q: 0.5 }
  resources: { backend: $2, gpu_count: 0, cpus: 1 }
  command: [sh, "$SHARED/trial.sh", "\${hyperparameters.q}"]
  retry: 0
  sweep:
    method: grid
    parallel: 2
    parameters:
      hyperparameters.q: [0.9, 0.8, 0.3, 0.2, 0.1, 0.05]
  early_stopping: { type: asha, metric: val_accuracy, mode: max, grace: 1,
                    reduction_factor: 3, max_rung: 9 }
YAML
}
# summary NAME: what must not depend on where the trials ran: per trial whether it was stopped
# early (trial 1's fate depends on which of the first two reached rung 1 first: left out), then
# the best trial, its state and its best value.
summary() {
    trials "$1" '
ts = sorted(d["trials"], key=lambda t: t["trial"])
best = max(ts, key=lambda t: t["best"] or 0)
print([t["stopped_early"] for t in ts if t["trial"] != 1], best["trial"], best["state"], best["best"])'
}

t "the sweep on Slurm: ASHA stops the losers, their Slurm jobs are cancelled"
sweep slurm-sweep slurm
drover exp run "$TMP/slurm-sweep.yaml" >/dev/null
wait_until 90 exp_state_is slurm-sweep done
drover exp show slurm-sweep --json > "$TMP/slurm-sweep.json"
expect_eq "$(trials slurm-sweep 'print(len(d["trials"]))')" 6 "trials"
stopped=$(trials slurm-sweep 'print(sum(t["stopped_early"] for t in d["trials"]))')
finished=$(trials slurm-sweep 'print(sum(t["state"] == "succeeded" for t in d["trials"]))')
[ "$stopped" -ge 4 ] || fail "only $stopped trials were stopped early: $(drover exp show slurm-sweep)"
expect_eq "$((stopped + finished))" 6 "every trial either stopped early or succeeded"
trials slurm-sweep 'assert all("rung" in t["reason"] for t in d["trials"] if t["stopped_early"]), d' ||
    fail "a stopped trial has no rung in its reason"
trials slurm-sweep 'print("\n".join("%d %d" % (t["task"], t["stopped_early"]) for t in d["trials"]))' > "$TMP/tasks"
while read -r task was_stopped; do
    expect_eq "$(field_of "$task" '["backend"]')" slurm "trial task $task's backend"
    job=$(field_of "$task" '["slurm_job"]')
    [[ "$job" =~ ^[0-9]+(_[0-9]+)?$ ]] || fail "trial task $task has no Slurm job: $job"
    lines=$(wc -l < "$SHARED/metrics/$task.jsonl") || fail "no metrics file in shared-dir for task $task"
    if [ "$was_stopped" = 1 ]; then
        expect_eq "$(slurm_job_state "$job")" CANCELLED "Slurm state of stopped trial task $task"
        [ "$lines" -lt 9 ] || fail "stopped trial task $task ran all its epochs"
    else
        expect_eq "$(slurm_job_state "$job")" COMPLETED "Slurm state of finished trial task $task"
        expect_eq "$lines" 9 "epochs reported by finished trial task $task"
    fi
done < "$TMP/tasks"
expect_eq "$(slurm_jobs | wc -l)" 6 "Slurm jobs: one per trial"

t "the same sweep run here gives the same leaderboard"
sweep local-sweep local
drover exp run "$TMP/local-sweep.yaml" >/dev/null
wait_until 60 exp_state_is local-sweep done
expect_eq "$(summary slurm-sweep)" "$(summary local-sweep)" "stopped trials, best trial, its state and value"
expect_eq "$(summary slurm-sweep)" "[False, True, True, True, True] 0 succeeded 0.9" "the Slurm sweep's summary"
drover exp show slurm-sweep | grep -q "every trial ended: .* succeeded, .* stopped early" ||
    fail "exp show: $(drover exp show slurm-sweep | head -3)"
done_testing
