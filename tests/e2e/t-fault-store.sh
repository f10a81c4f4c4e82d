#!/usr/bin/env bash
# Store faults at every point of a task's life: the daemon runs under tests/fault/failio.c, which
# fails its Nth write or fsync to drover.db* with EIO or ENOSPC; a scenario covering submit,
# start, a failure and its retry, a dependency's release and end runs against it; then the daemon
# is restarted normally and tests/fault/check_store.py checks that nothing acknowledged was lost,
# nothing ran twice, every task ended as it should and no outcome a client saw was rewritten.
# Whatever the daemon does after the failed write (stop, or stay up and refuse work) these hold.
#
# FAULT_POINTS=all covers every counted call instead of a sample (slow: ~0.5 s a point);
# FAULT_POINTS="59 60" only those; FAULT_KEEP=DIR keeps the directories of failing points there.
export DROVER_FAKE_GPUS=2x16G DROVER_FAKE_CPUS=4
. "$(dirname "$0")/lib.sh"

SHIM=${FAILIO_LIB:-$(dirname "$DROVER")/tests/fault/libfailio.so}
[ -f "$SHIM" ] || skip "no failio shim at $SHIM (build the failio target)"
CHECK="$(dirname "$0")/../fault/check_store.py"
BUDGET=${FAULT_BUDGET_S:-40}   # sampling keeps the whole test under a minute

# The scenario runs with no autostart: a daemon that stopped after the fault stays stopped, and
# only this script starts daemons (the faulty one with the shim, the checking one without).
export DROVER_NO_AUTOSTART=1
STEP_S=10   # deadline for a step against the faulty daemon (it may have stopped or refuse work)
# injected: how many calls the shim has failed so far in this point.
injected() {
    local n
    n=$(od -An -t u8 -j16 -N8 "$P/state" 2>/dev/null | tr -d ' ') || true
    echo "${n:-0}"
}
# wait_step ID…: drover wait with a deadline: STEP_S, or 2 s once a persistent fault is in place
# (a daemon that stays up then refuses work for good, and waiting longer shows nothing more).
wait_step() {
    local tries=0 limit=$STEP_S rc
    while [ "$tries" -lt "$limit" ]; do
        rc=0
        timeout 1 "$DROVER" wait "$@" >/dev/null 2>&1 || rc=$?
        [ "$rc" -eq 124 ] || return 0
        tries=$((tries + 1))
        if [ "$MODE" = from ] && [ "$(injected)" -gt 0 ] && [ "$limit" -eq "$STEP_S" ]; then
            limit=$((tries + 2))
        fi
    done
}

daemon_pid=
# start_daemon LOG [ENV…]: a daemon in the foreground of a background job, up or dead.
start_daemon() {
    local log=$1
    shift
    env "$@" "$DROVER" daemon >> "$log" 2>&1 &
    daemon_pid=$!
    up_or_dead() { "$DROVER" ls >/dev/null 2>&1 || proc_gone "$daemon_pid"; }
    wait_until 10 up_or_dead
}
stop_daemon() {
    "$DROVER" shutdown >/dev/null 2>&1 || true
    local deadline=$((SECONDS + STEP_S))
    until proc_gone "$daemon_pid"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "note: the daemon did not stop within ${STEP_S}s; killed" >&2
            kill -9 "$daemon_pid" 2>/dev/null || true
        fi
        sleep 0.05
    done
    wait "$daemon_pid" 2>/dev/null || true
}

# submit LABEL OPTIONS… : records an acknowledged submission in $P/acked, a refusal in $P/refused.
submit() {
    local label=$1 id rc=0
    shift
    id=$(timeout "$STEP_S" "$DROVER" submit "$@" 2>>"$P/cli.err") || rc=$?
    step "submit $label"
    if [ "$rc" -eq 0 ] && [[ "$id" =~ ^[0-9]+$ ]]; then
        echo "$label $id" >> "$P/acked"
        eval "ID_$label=$id"
    else
        echo "$label $rc" >> "$P/refused"
        eval "ID_$label="
    fi
}
# A step boundary in the shim's trace (only the dry run keeps one), to name the points.
step() { [ -z "${TRACE:-}" ] || echo "# $*" >> "$TRACE"; }
mark() { echo "echo \$DROVER_TASK_ID \$DROVER_ATTEMPT >> $P/marker"; }
# Saves what a client sees of each acknowledged task that has ended.
observe() {
    local label id
    while read -r label id; do
        "$DROVER" show "$id" --json > "$P/obs" 2>/dev/null || continue
        if grep -m1 '"state":' "$P/obs" | grep -qE 'succeeded|failed|timed_out|cancelled'; then
            mv "$P/obs" "$P/seen/$id.json" || true
        fi
    done < "$P/acked"
    return 0 # a task not ended yet is not an error here (set -e)
}
ids() { awk '{print $2}' "$P/acked" | tr '\n' ' '; }

