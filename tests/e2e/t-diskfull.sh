#!/usr/bin/env bash
# A full disk under DROVER_HOME (a small tmpfs): tasks end with their own exit status, a task that
# fills the disk with its output is not failed by it (its log is cut and says so), the daemon stays
# up, refuses new work with one clear line and starts nothing, and once there is room everything
# resumes.
. "$(dirname "$0")/lib.sh"

mnt="$TMP/small"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=16M tmpfs "$mnt" 2>/dev/null; then
    skip "mounting a small tmpfs needs root (make check runs as root in CI)"
fi
export DROVER_HOME="$mnt/home" DROVER_FAKE_CPUS=16
gate="$TMP/gates"     # off the small disk: creating a file there must work while it is full
mkdir -p "$gate"
# Before lib.sh's cleanup, keeping the test's exit status for it: open every gate, stop the
# daemon and what is left of the tasks, keep the daemon's log (cleanup looks there for crashes
# and sanitizer reports) and unmount.
small_cleanup() {
    local st=$? pid f sup pgid
    touch "$gate/unrelated" "$gate/quiet" "$gate/chatty" "$gate"/spent{1..6}
    rm -f "$mnt"/filler*
    pid=$(cat "$DROVER_HOME/daemon.lock" 2>/dev/null || true)
    "$DROVER" shutdown >/dev/null 2>&1 || true
    for _ in $(seq 200); do
        [ -z "$pid" ] || proc_gone "$pid" && break
        sleep 0.05
    done
    for f in "$DROVER_HOME"/runs/*/*/pid; do
        [ -f "$f" ] && read -r sup pgid < "$f" && [ "${pgid:-0}" -gt 0 ] && kill -9 -- "-$pgid" 2>/dev/null || true
    done
    mkdir -p "$TMP/home"
    cp "$DROVER_HOME/daemon.log" "$TMP/home/" 2>/dev/null || true
    umount -l "$mnt" 2>/dev/null || true
    DROVER_HOME="$TMP/home"
    (exit "$st")
    cleanup
}
trap small_cleanup EXIT
mkdir -p "$DROVER_HOME"
echo "sample = 200ms" > "$DROVER_HOME/drover.conf"   # stall detection looks often

daemon_pid() { cat "$DROVER_HOME/daemon.lock"; }
attempt_reason() { field_of "$1" '["attempt_list"][-1]["reason"]'; }
# A task that waits for the gate file $1, then prints $2.
gated() { drover submit -- sh -c 'while [ ! -e "$1" ]; do sleep 0.05; done; echo "$2"' sh "$gate/$1" "$2"; }

t "a task stored before the disk fills runs"
first=$(drover submit -- true)
drover wait "$first"
pid=$(daemon_pid)

t "tasks running when the disk fills"
unrelated=$(gated unrelated "unrelated done")
quiet=$(gated quiet "")
later=$(drover submit --after "$quiet" -- echo later)
spent=()
for i in 1 2 3 4 5 6; do spent+=("$(gated "spent$i" "")"); done
# Output all along, with stall detection: a full disk that drops its output must not make it look
# hung.
chatty=$(drover submit --stall 1s --retries 0 -- \
    sh -c 'until [ -e "$1" ]; do printf "%01000d\n" 0; sleep 0.1; done' sh "$gate/chatty")
for task in "$unrelated" "$quiet" "$chatty" "${spent[@]}"; do wait_until 10 state_is "$task" running; done
chatty_log="$(field_of "$chatty" '["attempt_list"][-1]["run_dir"]')/stdout"

