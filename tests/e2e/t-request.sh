#!/usr/bin/env bash
# One task request for every door (util/request.def, daemon/request.c): drover submit --gpu-type,
# the default-retries and default-backoff settings, and the same words for a bad field whether it
# comes from a flag, a raw submit on the socket or a raw experiment task.
export DROVER_FAKE_GPUS=2x16G,1x24G # "Fake GPU 16G" at 0 and 1, "Fake GPU 24G" at 2
. "$(dirname "$0")/lib.sh"
W=$TMP/w
mkdir -p "$W" "$DROVER_HOME"

# raw OP PYTHON: sends a valid request of op (submit, or a one-trial exp_run) straight to the
# socket after PYTHON has changed `req` (and `task`, exp_run's trial); prints the reply's error,
# or "ok".
raw() {
    python3 - "$1" "$2" "$W" <<'PY' | send_request |
import json, os, sys
op, edit, workdir = sys.argv[1:4]
task = {"name": "raw-t0", "trial": 0, "command": ["true"]}
if op == "submit":
    req = {"v": 1, "op": "submit", "command": ["true"], "workdir": workdir, "env": {}}
    task = req
else:
    req = {"v": 1, "op": "exp_run", "name": "raw", "kind": "Experiment",
           "spec": {"command": ["true"]}, "tasks": [task], "parallel": 0, "space": 1,
           "seed": 1, "workdir": workdir, "env": {"PATH": os.environ["PATH"]}}
exec(edit)
print(json.dumps(req))
PY
        python3 -c 'import json, sys; r = json.load(sys.stdin)
print("ok" if r["ok"] else "%d %s" % (r["code"], r["error"]))'
}

# The settings are read when the daemon starts: written before any command starts one.
printf 'default-retries = 2\ndefault-backoff = 0.3,0.6\n' > "$DROVER_HOME/drover.conf"

t "default-retries and default-backoff: what a task that names none gets"
id=$(drover submit -- false)
expect_exit 1 drover wait "$id"
expect_eq "$(field_of "$id" '["attempts"]')" 3 "attempts with default-retries = 2"
expect_eq "$(field_of "$id" '["retries"]')" 2 "the task's retries"
python3 - "$(drover show "$id" --json)" <<'PY'
import json, sys
a = json.loads(sys.argv[1])["attempt_list"]
gaps = [a[i + 1]["start_time"] - a[i]["end_time"] for i in range(2)]
# The setting's 0.3 s then 0.6 s, not core's own 5 s, 30 s.
assert 290 <= gaps[0] < 4000 and 590 <= gaps[1] < 4000, gaps
PY
id=$(drover submit --retries 0 -- false)
expect_exit 1 drover wait "$id"
expect_eq "$(field_of "$id" '["attempts"]')" 1 "--retries 0 wins over the setting"
id=$(drover submit --retries 1 --backoff 0 -- false)
expect_exit 1 drover wait "$id"
expect_eq "$(field_of "$id" '["attempts"]')" 2 "--retries 1 wins over the setting"

