#!/usr/bin/env bash
# Backfill: a lower-priority task starts ahead of a blocked higher-priority one only when its
# time limit proves it cannot delay it, or it uses none of the GPUs reserved for it.
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"

t "a blocked 2-GPU task reserves GPUs; a short task with a time limit backfills"
a=$(drover submit --gpus 1 --timeout 10m -- sh -c "while [ ! -f $TMP/gate ]; do sleep 0.05; done")
wait_until 10 state_is "$a" running
big=$(drover submit --priority 10 --gpus 2 -- true)
short=$(drover submit --gpus 1 --timeout 30s -- true)
drover wait "$short" || fail "the short task did not backfill"
expect_eq "$(state_of "$big")" queued "the big task waits for the running one"
expect_eq "$(state_of "$a")" running

t "a task without a time limit does not take the reserved GPU"
nolimit=$(drover submit --gpus 1 -- true)
long=$(drover submit --gpus 1 --timeout 2h -- true)
barrier
expect_eq "$(state_of "$nolimit")" queued "no time limit: it could delay the big task"
expect_eq "$(state_of "$long")" queued "a limit that ends after the running task's could delay it"
expect_eq "$(state_of "$big")" queued

t "CPU-only work uses no reserved GPU: it runs"
cpu=$(drover submit -- true)
drover wait "$cpu"

t "when the running task ends, the big task starts first"
touch "$TMP/gate"
drover wait "$a" "$big" "$nolimit" "$long"
s_big=$(field_of "$big" '["start_time"]')
s_nolimit=$(field_of "$nolimit" '["start_time"]')
[ "$s_big" -le "$s_nolimit" ] || fail "the backfill candidate started before the reserved task"
done_testing
