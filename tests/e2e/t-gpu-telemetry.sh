#!/usr/bin/env bash
# Real GPUs, through the fake NVML library (tests/fake-nvml): the daemon loads it with dlopen as
# it would load the driver's, samples it, and acts on what it sees — learned claims, a GPU whose
# real free memory is too low, an out-of-memory retry with a larger claim, a stall, a GPU that
# vanishes or reports an XID, Prometheus metrics checked by promtool.
. "$(dirname "$0")/lib.sh"
use_fake_nvml "$TMP/nvml.state"
W=$TMP/w
mkdir -p "$W" "$DROVER_HOME"
PORT=$(free_port)
cat > "$DROVER_HOME/drover.conf" <<CONF
# short periods, so that the test waits on conditions for a short time
sample = 200ms
health = 1s
metrics = 127.0.0.1:$PORT
CONF

# The fake's state: two 16G GPUs joined by NVLink, plus whatever lines are given.
EXTRA=""
gpu_line() { # gpu_line INDEX [KEY=VALUE…]
    local i=$1
    shift
    echo "gpu $i name=\"Fake H100\" uuid=GPU-fake-$i mem_total=16G util=0 mem_util=0 temp=4$i power=10000$i ecc=0 $*"
}
write_state() {
    { gpu_line 0 "${G0:-mem_used=0}"; gpu_line 1 "${G1:-mem_used=0}"; echo "link 0 1 nvlink"
      printf '%s\n' "$EXTRA"; } > "$FAKE_NVML_STATE.tmp"
    mv "$FAKE_NVML_STATE.tmp" "$FAKE_NVML_STATE"
}
write_state

snap() { "$DROVER" gpus --json | python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }
sampled() { [ "$(snap 'print(d["sampled_at"] is not None)')" = True ]; }
# proc_seen GPU TASK: the daemon has matched a process on GPU to the task.
proc_seen() {
    [ "$(snap "print(any(p['task'] == $2 for p in d['gpus'][$1]['processes']))")" = True ]
}
gpu_of() { field_of "$1" '["gpus"][0]'; }
attempts_are() { [ "$(field_of "$1" '["attempts"]')" = "$2" ]; }
offline_reason_is() { [ "$(snap "print(d['gpus'][$1]['offline_reason'])")" = "$2" ]; }
all_busy() { [ "$(snap 'print(all(g["busy"] for g in d["gpus"]))')" = True ]; }
util_is() { [ "$(snap "print(d['gpus'][$1]['util'])")" = "$2" ]; }
mem_used_is() { [ "$(snap "print(d['gpus'][$1]['mem_used'])")" = "$2" ]; }

t "the daemon loads NVML and samples it"
wait_until 10 sampled
expect_eq "$(snap 'print(d["source"])')" nvml "inventory source"
expect_eq "$(snap 'g=d["gpus"][1]; print(g["name"], g["uuid"], g["mem_total"], g["temp_c"], g["power_w"], g["util"])')" \
    "Fake H100 GPU-fake-1 17179869184 41 100.001 0" "GPU 1 as sampled"
out=$("$DROVER" gpus)
[[ "$out" == *"Fake H100"* && "$out" == *"GPU-fake-0"* ]] || fail "drover gpus: $out"

t "a repeated job is claimed at what its profile used before"
a=$("$DROVER" submit --gpus 1 --profile train -- sh -c "echo \$\$ > $W/a.pid; while [ ! -f $W/a.go ]; do sleep 0.05; done")
wait_until 10 test -s "$W/a.pid"
ga=$(gpu_of "$a")
EXTRA="proc $ga $(cat "$W/a.pid") 6G"
if [ "$ga" = 0 ]; then G0="mem_used=6G"; else G1="mem_used=6G"; fi
write_state
wait_until 10 proc_seen "$ga" "$a"
touch "$W/a.go"
"$DROVER" wait "$a" >/dev/null || fail "task $a failed"
expect_eq "$(field_of "$a" '["attempt_list"][0]["peak_gpu_mem"]')" $((6 << 30)) "peak of task $a"
EXTRA=""; G0=""; G1=""; write_state
wait_until 10 mem_used_is "$ga" 0   # the daemon has seen task $a's memory go
b=$("$DROVER" submit --gpus 1 --profile train -- sh -c "while [ ! -f $W/bc.go ]; do sleep 0.05; done")
c=$("$DROVER" submit --gpus 1 --profile train -- sh -c "while [ ! -f $W/bc.go ]; do sleep 0.05; done")
wait_until 10 state_is "$b" running
wait_until 10 state_is "$c" running
# 6G plus the 20% margin, rounded up to 256M: 7.25G each, so both share one 16G GPU.
expect_eq "$(field_of "$b" '["request"]["gpu_mem"]')" $((29 << 28)) "learned claim"
expect_eq "$(field_of "$b" '["claim_source"]')" learned "claim source"
expect_eq "$(gpu_of "$b")" "$(gpu_of "$c")" "the two learned tasks share a GPU"
"$DROVER" show "$b" | grep -q "learned from earlier runs" || fail "show does not say the claim was learned"
d=$("$DROVER" submit --gpus 1 --exclusive --profile train -- true)
"$DROVER" wait "$d" >/dev/null
expect_eq "$(field_of "$d" '["request"]["gpu_mem"]')" 0 "--exclusive ignores what was learned"
touch "$W/bc.go"
"$DROVER" wait "$b" "$c" >/dev/null

