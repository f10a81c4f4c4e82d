// Validates Kubernetes manifests offline (tests/e2e/t-exp-render.sh; `drover exp render --format
// k8s`): each file (or stdin when none, or "-") is a multi-document YAML stream, parsed by yaml@2;
// every document is checked against the API's JSON schemas by kubernetes-models (pinned in
// package.json: `new Job(obj).validate()`), then against rules the API server enforces and the
// schemas do not: restartPolicy of a Job's pod, non-empty containers, DNS-1123 names, label
// values, env names, ConfigMap keys and size, Indexed Job fields, quantities, and that a pod's
// configMap volume names a ConfigMap of the same stream.
//
//   node tests/k8s/validate.mjs [FILE…]     exit 0: all valid ("N objects valid" on stdout);
//                                          exit 1: one line per problem on stderr
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Job } from "kubernetes-models/batch/v1";
import { ConfigMap } from "kubernetes-models/v1";

const problems = [];
const problem = (where, what) => problems.push(`${where}: ${what}`);

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
const QUANTITY = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;

function checkLabels(where, labels) {
  for (const [key, value] of Object.entries(labels ?? {})) {
    const slash = key.lastIndexOf("/");
    const prefix = slash >= 0 ? key.slice(0, slash) : null;
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    if ((prefix !== null && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) ||
        name.length > 63 || !LABEL_NAME.test(name))
      problem(where, `label key ${JSON.stringify(key)} is not valid`);
    if (typeof value !== "string" || value.length > 63 || !LABEL_VALUE.test(value))
      problem(where, `label ${key}: value ${JSON.stringify(value)} is not valid`);
  }
}

function checkName(where, meta, max, pattern) {
  const name = meta?.name;
  if (typeof name !== "string" || name.length > max || !pattern.test(name))
    problem(where, `metadata.name ${JSON.stringify(name)} is not a DNS-1123 name of at most ${max}`);
}

function checkPod(where, pod, configMaps) {
  if (!pod) return problem(where, "no pod template");
  checkLabels(`${where} template`, pod.metadata?.labels);
  const spec = pod.spec ?? {};
  if (!["Never", "OnFailure"].includes(spec.restartPolicy))
    problem(where, `restartPolicy ${JSON.stringify(spec.restartPolicy)}: a Job's pod needs Never or OnFailure`);
  if (!Array.isArray(spec.containers) || spec.containers.length === 0)
    problem(where, "no containers");
  if (spec.activeDeadlineSeconds !== undefined && !(spec.activeDeadlineSeconds > 0))
    problem(where, "activeDeadlineSeconds must be positive");
  checkLabels(`${where} nodeSelector`, spec.nodeSelector);
  const volumes = new Set();
  for (const v of spec.volumes ?? []) {
    if (!DNS_LABEL.test(v.name)) problem(where, `volume name ${JSON.stringify(v.name)} is not valid`);
    if (volumes.has(v.name)) problem(where, `volume ${v.name} twice`);
    volumes.add(v.name);
    if (v.configMap && !configMaps.has(v.configMap.name))
      problem(where, `volume ${v.name}: ConfigMap ${v.configMap.name} is not in the stream`);
  }
  for (const c of spec.containers ?? []) {
    const cw = `${where} container ${c.name}`;
    if (!DNS_LABEL.test(c.name ?? "")) problem(cw, "name is not a DNS-1123 label");
    if (typeof c.image !== "string" || c.image.trim() === "" || /\s/.test(c.image))
      problem(cw, `image ${JSON.stringify(c.image)} is not valid`);
    const names = new Set();
    for (const e of c.env ?? []) {
      if (!ENV_NAME.test(e.name)) problem(cw, `env name ${JSON.stringify(e.name)} is not valid`);
      if (names.has(e.name)) problem(cw, `env ${e.name} twice`);
      names.add(e.name);
      if ((e.value !== undefined) === (e.valueFrom !== undefined))
        problem(cw, `env ${e.name}: exactly one of value and valueFrom`);
    }
    for (const kind of ["limits", "requests"])
      for (const [res, q] of Object.entries(c.resources?.[kind] ?? {}))
        if (!QUANTITY.test(String(q))) problem(cw, `resources.${kind}.${res}: ${JSON.stringify(q)} is not a quantity`);
    const gpuLimit = c.resources?.limits?.["nvidia.com/gpu"];
    const gpuRequest = c.resources?.requests?.["nvidia.com/gpu"];
    if (gpuRequest !== undefined && String(gpuRequest) !== String(gpuLimit))
      problem(cw, "nvidia.com/gpu: a request must equal the limit");
    for (const m of c.volumeMounts ?? [])
      if (!volumes.has(m.name)) problem(cw, `volumeMount ${m.name}: no such volume`);
  }
}

