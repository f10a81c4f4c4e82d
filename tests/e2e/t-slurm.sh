#!/usr/bin/env bash
# The Slurm backend against a real Slurm (slurm-lib.sh): a GPU task's environment, show/ls/logs,
# exit codes, --env through the batch script, cancel (scancel), arrays with a limit, a job Slurm
# holds pending, and the submissions drover refuses.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up 4 8

# one_line TEXT: TEXT is one non-empty line.
one_line() { [ -n "$1" ] && [ "$(printf '%s\n' "$1" | wc -l)" = 1 ]; }

t "bad input: an unknown backend is refused, exit 2, one line"
expect_exit 2 drover submit --on mars -- true
one_line "$ERR" || fail "--on mars: expected one line, got: $ERR"
expect_eq "$(task_count)" 0 "tasks after refused submissions"

t "bad input: --on slurm without shared-dir is refused, exit 2, one line naming it"
# A second daemon with no drover.conf; stopped at once, whatever it answered.
rc=0
ERR=$(DROVER_HOME=$TMP/home2 "$DROVER" submit --on slurm -- true 2>&1 >/dev/null) || rc=$?
DROVER_HOME=$TMP/home2 "$DROVER" shutdown >/dev/null 2>&1 || true
expect_eq "$rc" 2 "exit status of --on slurm without shared-dir"
one_line "$ERR" || fail "no shared-dir: expected one line, got: $ERR"
[[ $ERR == *shared-dir* ]] || fail "the refusal does not name shared-dir: $ERR"

t "a 1-GPU task on Slurm: the environment, show --json, ls, logs"
id=$(drover submit --on slurm --gpus 1 -- sh -c "env > $TMP/env.out; echo hello-from-slurm")
task_ends "$id" succeeded 60
env_of() { sed -n "s/^$1=//p" "$TMP/env.out"; }
[[ $(env_of CUDA_VISIBLE_DEVICES) =~ ^[0-3]$ ]] ||
    fail "CUDA_VISIBLE_DEVICES of a --gpus 1 task: '$(env_of CUDA_VISIBLE_DEVICES)'"
expect_eq "$(env_of DROVER_TASK_ID)" "$id" "DROVER_TASK_ID"
expect_eq "$(env_of DROVER_ATTEMPT)" 1 "DROVER_ATTEMPT"
expect_eq "$(env_of DROVER_CHECKPOINT_DIR)" "$SHARED/checkpoints/$id" "DROVER_CHECKPOINT_DIR"
expect_eq "$(env_of DROVER_METRICS_FILE)" "$SHARED/metrics/$id.jsonl" "DROVER_METRICS_FILE"
expect_eq "$(field_of "$id" '["backend"]')" slurm "backend"
job=$(slurm_job_of "$id")
[[ $job =~ ^[0-9]+$ ]] || fail "slurm_job: '$job'"
expect_eq "$(slurm_job_state "$job")" COMPLETED "Slurm's state of job $job"
slurm_jobs | grep -q "^$job|COMPLETED|" || fail "squeue does not list job $job: $(slurm_jobs)"
expect_eq "$(field_of "$id" '["attempt_list"][0]["slurm_job"]')" "$job" "attempt_list[0].slurm_job"
expect_eq "$(field_of "$id" '["slurm_state"]')" null "slurm_state of a finished task"
expect_eq "$(drover logs "$id")" hello-from-slurm "drover logs"
expect_eq "$(cat "$SHARED/runs/$id/1/stdout")" hello-from-slurm "the run directory's stdout"
[ -f "$SHARED/runs/$id/1/job.sh" ] || fail "no batch script in $SHARED/runs/$id/1"
drover ls --all | grep -q "slurm:$job" || fail "drover ls does not mark slurm:$job: $(drover ls --all)"
local_id=$(drover submit -- true)
task_ends "$local_id" succeeded 20
expect_eq "$(field_of "$local_id" '["backend"]')" local "backend of a local task"
expect_eq "$(field_of "$local_id" '["slurm_job"]')" null "slurm_job of a local task"

