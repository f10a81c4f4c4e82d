#!/usr/bin/env bash
# A full disk: a submission that cannot be stored is refused with one clear line (exit 1) and
# leaves nothing half-stored; once there is room again, everything works and nothing is lost.
. "$(dirname "$0")/lib.sh"

mnt="$TMP/small"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=3M tmpfs "$mnt" 2>/dev/null; then
    echo "SKIP: mounting a small tmpfs needs root (make check runs as root in CI)"
    exit 0
fi
# Stop the daemon and unmount before lib.sh's cleanup, keeping the test's exit status for it.
trap 'st=$?; "$DROVER" shutdown >/dev/null 2>&1; umount -l "$mnt" 2>/dev/null; (exit $st); cleanup' EXIT
export DROVER_HOME="$mnt/home"

t "a task stored before the disk fills runs"
first=$(drover submit -- true)
drover wait "$first"

t "with the disk full, submit fails with one line and exit 1"
dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null || true
expect_exit 1 "$DROVER" submit -- true
[[ "$ERR" == "drover submit: cannot store the task:"*"full"* ]] || fail "message: $ERR"
[ "$(printf '%s\n' "$ERR" | wc -l)" -eq 1 ] || fail "more than one line: $ERR"

t "with room again, the daemon restarts: the old task is there, the refused one is not"
rm -f "$mnt/filler"
expect_eq "$(task_count)" 1 "tasks after the disk emptied"
expect_eq "$(state_of "$first")" succeeded
again=$(drover submit -- true)
drover wait "$again"
expect_eq "$(task_count)" 2
done_testing
