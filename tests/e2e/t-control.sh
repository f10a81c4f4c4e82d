#!/usr/bin/env bash
# hold / release, cancel of a running task, drain / undrain, one daemon per state directory.
. "$(dirname "$0")/lib.sh"

t "hold and release"
id=$(drover submit --hold -- true)
expect_eq "$(state_of "$id")" held
barrier
expect_eq "$(state_of "$id")" held "a held task does not start"
drover release "$id"
drover wait "$id"
q=$(drover submit --gpus 2 -- sh -c "while [ ! -f $TMP/gate ]; do sleep 0.05; done")
wait_until 10 state_is "$q" running
w=$(drover submit --gpus 1 -- true)
drover hold "$w"
expect_eq "$(state_of "$w")" held "hold a queued task"
expect_exit 1 drover hold "$q"
touch "$TMP/gate"
drover release "$w"
drover wait "$q" "$w"

t "cancel a running task: its process group dies"
id=$(drover submit -- sh -c "sleep 300 & echo \$! > $TMP/child; sleep 300")
wait_until 10 test -s "$TMP/child"
drover cancel "$id"
expect_exit 1 drover wait "$id"
expect_eq "$(state_of "$id")" cancelled
child=$(cat "$TMP/child")
gone() { proc_gone "$child"; }
wait_until 15 gone
expect_exit 1 drover cancel "$id"

t "drain: running work finishes, nothing new starts; undrain resumes"
rm -f "$TMP/gate"
r=$(drover submit -- sh -c "while [ ! -f $TMP/gate ]; do sleep 0.05; done")
wait_until 10 state_is "$r" running
drover drain
n=$(drover submit -- true)
touch "$TMP/gate"
drover wait "$r"
expect_eq "$(state_of "$n")" queued "nothing starts while draining"
t "drain outlives a daemon restart"
drover shutdown
wait_until 10 bash -c "! [ -S '$DROVER_HOME/drover.sock' ]"
barrier_state=$(drover ls --state queued --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_eq "$barrier_state" 1 "still queued after the restart"
drover ls --json >/dev/null
expect_eq "$(state_of "$n")" queued "still draining after the restart"
drover undrain
drover wait "$n"

t "five commands at once on a fresh state directory start one daemon"
export DROVER_HOME="$TMP/home2"
for i in 1 2 3 4 5; do "$DROVER" submit -- true > "$TMP/race.$i" & done
wait
for i in 1 2 3 4 5; do [ -s "$TMP/race.$i" ] || fail "submission $i got no id"; done
expect_eq "$(task_count)" 5 "tasks stored"
expect_eq "$(grep -c "serving" "$DROVER_HOME/daemon.log")" 1 "daemons that started serving"
"$DROVER" shutdown
export DROVER_HOME="$TMP/home"

t "one daemon per state directory"
expect_exit 1 "$DROVER" daemon
[[ "$ERR" == *"another daemon is running"* ]] || fail "second daemon: $ERR"
done_testing
