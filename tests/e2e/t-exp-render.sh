#!/usr/bin/env bash
# drover exp render: Kubernetes manifests and Slurm batch scripts from templates, without a
# daemon. The examples and a template using every spec feature are rendered and validated
# offline against the Kubernetes API schemas (tests/k8s/validate.mjs: kubernetes-models and
# yaml@2 from package.json); the scripts a pod and a Slurm job would run are run here with sh, so
# that what reaches the command is what the template says; bad input is one line, exit 2.
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || skip "node is not installed"
[ -d "$REPO/node_modules/kubernetes-models" ] && [ -d "$REPO/node_modules/yaml" ] ||
    skip "node_modules lacks kubernetes-models or yaml (npm ci in $REPO)"
export DROVER_NO_AUTOSTART=1 # rendering needs no daemon, and must not start one
W=$TMP/w
mkdir -p "$W"
cd "$REPO"

validate() { node "$REPO/tests/k8s/validate.mjs" "$@"; }
# yaml_get FILE KIND NAME KEY: data KEY of the object (a ConfigMap's script, say).
yaml_get() {
    node --input-type=module -e '
        import { parseAllDocuments } from "yaml";
        import { readFileSync } from "node:fs";
        const [file, kind, name, key] = process.argv.slice(1);
        for (const d of parseAllDocuments(readFileSync(file, "utf8"))) {
            const o = d.toJS();
            if (o.kind === kind && o.metadata.name === name) { process.stdout.write(o.data[key]); process.exit(0); }
        }
        process.exit(1);' "$@"
}
# yaml_json FILE: the stream as a JSON list, for python3 to look at.
yaml_json() {
    node --input-type=module -e '
        import { parseAllDocuments } from "yaml";
        import { readFileSync } from "node:fs";
        console.log(JSON.stringify(parseAllDocuments(readFileSync(process.argv[1], "utf8")).map(d => d.toJS())));' "$1"
}
# check FILE PYTHON: asserts the expression on the objects (o, a list) is true.
check() {
    yaml_json "$1" | python3 -c "import json,sys; o=json.load(sys.stdin); assert ($2), 'not: $2'" ||
        fail "$1: $2"
}

