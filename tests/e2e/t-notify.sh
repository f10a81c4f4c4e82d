#!/usr/bin/env bash
# Webhooks (docs/API.md, "Events and webhooks"): a local listener records every POST. A task's
# --notify URL and the daemon's `notify` setting each get one task.ended POST with the documented
# body; a listener that is down at first gets it after retries; a daemon killed -9 after the
# task ended but before the delivery delivers it after its restart (the outbox row was committed
# with the task's end); an experiment's end posts experiment.ended; a bad URL is refused, by the CLI
# and by the HTTP API (400 naming "notify"), and "notify" in an API submission is delivered to.
. "$(dirname "$0")/lib.sh"
W=$TMP/w
POSTS=$TMP/posts.jsonl
mkdir -p "$W" "$DROVER_HOME"
cd "$W"
: > "$POSTS"

# A port nothing listens on now (the listener takes it later).
PORT=$(free_port)
LISTENER_PID=""
LISTENER_PY='
import http.server, json, sys
port, out = int(sys.argv[1]), sys.argv[2]
class Hook(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        rec = {"path": self.path, "type": self.headers.get("Content-Type"),
               "agent": self.headers.get("User-Agent"), "body": json.loads(body)}
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer(("127.0.0.1", port), Hook).serve_forever()
'
listener_up() { python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$PORT" 2>/dev/null; }
listener_start() {
    python3 -c "$LISTENER_PY" "$PORT" "$POSTS" &
    LISTENER_PID=$!
    wait_until 10 listener_up
}
listener_stop() {
    kill "$LISTENER_PID" 2>/dev/null || true
    wait "$LISTENER_PID" 2>/dev/null || true
    LISTENER_PID=""
}
trap 'rc=$?; listener_stop; (exit $rc); cleanup' EXIT

# posts PYTHON-FILTER: how many recorded POSTs p (path, type, agent, body) pass the filter.
posts() {
    python3 -c "
import json, sys
n = 0
for line in open(sys.argv[1]):
    p = json.loads(line)
    b = p['body']
    if ($1):
        n += 1
print(n)" "$POSTS"
}
posts_are() { [ "$(posts "$1")" = "$2" ]; }
posts_at_least() { [ "$(posts "$1")" -ge "$2" ]; }
# outbox PYTHON-EXPRESSION over the rows (id, url, tries, last_error) of the daemon's outbox.
outbox() {
    python3 -c "
import sqlite3, sys
db = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)
rows = db.execute('SELECT id, url, tries, last_error FROM notify_outbox').fetchall()
print($1)" "$DROVER_HOME/drover.db"
}
outbox_is() { [ "$(outbox "$1")" = "$2" ]; }
outbox_tried() { [ "$(outbox 'max([r[2] for r in rows] or [0])')" -ge "$1" ]; }
HOOK=http://127.0.0.1:$PORT/hook

t "a bad --notify is refused before anything is sent: exit 2, one line naming --notify"
expect_exit 2 "$DROVER" submit --notify ftp://x -- true
case "$ERR" in
*"--notify"*"ftp://x"*"http:// or https://"*) ;;
*) fail "the refusal does not name --notify and say what it takes: $ERR" ;;
esac
[ "$(wc -l <<<"$ERR")" = 1 ] || fail "more than one line: $ERR"
expect_exit 2 "$DROVER" submit --notify "http://a b/" -- true
case "$ERR" in *"--notify"*"spaces"*) ;; *) fail "a URL with a space: $ERR" ;; esac
expect_exit 2 "$DROVER" submit --notify "http:///nohost" -- true
expect_exit 2 "$DROVER" submit --notify "http://x/$(head -c 2100 /dev/zero | tr '\0' a)" -- true
case "$ERR" in *"2048"*) ;; *) fail "a long URL: $ERR" ;; esac

t "--notify: one POST with the documented body when the task ends; show --json has the URL"
listener_start
id=$("$DROVER" submit --name hooked --notify "$HOOK" -- true)
expect_eq "$(field_of "$id" '["notify"]')" "$HOOK" "show --json notify"
wait_until 20 posts_are "b['task']['id'] == $id" 1
expect_eq "$(posts "p['path'] == '/hook' and p['type'] == 'application/json'
    and p['agent'].startswith('drover/') and b['event'] == 'task.ended'
    and len(b['delivery']) == 32 and isinstance(b['time'], int)
    and b['task']['id'] == $id and b['task']['name'] == 'hooked'
    and b['task']['state'] == 'succeeded' and b['task']['exit_code'] == 0
    and b['task']['attempts'] == 1 and b['task']['reason'] is None
    and isinstance(b['task']['user'], str) and b['task']['end_time'] >= b['task']['submit_time']
    and sorted(b['task']) == sorted(['id','name','user','state','reason','exit_code','attempts',
                                      'submit_time','end_time'])")" 1 "a well-formed POST"
