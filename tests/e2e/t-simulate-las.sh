#!/usr/bin/env bash
# drover simulate --policy las on hand-made traces whose schedules are worked out by hand (issue
# 14): a job preempted when it reaches a queue above a waiting one, the work it loses added
# (--preempt-cost), one schedule row per run segment, the starvation guards (--las-starve,
# --las-protect-wait and --las-protect-ratio), the history's rule (--las-mrl), the preemption
# figures (text and --json), and the flags' bad input. Needs no daemon, no traces.
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

# L is preempted by X at 4000 (L ran 4000 GPU-seconds: queue 1). X reaches queue 2 at 40000:
# L, in queue 1, preempts it then (the defaults: no K guard; L's 10 hours of waiting are under
# the 12 that would protect its next attempt, and the 100 that would promote it). The first
# slice's guard (--las-starve 8) promotes L after 8 x its last run (4000 s) of waiting: at 36000,
# before X reaches queue 2.
cat > "$W/b.csv" <<'CSV'
job_id,submission_time,duration,num_gpu
L,0,10000,1
X,4000,50000,1
CSV
t "the starvation guard promotes a job after K x its last run"
expect_eq "$(sched b.csv --cluster 1x1)" 'L,0,0,4000,0,0
L,0,40000,46060,0,0
X,4000,4000,40000,0,0
X,4000,46060,60120,0,0' "defaults"
expect_eq "$(sched b.csv --cluster 1x1 --las-starve 8)" 'L,0,0,4000,0,0
L,0,36000,42060,0,0
X,4000,4000,36000,0,0
X,4000,42060,60120,0,0' "guard K = 8"
expect_eq "$(sched b.csv --cluster 1x1 --las-starve 4 | sed -n 2p)" 'L,0,20000,26060,0,0' "guard K = 4"

# As b, L twice as long, and Y (100 s, queue 0) arrives at 41000, 1000 s into L's second
# attempt (past the 10-minute minimum). L has waited 36000 s in all: under the
# default 12 hours, so Y preempts it; with --las-protect-wait 5h L keeps its GPU for 36000 s
# (--las-protect-ratio 1: as long as it waited), longer than it still runs, and Y waits for its
# end (56060 = 40000 + 16000 left + the 60 s cost); with the ratio 0.02, for 720 s only, and Y
# preempts it again.
cat > "$W/c.csv" <<'CSV'
job_id,submission_time,duration,num_gpu
L,0,20000,1
X,4000,50000,1
Y,41000,100,1
CSV
t "--las-protect-wait and --las-protect-ratio"
expect_eq "$(sched c.csv --cluster 1x1 | grep '^[LY]')" 'L,0,0,4000,0,0
L,0,40000,41000,0,0
L,0,41100,56220,0,0
Y,41000,41000,41100,0,0' "defaults: L preempted by Y"
expect_eq "$(sched c.csv --cluster 1x1 --las-protect-wait 5h | grep '^[LY]')" 'L,0,0,4000,0,0
L,0,40000,56060,0,0
Y,41000,56060,56160,0,0' "protected after 5 hours of waiting"
expect_eq "$(sched c.csv --cluster 1x1 --las-protect-wait 5h --las-protect-ratio 0.02 | grep '^[LY]' | sed -n 2p)" \
    'L,0,40000,41000,0,0' "protected 720 s only"

# The history of finished jobs (--las-mrl, default 1): twenty 2-hour jobs end first; V then runs,
# and W (queue 0) arrives when V has run 1.5 hours (queue 1): every job that ended ran 2 hours,
# so V is expected to end in half an hour, before a new job would: W waits. Without the rule
# (--las-mrl 0) W preempts V.
{
    echo job_id,submission_time,duration,num_gpu
    for i in $(seq 0 19); do echo "h$i,$((i * 7200)),7200,1"; done
    echo V,144000,10000,1
    echo W,149400,100,1
} > "$W/d.csv"
t "--las-mrl: a job expected to end sooner than the waiter is not preempted"
expect_eq "$(sched d.csv --cluster 1x1 | grep '^[VW]')" 'V,144000,144000,154000,0,0
W,149400,154000,154100,0,0' "no preemption"
expect_eq "$(sched d.csv --cluster 1x1 --las-mrl 0 | grep '^[VW]')" 'V,144000,144000,149400,0,0
V,144000,149500,154160,0,0
W,149400,149400,149500,0,0' "--las-mrl 0"

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
bad --policy las --las-mrl x
[[ "$ERR" == *"--las-mrl"* ]] || fail "message: $ERR"
bad --policy las --las-protect-wait soon
bad --policy las --las-protect-ratio -1
bad --policy las --las-max-preempt 1.5
bad --policy fifo --las-protect-wait 1h
[ "$(wc -l <<<"$ERR")" -eq 1 ] || fail "more than one line: $ERR"

done_testing
