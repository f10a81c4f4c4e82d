#!/usr/bin/env bash
# The CLI against hostile circumstances: a caller's descriptors, requests over the frame limit, a
# daemon that hangs up, strings that are not UTF-8, a daemon that cannot start, a daemon killed
# during `wait` — and the daemon refusing, by itself, every request the CLI would refuse.
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"

# One line on stderr, starting "drover", exit 2 (expect_exit keeps stderr in $ERR).
bad() {
    expect_exit 2 "$@"
    [ "$(printf '%s\n' "$ERR" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $ERR"
    [[ "$ERR" == drover* ]] || fail "'$*': error does not start with 'drover': $ERR"
}
has() { [[ "$ERR" == *"$1"* ]] || fail "expected '$1' in: $ERR"; }
# submit_after N: drover submit with N --after options of 12,000 ids each (96 KB an option, 96 KB
# in the request); needs a larger stack limit for drover to be exec'd with them all.
submit_after() {
    local list args=() i
    list=$(python3 -c "print(','.join(['1000000'] * 12000))")
    for i in $(seq "$1"); do args+=(--after "$list"); done
    "$DROVER" submit "${args[@]}" -- true
}

t "an autostarted daemon keeps none of the caller's descriptors (drover ls 3>&1 | cat ends)"
rc=0
timeout 20 bash -c '"$DROVER" ls 3>&1 | cat' >/dev/null 2>&1 || rc=$?
expect_eq "$rc" 0 "drover ls 3>&1 | cat"
before=$(task_count)

t "strings that are not UTF-8: one line naming what and where, exit 2, nothing stored"
bad drover submit --name $'ab\xffc' -- true
has "--name: not valid UTF-8 (byte 3)"
for i in 1 2 3; do bad drover submit --key $'k\xc3' -- true; done
has "--key: not valid UTF-8 (byte 2)"
bad drover submit --profile $'\xed\xa0\x80' -- true   # a surrogate
has "--profile: not valid UTF-8 (byte 1)"
bad drover submit -- echo $'ok\xc0\xaf'               # an overlong '/'
has "argument 2 of the command: not valid UTF-8 (byte 3)"
bad env FOO=$'abc\xff' "$DROVER" submit -- true
has "environment variable FOO: value is not valid UTF-8 (byte 4); unset it or set it with --env"
bad drover submit --env BAR=$'\xff' -- true
has "--env: not valid UTF-8 (byte 5)"
mkdir "$TMP/dir"$'\xff'
bad drover submit --workdir "$TMP/dir"$'\xff' -- true
has "--workdir: not valid UTF-8"
ERR=$(cd "$TMP/dir"$'\xff' && "$DROVER" submit -- true 2>&1 >/dev/null) &&
    fail "submitted from a directory whose name is not UTF-8"
has "the working directory: not valid UTF-8"
bad drover ls --state $'queued\xff'
has "--state: not valid UTF-8 (byte 7)"
bad drover exp show $'x\xff'
has "the experiment name: not valid UTF-8 (byte 2)"
printf 'kind: Experiment\nname: e\ncommand: ["true"]\n' > "$TMP/e.yaml"
bad drover exp run "$TMP/e.yaml" --set $'name=\xff'
has "--set #1: not valid UTF-8 (byte 6)"
expect_eq "$(task_count)" "$before" "nothing stored"
id=$(env FOO=$'abc\xff' "$DROVER" submit --env FOO=fixed -- sh -c 'test "$FOO" = fixed')
drover wait "$id" >/dev/null || fail "--env did not replace the variable that was not UTF-8"
before=$(task_count)

t "the daemon cannot be sent invalid UTF-8: a clean error reply, code 2"
python3 - "$DROVER_HOME/drover.sock" <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
body = b'{"v":1,"op":"submit","command":["true"],"workdir":"/","name":"a\xffb"}'
s.sendall(struct.pack(">I", len(body)) + body)
n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
r = json.loads(s.recv(n, socket.MSG_WAITALL))
assert r["ok"] is False and r["code"] == 2 and "malformed" in r["error"], r
PY
expect_eq "$(task_count)" "$before" "nothing stored"

t "exec limits: refused at submit, in the CLI and in the daemon"
(
    ulimit -s 65536   # room for drover itself to be exec'd with these
    v=$(head -c 100000 /dev/zero | tr '\0' a)
    for i in $(seq 35); do export "BIG$i=$v"; done   # 3.5 MB: each attempt would get E2BIG
    bad drover submit -- true
    has "LIMIT_EXEC_TOTAL"
)
python3 - "$DROVER_HOME/drover.sock" <<'PY'
import json, socket, struct, sys
def call(req):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    body = json.dumps(req).encode()
    s.sendall(struct.pack(">I", len(body)) + body)
    hdr = s.recv(4, socket.MSG_WAITALL); n = struct.unpack(">I", hdr)[0]
    r = json.loads(s.recv(n, socket.MSG_WAITALL)); s.close()
    return r
base = {"v": 1, "op": "submit", "command": ["true"], "workdir": "/"}
r = call(dict(base, env={"E%d" % i: "x" * 100000 for i in range(12)}))
assert r["ok"] is False and r["code"] == 2 and "LIMIT_EXEC_TOTAL" in r["error"], r
r = call(dict(base, command=["echo", "x" * 140000]))
assert r["ok"] is False and r["code"] == 2 and "LIMIT_EXEC_STRING" in r["error"], r
PY
expect_eq "$(task_count)" "$before" "nothing stored"

t "a request over the frame limit is refused before it is sent, naming LIMIT_FRAME"
(
    ulimit -s 65536
    bad submit_after 48   # 4.6 MB
    has "LIMIT_FRAME"
)
expect_eq "$(task_count)" "$before" "nothing stored"

t "a daemon that hangs up: its reply is printed if it sent one, else one clear line (no SIGPIPE)"
home=$DROVER_HOME
export DROVER_HOME="$TMP/fake" DROVER_NO_AUTOSTART=1
mkdir -p "$DROVER_HOME"
python3 - "$DROVER_HOME/drover.sock" <<'PY' &
import json, socket, struct, sys
srv = socket.socket(socket.AF_UNIX); srv.bind(sys.argv[1]); srv.listen(4)
# First: read the header, refuse, hang up. Second: hang up at once.
c, _ = srv.accept(); c.recv(4, socket.MSG_WAITALL)
body = json.dumps({"ok": False, "error": "refused by the fake daemon", "code": 2}).encode()
c.sendall(struct.pack(">I", len(body)) + body); c.close()
c, _ = srv.accept(); c.close()
PY
fake=$!
wait_until 10 test -S "$DROVER_HOME/drover.sock"
(
    ulimit -s 65536
    bad submit_after 30   # 2.9 MB: under the limit
    has "refused by the fake daemon"
    expect_exit 3 submit_after 30
    has "the daemon closed the connection before answering"
)
wait "$fake"
export DROVER_HOME=$home
unset DROVER_NO_AUTOSTART

t "a daemon that cannot start: the command says why at once, exit 3"
home=$DROVER_HOME
export DROVER_HOME="$TMP/badconf"
mkdir -p "$DROVER_HOME"
printf 'aging = 30s\n# a comment\nfrobnicate = 1\n' > "$DROVER_HOME/drover.conf"
start=$SECONDS
expect_exit 3 "$DROVER" ls
has "the daemon could not start: $DROVER_HOME/drover.conf:3: unknown setting 'frobnicate'"
[ "$((SECONDS - start))" -lt 5 ] || fail "the error took $((SECONDS - start))s to come"
[ "$(printf '%s\n' "$ERR" | wc -l)" -eq 1 ] || fail "more than one line: $ERR"
printf 'aging = 30s\ngrace = 5s\naging = 60s\n' > "$DROVER_HOME/drover.conf"
expect_exit 3 "$DROVER" ls
has "drover.conf:3: 'aging' is set twice (first on line 1)"
rm "$DROVER_HOME/drover.conf"
mkdir "$DROVER_HOME/drover.conf"
expect_exit 3 "$DROVER" submit -- true
has "drover.conf: is a directory"
expect_exit 2 "$DROVER" daemon
has "drover.conf: is a directory"
rmdir "$DROVER_HOME/drover.conf"
[ ! -S "$DROVER_HOME/drover.sock" ] || fail "a daemon started after all"

t "four commands at once on a fresh state directory: one daemon, none of them fails"
for i in 1 2 3 4; do "$DROVER" ls > "$TMP/race.$i" 2>&1 & done
rc=0
for i in 1 2 3 4; do wait -n || rc=$?; done
[ "$rc" -eq 0 ] || fail "a concurrent autostart failed: $(cat "$TMP"/race.*)"
expect_eq "$(grep -c "serving" "$DROVER_HOME/daemon.log")" 1 "daemons that started serving"
"$DROVER" shutdown
export DROVER_HOME=$home

t "wait survives kill -9 of the daemon: it reconnects, and exits 0 when the task succeeds"
id=$(drover submit -- sh -c "while [ ! -e $TMP/go ]; do sleep 0.05; done")
wait_until 10 state_is "$id" running
"$DROVER" wait "$id" 2>"$TMP/wait.err" &
waiter=$!
connected() { ls -l /proc/$waiter/fd 2>/dev/null | grep -q 'socket:'; }
wait_until 10 connected
pid=$(cat "$DROVER_HOME/daemon.lock")
kill -9 "$pid"
wait_until 10 proc_gone "$pid"
touch "$TMP/go"
rc=0
wait "$waiter" || rc=$?
expect_eq "$rc" 0 "wait's exit status across the daemon's death (stderr: $(cat "$TMP/wait.err"))"
expect_eq "$(state_of "$id")" succeeded "the task"
before=$(task_count)

t "the daemon refuses by itself what the CLI refuses: code 2, nothing stored"
python3 - "$DROVER_HOME/drover.sock" "$TMP" <<'PY'
import json, socket, struct, sys
path, tmp = sys.argv[1], sys.argv[2]
def call(req):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    body = json.dumps(req).encode()
    s.sendall(struct.pack(">I", len(body)) + body)
    hdr = s.recv(4, socket.MSG_WAITALL); n = struct.unpack(">I", hdr)[0]
    r = json.loads(s.recv(n, socket.MSG_WAITALL)); s.close()
    return r
base = {"v": 1, "op": "submit", "command": ["true"], "workdir": "/", "hold": True}
open(tmp + "/file", "w").close()
cases = {
    "cpus 0": {"cpus": 0},
    "gpu_mem 0": {"gpu_mem": 0},
    "mem 0": {"mem": 0},
    "gpus 65": {"gpus": 65},
    "timeout 0": {"timeout_ms": 0},
    "timeout past parse_duration's range": {"timeout_ms": 10**16},
    "stall 0": {"stall_ms": 0},
    "retries 1001": {"retries": 1001},
    "priority 10**7": {"priority": 10**7},
    "backoff too long": {"backoff": [2**62]},
    "nine backoff values": {"backoff": [1] * 9},
    "array with a repeated index": {"array": {"index": [1, 1], "limit": 0}},
    "array out of order": {"array": {"index": [2, 1], "limit": 0}},
    "array index too large": {"array": {"index": [10**9], "limit": 0}},
    "array limit negative": {"array": {"index": [1], "limit": -1}},
    "array too long": {"array": {"index": list(range(100001)), "limit": 0}},
    "workdir that does not exist": {"workdir": "/nonexistent/dir"},
    "workdir that is a file": {"workdir": tmp + "/file"},
    "hold not a boolean": {"hold": "yes"},
    "exclusive not a boolean": {"exclusive": 1},
    "exclusive with gpu_mem": {"exclusive": True, "gpus": 1, "gpu_mem": 1 << 30},
    "name too long": {"name": "n" * 4097},
    "empty program": {"command": [""]},
}
for what, extra in cases.items():
    r = call(dict(base, **extra))
    assert r["ok"] is False and r["code"] == 2 and r["error"], (what, r)
for what, req in {"ls all": {"op": "ls", "all": "yes"}, "ls brief": {"op": "ls", "brief": 1},
                  "drain on": {"op": "drain", "on": "no"}}.items():
    r = call(dict(req, v=1))
    assert r["ok"] is False and r["code"] == 2, (what, r)
assert call({"v": 1, "op": "ping"})["draining"] is False, "a refused drain request drained"
r = call(dict(base))
assert r["ok"] is True, r
call({"v": 1, "op": "cancel", "ids": r["ids"]})
PY
expect_eq "$(task_count)" "$((before + 1))" "only the well-formed request stored a task"
done_testing
