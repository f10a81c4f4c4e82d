#!/usr/bin/env bash
# drover simulate with users: the csv trace's user column, fair share against first come first
# served on a trace whose schedule is known, the per-user figures (text and --json), synthetic
# users (deterministic by seed), and bad input (one line, exit 2).
. "$(dirname "$0")/lib.sh"

W=$TMP/simu
mkdir -p "$W"

# alice fills both GPUs and queues two more; bob and a job with no user arrive after her.
cat > "$W/users.csv" <<'CSV'
job_id,submit_time,duration,gpus,gpu_mem_fraction,priority,user
a1,0,100,1,1,0,alice
a2,0,100,1,1,0,alice
a3,0,100,1,1,0,alice
a4,0,100,1,1,0,alice
b1,10,100,1,1,0,bob
c1,20,50,1
CSV

sched() { # sched TRACE [OPTIONS...]: the schedule rows, without the header
    local trace=$1
    shift
    "$DROVER" simulate --trace "$W/$trace" --cluster 1x2 --schedule-out "$W/out.csv" "$@" \
        >/dev/null || fail "simulate $trace $* failed"
    tail -n +2 "$W/out.csv"
}

t "fair share: the users who used nothing go first when alice's first jobs end"
expect_eq "$(sched users.csv)" 'a1,0,0,100,0,0
a2,0,0,100,0,1
a3,0,150,250,0,1
a4,0,200,300,0,0
b1,10,100,200,0,0
c1,20,100,150,0,1' "fair-share schedule"

t "--fair-share off, and the fifo policy: arrival order across users"
fcfs='a1,0,0,100,0,0
a2,0,0,100,0,1
a3,0,100,200,0,0
a4,0,100,200,0,1
b1,10,200,300,0,0
c1,20,200,250,0,1'
expect_eq "$(sched users.csv --fair-share off)" "$fcfs" "first-come schedule"
expect_eq "$(sched users.csv --policy fifo)" "$fcfs" "fifo schedule"
# And on asks for it under a policy that has it off.
expect_eq "$(sched users.csv --policy backfill --fair-share on | grep '^b1')" 'b1,10,100,200,0,0' \
    "backfill with --fair-share on"

t "per-user figures in --json: jobs, GPU-hours, average JCT and wait"
"$DROVER" simulate --trace "$W/users.csv" --cluster 1x2 --json > "$W/fair.json"
python3 - "$W/fair.json" <<'PY' || fail "per-user JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["fair_share"] is True, r["fair_share"]
u = {x["user"]: x for x in r["users"]}
assert list(u) == ["alice", "bob", "-"], list(u)
assert u["alice"]["jobs"] == 4 and abs(u["alice"]["gpu_hours"] - 400 / 3600) < 1e-9
# alice waits 0, 0, 150, 200; bob 90; the job without a user 80.
assert u["alice"]["wait_avg_s"] == 87.5 and u["alice"]["wait_max_s"] == 200, u["alice"]
assert u["alice"]["jct_avg_s"] == 187.5, u["alice"]
assert u["bob"]["wait_avg_s"] == 90 and u["bob"]["jct_avg_s"] == 190, u["bob"]
assert u["-"]["wait_avg_s"] == 80, u["-"]
PY
"$DROVER" simulate --trace "$W/users.csv" --cluster 1x2 --fair-share off --json > "$W/fcfs.json"
bob_off=$(python3 -c 'import json,sys; print([u for u in json.load(sys.stdin)["users"] if u["user"]=="bob"][0]["wait_avg_s"])' < "$W/fcfs.json")
expect_eq "$bob_off" 190.0 "bob's wait without fair share"

t "the text output has a per-user table; a trace without users has none"
out=$("$DROVER" simulate --trace "$W/users.csv" --cluster 1x2)
grep -qE '^user +jobs +GPU-hours +avg JCT +avg wait +max wait$' <<<"$out" || fail "no user table: $out"
grep -qE '^bob +1 +0\.0 +3m10s +1m30s +1m30s$' <<<"$out" || fail "no bob row: $out"
printf 'job_id,submit_time,duration,gpus\na,0,10,1\n' > "$W/plain.csv"
out=$("$DROVER" simulate --trace "$W/plain.csv" --cluster 1x2)
! grep -q '^user ' <<<"$out" || fail "a user table without users: $out"
users=$("$DROVER" simulate --trace "$W/plain.csv" --cluster 1x2 --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["users"])')
expect_eq "$users" None "users of a trace without any"

t "synthetic users: N users, user1 with the share of the work asked, the same for a seed"
for i in $(seq 1 400); do echo "j$i,$i,30,1"; done > "$W/many.csv"
per_user() {
    "$DROVER" simulate --trace "$W/many.csv" --cluster 1x4 --json "$@" |
        python3 -c 'import json,sys; print(" ".join("%s=%d" % (u["user"], u["jobs"]) for u in json.load(sys.stdin)["users"]))'
}
one=$(per_user --users 5 --heavy-user-share 0.5 --seed 7)
expect_eq "$(per_user --users 5 --heavy-user-share 0.5 --seed 7)" "$one" "same seed"
[ "$(per_user --users 5 --heavy-user-share 0.5 --seed 8)" != "$one" ] || fail "seed ignored"
python3 - "$one" <<'PY' || fail "synthetic users: $one"
import sys
jobs = dict(kv.split("=") for kv in sys.argv[1].split())
assert list(jobs) == ["user%d" % i for i in range(1, 6)], jobs
assert sum(map(int, jobs.values())) == 400
assert int(jobs["user1"]) == 200, jobs   # half the work: alike jobs, every other one
assert all(20 <= int(jobs["user%d" % i]) <= 80 for i in range(2, 6)), jobs
PY
# --users replaces a trace's own users.
expect_eq "$(per_user --users 1)" "user1=400" "one synthetic user"

t "bad input: one line naming the option, exit 2"
bad() { expect_exit 2 "$DROVER" simulate --trace "$W/users.csv" --cluster 1x2 "$@"; }
bad --fair-share maybe
[[ "$ERR" == *'--fair-share "maybe": expected on or off'* ]] || fail "message: $ERR"
bad --users 0
bad --users 1001
bad --users many
bad --users 3 --heavy-user-share 1.5
[[ "$ERR" == *'--heavy-user-share "1.5"'* ]] || fail "message: $ERR"
bad --users 3 --heavy-user-share x
bad --users 3 --seed -1
bad --seed 4
[ "$(wc -l <<<"$ERR")" -eq 1 ] || fail "more than one line: $ERR"
printf 'a,0,10,1,1,0,alice,extra\n' > "$W/wide.csv"
expect_exit 2 "$DROVER" simulate --trace "$W/wide.csv" --cluster 1x2
[[ "$ERR" == *"wide.csv:1:"* ]] || fail "no file:line in: $ERR"

done_testing
