#!/usr/bin/env bash
# Abusive clients (issue 9): nothing a client does to the socket or to /metrics makes the daemon
# spin, fill its log, grow without bound or stop answering its owner. Each attack comes from
# tests/e2e/abuse.py; while it runs, `drover ls` must answer, and the daemon (the same process)
# must stay small: memory by its peak RSS (VmHWM), CPU by utime+stime from /proc, the log by
# its size. The bounds are the limits of util/limits.h (docs/CLI.md, "Limits").
export DROVER_FAKE_GPUS=2x16G
. "$(dirname "$0")/lib.sh"

ABUSE="python3 $(dirname "$0")/abuse.py"
# Under ASan a freed buffer sits in quarantine (256 MiB by default) and would count as growth.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
SOCK="$DROVER_HOME/drover.sock"
W="$TMP/w"
mkdir -p "$W" "$DROVER_HOME"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "metrics = 127.0.0.1:$PORT" > "$DROVER_HOME/drover.conf"
ATTACKERS=()

daemon_pid() { cat "$DROVER_HOME/daemon.lock"; }
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$PID/status"; }   # VmRSS, VmHWM (KiB)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
log_bytes() { stat -c %s "$DROVER_HOME/daemon.log"; }
is_file() { [ -s "$1" ]; }

# ls_answers: `drover ls` exits 0 within 10 s (no autostart: it must be this daemon).
ls_answers() {
    local t0=$SECONDS
    DROVER_NO_AUTOSTART=1 timeout 10 "$DROVER" ls >/dev/null 2>"$W/ls.err" ||
        fail "drover ls did not answer during $1 ($(cat "$W/ls.err"))"
    echo "    drover ls answered in $((SECONDS - t0)) s during $1"
}

# cpu_share SECONDS: the daemon's CPU time over that many seconds, in percent of the wall.
cpu_share() {
    local hz t0 c0 c1 t1
    hz=$(getconf CLK_TCK)
    c0=$(cpu_ticks)
    t0=$(date +%s%N)
    sleep "$1"   # a measurement window, not a wait for a condition
    c1=$(cpu_ticks)
    t1=$(date +%s%N)
    echo $(((c1 - c0) * 100 * 1000000000 / hz / (t1 - t0)))
}

same_daemon() { [ "$(daemon_pid)" = "$PID" ] && [ -e "/proc/$PID" ] || fail "the daemon was replaced or died during $1"; }

stop_attackers() {
    local p
    for p in "${ATTACKERS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${ATTACKERS[@]}"; do wait "$p" 2>/dev/null || true; done
    ATTACKERS=()
}
trap 'rc=$?; stop_attackers; (exit $rc); cleanup' EXIT

# ------------------------------------------------------------------------------------------
# Part 1: a daemon with the usual descriptor limit. Memory: every attack together may raise
# its peak RSS by at most 64 MiB: LIMIT_UID_BUFFER (16 MiB) + one LIMIT_CONN_BUFFER being
# refused (4 MiB) + LIMIT_UID_BUFFER_EXEMPT per connection (100 x 64 KiB) + the allocator's
# slack. Before the fix each attack alone took 256 MiB to 420 MB.
drover ls >/dev/null
PID=$(daemon_pid)
base=$(kib VmRSS)
echo "    daemon pid $PID, RSS $((base / 1024)) MiB at start"

# Slow clients, started first and checked last: they need LIMIT_PARTIAL_FRAME_S and
# LIMIT_HTTP_IDLE_S (30 s each) to be closed.
$ABUSE slow-sock "$SOCK" "$W/slow.closed" --status "$W/slow.ready" & ATTACKERS+=($!)
$ABUSE idle-http "$PORT" "$W/idle.closed" --status "$W/idle.ready" & ATTACKERS+=($!)
wait_until 10 is_file "$W/slow.ready"
wait_until 10 is_file "$W/idle.ready"
slow_start=$SECONDS

t "a wait, then 256 MiB on the same connection: refused at LIMIT_CONN_BUFFER"
held=$(drover submit --hold -- true)
$ABUSE wait-flood "$SOCK" "$held" $((256 << 20)) > "$W/flood.json"
python3 - "$W/flood.json" <<'PY' || fail "wait + flood: $(cat "$W/flood.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["sent"] < 64 << 20, "the daemon took %d bytes" % r["sent"]
assert "LIMIT_CONN_BUFFER" in r["reply"], r["reply"]
PY
same_daemon "the wait flood"
hwm=$(kib VmHWM)
[ $((hwm - base)) -lt $((64 << 10)) ] || fail "wait flood: peak RSS grew by $(((hwm - base) / 1024)) MiB"
ls_answers "after the wait flood"

t "a wait's client that leaves is still noticed (the deferred connection is read)"
fds() { ls "/proc/$PID/fd" | wc -l; }
# At most as many as before: another descriptor open at that moment (a client's connection
# being closed, a log) may be gone since.
fds_are() { [ "$(fds)" -le "$1" ]; }
fd0=$(fds)
python3 - "$SOCK" "$held" "$W/waiting" <<'PY'
import json, os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
b = json.dumps({"v": 1, "op": "wait", "ids": [int(sys.argv[2])]}).encode()
s.sendall(struct.pack(">I", len(b)) + b)
s.settimeout(0.5)
try:
    s.recv(1)  # nothing comes: the task is held
    sys.exit("the wait was answered")
