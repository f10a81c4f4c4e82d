#!/usr/bin/env bash
# Nothing lost, nothing run twice on Slurm: the daemon killed with -9 while Slurm jobs run, right
# after a submission returned, and while its sbatch call is on its way; the next daemon re-adopts
# the jobs from the store, and every task ends with exactly one Slurm job.
# Needs root and Slurm (slurm-lib.sh; skipped otherwise).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up
# A failure here is about what drover and Slurm each know: show both, then what lib.sh shows.
eval "lib_$(declare -f fail)"
fail() {
    { echo "--- drover ls --all ---"; "$DROVER" ls --all; echo "--- Slurm's jobs ---"; slurm_jobs; } >&2 2>&1 || true
    lib_fail "$@"
}

kill_daemon() {
    local pid
    pid=$(cat "$DROVER_HOME/daemon.lock")
    kill -9 "$pid"
    wait_until 10 proc_gone "$pid"
}
# jobs_of TASK: how many Slurm jobs carry the task's name (drover-TASK: no --name given).
jobs_of() { slurm_jobs | awk -F'|' -v n="drover-$1" '$3 == n' | wc -l; }
slurm_state_is() { [ "$(field_of "$1" '["slurm_state"]')" = "$2" ]; }
job_state_is() { slurm_jobs | grep -q "^$1|$2|"; }
# Each task appends its id to a file when it starts: a second run shows as a second line.
starter() { echo "echo \$DROVER_TASK_ID >> $SHARED/$1; sleep $2"; }
lines_of() { grep -cx "$2" "$SHARED/$1" || true; }
# all_ended ID…: every task has ended (wait_until's deadline, rather than `drover wait`, which
# would wait for ever for a job the daemon lost track of).
all_ended() {
    local id
    for id in "$@"; do
        case $(state_of "$id") in succeeded | failed | cancelled | timed_out | upstream_failed) ;; *) return 1 ;; esac
    done
}

t "kill -9 with three Slurm jobs running"
a=$(drover submit --on slurm -- sh -c "$(starter started 6)")
b=$(drover submit --on slurm -- sh -c "$(starter started 6)")
c=$(drover submit --on slurm -- sh -c "$(starter started 1)")
for id in "$a" "$b" "$c"; do wait_until 30 slurm_state_is "$id" RUNNING; done
c_job=$(field_of "$c" '["slurm_job"]')
kill_daemon

t "while the daemon is dead, one job ends; the next command restarts the daemon"
wait_until 30 job_state_is "$c_job" COMPLETED
expect_eq "$(task_count)" 3 "tasks after the restart"
wait_until 60 all_ended "$a" "$b" "$c"
for id in "$a" "$b" "$c"; do
    expect_eq "$(state_of "$id")" succeeded "task $id"
    expect_eq "$(field_of "$id" '["attempts"]')" 1 "task $id's attempts"
    expect_eq "$(lines_of started "$id")" 1 "task $id's runs"
    expect_eq "$(jobs_of "$id")" 1 "task $id's Slurm jobs"
done
expect_eq "$(field_of "$c" '["slurm_job"]')" "$c_job" "the job that ended while the daemon was dead"
expect_eq "$(slurm_jobs | wc -l)" 3 "Slurm jobs in all"

t "kill -9 right after each submission returns"
ids=()
for _ in 1 2 3; do
    ids+=("$(drover submit --on slurm -- sh -c "$(starter quick 0)")")
    kill_daemon
done
wait_until 60 all_ended "${ids[@]}"
for id in "${ids[@]}"; do
    expect_eq "$(state_of "$id")" succeeded "task $id"
    expect_eq "$(lines_of quick "$id")" 1 "task $id's runs"
    expect_eq "$(jobs_of "$id")" 1 "task $id's Slurm jobs"
done
expect_eq "$(slurm_jobs | wc -l)" 6 "Slurm jobs in all"

t "kill -9 while the daemon's sbatch is on its way"
# An sbatch that takes a second, first in the daemon's PATH: the daemon is killed after sbatch
# started and before it answered; sbatch goes on and submits the job. The next daemon must find
# that job rather than submit the task again.
mkdir -p "$TMP/slow"
cat > "$TMP/slow/sbatch" <<SH
#!/bin/sh
echo \$\$ >> "$TMP/sbatch.calls"
sleep 1
exec $(command -v sbatch) "\$@"
SH
chmod +x "$TMP/slow/sbatch"
drover shutdown >/dev/null
wait_until 10 test ! -S "$DROVER_HOME/drover.sock"
PATH=$TMP/slow:$PATH drover ls >/dev/null   # the daemon starts with the slow sbatch
s=$(drover submit --on slurm -- sh -c "$(starter slow 0)")
wait_until 30 test -s "$TMP/sbatch.calls"
wrapper=$(head -n 1 "$TMP/sbatch.calls")
proc_gone "$wrapper" && fail "sbatch answered before the kill: this check missed its window"
kill_daemon
wait_until 30 proc_gone "$wrapper"        # sbatch has answered nobody, and submitted the job
wait_until 60 all_ended "$s"
expect_eq "$(state_of "$s")" succeeded "task $s"
expect_eq "$(lines_of slow "$s")" 1 "task $s's runs"
expect_eq "$(jobs_of "$s")" 1 "task $s's Slurm jobs"
expect_eq "$(slurm_jobs | wc -l)" 7 "Slurm jobs in all"
done_testing
