#!/usr/bin/env bash
# Live events over HTTP (docs/API.md, "Events and webhooks"): GET /api/v1/events streams a
# task's queued → running → succeeded with its attempt_start and attempt_end in order; a client
# that reconnects with Last-Event-ID (or ?last_event_id=) gets exactly the events it missed; a
# stale id gets `reset` first, then live events; ?types= filters; GPU samples arrive every
# `sample`; an experiment's changes arrive; a bad filter is a 400 naming "types"; the stream
# limit answers 503; a keepalive comment comes every 15 s; no token is a 401.
. "$(dirname "$0")/lib.sh"
use_fake_nvml "$TMP/nvml.state"
W=$TMP/w
mkdir -p "$W"
cd "$W"
for i in 0 1; do
    echo "gpu $i name=\"Fake H100\" uuid=GPU-fake-$i mem_total=16G mem_used=${i}G util=7 mem_util=0 temp=4$i power=10000$i ecc=0"
done > "$FAKE_NVML_STATE"

http_daemon "sample = 1s"
TOKEN=$(api_token --name events)

# collect NAME [PATH-AND-QUERY [LAST-EVENT-ID]]: follows the stream in the background, writing
# each event (and each comment) as a JSON line to $TMP/NAME, and the answer's head to
# $TMP/NAME.head.
COLLECT_PY='
import http.client, json, sys
port, path, out, token, last = sys.argv[1:6]
headers = {"Authorization": "Bearer " + token} if token else {}
if last:
    headers["Last-Event-ID"] = last
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
conn.request("GET", path, headers=headers)
r = conn.getresponse()
with open(out + ".head", "w") as f:
    json.dump({"status": r.status, "type": r.getheader("Content-Type"),
               "cache": r.getheader("Cache-Control"),
               "body": r.read().decode() if r.status != 200 else None}, f)
if r.status != 200:
    sys.exit(0)
f = open(out, "a")
ev = {}
for raw in r:
    line = raw.decode().rstrip("\n")
    if line == "":
        if ev:
            f.write(json.dumps(ev) + "\n")
            f.flush()
        ev = {}
    elif line.startswith(":"):
        f.write(json.dumps({"comment": line[1:].strip()}) + "\n")
        f.flush()
    else:
        k, _, v = line.partition(":")
        v = v[1:] if v.startswith(" ") else v
        ev[k] = json.loads(v) if k == "data" else v
'
PIDS=()
collect() {
    : > "$TMP/$1"
    rm -f "$TMP/$1.head"
    python3 -c "$COLLECT_PY" "$PORT" "${2:-/api/v1/events}" "$TMP/$1" "${TOKEN_USED-$TOKEN}" \
        "${3:-}" &
    PIDS+=($!)
    wait_until 10 test -s "$TMP/$1.head"
}
stop_collectors() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    PIDS=()
}
trap 'rc=$?; stop_collectors; (exit $rc); cleanup' EXIT
# evs NAME PYTHON-EXPRESSION: the expression over E, NAME's events (entries with an "event"),
# and C, its comments.
evs() {
    python3 -c "
import json, sys
L = [json.loads(l) for l in open(sys.argv[1]) if l.endswith('\n')]
E = [e for e in L if 'event' in e]
C = [e['comment'] for e in L if 'comment' in e]
def of(task):
    return [(e['event'], e['data'].get('state')) for e in E
            if e['event'] != 'gpu' and e['data'].get('task') == task]
print($2)" "$TMP/$1"
}
evs_is() { [ "$(evs "$1" "$2")" = "$3" ]; }
head_of() { python3 -c "import json,sys; h=json.load(open(sys.argv[1])); print(h$2)" "$TMP/$1.head"; }
LIFE="[('task', 'queued'), ('task', 'running'), ('attempt_start', None), ('attempt_end', None), ('task', 'succeeded')]"

