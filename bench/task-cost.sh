#!/usr/bin/env bash
# bench/task-cost.sh: where the CPU of one trivial task goes. An --array of N `true` (two at a
# time: DROVER_FAKE_CPUS=2) through the daemon, with the CPU time of the daemon, of its zygote,
# and of everything the zygote forked (supervisors and their tasks, reaped by it), read from
# /proc before and after; then xargs -P2 over the same N `true`, whose whole CPU (fork, exec and
# exit of each `true`) is the floor a scheduler adds to. ms per task; run it a few times and
# compare builds interleaved (the machine's noise is larger than some differences).
# Usage: [N=1000] [HOMEDIR=/dev/shm] bench/task-cost.sh [BUILD_DIR]
#   HOMEDIR: where DROVER_HOME goes (tmpfs by default: the file system's own cost left out;
#   HOMEDIR=/tmp puts it on the root file system).
set -euo pipefail
BUILD=${1:-build}
D=$(readlink -f "$BUILD/drover")
N=${N:-1000}
export DROVER_HOME=${HOMEDIR:-/dev/shm}/drover-task-cost.$$ DROVER_FAKE_CPUS=2 DROVER_FAKE_GPUS=1x16G
trap '"$D" shutdown >/dev/null 2>&1 || true; rm -rf "$DROVER_HOME"' EXIT
rm -rf "$DROVER_HOME"
"$D" ls >/dev/null
pid=$(cat "$DROVER_HOME/daemon.lock")
zygote=$(pgrep -P "$pid" -f __zygote | head -1)
"$D" wait $("$D" submit --array 0-99 -- true) >/dev/null # warm up
tk=$(getconf CLK_TCK)
# ticks PID FIELDS: the sum of /proc/PID/stat's fields (14,15: own user+system; 16,17: reaped
# children's).
ticks() { awk -v f="$2" '{ n = split(f, a, ","); t = 0; for (i = 1; i <= n; i++) t += $a[i]; print t }' "/proc/$1/stat"; }
d0=$(ticks "$pid" 14,15); z0=$(ticks "$zygote" 14,15); c0=$(ticks "$zygote" 16,17)
t0=$(date +%s.%N)
"$D" wait $("$D" submit --array "0-$((N - 1))" -- true) >/dev/null
t1=$(date +%s.%N)
d1=$(ticks "$pid" 14,15); z1=$(ticks "$zygote" 14,15); c1=$(ticks "$zygote" 16,17)
x0=$(date +%s.%N)
xcpu=$(bash -c "seq $N | xargs -P2 -I{} true; cat /proc/self/stat" |
       awk '{ print $16 + $17 }') # the children's CPU: xargs and every true
x1=$(date +%s.%N)
awk -v tk="$tk" -v n="$N" -v d=$((d1 - d0)) -v z=$((z1 - z0)) -v c=$((c1 - c0)) -v x="$xcpu" \
    -v w="$t0" -v w1="$t1" -v xw="$x0" -v xw1="$x1" 'BEGIN {
    f = 1000 / tk / n
    printf "| drover --array | %.2f s | %.2fx | %.3f | %.3f | %.3f | %.3f |\n", w1 - w,
           (w1 - w) / (xw1 - xw), d * f, z * f, c * f, (d + z + c) * f
    printf "| xargs -P2 | %.2f s | 1.00x | - | - | %.3f | %.3f |\n", xw1 - xw, x * f, x * f }'
