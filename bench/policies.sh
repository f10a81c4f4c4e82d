#!/usr/bin/env bash
# bench/policies.sh: every policy of `drover simulate` on the ten ITP clusters (each sized to
# about 90% of its offered load, whole 8-GPU nodes) and on the Alibaba traces with their node
# list; a Markdown table of average JCT, p99 JCT, p99 wait, max wait and utilisation, with each
# policy's ratio to fifo, preemptions per job (las: mean/median/max) and the simulation's time.
# Usage: bench/policies.sh [BUILD_DIR] [TRACES_DIR]
#   LIMITS=none|exact|x2 (default none)    POLICIES="fifo backfill drover" (add las)
#   PREEMPT_COST=60s (las's --preempt-cost)   LAS_ARGS="" (more flags for las, e.g.
#   "--las-thresholds 1,10 --las-starve 8")   ITP_ONLY=1: the ten ITP clusters alone
#   SIZE=full (default) | half: overloaded instead — each ITP cluster on half its nodes (rounded
#   up), and the 100,000-job trace of bench/sim-speed.sh on 176x8 (135% of its load); no Alibaba.
set -euo pipefail
BUILD=${1:-build}
TRACES=${2:-$(cd "$(dirname "$0")/../.." && pwd)/shared/traces}
DROVER=$(readlink -f "$BUILD/drover")
LIMITS=${LIMITS:-none}
POLICIES=${POLICIES:-fifo backfill drover}
SIZE=${SIZE:-full}
PREEMPT_COST=${PREEMPT_COST:-60s}
LAS_ARGS=${LAS_ARGS:-}
[ -d "$TRACES/itp-2021" ] || { echo "no traces at $TRACES" >&2; exit 1; }
case $SIZE in full|half) ;; *) echo "SIZE is full or half" >&2; exit 2 ;; esac

# Offered load (average busy GPUs) per ITP cluster, from the traces README.
declare -A LOAD=([01]=27.7 [02]=86.0 [03]=139.5 [04]=490.8 [05]=10.0 [06]=86.3 [07]=255.1
                 [08]=65.8 [09]=30.9 [10]=5.0)

# One simulate --json run, reduced to "jct wait_p99 wait_max util running running_contended
# jct_p99 preempt_mean preempt_median preempt_max seconds" (seconds: the whole run's CPU time).
measure() {
    /usr/bin/time -f "%U %S" -o "$WORK/time" "$DROVER" simulate "$@" --json 2>/dev/null > "$WORK/out.json"
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
u, s = open(sys.argv[2]).read().split()[-2:]
p = d.get("preemptions") or {"mean": "-", "median": "-", "max": "-"}
print(d["jct_s"]["avg"], d["wait_s"]["p99"], d["wait_s"]["max"], d["utilisation"],
      d["avg_running"], d["avg_running_contended"], d["jct_s"]["p99"], p["mean"], p["median"],
      p["max"], float(u) + float(s))' "$WORK/out.json" "$WORK/time"
}

run() { # run KEY LABEL ARGS...: one row per policy
    local key=$1 name=$2; shift 2
    local fifo_jct="" fifo_wait=""
    for p in $POLICIES; do
        local jct wait99 waitmax util running contended jct99 pmean pmed pmax secs extra=()
        [ "$p" = las ] && extra=(--preempt-cost "$PREEMPT_COST" $LAS_ARGS)
        read -r jct wait99 waitmax util running contended jct99 pmean pmed pmax secs < <(measure "$@" --policy "$p" --limits "$LIMITS" "${extra[@]}")
        if [ "$p" = fifo ]; then fifo_jct=$jct; fifo_wait=$waitmax; fi
        awk -v n="$name" -v p="$p" -v jct="$jct" -v w="$wait99" -v wm="$waitmax" -v u="$util" \
            -v fj="$fifo_jct" -v fw="$fifo_wait" -v j99="$jct99" -v pm="$pmean" -v pd="$pmed" \
            -v px="$pmax" -v t="$secs" 'BEGIN {
            rj = fj > 0 ? sprintf("%.2f", jct / fj) : "-"
            rw = fw > 0 ? sprintf("%.2f", wm / fw) : "-"
            pre = pm == "-" ? "-" : sprintf("%.2f / %g / %d", pm, pd, px)
            printf "| %s | %s | %.2f | %s | %.2f | %.2f | %.2f | %s | %.1f%% | %s | %.2f |\n",
                   n, p, jct / 3600, rj, j99 / 3600, w / 3600, wm / 3600, rw, 100 * u, pre, t }'
        echo "$key $p $jct $waitmax $name" >> "$SUMMARY"
    done
}

SUMMARY=$(mktemp)
WORK=$(mktemp -d)
trap 'rm -rf "$SUMMARY" "$WORK"' EXIT
echo "limits: $LIMITS, size: $SIZE$(case " $POLICIES " in *" las "*) echo ", las: --preempt-cost $PREEMPT_COST $LAS_ARGS" ;; esac)"
echo
echo "| trace | policy | avg JCT h | JCT / fifo | p99 JCT h | p99 wait h | max wait h | max wait / fifo | GPU util | preemptions / job (mean / median / max) | sim s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in 01 02 03 04 05 06 07 08 09 10; do
    nodes=$(awk -v l="${LOAD[$c]}" 'BEGIN { n = l / 0.9 / 8; printf "%d", (n == int(n)) ? n : int(n) + 1 }')
    [ "$SIZE" = half ] && nodes=$(( (nodes + 1) / 2 ))
    run itp "itp cluster$c (${nodes}x8)" --trace "$TRACES/itp-2021/cluster$c.csv" --cluster "${nodes}x8"
