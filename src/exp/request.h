/* exp/request.h — what an exp_run request may hold. The CLI runs exp_request_check() on the
 * request it built from a template before sending it, and the daemon runs it on every exp_run it
 * receives before anything changes (and exp_tasks_check() on the tasks it makes itself: a next
 * round, a generator's proposals): one function, so that no check lives only in the client and a
 * script speaking the protocol gets the answers `drover exp run` gets.
 *
 * The request:
 *   name       an experiment name (exp_name_valid): it names directories under DROVER_HOME
 *   kind       "Experiment" or "Pipeline"
 *   spec       the template's spec, checked against the schema for that kind (exp_spec_check)
 *   tasks      1 to LIMIT_TEMPLATE_TASKS tasks (below)
 *   workdir    an absolute path
 *   env        the submitter's environment: {"NAME": "value"}, names not empty, without '='
 *   parallel, space, seed   whole numbers >= 0 (the daemon bounds them)
 * A task (exp_task_to_json makes them) is a task request of util/request.h's task door,
 * checked by request_check_task(): the same fields, ranges and words as a submit (gpus, gpu_mem,
 * gpu_type, cpus, mem, timeout_ms, stall_ms, priority, retries, backoff, env, command, name,
 * profile, exclusive), minus those that belong to a submission (after, after_any, array, key,
 * hold, workdir), which are refused. Besides, an experiment's own:
 *   name       required: letters, digits, '.', '_', '-', at most EXP_MAX_TASK_NAME; unique in
 *              the request
 *   trial      -1 (a stage, the generator) or 0 to INT_MAX, unique among an Experiment's trials
 *   generator  a bool (the daemon's own generator task)
 *   params     a mapping (the swept values)
 *   env        names as the template allows (letters, digits, '_')
 *   needs      Pipeline only: names of other tasks of the request, each once, with no cycle
 * Each task's command with the submitter's environment and its own must fit the exec limits
 * (limits_check_exec, util/limits.h). Absent and null mean the default. */
#ifndef DROVER_EXP_REQUEST_H
#define DROVER_EXP_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define EXP_MAX_NAME 64       /* bytes in an experiment's or a stage's name */
#define EXP_MAX_TASK_NAME 80  /* bytes in a task's name: NAME-tTRIAL */
#define EXP_MAX_BACKOFF 8     /* REQUEST_MAX_BACKOFF (util/request.h), which the check uses */

/* Letters, digits, '.', '_' and '-', 1 to EXP_MAX_NAME bytes, and not "." or "..": a name
 * that can be a directory under DROVER_HOME and nothing else. */
bool exp_name_valid(const char *s);
/* A variable name a template may set: a letter or '_', then letters, digits and '_'. */
bool exp_env_name_valid(const char *s);

/* How the tasks of a request depend on each other, for the daemon to create them in order. */
struct exp_graph {
    size_t n;
    size_t *order; /* each task after those it needs; otherwise in request order */
    size_t *first; /* task i needs need[first[i]] to need[first[i + 1] - 1] (n + 1 entries) */
    size_t *need;  /* indices into the request's tasks */
};
void exp_graph_free(struct exp_graph *graph);

/* 0 if req is a well-formed exp_run request, else -1 with one line in *why (the caller frees).
 * graph (or NULL) receives the tasks' order and needs when it is. */
int exp_request_check(const json_t *req, struct exp_graph *graph, char **why);
/* The tasks part of it: pipeline says whether needs are allowed; base_env is the submitter's
 * environment, which each task's exec limits count. */
int exp_tasks_check(const json_t *tasks, bool pipeline, const json_t *base_env,
                    struct exp_graph *graph, char **why);

#endif
