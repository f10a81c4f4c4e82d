#!/usr/bin/env bash
# GPU placement: exclusive GPUs, sharing by --gpu-mem with best fit, CPU accounting, priorities.
export DROVER_FAKE_GPUS=2x16G DROVER_FAKE_CPUS=2
. "$(dirname "$0")/lib.sh"

gate="$TMP/go"
blocker() { echo "echo \$CUDA_VISIBLE_DEVICES; while [ ! -f $gate ]; do sleep 0.05; done"; }
gpus_of() { field_of "$1" '["gpus"]'; }
running_count() { drover ls --state running --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

t "four 6G tasks pack two per 16G GPU, on a 2-core machine"
ids=()
for i in 1 2 3 4; do ids+=("$(drover submit --gpus 1 --gpu-mem 6G -- sh -c "$(blocker)")"); done
wait_until 20 bash -c "[ \$('$DROVER' ls --state running --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') = 4 ]"
g0=0; g1=0
for id in "${ids[@]}"; do
    case $(gpus_of "$id") in "[0]") g0=$((g0 + 1)) ;; "[1]") g1=$((g1 + 1)) ;; *) fail "bad gpus for $id" ;; esac
done
expect_eq "$g0 $g1" "2 2" "tasks per GPU"
drover gpus --json | python3 -c '
import json,sys
g = json.load(sys.stdin)["gpus"]
assert [x["mem_claimed"] for x in g] == [12 << 30, 12 << 30], g
assert [len(x["tasks"]) for x in g] == [2, 2], g'

t "a fifth 6G task waits: no GPU has 6G free"
id5=$(drover submit --gpus 1 --gpu-mem 6G -- true)
barrier
state_is "$id5" queued || fail "a fifth 6G task started with no room"
touch "$gate"
drover wait "${ids[@]}" "$id5"
rm -f "$gate"

t "best fit: small tasks fill one GPU and leave the other whole"
a=$(drover submit --gpus 1 --gpu-mem 4G -- sh -c "$(blocker)")
wait_until 10 state_is "$a" running
b=$(drover submit --gpus 1 --gpu-mem 4G -- sh -c "$(blocker)")
wait_until 10 state_is "$b" running
expect_eq "$(gpus_of "$b")" "$(gpus_of "$a")" "second small task joins the first GPU"
whole=$(drover submit --gpus 1 -- sh -c "$(blocker)")
wait_until 10 state_is "$whole" running
[ "$(gpus_of "$whole")" != "$(gpus_of "$a")" ] || fail "the exclusive task shares a GPU"
t "an exclusive task keeps shared ones off its GPU"
c=$(drover submit --gpus 1 --gpu-mem 1G -- sh -c "$(blocker)")
wait_until 10 state_is "$c" running
expect_eq "$(gpus_of "$c")" "$(gpus_of "$a")" "the shared task joins the shared GPU, not the exclusive one"
touch "$gate"
drover wait "$a" "$b" "$whole" "$c"
rm -f "$gate"

t "two GPUs for one task: CUDA_VISIBLE_DEVICES lists both"
id=$(drover submit --gpus 2 -- sh -c 'echo $CUDA_VISIBLE_DEVICES')
drover wait "$id"
expect_eq "$(drover logs "$id")" "0,1" "CUDA_VISIBLE_DEVICES"

t "CPU-only tasks count one CPU each: two run at once on 2 cores"
ids=()
for i in 1 2 3; do ids+=("$(drover submit -- sh -c "while [ ! -f $gate ]; do sleep 0.05; done")"); done
wait_until 10 state_is "${ids[1]}" running
barrier --gpus 1 --gpu-mem 1G
state_is "${ids[2]}" queued || fail "a third CPU task runs on 2 CPUs"
t "a GPU task without --cpus is not held back by busy CPUs"
g=$(drover submit --gpus 1 --gpu-mem 1G -- true)
drover wait "$g"
touch "$gate"
drover wait "${ids[@]}"
rm -f "$gate"

t "higher priority first, FIFO within a priority"
drover drain
lo=$(drover submit --priority 0 --gpus 2 -- true)
hi=$(drover submit --priority 10 --gpus 2 -- true)
lo2=$(drover submit --priority 0 --gpus 2 -- true)
drover undrain
drover wait "$lo" "$hi" "$lo2"
s_lo=$(field_of "$lo" '["start_time"]'); s_hi=$(field_of "$hi" '["start_time"]'); s_lo2=$(field_of "$lo2" '["start_time"]')
[ "$s_hi" -le "$s_lo" ] || fail "priority 10 started after priority 0"
[ "$s_lo" -le "$s_lo2" ] || fail "FIFO within a priority"
done_testing
