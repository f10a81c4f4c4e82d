#!/usr/bin/env bash
# Bad input: one clear line on stderr, exit 2, nothing stored. The daemon survives anything
# a client sends on the socket.
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"

drover ls >/dev/null   # start the daemon
before=$(task_count)

bad() {
    expect_exit 2 "$DROVER" "$@"
    [ "$(printf '%s\n' "$ERR" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $ERR"
    [[ "$ERR" == drover* ]] || fail "'$*' error does not start with 'drover': $ERR"
}

t "malformed flags, sizes, durations"
bad submit --gpus x -- true
bad submit --gpus -1 -- true
bad submit --gpu-mem 12Q -- true
bad submit --gpu-mem "" -- true
bad submit --mem 1.5.5G -- true
bad submit --timeout 10x -- true
bad submit --timeout 0s -- true
bad submit --retries many -- true
bad submit --backoff 5,,6 -- true
bad submit --array 5-1 -- true
bad submit --array 0-9%0 -- true
bad submit --after abc -- true
bad submit --after 0 -- true
bad submit --env NOEQUALS -- true
bad submit --workdir /nonexistent/dir -- true
bad submit --no-such-flag -- true
bad submit --gpus
bad submit --hold=yes -- true
bad show notanid
bad logs 1 --attempt zero
bad frobnicate

t "an empty command"
bad submit
bad submit --gpus 1 --

t "requests beyond the machine"
bad submit --gpus 3 -- true
bad submit --gpu-mem 17G -- true
bad submit --gpus 1 --gpu-mem 100G -- true
bad submit --cpus 100000 -- true

t "a dependency on an unknown id"
bad submit --after 999999 -- true
bad submit --after-any 999998 -- true
bad cancel 999997
bad show 999996
bad wait 999995

expect_eq "$(task_count)" "$before" "nothing was stored"

t "malformed, oversized and unknown requests on the socket get an error reply"
python3 - "$DROVER_HOME/drover.sock" <<'PY'
import json, socket, struct, sys
path = sys.argv[1]
def call(payload, raw=False):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    data = payload if raw else struct.pack(">I", len(payload)) + payload
    s.sendall(data)
    hdr = b""
    while len(hdr) < 4:
        chunk = s.recv(4 - len(hdr))
        if not chunk: return None
        hdr += chunk
    n = struct.unpack(">I", hdr)[0]; body = b""
    while len(body) < n: body += s.recv(n - len(body))
    s.close()
    return json.loads(body)
def err(r, what):
    assert r is not None and r["ok"] is False and r["code"] == 2 and r["error"], (what, r)
err(call(b"{not json"), "malformed")
err(call(b"[1,2]"), "not an object")
err(call(b'{"v":1,"op":"nope"}'), "unknown op")
err(call(b'{"v":99,"op":"ls"}'), "bad version")
err(call(b'{"v":1}'), "no op")
err(call(b'{"v":1,"op":"submit","command":"ls"}'), "command not an array")
err(call(b'{"v":1,"op":"submit","command":[1,2]}'), "command not strings")
err(call(b'{"v":1,"op":"submit","command":["true"],"workdir":"/","gpus":"two"}'), "gpus type")
err(call(b'{"v":1,"op":"submit","command":["true"],"workdir":"/","after":[-4]}'), "bad dep")
err(call(b'{"v":1,"op":"submit","command":["true"],"workdir":"relative"}'), "relative workdir")
err(call(b'{"v":1,"op":"submit","command":["true"],"workdir":"/","env":{"A":1}}'), "env type")
err(call(b'{"v":1,"op":"submit","command":["true"],"workdir":"/","array":{"index":"x"}}'), "array")
err(call(b'{"v":1,"op":"show","id":"x"}'), "show id type")
err(call(b'{"v":1,"op":"cancel","ids":"x"}'), "cancel ids type")
err(call(struct.pack(">I", 100 << 20), raw=True), "oversized")
# A client that sends half a frame and disconnects.
s = socket.socket(socket.AF_UNIX); s.connect(path); s.sendall(struct.pack(">I", 50) + b"{"); s.close()
r = call(b'{"v":1,"op":"ping"}')
assert r["ok"] is True, r
PY
expect_eq "$(task_count)" "$before" "nothing stored by bad requests"

t "random requests (a bounded, seeded fuzz): every one is answered, the daemon survives"
python3 - "$DROVER_HOME/drover.sock" <<'PY'
import json, random, socket, struct, sys
path = sys.argv[1]
rng = random.Random(1234)
ops = ["submit", "ls", "show", "cancel", "retry", "hold", "release", "wait", "gpus", "ping",
       "nope", "", None, 7]
keys = ["command", "gpus", "gpu_mem", "cpus", "mem", "priority", "after", "after_any",
        "retries", "backoff", "timeout_ms", "key", "hold", "array", "workdir", "env", "id",
        "ids", "state", "all", "name", "on", "brief"]
def value(depth=0):
    kinds = ["int", "neg", "big", "str", "none", "bool", "float"] + (["list", "obj"] if depth < 2 else [])
    k = rng.choice(kinds)
    if k == "int": return rng.randint(0, 5)
    if k == "neg": return -rng.randint(1, 10**6)
    if k == "big": return rng.choice([2**62, 2**63 - 1, 10**15])
    if k == "str": return rng.choice(["", "x", "/", "queued", "true", "\u00e9", "a" * 5000])
    if k == "none": return None
    if k == "bool": return rng.choice([True, False])
    if k == "float": return rng.choice([0.5, -1.5, 1e300])
    if k == "list": return [value(depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 3))}
answered = 0
for i in range(400):
    req = {"v": rng.choice([1, 1, 1, 0, "1"]), "op": rng.choice(ops)}
    for _ in range(rng.randint(0, 6)):
        req[rng.choice(keys)] = value()
    if req.get("op") == "wait":
        req["op"] = "show"   # a wait could block on a live task
    if req.get("op") == "submit" and rng.random() < 0.9:
        req["command"] = ["true"] if rng.random() < 0.2 else req.get("command")
        req["hold"] = True   # whatever is accepted stays held: nothing runs
    body = json.dumps(req).encode()
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    s.sendall(struct.pack(">I", len(body)) + body)
    hdr = b""
    while len(hdr) < 4:
        chunk = s.recv(4 - len(hdr))
        assert chunk, f"no reply to {req}"
        hdr += chunk
    n = struct.unpack(">I", hdr)[0]; data = b""
    while len(data) < n: data += s.recv(n - len(data))
    r = json.loads(data)
    assert r["ok"] in (True, False), r
    if not r["ok"]:
        assert r["error"] and r["code"] in (1, 2), r
    answered += 1
    s.close()
print(f"{answered} random requests answered")
PY
drover ls >/dev/null || fail "the daemon died under random requests"
drover ls >/dev/null || fail "the daemon died"
done_testing
