#!/usr/bin/env bash
# bench/preempt-latency.sh: how long a short job waits for a GPU that a long preemptible job
# holds, under policy = las (docs/SCHEDULING.md, "Preemption in the daemon"). One fake GPU; a
# long task that traps SIGTERM and exits after EXIT_MS (what saving a checkpoint takes); a short
# one-GPU job submitted once the long one is preemptible. Per round: submit → the long attempt's
# end (the preemption: the signal, the task's own EXIT_MS, its exit) → the short job's start,
# from the attempts' times in the store. Prints each round and the median of each part.
# Usage: [ROUNDS=10] [EXIT_MS=0] bench/preempt-latency.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
D=$(readlink -f "$BUILD/drover")
ROUNDS=${ROUNDS:-10}
EXIT_MS=${EXIT_MS:-0}
export DROVER_HOME=${HOMEDIR:-/dev/shm}/drover-preempt-latency.$$ DROVER_FAKE_GPUS=1x16G
trap '"$D" shutdown >/dev/null 2>&1 || true; rm -rf "$DROVER_HOME"' EXIT
rm -rf "$DROVER_HOME"
mkdir -p "$DROVER_HOME"
cat > "$DROVER_HOME/drover.conf" <<'EOF'
policy = las
las-thresholds = 0.0001
las-min-run = 0.5s
las-starve = 0
las-starve-total = off
las-protect-wait = off
las-mrl = 0
EOF
exit_s=$(awk -v ms="$EXIT_MS" 'BEGIN { printf "%.3f", ms / 1000 }')
field() { "$D" show "$1" --json | python3 -c "import json,sys; t=json.load(sys.stdin); print($2)"; }
rows=()
for r in $(seq "$ROUNDS"); do
    long=$("$D" submit --gpus 1 --preemptible=30s -- sh -c \
        "trap 'sleep $exit_s; exit 143' TERM; echo up; while :; do sleep 0.01; done")
    until grep -q up "$DROVER_HOME/runs/$long/1/stdout" 2>/dev/null; do sleep 0.01; done
    sleep 0.6 # past the minimum run (0.5 s), so the short job may preempt at once
    t0=$(date +%s%3N)
    short=$("$D" submit --gpus 1 -- true)
    "$D" wait "$short" >/dev/null
    end=$(field "$long" 't["attempt_list"][0]["end_time"]')
    start=$(field "$short" 't["attempt_list"][0]["start_time"]')
    rows+=("$((end - t0)) $((start - end)) $((start - t0))")
    printf 'round %2d: submit -> preempted %4d ms, -> short started %4d ms more, %4d ms in all\n' \
        "$r" "$((end - t0))" "$((start - end))" "$((start - t0))"
    "$D" cancel "$long" >/dev/null
    "$D" wait "$long" >/dev/null 2>&1 || true
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
r = [list(map(int, l.split())) for l in sys.stdin if l.strip()]
m = [statistics.median(c) for c in zip(*r)]
print("median: submit -> preempted %d ms, -> short started %d ms, in all %d ms (%d rounds)" % (*m, len(r)))'
