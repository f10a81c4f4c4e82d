#!/usr/bin/env bash
# Preemption under policy las (docs/SCHEDULING.md): a long preemptible training (the numpy
# example) is asked to yield by a short job, saves, and resumes from its checkpoint with the
# numbers of an uninterrupted run; a task that ignores the signal is killed after its grace and,
# the second time, is no longer preemptible (also after a restart); --preempt-signal; a task that
# is not preemptible is never stopped; templates; bad input.
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "/usr/bin/python3 has no numpy (apt-get install python3-numpy)"
export DROVER_FAKE_GPUS=1x16G
mkdir -p "$DROVER_HOME"
# Tiny queues so that seconds of run make a task "long": a task that has held its GPU for 0.36 s
# (0.0001 GPU-hours) is in the second queue, and may be preempted once it has run 0.5 s. No
# starvation guard, and no rule learnt from the tasks that ended: the order below is then exact.
cat > "$DROVER_HOME/drover.conf" <<'EOF'
policy = las
las-thresholds = 0.0001
las-min-run = 0.5s
las-starve = 0
las-starve-total = off
las-protect-wait = off
las-mrl = 0
EOF

attempts_py() { drover show "$1" --json | python3 -c "import json,sys; a=json.load(sys.stdin)['attempt_list']; $2"; }
running_attempt() { [ "$(state_of "$1")" = running ] && [ "$(field_of "$1" '["attempts"]')" = "$2" ]; }
stdout_has() { grep -q "$2" "$DROVER_HOME/runs/$1/$3/stdout" 2>/dev/null; }
said() { "$@" 2>&1 || true; }   # what a refused command says (pipefail would stop at its exit)
preemptions() { drover gpus --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["preemptions"])'; }

t "bad input: one line, exit 2, nothing stored"
before=$(task_count)
expect_exit 2 drover submit --preemptible=soon -- true
said drover submit --preemptible=soon -- true | grep -q -- "--preemptible 'soon'" || fail "no line naming --preemptible"
expect_exit 2 drover submit --preemptible --preempt-signal KILL -- true
said drover submit --preemptible --preempt-signal KILL -- true | grep -q "cannot be caught" || fail "KILL not explained"
expect_exit 2 drover submit --preempt-signal USR1 -- true
said drover submit --preempt-signal USR1 -- true | grep -q "give --preemptible too" || fail "signal without --preemptible not explained"
expect_exit 2 drover submit --preemptible --preempt-signal NOPE -- true
expect_eq "$(task_count)" "$before" "tasks stored by refused submissions"
expect_exit 2 env DROVER_HOME="$TMP/bad" "$DROVER" daemon --policy fastest
said env DROVER_HOME="$TMP/bad" "$DROVER" daemon --policy fastest | grep -q "policy 'fastest': expected drover or las" || fail "bad policy not explained"
said env DROVER_HOME="$TMP/bad" "$DROVER" daemon --las-thresholds 10,1 | grep -q "las-thresholds '10,1'" || fail "bad thresholds not explained"

t "show: --preemptible alone is SIGTERM with 60 s; =GRACE and --preempt-signal as given"
id=$(drover submit --hold --preemptible -- true)
drover show "$id" | grep -q "preemptible  yes: SIGTERM, 1m00s to exit" || fail "show: $(drover show "$id")"
expect_eq "$(field_of "$id" '["preempt"]["grace_ms"]')" 60000
id2=$(drover submit --hold --preemptible=90s --preempt-signal usr1 -- true)
expect_eq "$(field_of "$id2" '["preempt"]["grace_ms"]')" 90000
expect_eq "$(field_of "$id2" '["preempt"]["signal"]')" USR1
expect_eq "$(field_of "$id2" '["preemptible"]')" true
id3=$(drover submit --hold -- true)
expect_eq "$(field_of "$id3" '["preemptible"]')" false
drover cancel "$id" "$id2" "$id3" >/dev/null

