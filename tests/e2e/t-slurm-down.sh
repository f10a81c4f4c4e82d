#!/usr/bin/env bash
# Slurm's controller goes away and comes back (slurm-lib.sh): local tasks keep running and
# finishing; a --on slurm submission is refused, or waits with a reason naming the outage; the
# Slurm job that was running finishes on slurmd and is recorded once the controller is back;
# nothing runs twice.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up 4 8

# Each task appends "start" and "end" lines to $TMP/ran.NAME: a rerun shows as more lines.
runner() { echo "echo start >> $TMP/ran.$1; sleep ${2:-0}; echo end >> $TMP/ran.$1"; }
lines() { { cat "$TMP/ran.$1" 2>/dev/null || true; } | grep -c "^$2\$" || true; }
OUTAGE_RE='unreachable|unable to contact|not answering'
names_outage() { [[ ${1,,} =~ $OUTAGE_RE ]]; }

t "a Slurm task runs, then slurmctld stops"
r=$(drover submit --on slurm -- sh -c "$(runner r 8)")
wait_until 60 test -s "$TMP/ran.r"
wait_until 20 state_is "$r" running
slurm_ctld_stop
outage_started=$SECONDS

t "while slurmctld is down: local tasks run and succeed"
l1=$(drover submit -- sh -c "$(runner l1)")
task_ends "$l1" succeeded 30
l2=$(drover submit --gpus 1 -- sh -c "$(runner l2 1)")
task_ends "$l2" succeeded 30

t "while slurmctld is down: --on slurm is refused naming the outage, or waits with such a reason (then refused)"
w=
rc=0
out=$(drover submit --on slurm -- sh -c "$(runner w)" 2>"$TMP/err") || rc=$?
err=$(cat "$TMP/err")
case $rc in
2)
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "refusal: expected one line, got: $err"
    names_outage "$err" || fail "the refusal does not name Slurm being unreachable: $err"
    echo "refused: $err"
    ;;
0)
    w=$out
    deadline=$((SECONDS + 30))
    until names_outage "$(field_of "$w" '["reason"]')"; do
        [ "$SECONDS" -lt "$deadline" ] ||
            fail "accepted during the outage, but its reason does not name it: $(drover show "$w" --json)"
        sleep 0.2
    done
    expect_eq "$(state_of "$w")" queued "state of a Slurm task waiting for the controller"
    echo "accepted, waiting: $(field_of "$w" '["reason"]')"
    # Its reason says the daemon knows now: from here on, --on slurm is refused.
    expect_exit 2 drover submit --on slurm -- sh -c "$(runner never)"
    [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "refusal: expected one line, got: $ERR"
    names_outage "$ERR" || fail "the refusal does not name Slurm being unreachable: $ERR"
    echo "then refused: $ERR"
    ;;
*) fail "--on slurm during the outage exited $rc: $err" ;;
esac

t "the running Slurm task is still running in drover; on slurmd it finishes"
expect_eq "$(state_of "$r")" running "the Slurm task during the outage"
r_ended() { [ "$(lines r end)" = 1 ]; }
wait_until 30 r_ended
echo "outage so far: $((SECONDS - outage_started))s"

t "slurmctld back: the finished job is recorded succeeded, the waiting task runs"
slurm_ctld_start
task_ends "$r" succeeded 90
expect_eq "$(field_of "$r" '["attempts"]')" 1 "attempts of the task that ran through the outage"
expect_eq "$(slurm_job_state "$(slurm_job_of "$r")")" COMPLETED "Slurm's state of its job"
if [ -z "$w" ]; then   # it was refused: once the daemon sees Slurm again, it is accepted
    submit_w() { w=$("$DROVER" submit --on slurm -- sh -c "$(runner w)" 2>/dev/null); }
    wait_until 30 submit_w
fi
task_ends "$w" succeeded 90
expect_eq "$(field_of "$w" '["backend"]')" slurm "backend of the task submitted around the outage"

t "nothing ran twice"
for name in r l1 l2 w; do
    expect_eq "$(lines "$name" start)" 1 "starts of $name"
    expect_eq "$(lines "$name" end)" 1 "ends of $name"
done
expect_eq "$(lines never start)" 0 "starts of the refused submission"
scontrol show job "$(slurm_job_of "$r")" | grep -q 'Restarts=0' || fail "Slurm requeued job $(slurm_job_of "$r")"
done_testing