t "every example renders for Kubernetes and validates; no daemon is started"
for f in examples/*.yaml; do
    name=$(basename "$f" .yaml)
    "$DROVER" exp render "$f" --set image=python:3.12-slim >"$W/$name.yaml" ||
        fail "drover exp render $f exited $?"
    out=$(validate "$W/$name.yaml") || fail "$f: the manifests are not valid: $out"
done
[ ! -e "$DROVER_HOME/drover.sock" ] || fail "drover exp render started a daemon"
check "$W/sweep-asha.yaml" 'o[1]["spec"]["completionMode"] == "Indexed" and o[1]["spec"]["completions"] == 27 and o[1]["spec"]["parallelism"] == 2'
check "$W/pipeline.yaml" 'len(o) == 5 and all(x["kind"] == "Job" for x in o)'
check "$W/torch-sweep.yaml" 'o[1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"'

t "a template using every spec feature renders and validates"
cat >"$W/every.yaml" <<'EOF'
apiVersion: drover/v1
kind: Experiment
metadata: { name: Every_Feature.v1 }
spec:
  image: registry.example.com/team/train:2024.1
  model: { type: resnet, layers: 50 }
  data: { source: /data/cifar10, batch_size: 128 }
  hyperparameters: { learning_rate: 0.001, epochs: 10, note: "it's $HOME; `x` $(y)" }
  resources: { gpu_type: NVIDIA-A100-SXM4-80GB, gpu_count: 2, gpu_memory: 12G, memory: 16Gi, cpus: 4 }
  env: { OMP_NUM_THREADS: "4", ON: "on", LR: "${hyperparameters.learning_rate}" }
  command: [sh, -c, 'printf "%s|" "$0" "$@" "$LR" "$ON" "$DROVER_TASK_ID" "$DROVER_ARRAY_INDEX"', "${hyperparameters.note}", "--lr=${hyperparameters.learning_rate}", "--epochs=${hyperparameters.epochs}"]
  timeout: 2h
  stall: 20m
  priority: 10
  retry: { attempts: 3, backoff: [30s] }
  sweep:
    method: grid
    parallel: 4
    max_trials: 5
    seed: 1
    parameters:
      hyperparameters.learning_rate: [0.001, 0.01, 0.1]
      hyperparameters.epochs: { min: 10, max: 30, step: 10 }
  early_stopping: { type: asha, metric: val_accuracy, mode: max, rung_unit: epoch, grace: 1, reduction_factor: 3, max_rung: 50 }
  metrics: { file: true, patterns: ["loss: {value}", "{name}={value}"] }
  validation: { metric: val_accuracy, mode: max, baseline: 0.92, improvement: 2%, max_epoch_time: 5m, min_gpu_util: 0.7 }
  circuit_breaker: { failures: 2 }
  generator: { command: [python3, propose.py] }
  notify: https://hooks.example.com/drover
EOF
"$DROVER" exp render "$W/every.yaml" --gpu-label cloud.example.com/accelerator >"$W/every.out" ||
    fail "render of every.yaml exited $?"
out=$(validate "$W/every.out") || fail "every.yaml: not valid: $out"
job='o[1]["spec"]'
pod='o[1]["spec"]["template"]["spec"]'
check "$W/every.out" "$job[\"completions\"] == 5 and $job[\"parallelism\"] == 4 and $job[\"backoffLimitPerIndex\"] == 2"
check "$W/every.out" "$pod[\"activeDeadlineSeconds\"] == 7200 and $pod[\"restartPolicy\"] == \"Never\""
check "$W/every.out" "$pod[\"nodeSelector\"] == {\"cloud.example.com/accelerator\": \"NVIDIA-A100-SXM4-80GB\"}"
check "$W/every.out" "$pod[\"containers\"][0][\"resources\"] == {\"limits\": {\"nvidia.com/gpu\": \"2\"}, \"requests\": {\"cpu\": \"4\", \"memory\": \"16Gi\"}}"
check "$W/every.out" "o[1][\"metadata\"][\"name\"] == o[1][\"spec\"][\"template\"][\"metadata\"][\"labels\"][\"drover.io/experiment\"] and len(o[1][\"metadata\"][\"name\"]) <= 63 and o[1][\"metadata\"][\"name\"].startswith(\"every-feature-v1-\")"
check "$W/every.out" "{e[\"name\"]: e.get(\"value\") for e in $pod[\"containers\"][0][\"env\"]}[\"ON\"] == \"on\""
cm=$(yaml_json "$W/every.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["metadata"]["name"])')

t "a trial's script, as the pod runs it, gives the command exactly what the template says"
yaml_get "$W/every.out" ConfigMap "$cm" trial-4.sh >"$W/trial-4.sh" || fail "no trial-4.sh in $cm"
got=$(cd "$W" && DROVER_TASK_ID=t4 DROVER_ARRAY_INDEX=4 ON=on sh trial-4.sh)
expect_eq "$got" "it's \$HOME; \`x\` \$(y)|--lr=0.01|--epochs=20|0.01|on|t4|4|" "trial 4's output"
params=$(yaml_get "$W/every.out" ConfigMap "$cm" trial-4.json)
expect_eq "$params" '{"hyperparameters.learning_rate":0.01,"hyperparameters.epochs":20}' "trial 4's parameters"

t "a sweep that changes the pod: one Job per trial, each valid"
cat >"$W/gpus.yaml" <<'EOF'
apiVersion: drover/v1
kind: Experiment
metadata: { name: gpus }
spec:
  image: busybox:1.36
  resources: { gpu_count: 1 }
  command: [echo, "${resources.gpu_count}"]
  sweep: { parameters: { resources.gpu_count: [1, 2, 4] } }
EOF
"$DROVER" exp render "$W/gpus.yaml" >"$W/gpus.out" || fail "render of gpus.yaml exited $?"
out=$(validate "$W/gpus.out") || fail "gpus.yaml: not valid: $out"
check "$W/gpus.out" 'len(o) == 4 and [x["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for x in o[1:]] == ["1", "2", "4"]'

t "a pipeline with a stage's own image renders one Job per stage, needs as an annotation"
cat >"$W/pipe.yaml" <<'EOF'
apiVersion: drover/v1
kind: Pipeline
metadata: { name: pipe }
spec:
  image: base:1
  stages:
    - { name: prep, command: [prep] }
    - { name: Train_A, image: gpu:2, needs: [prep], command: [train], timeout: 90s, retry: 2,
        resources: { gpu_count: 1, memory: 1G }, env: { X: "1" } }
EOF
"$DROVER" exp render "$W/pipe.yaml" >"$W/pipe.out" || fail "render of pipe.yaml exited $?"
out=$(validate "$W/pipe.out") || fail "pipe.yaml: not valid: $out"
check "$W/pipe.out" 'o[1]["metadata"]["annotations"]["drover.io/needs"] == "pipe-prep" and o[1]["spec"]["template"]["spec"]["containers"][0]["image"] == "gpu:2" and o[1]["spec"]["backoffLimit"] == 2'

t "--output DIR writes one file per object, each valid"
mkdir -p "$W/out"
"$DROVER" exp render examples/sweep-asha.yaml --set image=python:3 --output "$W/out" >/dev/null ||
    fail "--output exited $?"
[ -f "$W/out/spirals-asha.job.yaml" ] && [ -f "$W/out/spirals-asha-trials.configmap.yaml" ] ||
    fail "--output wrote: $(ls "$W/out")"
out=$(validate "$W/out"/*.yaml) || fail "--output files not valid: $out"

t "the validator is not vacuous: a Job whose pod restarts Always is refused"
sed 's/restartPolicy: Never/restartPolicy: Always/' "$W/pipe.out" >"$W/bad.out"
if validate "$W/bad.out" 2>/dev/null; then fail "validate.mjs accepted restartPolicy Always"; fi
sed 's/backoffLimit: 2/backoffLimit: two/' "$W/pipe.out" >"$W/bad.out"
if validate "$W/bad.out" 2>/dev/null; then fail "validate.mjs accepted backoffLimit: two"; fi

t "--format slurm: one batch script per task, which sh runs as sbatch would"
"$DROVER" exp render "$W/every.yaml" --format slurm --output "$W/out" >/dev/null ||
    fail "--format slurm exited $?"
script=$W/out/Every_Feature.v1-t4.sbatch
[ -f "$script" ] || fail "no $script: $(ls "$W/out")"
grep -qx '#SBATCH --gres=gpu:NVIDIA-A100-SXM4-80GB:2' "$script" &&
    grep -qx '#SBATCH --time=120' "$script" && grep -qx '#SBATCH --cpus-per-task=4' "$script" ||
    fail "the #SBATCH lines: $(grep SBATCH "$script")"
got=$(cd "$W" && ON=off sh "$script")
expect_eq "$got" "it's \$HOME; \`x\` \$(y)|--lr=0.01|--epochs=20|0.01|on|Every_Feature.v1-t4|4|" \
    "the script's output"
[ -d "$W/drover/Every_Feature.v1-t4/checkpoints" ] ||
    fail "the script made no \$DROVER_CHECKPOINT_DIR under its working directory"
out=$("$DROVER" exp render examples/pipeline.yaml --format slurm) || fail "slurm to stdout exited $?"
expect_eq "$(grep -c '^#!/bin/sh$' <<<"$out")" 5 "scripts of the pipeline on stdout"

t "exp render --help: its usage and options; exp --help lists it"
out=$("$DROVER" exp render --help) || fail "drover exp render --help exited $?"
case "$out" in "usage: drover exp render"*) ;; *) fail "drover exp render --help: $out" ;; esac
for opt in --set --format --gpu-label --output; do
    grep -q -- "$opt VALUE" <<<"$out" || fail "drover exp render --help lacks $opt: $out"
done
"$DROVER" exp --help | grep -q "drover exp render" || fail "drover exp --help does not list render"

t "bad input: one line, exit 2"
expect_exit 2 "$DROVER" exp render examples/validate.yaml
expect_eq "$ERR" "drover exp: examples/validate.yaml: spec.image: required by --format k8s: the container image to run (add it, or --set image=IMAGE)" "missing image"
expect_exit 2 "$DROVER" exp render examples/validate.yaml --format helm
expect_eq "$ERR" "drover exp: --format helm: expected k8s or slurm" "bad format"
expect_exit 2 "$DROVER" exp render examples/validate.yaml --set image=x --gpu-label 'not a label'
expect_eq "$(wc -l <<<"$ERR")" 1 "lines for a bad --gpu-label"
expect_exit 2 "$DROVER" exp render examples/validate.yaml --set image=x --set 'resources.gpu_type=Tesla V100'
expect_eq "$(wc -l <<<"$ERR")" 1 "lines for a gpu_type that is no label value"
expect_exit 2 "$DROVER" exp render examples/validate.yaml --format slurm --gpu-label x
expect_exit 2 "$DROVER" exp render "$W/nonexistent.yaml"
expect_exit 2 "$DROVER" exp render examples/validate.yaml --output "$W/nonexistent"
expect_exit 2 "$DROVER" exp render
[ ! -e "$DROVER_HOME/drover.sock" ] || fail "drover exp render started a daemon"

done_testing
