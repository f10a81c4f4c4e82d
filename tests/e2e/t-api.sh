#!/usr/bin/env bash
# The HTTP API's routes (docs/API.md, "Routes"; daemon/api*.c) over real HTTP with curl, as a
# token's user: every route's happy path, the CLI's JSON for each (the same objects as the
# --json of ls, show, gpus, exp ls), and bad input — malformed JSON, wrong types (with the
# field named), unknown fields, a body over LIMIT_HTTP_BODY (413), bad ids, unknown routes (404
# JSON), wrong methods (405 with Allow:). Last, every GET that docs/openapi.json documents
# answers 2xx. Authentication itself is t-api-auth.sh's.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "no curl"
export T_API_LEAK=from-the-daemons-environment # an API task must not inherit it
http_daemon
unset T_API_LEAK
TOK=$(api_token --name t-api)

# api METHOD PATH [CURL ARGS…]: req (lib.sh) with the token.
api() { local m=$1 p=$2; shift 2; req "$m" "$p" -H "Authorization: Bearer $TOK" "$@"; }
body() { cat "$TMP/body"; }
# jq-like: body_get '["id"]'
body_get() { json_get "$1" < "$TMP/body"; }
# expect_error FIELD TEXT: the body is {"error": "…TEXT…", "field": FIELD} (FIELD null: none).
expect_error() {
    python3 - "$TMP/body" "$1" "$2" <<'EOF' || fail "error body: $(cat "$TMP/body")"
import json, sys
b = json.load(open(sys.argv[1]))
field = None if sys.argv[2] == "null" else sys.argv[2]
assert set(b) == {"error", "field"}, b
assert b["field"] == field, (b["field"], field)
assert sys.argv[3] in b["error"], (b["error"], sys.argv[3])
assert "\n" not in b["error"]
EOF
}
header() { grep -i "^$1:" "$TMP/head" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
# same_json A B: two JSON texts are equal.
same_json() { python3 -c 'import json,sys; a,b=json.loads(sys.argv[1]),json.loads(sys.argv[2]); assert a==b, (a,b)' "$1" "$2"; }

t "/healthz and /metrics need no token; /healthz says version, uptime, db, GPUs"
expect_status 200 healthz req GET /healthz
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["ok"] is True and b["db"]=="ok" and b["gpus"]==2 and b["system"] is False and b["version"], b' "$TMP/body" || fail "healthz: $(body)"
expect_status 200 metrics req GET /metrics
grep -q '^drover_gpu_memory_total_bytes' "$TMP/body" || fail "metrics: $(head -3 "$TMP/body")"
expect_status 401 "tasks without a token" req GET /api/v1/tasks

t "unknown routes are 404 JSON; a known path with another method 405 with Allow"
expect_status 404 unknown api GET /api/v1/nope
expect_error null "no route GET /api/v1/nope"
expect_status 404 "unknown, no token" req GET /nope/at/all
expect_error null "no route GET /nope/at/all"
expect_status 405 "PUT tasks" api PUT /api/v1/tasks
expect_eq "$(header Allow)" "GET, HEAD, POST" "Allow"
expect_status 405 "PATCH a task" api PATCH /api/v1/tasks/1
expect_eq "$(header Allow)" "GET, HEAD, DELETE" "Allow"
expect_status 400 "a bad id" api GET /api/v1/tasks/abc
expect_error id "positive whole number"
expect_status 400 "id 0" api POST /api/v1/tasks/0/retry
expect_error id "positive whole number"

t "POST /api/v1/tasks: 201 {id}; the task is what show --json says, text values converted"
expect_status 201 submit api POST /api/v1/tasks -d '{"name": "train", "command": ["sh", "-c", "echo out; echo err >&2"], "gpu_mem": "1G", "timeout": "2h", "priority": -1}'
ID=$(body_get '["id"]')
expect_status 200 show api GET "/api/v1/tasks/$ID"
same_json "$(body)" "$(drover show "$ID" --json)"
expect_eq "$(body_get '["request"]["gpu_mem"]')" 1073741824 "gpu_mem"
expect_eq "$(body_get '["request"]["timeout_ms"]')" 7200000 "timeout_ms"
expect_eq "$(body_get '["name"]')" train "name"
wait_until 20 state_is "$ID" succeeded

t "a command as one string runs under sh -c; the workdir is the user's home; env is exactly env plus the basics"
expect_status 201 "submit env" api POST /api/v1/tasks -d '{"command": "env | sort", "env": {"A": "b"}}'
ENVID=$(body_get '["id"]')
expect_eq "$(field_of "$ENVID" '["command"]')" '["sh", "-c", "env | sort"]' "command"
expect_eq "$(field_of "$ENVID" '["workdir"]')" "$(getent passwd "$(id -u)" | cut -d: -f6)" "workdir"
wait_until 20 state_is "$ENVID" succeeded
expect_status 200 logs api GET "/api/v1/tasks/$ENVID/logs"
for want in A=b "PATH=/usr/local/bin:/usr/bin:/bin" "USER=$(id -un)" "LOGNAME=$(id -un)" HOME= SHELL=; do
    grep -q "^$want" "$TMP/body" || fail "env lacks $want: $(body)"
done
! grep -q T_API_LEAK "$TMP/body" || fail "the daemon's environment leaked into an API task"

t "an array answers {ids}; after, backoff and array as text"
expect_status 201 array api POST /api/v1/tasks -d "{\"command\": [\"true\"], \"array\": \"0-2%1\", \"after\": \"$ID\", \"backoff\": \"5,30\"}"
expect_eq "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ids"]))' "$TMP/body")" 3 "ids"
AID=$(body_get '["ids"][0]')
expect_eq "$(field_of "$AID" '["after"]')" "[$ID]" "after"
expect_eq "$(field_of "$AID" '["array_index"]')" 0 "array_index"

