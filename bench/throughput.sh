#!/usr/bin/env bash
# bench/throughput.sh: 1,000 trivial tasks (`true`), two at a time, through
#   xargs -P2 (the process-creation floor), task-spooler (tsp -S 2), GNU parallel (-j2),
#   drover with one `drover submit` per task, and drover with one --array submission;
# then the daemon's memory with 100,000 queued tasks and the time `drover ls` takes then.
# Usage: [N=1000] [QUEUED=100000] bench/throughput.sh [BUILD_DIR]   (Markdown tables on stdout;
#   QUEUED=0 skips the second part)
set -euo pipefail
BUILD=${1:-build}
DROVER=$(readlink -f "$BUILD/drover")
N=${N:-1000}
QUEUED=${QUEUED:-100000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/drover-bench.XXXXXX") # TMPDIR=/dev/shm: the file system left out
trap 'DROVER_HOME=$WORK/home "$DROVER" shutdown >/dev/null 2>&1 || true; tsp -K >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

# task-spooler and GNU parallel are only compared with: a row is skipped when one is missing.
have() { command -v "$1" >/dev/null || { echo "($1 missing: apt-get install $2; its row is skipped)" >&2; return 1; }; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# row NAME SECONDS [DAEMON_CPU_S]: the table's line; the daemon's CPU per task when given.
row() {
    awk -v name="$1" -v t="$2" -v c="${3:-}" -v n="$N" 'BEGIN {
        printf "| %s | %.2f | %.0f | %s |\n", name, t, n / t, c == "" ? "-" : sprintf("%.3f", c * 1000 / n) }'
}
# The daemon's CPU time (user + system), in seconds, from /proc/PID/stat.
cpu() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }

echo "| runner ($N x true, 2 at a time) | wall s | tasks/s | daemon CPU ms/task |"
echo "|---|---|---|---|"

t0=$(now); seq "$N" | xargs -P2 -I{} true; t1=$(now)
xargs_s=$(elapsed "$t0" "$t1")
row "xargs -P2" "$xargs_s"

tsp_s=
if have tsp task-spooler; then
    export TS_SOCKET=$WORK/tsp.sock TS_MAXFINISHED=$((N + 10)) TS_SAVELIST=
    tsp -S 2 >/dev/null
    t0=$(now)
    for _ in $(seq "$N"); do tsp true >/dev/null; done
    tsp -w >/dev/null 2>&1 || true
    while [ "$(tsp | grep -c -E 'queued|running')" -gt 0 ]; do sleep 0.01; done
    t1=$(now)
    tsp_s=$(elapsed "$t0" "$t1")
    row "task-spooler (tsp -S 2)" "$tsp_s"
    tsp -K >/dev/null 2>&1 || true
fi

if have parallel parallel; then
    t0=$(now); seq "$N" | parallel -j2 true; t1=$(now)
    row "GNU parallel -j2" "$(elapsed "$t0" "$t1")"
fi

# drover: CPU-only tasks count one CPU each, so DROVER_FAKE_CPUS=2 runs two at a time.
export DROVER_HOME=$WORK/home DROVER_FAKE_CPUS=2 DROVER_FAKE_GPUS=1x16G
"$DROVER" ls >/dev/null   # start the daemon outside the timing
daemon=$(cat "$DROVER_HOME/daemon.lock")
c0=$(cpu "$daemon"); t0=$(now)
for _ in $(seq "$N"); do "$DROVER" submit -- true; done > "$WORK/ids"
"$DROVER" wait $(cat "$WORK/ids") >/dev/null
t1=$(now); c1=$(cpu "$daemon")
submit_s=$(elapsed "$t0" "$t1")
row "drover, one submit per task" "$submit_s" "$(elapsed "$c0" "$c1")"

