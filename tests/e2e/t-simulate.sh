#!/usr/bin/env bash
# drover simulate on small hand-made traces whose best schedules are known: each policy's exact
# schedule, the statistics, and bad input (one line naming file and line, exit 2).
. "$(dirname "$0")/lib.sh"

W=$TMP/sim
mkdir -p "$W"

# sched TRACE CLUSTER POLICY [OPTIONS...]: the schedule rows, without the header.
sched() {
    local trace=$1 cluster=$2 policy=$3
    shift 3
    "$DROVER" simulate --trace "$W/$trace" --cluster "$cluster" --policy "$policy" \
        --schedule-out "$W/out.csv" "$@" >/dev/null || fail "simulate $trace $policy $* failed"
    tail -n +2 "$W/out.csv"
}

expect_sched() { # expect_sched WANT TRACE CLUSTER POLICY [OPTIONS...]
    local want=$1
    shift
    local got
    got=$(sched "$@")
    [ "$got" = "$want" ] || fail "simulate $*: schedule
$got
expected
$want"
}

# jct TRACE CLUSTER POLICY [OPTIONS...]: the average JCT in seconds.
jct() {
    local trace=$1 cluster=$2 policy=$3
    shift 3
    "$DROVER" simulate --trace "$W/$trace" --cluster "$cluster" --policy "$policy" --json "$@" |
        python3 -c 'import json,sys; print("%g" % json.load(sys.stdin)["jct_s"]["avg"])'
}

t "head-of-line blocking: fifo waits, backfill fills the gap only when limits prove it harmless"
cat > "$W/hol.csv" <<'CSV'
job_id,submit_time,duration,gpus
a,0,100,2
b,0,100,4
c,0,10,1
d,0,10,1
CSV
fifo='a,0,0,100,0,0;1
b,0,100,200,0,0;1;2;3
c,0,200,210,0,0
d,0,200,210,0,1'
expect_sched "$fifo" hol.csv 1x4 fifo
# No limits: the head holds every GPU it will need, and c, d could delay it: they wait.
expect_sched "$fifo" hol.csv 1x4 backfill
expect_sched "$fifo" hol.csv 1x4 drover
filled='a,0,0,100,0,0;1
b,0,100,200,0,0;1;2;3
c,0,0,10,0,2
d,0,0,10,0,3'
expect_sched "$filled" hol.csv 1x4 backfill --limits exact
expect_sched "$filled" hol.csv 1x4 drover --limits exact
expect_eq "$(jct hol.csv 1x4 fifo)" 180 "fifo average JCT"
expect_eq "$(jct hol.csv 1x4 drover --limits exact)" 80 "backfilled average JCT"

t "over-asked limits let a job backfill that then delays the head"
cat > "$W/overask.csv" <<'CSV'
a,0,100,2
b,0,100,4
c,50,60,1
CSV
expect_sched 'a,0,0,100,0,0;1
b,0,100,200,0,0;1;2;3
c,50,200,260,0,0' overask.csv 1x4 drover --limits exact
# Twice the real durations: c (limit 120 from 50) seems to end before a (limit 200): it starts,
# and b has to wait for it.
expect_sched 'a,0,0,100,0,0;1
b,0,110,210,0,0;1;2;3
c,50,50,110,0,2' overask.csv 1x4 drover --limits x2

t "fractions of a GPU are packed best-fit; whole GPUs (and fifo) do not share"
cat > "$W/share.csv" <<'CSV'
# job_id,submit_time,duration,gpus,gpu_mem_fraction
s1,0,100,1,0.5
s2,0,100,1,0.5
s3,0,100,1,0.5
w,0,100,1
CSV
expect_sched 's1,0,0,100,0,0@0.5
s2,0,0,100,0,0@0.5
s3,0,0,100,0,1@0.5
w,0,100,200,0,0' share.csv 1x2 drover
whole='s1,0,0,100,0,0
s2,0,0,100,0,1
s3,0,100,200,0,0
w,0,100,200,0,1'
expect_sched "$whole" share.csv 1x2 drover --whole-gpus
expect_sched "$whole" share.csv 1x2 fifo
expect_eq "$(jct share.csv 1x2 drover)" 125 "packed average JCT"
expect_eq "$(jct share.csv 1x2 drover --whole-gpus)" 150 "whole-GPU average JCT"

t "a job larger than a node takes whole nodes; one that fits a node stays on one"
cat > "$W/span.csv" <<'CSV'
big,0,100,8
small,0,50,4
big2,10,100,12
late,20,5,3
CSV
for p in fifo backfill drover; do
    expect_sched 'big,0,0,100,0;1,0;1;2;3
small,0,0,50,2,0;1;2;3
big2,10,100,200,0;1;2,0;1;2;3
late,20,200,205,0,0;1;2' span.csv 3x4 "$p"
done

