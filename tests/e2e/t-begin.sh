#!/usr/bin/env bash
# --begin TIME and off-peak windows (util/when.c, core/when.c, the off-peak setting): a task
# does not start before its begin (its attempt's start vs the begin the daemon stored), ls and
# show say why it waits, a bad TIME is refused with nothing stored, a daemon restart keeps the
# begin; an --off-peak task with no window waits saying so; with a window opening a few seconds
# from now, --off-peak tasks (from drover submit, a template's `schedule: off-peak` and the HTTP
# API) wait with the reason, then start inside the window. Preempting at the window's close is
# the daemon's carrying out of CORE_ACT_PREEMPT: tests/e2e/t-preempt.sh (test_core_begin checks
# the decision).
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "no curl"
mkdir -p "$DROVER_HOME"
cd "$TMP"

now_ms() { date +%s%3N; }
why_of() { field_of "$1" '["why"]'; }
ls_reason() { drover ls | awk -v id="$1" '$1 == id'; }
started_at() { field_of "$1" '["attempt_list"][0]["start_time"]'; }
clock_re='([A-Z][a-z]{2} [ 0-9]{2} )?[0-9]{2}:[0-9]{2}:[0-9]{2}'

t "--begin +3s: queued with the reason, started no earlier"
before=$(now_ms)
b=$(drover submit --begin +3s -- true)
after=$(now_ms)
begin=$(field_of "$b" '["begin_ms"]')
[ "$begin" -ge $((before + 3000)) ] && [ "$begin" -le $((after + 3000)) ] ||
    fail "begin_ms $begin not 3 s after the submission ($before..$after)"
expect_eq "$(state_of "$b")" queued "state before its begin"
[[ $(why_of "$b") =~ ^begins\ at\ $clock_re$ ]] || fail "why: $(why_of "$b")"
ls_reason "$b" | grep -q "queued .* begins at " || fail "ls: $(ls_reason "$b")"
drover show "$b" | grep -q "^begin  *[0-9-]* [0-9:]*$" || fail "show: $(drover show "$b")"
drover wait "$b" >/dev/null
[ "$(started_at "$b")" -ge "$begin" ] || fail "started at $(started_at "$b"), before $begin"

t "bad TIME: one line naming the flag and the text, exit 2, nothing stored"
n=$(task_count)
expect_exit 2 drover submit --begin soon -- true
[[ $ERR == "drover submit: --begin 'soon': expected 22:00, tomorrow 02:00,"* ]] || fail "$ERR"
expect_exit 2 drover submit --begin 2026-02-30T10:00 -- true
expect_eq "$ERR" "drover submit: --begin '2026-02-30T10:00': no such date"
expect_exit 2 drover submit --begin 25:00 -- true
expect_eq "$(task_count)" "$n" "tasks after the refusals"

t "the other forms are taken (an hour or more ahead: they wait)"
for when in "+1h" "+1d" "@$(( $(date +%s) + 7200 ))" "$(date -d '+2 hours' +%Y-%m-%dT%H:%M)" \
    "$(date -u -d '+2 hours' +%Y-%m-%dT%H:%M:%SZ)" "tomorrow $(date +%H:%M)"; do
    id=$(drover submit --begin "$when" -- true) || fail "--begin '$when' refused"
    [ "$(field_of "$id" '["begin_ms"]')" -gt "$(now_ms)" ] || fail "--begin '$when': not ahead"
    drover cancel "$id" >/dev/null
done

t "no off-peak window: an --off-peak task waits, saying so"
o=$(drover submit --off-peak -- true)
expect_eq "$(why_of "$o")" "off-peak: no window is set (the off-peak setting)" "why"
expect_eq "$(field_of "$o" '["off_peak"]')" true "off_peak"
drover show "$o" | grep -q "^schedule  *off-peak$" || fail "show: $(drover show "$o")"

t "a daemon restart keeps the begin and the off-peak task"
late=$(drover submit --begin +1h -- true)
late_begin=$(field_of "$late" '["begin_ms"]')
drover shutdown >/dev/null
wait_until 10 bash -c "! [ -S '$DROVER_HOME/drover.sock' ]"
# The window opens 20 s from now and closes in an hour (local time, HH:MM:SS): the checks below
# must all be done before it opens, on a loaded CI machine too.
open_s=$(( $(date +%s) + 20 ))
window="$(date -d "@$open_s" +%H:%M:%S)-$(date -d "@$((open_s + 3600))" +%H:%M:%S)"
http_daemon "off-peak = $window"
expect_eq "$(field_of "$late" '["begin_ms"]')" "$late_begin" "begin after the restart"
[[ $(why_of "$late") =~ ^begins\ at\ $clock_re$ ]] || fail "why after the restart: $(why_of "$late")"
expect_eq "$(state_of "$o")" queued "the off-peak task after the restart"

t "a window from the setting: --off-peak, schedule: off-peak and the API's off_peak wait for it"
s=$(drover submit --off-peak -- true)
cat > "$TMP/night.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: night }
spec:
  command: [sh, -c, "exit 0"]
  schedule: off-peak
YAML
drover exp run "$TMP/night.yaml" >/dev/null
e=$(drover exp show night --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["trials"][0]["task"])')
TOK=$(api_token --name t-begin)
api() { local m=$1 p=$2; shift 2; req "$m" "$p" -H "Authorization: Bearer $TOK" "$@"; }
expect_status 201 "API submit" api POST /api/v1/tasks -d '{"command": "true", "off_peak": true}'
h=$(json_get '["id"]' < "$TMP/body")
expect_status 400 "API bad begin" api POST /api/v1/tasks -d '{"command": "true", "begin": "later"}'
expect_eq "$(json_get '["field"]' < "$TMP/body")" begin "the bad field"
expect_status 201 "API begin" api POST /api/v1/tasks -d '{"command": "true", "begin": "+1h"}'
[ "$(field_of "$(json_get '["id"]' < "$TMP/body")" '["begin_ms"]')" -gt "$(now_ms)" ] ||
    fail "the API's begin"
# One listing for all four (off_peak and why), then the clock: what it says held before the
# window opened.
listing=$(drover ls --all --json)
[ "$(date +%s)" -lt "$open_s" ] || fail "too slow: the window opened before the checks"
for id in "$o" "$s" "$e" "$h"; do
    row=$(python3 -c 'import json,sys; print(json.dumps([t for t in json.loads(sys.argv[1]) if t["id"] == int(sys.argv[2])][0]))' "$listing" "$id")
    expect_eq "$(json_get '["off_peak"]' <<<"$row")" true "off_peak of $id"
    [[ $(json_get '["why"]' <<<"$row") =~ ^off-peak:\ the\ window\ opens\ at\ $clock_re$ ]] ||
        fail "why of $id: $(json_get '["why"]' <<<"$row")"
done
ls_reason "$s" | grep -q "queued .* off-peak: the window opens at " || fail "ls: $(ls_reason "$s")"
for id in "$o" "$s" "$e" "$h"; do
    wait_until 30 state_is "$id" succeeded
    [ "$(started_at "$id")" -ge $((open_s * 1000)) ] ||
        fail "task $id started at $(started_at "$id"), before the window ($open_s)"
done
expect_eq "$(state_of "$late")" queued "the --begin +1h task"
done_testing
