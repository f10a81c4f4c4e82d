#!/bin/bash
# capture.sh DIR: remakes the fixtures of tests/unit/test_slurm_parse.c from a real Slurm (the
# single-node test bed, ../shared/testbeds/slurm/up.sh, started with SLURM_CPUS=8 and no
# accounting). Not run by the tests: the files it writes are checked in, and README.md says what
# each one is. It submits a set of jobs, waits (with deadlines, never fixed sleeps) for each to
# reach the state a fixture needs, and writes what squeue and scontrol print. Takes ~2 minutes
# (the TIMEOUT job needs its one-minute limit to pass). Run it on an empty cluster: job ids in
# the test are those it gets from a freshly started slurmctld (up.sh starts with -c).
set -euo pipefail
out=${1:?usage: capture.sh DIR}
mkdir -p "$out"
work=$(mktemp -d)
cd "$work"

SQUEUE_FORMAT='JobArrayID:|,State:|,Reason:|,exit_code:|'
squeue_text() { squeue --noheader --states=all --Format="$SQUEUE_FORMAT"; }
sub() { sbatch --parsable "$@"; }
# wait_for ID STATE: until scontrol says the job (or array task ID_N) is in STATE; 180 s at most.
wait_for() {
    local deadline=$((SECONDS + 180))
    until scontrol show job -o "$1" 2>/dev/null | grep -q "JobState=$2 "; do
        [ $SECONDS -lt $deadline ] || { echo "job $1 never became $2" >&2; exit 1; }
        sleep 0.2
    done
}
wait_reason() {
    local deadline=$((SECONDS + 60))
    until scontrol show job -o "$1" 2>/dev/null | grep -q "Reason=$2 "; do
        [ $SECONDS -lt $deadline ] || { echo "job $1 never had reason $2" >&2; exit 1; }
        sleep 0.2
    done
}

held=$(sub --hold --wrap 'sleep 1')                                 # PENDING, JobHeldUser
gpu=$(sub --gres=gpu:1 --wrap 'sleep 300')                          # RUNNING, later scancel'd
wait_for "$gpu" RUNNING
ok=$(sub --wrap 'true')                                             # COMPLETED 0:0
bad=$(sub --wrap 'exit 3')                                          # FAILED 3:0
sig=$(sub --wrap 'kill -9 $$')                                      # FAILED 0:9
never=$(sub --dependency=afterok:"$bad" --kill-on-invalid-dep=yes --wrap 'true')
arr=$(sub --array=0-3%2 --wrap 'sleep 8; exit $SLURM_ARRAY_TASK_ID') # 0 ok, 1-3 fail
slow=$(sub --time=1 --wrap 'sleep 300')                             # TIMEOUT
odd=$(sub --job-name='x JobState=COMPLETED ExitCode=0:0 UserId=y' --wrap 'exit 4')
wait_for "$ok" COMPLETED; wait_for "$bad" FAILED; wait_for "$sig" FAILED; wait_for "$odd" FAILED
wait_for "$never" CANCELLED
# sched/builtin is FIFO: a job blocked on Resources holds back every later one, so these last.
big=$(sub --gres=gpu:4 --wrap 'sleep 1')                            # PENDING, Resources
dep=$(sub --dependency=afterok:"$gpu" --wrap 'true')                # PENDING, Dependency
wait_for "${arr}_0" RUNNING; wait_for "$slow" RUNNING; wait_reason "$big" Resources
wait_reason "$dep" Dependency

# The moment with every kind at once: pending (held, Resources, Dependency, an array's rest),
# running, and just-finished jobs.
squeue_text > "$out/squeue-live.txt"
squeue --json > "$out/squeue-live.json"
squeue --noheader --states=all --format='%i|%T|%r' > "$out/squeue-live-o.txt"
scontrol show job -o "$held" > "$out/scontrol-pending-held.txt"
scontrol show job -o "$big" > "$out/scontrol-pending-resources.txt"
scontrol show job -o "$gpu" > "$out/scontrol-running.txt"
scontrol show job -o "$arr" > "$out/scontrol-array-running.txt"
scontrol show job -o "$ok" > "$out/scontrol-completed.txt"
scontrol show job -o "$bad" > "$out/scontrol-failed-exit3.txt"
scontrol show job "$bad" > "$out/scontrol-multiline-failed-exit3.txt"   # without -o
scontrol show job -o "$sig" > "$out/scontrol-failed-signal9.txt"
scontrol show job -o "$never" > "$out/scontrol-cancelled-invalid-dep.txt"
scontrol show job -o "$odd" > "$out/scontrol-failed-odd-name.txt"

scancel "$gpu"                        # a running job cancelled from outside drover
scancel "$held"                       # a pending one
wait_for "$gpu" CANCELLED; wait_for "$held" CANCELLED
wait_reason "$dep" DependencyNeverSatisfied   # afterok on a cancelled job, no kill-on-invalid-dep
scontrol show job -o "$gpu" > "$out/scontrol-cancelled-running.txt"
scontrol show job -o "$held" > "$out/scontrol-cancelled-pending.txt"
wait_for "${arr}_3" FAILED
scontrol show job -o "${arr}_3" > "$out/scontrol-array-task-failed.txt"
wait_for "$slow" TIMEOUT
scontrol show job -o "$slow" > "$out/scontrol-timeout.txt"
wait_for "$big" COMPLETED
squeue_text > "$out/squeue-final.txt"
scancel "$dep"
# A job slurmctld no longer knows (purged after MinJobAge, or never was): stderr and status.
{ scontrol show job -o 999999 2>&1; echo "exit status $?"; } > "$out/scontrol-gone.txt" || true
{ sacct -n -X -P -j "$bad" -o State,ExitCode 2>&1; echo "exit status $?"; } > "$out/sacct-no-dbd.txt" || true
{ squeue --version; scontrol --version; } > "$out/versions.txt"
cd /; rm -rf "$work"
echo "captured into $out"
