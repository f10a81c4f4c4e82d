#!/usr/bin/env bash
# Retries on Slurm: each attempt is a new Slurm job, the backoff is drover's, and the checkpoint
# directory (in shared-dir) is the same across attempts, so a task resumes where it stopped.
# Needs root and Slurm (slurm-lib.sh; skipped otherwise).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-lib.sh"
slurm_up


t "a task that fails twice, then succeeds, resumes from its checkpoint on each attempt"
# Two "epochs" per attempt, appended to the checkpoint: attempt N continues after the last epoch
# the attempt before it wrote, and succeeds from the third attempt on.
id=$(drover submit --on slurm --retries 3 --backoff 1 -- sh -c '
    ck=$DROVER_CHECKPOINT_DIR/epochs
    last=$(tail -n 1 "$ck" 2>/dev/null || echo 0)
    echo "attempt $DROVER_ATTEMPT resumes after epoch $last"
    for e in $((last + 1)) $((last + 2)); do echo "$e" >> "$ck"; done
    [ "$DROVER_ATTEMPT" -ge 3 ]')
drover wait "$id" >/dev/null || fail "task $id did not succeed: $(drover show "$id")"
expect_eq "$(state_of "$id")" succeeded "state"
expect_eq "$(field_of "$id" '["backend"]')" slurm "backend"
expect_eq "$(field_of "$id" '["attempts"]')" 3 "attempts"
expect_eq "$(tr '\n' ' ' < "$SHARED/checkpoints/$id/epochs")" "1 2 3 4 5 6 " \
    "the checkpoint: every attempt continued from the last epoch, none started over"
expect_eq "$(drover logs "$id" --attempt 1)" "attempt 1 resumes after epoch 0" "log of attempt 1"
expect_eq "$(drover logs "$id" --attempt 2)" "attempt 2 resumes after epoch 2" "log of attempt 2"
expect_eq "$(drover logs "$id")" "attempt 3 resumes after epoch 4" "log of the latest attempt"
expect_eq "$(cat "$SHARED/runs/$id/3/stdout")" "attempt 3 resumes after epoch 4" \
    "the latest attempt's stdout in shared-dir"

t "three attempts, three Slurm jobs, each ended as drover recorded it"
drover show "$id" --json > "$TMP/show.json"
python3 - "$TMP/show.json" <<'PY' > "$TMP/jobs"
import json, sys
t = json.load(open(sys.argv[1]))
a = t["attempt_list"]
assert len(a) == 3, a
assert [x["exit_code"] for x in a] == [1, 1, 0], a
jobs = [x.get("slurm_job") for x in a]
assert all(isinstance(j, str) and j.isdigit() for j in jobs), jobs
assert len(set(jobs)) == 3, f"attempts share a Slurm job: {jobs}"
assert t["slurm_job"] == jobs[-1], (t["slurm_job"], jobs)
# Backoff 1 s: no attempt is submitted again before one second after the previous one ended.
for prev, cur in zip(a, a[1:]):
    assert cur["start_time"] - prev["end_time"] >= 950, a
print("\n".join(jobs))
PY
[ "$(wc -l < "$TMP/jobs")" -eq 3 ] || fail "no Slurm job ids read from show --json"
states=
while read -r job; do states="$states $(slurm_job_state "$job")"; done < "$TMP/jobs"
expect_eq "$states" " FAILED FAILED COMPLETED" "the Slurm jobs' states"
expect_eq "$(slurm_jobs | wc -l)" 3 "Slurm jobs in all (nothing submitted twice)"

t "retries run out: failed after retries + 1 attempts, each a Slurm job"
id=$(drover submit --on slurm --retries 1 --backoff 0 -- sh -c 'exit 3')
expect_exit 1 drover wait "$id"
expect_eq "$(state_of "$id")" failed "state"
expect_eq "$(field_of "$id" '["attempts"]')" 2 "attempts"
expect_eq "$(field_of "$id" '["exit_code"]')" 3 "exit code"
reason=$(field_of "$id" '["reason"]')
[[ "$reason" == "attempt 2: exit code 3"* ]] || fail "reason: $reason"
drover show "$id" --json | python3 -c 'import json,sys; a=json.load(sys.stdin)["attempt_list"]
j=[x["slurm_job"] for x in a]; assert len(set(j)) == 2 and None not in j, j' || fail "attempts' Slurm jobs"
expect_eq "$(slurm_jobs | wc -l)" 5 "Slurm jobs in all"
done_testing
