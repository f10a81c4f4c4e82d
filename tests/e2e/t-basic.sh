#!/usr/bin/env bash
# Submit, list, show, logs, wait; the environment a task sees; --json schemas; autostart.
. "$(dirname "$0")/lib.sh"

t "autostart: the first command starts the daemon"
id=$(drover submit --name hello -- sh -c 'echo out-line; echo err-line >&2')
[[ "$id" =~ ^[0-9]+$ ]] || fail "submit printed '$id', not an id"
[ -S "$DROVER_HOME/drover.sock" ] || fail "no socket"
expect_eq "$(stat -c %a "$DROVER_HOME/drover.sock")" 600 "socket mode"
drover wait "$id" || fail "wait on a succeeding task"
expect_eq "$(drover logs "$id")" "out-line" "stdout log"
expect_eq "$(drover logs "$id" --stderr)" "err-line" "stderr log"

t "show --json has the documented fields"
drover show "$id" --json > "$TMP/show.json"
python3 - "$TMP/show.json" "$id" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for k in ("id", "name", "state", "command", "priority", "gpus", "attempts", "exit_code"):
    assert k in t, k
assert t["id"] == int(sys.argv[2]) and t["name"] == "hello"
assert t["state"] == "succeeded" and t["exit_code"] == 0 and t["attempts"] == 1
assert t["command"] == ["sh", "-c", "echo out-line; echo err-line >&2"]
assert t["gpus"] == [] and t["priority"] == 0
assert len(t["attempt_list"]) == 1 and t["attempt_list"][0]["end_time"] >= t["attempt_list"][0]["start_time"]
PY

t "the task's environment"
mkdir -p "$TMP/wd"
id=$(drover submit --gpus 1 --workdir "$TMP/wd" --env FOO=bar -- sh -c 'pwd; echo "$FOO $CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER $DROVER_TASK_ID $DROVER_ATTEMPT $DROVER_CHECKPOINT_DIR"')
drover wait "$id"
out=$(drover logs "$id")
expect_eq "$(echo "$out" | head -1)" "$TMP/wd" "workdir"
expect_eq "$(echo "$out" | tail -1)" "bar 0 PCI_BUS_ID $id 1 $DROVER_HOME/checkpoints/$id" "env"
[ -d "$DROVER_HOME/checkpoints/$id" ] || fail "checkpoint dir missing"

t "a CPU-only task sees no GPU"
id=$(drover submit -- sh -c 'echo "[$CUDA_VISIBLE_DEVICES]"')
drover wait "$id"
expect_eq "$(drover logs "$id")" "[]" "CUDA_VISIBLE_DEVICES for --gpus 0"

t "the submitter's environment and working directory are the defaults"
cd "$TMP/wd"
id=$(MY_VAR=from-client drover submit -- sh -c 'echo "$MY_VAR $(pwd)"')
drover wait "$id"
expect_eq "$(drover logs "$id")" "from-client $TMP/wd" "inherited env"
cd - >/dev/null

t "a failing task: wait exits 1, show gives the exit code"
id=$(drover submit -- sh -c 'exit 3')
expect_exit 1 drover wait "$id"
expect_eq "$(state_of "$id")" failed
expect_eq "$(field_of "$id" '["exit_code"]')" 3
drover show "$id" | grep -q "exit code 3" || fail "show lacks the reason"

t "ls lists tasks; ls --json is an array; --state filters"
drover ls | head -1 | grep -q "^ID  *NAME  *STATE" || fail "ls header"
n=$(drover ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_eq "$n" 5 "ls --json length"
n=$(drover ls --state failed --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_eq "$n" 1 "ls --state failed"

t "logs -f follows until the task ends"
id=$(drover submit -- sh -c 'echo one; sleep 0.3; echo two')
expect_eq "$(drover logs -f "$id" | tr '\n' ' ')" "one two " "logs -f"

t "DROVER_NO_AUTOSTART=1 with no daemon: exit 3"
drover shutdown
wait_until 10 bash -c "! [ -S '$DROVER_HOME/drover.sock' ]"
expect_exit 3 env DROVER_NO_AUTOSTART=1 "$DROVER" ls
drover ls >/dev/null || fail "autostart after shutdown"

done_testing
