#!/usr/bin/env bash
# bench/same-schedules.sh: whether two builds of drover schedule alike — `drover simulate
# --schedule-out` byte for byte, with each build's time beside it — on the ten ITP clusters at
# their size (whole 8-GPU nodes, about 90% of the offered load, as bench/policies.sh sizes them)
# and at half that, under each policy. For a change meant to make the scheduler faster without
# changing what it decides: build the reference from the commit before it, e.g.
#   git archive HEAD | tar -x -C /tmp/ref && (cd /tmp/ref && make)
# Usage: bench/same-schedules.sh REF_BUILD_DIR NEW_BUILD_DIR [TRACES_DIR]
#   POLICIES="fifo backfill drover"   LIMITS="none" (e.g. "none exact x2")   CLUSTERS="01 ... 10"
# Prints a Markdown table; exits 1 if any schedule differs.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
REF=$(readlink -f "$1/drover")
NEW=$(readlink -f "$2/drover")
TRACES=${3:-$(cd "$(dirname "$0")/../.." && pwd)/shared/traces}
POLICIES=${POLICIES:-fifo backfill drover}
LIMITS=${LIMITS:-none}
CLUSTERS=${CLUSTERS:-01 02 03 04 05 06 07 08 09 10}
[ -d "$TRACES/itp-2021" ] || { echo "no traces at $TRACES" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Offered load (average busy GPUs) per ITP cluster, from the traces README (as bench/policies.sh).
declare -A LOAD=([01]=27.7 [02]=86.0 [03]=139.5 [04]=490.8 [05]=10.0 [06]=86.3 [07]=255.1
                 [08]=65.8 [09]=30.9 [10]=5.0)

# Runs one build; prints its CPU seconds (user + sys).
simulate() { # simulate DROVER OUT ARGS...
    local drover=$1 out=$2; shift 2
    /usr/bin/time -f "%U %S" -o "$WORK/time" "$drover" simulate "$@" --schedule-out "$out" \
        >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }
    awk '{ printf "%.2f", $1 + $2 }' "$WORK/time"
}

differ=0
echo "| trace | nodes | policy | limits | schedule | reference s | new s |"
echo "|---|---|---|---|---|---|---|"
for c in $CLUSTERS; do
    full=$(awk -v l="${LOAD[$c]}" \
        'BEGIN { n = l / 0.9 / 8; printf "%d", (n == int(n)) ? n : int(n) + 1 }')
    half=$(( (full + 1) / 2 ))
    for nodes in "$full" $([ "$half" -lt "$full" ] && echo "$half"); do
        for limits in $LIMITS; do
            for p in $POLICIES; do
                args=(--trace "$TRACES/itp-2021/cluster$c.csv" --cluster "${nodes}x8" --policy "$p"
                      --limits "$limits")
                tr=$(simulate "$REF" "$WORK/ref.csv" "${args[@]}")
                tn=$(simulate "$NEW" "$WORK/new.csv" "${args[@]}")
                if cmp -s "$WORK/ref.csv" "$WORK/new.csv"; then
                    verdict="same ($(($(wc -l < "$WORK/new.csv") - 1)) jobs)"
                else
                    differ=1
                    line=$( (cmp "$WORK/ref.csv" "$WORK/new.csv" || true) | awk '{ print $NF }')
                    verdict="DIFFERS from line $line"
                fi
                echo "| cluster$c | ${nodes}x8 | $p | $limits | $verdict | $tr | $tn |"
            done
        done
    done
done
exit "$differ"
