/* exp/render.h — an experiment rendered for another engine, without running anything
 * (`drover exp render`, docs/EXPERIMENTS.md "Rendering for Kubernetes and Slurm"). Pure: a
 * loaded template (exp/template.h) in, JSON objects and text out.
 *
 * Kubernetes (render-k8s.c): an Experiment with a sweep is one Indexed batch/v1 Job
 * (completions = trials, parallelism = sweep.parallel, backoffLimitPerIndex = retries, so a trial
 * that fails does not fail the others) whose pod runs /etc/drover/trial-$(DROVER_ARRAY_INDEX).sh
 * from a ConfigMap that holds each trial's parameters (trial-N.json) and command (trial-N.sh). When
 * the sweep changes a trial's resources, limits or retries, each trial is a Job of its own. An
 * Experiment without a sweep is one Job, and a Pipeline one Job per stage (its needs as an
 * annotation: a Job cannot wait for another). Every pod: restartPolicy Never, the image from
 * spec.image (a stage's own image first), limits["nvidia.com/gpu"], requests for cpus and
 * memory, a nodeSelector LABEL: gpu_type, activeDeadlineSeconds (per pod, that is per attempt,
 * as drover's timeout) and drover's variables. Names are DNS-1123 labels derived from the
 * experiment's name: lowercased, other characters as '-', at most 63, and with a hash of the
 * original when anything had to change, so that two names never collide.
 *
 * render-yaml.c writes the objects as a multi-document YAML stream (libyaml's emitter): strings
 * quoted whenever a YAML reader could take them for anything else. */
#ifndef DROVER_EXP_RENDER_H
#define DROVER_EXP_RENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "exp/template.h"

#define RENDER_GPU_LABEL "nvidia.com/gpu.product" /* node label the GPU type selects */
#define RENDER_GPU_RESOURCE "nvidia.com/gpu"      /* the device plugin's extended resource */
#define RENDER_NAME_MAX 63                        /* a DNS-1123 label */
#define RENDER_CONFIG_DIR "/etc/drover"           /* where the ConfigMap is mounted */
#define RENDER_CONFIG_MAX (1024 * 1024)           /* bytes of data a ConfigMap may hold */
#define RENDER_CHECKPOINT_DIR "/drover/checkpoints"
#define RENDER_METRICS_DIR "/drover/metrics"

struct render_k8s_options {
    const char *file;      /* the template's path, for errors */
    const char *gpu_label; /* node label key for gpu_type; NULL = RENDER_GPU_LABEL */
};

/* The Kubernetes objects of def, in order (ConfigMap first, then the Jobs): a new JSON array, or
 * NULL with *err (malloc'd, one line: "FILE: spec.image: …"). */
json_t *render_k8s(const struct exp_def *def, const struct render_k8s_options *opt, char **err);

/* name as a DNS-1123 label of at most max characters (malloc'd): lowercase letters, digits and
 * '-', starting and ending with a letter or digit; "-" and an 8-digit hash of name are appended
 * when name had to be changed to fit. */
char *render_k8s_name(const char *name, size_t max);
/* Whether key is a valid label key ([PREFIX/]NAME) and value a valid label value. */
bool render_label_key_ok(const char *key);
bool render_label_value_ok(const char *value);

/* Slurm (render-slurm.c): one batch script per task, "#SBATCH" lines from util/slurm.h's
 * slurm_sbatch_argv() (what the daemon's Slurm backend passes to sbatch), drover's variables
 * (DROVER_TASK_ID, DROVER_ATTEMPT from SLURM_RESTART_COUNT, DROVER_ARRAY_INDEX for a trial of a
 * sweep, DROVER_CHECKPOINT_DIR and DROVER_METRICS_FILE under $PWD/drover/TASK/) and the task's
 * environment exported (sbatch runs it with --export=NONE), then `exec` of the command. */
struct slurm_settings;
struct render_slurm_options {
    const char *file;                      /* the template's path, for errors */
    const char *workdir;                   /* --chdir: absolute */
    const struct slurm_settings *settings; /* partition, account, …; NULL = none */
};

/* [{"file": "TASK.sbatch", "text": SCRIPT}, …] in task order: a new JSON array, or NULL with
 * *err (malloc'd, one line). */
json_t *render_slurm(const struct exp_def *def, const struct render_slurm_options *opt,
                     char **err);

/* objects (an array) as a YAML stream, one document ("---") each. Returns 0, or -1 with *err. */
int render_yaml(const json_t *objects, FILE *fp, char **err);

#endif