t "a GPU whose real free memory is too low is not used"
G0="mem_used=14G"; EXTRA="proc 0 999999 14G"; write_state
wait_until 10 proc_seen 0 None
e=$("$DROVER" submit --gpu-mem 4G -- sh -c "while [ ! -f $W/e.go ]; do sleep 0.05; done")
wait_until 10 state_is "$e" running
expect_eq "$(gpu_of "$e")" 1 "placed beside the foreign process"
f=$("$DROVER" submit --gpus 1 -- true)  # a whole GPU: 0 is used by a stranger, 1 is shared
barrier --gpus 0
state_is "$f" queued || fail "task $f started on a GPU that is not free: $(state_of "$f")"
G0="mem_used=0"; EXTRA=""; write_state
"$DROVER" wait "$f" >/dev/null || fail "task $f failed"
expect_eq "$(gpu_of "$f")" 0 "the exclusive task took GPU 0 once it was free"
touch "$W/e.go"
"$DROVER" wait "$e" >/dev/null

t "the utilisation rule: nothing joins a busy GPU until it quiets down"
G0="mem_used=0 util=95"; G1="mem_used=0 util=90"; write_state
wait_until 10 all_busy
u=$("$DROVER" submit --gpu-mem 2G -- true)
barrier --gpus 0
state_is "$u" queued || fail "task $u joined a busy GPU: $(state_of "$u")"
G0="mem_used=0 util=60"; G1="mem_used=0 util=60"; write_state   # between the marks: still busy
wait_until 10 util_is 0 60
barrier --gpus 0
state_is "$u" queued || fail "task $u started above busy-low"
why=$(field_of "$u" '["why"]')
case "$why" in
*"GPU0 "*" busy 60%"*"GPU1 "*" busy 60%") ;;
*) fail "why task $u waits, with the GPUs' utilisation: $why" ;;
esac
G0="mem_used=0 util=40"; write_state
"$DROVER" wait "$u" >/dev/null || fail "task $u"
expect_eq "$(gpu_of "$u")" 0 "the GPU that quieted down"
G0=""; G1=""; write_state

t "out of GPU memory: retried with a larger claim, without using a retry"
g=$("$DROVER" submit --gpu-mem 4G --retries 0 -- sh -c 'if [ "$DROVER_ATTEMPT" = 1 ]; then echo "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi')
"$DROVER" wait "$g" >/dev/null || fail "task $g: $(state_of "$g")"
expect_eq "$(field_of "$g" '["attempt_list"][0]["outcome"]')" oom "attempt 1 outcome"
expect_eq "$(field_of "$g" '["attempt_list"][1]["gpu_mem"]')" $((6 << 30)) "attempt 2 claim (4G x 1.5)"
expect_eq "$(field_of "$g" '["claim_source"]')" oom "claim source"
h=$("$DROVER" submit --gpus 1 --retries 0 -- sh -c 'echo "CUBLAS_STATUS_ALLOC_FAILED" >&2; exit 1')
"$DROVER" wait "$h" >/dev/null && fail "task $h succeeded"
expect_eq "$(state_of "$h")" failed "out of memory on a whole GPU fails"

t "a stalled task is stopped, with the reason"
s=$("$DROVER" submit --stall 1s --retries 0 -- sleep 60)
wait_until 15 state_is "$s" failed
field_of "$s" '["reason"]' | grep -q "stalled" || fail "reason: $(field_of "$s" '["reason"]')"
expect_eq "$(field_of "$s" '["attempt_list"][0]["outcome"]')" stalled "attempt outcome"
v=$("$DROVER" submit --stall 1s --retries 0 -- sh -c 'for i in 1 2 3 4 5 6; do echo tick; sleep 0.4; done')
"$DROVER" wait "$v" >/dev/null || fail "a task that keeps writing was stopped: $(field_of "$v" '["reason"]')"

t "a quiet task is not stalled while its GPU is busy; once it is idle, the stall counts from then"
G0="mem_used=0 util=20"; G1="mem_used=0 util=20"; write_state   # busy, under busy-high
b=$("$DROVER" submit --gpus 1 --stall 1s --retries 0 -- sleep 2.5)
"$DROVER" wait "$b" >/dev/null || fail "a task on a busy GPU was stopped: $(field_of "$b" '["reason"]')"
c=$("$DROVER" submit --gpus 1 --stall 1s --retries 0 -- sleep 60)
wait_until 10 state_is "$c" running
ran_ms() { python3 -c "import json,sys,time; a=json.load(sys.stdin)['attempt_list'][-1]; print(int(time.time()*1000) - a['start_time'])" < <("$DROVER" show "$1" --json); }
over_ms() { [ "$(ran_ms "$1")" -ge "$2" ]; }
wait_until 10 over_ms "$c" 1500   # quiet for longer than --stall, but its GPU busy
expect_eq "$(state_of "$c")" running "a quiet task on a busy GPU"
idle_from=$(date +%s%3N)
G0=""; G1=""; write_state
wait_until 10 state_is "$c" failed
"$DROVER" show "$c" --json | python3 -c '
import json, re, sys
t = json.load(sys.stdin); a = t["attempt_list"][0]; idle_from = int(sys.argv[1])
assert a["outcome"] == "stalled", a
m = re.search(r"for ([0-9.]+)s \(--stall 1\.0s\)", t["reason"]); assert m, t["reason"]
assert a["end_time"] - idle_from >= 1000, ("stopped before 1 s of idle GPU", a["end_time"] - idle_from)
assert 1.0 <= float(m.group(1)) <= (a["end_time"] - idle_from) / 1000 + 0.1, (t["reason"], a["end_time"] - idle_from)
' "$idle_from" || fail "stall after the GPU went idle"

