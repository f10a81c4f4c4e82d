#!/usr/bin/env bash
# bench/fair-share.sh: fair share between users on the Alibaba 2023 `default` trace, cut down to
# its first two 8-GPU nodes (the full node list never makes a task wait), with the jobs given to
# 10 synthetic users, user1 submitting half of the work (GPU-time). Prints a Markdown table of
# each user's average wait with fair share off and on, and the light users' improvement.
# Usage: bench/fair-share.sh [BUILD_DIR] [TRACES_DIR]
#   USERS=10 SHARE=0.5 SEED=1 POLICY=drover LIMITS=none
set -euo pipefail
BUILD=${1:-build}
TRACES=${2:-$(cd "$(dirname "$0")/../.." && pwd)/shared/traces}
DROVER=$(readlink -f "$BUILD/drover")
USERS=${USERS:-10} SHARE=${SHARE:-0.5} SEED=${SEED:-1}
POLICY=${POLICY:-drover} LIMITS=${LIMITS:-none}
A=$TRACES/alibaba-gpu-2023
[ -f "$A/openb_pod_list_default.csv" ] || { echo "no Alibaba trace at $A" >&2; exit 1; }

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
{ head -1 "$A/openb_node_list_gpu_node.csv"
  awk -F, 'NR > 1 && $4 == 8 && n++ < 2' "$A/openb_node_list_gpu_node.csv"; } > "$W/nodes.csv"
for fs in off on; do
    "$DROVER" simulate --trace "$A/openb_pod_list_default.csv" --nodes "$W/nodes.csv" \
        --policy "$POLICY" --limits "$LIMITS" --users "$USERS" --heavy-user-share "$SHARE" \
        --seed "$SEED" --fair-share "$fs" --json > "$W/$fs.json"
done
echo "drover simulate --trace $A/openb_pod_list_default.csv --nodes NODES(2x8) --policy $POLICY" \
     "--limits $LIMITS --users $USERS --heavy-user-share $SHARE --seed $SEED --fair-share off|on"
echo
python3 - "$W/off.json" "$W/on.json" <<'PY'
import json, sys
off, on = (json.load(open(p)) for p in sys.argv[1:3])
h = lambda s: s / 3600
total = sum(u["gpu_hours"] for u in off["users"])
print("| user | jobs | GPU-hours | share of work | avg wait off (h) | avg wait on (h) | on / off |")
print("|---|---|---|---|---|---|---|")
for a, b in zip(off["users"], on["users"]):
    print("| %s | %d | %.0f | %.1f%% | %.1f | %.1f | %.2f |" % (
        a["user"], a["jobs"], a["gpu_hours"], 100 * a["gpu_hours"] / total,
        h(a["wait_avg_s"]), h(b["wait_avg_s"]), b["wait_avg_s"] / a["wait_avg_s"]))
def mean_wait(users):  # job-weighted
    return sum(u["wait_avg_s"] * u["jobs"] for u in users) / sum(u["jobs"] for u in users)
light_off, light_on = mean_wait(off["users"][1:]), mean_wait(on["users"][1:])
print()
print("light users (user2..): avg wait %.1f h off, %.1f h on: %.2fx (%.0f%% shorter)" % (
    h(light_off), h(light_on), light_on / light_off, 100 * (1 - light_on / light_off)))
print("heavy user (user1): avg wait %.1f h off, %.1f h on: %.2fx" % (
    h(off["users"][0]["wait_avg_s"]), h(on["users"][0]["wait_avg_s"]),
    on["users"][0]["wait_avg_s"] / off["users"][0]["wait_avg_s"]))
for name, r in (("off", off), ("on", on)):
    print("all jobs, fair share %s: avg wait %.1f h, avg JCT %.1f h, utilisation %.1f%%, "
          "%.0f us a pass" % (name, h(r["wait_s"]["avg"]), h(r["jct_s"]["avg"]),
                              100 * r["utilisation"],
                              1e6 * r["scheduler"]["seconds"] / r["scheduler"]["passes"]))
PY
