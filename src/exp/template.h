/* exp/template.h — experiment templates: YAML in, checked, substituted and expanded into the
 * tasks an experiment runs. Pure apart from reading the file: no daemon, no store.
 *
 *   apiVersion: drover/v1          (any "…/v1")
 *   kind: Experiment | Pipeline
 *   metadata: { name: NAME }       (letters, digits, '.', '_', '-'; at most 64; not . or ..)
 *   spec:
 *     model, data, hyperparameters: free mappings (any keys), for ${…} and the leaderboard
 *     resources: { gpu_type: STR, gpu_count: INT >= 0, gpu_memory: SIZE, memory: SIZE, cpus: INT,
 *                  backend: local|slurm }
 *     command: [STR, …]            (Experiment: required)
 *     env: { NAME: STR }
 *     sweep: { method: grid | random, parameters: { PATH: SPEC }, max_trials: INT,
 *              parallel: INT, seed: INT }
 *        PATH is a dotted spec path such as hyperparameters.learning_rate; SPEC is a list of values,
 *        or { min, max, step } (a range, grid only or sampled uniformly on the grid for random),
 *        or { distribution: uniform | log_uniform | int_uniform, min, max } (random only)
 *     early_stopping: { type: asha | median, metric: STR, mode: max | min, rung_unit: STR,
 *                       grace: INT, reduction_factor: NUM (> 1), max_rung: INT }
 *     metrics: { file: BOOL, patterns: [ "loss: {value}", "{name}={value}" … ] }
 *     validation: { metric: STR, mode: max | min, baseline: NUM | { experiment: NAME },
 *                   improvement: "2%" | NUM, max_epoch_time: DURATION, min_gpu_util: NUM }
 *     retry: INT | { attempts: INT | retries: INT, backoff: [DURATION…] }
 *        retry: N and { retries: N } are N retries after the first attempt; { attempts: N } is N
 *        attempts in all (N >= 1, so N - 1 retries); not both. Bounded like drover submit's
 *        --retries (util/request.def).
 *     timeout: DURATION            (per attempt)
 *     stall: DURATION              (no output and idle GPUs this long: hung, killed and retried)
 *     preemptible: true | DURATION (policy las may stop it to make room: it saves and exits on
 *                                   preempt_signal, default TERM, within the grace, default 60s)
 *     preempt_signal: NAME | N
 *     schedule: any | off-peak     (off-peak: start only inside the daemon's off-peak window,
 *                                   as drover submit --off-peak; default any)
 *     priority: INT                (higher runs first; bounded like drover submit's --priority)
 *     circuit_breaker: { failures: INT }
 *     generator: { command: [STR, …] }
 *     notify: URL                  (http(s): POST experiment.ended when it ends; daemon/notify.c)
 *     image: STR                   (the container image for `drover exp render --format k8s`,
 *                                   taken as written; a stage may have its own; runs here
 *                                   ignore it: exp/render.h)
 *     stages: [ { name: STR, command: [STR…], resources: {…}, needs: [STR…], env, timeout,
 *                 stall, schedule, priority, retry, image } ]   (Pipeline: required; Experiment: not allowed)
 *
 * What a template leaves out is not given to the daemon (exp_task_to_json leaves it out), which
 * applies its defaults; the defaults of early_stopping, circuit_breaker, metrics and sweep are
 * exp/settings.h's (a trial without retry gets EXP_DEFAULT_TRIAL_RETRIES retries).
 *
 * `${a.b.c}` in any string of the spec is replaced by the value at spec path a.b.c (after the
 * sweep's values for the trial are set); `${a.b.c:q}` by that value in POSIX shell single quotes
 * (for a `sh -c` script); `$${` is a literal `${`. A template that expands to more than
 * LIMIT_TEMPLATE_EXPANDED bytes, or to more than LIMIT_TEMPLATE_TASKS tasks, is refused
 * (util/limits.h), and so is a task beyond the exec limits. `--set a.b=VALUE` overrides a
 * spec value before anything else (VALUE is read as a YAML scalar: 0.01 is a number, true a
 * bool); `--set metadata.name=NAME` renames the experiment (NAME as written, checked as a name).
 *
 * Every error is one line "FILE:LINE:COLUMN: what is wrong" (the position of the offending node;
 * for --set, "--set a.b=v: what"), e.g. an unknown key names the nearest valid one
 * ("unknown key 'learning_rat' in sweep.parameters … did you mean 'learning_rate'?").
 */
