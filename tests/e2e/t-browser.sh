#!/usr/bin/env bash
# The dashboard in real headless Chromium, driven by puppeteer-core (tests/browser/
# dashboard.test.mjs), against a live system daemon on the fake NVML with two real users, A (who
# logs in with a token) and B: the login form; the queue page showing a task submitted after it
# loaded and its state changes without a reload; cancel from the page; B's task without buttons,
# and the daemon's refusal shown when the page asks anyway; a task's attempts and log; the GPU
# page's charts painted with data; an experiment's leaderboard and learning curves; the users
# page; a phone-width and a dark-mode rendering; no console errors. Screenshots go to
# $DROVER_BUILD/screenshots/ (docs/dashboard.png too, with DROVER_UPDATE_SCREENSHOT=1). Needs
# root (useradd), chromium, node and `npm ci` (scripts/install-deps): exits 77 otherwise.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

system_setup browser
command -v curl >/dev/null || skip "no curl"
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] && [ -x "$CHROMIUM" ] || skip "no chromium (scripts/install-deps installs it; or set CHROMIUM)"
command -v node >/dev/null || skip "no node (scripts/install-deps installs it)"
[ -d "$ROOT/node_modules/puppeteer-core" ] || skip "no node_modules/puppeteer-core (run npm ci)"

system_user A a
system_user B b

# The fake NVML's state: two 16G GPUs (the test rewrites it while it runs, so the charts move).
use_fake_nvml "$SYS/nvml.state"
cat > "$FAKE_NVML_STATE" <<STATE
gpu 0 name="Fake H100" uuid=GPU-fake-0 mem_total=16G mem_used=2G util=20 mem_util=10 temp=41 power=120000 ecc=0
gpu 1 name="Fake H100" uuid=GPU-fake-1 mem_total=16G mem_used=0 util=10 mem_util=5 temp=38 power=80000 ecc=0
STATE
chmod 0644 "$FAKE_NVML_STATE"

http_port
system_daemon_start "http = 127.0.0.1:$PORT" "sample = 200ms"
wait_until 20 curl -sf -o /dev/null "$URL/healthz"

# as USER CMD… (lib.sh) runs CMD as USER in its working directory; the browser test runs commands
# as A or B through the scripts as-a and as-b, which do the same.
for u in a b; do
    if [ $u = a ]; then who=$A; else who=$B; fi
    printf '#!/bin/sh\ncd %s/%s-work && exec setpriv --reuid=%s --regid=%s --init-groups env HOME=%s/%s-work DROVER_SOCKET=%s "$@"\n' \
        "$SYS" $u "$who" "$who" "$SYS" $u "$SOCK" > "$SYS/as-$u"
    chmod 0755 "$SYS/as-$u"
done

t "A and B make tokens; B has a task running on a GPU"
TOKEN_A=$(as "$A" "$DROVER" token create --name browser 2>/dev/null)
TOKEN_B=$(as "$B" "$DROVER" token create --name browser 2>/dev/null)
[ -n "$TOKEN_A" ] && [ -n "$TOKEN_B" ] || fail "drover token create printed no token"
expect_eq "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN_A" "$URL/api/v1/session")" 200 \
    "A's token on /api/v1/session"
B_TASK=$(as "$B" "$DROVER" submit --gpus 1 --name b-long -- sleep 300)
wait_until 20 state_is "$B_TASK" running

t "A runs a small sweep on the free GPU that reports a metric per epoch, with ASHA"
cat > "$SYS/a-work/sweep.yaml" <<'YAML'
apiVersion: drover/v1
kind: Experiment
metadata: { name: browser-sweep }
spec:
  hyperparameters: { lr: 0.1 }
  resources: { gpu_count: 1, gpu_memory: 2G }
  command:
    - python3
    - -c
    - |
      import json, math, os, time
      lr = float("${hyperparameters.lr}")
      # the slower learners report later, so that ASHA has seen the best one at each rung
      time.sleep(1.0 * (lr < 0.2) + 1.0 * (lr < 0.08))
      for epoch in range(1, 7):
          acc = 1 - math.exp(-lr * epoch * 3)
          with open(os.environ["DROVER_METRICS_FILE"], "a") as f:
              f.write(json.dumps({"epoch": epoch, "val_accuracy": acc, "loss": 1 - acc}) + "\n")
          time.sleep(0.25)
  sweep: { method: grid, parameters: { hyperparameters.lr: [0.05, 0.1, 0.3] }, parallel: 3 }
  early_stopping: { type: asha, metric: val_accuracy, mode: max, rung_unit: epoch, grace: 2,
                    reduction_factor: 2, max_rung: 6 }
  validation: { metric: val_accuracy, mode: max, baseline: 0.5 }
YAML
as "$A" "$DROVER" exp run sweep.yaml >/dev/null
exp_ended() {
    local s
    s=$(as "$A" "$DROVER" exp show browser-sweep --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    case $s in passed | failed | done | stopped) return 0 ;; *) return 1 ;; esac
}
wait_until 60 exp_ended

t "the dashboard in headless Chromium (tests/browser/dashboard.test.mjs)"
mkdir -p "${DROVER_BUILD:-$TMP}/screenshots"
DASHBOARD_URL=$URL TOKEN_A=$TOKEN_A TOKEN_B=$TOKEN_B USER_A=$A USER_B=$B B_TASK=$B_TASK \
    AS_A=$SYS/as-a AS_B=$SYS/as-b WORK_A=$SYS/a-work EXPERIMENT=browser-sweep \
    SCREENSHOTS=${DROVER_BUILD:-$TMP}/screenshots DOCS=$ROOT/docs CHROMIUM=$CHROMIUM \
    node "$ROOT/tests/browser/dashboard.test.mjs" || fail "the browser test failed"
expect_eq "$(state_of "$B_TASK")" running "B's task after A's page tried to cancel it"

done_testing
