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

t "0-5%2: two at once, never three"
# Each task counts the tasks running (started, not ended) as it starts and while it waits (up to
# 5 s) until another is running too, or every task has started, and notes the most it saw: with
# the limit honoured and used, the most is 2 and never 3; tasks run one at a time would see 1.
cat > "$TMP/pair.sh" <<'SH'
conc=$1/conc
running() { echo $(($(grep -c start "$conc") - $(grep -c end "$conc"))); }
echo start >> "$conc"
most=$(running)
i=0
while [ "$most" -lt 2 ] && [ "$(grep -c start "$conc")" -lt 6 ] && [ $i -lt 250 ]; do
    sleep 0.02
    i=$((i + 1))
    n=$(running)
    [ "$n" -gt "$most" ] && most=$n
done
echo "$most" >> "$1/seen"
echo end >> "$conc"
SH
touch "$TMP/conc"
ids=$(drover submit --array 0-5%2 -- sh "$TMP/pair.sh" "$TMP")
drover wait $ids
expect_eq "$(wc -l < "$TMP/seen")" 6 "tasks that ran"
max=$(sort -n "$TMP/seen" | tail -1)
[ "$max" -le 2 ] || fail "array limit 2: $max ran at once"
[ "$max" -eq 2 ] || fail "array limit 2: the tasks ran one at a time (seen: $(tr '\n' ' ' < "$TMP/seen"))"

t "--key: the same key returns the same id and creates nothing"
a=$(drover submit --key nightly-42 -- true)
n=$(task_count)
b=$(drover submit --key nightly-42 -- true)
expect_eq "$b" "$a" "idempotent id"
expect_eq "$(task_count)" "$n" "no new task"
c=$(drover submit --key other -- true)
[ "$c" != "$a" ] || fail "a different key gave the same id"
done_testing
