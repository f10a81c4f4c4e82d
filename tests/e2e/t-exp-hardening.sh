#!/usr/bin/env bash
# Experiments against hostile input: a template whose needs repeat a stage, a ${…} substitution
# bomb, raw exp_run requests that bypass the CLI (a name that climbs out of DROVER_HOME, needs
# that repeat, name nothing or form a cycle, an environment the exec limits refuse, tasks without
# params), sweep values spliced into `sh -c` (${x:q} quotes them), and a template that is not
# UTF-8. The daemon must refuse each with one line and keep serving.
. "$(dirname "$0")/lib.sh"
W=$TMP/w
mkdir -p "$W" "$DROVER_HOME"

exp_state() {
    "$DROVER" exp show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'
}
exp_state_is() { [ "$(exp_state "$1")" = "$2" ]; }
daemon_pid() { cat "$DROVER_HOME/daemon.lock"; }

# raw_exp_run PYTHON: sends an exp_run request straight to the socket (send_request), after
# PYTHON has changed `req`, a valid one-trial request; prints the reply.
raw_exp_run() {
    python3 - "$1" "$W" <<'PY' | send_request
import json, os, sys
req = {"v": 1, "op": "exp_run", "name": "raw", "kind": "Experiment",
       "spec": {"command": ["true"]},
       "tasks": [{"name": "raw-t0", "trial": 0, "command": ["true"], "env": {}}],
       "parallel": 0, "space": 1, "seed": 1, "workdir": sys.argv[2],
       "env": {"PATH": os.environ["PATH"]}}
def stage(name, needs=()):
    return {"name": name, "trial": -1, "params": {}, "command": ["true"], "env": {},
            "needs": list(needs)}
def pipeline(*tasks):
    req.update(kind="Pipeline", spec={"stages": [{"name": "a", "command": ["true"]}]},
               tasks=list(tasks))
exec(sys.argv[1])
print(json.dumps(req))
PY
}

# raw_refused PYTHON WANT...: the request is refused with code 2, every WANT in its error, and
# the daemon that refused it is still the one serving.
raw_refused() {
    local pid reply
    pid=$(daemon_pid)
    reply=$(raw_exp_run "$1") || fail "no reply to: $1"
    python3 -c 'import json, sys; r = json.loads(sys.argv[1])
sys.exit(not (not r["ok"] and r["code"] == 2 and all(w in r["error"] for w in sys.argv[2:])))' \
        "$reply" "${@:2}" || fail "expected a refusal with '${*:2}' for: $1; got $reply"
    "$DROVER" ls >/dev/null || fail "the daemon stopped answering after: $1"
    expect_eq "$(daemon_pid)" "$pid" "the daemon's pid after: $1"
}

"$DROVER" ls >/dev/null # starts the daemon

t "needs that repeat a stage: refused where they are written, and the daemon survives a raw one"
cat > "$W/dup.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: dup }
spec:
  stages:
    - { name: a, command: [true] }
    - { name: b, command: [true], needs: [a, a, a, a, a, a, a, a] }
YAML
expect_exit 2 "$DROVER" exp run "$W/dup.yaml" --dry-run
expect_eq "$ERR" "drover exp: $W/dup.yaml:7:46: needs 'a' more than once" "dry run"
expect_exit 2 "$DROVER" exp run "$W/dup.yaml"
raw_refused 'pipeline(stage("a"), stage("b", ["a"] * 8))' "task b needs a more than once"
raw_refused 'pipeline(stage("a"), stage("b", ["a", "c"]))' \
    "task b needs c, which is not a task of the request"
raw_refused 'pipeline(stage("a", ["c"]), stage("b", ["a"]), stage("c", ["b"]))' \
    "cycle in needs: a -> c -> b -> a"
raw_refused 'pipeline(stage("a"), stage("a"))' "two tasks are named a"
# A valid pipeline still runs, each stage after the ones it needs.
cat > "$W/pipe.yaml" <<'YAML'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: pipe }
spec:
  stages:
    - { name: last, command: [true], needs: [first, middle] }
    - { name: first, command: [true] }
    - { name: middle, command: [true], needs: [first] }
YAML
"$DROVER" exp run "$W/pipe.yaml" >/dev/null
wait_until 30 exp_state_is pipe done

t "a \${…} bomb is refused at once, naming the limit and where"
python3 - "$W/bomb.yaml" <<'PY'
import sys
lines = ["apiVersion: drover/v1", "kind: Experiment", "metadata: { name: bomb }", "spec:",
         "  hyperparameters:", '    l0: "xxxxxxxxxx"']
for i in range(1, 8):
    lines.append('    l%d: "%s"' % (i, "${hyperparameters.l%d}" % (i - 1) * 10))