done
# Summed average JCT per policy over the ten ITP clusters (issue 3's target: drover's <= 0.7x
# fifo's at full size), and drover's against backfill's on each run (issue 13, part 3: on
# overloaded clusters drover no slower than EASY backfill).
vs_backfill() {
    awk '$1 == "itp" { jct[$2] += $3 } END {
        for (p in jct) printf "- sum of average JCT over the ten ITP clusters, %s: %.1f h (%.3f x fifo)\n",
            p, jct[p] / 3600, jct[p] / jct["fifo"] }' "$SUMMARY" | sort
    # Each policy's worst ITP max wait against fifo's (issue 14: las <= 3x on every cluster).
    awk '$1 == "itp" && $2 == "fifo" { f[$6] = $4 } $1 == "itp" { w[$2 " " $6] = $4; pol[$2] = 1 }
        END { for (p in pol) { worst = 0
                for (k in w) { split(k, a, " "); if (a[1] != p) continue
                    c = substr(k, length(p) + 2); if (f[c] > 0 && w[k] / f[c] > worst) worst = w[k] / f[c] }
                printf "- worst ITP max wait / fifo, %s: %.2f x\n", p, worst } }' "$SUMMARY" | sort
    awk 'NF > 4 { name = $0; for (i = 1; i <= 4; i++) sub(/^[^ ]+ /, "", name) }
        NF > 4 && $2 == "backfill" { b[name] = $3 }
        NF > 4 && $2 == "drover" { d[name] = $3; order[n++] = name }
        END {
            worse = 0; m = 0
            for (i = 0; i < n; i++) {
                k = order[i]
                if (!(k in b)) continue
                m++
                if (sprintf("%.2f", d[k] / 3600) + 0 > sprintf("%.2f", b[k] / 3600) + 0) {
                    worse++
                    printf "- drover slower than backfill on %s: %.2f h vs %.2f h\n", k, d[k] / 3600, b[k] / 3600
                }
            }
            if (m > 0) printf "- drover no slower than backfill on %d of %d runs\n", m - worse, m }' "$SUMMARY"
}
if [ "$SIZE" = half ]; then
    # The 100,000-job trace of bench/sim-speed.sh (every ITP cluster's jobs, then cluster04, 07
    # and 08 again under new ids), on 176x8: 135% of its load, more than 10,000 jobs waiting.
    ITP=$TRACES/itp-2021
    "$(dirname "$0")/make-100k.sh" "$ITP" > "$WORK/100k.csv"
    run big "100k ITP jobs (176x8, 135% of load)" --trace "$WORK/100k.csv" --cluster 176x8
    echo
    vs_backfill
    exit 0
fi
if [ "${ITP_ONLY:-0}" = 1 ]; then
    echo
    vs_backfill
    exit 0
fi
A=$TRACES/alibaba-gpu-2023
# The full node list (1,213 nodes) never makes a task wait; cut down to its first two 8-GPU nodes
# (16 GPUs; gpushare100 peaks at 25.6 GPUs' worth of fractions), they do.
CUT=$WORK/cut.csv
{ head -1 "$A/openb_node_list_gpu_node.csv"; awk -F, 'NR > 1 && $4 == 8 && n++ < 2' "$A/openb_node_list_gpu_node.csv"; } > "$CUT"
for t in default gpushare100; do
    run alibaba "alibaba $t (full node list)" --trace "$A/openb_pod_list_$t.csv" --nodes "$A/openb_node_list_gpu_node.csv"
    run alibaba "alibaba $t (two 8-GPU nodes)" --trace "$A/openb_pod_list_$t.csv" --nodes "$CUT"
done
echo
# Sums over the ten ITP clusters: the target is drover's summed average JCT <= 0.7x fifo's.
vs_backfill

# Packing by fraction against whole GPUs, on gpushare100 with the cut-down node list, drover's policy.
echo
echo "| gpushare100 on two 8-GPU nodes | avg JCT h | jobs running at once while jobs wait | over the makespan |"
echo "|---|---|---|---|"
for mode in packed whole; do
    flag=; [ $mode = whole ] && flag=--whole-gpus
    read -r jct _ _ _ running contended < <(measure --trace "$A/openb_pod_list_gpushare100.csv" --nodes "$CUT" $flag)
    echo "$mode $contended" >> "$SUMMARY"
    awk -v m="$mode" -v j="$jct" -v r="$running" -v c="$contended" 'BEGIN {
        printf "| %s | %.2f | %.1f | %.1f |\n", m == "packed" ? "fractions packed (drover)" : "whole GPUs", j / 3600, c, r }'
done
awk '$1 == "packed" { p = $2 } $1 == "whole" { w = $2 } END {
    printf "\n- packing runs %.2f x as many jobs at once while jobs wait\n", p / w }' "$SUMMARY"