t "a long preemptible training yields to a short job and resumes with identical results"
ref=$(/usr/bin/python3 examples/numpy/train.py --epochs 10 | grep '^epoch')
long=$(drover submit --gpus 1 --preemptible=20s -- /usr/bin/python3 examples/numpy/train.py --epochs 10 --epoch-sleep 0.3)
wait_until 60 stdout_has "$long" "^epoch 2 " 1
short=$(drover submit --gpus 1 -- sh -c 'echo short done')
drover wait "$short" >/dev/null
drover wait "$long" >/dev/null || fail "the long training did not succeed: $(drover show "$long")"
attempts_py "$long" '
assert [x["outcome"] for x in a] == ["preempted", "succeeded"], a
assert a[0]["exit_code"] == 143, a[0]     # the example exits 143 on SIGTERM
assert "preempted after" in a[0]["reason"] and "it exited in" in a[0]["reason"], a[0]'
expect_eq "$(field_of "$long" '["retries"]')" 0 "retries (a preemption uses none)"
python3 - "$(drover show "$long" --json)" "$(drover show "$short" --json)" <<'PY'
import json, sys
a = json.loads(sys.argv[1])["attempt_list"]
s = json.loads(sys.argv[2])["attempt_list"][0]
# The short job ran in between: after the training yielded its GPU, before it resumed.
assert s["start_time"] >= a[0]["end_time"], (s, a)
assert s["end_time"] <= a[1]["start_time"], (s, a)
PY
got=$(cat "$DROVER_HOME/runs/$long/1/stdout" "$DROVER_HOME/runs/$long/2/stdout" | grep '^epoch')
expect_eq "$got" "$ref" "epoch lines of the preempted run against an uninterrupted one"
k=$(grep -c '^epoch' "$DROVER_HOME/runs/$long/1/stdout")
grep -q "^resumed from epoch $k\$" "$DROVER_HOME/runs/$long/2/stdout" || fail "attempt 2 did not resume from epoch $k"
[ "$(preemptions)" -ge 1 ] || fail "gpus --json counts no preemption"

t "a preemption whose daemon died (kill -9) is finished by the next one: queued again, resumed"
ref=$(/usr/bin/python3 examples/numpy/train.py --epochs 6 | grep '^epoch')
kl=$(drover submit --gpus 1 --preemptible=20s -- /usr/bin/python3 examples/numpy/train.py --epochs 6 --epoch-sleep 0.3)
wait_until 60 stdout_has "$kl" "^epoch 2 " 1
dpid=$(cat "$DROVER_HOME/daemon.lock")
kill -9 "$dpid"
wait_until 30 proc_gone "$dpid"
# What the daemon does to preempt, done while none runs: SIGUSR1 to the attempt's supervisor.
read -r spid _ < "$DROVER_HOME/runs/$kl/1/pid"
kill -USR1 "$spid"
wait_until 30 test -e "$DROVER_HOME/runs/$kl/1/status"
drover wait "$kl" >/dev/null || fail "not resumed after the restart: $(drover show "$kl")"
attempts_py "$kl" 'assert [x["outcome"] for x in a] == ["preempted", "succeeded"], a'
got=$(cat "$DROVER_HOME/runs/$kl/1/stdout" "$DROVER_HOME/runs/$kl/2/stdout" | grep '^epoch')
expect_eq "$got" "$ref" "epoch lines across the restart"

t "--preempt-signal USR1: the task gets USR1, not TERM, and its end is a preemption"
usr=$(drover submit --gpus 1 --preemptible=10s --preempt-signal USR1 -- sh -c \
    'trap "echo got-usr1; exit 3" USR1; trap "echo got-term; exit 4" TERM; echo up; while :; do sleep 0.05; done')
wait_until 30 stdout_has "$usr" "^up" 1
s2=$(drover submit --gpus 1 -- true)
drover wait "$s2" >/dev/null
wait_until 30 running_attempt "$usr" 2
grep -q got-usr1 "$DROVER_HOME/runs/$usr/1/stdout" || fail "no USR1: $(cat "$DROVER_HOME/runs/$usr/1/stdout")"
attempts_py "$usr" 'assert a[0]["outcome"] == "preempted" and a[0]["exit_code"] == 3, a[0]'
drover cancel "$usr" >/dev/null

t "a task that ignores the signal is killed after its grace; twice: no longer preemptible"
stub=$(drover submit --gpus 1 --preemptible=1s -- sh -c 'trap "" TERM; echo up; while :; do sleep 0.05; done')
wait_until 30 stdout_has "$stub" "^up" 1
a1=$(drover submit --gpus 1 -- true)
drover wait "$a1" >/dev/null
wait_until 30 running_attempt "$stub" 2
wait_until 30 stdout_has "$stub" "^up" 2
a2=$(drover submit --gpus 1 -- true)
drover wait "$a2" >/dev/null
wait_until 30 running_attempt "$stub" 3
attempts_py "$stub" '
assert [x["outcome"] for x in a[:2]] == ["preempted", "preempted"], a
assert all("did not exit within its grace" in x["reason"] for x in a[:2]), a
assert a[0]["signal"] == 9, a[0]
assert "no longer preemptible" in a[1]["reason"], a[1]'
expect_eq "$(field_of "$stub" '["preemptible"]')" false
drover show "$stub" | grep -q "preemptible  no longer: it did not exit within its preemption grace too often" \
    || fail "show: $(drover show "$stub")"
# It stays so across a restart of the daemon (the store keeps it), while it runs on, adopted.
n=$(preemptions)
drover shutdown >/dev/null
wait_until 30 running_attempt "$stub" 3
c=$(drover submit --gpus 1 -- true)
wait_until 30 state_is "$c" queued
# Nothing to wait for when nothing may happen: give las 2 s (four minimum runs) to preempt.
sleep 2
expect_eq "$(state_of "$stub")" running "the non-preemptible task"
expect_eq "$(field_of "$stub" '["attempts"]')" 3
expect_eq "$(state_of "$c")" queued "the short job behind it"
expect_eq "$(preemptions)" 0 "preemptions since the restart (was $n before)"
drover cancel "$stub" >/dev/null
drover wait "$c" >/dev/null