# The scenario: A; B after A; C failing once then retried; D submitted once the others ended.
scenario() {
    submit A -- sh -c "$(mark)"
    if [ -n "$ID_A" ]; then submit B --after "$ID_A" -- sh -c "$(mark)"; fi
    submit C --retries 1 --backoff 0 -- sh -c "$(mark); [ \$DROVER_ATTEMPT -ge 2 ]"
    [ ! -s "$P/acked" ] || wait_step $(ids)
    step "waited A B C"
    observe
    submit D -- sh -c "$(mark)"
    [ -z "$ID_D" ] || wait_step "$ID_D"
    step "waited D"
    observe
}

# run_point DIR N MODE ERRNO: the scenario with call N failing; MODE once|from; N=0 counts only.
run_point() {
    P=$1 MODE=$3
    rm -rf "$P"
    mkdir -p "$P/seen" "$P/final"
    : > "$P/acked"
    : > "$P/refused"
    export DROVER_HOME="$P/home"
    cp -a "$TMP/template" "$DROVER_HOME"
    # Under ASan (make asan) the preloaded shim comes before the sanitizer's runtime.
    start_daemon "$P/faulty.log" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        LD_PRELOAD="$SHIM" FAILIO_STATE="$P/state" FAILIO_N="$2" \
        FAILIO_MODE="$3" FAILIO_ERRNO="$4" ${TRACE:+FAILIO_TRACE="$TRACE"}
    step "daemon up"
    scenario
    step "shutdown"
    stop_daemon
    [ -z "${FAULT_KEEP:-}" ] || cp -a "$DROVER_HOME" "$P/home.faulty"
    # Restart without the shim: whatever the faulty daemon left, the store must recover from.
    start_daemon "$DROVER_HOME/daemon.log"
    "$DROVER" ls >/dev/null 2>&1 || fail "point $2: the daemon does not restart: $(tail -3 "$DROVER_HOME/daemon.log")"
    # A refused submission stored anyway would run too: every task there is (the scenario makes
    # at most 4, numbered from 1) is waited for and looked at.
    local id all=
    for id in 1 2 3 4; do
        "$DROVER" show "$id" --json > /dev/null 2>&1 && all="$all $id"
    done
    [ -z "$all" ] || timeout 30 "$DROVER" wait $all >/dev/null 2>&1 || true
    for id in $all; do "$DROVER" show "$id" --json > "$P/final/$id.json"; done
    stop_daemon
}

