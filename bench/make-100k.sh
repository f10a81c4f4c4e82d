#!/usr/bin/env bash
# bench/make-100k.sh ITP_DIR: the 100,000-job trace of bench/sim-speed.sh and bench/policies.sh
# on stdout, in drover's csv format (job_id,submit_time,duration,gpus): every ITP cluster's jobs
# (69,351), then cluster04, cluster07 and cluster08 again under new ids, cut at 100,000.
set -euo pipefail
ITP=$1
{
    for f in "$ITP"/cluster*.csv; do
        awk -F, -v c="$(basename "$f" .csv)" 'NR > 1 { print c "-" $1 "," $2 "," $3 "," $4 }' "$f"
    done
    for c in 04 07 08; do
        awk -F, -v c="again$c" 'NR > 1 { print c "-" $1 "," $2 "," $3 "," $4 }' "$ITP/cluster$c.csv"
    done
} | awk 'NR <= 100000'
