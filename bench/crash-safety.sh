#!/usr/bin/env bash
# bench/crash-safety.sh: 1,000 tasks — an array, single submissions (CPU, whole-GPU and shared-GPU
# ones) and tasks that depend on earlier ones — while the daemon is kill -9'ed every 0.5–1 s,
# sometimes with its zygote, and now and then a running task's supervisor. Then: tasks lost
# (acknowledged but absent, or never run to the end), tasks run twice (an attempt that started
# twice, a run the store records no attempt for, or two runs to the end among the attempts the
# store records as run) and tasks that did not end succeeded.
#
# Every submission carries an idempotency key and is repeated until the CLI acknowledges it, so
# exactly N tasks exist however often the daemon dies under a submission. Each task has
# retries: a killed supervisor costs its attempt (recorded as lost) and the task runs again as
# its next attempt — a recorded retry, not a duplicate.
#
# Usage: bench/crash-safety.sh [BUILD_DIR]   (N=1000 KILL_MS=500-1000 SUPERVISOR_EVERY=4 ZYGOTE_EVERY=3)
# Prints a line like "1000 tasks, 31 daemon kills (10 with the zygote), 7 supervisor kills:
# lost 0, duplicated 0, not succeeded 0, wall 24 s" and one of detail; exits 1 if a task was
# lost, ran twice or did not succeed.
set -euo pipefail
BUILD=${1:-build}
DROVER=$(readlink -f "$BUILD/drover")
N=${N:-1000}
KILL_MS=${KILL_MS:-500-1000}
SUPERVISOR_EVERY=${SUPERVISOR_EVERY:-4}   # every 4th daemon kill also kills one supervisor
ZYGOTE_EVERY=${ZYGOTE_EVERY:-3}           # every 3rd takes the zygote down with the daemon
WORK=$(mktemp -d /tmp/drover-crash.XXXXXX)
export DROVER_HOME=$WORK/home DROVER_FAKE_GPUS=${DROVER_FAKE_GPUS:-2x16G}
export DROVER_FAKE_CPUS=${DROVER_FAKE_CPUS:-8} NO_COLOR=1
unset DROVER_NO_AUTOSTART
LOG=$WORK/runs.log

# Only processes of this run are ever signalled: this build's daemon binary (the daemon, its
# zygote and supervisors are drover-daemon, beside the CLI), serving this DROVER_HOME.
DAEMON_BIN=$(dirname "$DROVER")/drover-daemon
ours() {
    [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$DAEMON_BIN" ] &&
        grep -qxz "DROVER_HOME=$DROVER_HOME" "/proc/$1/environ" 2>/dev/null
}
daemon_pid() {
    local pid
    pid=$(cat "$DROVER_HOME/daemon.lock" 2>/dev/null) || return 1
    [ -n "$pid" ] && ours "$pid" && [ "$(tr '\0' ' ' < "/proc/$pid/cmdline")" = "drover-daemon daemon " ] &&
        echo "$pid"
}
cleanup() {
    touch "$WORK/stop"
    wait 2>/dev/null || true
    "$DROVER" shutdown >/dev/null 2>&1 || true
    local f sup pgid
    for f in "$DROVER_HOME"/runs/*/*/pid; do
        [ -f "$f" ] && [ ! -f "${f%pid}status" ] && read -r sup pgid < "$f" || continue
        ours "$sup" && kill -9 "$sup" 2>/dev/null || true
        [ "${pgid:-0}" -gt 0 ] && kill -9 -- "-$pgid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# A task logs its start (with its attempt) and its end; it runs 0–0.3 s (sh has no $RANDOM: its
# pid decides).
job="echo start \$DROVER_TASK_ID \$DROVER_ATTEMPT >> $LOG; sleep 0.\$((\$\$ % 4)); echo end \$DROVER_TASK_ID \$DROVER_ATTEMPT >> $LOG"

# submit KEY OPTIONS…: repeats until acknowledged (the key makes a repeat return the same task).
submit() {
    local key=$1 out
    shift
    until out=$("$DROVER" submit --key "$key" --retries 3 --backoff 0 "$@" -- sh -c "$job" 2>/dev/null); do
        [ ! -f "$WORK/stop" ] || return 1
    done
    echo "$out"
}

ARRAY=$((N * 2 / 5)) SINGLE=$((N * 2 / 5)) DEPS=$((N - N * 2 / 5 - N * 2 / 5))
submitter() {
    local i id ids=()
    submit array --array "0-$((ARRAY - 1))" > "$WORK/array.ids"
    for i in $(seq 1 "$SINGLE"); do
        case $((i % 10)) in
            0) id=$(submit "s$i" --gpus 1) ;;
            5) id=$(submit "s$i" --gpus 1 --gpu-mem 4G) ;;
            *) id=$(submit "s$i") ;;
        esac
        echo "$id" >> "$WORK/single.ids"
        ids+=("$id")
        # Every other single task is followed by one that depends on an earlier one.
        if [ $((i % 2)) -eq 0 ] && [ $((i / 2)) -le "$DEPS" ]; then
            submit "d$i" --after "${ids[$((RANDOM % ${#ids[@]}))]}" >> "$WORK/deps.ids"
        fi
    done
    touch "$WORK/submitted"
}

