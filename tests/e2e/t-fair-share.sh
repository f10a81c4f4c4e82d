#!/usr/bin/env bash
# Fair share and user limits on a shared machine (system mode, real users, core/users.c):
# a user with a queue of 1-GPU tasks and another who submits one later — the second user's task
# takes the next GPU that frees; `user-gpus.USER = 1` keeps that user to one GPU while another
# GPU is idle, and `drover show` says why; `user-queued` refuses a submission over it; `drover
# users` shows each user's figures. Needs root (useradd): exits 77 otherwise.
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"

system_setup fair
system_user A a
system_user B b
GATES=$SYS/gates
mkdir -p "$GATES"
chmod 0777 "$GATES"
system_daemon_start "user-gpus.$B = 1" "user-queued.$B = 3"

# A task that runs until its gate (a file named after its id) is opened.
GATED="while [ ! -e $GATES/\$DROVER_TASK_ID ]; do sleep 0.05; done"
open_gate() { touch "$GATES/$1"; }
running() { "$DROVER" ls --json | python3 -c "
import json, sys
print(sum(1 for t in json.load(sys.stdin) if t['state'] == 'running' and ('$1' == '' or t['user'] == '$1')))"; }
reason_of() { field_of "$1" '["reason"]'; }

t "user-gpus.B = 1: B's second 1-GPU task waits though a GPU is idle, and says why"
b1=$(as "$B" "$DROVER" submit --gpus 1 -- sh -c "$GATED")
b2=$(as "$B" "$DROVER" submit --gpus 1 -- sh -c "$GATED")
wait_until 10 state_is "$b1" running
barrier --gpus 1 # an unlimited user's task still gets the idle GPU: the pass has run
expect_eq "$(state_of "$b2")" queued "B's second task, with B at its limit"
expect_eq "$(reason_of "$b2")" "user limit: 1 GPU in use" "the reason"
open_gate "$b1"
wait_until 10 state_is "$b2" running
open_gate "$b2"
as "$B" "$DROVER" wait "$b1" "$b2" >/dev/null || fail "B's tasks did not succeed"

t "user-queued.B = 3: a submission that would put B over it is refused, nothing stored"
before=$(task_count)
held=$(as "$B" "$DROVER" submit --hold -- true)
expect_exit 1 as "$B" "$DROVER" submit --array 0-2 -- true
expect_eq "$ERR" "drover submit: user limit: 1 tasks waiting, 3 more asked (user-queued = 3)"
expect_eq "$(task_count)" $((before + 1)) "tasks stored"
as "$B" "$DROVER" cancel "$held" >/dev/null

t "fair share: A queues 20 one-GPU tasks; B's one task, submitted later, takes the next free GPU"
ids=()
for _ in $(seq 20); do
    ids+=("$(as "$A" "$DROVER" submit --gpus 1 -- sh -c "$GATED")")
done
wait_until 10 state_is "${ids[0]}" running
wait_until 10 state_is "${ids[1]}" running
b3=$(as "$B" "$DROVER" submit --gpus 1 -- sh -c "$GATED")
expect_eq "$(state_of "$b3")" queued "B's task while A holds both GPUs"
open_gate "${ids[0]}"
wait_until 10 state_is "$b3" running
expect_eq "$(state_of "${ids[2]}")" queued "A's third task, behind B's"
expect_eq "$(running "$A")" 1 "A's tasks running"
users=$("$DROVER" users --json)
python3 - "$users" "$A" "$B" <<'PY' || fail "drover users: $users"
import json, sys
users = {u["user"]: u for u in json.loads(sys.argv[1])}
a, b = users[sys.argv[2]], users[sys.argv[3]]
assert a["running"] == 1 and a["gpus"] == 1 and a["queued"] >= 18, a
assert b["running"] == 1 and b["limits"]["gpus"] == 1, b
assert a["usage_gpu_seconds"] > b["usage_gpu_seconds"] >= 0, (a, b)
PY
for id in "${ids[@]}" "$b3"; do open_gate "$id"; done
as "$A" "$DROVER" wait "${ids[@]}" >/dev/null || fail "A's tasks did not all succeed"

done_testing