# Eight clients submitting at once (a sweep launched with xargs -P8): their submissions share
# commits (group commit, daemon/group.c); the commits per submission are printed below.
commits() { "$DROVER" gpus --json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("store_commits", 0))'; }
k0=$(commits); c0=$(cpu "$daemon"); t0=$(now)
seq "$N" | xargs -P8 -I{} "$DROVER" submit -- true > "$WORK/ids"
"$DROVER" wait $(cat "$WORK/ids") >/dev/null
t1=$(now); c1=$(cpu "$daemon"); k1=$(commits)
row "drover, one submit per task, 8 clients at once" "$(elapsed "$t0" "$t1")" "$(elapsed "$c0" "$c1")"
par_commits=$(awk -v a="$k0" -v b="$k1" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / n }')

c0=$(cpu "$daemon"); t0=$(now)
"$DROVER" wait $("$DROVER" submit --array "0-$((N - 1))" -- true) >/dev/null
t1=$(now); c1=$(cpu "$daemon")
array_s=$(elapsed "$t0" "$t1")
row "drover, one --array submit" "$array_s" "$(elapsed "$c0" "$c1")"
"$DROVER" shutdown

# The targets of issue 13, from this run's rows.
echo
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "- --array against xargs -P2: $(ratio "$array_s" "$xargs_s")x (target: at most 1.5x)"
if [ -n "$tsp_s" ]; then
    echo "- one submit per task against task-spooler: $(ratio "$submit_s" "$tsp_s")x (target: at most 1.0x)"
fi
echo "- commits per task with 8 clients submitting at once: $par_commits (each task also commits its start and its end)"

[ "$QUEUED" -gt 0 ] || exit 0   # QUEUED=0: the first table only

# Memory with QUEUED tasks waiting (drained, so none starts), and the cost of `drover ls`.
export DROVER_HOME=$WORK/home2
"$DROVER" ls >/dev/null
"$DROVER" drain
t0=$(now)
"$DROVER" submit --array "0-$((QUEUED - 1))" -- true > /dev/null
t1=$(now)
pid=$(cat "$DROVER_HOME/daemon.lock")
rss=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status")
t2=$(now); "$DROVER" ls > /dev/null; t3=$(now)
t4=$(now); "$DROVER" ls --state running --json > /dev/null; t5=$(now)
# Restart: the next command after a shutdown starts a daemon that restores every queued task.
"$DROVER" shutdown
while [ -S "$DROVER_HOME/drover.sock" ]; do sleep 0.01; done
t8=$(now); "$DROVER" ls --state running > /dev/null; t9=$(now)
# Responsiveness: undrain with the machine full (two CPU slots busy with long tasks), so every
# event runs a scheduling pass over the full queue; time submissions and a cancel meanwhile.
"$DROVER" submit --priority 100 --cpus 2 -- sleep 600 > "$WORK/blocker"
"$DROVER" undrain
until [ "$("$DROVER" ls --state running --json | grep -c '"id"')" -ge 1 ]; do sleep 0.05; done
t6=$(now)
for _ in $(seq 20); do "$DROVER" submit -- true > /dev/null; done
t7=$(now)
"$DROVER" cancel "$(cat "$WORK/blocker")"
echo
echo "| $QUEUED queued tasks | value |"
echo "|---|---|"
echo "| one --array submission of $QUEUED | $(elapsed "$t0" "$t1") s |"
echo "| daemon resident memory | $((rss / 1024)) MiB |"
echo "| drover ls (all $QUEUED rows) | $(elapsed "$t2" "$t3") s |"
echo "| drover ls --state running --json | $(elapsed "$t4" "$t5") s |"
echo "| daemon restart with $QUEUED queued (next command's wall time) | $(elapsed "$t8" "$t9") s |"
echo "| drover submit, machine full, $QUEUED queued (mean of 20) | $(awk -v a="$t6" -v b="$t7" 'BEGIN { printf "%.1f", (b - a) * 1000 / 20 }') ms |"
"$DROVER" shutdown
