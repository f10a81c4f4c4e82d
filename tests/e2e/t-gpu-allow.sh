#!/usr/bin/env bash
# Which GPUs a task gets, on the fake NVML: only those drover is given (the `gpus` setting, by
# index or UUID, else the daemon's own CUDA_VISIBLE_DEVICES; tasks see the machine's indices),
# and for a multi-GPU task the closest ones by topology.
. "$(dirname "$0")/lib.sh"
use_fake_nvml "$TMP/nvml.state"
mkdir -p "$DROVER_HOME"
for g in 0 1 2; do
    echo "gpu $g name=\"Fake L4\" uuid=GPU-allow-$g mem_total=24G mem_used=0 util=0"
done > "$FAKE_NVML_STATE"
indices() { "$DROVER" gpus --json | python3 -c 'import json,sys; print(",".join(str(g["index"]) for g in json.load(sys.stdin)["gpus"]))'; }

t "the gpus setting: an index and a UUID, kept in the machine's order"
echo "gpus = GPU-allow-2, 0" > "$DROVER_HOME/drover.conf"
expect_eq "$(indices)" "0,2" "GPUs drover uses"
id=$("$DROVER" submit --gpus 2 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
"$DROVER" wait "$id" >/dev/null
expect_eq "$("$DROVER" logs "$id")" "0,2" "the task's CUDA_VISIBLE_DEVICES"
expect_exit 2 "$DROVER" submit --gpus 3 -- true
"$DROVER" shutdown >/dev/null

t "the daemon's CUDA_VISIBLE_DEVICES when no setting is given"
rm "$DROVER_HOME/drover.conf"
wait_until 10 test ! -S "$DROVER_HOME/drover.sock"
expect_eq "$(CUDA_VISIBLE_DEVICES=1 indices)" "1" "GPUs drover uses"
id=$("$DROVER" submit --gpus 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
"$DROVER" wait "$id" >/dev/null
expect_eq "$("$DROVER" logs "$id")" "1" "the task's CUDA_VISIBLE_DEVICES"
"$DROVER" shutdown >/dev/null

t "a two-GPU task gets two GPUs joined by NVLink, not the lowest free ones"
wait_until 10 test ! -S "$DROVER_HOME/drover.sock"
{ for g in 0 1 2 3; do echo "gpu $g name=\"Fake A100\" uuid=GPU-topo-$g mem_total=40G mem_used=0 util=0"; done
  echo "link 0 1 nvlink"; echo "link 2 3 nvlink"
  echo "link 0 2 socket"; echo "link 0 3 socket"; echo "link 1 2 socket"; echo "link 1 3 socket"
} > "$FAKE_NVML_STATE"
one=$("$DROVER" submit --gpus 1 -- sh -c "while [ ! -f $TMP/one.go ]; do sleep 0.05; done")
wait_until 10 state_is "$one" running
expect_eq "$(field_of "$one" '["gpus"]')" "[0]" "the one-GPU task"
two=$("$DROVER" submit --gpus 2 -- true)
"$DROVER" wait "$two" >/dev/null
expect_eq "$(field_of "$two" '["gpus"]')" "[2, 3]" "the two-GPU task (1 and 2 are only on one socket)"
touch "$TMP/one.go"
"$DROVER" wait "$one" >/dev/null
"$DROVER" shutdown >/dev/null

t "a GPU that is not there: the daemon says so and does not start"
wait_until 10 test ! -S "$DROVER_HOME/drover.sock"
echo "gpus = 7" > "$DROVER_HOME/drover.conf"
expect_exit 1 "$DROVER" daemon
[[ "$ERR" == *"GPU '7' is not on this machine"* ]] || fail "daemon error: $ERR"
printf 'sample = often\n' > "$DROVER_HOME/drover.conf"
expect_exit 2 "$DROVER" daemon
[[ "$ERR" == *"drover.conf:1: sample = often"* ]] || fail "daemon error: $ERR"
rm "$DROVER_HOME/drover.conf"

done_testing
