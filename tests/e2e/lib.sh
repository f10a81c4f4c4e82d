# Shared setup for the end-to-end tests: a temporary DROVER_HOME, a fake GPU inventory, and
# helpers that wait for conditions (never fixed sleeps); at the end, the setup the HTTP tests share
# (http_daemon, api_token, req), the fake NVML's (use_fake_nvml), and that of the system-mode
# tests with real users (system_setup, system_user, system_daemon_start, as). Source it from a
# t-*.sh script.
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
    kill_leftovers "$DROVER_HOME" # whatever a test left running
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
    local pid=$1 state=$2
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 200); do
            proc_gone "$pid" && break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    kill_leftovers "$state"
}

# kill_leftovers STATE-DIR: kills what the tasks of the daemon whose state is in STATE-DIR left
# running: each attempt's process group and supervisor, from the run directories' pid files.
kill_leftovers() {
    local f sup pgid
    for f in "$1"/runs/*/*/pid; do
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

# --- HTTP ----------------------------------------------------------------------------------------
# free_port: a TCP port nothing listens on at 127.0.0.1 now, the kernel's pick (so that tests
# running at once do not collide).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# http_port: picks a free port for the daemon's HTTP listener: sets PORT and URL
# (http://127.0.0.1:PORT). For a setting `http = 127.0.0.1:$PORT` written by the test.
http_port() {
    PORT=$(free_port)
    URL=http://127.0.0.1:$PORT
}

# http_daemon [SETTING…]: writes $DROVER_HOME/drover.conf afresh — `http = 127.0.0.1:PORT` on a
# free port, then each SETTING as a line — and starts the daemon on it (drover ls); sets PORT and
# URL as http_port does. A port taken by someone else in between is tried again with another.
http_daemon() {
    local try err=
    mkdir -p "$DROVER_HOME"
    for try in 1 2 3; do
        http_port
        { echo "http = 127.0.0.1:$PORT"; [ $# -eq 0 ] || printf '%s\n' "$@"; } > "$DROVER_HOME/drover.conf"
        err=$("$DROVER" ls 2>&1 >/dev/null) && return 0
        case $err in *"Address already in use"*) ;; *) fail "the daemon did not start: $err" ;; esac
    done
    fail "the daemon did not start after $try tries: $err"
}

# api_token [TOKEN-CREATE OPTIONS…]: prints a new API token (`drover token create OPTIONS`; its
# "shown once" note on stderr is dropped); fails the test if none was printed. Another user's:
# `as USER "$DROVER" token create …` (system mode).
api_token() {
    local token
    token=$("$DROVER" token create "$@" 2>/dev/null) || fail "drover token create $* failed"
    [ -n "$token" ] || fail "drover token create $* printed no token"
    printf '%s\n' "$token"
}

# req METHOD PATH [CURL ARGS…]: the request to $URL with curl; the status on stdout, the body in
# $TMP/body, the head in $TMP/head.
req() {
    local method=$1 path=$2
    shift 2
    curl -sS -X "$method" -D "$TMP/head" -o "$TMP/body" -w '%{http_code}' "$@" "$URL$path"
}

# expect_status WANT WHAT CMD…: CMD (req, or a wrapper of it) prints a status; it must be WANT.
expect_status() {
    local want=$1 what=$2 got
    shift 2
    got=$("$@") || fail "$what: curl failed"
    [ "$got" = "$want" ] || fail "$what: expected $want, got $got: $(cat "$TMP/body")"
}

# json_get PYTHON-SUBSCRIPT: the value at that subscript (e.g. '["user"]') of the JSON on stdin;
# a string as it is, anything else as JSON.
json_get() { python3 -c "import json,sys; v=json.load(sys.stdin)$1; print(json.dumps(v) if not isinstance(v,str) else v)"; }

# --- the fake NVML -------------------------------------------------------------------------------
# use_fake_nvml STATE-FILE: the daemon sees the GPUs of the fake NVML library (tests/fake-nvml,
# built into $FAKE_NVML_DIR), which it loads as it would the driver's, instead of DROVER_FAKE_GPUS
# (unset). The GPUs are described by STATE-FILE, which the test writes and may rewrite while the
# daemon runs. Exports FAKE_NVML_STATE and LD_LIBRARY_PATH (the fake first): every daemon started
# from here on loads it.
use_fake_nvml() {
    unset DROVER_FAKE_GPUS
    : "${FAKE_NVML_DIR:?FAKE_NVML_DIR must point at the fake libnvidia-ml.so.1}"
    [ -e "$FAKE_NVML_DIR/libnvidia-ml.so.1" ] || fail "no $FAKE_NVML_DIR/libnvidia-ml.so.1"
    export LD_LIBRARY_PATH=$FAKE_NVML_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export FAKE_NVML_STATE=$1
}

# --- system mode with real users (needs root) ---------------------------------------------------
# system_setup NAME: for a test of a system daemon with real users. Skips the test unless it runs
# as root with setpriv and a drover that has system mode. Makes $SYS (a 0755 directory
# /tmp/drover-NAME.*) that holds the daemon's state ($STATE), socket ($SOCK), settings and output,
# and the users' homes and working directories; sets an EXIT trap that stops the daemon
# (system_daemon_stop), deletes the users and groups made by system_user and system_group, removes
# $SYS, then cleans up as lib.sh does. A test that needs more on exit sets its own trap that calls
# system_teardown, then cleanup.
system_setup() {
    [ "$(id -u)" = 0 ] || skip "needs root (creates users and a system daemon)"
    # Read whole: grep -q would leave at the first line, and the help's later writes die of SIGPIPE.
    grep -q -- '--system' <<<"$("$DROVER" daemon --help 2>&1)" || skip "no system mode yet"
    command -v setpriv >/dev/null || skip "no setpriv"
    SYSTEM_NAME=$1
    SYSTEM_USERS=() SYSTEM_GROUPS=()
    declare -gA SYSTEM_WORK=()
    SYS=$(mktemp -d "/tmp/drover-$1.XXXXXX")
    chmod 0755 "$SYS"
    STATE=$SYS/state SOCK=$SYS/run/drover.sock
    DAEMON_PID=
    trap 'rc=$?; system_teardown; (exit $rc); cleanup' EXIT
}

system_teardown() {
    local u g
    system_daemon_stop "$DAEMON_PID" "$STATE"
    for u in "${SYSTEM_USERS[@]}"; do accounts userdel "$u" 2>/dev/null || true; done
    for g in "${SYSTEM_GROUPS[@]}"; do accounts groupdel "$g" 2>/dev/null || true; done
    rm -rf "$SYS"
}

# system_group VAR LETTER: makes the group drvtst_<NAME><LETTER><pid>, its name in VAR.
system_group() {
    printf -v "$1" 'drvtst_%s%s%s' "$SYSTEM_NAME" "$2" "$$"
    SYSTEM_GROUPS+=("${!1}")
    accounts groupadd "${!1}"
}

# system_user VAR LETTER [USERADD OPTIONS…]: makes the user drvtst_<NAME><LETTER><pid>, its name in
# VAR: shell /bin/sh, home $SYS/home-LETTER (not made), and a working directory $SYS/LETTER-work
# that it owns (the directory `as` runs commands in).
system_user() {
    local var=$1 letter=$2
    shift 2
    printf -v "$var" 'drvtst_%s%s%s' "$SYSTEM_NAME" "$letter" "$$"
    SYSTEM_USERS+=("${!var}")
    accounts useradd -M -d "$SYS/home-$letter" -s /bin/sh "$@" "${!var}"
    SYSTEM_WORK[${!var}]=$SYS/$letter-work
    mkdir -p "$SYS/$letter-work"
    chown "${!var}:" "$SYS/$letter-work"
}

# as USER CMD…: CMD as USER (its groups too), in its working directory, with HOME there.
as() {
    local who=$1 dir
    shift
    dir=${SYSTEM_WORK[$who]:?"$who is no user of system_user"}
    (cd "$dir" && setpriv --reuid="$who" --regid="$who" --init-groups env HOME="$dir" "$@")
}

# system_daemon_start [SETTING…]: writes each SETTING as a line of $SYS/drover.conf, starts the
# system daemon on it (state $STATE, socket $SOCK, output in $SYS/daemon.out, pid in DAEMON_PID),
# points the CLI at it (DROVER_SOCKET) and waits until it answers.
system_daemon_start() {
    printf '%s\n' "$@" > "$SYS/drover.conf"
    "$DROVER" daemon --system --state-dir "$STATE" --socket "$SOCK" --config "$SYS/drover.conf" \
        > "$SYS/daemon.out" 2>&1 &
    DAEMON_PID=$!
    export DROVER_SOCKET=$SOCK
    wait_until 20 test -S "$SOCK"
    wait_until 20 "$DROVER" ls >/dev/null
}
