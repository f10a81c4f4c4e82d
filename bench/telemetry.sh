#!/usr/bin/env bash
# bench/telemetry.sh: what GPU telemetry costs the daemon, on the fake NVML (tests/fake-nvml)
# with 8 GPUs, 4 of them running a task each (so process lists are matched to tasks):
#  1. CPU: the daemon sampling every second for SECONDS_CPU (default 60) seconds, idle otherwise;
#  2. memory: the daemon sampling every 5 ms until it has taken a day's worth of 1-second
#     samples (86,400 per GPU), its resident memory and the database's size along the way
#     (LIMIT_S, default 1500, bounds the wait).
# Usage: bench/telemetry.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
DROVER=$(readlink -f "$BUILD/drover")
export LD_LIBRARY_PATH=$(readlink -f "$BUILD/tests/fake-nvml")
SECONDS_CPU=${SECONDS_CPU:-60}
WORK=$(mktemp -d)
export FAKE_NVML_STATE=$WORK/state DROVER_FAKE_CPUS=8
unset DROVER_FAKE_GPUS
stop() { # cancel the bench's tasks (shutdown alone leaves them running), then stop the daemon
    DROVER_HOME=$1 DROVER_NO_AUTOSTART=1 "$DROVER" ls --json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(str(t["id"]) for t in json.load(sys.stdin)))' 2>/dev/null |
        xargs -r env DROVER_HOME="$1" DROVER_NO_AUTOSTART=1 "$DROVER" cancel >/dev/null 2>&1 || true
    DROVER_HOME=$1 DROVER_NO_AUTOSTART=1 "$DROVER" shutdown >/dev/null 2>&1 || true
}
trap 'stop "$WORK/h1"; stop "$WORK/h2"; rm -rf "$WORK"' EXIT
gpus() { # gpus USED: eight GPUs, the first four with USED memory in use
    for g in 0 1 2 3 4 5 6 7; do
        echo "gpu $g name=\"Fake A100\" uuid=GPU-bench-$g mem_total=80G mem_used=$([ $g -lt 4 ] && echo "$1" || echo 0) util=50 mem_util=20 temp=60 power=250000 ecc=0"
    done
}
gpus 0 > "$FAKE_NVML_STATE"

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
start() { # start HOME SAMPLE
    mkdir -p "$1"
    printf 'sample = %s\n' "$2" > "$1/drover.conf"
    DROVER_HOME=$1 "$DROVER" ls >/dev/null
    cat "$1/daemon.lock"
}
tasks() { # four tasks holding a GPU each, with a process on it
    for g in 0 1 2 3; do
        DROVER_HOME=$1 "$DROVER" submit --gpus 1 -- sh -c "echo \$\$ > $1/t$g.pid; sleep 100000" >/dev/null
    done
    for g in 0 1 2 3; do
        while [ ! -s "$1/t$g.pid" ]; do sleep 0.05; done
    done
    { gpus 9G; for g in 0 1 2 3; do echo "proc $g $(cat "$1/t$g.pid") 9G"; done; } > "$FAKE_NVML_STATE.tmp"
    mv "$FAKE_NVML_STATE.tmp" "$FAKE_NVML_STATE"
}

pid=$(start "$WORK/h1" 1s)
tasks "$WORK/h1"
hz=$(getconf CLK_TCK)
sleep 2
t0=$(cpu_ticks "$pid"); s0=$(date +%s.%N)
sleep "$SECONDS_CPU"
t1=$(cpu_ticks "$pid"); s1=$(date +%s.%N)
awk -v t="$((t1 - t0))" -v hz="$hz" -v a="$s0" -v b="$s1" 'BEGIN {
    printf "daemon CPU while sampling 8 GPUs every second: %.3f%% of a core (%.2f s over %.0f s)\n",
           100 * t / hz / (b - a), t / hz, b - a }'
stop "$WORK/h1"
gpus 0 > "$FAKE_NVML_STATE"

pid=$(start "$WORK/h2" 5ms)
tasks "$WORK/h2"
db=$WORK/h2/drover.db
count() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from gpu_samples').fetchone()[0])" "$db"; }
echo "| samples taken (8 GPUs) | as hours at 1 s | daemon RSS (KB) | database + WAL (KB) |"
echo "|---|---|---|---|"
for target in 3600 14400 28800 57600 86400; do
    want=$((target * 8))
    while [ "$(count)" -lt "$want" ]; do
        sleep 5
        [ $SECONDS -lt "${LIMIT_S:-1500}" ] || break 2
    done
    rss=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status")
    size=$(du -k "$db" "$db-wal" 2>/dev/null | awk '{ s += $1 } END { print s }')
    echo "| $(count) | $((target / 3600)) | $rss | $size |"
done
echo "(raw samples are kept for an hour of wall-clock time; this run took less than an hour, so"
echo " all of them are still there: a real day holds 28,800 raw rows and 11,520 one-minute means)"
