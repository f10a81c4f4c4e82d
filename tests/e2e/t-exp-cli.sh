#!/usr/bin/env bash
# drover exp as a new user meets it: every subcommand's --help, options that belong to another
# subcommand refused as usage errors, a template run twice (the advice names --set
# metadata.name, which works), retry: {attempts: N} meaning N attempts, priority and stall
# reaching the daemon, and --dry-run checking the tasks against this machine (a GPU type it
# lacks, more memory than it has) without creating anything.
. "$(dirname "$0")/lib.sh"
W=$TMP/w
mkdir -p "$W" "$DROVER_HOME"
cd "$W"

# exp_json NAME PYTHON-EXPRESSION: evaluates the expression on `drover exp show NAME --json` (e).
exp_json() {
    "$DROVER" exp show "$1" --json | python3 -c "import json,sys; e=json.load(sys.stdin); print($2)"
}
exp_done() { [ "$(exp_json "$1" 'e["state"]')" = done ]; }

t "every exp subcommand has --help and -h: its usage and its options, exit 0"
for sub in run ls show export stop resume render; do
    for flag in --help -h; do
        out=$("$DROVER" exp "$sub" "$flag") || fail "drover exp $sub $flag exited $?"
        case "$out" in
        "usage: drover exp $sub"*) ;;
        *) fail "drover exp $sub $flag: expected its usage, got: $out" ;;
        esac
        grep -q -- "-h, --help" <<<"$out" || fail "drover exp $sub $flag lists no options: $out"
    done
done
out=$("$DROVER" exp run --help)
grep -q -- "--set VALUE" <<<"$out" && grep -q -- "--dry-run" <<<"$out" ||
    fail "drover exp run --help does not list --set and --dry-run: $out"
grep -q "metadata.name" <<<"$out" || fail "drover exp run --help does not mention metadata.name"
out=$("$DROVER" exp export --help)
grep -q -- "--format VALUE" <<<"$out" || fail "drover exp export --help lacks --format: $out"
if grep -q -- "--json" <<<"$out"; then fail "drover exp export --help offers --json: $out"; fi
out=$("$DROVER" exp --help)
for sub in run ls show export stop resume render; do
    grep -q "drover exp $sub" <<<"$out" || fail "drover exp --help does not list $sub: $out"
done
"$DROVER" exp run x.yaml --help | grep -q "^usage: drover exp run" ||
    fail "--help after the file is not help"

t "options of another subcommand are usage errors (exit 2, one line), before any daemon"
expect_exit 2 "$DROVER" exp ls --set a=1 --dry-run
expect_eq "$ERR" "drover exp: unknown option '--set' for exp ls (usage: drover exp ls [--json])"
expect_exit 2 "$DROVER" exp show e --dry-run
expect_eq "$ERR" "drover exp: unknown option '--dry-run' for exp show (usage: drover exp show NAME [--json])"
expect_exit 2 "$DROVER" exp export e --json
expect_eq "$ERR" "drover exp: unknown option '--json' for exp export (usage: drover exp export NAME [--format csv|json])"
expect_exit 2 "$DROVER" exp run e.yaml --format csv
expect_exit 2 "$DROVER" exp stop e --json
expect_exit 2 "$DROVER" exp ls extra
expect_eq "$ERR" "drover exp: too many arguments (usage: drover exp ls [--json])"
expect_exit 2 "$DROVER" exp show
expect_eq "$ERR" "drover exp: missing argument (usage: drover exp show NAME [--json])"
expect_exit 2 "$DROVER" exp
expect_eq "$ERR" "drover exp: missing subcommand: run, ls, show, export, stop, resume, render (see drover exp --help)"
expect_exit 2 "$DROVER" exp lst
expect_eq "$ERR" "drover exp: unknown subcommand 'lst': run, ls, show, export, stop, resume, render (see drover exp --help)"
[ ! -e "$DROVER_HOME/drover.sock" ] || fail "a usage error started a daemon"

cat > "$W/once.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: once }
spec:
  command: [sh, -c, "exit 0"]
YAML

t "a template run twice: the refusal says what works, and --set metadata.name=… does"
"$DROVER" exp run once.yaml >/dev/null
wait_until 30 exp_done once
expect_exit 2 "$DROVER" exp run once.yaml
case "$ERR" in
*"exists already"*"--set metadata.name="*) ;;
*) fail "the refusal of a second run gives no advice that works: $ERR" ;;
esac
out=$("$DROVER" exp run once.yaml --set metadata.name=once-2)
expect_eq "$out" "$(printf 'experiment once-2: 1 task (%s); drover exp show once-2' \
    "$(exp_json once-2 'e["trials"][0]["task"]')")"
