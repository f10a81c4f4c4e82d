#!/usr/bin/env bash
# Jobs the cluster ended, not the task (docs/SLURM.md, "States"): a node that fails under a
# running job (NODE_FAIL) makes drover submit the task again, without using a retry (the task has
# none) and without Slurm requeueing it behind drover's back (--no-requeue); and a job someone
# else cancels in Slurm ends its task cancelled, not retried.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up 4
node=$(hostname -s)

t "NODE_FAIL: submitted again as a new job, no retry used, then succeeds"
id=$(drover submit --on slurm --retries 0 -- sh -c "
    echo \$DROVER_ATTEMPT >> $TMP/attempts
    [ \$DROVER_ATTEMPT -ge 2 ] || exec sleep 600")
job_running() { [ "$(slurm_job_state "$(slurm_job_of "$id")")" = RUNNING ] && [ -s "$TMP/attempts" ]; }
wait_until 60 job_running
first=$(slurm_job_of "$id")
scontrol update NodeName="$node" State=DOWN Reason=drover-test
node_failed() { [ "$(slurm_job_state "$first")" = NODE_FAIL ]; }
wait_until 60 node_failed
# slurmd still answers, so the node comes back by itself (ReturnToService=2) and the job drover
# submitted again runs there.
task_ends "$id" succeeded 90
expect_eq "$(field_of "$id" '["attempts"]')" 2 "attempts"
expect_eq "$(field_of "$id" '["attempt_list"][0]["outcome"]')" requeued "the first attempt's outcome"
reason=$(field_of "$id" '["attempt_list"][0]["reason"]')
[[ $reason == *"node failure"* ]] || fail "the first attempt's reason: $reason"
expect_eq "$(tr '\n' ' ' < "$TMP/attempts")" "1 2 " "attempts that ran"
expect_eq "$(slurm_job_state "$first")" NODE_FAIL "the first job (not requeued by Slurm)"

t "scancel by someone else: the task ends cancelled and is not retried"
id=$(drover submit --on slurm --retries 3 -- sh -c "echo run >> $TMP/other; exec sleep 600")
started() { [ -s "$TMP/other" ] && [ "$(slurm_job_state "$(slurm_job_of "$id")")" = RUNNING ]; }
wait_until 60 started
scancel "$(slurm_job_of "$id")"
task_ends "$id" cancelled 60
expect_eq "$(field_of "$id" '["attempts"]')" 1 "attempts after an outside cancel"
expect_eq "$(wc -l < "$TMP/other")" 1 "runs"
done_testing
