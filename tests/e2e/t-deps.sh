#!/usr/bin/env bash
# Dependencies: --after needs success, --after-any needs an end; failures propagate as
# upstream_failed (never queued forever); drover retry revives the chain.
. "$(dirname "$0")/lib.sh"

t "a chain runs in order"
a=$(drover submit -- sh -c "echo a >> $TMP/order")
b=$(drover submit --after "$a" -- sh -c "echo b >> $TMP/order")
c=$(drover submit --after "$b" -- sh -c "echo c >> $TMP/order")
drover wait "$a" "$b" "$c"
expect_eq "$(tr -d '\n' < "$TMP/order")" "abc" "order"

t "a task waits in pending while its dependency runs"
gate="$TMP/gate"
echo 1 > "$TMP/code"
p=$(drover submit -- sh -c "while [ ! -f $gate ]; do sleep 0.05; done; exit \$(cat $TMP/code)")
q=$(drover submit --after "$p" -- true)
r=$(drover submit --after "$q" -- true)
anyq=$(drover submit --after-any "$p" -- sh -c 'echo ran')
wait_until 10 state_is "$p" running
expect_eq "$(state_of "$q")" pending "dependent of a running task"
touch "$gate"
expect_exit 1 drover wait "$p" "$q" "$r" "$anyq"
expect_eq "$(state_of "$q")" upstream_failed
expect_eq "$(state_of "$r")" upstream_failed "transitively"
expect_eq "$(state_of "$anyq")" succeeded "--after-any runs after a failure"
drover show "$q" | grep -q "dependency $p did not succeed" || fail "reason for upstream_failed"
expect_eq "$(field_of "$q" '["attempts"]')" 0 "an upstream_failed task never ran"

t "a dependency that already failed: the new task is upstream_failed at once"
late=$(drover submit --after "$p" -- true)
expect_eq "$(state_of "$late")" upstream_failed

t "after-any on an already finished task runs"
late_any=$(drover submit --after-any "$p" -- true)
drover wait "$late_any"

t "drover retry revives the failed task and what failed because of it"
rm -f "$gate"
drover retry "$p"
wait_until 10 state_is "$p" running
expect_eq "$(state_of "$q")" pending "revived dependent"
expect_eq "$(state_of "$r")" pending "revived grandchild"
echo 0 > "$TMP/code"   # this time p succeeds, and the chain runs
touch "$gate"
drover wait "$p" "$q" "$r"
expect_eq "$(field_of "$p" '["attempts"]')" 2 "attempt numbering continues"

t "cancelling a dependency marks dependents upstream_failed"
x=$(drover submit --hold -- true)
y=$(drover submit --after "$x" -- true)
drover cancel "$x"
expect_eq "$(state_of "$x")" cancelled
expect_eq "$(state_of "$y")" upstream_failed

t "several dependencies, comma-separated"
d1=$(drover submit -- true)
d2=$(drover submit -- true)
d3=$(drover submit --after "$d1,$d2" -- true)
drover wait "$d3"
expect_eq "$(field_of "$d3" '["after"]')" "[$d1, $d2]" "after list"
done_testing