wait_until 10 outbox_is 'len(rows)' 0
id=$("$DROVER" submit --notify "$HOOK" -- sh -c 'exit 3')
wait_until 20 posts_are "b['task']['id'] == $id and b['task']['state'] == 'failed'
    and b['task']['exit_code'] == 3" 1
barrier
posts_are "b['task']['id'] < 0 or p['path'] != '/hook'" 0 || fail "a POST nobody asked for"
expect_eq "$(posts "True")" 2 "POSTs for 2 tasks with --notify and nothing else"

t "the listener down at first: delivered after retries (1 s, 2 s, …)"
listener_stop
id=$("$DROVER" submit --notify "$HOOK" -- true)
wait_until 20 state_is "$id" succeeded
wait_until 20 outbox_tried 2
outbox 'rows[0][3]' | grep -qi "refused" || fail "the outbox row keeps no error: $(outbox 'rows')"
listener_start
wait_until 30 posts_are "b['task']['id'] == $id" 1
wait_until 10 outbox_is 'len(rows)' 0

t "killed -9 after the task ended, before the delivery: delivered after the restart"
listener_stop
id=$("$DROVER" submit --notify "$HOOK" -- true)
wait_until 20 state_is "$id" succeeded
expect_eq "$(outbox 'len(rows)')" 1 "a pending outbox row"
kill -9 "$(cat "$DROVER_HOME/daemon.lock")"
listener_start
"$DROVER" ls >/dev/null # starts the daemon again
wait_until 30 posts_at_least "b['task']['id'] == $id" 1
wait_until 10 outbox_is 'len(rows)' 0

t "the notify setting: every task's end, and a task's own URL as well"
"$DROVER" shutdown >/dev/null
wait_until 20 test ! -S "$DROVER_HOME/drover.sock"
HTTP_PORT=$(free_port)
printf 'notify = http://127.0.0.1:%s/all\nhttp = 127.0.0.1:%s\n' "$PORT" "$HTTP_PORT" >> "$DROVER_HOME/drover.conf"
id=$("$DROVER" submit -- true)
wait_until 20 posts_are "p['path'] == '/all' and b['task']['id'] == $id" 1
id2=$("$DROVER" submit --notify "$HOOK" -- true)
wait_until 20 posts_are "p['path'] == '/all' and b['task']['id'] == $id2" 1
wait_until 20 posts_are "p['path'] == '/hook' and b['task']['id'] == $id2" 1
expect_eq "$(posts "b['event'] == 'task.ended' and b['task']['id'] == $id2")" 2 "two POSTs"
expect_eq "$(python3 -c "
import json, sys
print(len({json.loads(l)['body']['delivery'] for l in open(sys.argv[1])
           if json.loads(l)['body']['task']['id'] == $id2}))" "$POSTS")" 2 "distinct delivery ids"

t "over the HTTP API: \"notify\" in a submission; a bad one is a 400 naming the field"
TOKEN=$(api_token --name hooks)
# api_submit JSON: prints the status and the answer's body.
api_submit() {
    python3 - "$HTTP_PORT" "$TOKEN" "$1" <<'PY'
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
conn.request("POST", "/api/v1/tasks", body=sys.argv[3],
             headers={"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"})
r = conn.getresponse()
print(r.status, r.read().decode())
PY
}
out=$(api_submit "{\"command\": [\"true\"], \"workdir\": \"$W\", \"notify\": \"ftp://x\"}")
case "$out" in
"400 "*'"field":"notify"'*) ;;
*) fail "a bad notify over HTTP: $out" ;;
esac
out=$(api_submit "{\"command\": [\"true\"], \"workdir\": \"$W\", \"notify\": \"$HOOK\"}")
id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ", 1)[1])["id"])' "$out")
wait_until 20 posts_are "p['path'] == '/hook' and b['task']['id'] == $id" 1

t "an experiment's end posts experiment.ended (its template's notify: and the setting)"
cat > "$W/hooked.yaml" <<YAML
apiVersion: drover/v1
kind: Experiment
metadata: { name: hooked }
spec:
  command: [sh, -c, "exit 0"]
  notify: http://127.0.0.1:$PORT/exp
YAML
"$DROVER" exp run hooked.yaml >/dev/null
wait_until 30 posts_are "p['path'] == '/exp' and b['event'] == 'experiment.ended'
    and b['experiment'] == {'name': 'hooked', 'state': 'done', 'reason': b['experiment']['reason']}" 1
wait_until 20 posts_are "p['path'] == '/all' and b['event'] == 'experiment.ended'
    and b['experiment']['name'] == 'hooked'" 1
cat > "$W/badhook.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: badhook }
spec:
  command: [sh, -c, "exit 0"]
  notify: ftp://x
YAML
expect_exit 2 "$DROVER" exp run badhook.yaml
case "$ERR" in *notify*) ;; *) fail "a template's bad notify: $ERR" ;; esac

done_testing
