#!/usr/bin/env bash
# The state directory holds every task's command and environment: every file the daemon and its
# supervisors create under DROVER_HOME is the owner's alone (0600, directories 0700), whatever
# the directory's own mode; a database an older drover left readable is narrowed at start; and a
# real unprivileged user cannot read it. Exit 77 (skipped) only when no such user can be made.
. "$(dirname "$0")/lib.sh"

user=drover-perms-test
if ! id -u "$user" >/dev/null 2>&1; then
    accounts useradd --system --no-create-home --shell /usr/sbin/nologin "$user" 2>/dev/null || {
        skip "cannot create the user $user (useradd needs root)"
    }
fi
# as_user CMD…: runs CMD as that user, with no group of ours.
as_user() { setpriv --reuid="$user" --regid="$user" --clear-groups -- "$@"; }

# A directory anyone may enter, as ~/.local/share often is (mktemp made $TMP 0700).
chmod 755 "$TMP"
mkdir -m 755 "$DROVER_HOME"

# stop_daemon: shuts the daemon down and waits until it is gone (it removes -wal and -shm last).
stop_daemon() {
    local pid
    pid=$(cat "$DROVER_HOME/daemon.lock")
    drover shutdown >/dev/null
    wait_until 10 proc_gone "$pid"
}

# wide_files: every file or directory under DROVER_HOME (not itself) that group or others may read.
wide_files() { find "$DROVER_HOME" -mindepth 1 -perm /044 -printf '%m %p\n'; }

t "a task runs: nothing under DROVER_HOME is readable by group or others"
id=$(drover submit --env SECRET=hunter2 -- sh -c 'echo out; echo err >&2')
drover wait "$id"
[ -f "$DROVER_HOME/drover.db-wal" ] || fail "no drover.db-wal to check"
expect_eq "$(wide_files)" "" "files readable by group or others"
expect_eq "$(stat -c %a "$DROVER_HOME/drover.db")" 600 "drover.db's mode"

t "another user cannot read the database, the logs or the run directory"
as_user true || fail "cannot run a command as $user"
as_user cat "$DROVER_HOME/drover.db" >/dev/null 2>&1 && fail "$user read drover.db"
as_user cat "$DROVER_HOME/drover.db-wal" >/dev/null 2>&1 && fail "$user read drover.db-wal"
as_user ls "$DROVER_HOME/runs/$id/1" >/dev/null 2>&1 && fail "$user listed the run directory"
as_user ls "$DROVER_HOME" >/dev/null 2>&1 || fail "$user cannot even list DROVER_HOME (the test proves nothing)"

t "a database an older drover left world-readable is narrowed when the daemon starts"
stop_daemon
# As after a crash of a daemon that made them so: a -wal and -shm left behind, world-readable.
for f in drover.db drover.db-wal drover.db-shm; do
    touch "$DROVER_HOME/$f"
    chmod 644 "$DROVER_HOME/$f"
done
drover ls >/dev/null   # starts the daemon again
expect_eq "$(wide_files)" "" "files readable by group or others after a restart"
as_user cat "$DROVER_HOME/drover.db" >/dev/null 2>&1 && fail "$user read drover.db after a restart"

t "the task itself keeps the umask of whoever started the daemon"
stop_daemon
umask 022
drover ls >/dev/null
id=$(drover submit -- sh -c umask)
drover wait "$id"
expect_eq "$(drover logs "$id")" 0022 "the task's umask"

t "the task keeps the descriptor limit of whoever started the daemon (the daemon raises its own)"
stop_daemon
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -gt 300 ] || fail "hard descriptor limit $hard is too low for this test"
(ulimit -Sn 300; drover ls >/dev/null)
pid=$(cat "$DROVER_HOME/daemon.lock")
daemon_soft=$(awk '/Max open files/ {print $4}' "/proc/$pid/limits")
[ "$daemon_soft" -gt 300 ] || fail "the daemon did not raise its own limit ($daemon_soft)"
id=$(drover submit -- sh -c 'ulimit -n')
drover wait "$id"
expect_eq "$(drover logs "$id")" 300 "the task's descriptor limit"
# Without the zygote (killed: this daemon's child only), supervisors are spawned by the daemon,
# whose own limit is raised, or by a zygote it restarts after raising it.
zygote=$(pgrep -P "$pid" -f __zygote || true)
[ -n "$zygote" ] || fail "no zygote under the daemon"
kill -9 "$zygote"
id=$(drover submit -- sh -c 'ulimit -n')
drover wait "$id"
expect_eq "$(drover logs "$id")" 300 "the task's descriptor limit, zygote gone"
done_testing