t "a task's queued, running, attempt_start, attempt_end, succeeded, in order, ids increasing"
"$DROVER" ls >/dev/null
wait_until 10 test -e "$DROVER_HOME/daemon.log"
collect all
expect_eq "$(head_of all '["status"]')" 200 "status"
expect_eq "$(head_of all '["type"]')" text/event-stream "Content-Type"
expect_eq "$(head_of all '["cache"]')" no-store "Cache-Control"
id=$("$DROVER" submit --name first -- true)
wait_until 20 evs_is all "of($id)" "$LIFE"
expect_eq "$(evs all "[e['data']['name'] for e in E if e['event'] == 'task' and e['data']['task'] == $id]")" \
    "['first', 'first', 'first']" "the task events' name"
expect_eq "$(evs all "all(isinstance(e['data']['user'], str) and isinstance(e['data']['time'], int)
    for e in E if e['event'] == 'task')")" True "user and time"
expect_eq "$(evs all "[e['data'] for e in E if e['event'] == 'attempt_end' and e['data']['task'] == $id][0]
    == {'task': $id, 'attempt': 1, 'outcome': 'succeeded', 'exit_code': 0, 'signal': None,
        'time': [e['data'] for e in E if e['event'] == 'attempt_end'][0]['time']}")" True "attempt_end"
expect_eq "$(evs all "[sorted(e['data']) for e in E if e['event'] == 'attempt_start'][0]")" \
    "['attempt', 'gpus', 'task', 'time']" "attempt_start's fields"
expect_eq "$(evs all "len({e['id'].split('-')[0] for e in E}) == 1 and
    [int(e['id'].split('-')[1]) for e in E] == sorted({int(e['id'].split('-')[1]) for e in E})")" \
    True "ids: one daemon start, increasing"
id=$("$DROVER" submit --gpus 1 -- true)
wait_until 20 evs_is all "of($id)" "$LIFE"
expect_eq "$(evs all "[len(e['data']['gpus']) for e in E if e['event'] == 'attempt_start' and e['data']['task'] == $id]")" \
    "[1]" "a GPU task's attempt_start names its GPU"

t "?types= filters; an unknown type is a 400 naming 'types'"
collect tasks "/api/v1/events?types=task,experiment"
id=$("$DROVER" submit -- sh -c 'exit 4')
wait_until 20 evs_is tasks "of($id)" "[('task', 'queued'), ('task', 'running'), ('task', 'failed')]"
expect_eq "$(evs tasks "sorted({e['event'] for e in E})")" "['task']" "only task events"
expect_eq "$(evs tasks "[e['data']['reason'] for e in E if e['data'].get('state') == 'failed'][0]")" \
    "attempt 1: exit code 4" "a failed task's reason"
collect badtype "/api/v1/events?types=task,nope"
expect_eq "$(head_of badtype '["status"]')" 400 "unknown type"
expect_eq "$(head_of badtype '["body"]' | python3 -c 'import json,sys; print(json.load(sys.stdin)["field"])')" \
    types "the error's field"

t "Last-Event-ID resumes with exactly the missed events"
LAST=$(evs tasks "E[-1]['id']")
stop_collectors
id=$("$DROVER" submit --name missed -- true)
wait_until 20 state_is "$id" succeeded
collect resumed "/api/v1/events?types=task" "$LAST"
wait_until 10 evs_is resumed "[(e['event'], e['data']['task'], e['data']['state']) for e in E]" \
    "[('task', $id, 'queued'), ('task', $id, 'running'), ('task', $id, 'succeeded')]"
collect resumed2 "/api/v1/events?types=task,attempt_start,attempt_end&last_event_id=$LAST"
wait_until 10 evs_is resumed2 "of($id)" "$LIFE"
expect_eq "$(evs resumed2 "len(E)")" 5 "?last_event_id=: exactly the missed events"
LAST=$(evs resumed2 "E[-1]['id']")
collect uptodate "/api/v1/events?types=task" "$LAST"
id=$("$DROVER" submit -- true)
wait_until 20 evs_is uptodate "[e['data']['state'] for e in E]" "['queued', 'running', 'succeeded']"

