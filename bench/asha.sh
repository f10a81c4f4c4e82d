#!/usr/bin/env bash
# bench/asha.sh: ASHA against the full grid on examples/sweep-asha.yaml (27 configurations of the
# numpy MLP, 9 epochs each, 2 at a time): trial-epochs actually run (epochs each trial completed,
# counted from its metrics file), wall time, and the best val_accuracy each found.
# Usage: bench/asha.sh [BUILD_DIR]    (run from anywhere; needs Debian's python3-numpy)
#   EPOCH_SLEEP (default 0.2): seconds added to each epoch, so that a trial lasts long enough for
#   early stopping to act (an epoch of this small model takes milliseconds).
set -euo pipefail
BUILD=$(readlink -f "${1:-build}")
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
EPOCH_SLEEP=${EPOCH_SLEEP:-0.2}
WORK=$(mktemp -d)
trap 'for h in "$WORK"/h*; do DROVER_HOME=$h DROVER_NO_AUTOSTART=1 "$BUILD/drover" shutdown >/dev/null 2>&1 || true; done; rm -rf "$WORK"' EXIT
# The grid: the same template without its early_stopping block.
python3 - examples/sweep-asha.yaml "$WORK/grid.yaml" <<'PY'
import sys
out, skip = [], False
for line in open(sys.argv[1]):
    if line.startswith("  early_stopping:"):
        skip = True
        continue
    if skip and (line.startswith("    ") or not line.strip()):
        continue
    skip = False
    out.append(line)
open(sys.argv[2], "w").write("".join(out).replace("name: spirals-asha", "name: spirals-grid"))
PY

run() { # run LABEL TEMPLATE NAME
    local home=$WORK/h$1
    mkdir -p "$home"
    echo "sample = 200ms" > "$home/drover.conf"
    export DROVER_HOME=$home
    local t0 t1
    t0=$(date +%s.%N)
    "$BUILD/drover" exp run "$2" --set "hyperparameters.epoch_sleep=$EPOCH_SLEEP" >/dev/null
    until [ "$("$BUILD/drover" exp show "$3" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = done ]; do
        sleep 0.5
    done
    t1=$(date +%s.%N)
    "$BUILD/drover" exp show "$3" --json | python3 -c '
import json, sys, os
d = json.load(sys.stdin)
home, label, wall = sys.argv[1], sys.argv[2], float(sys.argv[3])
epochs, best = 0, float("nan")
for t in d["trials"]:
    path = os.path.join(home, "metrics", "%d.jsonl" % t["task"])
    for line in open(path) if os.path.exists(path) else []:
        epochs += 1
        v = json.loads(line).get("val_accuracy")
        if v is not None and not (best >= v):
            best = v
stopped = sum(t["stopped_early"] for t in d["trials"])
print("%s %d %.1f %.4f %d" % (label, epochs, wall, best, stopped))' "$home" "$1" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    "$BUILD/drover" shutdown >/dev/null
}

grid=$(run grid "$WORK/grid.yaml" spirals-grid)
asha=$(run asha examples/sweep-asha.yaml spirals-asha)
echo "| run | trial-epochs | wall s | best val_accuracy | trials stopped early |"
echo "|---|---|---|---|---|"
for r in "$grid" "$asha"; do
    set -- $r
    echo "| $1 | $2 | $3 | $4 | $5 |"
done
set -- $grid; ge=$2; gb=$4
set -- $asha
awk -v ge="$ge" -v gb="$gb" -v ae="$2" -v ab="$4" 'BEGIN {
    printf "\nASHA: %.0f%% of the grid'"'"'s trial-epochs; best %.4f against %.4f (%.2f%% below)\n",
           100 * ae / ge, ab, gb, 100 * (gb - ab) / gb }'