t "a task that fills the disk with its output ends with its own exit status, its log cut and said"
filler=$(drover submit -- sh -c 'head -c 64M /dev/zero; exit 0')
drover wait "$filler" || fail "the filler ended $(state_of "$filler"): $(attempt_reason "$filler")"
expect_eq "$(state_of "$filler")" succeeded
reason=$(attempt_reason "$filler")
[[ "$reason" == "exit code 0; output truncated at "*" bytes: disk full" ]] || fail "reason: $reason"
cut=${reason#*truncated at }
cut=${cut%% bytes*}
expect_eq "$(stat -c %s "$(field_of "$filler" '["attempt_list"][-1]["run_dir"]')/stdout")" "$cut" \
    "the log's size"
"$DROVER" logs "$filler" 2>"$TMP/logs.err" >/dev/null
grep -q "output truncated at $cut bytes: disk full" "$TMP/logs.err" || fail "logs: $(cat "$TMP/logs.err")"
expect_eq "$(daemon_pid)" "$pid" "daemon pid"

t "with the disk full, a task that exits 0 succeeds, and nothing new starts"
dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null || true
touch "$gate/quiet"
drover wait "$quiet" || fail "quiet ended $(state_of "$quiet"): $(attempt_reason "$quiet")"
expect_eq "$(state_of "$quiet")" succeeded
expect_eq "$(state_of "$later")" queued "a task whose dependency succeeded while the disk is full"
expect_eq "$(daemon_pid)" "$pid" "daemon pid"

t "with the disk full, submit is refused with one line, exit 1, and nothing is stored"
count=$(task_count)
expect_exit 1 "$DROVER" submit -- true
expect_eq "$ERR" "drover submit: disk full under $DROVER_HOME: refusing new work until there is room"
expect_eq "$(task_count)" "$count" "tasks after a refused submit"
# Every other way to add work is refused the same way: a retry, an experiment.
expect_exit 1 "$DROVER" retry "$quiet"
expect_eq "$ERR" "drover retry: disk full under $DROVER_HOME: refusing new work until there is room"
cat > "$TMP/full.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: full }
spec:
  stages:
    - { name: a, command: [true] }
YAML
expect_exit 1 "$DROVER" exp run "$TMP/full.yaml"
expect_eq "$ERR" "drover exp: disk full under $DROVER_HOME: refusing new work until there is room"
expect_eq "$(task_count)" "$count" "tasks after a refused retry and experiment"
expect_eq "$(state_of "$quiet")" succeeded "a refused retry leaves the task as it was"

t "a task whose output the full disk drops is not taken for a stalled one"
# Once its log stops growing (its next page found no room), the log's time must still move on
# for twice its stall limit while it runs on.
size=-1
still_writing() {
    local now_size
    now_size=$(stat -c %s "$chatty_log")
    if [ "$now_size" != "$size" ]; then
        size=$now_size
        since=$(stat -c %Y "$chatty_log")
        return 1
    fi
    [ "$(stat -c %Y "$chatty_log")" -ge $((since + 2)) ]
}
wait_until 15 still_writing || true
expect_eq "$(state_of "$chatty")" running
touch "$gate/chatty"
drover wait "$chatty" || fail "chatty ended $(state_of "$chatty"): $(attempt_reason "$chatty")"

t "the unrelated task, running all along, succeeds"
touch "$gate/unrelated"
drover wait "$unrelated" || fail "unrelated ended $(state_of "$unrelated"): $(attempt_reason "$unrelated")"
expect_eq "$(state_of "$unrelated")" succeeded
expect_eq "$(daemon_pid)" "$pid" "daemon pid"

t "once the ballast is spent, an end that cannot be committed waits, and nothing is lost"
# Each end below gets a disk filled up again, so each commit takes ballast, until none is left.
status_of() { echo "$(field_of "$1" '["attempt_list"][-1]["run_dir"]')/status"; }
recorded_or_waiting() {
    state_is "$1" succeeded ||
        { [ "$(stat -c %s "$DROVER_HOME/reserve")" -eq 0 ] && [ -f "$(status_of "$1")" ]; }
}
for i in "${!spent[@]}"; do
    dd if=/dev/zero of="$mnt/filler.$i" bs=64k 2>/dev/null || true
    touch "$gate/spent$((i + 1))"
    wait_until 10 recorded_or_waiting "${spent[$i]}"
done
expect_eq "$(stat -c %s "$DROVER_HOME/reserve")" 0 "the ballast once spent"
waiting=$(drover ls --json | python3 -c 'import json,sys; print(sum(t["state"] == "running" for t in json.load(sys.stdin)))')
[ "$waiting" -ge 1 ] || fail "every end was committed: the ballast never ran out"
expect_eq "$(daemon_pid)" "$pid" "daemon pid"
expect_exit 1 "$DROVER" submit -- true

t "with room again, work resumes: the waiting task runs, a submit works, nothing was lost"
rm -f "$mnt"/filler* "$(field_of "$filler" '["attempt_list"][-1]["run_dir"]')/stdout"
submit_ok() { "$DROVER" submit -- echo again >"$TMP/again" 2>/dev/null; }
wait_until 20 submit_ok
again=$(cat "$TMP/again")
drover wait "$again" "$later" "${spent[@]}"
for task in "${spent[@]}"; do expect_eq "$(state_of "$task")" succeeded; done
expect_eq "$(stat -c %s "$DROVER_HOME/reserve")" 1048576 "the ballast, whole again"
expect_eq "$(state_of "$again")" succeeded
expect_eq "$(state_of "$later")" succeeded
expect_eq "$(drover logs "$later")" later
expect_eq "$(task_count)" $((count + 1))
expect_eq "$(state_of "$first")" succeeded
expect_eq "$(daemon_pid)" "$pid" "daemon pid"
done_testing
