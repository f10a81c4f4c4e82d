#!/usr/bin/env bash
# bench/slurm.sh: what the Slurm backend costs, on the single-node test cluster of
# tests/e2e/slurm-lib.sh (which it uses: the same lock, setup and teardown).
#   1. Submit → start latency: N sequential jobs, alternating plain `sbatch --wrap` and
#      `drover submit --on slurm`, each writing `date +%s%N` as its first act; latency = that stamp
#      minus the time just before the submitting command ran. For drover also: the task's last
#      stamp → `drover wait` returning (how long drover takes to notice the end: the poll).
#   2. Polling cost: the daemon's squeue calls and CPU time (utime + stime of its /proc/PID/stat,
#      its children not included) over WINDOW seconds, first with nothing tracked, then with JOBS
#      Slurm jobs tracked and kept PENDING (the node drained). squeue is a wrapper first in the
#      daemon's PATH that logs each call and execs the real one; one call's cost is then measured
#      by running the logged command line 10 times by hand, and slurmctld's CPU over the window
#      is shown too (it answers the calls, and also runs its own scheduler over the pending jobs).
# Prints two small tables. Not a test: run by hand, as root, with slurm-wlm and munge installed.
# Usage: bench/slurm.sh [BUILD_DIR]   (N=20 JOBS=1000 WINDOW=60 POLL=1s)
set -euo pipefail
BUILD=$(readlink -f "${1:-build}")
REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-20} JOBS=${JOBS:-1000} WINDOW=${WINDOW:-60} POLL=${POLL:-1s}
export DROVER=$BUILD/drover
. "$REPO/tests/e2e/lib.sh"
. "$REPO/tests/e2e/slurm-lib.sh"
slurm_up 4 8
sed -i '/^slurm-poll/d' "$DROVER_HOME/drover.conf"
echo "slurm-poll = $POLL" >> "$DROVER_HOME/drover.conf"
NODE=$(hostname -s)
W=$TMP/bench
mkdir -p "$W/bin"
REAL_SQUEUE=$(command -v squeue)
cat > "$W/bin/squeue" <<SH
#!/bin/bash
{ printf '%s' "\$(date +%s%N)"; printf ' %q' "\$@"; echo; } >> "$W/squeue.log"
exec "$REAL_SQUEUE" "\$@"
SH
REAL_SBATCH=$(command -v sbatch)
cat > "$W/bin/sbatch" <<SH
#!/bin/sh
date +%s%N >> "$W/sbatch.log"
exec "$REAL_SBATCH" "\$@"
SH
chmod +x "$W/bin/squeue" "$W/bin/sbatch"
: > "$W/sbatch.log"
: > "$W/squeue.log"
PATH=$W/bin:$PATH drover ls >/dev/null    # the daemon starts with the logging squeue
DAEMON=$(cat "$DROVER_HOME/daemon.lock")
grep -q "$W/bin" "/proc/$DAEMON/environ" || fail "the daemon does not have the squeue wrapper in its PATH"

now_ns() { date +%s%N; }
# pct P FILE: the P-th percentile (nearest rank) of the numbers in FILE, one a line.
pct() { sort -n "$2" | awk -v p="$1" '{ v[NR] = $1 } END { i = int((p * NR + 99) / 100); if (i < 1) i = 1; print v[i] }'; }
row() { printf '%-44s %8s %8s %8s\n' "$@"; }
stats() { row "$1" "$(pct 50 "$2")" "$(pct 90 "$2")" "$(pct 100 "$2")"; }
# cpu_ms PID: utime + stime of PID, in milliseconds.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print int(($12 + $13) * 1000 / hz) }' "/proc/$1/stat"; }

# --- 1. submit → start latency -------------------------------------------------------------------
: > "$W/lat.sbatch"; : > "$W/lat.drover"; : > "$W/lat.end"; : > "$W/lat.call"; : > "$W/lat.slurm"
for ((i = 0; i < N; i++)); do
    t0=$(now_ns)
    sbatch --parsable --output=/dev/null --wrap "date +%s%N > $W/s$i" >/dev/null
    wait_until 60 test -s "$W/s$i"
    echo $(( ($(cat "$W/s$i") - t0) / 1000000 )) >> "$W/lat.sbatch"

    t0=$(now_ns)
    id=$(drover submit --on slurm -- sh -c "date +%s%N > $W/d$i.start; date +%s%N > $W/d$i.end")
    wait_until 60 test -s "$W/d$i.start"
    echo $(( ($(cat "$W/d$i.start") - t0) / 1000000 )) >> "$W/lat.drover"
    call=$(sed -n "$((i + 1))p" "$W/sbatch.log")    # the daemon's sbatch for this task
    echo $(( (call - t0) / 1000000 )) >> "$W/lat.call"
    echo $(( ($(cat "$W/d$i.start") - call) / 1000000 )) >> "$W/lat.slurm"
    drover wait "$id" >/dev/null || fail "task $id did not succeed"
    t1=$(now_ns)
    echo $(( (t1 - $(cat "$W/d$i.end")) / 1000000 )) >> "$W/lat.end"
