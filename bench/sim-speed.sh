#!/usr/bin/env bash
# bench/sim-speed.sh: how fast `drover simulate` is. The largest ITP cluster (cluster04, 15,802
# jobs) under each policy, at its size (69x8) and on half of it (35x8: ~97% busy, thousands
# waiting); a 100,000-job trace made of every ITP cluster's jobs (69,351), then cluster04,
# cluster07 and cluster08 again under new ids (30,649 more) on one cluster sized to 95% of its
# load and on one sized to 135% of it (more than 10,000 waiting), with the most jobs waiting at
# once (from the schedule); then the cost of one scheduling
# decision as the queue grows (build/bench_decision). Usage: bench/sim-speed.sh [BUILD_DIR]
# [TRACES_DIR]
set -euo pipefail
BUILD=${1:-build}
TRACES=${2:-$(cd "$(dirname "$0")/../.." && pwd)/shared/traces}
DROVER=$(readlink -f "$BUILD/drover")
ITP=$TRACES/itp-2021
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
command -v hyperfine >/dev/null || { echo "needs hyperfine" >&2; exit 1; }

for size in 69x8 35x8; do
    echo "## cluster04 (15,802 jobs) on $size"
    for p in fifo backfill drover; do
        hyperfine -N --warmup 1 --runs 5 --export-markdown "$WORK/h.md" \
            "$DROVER simulate --trace $ITP/cluster04.csv --cluster $size --policy $p" >/dev/null
        tail -n 1 "$WORK/h.md"
    done
    echo
done

# The most jobs waiting at once in a schedule (--schedule-out CSV: job_id,submit,start,...).
peak_waiting() {
    awk -F, 'NR > 1 && $3 > $2 { print $2, 1; print $3, -1 }' "$1" | sort -k1,1g -k2,2n |
        awk '{ n += $2; if (n > max) max = n } END { print max + 0 }'
}

# 100,000 jobs: drover's csv format (job_id,submit_time,duration,gpus).
"$(dirname "$0")/make-100k.sh" "$ITP" > "$WORK/100k.csv"
# Sized to 95% of the trace's load, and to 135% of it: overloaded, the cluster ~97% busy and
# more than 10,000 jobs waiting at once (the deep queue a busy machine has).
for pct in 95 135; do
    nodes=$(awk -F, -v f="$pct" '
        { g += $3 * $4; if (NR == 1 || $2 < lo) lo = $2; if ($2 + $3 > hi) hi = $2 + $3 }
        END { n = g / (hi - lo) / (f / 100) / 8; printf "%d", (n == int(n)) ? n : int(n) + 1 }
        ' "$WORK/100k.csv")
    echo "## $(wc -l < "$WORK/100k.csv") jobs on ${nodes}x8 (${pct}% of the load)"
    for p in fifo backfill drover; do
        hyperfine -N --runs 3 --export-markdown "$WORK/h.md" \
            "$DROVER simulate --trace $WORK/100k.csv --cluster ${nodes}x8 --policy $p" >/dev/null
        tail -n 1 "$WORK/h.md"
    done
    /usr/bin/time -f "max RSS %M KB" "$DROVER" simulate --trace "$WORK/100k.csv" \
        --cluster "${nodes}x8" --policy drover --schedule-out "$WORK/100k-out.csv" 2>&1 |
        grep -E "^(jobs|scheduler|utilisation|max RSS)"
    echo "most jobs waiting at once (drover): $(peak_waiting "$WORK/100k-out.csv")"
    echo
done
echo
echo "## one scheduling decision (core/ alone)"
"$BUILD/bench_decision"
