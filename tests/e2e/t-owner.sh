#!/usr/bin/env bash
# Tasks run as their owners (system mode): a task's uid, groups, $HOME and cwd are its
# submitter's, whatever the client's environment says; its logs are the owner's and nobody
# else's; a workdir its owner cannot enter is refused at submit (exit 2, one line); and a user
# cannot make the root daemon write through a link planted under its own task's directories.
# Needs root: it creates two real users (removed at the end).
. "$(dirname "$0")/lib.sh"

system_setup owner
system_group G g
system_user A a -G "$G"
system_user B b
chmod 0700 "$SYS/a-work" "$SYS/b-work"
system_daemon_start

# as USER CMD…: runs CMD as USER (its groups too) — unlike lib.sh's `as`, where the caller is and
# with root's HOME, USER and LOGNAME in its environment: the task must not inherit them.
as() {
    local who=$1
    shift
    HOME=/root USER=root LOGNAME=root setpriv --reuid="$who" --regid="$who" --init-groups "$@"
}

# --- identity -------------------------------------------------------------------------------
t "a task runs as its owner: uid, groups, HOME, USER, cwd"
id=$(cd "$SYS/a-work" && as "$A" "$DROVER" submit -- sh -c 'id -u; id -G; echo "$HOME $USER $LOGNAME"; pwd')
as "$A" "$DROVER" wait "$id" >/dev/null || fail "task $id failed: $(state_of "$id")"
out=$(cat "$STATE/runs/$id/1/stdout")
want="$(id -u "$A")
$(id -G "$A")
$SYS/home-a $A $A
$SYS/a-work"
expect_eq "$out" "$want" "the task's identity"

t "the owner reads its logs through the run directory; another user cannot"
expect_eq "$(as "$A" cat "$STATE/runs/$id/1/stdout" | head -1)" "$(id -u "$A")" "A reads its log"
expect_exit 1 as "$B" cat "$STATE/runs/$id/1/stdout"
expect_exit 2 as "$B" ls "$STATE/runs/$id/1"
expect_eq "$(stat -c '%U %a' "$STATE/runs/$id/1/stdout")" "$A 600" "the log's owner and mode"
expect_eq "$(stat -c '%U %a' "$STATE/runs/$id/1/status")" "root 600" "the status's owner and mode"
expect_eq "$(stat -c '%U %a' "$STATE/checkpoints/$id")" "$A 700" "the checkpoint dir"
expect_eq "$(stat -c '%U %a' "$STATE/metrics/$id.jsonl")" "$A 600" "the metrics file"

t "the task writes its checkpoint dir and metrics file as its owner"
id=$(cd "$SYS/b-work" && as "$B" "$DROVER" submit -- sh -c \
    'echo x > "$DROVER_CHECKPOINT_DIR/ck" && echo "{\"step\":1,\"loss\":0.5}" >> "$DROVER_METRICS_FILE"')
as "$B" "$DROVER" wait "$id" >/dev/null || fail "task $id: $(state_of "$id")"
expect_eq "$(stat -c %U "$STATE/checkpoints/$id/ck")" "$B" "the checkpoint file's owner"

# --- workdir ----------------------------------------------------------------------------------
t "a workdir the submitter cannot enter is refused at submit, exit 2, one line"
expect_exit 2 as "$B" "$DROVER" submit --workdir "$SYS/a-work" -- true
expect_eq "$ERR" "drover submit: $B cannot enter $SYS/a-work: Permission denied" "the refusal"
# Even when the client already sits in it (root put it there): the kernel's check, not the path's.
expect_exit 2 bash -c "cd '$SYS/a-work' && HOME=/root setpriv --reuid=$B --regid=$B --init-groups '$DROVER' submit -- true"

t "drover exp run from a workdir its owner cannot enter: refused the same way, nothing stored"
printf 'apiVersion: drover/v1\nkind: Experiment\nmetadata: {name: nowhere}\nspec:\n  command: [true]\n' \
    > "$SYS/nowhere.yaml"
chmod 0644 "$SYS/nowhere.yaml"
expect_exit 2 bash -c "cd '$SYS/a-work' && HOME=/root setpriv --reuid=$B --regid=$B --init-groups '$DROVER' exp run '$SYS/nowhere.yaml'"
expect_eq "$ERR" "drover exp: $B cannot enter $SYS/a-work: Permission denied" "the refusal"
[ -z "$("$DROVER" exp ls --json | python3 -c 'import json,sys; print(" ".join(e["name"] for e in json.load(sys.stdin)))')" ] ||
    fail "an experiment was stored"

t "the owner's supplementary groups count: a group-shared workdir"
mkdir "$SYS/g-work"
chgrp "$G" "$SYS/g-work"
chmod 0770 "$SYS/g-work"
id=$(as "$A" "$DROVER" submit --workdir "$SYS/g-work" -- sh -c 'pwd; touch made')
as "$A" "$DROVER" wait "$id" >/dev/null || fail "task $id: $(state_of "$id")"
expect_eq "$(stat -c %U "$SYS/g-work/made")" "$A" "a file the task made"

# --- symlink attack ---------------------------------------------------------------------------
t "a link planted by the owner is never written through"
# B's task tries, in its first attempt, to put links where the daemon will write the second:
# its next run directory (runs/ID/2), its attempt's files, its metrics file. The daemon's
# directories refuse it; links inside its own checkpoint dir are its business and are never
# followed by the daemon.
victim=$SYS/victim
mkdir "$victim"
chmod 0777 "$victim"
script='
n=$DROVER_ATTEMPT
base=$(dirname "$(dirname "$DROVER_CHECKPOINT_DIR")")
if [ "$n" = 1 ]; then
    ln -s '"$victim"' "$base/runs/$DROVER_TASK_ID/2" 2>/dev/null && echo planted-run
    ln -s '"$victim"'/status "$base/runs/$DROVER_TASK_ID/1/status.tmp" 2>/dev/null && echo planted-status
    rm -f "$DROVER_METRICS_FILE" 2>/dev/null && echo removed-metrics
    ln -s /etc "$DROVER_CHECKPOINT_DIR/etc"
    exit 1
fi
echo second'
id=$(cd "$SYS/b-work" && as "$B" "$DROVER" submit --retries 1 --backoff 0 -- sh -c "$script")
as "$B" "$DROVER" wait "$id" >/dev/null || fail "task $id: $(state_of "$id")"
expect_eq "$(cat "$STATE/runs/$id/1/stdout")" "" "what the first attempt managed"
expect_eq "$(cat "$STATE/runs/$id/2/stdout")" "second" "the second attempt"
[ -d "$STATE/runs/$id/2" ] && [ ! -L "$STATE/runs/$id/2" ] || fail "runs/$id/2 is not the daemon's directory"
expect_eq "$(ls -A "$victim")" "" "files written through a link"
for f in lock pid status status.tmp stdout stderr; do
    [ ! -e "/etc/$f" ] || fail "/etc/$f exists"
done

t "a retry's checkpoint dir stays the owner's, its links untouched"
expect_eq "$(stat -c '%U' "$STATE/checkpoints/$id")" "$B" "the checkpoint dir's owner"
[ -L "$STATE/checkpoints/$id/etc" ] || fail "the owner's own link was removed"
expect_eq "$(stat -c %U /etc)" "root" "/etc's owner"

done_testing