t "--gpu-type: only GPUs whose name contains it, in any case; alone it asks for one GPU"
id=$(drover submit --gpu-type 24g -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
drover wait "$id" >/dev/null
expect_eq "$(drover logs "$id")" 2 "the 24G GPU"
id=$(drover submit --gpu-type "gpu 16" --gpus 2 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
drover wait "$id" >/dev/null
expect_eq "$(drover logs "$id")" "0,1" "both 16G GPUs"
# The type restricts where it may run: with the 24G GPU taken, a 24G task waits though two
# other GPUs are idle.
busy=$(drover submit --gpu-type 24G -- sleep 300)
wait_until 10 state_is "$busy" running
waiting=$(drover submit --gpu-type 24G -- true)
barrier --gpus 1
expect_eq "$(state_of "$waiting")" queued "a 24G task while the 24G GPU is taken"

t "--gpu-type survives a daemon restart and a retry (the store keeps the pattern)"
# Before the pattern was stored, a restarted daemon restored the waiting task with no type:
# it started at once on an idle 16G GPU.
expect_eq "$(field_of "$waiting" '["request"]["gpu_type"]')" 24G "show --json"
drover shutdown >/dev/null
wait_until 10 sh -c "! [ -S '$DROVER_HOME/drover.sock' ]"
barrier --gpus 1
expect_eq "$(state_of "$waiting")" queued "a 24G task, after the restart, while the 24G GPU is taken"
drover cancel "$busy" >/dev/null
drover wait "$waiting" >/dev/null
expect_eq "$(state_of "$waiting")" succeeded
typed=$(drover submit --gpu-type 24G -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
drover wait "$typed" >/dev/null
busy=$(drover submit --gpu-type 24G -- sleep 300)
wait_until 10 state_is "$busy" running
drover retry "$typed" >/dev/null
barrier --gpus 1
expect_eq "$(state_of "$typed")" queued "a retried 24G task while the 24G GPU is taken"
drover cancel "$busy" >/dev/null
drover wait "$typed" >/dev/null
expect_eq "$(drover logs "$typed" | tail -1)" 2 "the retry ran on the 24G GPU"

t "--gpu-type that this machine cannot satisfy: refused, naming the GPUs it has"
before=$(task_count)
expect_exit 2 drover submit --gpu-type h100 -- true
expect_eq "$ERR" "drover submit: no GPU here matches gpu_type 'h100'; the GPUs here are: Fake GPU 16G, Fake GPU 24G"
expect_exit 2 drover submit --gpu-type 24G --gpus 2 -- true
[[ "$ERR" == "drover submit: asks for 2 GPUs"* ]] || fail "two 24G GPUs: $ERR"
expect_exit 2 drover submit --gpu-type "" -- true
expect_eq "$ERR" "drover submit: 'gpu_type' (--gpu-type) must be a string of 1 to 4096 bytes"
expect_eq "$(raw submit 'req["gpu_type"] = "H100"')" \
    "2 no GPU here matches gpu_type 'H100'; the GPUs here are: Fake GPU 16G, Fake GPU 24G"
expect_eq "$(task_count)" "$before" "nothing was stored"

t "a field out of range: the same words from the flag, a raw submit and a raw experiment task"
agree() { # agree FLAG VALUE KEY JSON
    expect_exit 2 drover submit "--$1" "$2" -- true
    local cli=${ERR#drover submit: }
    expect_eq "$(raw submit "req[\"$3\"] = $4")" "2 $cli" "a raw submit's $3 = $4"
    expect_eq "$(raw exp_run "task[\"$3\"] = $4")" "2 trial 0 (raw-t0): $cli" "a trial's $3 = $4"
}
agree gpus 65 gpus 65
agree gpus -1 gpus -1
agree cpus 0 cpus 0
agree cpus 1000001 cpus 1000001
agree retries 1001 retries 1001
agree priority -1000001 priority -1000001
agree gpu-mem 0 gpu_mem 0
agree mem 0 mem 0
expect_exit 2 drover submit --profile "" -- true
expect_eq "$ERR" "drover submit: 'profile' (--profile) must be a string of 1 to 4096 bytes"
expect_eq "$(raw submit 'req["profile"] = ""')" "2 ${ERR#drover submit: }" "a raw empty profile"
expect_eq "$(raw exp_run 'task["profile"] = ""')" "2 trial 0 (raw-t0): ${ERR#drover submit: }"
# What no flag can produce is refused alike by the two raw doors.
for edit in 'backoff = []' 'backoff = [5000, -1]' 'backoff = [1] * 9' 'env = {"A=B": "x"}' \
            'env = {"": "x"}' 'timeout_ms = 0' 'stall_ms = 1.5' 'exclusive = "yes"'; do
    key=${edit%% =*} value=${edit#*= }
    submit=$(raw submit "req[\"$key\"] = $value")
    [[ "$submit" == "2 '$key'"* ]] || fail "a raw submit with $edit: $submit"
    expect_eq "$(raw exp_run "task[\"$key\"] = $value")" "2 trial 0 (raw-t0): ${submit#2 }" \
        "a trial with $edit"
done
expect_eq "$(raw exp_run 'task["after"] = [1]')" \
    "2 trial 0 (raw-t0): 'after' belongs to a submission, not to one task of an experiment"
expect_eq "$(task_count)" "$before" "nothing was stored"

t "bad settings: one line naming the flag, or the file and line; the daemon does not start"
drover shutdown >/dev/null
wait_until 10 test ! -S "$DROVER_HOME/drover.sock"
expect_exit 2 drover daemon --default-retries 1001
expect_eq "$ERR" "drover daemon: --default-retries '1001': expected a whole number from 0 to 1000"
printf 'default-backoff = 5,,6\n' > "$DROVER_HOME/drover.conf"
expect_exit 2 drover daemon
expect_eq "$ERR" "drover daemon: $DROVER_HOME/drover.conf:1: default-backoff = 5,,6: expected seconds such as 5,30,60"
rm "$DROVER_HOME/drover.conf"

t "without the settings: no retry unless asked"
id=$(drover submit -- false)
expect_exit 1 drover wait "$id"
expect_eq "$(field_of "$id" '["attempts"]')" 1 "attempts with the default default-retries"
done_testing