t "a task that is not preemptible is never stopped: the short job waits for its end"
np=$(drover submit --gpus 1 -- sh -c 'echo up; sleep 1.5')
wait_until 30 stdout_has "$np" "^up" 1
s3=$(drover submit --gpus 1 -- true)
drover wait "$s3" >/dev/null
drover wait "$np" >/dev/null
expect_eq "$(field_of "$np" '["attempts"]')" 1
python3 - "$(drover show "$np" --json)" "$(drover show "$s3" --json)" <<'PY'
import json, sys
n = json.loads(sys.argv[1])["attempt_list"]
s = json.loads(sys.argv[2])["attempt_list"][0]
assert n[0]["outcome"] == "succeeded", n
assert s["start_time"] >= n[0]["end_time"], (s, n)
PY

t "the off-peak window closes: a preemptible off-peak task yields and waits for the next one"
drover shutdown >/dev/null
wait_until 10 bash -c "! [ -S '$DROVER_HOME/drover.sock' ]"
# A window that opened a moment ago and closes 6 s from now (local time, HH:MM:SS).
now_s=$(date +%s)
close_s=$((now_s + 6))
echo "off-peak = $(date -d "@$((now_s - 2))" +%H:%M:%S)-$(date -d "@$close_s" +%H:%M:%S)" >> "$DROVER_HOME/drover.conf"
op=$(drover submit --off-peak --preemptible=20s -- /usr/bin/python3 examples/numpy/train.py --epochs 200 --epoch-sleep 0.2)
stay=$(drover submit --off-peak -- sh -c "echo up; while [ ! -e '$TMP/stop' ]; do sleep 0.05; done")
wait_until 30 stdout_has "$op" "^epoch 1 " 1
wait_until 30 stdout_has "$stay" "^up" 1
[ "$(date +%s)" -lt "$close_s" ] || fail "the window closed before the tasks ran: too slow a machine for this test"
wait_until 30 bash -c "[ \"\$('$DROVER' show $op --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"state\"])')\" = queued ]"
attempts_py "$op" '
assert [x["outcome"] for x in a] == ["preempted"], a
assert a[0]["exit_code"] == 143, a[0]'
[ "$(field_of "$op" '["attempt_list"][0]["end_time"]')" -ge $(( (close_s - 1) * 1000 )) ] ||
    fail "preempted before the window closed: $(field_of "$op" '["attempt_list"]')"
# The window's reason with its time, then where las has it.
[[ $(field_of "$op" '["why"]') =~ ^off-peak:\ the\ window\ opens\ at\ [^\;]*[0-9]\;\ las\ queue\ 1\ of\ 2:\ 0.0\ GPU-hours\ attained,\ preempted\ 1\ time$ ]] ||
    fail "why: $(field_of "$op" '["why"]')"
# The one that is not preemptible runs on after the close.
expect_eq "$(state_of "$stay")" running "the non-preemptible off-peak task after the close"
touch "$TMP/stop"
drover wait "$stay" >/dev/null
expect_eq "$(field_of "$stay" '["attempts"]')" 1
drover cancel "$op" >/dev/null

t "templates: preemptible: and preempt_signal:"
cat > "$TMP/pipe.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: pre }
spec:
  preemptible: true
  stages:
    - name: train
      command: [sh, -c, "true"]
      preemptible: 45s
      preempt_signal: USR2
    - name: eval
      command: [sh, -c, "true"]
      needs: [train]
YAML
drover exp run "$TMP/pipe.yaml" >/dev/null
ids=$(drover ls --all --json | python3 -c 'import json,sys; print(" ".join(str(t["id"]) for t in json.load(sys.stdin) if (t.get("name") or "").startswith(("train","eval","pre"))))')
found=0
for i in $ids; do
    case "$(field_of "$i" '["preempt"]["grace_ms"]')" in
    45000) expect_eq "$(field_of "$i" '["preempt"]["signal"]')" USR2; found=$((found + 1)) ;;
    60000) expect_eq "$(field_of "$i" '["preempt"]["signal"]')" TERM; found=$((found + 1)) ;;
    esac
done
expect_eq "$found" 2 "stages with their preemption settings (ids: $ids)"
cat > "$TMP/bad.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: bad }
spec:
  stages:
    - name: train
      command: [sh, -c, "true"]
      preempt_signal: KILL
YAML
expect_exit 2 drover exp run "$TMP/bad.yaml"
said drover exp run "$TMP/bad.yaml" | grep -q "preempt_signal" || fail "bad template: no line naming preempt_signal"

done_testing