function checkJob(where, obj, configMaps) {
  checkName(where, obj.metadata, 63, DNS_LABEL);
  checkLabels(where, obj.metadata?.labels);
  const spec = obj.spec ?? {};
  if (spec.completionMode === "Indexed") {
    if (!(spec.completions > 0)) problem(where, "an Indexed Job needs completions");
  } else if (spec.backoffLimitPerIndex !== undefined) {
    problem(where, "backoffLimitPerIndex needs completionMode Indexed");
  }
  for (const k of ["backoffLimit", "backoffLimitPerIndex", "parallelism", "completions"])
    if (spec[k] !== undefined && !(Number.isInteger(spec[k]) && spec[k] >= 0))
      problem(where, `${k} must be a non-negative integer`);
  checkPod(where, spec.template, configMaps);
}

function checkConfigMap(where, obj) {
  checkName(where, obj.metadata, 253, DNS_SUBDOMAIN);
  checkLabels(where, obj.metadata?.labels);
  let size = 0;
  for (const [key, value] of Object.entries(obj.data ?? {})) {
    if (!CONFIG_KEY.test(key) || key.length > 253) problem(where, `data key ${JSON.stringify(key)} is not valid`);
    if (typeof value !== "string") problem(where, `data ${key}: not a string`);
    size += key.length + Buffer.byteLength(String(value));
  }
  if (size > 1048576) problem(where, `data is ${size} bytes: more than a ConfigMap holds (1 MiB)`);
}

const files = process.argv.length > 2 ? process.argv.slice(2) : ["-"];
const objects = [];
for (const file of files) {
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  parseAllDocuments(text).forEach((doc, i) => {
    const where = `${file === "-" ? "stdin" : file} document ${i + 1}`;
    for (const e of doc.errors ?? []) problem(where, `YAML: ${e.message.split("\n")[0]}`);
    for (const w of doc.warnings ?? []) problem(where, `YAML: ${w.message.split("\n")[0]}`);
    const obj = doc.toJS();
    if (obj !== null && obj !== undefined) objects.push({ where, obj });
  });
}
const configMaps = new Set(objects.filter(o => o.obj.kind === "ConfigMap").map(o => o.obj.metadata?.name));
const seen = new Set();
for (const { where, obj } of objects) {
  const at = `${where} (${obj.kind} ${obj.metadata?.name})`;
  const id = `${obj.kind}/${obj.metadata?.name}`;
  if (seen.has(id)) problem(at, "a second object of this kind and name");
  seen.add(id);
  try {
    if (obj.apiVersion === "batch/v1" && obj.kind === "Job") {
      new Job(obj).validate();
      checkJob(at, obj, configMaps);
    } else if (obj.apiVersion === "v1" && obj.kind === "ConfigMap") {
      new ConfigMap(obj).validate();
      checkConfigMap(at, obj);
    } else {
      problem(at, `unexpected object ${obj.apiVersion} ${obj.kind}`);
    }
  } catch (e) {
    problem(at, `schema: ${String(e.message ?? e).split("\n")[0]}`);
  }
}
if (objects.length === 0) problem(files.join(" "), "no objects");
for (const p of problems) console.error(p);
if (problems.length > 0) process.exit(1);
console.log(`${objects.length} objects valid`);
