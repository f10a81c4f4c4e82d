#!/usr/bin/env bash
# Spilling to Slurm (slurm-lib.sh): with `spill = unfit`, a task this 2-GPU machine can never run
# goes to the 8-GPU Slurm cluster instead of being refused; one that fits stays local. With
# `spill = never` it is refused.
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up 8 8
echo "spill = unfit" >> "$DROVER_HOME/drover.conf"   # before the first command starts the daemon

t "spill = unfit: --gpus 6 is accepted, runs on Slurm with 6 GPUs"
id=$(drover submit --gpus 6 -- sh -c "echo \$CUDA_VISIBLE_DEVICES > $TMP/cvd6")
expect_eq "$(field_of "$id" '["backend"]')" slurm "backend of a task too big for this machine"
task_ends "$id" succeeded 60
[[ $(slurm_job_of "$id") =~ ^[0-9]+$ ]] || fail "slurm_job of the spilled task: $(slurm_job_of "$id")"
python3 - "$(cat "$TMP/cvd6")" <<'PY' || fail "CUDA_VISIBLE_DEVICES of the spilled task: '$(cat "$TMP/cvd6")'"
import sys
gpus = sys.argv[1].split(",")
assert len(gpus) == 6 and len(set(gpus)) == 6, gpus
assert all(g.isdigit() and 0 <= int(g) < 8 for g in gpus), gpus
PY

t "spill = unfit: --gpus 1 stays local"
id=$(drover submit --gpus 1 -- sh -c 'echo "cvd=$CUDA_VISIBLE_DEVICES"')
task_ends "$id" succeeded 30
expect_eq "$(field_of "$id" '["backend"]')" local "backend of a task that fits"
expect_eq "$(field_of "$id" '["slurm_job"]')" null "slurm_job of a local task"

t "spill = never (after a restart): --gpus 6 is refused, exit 2, one line"
pid=$(cat "$DROVER_HOME/daemon.lock")
drover shutdown >/dev/null
daemon_gone() { proc_gone "$pid"; }
wait_until 20 daemon_gone
sed -i 's/^spill = unfit$/spill = never/' "$DROVER_HOME/drover.conf"
grep -q '^spill = never$' "$DROVER_HOME/drover.conf" || fail "drover.conf: $(cat "$DROVER_HOME/drover.conf")"
before=$(task_count)
expect_exit 2 drover submit --gpus 6 -- true
[ -n "$ERR" ] && [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "expected one line, got: $ERR"
expect_eq "$(task_count)" "$before" "tasks after the refused submission"

t "spill = never: --on slurm --gpus 6 still goes to Slurm"
id=$(drover submit --on slurm --gpus 6 -- true)
task_ends "$id" succeeded 60
expect_eq "$(field_of "$id" '["backend"]')" slurm "backend"

t "spill = after 2s (after a restart): a task kept waiting here goes to Slurm"
pid=$(cat "$DROVER_HOME/daemon.lock")
drover shutdown >/dev/null
wait_until 20 daemon_gone
sed -i 's/^spill = never$/spill = after 2s/' "$DROVER_HOME/drover.conf"
hog=$(drover submit --gpus 2 -- sh -c "while [ ! -f $TMP/hog.stop ]; do sleep 0.1; done")
hog_runs() { [ "$(state_of "$hog")" = running ]; }
wait_until 30 hog_runs
waiter=$(drover submit --gpus 1 -- true)
expect_eq "$(field_of "$waiter" '["backend"]')" local "backend of a task that fits, when submitted"
task_ends "$waiter" succeeded 60
expect_eq "$(field_of "$waiter" '["backend"]')" slurm "backend after waiting 2 s here"
[[ $(slurm_job_of "$waiter") =~ ^[0-9]+$ ]] || fail "slurm_job of the spilled task: $(slurm_job_of "$waiter")"
expect_eq "$(state_of "$hog")" running "the task holding this machine's GPUs"
touch "$TMP/hog.stop"
task_ends "$hog" succeeded 30
expect_eq "$(field_of "$hog" '["backend"]')" local "backend of the task that ran here"
done_testing
