#!/usr/bin/env bash
# System mode (drover daemon --system): one daemon for every local user, run as root, on a
# temporary --state-dir and --socket. The socket is 0666 in a 0755 directory; real users created
# here connect and submit, and the daemon knows them only by what the kernel says (SO_PEERCRED):
# a raw request claiming another uid changes nothing; members of the `admins` group are admins;
# --system refuses to start without root; a per-user daemon still refuses every other uid; and a
# client picks its daemon as docs/CLI.md says (DROVER_SOCKET, DROVER_HOME, the system socket,
# autostart). Needs root (useradd): exits 77 otherwise.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (useradd, a system daemon)"
command -v sqlite3 >/dev/null || skip "the sqlite3 command is not installed (scripts/install-deps)"
tag=$$
alice=drvtst_ga$tag bob=drvtst_gb$tag admins=drvtst_gadm$tag
SYS="$TMP/sys" SOCK="$TMP/run/drover.sock" SYSLOG="$TMP/system.log"
SYSPID= MADE_RUN_DIR=

system_cleanup() {
    local rc=$?
    [ -n "$SYSPID" ] && kill -9 "$SYSPID" 2>/dev/null || true
    if [ -n "$MADE_RUN_DIR" ]; then
        rm -rf /run/drover
    fi
    accounts userdel "$alice" 2>/dev/null || true
    accounts userdel "$bob" 2>/dev/null || true
    accounts groupdel "$admins" 2>/dev/null || true
    (exit "$rc")
    cleanup
}
trap system_cleanup EXIT

accounts groupadd "$admins" || skip "cannot create the group $admins"
accounts useradd --no-create-home --shell /bin/sh "$alice" || skip "cannot create the user $alice"
accounts useradd --no-create-home --shell /bin/sh -G "$admins" "$bob" || skip "cannot create the user $bob"
chmod 755 "$TMP"   # the users must reach the socket's directory below it (mktemp made it 0700)

# as USER CMD…: CMD as USER, talking to the system daemon.
as() {
    local user=$1
    shift
    runuser -u "$user" -- env -u DROVER_HOME DROVER_SOCKET="$SOCK" "$@"
}

t "--system refuses to start without root, one line, exit 2"
rc=0
out=$(runuser -u "$alice" -- "$DROVER" daemon --system --state-dir "$TMP/nope" --socket "$TMP/nope.sock" 2>&1) || rc=$?
expect_eq "$rc" 2 "exit status of --system as $alice"
expect_eq "$(printf '%s\n' "$out" | wc -l)" 1 "lines of the refusal"
case "$out" in *"--system needs root"*) ;; *) fail "refusal does not say why: $out" ;; esac
[ ! -e "$TMP/nope" ] || fail "a refused daemon created its state directory"

t "a relative --state-dir is refused"
expect_exit 2 "$DROVER" daemon --system --state-dir relative/dir
case "$ERR" in *"--state-dir 'relative/dir': expected an absolute path"*) ;; *) fail "got: $ERR" ;; esac

t "the system daemon starts: socket 0666 in a 0755 directory, state 0711, database 0600"
printf 'admins = %s\n' "$admins" >"$TMP/drover.conf"   # the admins setting, from --config
"$DROVER" daemon --system --state-dir "$SYS" --socket "$SOCK" --config "$TMP/drover.conf" \
    >"$SYSLOG" 2>&1 &
SYSPID=$!
wait_until 20 test -S "$SOCK"
expect_eq "$(stat -c %a "$SOCK")" 666 "the socket's mode"
expect_eq "$(stat -c %a "$(dirname "$SOCK")")" 755 "the socket directory's mode"
expect_eq "$(stat -c %a "$SYS")" 711 "the state directory's mode"
expect_eq "$(stat -c %a "$SYS/drover.db")" 600 "drover.db's mode"
# The line is written once everything is up, a moment after the socket appears.
wait_until 20 grep -q "serving $SOCK for every user" "$SYSLOG"

t "a bad setting in the --config file: one line naming the file and line, exit 2"
printf 'admins = x\nfrobnicate = 1\n' >"$TMP/bad.conf"
expect_exit 2 "$DROVER" daemon --system --state-dir "$TMP/bad" --socket "$TMP/bad.sock" --config "$TMP/bad.conf"
expect_eq "$ERR" "drover daemon: $TMP/bad.conf:2: unknown setting 'frobnicate'" "the refusal"

t "a second system daemon on the same state directory does not start"
rc=0
"$DROVER" daemon --system --state-dir "$SYS" --socket "$SOCK" >/dev/null 2>&1 || rc=$?
expect_eq "$rc" 1 "exit status of a second daemon"
[ -S "$SOCK" ] || fail "the second daemon removed the first one's socket"