t "a template store: the schema written once, so the points fall on the tasks' life"
export DROVER_HOME="$TMP/template"
start_daemon "$TMP/template.log"
"$DROVER" ls >/dev/null 2>&1 || fail "the daemon does not start"
stop_daemon
rm -rf "$DROVER_HOME/runs"/* "$DROVER_HOME/daemon.lock"

t "a dry run counts the scenario's writes, and the shim sees them"
TRACE="$TMP/trace"
run_point "$TMP/dry" 0 once EIO
TRACE=
[ -z "${FAULT_KEEP:-}" ] || cp "$TMP/trace" "$FAULT_KEEP/trace.dry"
out=$(python3 "$CHECK" "$TMP/dry") || fail "the dry run (no fault) breaks the invariants: $out"
read -r total _ <<< "$out"
[ "$total" -ge 20 ] || fail "the shim counted only $total write-type calls: is it interposing?"
grep -q "fdatasync drover.db-wal" "$TMP/trace" || fail "no fsync of the WAL was seen"
[ "$(wc -l < "$TMP/dry/acked")" -eq 4 ] || fail "the dry run acknowledged $(wc -l < "$TMP/dry/acked") of 4 submissions"

# The points: every call when FAULT_POINTS=all, those listed when it is a list; else, from each
# run of like calls in the dry run's trace (the frames of one commit, its fsync, a checkpoint),
# its first and last call and one between: a fault at the start and the end of every commit of
# every step. They are visited in a stride order, so a spent time budget thins them evenly.
points=$(python3 - "$TMP/trace" "${FAULT_POINTS:-sample}" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
if sys.argv[2] == "all":
    pick = [int(r[0]) for r in rows]
elif sys.argv[2] != "sample":
    print(sys.argv[2]); sys.exit()
else:
    pick, run, prev = set(), [], None
    for r in rows + [[0, "", ""]]:
        if (r[1], r[2]) != prev and run:
            pick.update({run[0], run[len(run) // 2], run[-1]})
            run = []
        run.append(int(r[0])); prev = (r[1], r[2])
    pick = sorted(pick)
stride = 7 if len(pick) % 7 else 5
print(" ".join(str(pick[(i * stride) % len(pick)]) for i in range(len(pick))))
PY
)
npoints=$(echo $points | wc -w)
# What each point is in the dry run: the call, and the scenario step it came after.
label() {
    awk -v n="$1" '/^#/ {sub(/^# /, ""); s=$0; next}
                   $1 == n {print $2 "(" $3 ") after \"" (s ? s : "start") "\""; exit}' "$TMP/trace"
}

t "a fault at each of $npoints of $total calls: EIO or ENOSPC, once or from then on"
: > "$TMP/covered"
: > "$TMP/unreported"
covered=0 missed=0 stops=0 phantoms=0 violations=0 aborts=0 k=0
start=$SECONDS
for n in $points; do
    if [ $((SECONDS - start)) -ge "$BUDGET" ]; then
        echo "note: time budget spent after $k of $npoints points"
        break
    fi
    k=$((k + 1))
    errno=EIO mode=once
    [ $((k % 2)) -eq 0 ] && errno=ENOSPC
    [ $((k % 5)) -eq 0 ] && mode=from
    run_point "$TMP/p$k" "$n" "$mode" "$errno"
    rc=0
    out=$(python3 "$CHECK" "$TMP/p$k"; ! grep -h "fatal\|Sanitizer\|runtime error" \
          "$DROVER_HOME/daemon.log" | sed 's/^/VIOLATION: the restarted daemon: /') || rc=$?
    read -r _ injected what <<< "$out"
    out=$(tail -n +2 <<< "$out")
    where="point $n ($mode $errno) failed $what; in the dry run $(label "$n")"
    if [ "$injected" -eq 0 ]; then
        # This run made fewer calls than the dry run (timing batches commits differently).
        missed=$((missed + 1))
        continue
    fi
    covered=$((covered + 1))
    label "$n" >> "$TMP/covered"
    if grep -q "cannot commit\|cannot store\|disk I/O error\|database or disk is full\|disk full" \
        "$P/faulty.log"; then
        stops=$((stops + 1))
    else
        echo "$what $(label "$n")" >> "$TMP/unreported"
    fi
    if grep -q "fatal" "$P/faulty.log"; then
        aborts=$((aborts + 1))
        echo "note: $where: the daemon aborted: $(grep -m1 fatal "$P/faulty.log")"
    fi
    if [ "$rc" -ne 0 ]; then
        violations=$((violations + 1))
        { echo "$where:"; echo "$out"; grep -v '^drover daemon: serving' "$P/faulty.log" | tail -5; } >&2
        [ -z "${FAULT_KEEP:-}" ] || cp -a "$P" "$FAULT_KEEP/p$k-n$n"
        continue
    fi
    if [ -n "$out" ]; then
        phantoms=$((phantoms + 1))
        echo "$where:"
        echo "$out"
    fi
    rm -rf "$P"
done
echo "fault points: $covered covered ($missed not reached) of $total calls; the daemon reported" \
     "$stops of them and aborted at $aborts; $phantoms left a refused submission stored;" \
     "$violations broke an invariant"
# Where the covered points fell in the dry run: the step each came after.
sed 's/.* after //' "$TMP/covered" | sort | uniq -c | awk '{n=$1; $1=""; printf "  %3d after%s\n", n, $0}'
if [ -s "$TMP/unreported" ]; then
    echo "faults the daemon's log does not mention (SQLite absorbed them, or a checkpoint at exit):"
    sed 's/ in the dry run.*//; s/ after / after /' "$TMP/unreported" | sort | uniq -c | sed 's/^/  /'
fi
[ "$violations" -eq 0 ] || fail "$violations points broke an invariant (above)"
[ "$covered" -ge $((k * 3 / 4)) ] || fail "only $covered of $k points injected a fault"
done_testing
