#!/usr/bin/env bash
# Time limits on Slurm (slurm-lib.sh): --timeout becomes --time in whole minutes, rounded up; a
# task past its limit ends timed_out; SIGUSR1 comes before the limit, and a task that traps it
# can save a checkpoint. Slurm's minimum is a minute and its timer is coarse: this takes 1-2 min.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up 4 8

# time_limit ID: the TimeLimit Slurm shows for the task's job (e.g. 00:02:00).
time_limit() { scontrol show job "$(slurm_job_of "$1")" | grep -oE 'TimeLimit=[^ ]+' | cut -d= -f2; }

t "--timeout 90s: --time rounds up to 2 minutes"
id=$(drover submit --on slurm --timeout 90s -- true)
task_ends "$id" succeeded 60
expect_eq "$(time_limit "$id")" 00:02:00 "Slurm's TimeLimit for --timeout 90s"

t "--timeout 1m: sleep 600 ends timed_out; a task that traps USR1 is warned, then timed out"
# Both at once: the wait is Slurm's minute. The warning (SIGUSR1, half the limit before it) ends
# the plain sleep early (recorded timed_out too, docs/SLURM.md); the task that traps it runs on
# until Slurm's limit kills it.
started=$SECONDS
plain=$(drover submit --on slurm --timeout 1m -- sleep 600)
trapper=$(drover submit --on slurm --timeout 1m -- sh -c "
    trap 'echo warned > \"\$DROVER_CHECKPOINT_DIR/w\"' USR1
    echo looping
    while :; do sleep 0.2; done")
wait_until 60 state_is "$trapper" running
expect_eq "$(time_limit "$plain")" 00:01:00 "Slurm's TimeLimit for --timeout 1m"
task_ends "$plain" timed_out 150
task_ends "$trapper" timed_out 150
elapsed=$((SECONDS - started))
echo "timed out after ${elapsed}s"
[ "$elapsed" -ge 55 ] || fail "the USR1-trapping task ended after ${elapsed}s, before its 1-minute limit"
expect_eq "$(slurm_job_state "$(slurm_job_of "$trapper")")" TIMEOUT "Slurm's state of the trapping task's job"
expect_eq "$(cat "$SHARED/checkpoints/$trapper/w" 2>/dev/null)" warned "the trap's checkpoint file"
expect_eq "$(field_of "$trapper" '["attempts"]')" 1 "attempts"
expect_eq "$(drover logs "$trapper")" looping "logs of the timed-out task"
done_testing