done

# --- 2. polling cost -----------------------------------------------------------------------------
# window LABEL: counts the daemon's squeue calls and its CPU time over WINDOW seconds, and
# slurmctld's CPU time; prints a row.
window() {
    local ctld d0 c0 d1 c1 calls
    ctld=$(slurm_pid slurmctld)
    : > "$W/squeue.log"
    d0=$(cpu_ms "$DAEMON") c0=$(cpu_ms "$ctld")
    sleep "$WINDOW"     # the measurement window itself: not a wait for a condition
    d1=$(cpu_ms "$DAEMON") c1=$(cpu_ms "$ctld")
    calls=$(wc -l < "$W/squeue.log")
    local per_call=-
    if [ "$calls" -gt 0 ]; then   # one call's wall time, the logged command line run by hand
        local args t
        args=$(head -n 1 "$W/squeue.log" | cut -d' ' -f2-)
        t=$(now_ns)
        for _ in $(seq 10); do eval "$REAL_SQUEUE $args" >/dev/null; done
        per_call=$(( ($(now_ns) - t) / 10000000 ))
        SQUEUE_ARGS=$args
    fi
    printf '%-34s %7s %11s %10s %9s %14s\n' "$1" "$calls" "$((d1 - d0))" \
        "$(awk -v c=$((d1 - d0)) -v w="$WINDOW" 'BEGIN { printf "%.2f%%", c / (w * 10) }')" \
        "$per_call" "$((c1 - c0))" >> "$W/poll.table"
}
: > "$W/poll.table"
SQUEUE_ARGS=
window "0 tracked (idle)"

scontrol update NodeName="$NODE" State=DRAIN Reason=bench
: > "$W/ids"
submit_some() { for ((k = 0; k < $1; k++)); do drover submit --on slurm -- true >> "$W/ids"; done; }
t0=$SECONDS
submitters=()
for _ in 1 2 3 4; do
    submit_some $((JOBS / 4)) &
    submitters+=($!)
done
wait "${submitters[@]}"   # these alone: the fixture's lock holder is a child of this shell too
[ "$(wc -l < "$W/ids")" -eq $((JOBS / 4 * 4)) ] || fail "only $(wc -l < "$W/ids") of the $JOBS submissions were acknowledged"
pending() { [ "$(squeue -h --states=PENDING -o %i | wc -l)" -ge "$JOBS" ]; }
# Every task has its Slurm job in the store (show --json of the last few submitted).
known() {
    local id
    for id in $(tail -n 5 "$W/ids"); do
        [[ "$(field_of "$id" '["slurm_job"]')" =~ ^[0-9]+$ ]] || return 1
    done
}
wait_until 600 pending
wait_until 120 known
SUBMIT_S=$((SECONDS - t0))
window "$JOBS tracked (PENDING, node drained)"
drover shutdown >/dev/null

echo
echo "drover $("$DROVER" version 2>/dev/null | head -1); Slurm $(sinfo --version | cut -d' ' -f2); $(nproc) CPUs; slurm-poll = $POLL"
echo
echo "Submit -> start latency, ms ($N sequential jobs each, alternating)"
row "" p50 p90 max
stats "sbatch --wrap" "$W/lat.sbatch"
stats "drover submit --on slurm" "$W/lat.drover"
stats "  of which: submit -> the daemon's sbatch" "$W/lat.call"
stats "  of which: the daemon's sbatch -> start" "$W/lat.slurm"
stats "drover: task end -> drover wait returns" "$W/lat.end"
echo
echo "Polling over ${WINDOW} s (submitting the $JOBS jobs took ${SUBMIT_S} s)"
printf '%-34s %7s %11s %10s %9s %14s\n' "" "squeue" "daemon CPU" "" "1 squeue" "slurmctld CPU"
printf '%-34s %7s %11s %10s %9s %14s\n' "" "calls" "ms" "of a core" "call ms" "ms"
cat "$W/poll.table"
echo
echo "squeue as the daemon calls it: squeue ${SQUEUE_ARGS:-(never called)}"