t "bad submissions: one line naming the field, nothing stored"
before=$(task_count)
expect_status 400 "malformed JSON" api POST /api/v1/tasks -d '{"command": ["true"]'
expect_error null "malformed JSON"
expect_status 400 "not an object" api POST /api/v1/tasks -d '["true"]'
expect_error null "JSON object"
expect_status 400 "no body" api POST /api/v1/tasks
expect_error null "JSON object"
expect_status 400 "gpus: x" api POST /api/v1/tasks -d '{"command": ["true"], "gpus": "x"}'
expect_error gpus "'gpus' (--gpus) must be a whole number"
expect_status 400 "unknown field" api POST /api/v1/tasks -d '{"command": ["true"], "gpuz": 1}'
expect_error gpuz "unknown field 'gpuz'"
expect_status 400 "gpu_mem: 10X" api POST /api/v1/tasks -d '{"command": ["true"], "gpu_mem": "10X"}'
expect_error gpu_mem "gpu_mem '10X'"
expect_status 400 "command: 7" api POST /api/v1/tasks -d '{"command": 7}'
expect_error command "'command' must be an array of strings"
expect_status 400 "no command" api POST /api/v1/tasks -d '{"name": "x"}'
expect_error command "'command'"
expect_status 400 "env: list" api POST /api/v1/tasks -d '{"command": ["true"], "env": ["A=b"]}'
expect_error env "'env' must map"
expect_status 400 "timeout twice" api POST /api/v1/tasks -d '{"command": ["true"], "timeout": "1h", "timeout_ms": 5}'
expect_error timeout_ms "given twice"
expect_status 400 "a protocol key" api POST /api/v1/tasks -d '{"command": ["true"], "op": "shutdown"}'
expect_error op "unknown field 'op'"
expect_status 400 "gpu_type none here" api POST /api/v1/tasks -d '{"command": ["true"], "gpu_type": "zz"}'
expect_error gpu_type "gpu_type 'zz'"
expect_status 400 "workdir relative" api POST /api/v1/tasks -d '{"command": ["true"], "workdir": "rel"}'
expect_error workdir "'workdir' must be an absolute path"
python3 -c 'import sys; sys.stdout.write("{\"command\": [\"true\"], \"name\": \"" + "x" * (2 << 20) + "\"}")' > "$TMP/huge"
expect_status 413 "a huge body" api POST /api/v1/tasks -H 'Content-Type: application/json' --data-binary @"$TMP/huge"
expect_eq "$(task_count)" "$before" "tasks after bad submissions"

