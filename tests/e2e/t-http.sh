#!/usr/bin/env bash
# The HTTP server itself (src/daemon/http.c): its bounds answered with a status (413, 431, 411,
# 503), keep-alive, 100-continue, 200 idle connections and a slowloris client while the CLI stays
# responsive, HTTPS with a self-signed certificate made here by openssl, and the old `metrics`
# setting as http's alias.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "no curl"
command -v openssl >/dev/null || skip "no openssl"
http_daemon

# raw REQUEST-BYTES (python literal): sends them on a fresh connection, prints the status line.
raw() {
    python3 - "$PORT" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(eval(sys.argv[2]))
data = b""
while b"\r\n" not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(data.split(b"\r\n")[0].decode())
PY
}

t "/healthz answers without a token, as JSON"
out=$(curl -sS -w '\n%{http_code}' "$URL/healthz")
expect_eq "$(tail -1 <<<"$out")" 200 "/healthz status"
head -1 <<<"$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"] is True and d["db"] == "ok" and "version" in d, d'

t "an unknown route is a 404 in JSON"
out=$(curl -sS -w '\n%{http_code}' "$URL/no/such/thing")
expect_eq "$(tail -1 <<<"$out")" 404 "unknown route status"
head -1 <<<"$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert "error" in d and "field" in d, d'

t "keep-alive: two requests on one connection"
n=$(curl -sS -o /dev/null -o /dev/null -w '%{num_connects}\n' "$URL/healthz" "$URL/healthz" | paste -sd+ | bc)
expect_eq "$n" 1 "connections made for two requests"

t "a body over LIMIT_HTTP_BODY is refused with 413 before it is read"
expect_eq "$(raw 'b"POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"')" \
    "HTTP/1.1 413 Content Too Large" "2 MB body"
head -c 2000000 /dev/zero > "$TMP/big"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST --data-binary @"$TMP/big" "$URL/api/v1/tasks")
expect_eq "$code" 413 "curl with a 2 MB body"

t "headers over LIMIT_HTTP_HEADERS: 431"
expect_eq "$(raw 'b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"')" \
    "HTTP/1.1 431 Request Header Fields Too Large" "20 kB header"

t "a chunked request body: 411; a malformed request line: 400"
expect_eq "$(raw 'b"POST /api/v1/tasks HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"')" \
    "HTTP/1.1 411 Length Required" "chunked body"
expect_eq "$(raw 'b"NONSENSE\r\n\r\n"')" "HTTP/1.1 400 Bad Request" "malformed request line"
expect_eq "$(raw 'b"GET /a%zz HTTP/1.1\r\n\r\n"')" "HTTP/1.1 400 Bad Request" "malformed escape"

t "Expect: 100-continue gets 100 before the body"
python3 - "$PORT" <<'PY' || fail "no 100 Continue"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
body = b'{"name": 1}'
s.sendall(b"POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
first = s.recv(4096)
assert first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), first
s.sendall(body)
rest = first[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
while b"\r\n" not in rest:
    rest += s.recv(4096)
assert rest.startswith(b"HTTP/1.1 401"), rest  # no token: the API's answer, after the body
PY

t "200 idle connections and a slowloris client: the CLI and /healthz stay responsive"
python3 - "$PORT" "$DROVER" > "$TMP/idle.out" <<'PY' || fail "$(cat "$TMP/idle.out")"
import socket, subprocess, sys, time, urllib.request
port, drover = int(sys.argv[1]), sys.argv[2]
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
slow = socket.create_connection(("127.0.0.1", port))
slow.sendall(b"GET /healthz HTTP/1.1\r\n")
worst = 0.0
for i in range(10):
    slow.sendall(b"X-A: b\r\n")          # a header line now and then, never the end
    t0 = time.monotonic()
    subprocess.run([drover, "ls"], check=True, stdout=subprocess.DEVNULL, timeout=10)
    urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=10).read()
    worst = max(worst, time.monotonic() - t0)
print("worst drover ls + /healthz: %.3f s" % worst)
# every idle connection is still open (none was refused: they are within LIMIT_HTTP_CONNS)
for s in idle:
    s.setblocking(False)
    try:
        assert s.recv(1) != b"", "an idle connection was closed early"
    except BlockingIOError:
        pass
