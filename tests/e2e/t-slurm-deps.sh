#!/usr/bin/env bash
# Dependencies on Slurm (slurm-lib.sh): between two Slurm tasks, and across backends
# (local → slurm → local), with the same upstream_failed semantics as local tasks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up 4 8

# stamps NAME: a command that appends "NAME start T" and, a second later, "NAME end T" to
# $TMP/stamps; exits with the content of $TMP/code.NAME if there is one.
stamps() {
    echo "echo \"$1 start \$(date +%s.%N)\" >> $TMP/stamps; sleep 1;" \
        "echo \"$1 end \$(date +%s.%N)\" >> $TMP/stamps; exit \$(cat $TMP/code.$1 2>/dev/null || echo 0)"
}
# stamp NAME start|end: the time NAME wrote for that event (fails the test if it did not).
stamp() {
    local v
    v=$(awk -v n="$1" -v k="$2" '$1 == n && $2 == k { print $3 }' "$TMP/stamps")
    [ -n "$v" ] || fail "$1 wrote no $2 stamp: $(cat "$TMP/stamps" 2>/dev/null)"
    echo "$v"
}
# runs_after LATER EARLIER: LATER started no sooner than EARLIER ended.
runs_after() {
    python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' \
        "$(stamp "$1" start)" "$(stamp "$2" end)" || fail "$1 started before $2 ended: $(cat "$TMP/stamps")"
}
never_ran() { ! awk -v n="$1" '$1 == n { found = 1 } END { exit !found }' "$TMP/stamps" 2>/dev/null; }

# not_started_in_slurm ID: the task has no Slurm job, or one that never ran.
not_started_in_slurm() {
    local job state
    job=$(slurm_job_of "$1")
    [ "$job" = null ] && return 0
    state=$(slurm_job_state "$job")
    case $state in PENDING | CANCELLED) ;; *) fail "task $1's Slurm job $job is $state: it ran" ;; esac
    scontrol show job "$job" | grep -q 'RunTime=00:00:00' || fail "Slurm job $job of task $1 ran: $(scontrol show job "$job")"
}

t "slurm A → slurm B (--after): B starts after A ended"
a=$(drover submit --on slurm -- sh -c "$(stamps sa)")
b=$(drover submit --on slurm --after "$a" -- sh -c "$(stamps sb)")
task_ends "$a" succeeded 60
task_ends "$b" succeeded 60
runs_after sb sa

t "slurm A exits 1 → slurm B (--after A) upstream_failed, never ran; --after-any C runs"
echo 1 > "$TMP/code.fa"
a=$(drover submit --on slurm -- sh -c "$(stamps fa)")
b=$(drover submit --on slurm --after "$a" -- sh -c "$(stamps fb)")
c=$(drover submit --on slurm --after-any "$a" -- sh -c "$(stamps fc)")
task_ends "$a" failed 60
task_ends "$b" upstream_failed 60
task_ends "$c" succeeded 60
never_ran fb || fail "B ran: $(cat "$TMP/stamps")"
not_started_in_slurm "$b"
drover show "$b" | grep -q "dependency $a did not succeed" || fail "B's reason: $(drover show "$b")"
runs_after fc fa

t "local → slurm → local: all succeed, in order"
l1=$(drover submit -- sh -c "$(stamps l1)")
s=$(drover submit --on slurm --after "$l1" -- sh -c "$(stamps s)")
l2=$(drover submit --after "$s" -- sh -c "$(stamps l2)")
task_ends "$l1" succeeded 30
task_ends "$s" succeeded 60
task_ends "$l2" succeeded 60
expect_eq "$(field_of "$s" '["backend"]')" slurm "the middle task's backend"
expect_eq "$(field_of "$l2" '["backend"]')" local "the last task's backend"
runs_after s l1
runs_after l2 s

t "local → slurm (fails) → local: the last is upstream_failed"
echo 2 > "$TMP/code.m"
k1=$(drover submit -- sh -c "$(stamps k1)")
m=$(drover submit --on slurm --after "$k1" -- sh -c "$(stamps m)")
k2=$(drover submit --after "$m" -- sh -c "$(stamps k2)")
task_ends "$m" failed 60
expect_eq "$(field_of "$m" '["exit_code"]')" 2 "the middle task's exit code"
task_ends "$k2" upstream_failed 30
never_ran k2 || fail "k2 ran: $(cat "$TMP/stamps")"
expect_eq "$(field_of "$k2" '["attempts"]')" 0 "attempts of the upstream_failed local task"
runs_after m k1

t "local fails → slurm (--after) upstream_failed without a Slurm job; slurm --after-any runs"
echo 1 > "$TMP/code.x"
x=$(drover submit -- sh -c "$(stamps x)")
y=$(drover submit --on slurm --after "$x" -- sh -c "$(stamps y)")
z=$(drover submit --on slurm --after-any "$x" -- sh -c "$(stamps z)")
task_ends "$x" failed 30
task_ends "$y" upstream_failed 30
task_ends "$z" succeeded 60
never_ran y || fail "y ran: $(cat "$TMP/stamps")"
expect_eq "$(slurm_job_of "$y")" null "the Slurm job of a task whose local upstream failed"
runs_after z x
done_testing
