#!/usr/bin/env bash
# drover simulate --policy las on hand-made traces whose schedules are worked out by hand (issue
# 14): a job preempted when it reaches a queue above a waiting one, the work it loses added
# (--preempt-cost), one schedule row per run segment, the starvation guard (--las-starve), the
# preemption figures (text and --json), and the flags' bad input. Needs no daemon, no traces.
. "$(dirname "$0")/lib.sh"

W=$TMP/simlas
mkdir -p "$W"

sched() { # sched TRACE [OPTIONS...]: the schedule rows, without the header
    local trace=$1
    shift
    "$DROVER" simulate --trace "$W/$trace" --policy las --schedule-out "$W/out.csv" "$@" \
        >"$W/out.txt" || fail "simulate $trace $* failed"
    tail -n +2 "$W/out.csv"
}

# a takes both GPUs; it reaches 1 GPU-hour (queue 1) at 1800 s, when b (queue 0) has waited
# since 600: a is preempted (it ran more than the 10-minute minimum), b runs; a, needing both
# GPUs, resumes when b ends, its remaining work grown by the 60 s cost; c (queue 0) preempts it
# again at 4000 (a ran 1000 s since it resumed).
# a: 0-1800 (1800 done), 3000-4000 (1000 - 60 = 940 more), 4100 + 20000 - 2740 + 60 = 21420.
cat > "$W/a.csv" <<'CSV'
job_id,submission_time,duration,num_gpu
a,0,20000,2
b,600,1200,1
c,4000,100,1
CSV
t "a job preempted twice, each time losing the 60 s cost, one row per segment"
expect_eq "$(sched a.csv --cluster 1x2)" 'a,0,0,1800,0,0;1
a,0,3000,4000,0,0;1
a,0,4100,21420,0,0;1
b,600,1800,3000,0,0
c,4000,4000,4100,0,0' "las schedule"
grep -q '^preemptions  2: 0.67 per job on average, median 0, max 2$' "$W/out.txt" ||
    fail "preemption line: $(grep preempt "$W/out.txt")"

t "--preempt-cost 0 and 5m"
expect_eq "$(sched a.csv --cluster 1x2 --preempt-cost 0 | head -3 | tail -1)" 'a,0,4100,21300,0,0;1' "cost 0"
expect_eq "$(sched a.csv --cluster 1x2 --preempt-cost 5m | head -3 | tail -1)" 'a,0,4100,21900,0,0;1' "cost 300 s"

t "--json reports the preemptions per job"
"$DROVER" simulate --trace "$W/a.csv" --cluster 1x2 --policy las --json > "$W/out.json" ||
    fail "simulate --json failed"
expect_eq "$(python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))["preemptions"]
print(p["total"], round(p["mean"], 3), p["median"], p["max"])' "$W/out.json")" "2 0.667 0.0 2" "json preemptions"
"$DROVER" simulate --trace "$W/a.csv" --cluster 1x2 --policy fifo --json > "$W/fifo.json" ||
    fail "simulate fifo failed"
expect_eq "$(python3 -c 'import json,sys; print("preemptions" in json.load(open(sys.argv[1])))' "$W/fifo.json")" \
    False "no preemptions key without las"

# L is preempted by X at 4000 (L ran 4000 GPU-seconds: queue 1). X reaches queue 1 at 7600 (no
# preemption: the same queue as L) and queue 2 at 40000. The guard promotes L after 8 x its last
# run (4000 s) of waiting: at 36000, before X reaches queue 2. Without it (--las-starve 0) L
# waits for that, until 40000.
cat > "$W/b.csv" <<'CSV'
job_id,submission_time,duration,num_gpu
L,0,10000,1
X,4000,50000,1
CSV
t "the starvation guard promotes a job after K x its last run"
expect_eq "$(sched b.csv --cluster 1x1)" 'L,0,0,4000,0,0
L,0,36000,42060,0,0
X,4000,4000,36000,0,0
X,4000,42060,60120,0,0' "guard K = 8"
expect_eq "$(sched b.csv --cluster 1x1 --las-starve 0)" 'L,0,0,4000,0,0
L,0,40000,46060,0,0
X,4000,4000,40000,0,0
X,4000,46060,60120,0,0' "no guard"
expect_eq "$(sched b.csv --cluster 1x1 --las-starve 4 | sed -n 2p)" 'L,0,20000,26060,0,0' "guard K = 4"

t "--las-thresholds and --las-min-run"
# One threshold at 2 GPU-hours: a reaches it at 3600, b waits: a is preempted then.
expect_eq "$(sched a.csv --cluster 1x2 --las-thresholds 2 | head -1)" 'a,0,0,3600,0,0;1' "threshold 2 GPU-hours"
# c arrives 1000 s after a resumed: a 20-minute minimum run protects a until 4200.
expect_eq "$(sched a.csv --cluster 1x2 --las-min-run 20m | sed -n 2p)" 'a,0,3000,4200,0,0;1' "minimum run"

t "bad input: one line, exit 2"
bad() { expect_exit 2 "$DROVER" simulate --trace "$W/a.csv" --cluster 1x2 "$@"; }
bad --policy lass
bad --policy fifo --preempt-cost 60s
[[ "$ERR" == *"need --policy las"* ]] || fail "message: $ERR"
bad --policy las --preempt-cost soon
bad --policy las --las-thresholds 10,1
[[ "$ERR" == *"ascending"* ]] || fail "message: $ERR"
bad --policy las --las-thresholds 1,x
bad --policy las --las-starve -1
bad --policy las --las-min-run forever
[ "$(wc -l <<<"$ERR")" -eq 1 ] || fail "more than one line: $ERR"

done_testing