t "priorities: drover runs the urgent job first, fifo keeps arrival order"
cat > "$W/prio.csv" <<'CSV'
a,0,100,1,1,0
b,10,10,1,1,0
c,20,10,1,1,5
CSV
expect_sched 'a,0,0,100,0,0
b,10,110,120,0,0
c,20,100,110,0,0' prio.csv 1x1 drover
expect_sched 'a,0,0,100,0,0
b,10,100,110,0,0
c,20,110,120,0,0' prio.csv 1x1 fifo

t "statistics: makespan, percentiles, utilisation and the lower bounds"
"$DROVER" simulate --trace "$W/hol.csv" --cluster 1x4 --policy fifo --json > "$W/hol.json"
python3 - "$W/hol.json" <<'PY' || fail "hol.csv statistics"
import json, sys
d = json.load(open(sys.argv[1]))
want = {"jobs": 4, "makespan_s": 210, "gpus": 4}
for k, v in want.items():
    assert d[k] == v, (k, d[k], v)
assert d["jct_s"] == {"avg": 180, "p50": 200, "p95": 210, "p99": 210}, d["jct_s"]
assert d["wait_s"] == {"avg": 125, "p99": 200, "max": 200}, d["wait_s"]
# busy GPU-time 2*100 + 4*100 + 10 + 10 = 620 over 4 GPUs x 210 s
assert abs(d["utilisation"] - 620 / 840) < 1e-9, d["utilisation"]
assert abs(d["bounds"]["makespan_s"] - 155) < 1e-9 and d["bounds"]["jct_s"] == 55, d["bounds"]
assert d["skipped"] == {"never_ran": 0, "unreadable": 0, "unfit": 0}, d["skipped"]
PY
out=$("$DROVER" simulate --trace "$W/hol.csv" --cluster 1x4 --policy fifo)
for word in makespan JCT wait utilisation running scheduler; do
    grep -q "^$word" <<<"$out" || fail "the table has no $word line: $out"
done

t "jobs that fit no node are skipped and counted, not simulated"
printf 'a,0,10,1\nhuge,0,10,9\n' > "$W/huge.csv"
expect_exit 0 "$DROVER" simulate --trace "$W/huge.csv" --cluster 2x4 --json
[[ "$ERR" == *"skipped 1 jobs that fit no node; the first: job huge (line 2)"* ]] ||
    fail "no skip message: $ERR"

t "bad input: one line naming the file and line, exit 2"
bad() {
    expect_exit 2 "$DROVER" simulate "$@"
    [ "$(printf '%s\n' "$ERR" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $ERR"
    [[ "$ERR" == "drover simulate: "* ]] || fail "'$*' error: $ERR"
}
printf 'a,0,10,1\nb,5,-3,1\nc,6,1,1\n' > "$W/bad.csv"
bad --trace "$W/bad.csv" --cluster 1x1
[[ "$ERR" == *"bad.csv:2:"* ]] || fail "no file:line in: $ERR"
printf 'a,0,10,1\nb,5,x,1\nc,6,1,1,0.5,1,alice,extra\n' > "$W/bad2.csv"
bad --trace "$W/bad2.csv" --cluster 1x1
[[ "$ERR" == *"bad2.csv:2:"* ]] || fail "no file:line in: $ERR"
bad --trace "$W/nope.csv" --cluster 1x1
bad --trace "$W/hol.csv"
bad --trace "$W/hol.csv" --cluster 1x4 --nodes "$W/hol.csv"
bad --trace "$W/hol.csv" --cluster 4
bad --trace "$W/hol.csv" --cluster 0x8
bad --trace "$W/hol.csv" --cluster 2x8:lots
bad --trace "$W/hol.csv" --cluster 1x4 --policy sjf
bad --trace "$W/hol.csv" --cluster 1x4 --limits x0.5
bad --trace "$W/hol.csv" --cluster 1x4 --limits twice
bad --trace "$W/hol.csv" --cluster 1x4 --format parquet
bad --trace "$W/hol.csv" --cluster 1x4 extra-argument
bad --cluster 1x4
bad --trace "$W/hol.csv" --nodes "$W/nope.csv"
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1024,two,V100\n' > "$W/nodes.csv"
bad --trace "$W/hol.csv" --nodes "$W/nodes.csv"
[[ "$ERR" == *"nodes.csv:2:"* ]] || fail "no file:line in: $ERR"
# --skip-bad-rows: counted, reported on stderr, the rest simulated.
expect_exit 0 "$DROVER" simulate --trace "$W/bad2.csv" --cluster 1x1 --skip-bad-rows --json
[[ "$ERR" == *"skipped 2 unreadable rows; the first: "*"bad2.csv:2:"* ]] || fail "skip message: $ERR"
n=$("$DROVER" simulate --trace "$W/bad2.csv" --cluster 1x1 --skip-bad-rows --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["jobs"], d["skipped"]["unreadable"])')
expect_eq "$n" "1 2" "jobs and skipped rows"
# An unwritable schedule file is refused before anything runs.
bad --trace "$W/hol.csv" --cluster 1x4 --schedule-out "$W/no/such/dir/out.csv"

done_testing
