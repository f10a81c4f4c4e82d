#!/usr/bin/env bash
# kill -9 of the daemon at arbitrary moments while work flows: no acknowledged task is lost,
# every task ends exactly once, and none that finished is run again.
export DROVER_FAKE_GPUS=2x16G DROVER_FAKE_CPUS=2
. "$(dirname "$0")/lib.sh"

KILLS=${KILLS:-12}
: > "$TMP/ids"
log="$TMP/runs.log"
# Each task logs its start and its end; a task that ran to the end twice would log two ends. Its
# length varies with its pid (dash, which runs sh -c, has no $RANDOM).
job="echo start \$DROVER_TASK_ID \$DROVER_ATTEMPT >> $log; sleep 0.\$((\$$ % 3)); echo end \$DROVER_TASK_ID >> $log"

t "submit while the daemon is killed $KILLS times"
submitter() {
    for i in $(seq 1 60); do
        case $((i % 3)) in
            0) "$DROVER" submit --gpus 1 --gpu-mem 4G -- sh -c "$job" ;;
            1) "$DROVER" submit -- sh -c "$job" ;;
            2) "$DROVER" submit --gpus 1 -- sh -c "$job" ;;
        esac >> "$TMP/ids" 2>/dev/null || true
    done
}
submitter &
sub=$!
for k in $(seq 1 "$KILLS"); do
    wait_until 20 test -f "$DROVER_HOME/daemon.lock"
    pid=$(cat "$DROVER_HOME/daemon.lock" 2>/dev/null || true)
    # Let the daemon work for a random moment (a condition-free pause is the point here).
    sleep "0.$((RANDOM % 5 + 1))"
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    drover ls >/dev/null 2>&1 || true   # restart it
done
wait "$sub"

t "every acknowledged task ends, exactly once"
ids=$(cat "$TMP/ids")
n=$(echo "$ids" | wc -l)
[ "$n" -ge 30 ] || fail "only $n submissions were acknowledged"
drover wait $ids || true
drover ls --all --json > "$TMP/ls.json"
python3 - "$TMP/ids" "$TMP/ls.json" "$log" <<'PY'
import collections, json, sys
acked = [int(l) for l in open(sys.argv[1]) if l.strip()]
tasks = {t["id"]: t for t in json.load(open(sys.argv[2]))}
lost = [i for i in acked if i not in tasks]
assert not lost, f"acknowledged but lost: {lost}"
ends = collections.Counter()
for line in open(sys.argv[3]):
    parts = line.split()
    if parts[0] == "end":
        ends[int(parts[1])] += 1
for i in acked:
    t = tasks[i]
    assert t["state"] == "succeeded", (i, t["state"], t["reason"])
    assert ends[i] == 1, f"task {i} ran to the end {ends[i]} times"
print(f"{len(acked)} tasks, all succeeded once")
PY
done_testing