t "GET /api/v1/tasks is ls --json; paging with X-Total-Count and Link"
drover wait "$AID" >/dev/null || true
wait_until 20 bash -c "[ \"\$('$DROVER' ls --state running --json)\" = '[]' ]"
barrier
expect_status 200 list api GET "/api/v1/tasks?all=1&limit=1000"
same_json "$(body)" "$(drover ls --all --json)"
total=$(task_count)
expect_eq "$(header X-Total-Count)" "$total" "X-Total-Count"
[ -z "$(header Link)" ] || fail "a Link with nothing after: $(header Link)"
expect_status 200 "page 1" api GET "/api/v1/tasks?all=1&limit=2"
expect_eq "$(body_get '[0]["id"]')" 1 "first id"
expect_eq "$(header X-Total-Count)" "$total" "X-Total-Count"
expect_eq "$(header Link)" '</api/v1/tasks?all=1&limit=2&offset=2>; rel="next"' "Link"
expect_status 200 "page 2" api GET "/api/v1/tasks?all=1&limit=2&offset=2"
expect_eq "$(body_get '[0]["id"]')" 3 "page 2's first id"
expect_status 200 "by state" api GET "/api/v1/tasks?state=succeeded&mine=1"
same_json "$(body)" "$(drover ls --state succeeded --mine --json)"
expect_status 400 "limit 0" api GET "/api/v1/tasks?limit=0"
expect_error limit "'limit' must be a whole number from 1 to 1000"
expect_status 400 "limit 1001" api GET "/api/v1/tasks?limit=1001"
expect_error limit "from 1 to 1000"
expect_status 400 "offset -1" api GET "/api/v1/tasks?offset=-1"
expect_error offset "'offset'"
expect_status 400 "a bad state" api GET "/api/v1/tasks?state=bogus"
expect_error null "unknown state 'bogus'"
expect_status 400 "mine=maybe" api GET "/api/v1/tasks?mine=maybe"
expect_error mine "'mine'"

t "hold, release, cancel, retry: each answers the task as it is now"
expect_status 201 "a held task" api POST /api/v1/tasks -d '{"command": ["true"], "hold": true}'
GATE=$(body_get '["id"]') # HID waits for it, so HID never starts
expect_status 201 "a held task after it" api POST /api/v1/tasks -d "{\"command\": [\"true\"], \"hold\": true, \"after\": [$GATE]}"
HID=$(body_get '["id"]')
expect_eq "$(state_of "$HID")" held "state"
expect_status 200 release api POST "/api/v1/tasks/$HID/release"
[ "$(body_get '["state"]')" != held ] || fail "still held: $(body)"
expect_status 200 hold api POST "/api/v1/tasks/$HID/hold"
expect_eq "$(body_get '["state"]')" held "after hold"
expect_status 200 cancel api DELETE "/api/v1/tasks/$HID"
expect_eq "$(body_get '["state"]')" cancelled "after cancel"
expect_status 409 "cancel again" api DELETE "/api/v1/tasks/$HID"
expect_error null "cannot cancel task $HID: it has already ended (cancelled)"
expect_status 200 retry api POST "/api/v1/tasks/$HID/retry"
[ "$(body_get '["state"]')" != cancelled ] || fail "not retried: $(body)"
expect_status 200 "cancel the retried" api DELETE "/api/v1/tasks/$HID"
expect_status 200 "cancel the gate" api DELETE "/api/v1/tasks/$GATE"
expect_status 404 "no such task" api GET /api/v1/tasks/99999
expect_error null "no task 99999"
expect_status 404 "cancel no such task" api DELETE /api/v1/tasks/99999
expect_error null "no task 99999"

t "logs: stdout, stderr, tail, attempt; bad parameters named"
expect_status 200 stdout api GET "/api/v1/tasks/$ID/logs"
expect_eq "$(body)" out "stdout"
expect_eq "$(header Content-Type)" "text/plain; charset=utf-8" "Content-Type"
expect_status 200 stderr api GET "/api/v1/tasks/$ID/logs?stream=stderr"
expect_eq "$(body)" err "stderr"
expect_status 200 tail api GET "/api/v1/tasks/$ENVID/logs?tail=2"
expect_eq "$(body)" "$(drover logs "$ENVID" | tail -n 2)" "tail=2"
expect_status 200 "attempt 1" api GET "/api/v1/tasks/$ID/logs?attempt=1"
expect_eq "$(body)" out "attempt 1"
expect_status 404 "attempt 2" api GET "/api/v1/tasks/$ID/logs?attempt=2"
expect_error attempt "task $ID has no attempt 2"
expect_status 400 "stream=x" api GET "/api/v1/tasks/$ID/logs?stream=x"
expect_error stream "'stream' must be stdout or stderr"
expect_status 400 "tail=x" api GET "/api/v1/tasks/$ID/logs?tail=x"
expect_error tail "'tail'"
expect_status 404 "logs of no task" api GET /api/v1/tasks/99999/logs

