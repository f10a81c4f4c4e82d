#!/usr/bin/env bash
# bench/robustness.sh: what abusive clients cost the daemon (issue 9). For each attack, on a
# fresh daemon with /metrics on: the growth of its peak resident memory (VmHWM less the RSS at
# start), its CPU while the attack holds (utime+stime over WINDOW seconds), what daemon.log
# gained, and the latency of `drover ls` meanwhile (median and worst of LS_RUNS runs). The
# attacks are tests/e2e/abuse.py's:
#   wait+1GiB       a `wait`, then 1 GiB on the same connection
#   partial         100 connections each holding all but one byte of a 4 MiB frame
#   headers         a GET /metrics with 300 MiB of headers
#   metrics-1100    1,100 half-open connections to /metrics, daemon under `ulimit -n 1024`
#   metrics-1000    1,000 half-open connections to /metrics, the usual limit
#   socket-250      250 idle connections to the socket (LIMIT_CONNS_PER_UID is 256)
#   socket-emfile   300 connections to the socket, made again 100 ms after each close, daemon
#                   under `ulimit -n 64`: it is out of descriptors the whole time
# Usage: bench/robustness.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
DROVER=$(readlink -f "$BUILD/drover")
ABUSE="python3 $(dirname "$(readlink -f "$0")")/../tests/e2e/abuse.py"
WINDOW=${WINDOW:-5}
LS_RUNS=${LS_RUNS:-20}
WORK=$(mktemp -d)
export DROVER_FAKE_GPUS=2x16G
unset DROVER_NO_AUTOSTART
ATTACKER=
HOMES=()
finish() {
    [ -z "$ATTACKER" ] || kill "$ATTACKER" 2>/dev/null || true
    for h in "${HOMES[@]}"; do DROVER_HOME=$h DROVER_NO_AUTOSTART=1 "$DROVER" shutdown >/dev/null 2>&1 || true; done
    rm -rf "$WORK"
}
trap finish EXIT

kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_file() { for _ in $(seq 1200); do [ -s "$1" ] && return 0; sleep 0.05; done; echo "no $1" >&2; exit 1; }

# start NAME NOFILE: a daemon in $WORK/NAME with /metrics on $PORT, under `ulimit -n NOFILE`.
start() {
    H=$WORK/$1
    HOMES+=("$H")
    PORT=$(port)
    mkdir -p "$H"
    echo "metrics = 127.0.0.1:$PORT" > "$H/drover.conf"
    (ulimit -n "$2" && DROVER_HOME=$H "$DROVER" ls >/dev/null)
    PID=$(cat "$H/daemon.lock")
    BASE=$(kib "$PID" VmRSS)
    LOG0=$(stat -c %s "$H/daemon.log")
}

# ls_latency: "median/worst ms (failures)" of LS_RUNS runs of `drover ls`.
ls_latency() {
    local times=() fails=0 t0 t1
    for _ in $(seq "$LS_RUNS"); do
        t0=$(date +%s%N)
        DROVER_HOME=$H DROVER_NO_AUTOSTART=1 timeout 10 "$DROVER" ls >/dev/null 2>&1 || fails=$((fails + 1))
        t1=$(date +%s%N)
        times+=($(((t1 - t0) / 1000000)))
    done
    printf '%s\n' "${times[@]}" | sort -n |
        awk -v f="$fails" '{a[NR]=$1} END {printf "%d/%d ms", a[int((NR+1)/2)], a[NR]; if (f) printf " (%d failed)", f}'
}

# report NAME: one line for the attack now running against $PID.
report() {
    local hz c0 c1 s0 s1 lat
    hz=$(getconf CLK_TCK)
    c0=$(cpu_ticks "$PID"); s0=$(date +%s%N)
    sleep "$WINDOW"   # the measurement window
    c1=$(cpu_ticks "$PID"); s1=$(date +%s%N)
    lat=$(ls_latency)
    printf '%-14s  RSS at start %4d MiB  peak +%4d MiB  CPU %5.1f%%  log +%6d B  ls %s\n' "$1" \
        $((BASE / 1024)) $((($(kib "$PID" VmHWM) - BASE) / 1024)) \
        "$(awk -v t=$((c1 - c0)) -v hz="$hz" -v ns=$((s1 - s0)) 'BEGIN {print 100 * t / hz / (ns / 1e9)}')" \
        $(($(stat -c %s "$H/daemon.log") - LOG0)) "$lat"
}

# oneshot CMD...: runs an attack that ends by itself; prints how long it took and the daemon's
# CPU time meanwhile.
oneshot() {
    local c0 c1 t0 t1
    c0=$(cpu_ticks "$PID"); t0=$(date +%s%N)
    "$@"
    c1=$(cpu_ticks "$PID"); t1=$(date +%s%N)
    ONESHOT=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v ns=$((t1 - t0)) \
        'BEGIN {printf "the attack took %.2f s, the daemon %.2f s of CPU", ns / 1e9, t / hz}')
}

stop_attack() {
    kill "$ATTACKER" 2>/dev/null || true
    wait "$ATTACKER" 2>/dev/null || true
    ATTACKER=
    DROVER_HOME=$H DROVER_NO_AUTOSTART=1 "$DROVER" shutdown >/dev/null 2>&1 || true
}

echo "drover $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs; CPU over ${WINDOW} s, ls median/worst of ${LS_RUNS}"

start idle 4096
report "idle"
stop_attack

start wait 4096
held=$(DROVER_HOME=$H "$DROVER" submit --hold -- true)
oneshot $ABUSE wait-flood "$H/drover.sock" "$held" $((1 << 30)) > "$WORK/wait.json"
report "wait+1GiB"
echo "                $ONESHOT; refused after $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"] >> 20)' "$WORK/wait.json") MiB sent"
stop_attack

start partial 4096
$ABUSE partial "$H/drover.sock" 100 --status "$WORK/partial.ready" > "$WORK/partial.json" & ATTACKER=$!
until_file "$WORK/partial.ready"
report "partial"
stop_attack
echo "                $(cat "$WORK/partial.json")"

start headers 4096
oneshot $ABUSE headers "$PORT" $((300 << 20)) > "$WORK/headers.json"
report "headers"
echo "                $ONESHOT; $(cat "$WORK/headers.json")"
stop_attack

start m1100 1024
$ABUSE hold-http "$PORT" 1100 --status "$WORK/m1100.ready" > "$WORK/m1100.json" & ATTACKER=$!
until_file "$WORK/m1100.ready"
report "metrics-1100"
stop_attack

start m1000 4096
$ABUSE hold-http "$PORT" 1000 --status "$WORK/m1000.ready" > "$WORK/m1000.json" & ATTACKER=$!
until_file "$WORK/m1000.ready"
report "metrics-1000"
stop_attack

start s250 4096
$ABUSE hold-sock "$H/drover.sock" 250 --status "$WORK/s250.ready" > "$WORK/s250.json" & ATTACKER=$!
until_file "$WORK/s250.ready"
report "socket-250"
stop_attack

start emfile 64
$ABUSE hold-sock "$H/drover.sock" 300 --reconnect 100 --status "$WORK/emfile.ready" > "$WORK/emfile.json" & ATTACKER=$!
until_file "$WORK/emfile.ready"
report "socket-emfile"
stop_attack
echo "                $(cat "$WORK/emfile.json")"