except socket.timeout:
    pass
s.close()
PY
wait_until 10 fds_are "$fd0"
drover cancel "$held" >/dev/null
ls_answers "after a wait client left"

t "100 connections each holding most of a 4 MiB frame: LIMIT_UID_BUFFER"
$ABUSE partial "$SOCK" 100 --status "$W/partial.ready" > "$W/partial.json" & ATTACKERS+=($!)
wait_until 60 is_file "$W/partial.ready"
ls_answers "100 partial frames"
hwm=$(kib VmHWM)
echo "    peak RSS +$(((hwm - base) / 1024)) MiB with 100 partial frames"
[ $((hwm - base)) -lt $((64 << 10)) ] || fail "partial frames: peak RSS grew by $(((hwm - base) / 1024)) MiB"
kill "${ATTACKERS[-1]}"
wait "${ATTACKERS[-1]}" || true
unset 'ATTACKERS[-1]'
grep -q LIMIT_UID_BUFFER "$W/partial.json" || fail "no connection was refused with LIMIT_UID_BUFFER: $(cat "$W/partial.json")"
same_daemon "the partial frames"

t "/metrics: 300 MiB of headers are never answered 200; 64 KiB get 431"
$ABUSE headers "$PORT" $((300 << 20)) > "$W/big.json"
grep -q '"status_line": "HTTP/1.1 200' "$W/big.json" && fail "300 MiB of headers answered 200"
$ABUSE headers "$PORT" $((64 << 10)) > "$W/h64.json"
grep -q '"status_line": "HTTP/1.1 431' "$W/h64.json" || fail "64 KiB of headers: $(cat "$W/h64.json")"
hwm=$(kib VmHWM)
[ $((hwm - base)) -lt $((64 << 10)) ] || fail "headers: peak RSS grew by $(((hwm - base) / 1024)) MiB"
python3 -c "import urllib.request,sys; r=urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=5); sys.exit(r.status != 200)" ||
    fail "/metrics no longer answers"
same_daemon "the header flood"

t "a request trickled a byte a second, and an idle /metrics connection, are closed"
wait_until 60 is_file "$W/slow.closed"
wait_until 60 is_file "$W/idle.closed"
echo "    trickling client closed after $(cat "$W/slow.closed") s, idle HTTP after $(cat "$W/idle.closed") s"
awk '{exit !($1 >= 25 && $1 <= 45)}' "$W/slow.closed" || fail "trickling client closed after $(cat "$W/slow.closed") s (LIMIT_PARTIAL_FRAME_S is 30)"
awk '{exit !($1 >= 25 && $1 <= 45)}' "$W/idle.closed" || fail "idle HTTP client closed after $(cat "$W/idle.closed") s (LIMIT_HTTP_IDLE_S is 30)"
stop_attackers

# ------------------------------------------------------------------------------------------
# Part 2: a daemon started under `ulimit -n 64`, flooded until it is out of descriptors.
t "out of descriptors: no spinning, a quiet log, and the owner still served"
drover shutdown >/dev/null
wait_until 20 proc_gone "$PID"
(ulimit -n 64 && "$DROVER" ls >/dev/null)
PID=$(daemon_pid)
[ "$(awk '$2 == "open" && $3 == "files" {print $4}' "/proc/$PID/limits")" = 64 ] ||
    fail "the daemon does not run with 64 descriptors"
log0=$(log_bytes)

# Half-open connections to /metrics, as many again when the daemon closes some.
$ABUSE hold-http "$PORT" 300 --reconnect 100 --status "$W/http.ready" > "$W/http.json" & ATTACKERS+=($!)
wait_until 20 is_file "$W/http.ready"
cpu=$(cpu_share 3)
echo "    daemon CPU ${cpu}% during the /metrics flood"
[ "$cpu" -lt 30 ] || fail "the daemon used ${cpu}% of a CPU during the /metrics flood"
ls_answers "the /metrics flood"
same_daemon "the /metrics flood"

# Then the socket too: the daemon runs out of descriptors.
$ABUSE hold-sock "$SOCK" 300 --reconnect 100 --status "$W/sock.ready" > "$W/sock.json" & ATTACKERS+=($!)
wait_until 20 is_file "$W/sock.ready"
cpu=$(cpu_share 3)
echo "    daemon CPU ${cpu}% during the socket flood"
[ "$cpu" -lt 30 ] || fail "the daemon used ${cpu}% of a CPU during the socket flood"
ls_answers "the socket and /metrics floods"
ls_answers "the socket and /metrics floods (again)"
grep -q "Too many open files" "$DROVER_HOME/daemon.log" || fail "the daemon never ran out of descriptors: the test did not test"
same_daemon "the socket flood"
stop_attackers
grown=$(($(log_bytes) - log0))
echo "    daemon.log grew by $grown bytes"
[ "$grown" -lt 16384 ] || fail "daemon.log grew by $grown bytes during the floods"
ls_answers "after the floods"

done_testing
