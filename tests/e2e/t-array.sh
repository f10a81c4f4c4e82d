#!/usr/bin/env bash
# Arrays and idempotent submission.
. "$(dirname "$0")/lib.sh"

t "an array prints one id per index; each task sees its index"
ids=$(drover submit --array 0-4 -- sh -c 'echo $DROVER_ARRAY_INDEX')
expect_eq "$(echo "$ids" | wc -l)" 5 "ids printed"
drover wait $ids
out=$(for id in $ids; do drover logs "$id"; done | tr '\n' ' ')
expect_eq "$out" "0 1 2 3 4 " "array indices"

t "an index list"
ids=$(drover submit --array 1,5,9 -- sh -c 'echo $DROVER_ARRAY_INDEX')
drover wait $ids
expect_eq "$(for id in $ids; do drover logs "$id"; done | tr '\n' ' ')" "1 5 9 " "index list"

t "0-7%2: at most two at once"
ids=$(drover submit --array 0-7%2 -- sh -c "echo start >> $TMP/conc; n=\$(grep -c start $TMP/conc); e=\$(grep -c end $TMP/conc 2>/dev/null || true); echo \$((n - e)) >> $TMP/max; sleep 0.2; echo end >> $TMP/conc")
drover wait $ids
max=$(sort -n "$TMP/max" | tail -1)
[ "$max" -le 2 ] || fail "array limit: $max ran at once"

t "--key: the same key returns the same id and creates nothing"
a=$(drover submit --key nightly-42 -- true)
n=$(task_count)
b=$(drover submit --key nightly-42 -- true)
expect_eq "$b" "$a" "idempotent id"
expect_eq "$(task_count)" "$n" "no new task"
c=$(drover submit --key other -- true)
[ "$c" != "$a" ] || fail "a different key gave the same id"
done_testing