t "whoami: the kernel's word: user, uid, admin by the admins group"
expect_eq "$(as "$alice" "$DROVER" whoami --json | json_get '["user"]')" "$alice" "alice's name"
expect_eq "$(as "$alice" "$DROVER" whoami --json | json_get '["uid"]')" "$(id -u "$alice")" "alice's uid"
expect_eq "$(as "$alice" "$DROVER" whoami --json | json_get '["admin"]')" false "alice is no admin"
expect_eq "$(as "$alice" "$DROVER" whoami --json | json_get '["system"]')" true "the system daemon"
expect_eq "$(as "$bob" "$DROVER" whoami --json | json_get '["admin"]')" true "bob (in $admins) is an admin"
expect_eq "$(as root "$DROVER" whoami --json | json_get '["admin"]')" true "root is an admin"
expect_eq "$(as "$alice" "$DROVER" whoami)" "$alice (uid $(id -u "$alice")), system daemon" "whoami's line"

t "a user connects and submits; the task records its owner"
id=$(as "$alice" "$DROVER" submit -- true)
as "$alice" "$DROVER" wait "$id" >/dev/null || fail "alice's task failed"
# The owner as the store has it (tasks.uid and tasks.user, the lead's migration).
owner=$(sqlite3 "file:$SYS/drover.db?mode=ro" "SELECT uid || ' ' || user FROM tasks WHERE id = $id")
expect_eq "$owner" "$(id -u "$alice") $alice" "the owner recorded for task $id"

t "a raw request claiming another identity is recorded as the sender's"
raw=$(printf '%s' '{"v": 1, "op": "submit", "command": ["true"], "uid": 0, "user": "root", "gid": 0,
  "peer": {"uid": 0, "user": "root", "admin": true}, "env": {}, "workdir": "/"}' |
    runuser -u "$alice" -- python3 -c "$SEND_REQUEST_PY" "$SOCK")
rid=$(printf '%s' "$raw" | json_get '["id"]' 2>/dev/null) || fail "the raw submit was refused: $raw"
owner=$(sqlite3 "file:$SYS/drover.db?mode=ro" "SELECT uid || ' ' || user FROM tasks WHERE id = $rid")
expect_eq "$owner" "$(id -u "$alice") $alice" "the owner of a task whose request claimed root"

t "DROVER_SOCKET beats DROVER_HOME; DROVER_HOME alone is the per-user daemon"
sys=$(DROVER_SOCKET="$SOCK" "$DROVER" whoami --json | json_get '["system"]')
expect_eq "$sys" true "with DROVER_SOCKET and DROVER_HOME both set"
expect_eq "$("$DROVER" whoami --json | json_get '["system"]')" false "with DROVER_HOME alone"
[ -S "$DROVER_HOME/drover.sock" ] || fail "DROVER_HOME's daemon was not started"

t "a per-user daemon still refuses every other uid"
chmod 755 "$DROVER_HOME"
chmod 666 "$DROVER_HOME/drover.sock"   # only its uid check is left to keep alice out
rc=0
runuser -u "$alice" -- env -u DROVER_HOME DROVER_SOCKET="$DROVER_HOME/drover.sock" \
    "$DROVER" whoami >/dev/null 2>&1 || rc=$?
expect_eq "$rc" 3 "alice on root's per-user daemon"
chmod 600 "$DROVER_HOME/drover.sock"

t "DROVER_SOCKET naming no daemon: exit 3, one line naming it, nothing started"
expect_exit 3 env DROVER_SOCKET="$TMP/none.sock" "$DROVER" ls
case "$ERR" in *"cannot reach the daemon at $TMP/none.sock (DROVER_SOCKET)"*) ;; *) fail "got: $ERR" ;; esac
expect_eq "$(printf '%s\n' "$ERR" | wc -l)" 1 "lines of the error"
[ ! -e "$TMP/none.sock" ] || fail "a daemon was started for DROVER_SOCKET"

t "neither set: the system socket when it exists, never autostarted"
if [ -e /run/drover ]; then
    echo "    (not checked: /run/drover exists on this machine)"
else
    mkdir -m 755 /run/drover
    MADE_RUN_DIR=1
    ln -s "$SOCK" /run/drover/drover.sock
    sys=$(runuser -u "$alice" -- env -u DROVER_HOME -u DROVER_SOCKET HOME="$TMP/alicehome" \
        "$DROVER" whoami --json | json_get '["system"]')
    expect_eq "$sys" true "with neither variable set"
    rm /run/drover/drover.sock
    ln -s "$TMP/gone.sock" /run/drover/drover.sock   # the system daemon is not running
    rc=0
    err=$(runuser -u "$alice" -- env -u DROVER_HOME -u DROVER_SOCKET HOME="$TMP/alicehome" \
        "$DROVER" ls 2>&1 >/dev/null) || rc=$?
    expect_eq "$rc" 3 "exit status with the system daemon down"
    case "$err" in *"the system daemon at /run/drover/drover.sock does not answer"*) ;;
        *) fail "got: $err" ;; esac
    [ ! -e "$TMP/alicehome" ] || fail "a per-user daemon was started although the system socket exists"
    rm -rf /run/drover
    MADE_RUN_DIR=
fi

t "the system daemon stops on SIGTERM and removes its socket"
kill -TERM "$SYSPID"
wait_until 10 proc_gone "$SYSPID"
SYSPID=
[ ! -e "$SOCK" ] || fail "the socket is left behind"

done_testing
