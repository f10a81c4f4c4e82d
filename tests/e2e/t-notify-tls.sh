#!/usr/bin/env bash
# Webhooks over https (docs/API.md, "Events and webhooks"): a certificate authority and a
# server certificate made by openssl here, the daemon trusting that CA through SSL_CERT_FILE (as
# it trusts the system's store otherwise). A certificate for the URL's host is delivered to —
# by name (localhost, resolved without blocking from /etc/hosts) and by address; one that names
# another host is refused as unverified and retried, the outbox keeping the TLS error.
. "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || skip "no openssl to make a certificate"
W=$TMP/w
POSTS=$TMP/posts.jsonl
mkdir -p "$W" "$DROVER_HOME"
cd "$W"
: > "$POSTS"
grep -qE '^127\.0\.0\.1[[:space:]].*\blocalhost\b' /etc/hosts || skip "/etc/hosts has no localhost"

# A CA, a certificate for localhost and 127.0.0.1, and one for another host, by that CA.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=drover test CA" \
    -keyout ca.key -out ca.pem 2>/dev/null
cert() { # cert NAME SAN
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf 'subjectAltName=%s\n' "$2" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}
cert good "DNS:localhost,IP:127.0.0.1"
cert other "DNS:elsewhere.example"
export SSL_CERT_FILE=$W/ca.pem   # the daemon (started by the CLI) inherits it

LISTENER_PY='
import http.server, json, ssl, sys
port, cert, key, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class Hook(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(out, "a") as f:
            f.write(json.dumps({"path": self.path, "host": self.headers.get("Host"),
                                "body": json.loads(body)}) + "\n")
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Hook)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
'
PIDS=()
listen() { # listen PORT CERTNAME
    python3 -c "$LISTENER_PY" "$1" "$W/$2.pem" "$W/$2.key" "$POSTS" &
    PIDS+=($!)
    wait_until 10 port_open "$1"
}
port_open() { python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$1" 2>/dev/null; }
trap 'rc=$?; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; (exit $rc); cleanup' EXIT
posts_are() {
    [ "$(python3 -c "
import json, sys
print(sum(1 for l in open(sys.argv[1]) if (lambda p, b: $1)(json.loads(l), json.loads(l)['body'])))" "$POSTS")" = "$2" ]
}
outbox_error() {
    python3 -c "
import sqlite3, sys
db = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)
print(' '.join(r[0] or '' for r in db.execute('SELECT last_error FROM notify_outbox WHERE url LIKE ?', ('%' + sys.argv[2] + '%',))))" \
        "$DROVER_HOME/drover.db" "$1"
}
has_tls_error() { outbox_error "$1" | grep -qi "TLS.*certificate verify failed"; }

GOOD=$(free_port)
listen "$GOOD" good

t "https by name: resolved, verified against the CA, delivered; Host names the URL's host"
id=$("$DROVER" submit --notify "https://localhost:$GOOD/by-name" -- true)
wait_until 20 posts_are "p['path'] == '/by-name' and b['task']['id'] == $id and p['host'] == 'localhost:$GOOD'" 1

t "https by address: the certificate's IP address is checked"
id=$("$DROVER" submit --notify "https://127.0.0.1:$GOOD/by-address" -- true)
wait_until 20 posts_are "p['path'] == '/by-address' and b['task']['id'] == $id" 1

t "a certificate for another host: refused, retried, the outbox keeps the TLS error"
OTHER=$(free_port)
listen "$OTHER" other
id=$("$DROVER" submit --notify "https://localhost:$OTHER/wrong" -- true)
wait_until 20 has_tls_error "$OTHER"
posts_are "p['path'] == '/wrong'" 0 || fail "a POST reached a host whose certificate is wrong"

done_testing