lines.append('  command: [echo, "${hyperparameters.l7}"]')
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
expect_exit 2 timeout 10 "$DROVER" exp run "$W/bomb.yaml" --dry-run
case $ERR in
"drover exp: $W/bomb.yaml:12:"*LIMIT_TEMPLATE_EXPANDED*) ;;
*) fail "bomb: $ERR" ;;
esac

t "raw exp_run requests get every check the CLI makes"
raw_refused 'req["name"] = "../../../x"' "experiment name"
raw_refused 'req["name"] = ".."' "experiment name"
raw_refused 'req["kind"] = "Sweep"' "kind must be Experiment or Pipeline"
raw_refused 'req["workdir"] = "relative/dir"' "absolute workdir"
raw_refused 'req["env"] = {"A=B": "c"}' "env"
raw_refused 'req["tasks"][0]["env"] = {"X": 1}' "raw-t0"
raw_refused 'req["tasks"][0]["name"] = "../t"' "task name"
raw_refused 'req["spec"]["sweep"] = {"parameters": {"nothing.here": [1]}}' \
    "sweep parameter 'nothing.here' is not in the spec"
raw_refused 'req["tasks"][0]["command"] = ["true", "x" * 200000]' \
    "trial 0 (raw-t0): argument" "of the command is 200000 bytes; LIMIT_EXEC_STRING"
raw_refused 't = req["tasks"][0]
req["tasks"] = [dict(t, name="raw-t0"), dict(t, name="raw-t1", trial=1, env={"V": "y" * 100000}),
                dict(t, name="raw-t2", trial=2, env={"V%d" % k: "y" * 100000 for k in range(11)})]' \
    "trial 2 (raw-t2): the command and its environment take" "LIMIT_EXEC_TOTAL"
[ ! -e "$TMP/x" ] && [ ! -e "$DROVER_HOME/archive" ] ||
    fail "something was written for a refused name"
names=$("$DROVER" exp ls --json |
        python3 -c 'import json,sys; print(sorted(e["name"] for e in json.load(sys.stdin)))')
expect_eq "$names" "['pipe']" "experiments after the refusals"

t "trials sent without params run, and the daemon frees what it made for them"
reply=$(raw_exp_run 'req["name"] = "noparams"
req["tasks"] = [{"name": "noparams-t%d" % i, "trial": i, "command": ["true"]} for i in range(20)]')
case $reply in *'"ok":true'*) ;; *) fail "noparams: $reply" ;; esac
wait_until 60 exp_state_is noparams done
# (under the sanitizer build, lib.sh's cleanup fails the test if LeakSanitizer reports a leak)

t "\${x:q} quotes a sweep value for sh -c: '1; touch FILE' is not run"
cat > "$W/quoted.yaml" <<YAML
apiVersion: drover/v1
kind: Experiment
metadata: { name: quoted }
spec:
  hyperparameters: { x: "1" }
  command: [sh, -c, 'printf "%s|" \${hyperparameters.x:q} >> "$W/out"']
  sweep:
    parallel: 1
    parameters:
      hyperparameters.x: ["1; touch $W/pwned", "it's \$HOME", "", "two\\nlines"]
YAML
"$DROVER" exp run "$W/quoted.yaml" >/dev/null
wait_until 60 exp_state_is quoted done
[ ! -e "$W/pwned" ] || fail "a sweep value ran as a shell command"
expect_eq "$(cat "$W/out")" "1; touch $W/pwned|it's \$HOME||two
lines|" "what the trials printed"
# Unquoted, the same value draws a warning (and would run).
sed 's/:q}/}/; s/name: quoted/name: unquoted/' "$W/quoted.yaml" > "$W/unquoted.yaml"
"$DROVER" exp run "$W/unquoted.yaml" --dry-run 2>"$W/warn" >/dev/null
grep -q "^drover exp: $W/unquoted.yaml:6:21: warning: .*\${hyperparameters.x:q}" "$W/warn" ||
    fail "no warning for an unquoted value in sh -c: $(cat "$W/warn")"

t "a template that is not UTF-8 is refused with where"
printf 'apiVersion: drover/v1\nkind: Experiment\nmetadata: { name: u }\nspec:\n' > "$W/latin1.yaml"
printf '  env: { A: "ab\xffcd" }\n  command: [echo]\n' >> "$W/latin1.yaml"
expect_exit 2 "$DROVER" exp run "$W/latin1.yaml" --dry-run
expect_eq "$ERR" "drover exp: $W/latin1.yaml:5:16: spec.env.A: not valid UTF-8 (byte 0xff)" \
    "invalid UTF-8"

done_testing