wait_until 30 exp_done once-2
expect_exit 2 "$DROVER" exp run once.yaml --set metadata.name=a/b
name_rule="a name of letters, digits, '.', '_' and '-' (at most 64; not . or ..)"
expect_eq "$ERR" "drover exp: --set metadata.name=a/b: metadata.name: expected $name_rule, got \"a/b\""
expect_exit 2 "$DROVER" exp run once.yaml --set metadata.nam=x
expect_eq "$ERR" "drover exp: --set metadata.nam=x: unknown key 'nam' in metadata; did you mean 'name'?"

t "retry: {attempts: 1} is one attempt, {attempts: 2} two; priority and stall reach the tasks"
cat > "$W/attempts.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: attempts }
spec:
  command: [sh, -c, "exit 1"]
  retry: { attempts: 1, backoff: [1s] }
  priority: 5
  stall: 10m
  circuit_breaker: { failures: 10 }
  sweep:
    parameters:
      retry.attempts: [1, 2]
YAML
"$DROVER" exp run attempts.yaml >/dev/null
t0=$(exp_json attempts 'e["trials"][0]["task"]')
t1=$(exp_json attempts 'e["trials"][1]["task"]')
wait_until 60 state_is "$t0" failed
wait_until 60 state_is "$t1" failed
expect_eq "$(field_of "$t0" '["attempts"]')" 1 "attempts of a trial with retry: {attempts: 1}"
expect_eq "$(field_of "$t1" '["attempts"]')" 2 "attempts of a trial with retry: {attempts: 2}"
expect_eq "$(field_of "$t0" '["retries"]')" 0 "retries of a trial with retry: {attempts: 1}"
expect_eq "$(field_of "$t1" '["priority"]')" 5 "priority of a trial"
expect_eq "$(field_of "$t1" '["stall_ms"]')" 600000 "stall of a trial"
once=$(exp_json once 'e["trials"][0]["task"]')
expect_eq "$(field_of "$once" '["retries"]')" 3 "retries of a trial whose template has no retry"

t "--dry-run checks the tasks against this machine and creates nothing"
out=$("$DROVER" exp run once.yaml --dry-run --set metadata.name=fits) ||
    fail "a dry run of a template that fits exited $?"
grep -q "^task fits-t0 " <<<"$out" || fail "the dry run did not list the task: $out"
grep -q "^checked against this machine: every task can run here$" <<<"$out" ||
    fail "the dry run did not say the tasks fit: $out"
cat > "$W/never.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: never }
spec:
  stages:
    - { name: v100, command: [true], resources: { gpu_type: v100, gpu_count: 1 } }
    - { name: huge, command: [true], resources: { memory: 100000Gi } }
    - { name: fine, command: [true], resources: { gpu_count: 1 } }
YAML
rc=0
"$DROVER" exp run never.yaml --dry-run >"$W/out" 2>"$W/err" || rc=$?
expect_eq "$rc" 1 "exit status of a dry run with tasks that can never run here"
grep -q "^task v100 " "$W/out" && grep -q "^task fine " "$W/out" ||
    fail "the dry run did not list the tasks: $(cat "$W/out")"
grep -q "^drover exp: task v100: .*v100" "$W/err" ||
    fail "the dry run did not name the GPU type no GPU here has: $(cat "$W/err")"
grep -q "^drover exp: task huge: " "$W/err" ||
    fail "the dry run did not name the task asking for more memory than here: $(cat "$W/err")"
if grep -q "task fine" "$W/err"; then fail "a task that fits was reported: $(cat "$W/err")"; fi
names=$("$DROVER" exp ls --json |
    python3 -c 'import json,sys; print(sorted(e["name"] for e in json.load(sys.stdin)))')
expect_eq "$names" "['attempts', 'once', 'once-2']" "experiments after the dry runs"

t "--dry-run without a daemon: listed, and said to be unchecked"
rc=0
DROVER_HOME=$TMP/nodaemon DROVER_NO_AUTOSTART=1 "$DROVER" exp run never.yaml --dry-run \
    >"$W/out" 2>"$W/err" || rc=$?
expect_eq "$rc" 0 "exit status of a dry run that could not ask a daemon"
grep -q "^task huge " "$W/out" || fail "the unchecked dry run did not list the tasks"
grep -q "^drover exp: fit against this machine was not checked: " "$W/err" ||
    fail "the unchecked dry run did not say so: $(cat "$W/err")"

done_testing