t "exit 3: failed, exit_code 3; Slurm says FAILED"
id=$(drover submit --on slurm -- sh -c 'exit 3')
task_ends "$id" failed 60
expect_eq "$(field_of "$id" '["exit_code"]')" 3 "exit_code"
reason=$(field_of "$id" '["reason"]')
[[ $reason == *"exit code 3"* ]] || fail "reason of exit 3: '$reason'"
expect_eq "$(slurm_job_state "$(slurm_job_of "$id")")" FAILED "Slurm's state"

t "--env values arrive byte-exact through the batch script"
b_value="it's \"q\" \\ \`x\` \$(y) !"
id=$(drover submit --on slurm --env 'A=x,y $z' --env "B=$b_value" -- \
    sh -c "printf '%s' \"\$A\" > $TMP/env.A; printf '%s' \"\$B\" > $TMP/env.B")
task_ends "$id" succeeded 60
expect_eq "$(cat "$TMP/env.A")" 'x,y $z' "A"
expect_eq "$(cat "$TMP/env.B")" "$b_value" "B"

t "cancel of a running task: cancelled, and Slurm's job CANCELLED"
id=$(drover submit --on slurm -- sh -c "echo started > $TMP/cancel.started; exec sleep 600")
wait_until 60 test -s "$TMP/cancel.started"
wait_until 20 state_is "$id" running
drover cancel "$id"
task_ends "$id" cancelled 30
job=$(slurm_job_of "$id")
job_cancelled() { [ "$(slurm_job_state "$job")" = CANCELLED ]; }
wait_until 30 job_cancelled

t "--array 0-3%2: all four succeed, never more than two at once"
ids=$(drover submit --on slurm --array 0-3%2 -- sh -c "
    echo \"start \$(date +%s.%N) \$DROVER_ARRAY_INDEX\" >> $TMP/array
    sleep 2
    echo \"end \$(date +%s.%N) \$DROVER_ARRAY_INDEX\" >> $TMP/array")
expect_eq "$(echo "$ids" | wc -l)" 4 "ids printed"
for a in $ids; do task_ends "$a" succeeded 120; done
python3 - "$TMP/array" <<'PY' || fail "array: $(cat "$TMP/array")"
import sys
events = [line.split() for line in open(sys.argv[1])]
assert sorted(int(e[2]) for e in events if e[0] == "start") == [0, 1, 2, 3], events
assert sorted(int(e[2]) for e in events if e[0] == "end") == [0, 1, 2, 3], events
# Ends first at equal stamps: an element's end is written before the next one can start.
now = most = 0
for kind, _, _ in sorted(events, key=lambda e: (float(e[1]), e[0] == "start")):
    now += 1 if kind == "start" else -1
    most = max(most, now)
assert most <= 2, "%d elements ran at once" % most
print("array: at most %d at once" % most)
PY

t "a job Slurm holds pending shows as queued, with Slurm's reason"
first=$(drover submit --on slurm --gpus 4 -- sh -c "while [ ! -f $TMP/gate ]; do sleep 0.1; done")
wait_until 60 state_is "$first" running
second=$(drover submit --on slurm --gpus 4 -- true)
pending_in_slurm() { [ "$(field_of "$second" '["slurm_state"]')" = PENDING ]; }
wait_until 30 pending_in_slurm
expect_eq "$(state_of "$second")" queued "state of a job Slurm holds pending"
reason=$(field_of "$second" '["reason"]')
[[ $reason == slurm:* ]] || fail "reason of a pending Slurm job: '$reason'"
[[ $(slurm_job_of "$second") =~ ^[0-9]+$ ]] || fail "a pending job has its slurm_job"
touch "$TMP/gate"
task_ends "$first" succeeded 60
task_ends "$second" succeeded 60
done_testing