t "a GPU that vanishes is drained and its task requeued elsewhere"
k=$("$DROVER" submit --gpus 1 -- sh -c "while [ ! -f $W/k.go ]; do sleep 0.05; done")
wait_until 10 state_is "$k" running
gk=$(gpu_of "$k")
if [ "$gk" = 0 ]; then G0="lost=1"; else G1="lost=1"; fi
write_state
wait_until 15 attempts_are "$k" 2
wait_until 10 state_is "$k" running
expect_eq "$(field_of "$k" '["attempt_list"][0]["outcome"]')" gpu_fault "attempt 1 outcome"
[ "$(gpu_of "$k")" != "$gk" ] || fail "task $k restarted on the GPU that vanished"
expect_eq "$(snap "print(d['gpus'][$gk]['offline'], d['gpus'][$gk]['offline_reason'])")" \
    "True not answering" "the lost GPU"
touch "$W/k.go"
"$DROVER" wait "$k" >/dev/null
G0=""; G1=""; write_state
"$DROVER" undrain
expect_eq "$(snap "print(d['gpus'][$gk]['offline'])")" False "back in service after undrain"

t "an XID error drains the GPU"
EXTRA="xid 1 79"; write_state
wait_until 10 offline_reason_is 1 "XID 79"

t "drover top draws the GPUs, their tasks and the queue"
q=$("$DROVER" submit --gpus 2 --name waiting-for-two -- true)   # GPU 1 is drained: it waits
frame=$("$DROVER" top --once)
for want in "Fake H100" "waiting-for-two" "XID 79"; do
    [[ "$frame" == *"$want"* ]] || fail "drover top --once has no '$want': $frame"
done
[[ "$frame" != *$'\e'* ]] || fail "drover top --once into a pipe wrote escape sequences"
"$DROVER" undrain
"$DROVER" wait "$q" >/dev/null

t "Prometheus metrics, checked by promtool"
python3 - "$PORT" > "$W/metrics.txt" <<'PY' || fail "cannot fetch /metrics"
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode(), end="")
PY
for m in drover_gpu_utilization_ratio drover_gpu_memory_total_bytes drover_tasks drover_queue_length \
         drover_attempts_total drover_schedule_latency_seconds_bucket; do
    grep -q "^$m" "$W/metrics.txt" || fail "/metrics has no $m"
done
grep -q 'drover_attempts_total{outcome="oom"} 2' "$W/metrics.txt" || fail "the two out-of-memory attempts are not counted"
have_promtool=1
if command -v promtool >/dev/null; then
    promtool check metrics < "$W/metrics.txt" || fail "promtool rejects /metrics"
else
    have_promtool=0   # the rest still runs; the test is reported skipped at the end
fi

t "a stall is caught at its deadline, not at the next sample, and the reason says how long"
# Samples 5 s apart and --stall 2s: the task is stopped about 2 s after its last output (not at
# the sample after that), and its reason gives the idle time seen, which its log's time confirms.
pid=$(cat "$DROVER_HOME/daemon.lock")
"$DROVER" shutdown >/dev/null
wait_until 10 proc_gone "$pid"
sed -i 's/^sample = .*/sample = 5s/' "$DROVER_HOME/drover.conf"
s=$("$DROVER" submit --stall 2s --retries 0 -- sh -c 'echo quiet from now on; exec sleep 60')
wait_until 20 state_is "$s" failed
"$DROVER" show "$s" --json | python3 -c '
import json, os, re, sys
t = json.load(sys.stdin); a = t["attempt_list"][0]
assert a["outcome"] == "stalled", a
wrote = os.stat(os.path.join(a["run_dir"], "stdout")).st_mtime_ns // 1000000
idle = a["end_time"] - wrote
assert 2000 <= idle <= 5000, ("stopped %d ms after its last output (--stall 2s)" % idle)
m = re.search(r"for ([0-9.]+)s \(--stall 2\.0s\)", t["reason"]); assert m, t["reason"]
assert abs(float(m.group(1)) * 1000 - idle) <= 1000, (t["reason"], idle)
' || fail "stall timing"

[ "$have_promtool" = 1 ] || skip "promtool not installed (scripts/install-deps installs it): /metrics not checked by it; every other check passed"
done_testing
