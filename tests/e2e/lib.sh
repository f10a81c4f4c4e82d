# Shared setup for the end-to-end tests: a temporary DROVER_HOME, a fake GPU inventory, and
# helpers that wait for conditions (never fixed sleeps). Source it from a t-*.sh script.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"

: "${DROVER:?DROVER must point at the drover binary}"
DROVER=$(readlink -f "$DROVER")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/drover-test.XXXXXX")
export DROVER_HOME="$TMP/home"
export DROVER_FAKE_GPUS="${DROVER_FAKE_GPUS:-2x16G}"
export NO_COLOR=1
unset DROVER_NO_AUTOSTART
TESTS_RUN=0
TESTS_FAILED=0

cleanup() {
    local rc=$? pid
    pid=$(cat "$DROVER_HOME/daemon.lock" 2>/dev/null || true)
    "$DROVER" shutdown >/dev/null 2>&1 || true
    for _ in $(seq 200); do   # let it exit (and any sanitizer report be written)
        [ -z "$pid" ] || proc_gone "$pid" && break
        sleep 0.05
    done
    # A daemon that crashed would be restarted by the next command and hide it: look at its log
    # (sanitizer reports land there too in `make asan`).
    if grep -qE "AddressSanitizer|LeakSanitizer|runtime error:|drover: fatal" "$DROVER_HOME/daemon.log" 2>/dev/null; then
        echo "FAIL: the daemon log reports a crash or a sanitizer error:" >&2
        grep -E -A8 "AddressSanitizer|LeakSanitizer|runtime error:|drover: fatal" "$DROVER_HOME/daemon.log" | head -40 >&2
        rc=1
    fi
    # Whatever a test left running: every supervisor and every task process group.
    for f in "$DROVER_HOME"/runs/*/*/pid; do
        [ -f "$f" ] || continue
        read -r sup pgid < "$f" || true
        [ -n "${pgid:-}" ] && [ "$pgid" -gt 0 ] && kill -9 -- "-$pgid" 2>/dev/null || true
        [ -n "${sup:-}" ] && kill -9 "$sup" 2>/dev/null || true
    done
    if [ -f "$DROVER_HOME/daemon.lock" ]; then
        pid=$(cat "$DROVER_HOME/daemon.lock" 2>/dev/null || true)
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT

drover() { "$DROVER" "$@"; }

fail() {
    echo "FAIL: $*" >&2
    echo "--- daemon.log ---" >&2
    tail -n 30 "$DROVER_HOME/daemon.log" >&2 2>/dev/null || true
    exit 1
}

# wait_until TIMEOUT_S CMD...: polls CMD until it succeeds, or fails the test.
# useradd, userdel, groupadd and groupdel of tests running at once (ctest -j) take turns: the
# shadow tools fail at once, rather than wait, when another holds the lock on /etc/passwd.
accounts() { flock /tmp/drover-tests-accounts.lock "$@"; }

wait_until() {
    local limit=$1
    shift
    local deadline=$((SECONDS + limit))
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${limit}s waiting for: $*"
        sleep 0.05
    done
}

state_of() { "$DROVER" show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
field_of() { "$DROVER" show "$1" --json | python3 -c "import json,sys; v=json.load(sys.stdin)$2; print(json.dumps(v) if not isinstance(v,str) else v)"; }
state_is() { [ "$(state_of "$1")" = "$2" ]; }

expect_eq() {
    [ "$1" = "$2" ] || fail "${3:-value}: expected '$2', got '$1'"
}

# expect_exit CODE CMD...: runs CMD, checks its exit status, keeps its stderr in $ERR.
expect_exit() {
    local want=$1 rc=0
    shift
    ERR=$("$@" 2>&1 >/dev/null) || rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want (stderr: $ERR)"
}

task_count() { "$DROVER" ls --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

# Runs a named sub-test; each prints one line.
t() {
    TESTS_RUN=$((TESTS_RUN + 1))
    echo "--- $1"
}

done_testing() { echo "ok: $TESTS_RUN checks in $(basename "$0")"; }

# barrier [SUBMIT OPTIONS]: submits a no-op task and waits for it, so every scheduling pass
# triggered before it has run. The options must describe a task that can start now.
barrier() { "$DROVER" wait "$("$DROVER" submit "$@" -- true)" >/dev/null; }

# send_request [SOCKET]: sends the JSON request read from stdin straight to the daemon's socket
# (default $DROVER_HOME's), as the CLI frames one (4-byte big-endian length, then the JSON), and
# prints the reply's JSON on one line; fails if the daemon closes the connection first. For
# requests the CLI would not send. As another user: `as USER python3 -c "$SEND_REQUEST_PY" SOCK`.
SEND_REQUEST_PY='
import socket, struct, sys
body = sys.stdin.buffer.read().rstrip(b"\n")
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(struct.pack(">I", len(body)) + body)
def read(n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            sys.exit("the daemon closed the connection")
        buf += chunk
    return buf
print(read(struct.unpack(">I", read(4))[0]).decode())
'
send_request() { python3 -c "$SEND_REQUEST_PY" "${1:-$DROVER_HOME/drover.sock}"; }

# system_daemon_stop PID STATE-DIR: stops a system daemon a test started (SIGTERM, then SIGKILL
# if it lingers) and kills what its tasks left running: each attempt's process group and
# supervisor, from the run directories' pid files.
system_daemon_stop() {
    local pid=$1 state=$2 f sup pgid
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 200); do
            proc_gone "$pid" && break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    for f in "$state"/runs/*/*/pid; do
        [ -f "$f" ] || continue
        read -r sup pgid < "$f" || true
        [ -n "${pgid:-}" ] && [ "$pgid" -gt 0 ] && kill -9 -- "-$pgid" 2>/dev/null || true
        [ -n "${sup:-}" ] && kill -9 "$sup" 2>/dev/null || true
    done
}

# proc_gone PID: the process no longer exists, or is a zombie nobody reaped (a killed
# grandchild is re-parented to init, which may not reap it in a container).
proc_gone() {
    [ ! -e "/proc/$1" ] && return 0
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}