# Kills the daemon every KILL_MS; sometimes its zygote too, sometimes a running supervisor.
killer() {
    local lo=${KILL_MS%-*} hi=${KILL_MS#*-} k=0 pid zyg f sup pgid
    while [ ! -f "$WORK/stop" ]; do
        sleep "$(awk -v ms=$((lo + RANDOM % (hi - lo + 1))) 'BEGIN { printf "%.3f", ms / 1000 }')"
        pid=$(daemon_pid) || continue
        k=$((k + 1))
        if [ $((k % ZYGOTE_EVERY)) -eq 0 ]; then
            for zyg in $(pgrep -P "$pid" 2>/dev/null); do
                [ "$(tr '\0' ' ' < "/proc/$zyg/cmdline" 2>/dev/null)" = "drover __zygote " ] &&
                    kill -9 "$zyg" 2>/dev/null && echo zygote >> "$WORK/kills"
            done
        fi
        kill -9 "$pid" 2>/dev/null && echo daemon >> "$WORK/kills"
        if [ $((k % SUPERVISOR_EVERY)) -eq 0 ]; then
            for f in $(ls -d "$DROVER_HOME"/runs/*/* 2>/dev/null | shuf); do
                [ -f "$f/pid" ] && [ ! -f "$f/status" ] || continue
                read -r sup pgid < "$f/pid" || continue
                ours "$sup" && kill -9 "$sup" 2>/dev/null && echo "supervisor $f" >> "$WORK/kills" && break
            done
        fi
        "$DROVER" ls >/dev/null 2>&1 || true   # the next command restarts it
    done
}

start=$SECONDS
: > "$LOG"
: > "$WORK/kills"
submitter &
sub=$!
killer &
kil=$!
wait "$sub"
cat "$WORK/array.ids" "$WORK/single.ids" "$WORK/deps.ids" > "$WORK/ids"
# Wait for every task; a killed daemon ends a wait with exit 3, so wait again.
until "$DROVER" wait $(cat "$WORK/ids") >/dev/null 2>&1; do
    rc=$?
    [ "$rc" -ne 3 ] && [ "$rc" -ne 0 ] && break   # 1: some task did not succeed, reported below
    [ $((SECONDS - start)) -lt 600 ] || { echo "gave up waiting after 600 s" >&2; break; }
done
touch "$WORK/stop"
wait "$kil" || true
wall=$((SECONDS - start))
until "$DROVER" ls --all --json > "$WORK/ls.json" 2>/dev/null; do sleep 0.1; done

python3 - "$WORK/ids" "$WORK/ls.json" "$LOG" "$WORK/kills" "$wall" "$DROVER" <<'PY'
import collections, json, subprocess, sys
ids = [int(l) for l in open(sys.argv[1]) if l.strip()]
tasks = {t["id"]: t for t in json.load(open(sys.argv[2]))}
starts, ends = collections.Counter(), collections.Counter()
for line in open(sys.argv[3]):
    kind, task, attempt = line.split()
    (starts if kind == "start" else ends)[(int(task), int(attempt))] += 1
kills = collections.Counter(l.split()[0] for l in open(sys.argv[4]) if l.strip())
killed = {tuple(int(x) for x in l.split()[1].split("/")[-2:])
          for l in open(sys.argv[4]) if l.startswith("supervisor")}
ended = collections.Counter(t for t, _ in ends.elements())

# What the store recorded of each attempt, for tasks that took more than one.
outcome = {}
for i in ids:
    if i in tasks and tasks[i]["attempts"] > 1:
        t = json.loads(subprocess.run([sys.argv[6], "show", str(i), "--json"], check=True,
                                      capture_output=True, text=True).stdout)
        for a in t["attempt_list"]:
            outcome[(i, a["attempt"])] = a["outcome"]
            if a["outcome"] != "succeeded" and (i, a["attempt"]) not in killed:
                print(f"  task {i} attempt {a['attempt']}: {a['outcome']} ({a['reason']})")

lost = [i for i in ids if i not in tasks or ended[i] == 0]
dup = []  # a run the store cannot account for
for i in ids:
    runs = [(a, starts[(i, a)]) for (t, a) in starts if t == i]
    n = tasks[i]["attempts"] if i in tasks else 0
    if any(c > 1 for _, c in runs):
        dup.append((i, "an attempt started twice"))
    elif any(a > n for a, _ in runs):
        dup.append((i, f"ran attempts {sorted(a for a, _ in runs)}, the store records {n}"))
    elif sum(ends[(i, a)] for a, _ in runs if outcome.get((i, a), "succeeded") != "lost") > 1:
        dup.append((i, "ran to the end twice in attempts recorded as run"))
# A killed supervisor's task may still finish before the restarted daemon kills its group: its
# attempt is recorded lost and it runs again, by design.
finished_lost = sum(1 for k, o in outcome.items() if o == "lost" and ends[k] > 0)
unacked = sorted(set(tasks) - set(ids))
bad = [i for i in ids if i in tasks and tasks[i]["state"] != "succeeded"]
retried = sum(1 for i in ids if i in tasks and tasks[i]["attempts"] > 1)
print(f"{len(ids)} tasks, {kills['daemon']} daemon kills ({kills['zygote']} with the zygote),"
      f" {kills['supervisor']} supervisor kills: lost {len(lost)}, duplicated {len(dup)},"
      f" not succeeded {len(bad)}, wall {sys.argv[5]} s")
print(f"  {retried} tasks took a second attempt ({len(killed)} supervisors killed; {finished_lost}"
      f" of their tasks finished anyway and ran again, as designed); {len(unacked)} tasks exist"
      f" that no submission acknowledged")
for i in lost[:10]:
    print(f"  lost: task {i}: {tasks[i]['state'] if i in tasks else 'absent'}", file=sys.stderr)
for i, why in dup[:10]:
    print(f"  duplicated: task {i}: {why}", file=sys.stderr)
for i in bad[:10]:
    print(f"  not succeeded: task {i}: {tasks[i]['state']} ({tasks[i]['reason']})", file=sys.stderr)
sys.exit(1 if lost or dup or bad or len(ids) != len(set(ids)) else 0)
PY