t "logs?follow=1 streams what a running task writes and ends when it ends"
mkdir -p "$TMP/go"
expect_status 201 "a writer" api POST /api/v1/tasks -d "{\"command\": [\"sh\", \"-c\", \"echo one; while [ ! -e $TMP/go/now ]; do sleep 0.05; done; echo two\"]}"
FID=$(body_get '["id"]')
wait_until 20 state_is "$FID" running
curl -sS -N --max-time 60 -H "Authorization: Bearer $TOK" "$URL/api/v1/tasks/$FID/logs?follow=1" > "$TMP/follow" &
CURL=$!
wait_until 20 grep -q one "$TMP/follow"
grep -q two "$TMP/follow" && fail "two before it was written"
touch "$TMP/go/now"
wait "$CURL" || fail "the followed log did not end cleanly"
expect_eq "$(cat "$TMP/follow")" "$(printf 'one\ntwo')" "followed output"

t "followers: at most 32 at once (503 beyond); one that goes away is dropped, and its slot freed"
expect_status 201 "a long writer" api POST /api/v1/tasks -d "{\"command\": [\"sh\", \"-c\", \"while [ ! -e $TMP/go/stop ]; do sleep 0.05; done\"]}"
LID=$(body_get '["id"]')
wait_until 20 state_is "$LID" running
python3 - "$PORT" "$TOK" "$LID" <<'EOF' || fail "followers"
import socket, sys, time
port, tok, task = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def follow():
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(("GET /api/v1/tasks/%s/logs?follow=1 HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (task, tok)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, "closed before a head"
        head += chunk
    return s, int(head.split(b" ")[1])
streams = [follow() for _ in range(32)]
assert all(status == 200 for _, status in streams), [st for _, st in streams]
extra, status = follow()
assert status == 503, status
extra.close()
for s, _ in streams[:4]:
    s.close()
deadline = time.time() + 20
while True:  # the daemon notices the closes; then a slot is free again
    s, status = follow()
    s.close()
    if status == 200:
        break
    assert time.time() < deadline, "no follower slot came free"
    time.sleep(0.1)
for s, _ in streams[4:]:
    s.close()
EOF
touch "$TMP/go/stop"
wait_until 20 state_is "$LID" succeeded
expect_status 200 "the daemon still answers" api GET "/api/v1/tasks/$LID"

t "GET /api/v1/gpus is gpus --json; /api/v1/gpus/series has a point list per GPU and who held them"
expect_status 200 gpus api GET /api/v1/gpus
python3 - "$TMP/body" "$(drover gpus --json)" <<'EOF' || fail "gpus: $(body)"
import json, sys
a, b = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
assert set(a) == set(b), (set(a) ^ set(b))
assert [g["index"] for g in a["gpus"]] == [g["index"] for g in b["gpus"]]
EOF
expect_status 200 series api GET "/api/v1/gpus/series?since=-10m&step=10s"
python3 - "$TMP/body" "$ID" <<'EOF' || fail "series: $(body)"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["step_ms"] == 10000 and s["until"] - s["since"] == 600000, s
assert [g["index"] for g in s["gpus"]] == [0, 1] and all(isinstance(g["points"], list) for g in s["gpus"])
held = [t for t in s["tasks"] if t["id"] == int(sys.argv[2])]
assert held and held[0]["gpus"] == [0] and held[0]["end"] >= held[0]["start"], s["tasks"]
EOF
expect_status 400 "too many points" api GET "/api/v1/gpus/series?since=-7d&step=1s"
expect_error step "points per GPU: at most 2000"
expect_status 400 "a bad since" api GET "/api/v1/gpus/series?since=yesterday"
expect_error since "since 'yesterday'"
expect_status 400 "a bad step" api GET "/api/v1/gpus/series?step=fast"
expect_error step "step 'fast'"

t "experiments: run from YAML (201), list (exp ls --json), show with series and gpu_hours, stop, 404"
cat > "$TMP/exp.yaml" <<'EOF'
apiVersion: drover/v1
kind: Experiment
metadata: {name: apisweep}
spec:
  hyperparameters: {lr: 0.1}
  command: [sh, -c, 'for i in 1 2 3; do echo "{\"step\": $i, \"loss\": ${hyperparameters.lr}}" >> "$DROVER_METRICS_FILE"; done']
  sweep: {method: grid, parameters: {hyperparameters.lr: [0.1, 0.2]}}
EOF
expect_status 201 "exp run" api POST "/api/v1/experiments?workdir=$TMP&seed=7" -H 'Content-Type: application/yaml' --data-binary @"$TMP/exp.yaml"
expect_eq "$(body_get '["name"]')" apisweep "name"
wait_until 30 bash -c "'$DROVER' exp ls --json | grep -q '\"state\": *\"done\"'"
expect_status 200 "exp list" api GET /api/v1/experiments
same_json "$(body)" "$(drover exp ls --json)"
expect_status 200 "exp show" api GET /api/v1/experiments/apisweep
python3 - "$TMP/body" <<'EOF' || fail "exp show: $(body)"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["name"] == "apisweep" and len(e["trials"]) == 2, e
assert sorted(s["metrics"]["loss"][0][1] for s in e["series"]) == [0.1, 0.2], e["series"]
assert [p[0] for p in e["series"][0]["metrics"]["loss"]] == [1, 2, 3], e["series"]
assert isinstance(e["gpu_hours"], (int, float))
EOF
expect_status 409 "stop a done one" api POST /api/v1/experiments/apisweep/stop
expect_error null "has already ended"
expect_status 404 "no such experiment" api GET /api/v1/experiments/nope
expect_error null "no experiment nope"
expect_status 404 "resume no such" api POST /api/v1/experiments/nope/resume
expect_status 400 "bad YAML" api POST /api/v1/experiments --data-binary 'kind: Bogus'
expect_error null "body:1:"
expect_status 400 "again, same name" api POST "/api/v1/experiments?workdir=$TMP" --data-binary @"$TMP/exp.yaml"
expect_status 400 "a relative workdir" api POST "/api/v1/experiments?workdir=rel" --data-binary @"$TMP/exp.yaml"
expect_error workdir "absolute"

t "users; the OpenAPI document needs no token and has an ETag"
expect_status 200 users api GET /api/v1/users
python3 - "$TMP/body" "$(drover users --json)" <<'EOF' || fail "users: $(body)"
import json, sys
a, b = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
assert [u["uid"] for u in a] == [u["uid"] for u in b], (a, b)
EOF
expect_status 200 openapi req GET /api/v1/openapi.json
etag=$(header ETag)
[ -n "$etag" ] || fail "no ETag"
expect_status 304 "not modified" req GET /api/v1/openapi.json -H "If-None-Match: $etag"

t "every GET documented in openapi.json answers 2xx"
python3 - "$URL" "$TOK" "$ID" <<'EOF' || fail "a documented GET"
import http.client, json, sys, urllib.parse
url, tok, task = sys.argv[1], sys.argv[2], sys.argv[3]
host = urllib.parse.urlparse(url).netloc
def get(path, auth=True):
    c = http.client.HTTPConnection(host, timeout=20)
    c.request("GET", path, headers={"Authorization": "Bearer " + tok} if auth else {})
    r = c.getresponse()  # a stream (events, follow) has its status once its head is out
    status = r.status
    c.close()
    return status
c = http.client.HTTPConnection(host, timeout=20)
c.request("GET", "/api/v1/openapi.json")
doc = json.loads(c.getresponse().read())
samples = {"{id}": task, "{name}": "apisweep"}
n = 0
for path, item in doc["paths"].items():
    if "get" not in item:
        continue
    params = [p for p in item["get"].get("parameters", []) if p["in"] == "query" and p.get("required")]
    if params:  # /login?code= needs a one-time code (t-api-auth.sh)
        continue
    concrete = path
    for k, v in samples.items():
        concrete = concrete.replace(k, v)
    status = get(concrete)
    assert 200 <= status < 300, (path, status)
    n += 1
assert n >= 14, n  # every GET route but /login
print("documented GETs answered:", n)
EOF

done_testing