t "a stale id (another daemon start, or unknown) gets reset, then live events"
collect stale "/api/v1/events?types=task" "1000-5"
wait_until 10 evs_is stale "[e['event'] for e in E]" "['reset']"
expect_eq "$(evs stale "'restarted' in E[0]['data']['reason']")" True "the reason"
id=$("$DROVER" submit -- true)
wait_until 20 evs_is stale "[e['event'] for e in E][:2]" "['reset', 'task']"
EPOCH=$(evs stale "E[1]['id'].split('-')[0]")
collect future "/api/v1/events?types=task" "$EPOCH-999999999"
wait_until 10 evs_is future "[e['event'] for e in E]" "['reset']"
collect garbage "/api/v1/events?types=task" "not-an-id"
wait_until 10 evs_is garbage "[e['event'] for e in E]" "['reset']"

t "an id older than the backlog (LIMIT_EVENTS_BACKLOG = 10,000 events ago) gets reset"
collect fromstart "/api/v1/events" "$EPOCH-0"
wait_until 10 evs_is fromstart "E[0]['id'] if E else None" "$EPOCH-1"
"$DROVER" submit --hold --array 0-9999 -- true >/dev/null
collect old "/api/v1/events?types=experiment" "$EPOCH-0"
wait_until 10 evs_is old "[e['event'] for e in E]" "['reset']"
expect_eq "$(evs old "'older than the backlog' in E[0]['data']['reason']")" True "the reason"
collect toomany "/api/v1/events?types=task" "$EPOCH-100"
wait_until 10 evs_is toomany "[e['event'] for e in E][:1]" "['reset']"
expect_eq "$(evs toomany "'too many events' in E[0]['data']['reason']")" True "the reason"
"$DROVER" cancel $(seq "$(("$id" + 1))" "$(("$id" + 10000))") >/dev/null

t "GPU samples arrive every sample period"
collect gpu "/api/v1/events?types=gpu"
wait_until 15 evs_is gpu "len(E) >= 2" True
expect_eq "$(evs gpu "E[-1]['data']['gpus'][1]")" \
    "{'index': 1, 'util': 7, 'mem_used': 1073741824, 'mem_total': 17179869184, 'temp': 41, 'power_w': 100.001}" \
    "a GPU in the sample"
expect_eq "$(evs gpu "E[-1]['data']['time'] > E[-2]['data']['time']")" True "sample times"

t "an experiment's changes arrive"
cat > "$W/once.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: evexp }
spec:
  command: [sh, -c, "exit 0"]
YAML
collect exp "/api/v1/events?types=experiment"
"$DROVER" exp run once.yaml >/dev/null
wait_until 30 evs_is exp "[e['data']['state'] for e in E if e['data']['name'] == 'evexp']" "['running', 'done']"

t "without a token: 401"
TOKEN_USED="" collect anon
expect_eq "$(head_of anon '["status"]')" 401 "no token"

t "at most LIMIT_HTTP_STREAMS (128) streams: the next is a 503"
stop_collectors
python3 - "$PORT" "$TOKEN" <<'PY' || fail "the stream limit"
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
req = ("GET /api/v1/events?types=experiment HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % token).encode()
def status(s):
    buf = b""
    while b"\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            return None
        buf += chunk
    return int(buf.split(b" ")[1])
held, deadline = [], time.time() + 20
# Streams of earlier collectors may take a moment to be noticed closed: retry until 128 open.
while len(held) < 128:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    st = status(s)
    if st == 200:
        held.append(s)
    elif time.time() > deadline:
        sys.exit("stream %d: %s" % (len(held) + 1, st))
    else:
        s.close(); time.sleep(0.1)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(req)
st = status(s)
if st != 503:
    sys.exit("the 129th stream: %s, expected 503" % st)
for s in held:
    s.close()
PY

t "a keepalive comment every 15 s"
collect quiet "/api/v1/events?types=experiment"
wait_until 20 evs_is quiet "'keepalive' in C" True

done_testing
