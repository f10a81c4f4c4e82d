#!/usr/bin/env bash
# Why a task waits (core/why.c, daemon/why.c): each reason as `drover show` (whole, in "why" and
# beside the state) and `drover ls` (the REASON column, cut) show it.
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"
mkdir -p "$DROVER_HOME"
echo "user-running = 3" > "$DROVER_HOME/drover.conf"
cd "$TMP"

why_of() { field_of "$1" '["why"]'; }
task_is() { [ "$(state_of "$1")" = "$2" ]; }
ls_reason() { drover ls | awk -v id="$1" '$1 == id' | cut -c1-200; }
gate() { echo "while [ ! -f $TMP/$1 ]; do sleep 0.05; done"; }
runs() { [ "$(state_of "$1")" = running ]; }

t "resources: what it needs and what each GPU has, with the tasks that claim it"
a=$(drover submit --gpu-mem 10G -- sh -c "$(gate a)")
b=$(drover submit --gpus 1 --timeout 1h -- sh -c "$(gate b)")
wait_until 10 runs "$a"
wait_until 10 runs "$b"
c=$(drover submit --gpu-mem 8G -- true)
expect_eq "$(why_of "$c")" "needs 1 GPU with 8G free: GPU0 6G free (claimed by $a), GPU1 taken whole (claimed by $b)" "why"
expect_eq "$(field_of "$c" '["reason"]')" "$(why_of "$c")" "the reason beside the state"
ls_reason "$c" | grep -q "queued .* needs 1 GPU with 8G free: GPU0 6G free" || fail "ls: $(ls_reason "$c")"
drover show "$c" | grep -q "^state  *queued  needs 1 GPU with 8G free" || fail "show: $(drover show "$c")"

t "held, a dependency, an array's limit"
h=$(drover submit --hold -- true)
expect_eq "$(why_of "$h")" "held" "held"
d=$(drover submit --after "$a" -- true)
expect_eq "$(why_of "$d")" "dependency $a running" "pending"
ls_reason "$d" | grep -q "pending .* dependency $a running" || fail "ls: $(ls_reason "$d")"
ids=$(drover submit --array 0-1%1 -- sh -c "$(gate arr)")
first=$(echo "$ids" | head -1)
second=$(echo "$ids" | tail -1)
wait_until 10 runs "$first"
expect_eq "$(why_of "$second")" "array limit: 1 of 1 running" "array"

t "the user's limit (user-running = 3)"
u=$(drover submit -- true)
expect_eq "$(why_of "$u")" "user limit: 3 tasks running" "user limit"
touch "$TMP/arr"
wait_until 10 task_is "$second" succeeded

t "a retry's backoff, with when it ends"
r=$(drover submit --retries 1 --backoff 3600 -- false)
retrying() { [ "$(state_of "$r")" = retrying ]; }
wait_until 10 retrying
[[ $(why_of "$r") =~ ^retry\ backoff\ until\ ([A-Z][a-z]{2}\ [ 0-9]{2}\ )?[0-9]{2}:[0-9]{2}:[0-9]{2}$ ]] ||
    fail "backoff: $(why_of "$r")"

t "drained"
drover drain >/dev/null
x=$(drover submit -- true)
expect_eq "$(why_of "$x")" "drained: nothing new starts" "drained"
drover undrain >/dev/null

t "running and ended tasks do not wait"
expect_eq "$(why_of "$a")" null "running"
touch "$TMP/a" "$TMP/b"
wait_until 20 task_is "$c" succeeded
expect_eq "$(why_of "$c")" null "succeeded"
done_testing