#ifndef DROVER_EXP_TEMPLATE_H
#define DROVER_EXP_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum exp_kind { EXP_EXPERIMENT, EXP_PIPELINE };

/* One task the experiment creates: a trial of an Experiment, or a stage of a Pipeline. A field
 * the template did not give holds its "not given" value, and exp_task_to_json leaves it out of the
 * request, so the daemon applies its own default. */
struct exp_task {
    char *name;           /* "NAME-t3" for trial 3, the stage name for a pipeline */
    int trial;            /* 0-based trial index; -1 for a pipeline stage */
    json_t *params;       /* the swept values, {"hyperparameters.learning_rate": 0.01}; {} if none */
    char **argv;          /* substituted command, NULL-terminated */
    char **env;           /* "K=V" (substituted), NULL-terminated; may be empty */
    int gpus;             /* resources.gpu_count; 0 = none (the default) */
    uint64_t gpu_mem;     /* resources.gpu_memory, bytes; 0 = not given: whole GPUs */
    char *gpu_type;       /* resources.gpu_type, or NULL */
    uint64_t mem;         /* resources.memory (host), bytes; 0 = not given */
    int cpus;             /* 0 = not given */
    char *backend;        /* resources.backend ("slurm", "local"), or NULL: the daemon's choice */
    int64_t timeout_ms;   /* 0 = not given: no time limit */
    int64_t stall_ms;     /* spec.stall; 0 = not given: no stall check */
    int64_t preempt_grace_ms; /* spec.preemptible: -1 true (the daemon's default grace), > 0
                               * the grace given, 0 not preemptible */
    int preempt_signal;   /* spec.preempt_signal; 0 = not given (SIGTERM) */
    bool off_peak;        /* schedule: off-peak */
    int priority;         /* spec.priority, when has_priority */
    bool has_priority;
    int retries;          /* retries after the first attempt; -1 = not given */
    int64_t backoff_ms[8];
    int nbackoff;         /* 0 = not given */
    char **needs;         /* names of stages it depends on (pipeline), NULL-terminated */
};

struct exp_def {
    enum exp_kind kind;
    char *name;
    json_t *spec;         /* the whole spec after --set (not substituted), for the store */
    struct exp_task *tasks;
    size_t ntasks;
    int parallel;         /* sweep.parallel: at most this many trials at once; 0 = no limit */
    size_t space;         /* grid: the number of configurations; random: max_trials */
    json_t *early_stopping, *validation, *metrics, *generator, *circuit_breaker; /* or NULL;
                                                                                   * borrowed from spec */
    json_t *warnings;     /* lines "FILE:L:C: warning: …" to show (an unquoted ${…} in sh -c) */
};

/* Reads, checks and expands path. sets[] are "a.b=value" overrides. seed: for random sweeps
 * without sweep.seed. Returns 0, or -1 with *err (malloc'd, one line). Nothing partial is
 * returned on error. */
int exp_load(const char *path, char *const *sets, size_t nsets, unsigned seed,
             struct exp_def **out, char **err);
/* The same on a template's text (len bytes, NUL-terminated: the HTTP API's request body);
 * errors are located as "LABEL:LINE:COLUMN". */
int exp_load_text(const char *label, const char *text, size_t len, char *const *sets,
                  size_t nsets, unsigned seed, struct exp_def **out, char **err);
void exp_def_free(struct exp_def *def);

/* A spec as stored (or as an exp_run request carries it) against the schema for kind. Returns 0,
 * or -1 with *err ("NAME: what", malloc'd). */
int exp_spec_check(const json_t *spec, const char *name, enum exp_kind kind, char **err);

/* The tasks of trials [first, first + n) of a sweep whose spec is `spec` (as stored): the
 * generator and the "next round" use it. Grid: configurations in order; random: drawn with the
 * seed. Returns 0, or -1 with *err. */
int exp_trials(const json_t *spec, const char *name, size_t first, size_t n, unsigned seed,
               struct exp_task **out, size_t *nout, char **err);
/* One trial from explicit parameter values ({"hyperparameters.lr": 0.1, …}), for a generator's
 * proposals. */
int exp_trial_from(const json_t *spec, const char *name, int trial, const json_t *params,
                   struct exp_task *out, char **err);
void exp_task_clear(struct exp_task *task);

/* The task as the daemon's exp_run request carries it (exp/task-json.c). New reference. */
json_t *exp_task_to_json(const struct exp_task *task);

/* What --dry-run prints: one block per task (name, resources, needs, argv, params). */
void exp_print_tasks(const struct exp_def *def, FILE *fp);

#endif