PY
cat "$TMP/idle.out"

t "past LIMIT_HTTP_CONNS a connection gets 503"
python3 - "$PORT" <<'PY' || fail "no 503 past LIMIT_HTTP_CONNS"
import socket, sys
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(256)]
extra = socket.create_connection(("127.0.0.1", port), timeout=10)
data = extra.recv(4096)
assert data.startswith(b"HTTP/1.1 503"), data
held[0].sendall(b"GET /healthz HTTP/1.1\r\n\r\n")  # the held ones are served
assert held[0].recv(4096).startswith(b"HTTP/1.1 200")
PY

t "a slowloris client is cut off after LIMIT_HTTP_IDLE_S"
python3 - "$PORT" <<'PY' || fail "the slowloris connection was not closed"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /healthz HTTP/1.1\r\n")
t0 = time.monotonic()
s.settimeout(1)
while time.monotonic() - t0 < 45:
    try:
        s.sendall(b"X: y\r\n")
        if s.recv(4096) == b"":
            break
    except socket.timeout:
        continue
    except (BrokenPipeError, ConnectionResetError):
        break
else:
    sys.exit("still open after 45 s")
took = time.monotonic() - t0
assert 25 < took < 40, took
PY

t "HTTPS with a self-signed certificate"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 1 \
    -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
drover shutdown >/dev/null
TPORT=$(free_port)
cat > "$DROVER_HOME/drover.conf" <<CONF
http = 127.0.0.1:$TPORT
http-tls-cert = $TMP/cert.pem
http-tls-key = $TMP/key.pem
CONF
drover ls >/dev/null
out=$(curl -sS --cacert "$TMP/cert.pem" "https://127.0.0.1:$TPORT/healthz")
python3 -c 'import json,sys; assert json.loads(sys.argv[1])["ok"] is True' "$out"
code=$(curl -sS --cacert "$TMP/cert.pem" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$TPORT/api/v1/tasks")
expect_eq "$code" 401 "HTTPS API without a token"
if curl -sS -m 5 "http://127.0.0.1:$TPORT/healthz" >/dev/null 2>&1; then
    fail "plain HTTP was answered on the HTTPS port"
fi
curl -sS -m 5 --cacert "$TMP/cert.pem" "https://127.0.0.1:$TPORT/healthz" >/dev/null \
    || fail "the daemon stopped serving HTTPS after a plain-HTTP client"

t "a key that does not match the certificate: the daemon says so and does not start"
drover shutdown >/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key2.pem" -out "$TMP/cert2.pem" -days 1 \
    -subj /CN=other 2>/dev/null
cat > "$DROVER_HOME/drover.conf" <<CONF
http = 127.0.0.1:$TPORT
http-tls-cert = $TMP/cert.pem
http-tls-key = $TMP/key2.pem
CONF
rc=0
ERR=$(drover ls 2>&1 >/dev/null) || rc=$?
[ "$rc" -ne 0 ] || fail "a daemon started with a mismatched key"
grep -q "does not match" <<<"$ERR" || fail "no clear line for a mismatched key: $ERR"

t "metrics, http's old name, still serves /metrics; both set and different: refused"
MPORT=$(free_port)
echo "metrics = 127.0.0.1:$MPORT" > "$DROVER_HOME/drover.conf"
drover ls >/dev/null
curl -sS "http://127.0.0.1:$MPORT/metrics" | grep -q '^drover_' || fail "no metrics on the old setting"
drover shutdown >/dev/null
printf 'metrics = 127.0.0.1:%s\nhttp = 127.0.0.1:%s\n' "$MPORT" "$PORT" > "$DROVER_HOME/drover.conf"
rc=0
ERR=$(drover ls 2>&1 >/dev/null) || rc=$?
[ "$rc" -ne 0 ] || fail "a daemon started with metrics and http differing"
grep -q "metrics is the old name of http" <<<"$ERR" || fail "unclear: $ERR"
rm "$DROVER_HOME/drover.conf"

done_testing
