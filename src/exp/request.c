/* exp/request.c — the checks of an exp_run request that the CLI and the daemon both run
 * (exp/request.h says what a request may hold). Everything is linear in the request's size but
 * the sort of the trial numbers: needs are resolved through a hash of the task names, and the
 * order is Kahn's algorithm with a heap, so a raw request of LIMIT_TEMPLATE_TASKS tasks costs
 * what its bytes cost. */
#include "exp/request.h"
#include "exp/template.h"
#include "util/limits.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool exp_name_valid(const char *s)
{
    size_t len = strlen(s);
    return len > 0 && len <= EXP_MAX_NAME && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

bool exp_env_name_valid(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static bool request_task_name_valid(const char *s)
{
    size_t len = strlen(s);
    return len > 0 && len <= EXP_MAX_TASK_NAME && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

void exp_graph_free(struct exp_graph *graph)
{
    if (graph == NULL)
        return;
    free(graph->order);
    free(graph->first);
    free(graph->need);
    memset(graph, 0, sizeof *graph);
}

/* --- one task --- */

/* How errors name a task: "trial 3 (NAME-t3)", or "task NAME" for a stage. (malloc'd) */
static char *request_label(const json_t *task, size_t index)
{
    const json_t *name = json_object_get(task, "name"), *trial = json_object_get(task, "trial");
    if (!json_is_string(name) || !request_task_name_valid(json_string_value(name)))
        return xasprintf("task %zu of the request", index);
    if (json_is_integer(trial) && json_integer_value(trial) >= 0)
        return xasprintf("trial %lld (%s)", (long long)json_integer_value(trial),
                         json_string_value(name));
    return xasprintf("task %s", json_string_value(name));
}

static bool request_is_count(const json_t *v)
{
    return v == NULL || json_is_null(v) || (json_is_integer(v) && json_integer_value(v) >= 0);
}

/* An environment: an object of strings whose names pass name_ok. */
static bool request_env_ok(const json_t *env, bool (*name_ok)(const char *))
{
    const char *k;
    json_t *v;
    if (!json_is_object(env))
        return false;
    json_object_foreach((json_t *)env, k, v)
        if (!name_ok(k) || !json_is_string(v))
            return false;
    return true;
}

static bool request_base_name_ok(const char *s)
{
    return *s != '\0' && strchr(s, '=') == NULL;
}

/* Everything about one task but its needs; NULL, or the reason (malloc'd, without the label).
 * The fields a task shares with a submit (resources, retries, env, command, …) are checked by
 * util/request.c, with the words and ranges drover submit gets; here only what is an
 * experiment's own. */
static char *request_task(const json_t *task, bool pipeline, const json_t *base_env)
{
    const json_t *name = json_object_get(task, "name"), *trial = json_object_get(task, "trial");
    const json_t *env = json_object_get(task, "env"), *v;
    char *why = NULL;
    if (!json_is_object(task))
        return xstrdup("expected an object");
    if (!json_is_string(name) || !request_task_name_valid(json_string_value(name)))
        return xasprintf("the task name must be letters, digits, '.', '_' and '-' (at most %d)",
                         EXP_MAX_TASK_NAME);
    if (trial != NULL && !json_is_null(trial) &&
        (!json_is_integer(trial) || json_integer_value(trial) < -1 ||
         json_integer_value(trial) > INT_MAX))
        return xasprintf("'trial' must be a whole number from -1 to %d", INT_MAX);
    if ((v = json_object_get(task, "generator")) != NULL && !json_is_null(v) &&
        !json_is_boolean(v))
        return xstrdup("'generator' must be true or false");
    if ((v = json_object_get(task, "params")) != NULL && !json_is_null(v) && !json_is_object(v))
        return xstrdup("'params' must be a mapping");
    if (request_check_task(task, base_env, &why) < 0)
        return why;
    /* A template's variable names are stricter than a submit's (exp/schema.c). */
    if (env != NULL && !json_is_null(env) && !request_env_ok(env, exp_env_name_valid))
        return xstrdup("env must map variable names (letters, digits and '_') to strings");
    v = json_object_get(task, "needs");
    if (v != NULL && !json_is_null(v) && (!json_is_array(v) || json_array_size(v) > 0)) {
        if (!pipeline)
            return xstrdup("needs are only for the stages of a Pipeline");
        if (!json_is_array(v))
            return xstrdup("'needs' must be an array of task names");
    }
    return NULL;
}

/* --- needs --- */

/* A min-heap of task indices: of the tasks that are ready, the first in the request goes
 * first. */
static void request_heap_push(size_t *heap, size_t *n, size_t v)
{
    size_t i = (*n)++;
    while (i > 0 && heap[(i - 1) / 2] > v) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = v;
}

static size_t request_heap_pop(size_t *heap, size_t *n)
{
    size_t top = heap[0], last = heap[--*n], i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n)
            break;
        if (child + 1 < *n && heap[child + 1] < heap[child])
            child++;
        if (heap[child] >= last)
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*n > 0)
        heap[i] = last;
    return top;
}

static const char *request_name(const json_t *tasks, size_t i)
{
    return json_string_value(json_object_get(json_array_get(tasks, i), "name"));
}

/* "cycle in needs: a -> c -> b -> a": from a task that was never ready, follow needs that were
 * never ready either until one repeats. (malloc'd) */
static char *request_cycle(const json_t *tasks, const struct exp_graph *g, const size_t *waiting)
{
    size_t n = g->n, at = 0, len;
    size_t *seen = xcalloc(n, sizeof *seen); /* 1 + position on the walk */
    size_t *walk = xcalloc(n + 1, sizeof *walk), steps = 0;
    while (waiting[at] == 0)
        at++;
    while (seen[at] == 0) {
        seen[at] = ++steps;
        walk[steps - 1] = at;
        for (size_t k = g->first[at]; k < g->first[at + 1]; k++)
            if (waiting[g->need[k]] > 0) {
                at = g->need[k];
                break;
            }
    }
    char *text;
    FILE *fp = open_memstream(&text, &len);
    if (fp == NULL)
        fatalx("out of memory");
    fputs("cycle in needs: ", fp);
    for (size_t k = seen[at] - 1; k < steps; k++)
        fprintf(fp, "%s -> ", request_name(tasks, walk[k]));
    fputs(request_name(tasks, at), fp);
    fclose(fp);
    free(seen);
    free(walk);
    return text;
}

/* Resolves every task's needs into g (names unique, each need a task, once) and orders the
 * tasks. NULL, or the reason (malloc'd). */
static char *request_graph(const json_t *tasks, struct exp_graph *g)
{
    size_t n = json_array_size(tasks), i, k, total = 0;
    json_t *index = json_object(), *need;
    char *why = NULL;
    g->n = n;
    g->order = xcalloc(n + 1, sizeof *g->order);
    g->first = xcalloc(n + 1, sizeof *g->first);
    for (i = 0; i < n && why == NULL; i++) {
        const char *name = request_name(tasks, i);
        if (json_object_get(index, name) != NULL)
            why = xasprintf("two tasks are named %s", name);
        else
            json_object_set_new(index, name, json_integer((json_int_t)i));
        total += json_array_size(json_object_get(json_array_get(tasks, i), "needs"));
    }
    g->need = xcalloc(total + 1, sizeof *g->need);
    size_t *stamp = xcalloc(n, sizeof *stamp), *waiting = xcalloc(n, sizeof *waiting);
    size_t *dependents = xcalloc(n + 1, sizeof *dependents), *by = xcalloc(total + 1, sizeof *by);
    for (i = 0, total = 0; i < n && why == NULL; i++) {
        g->first[i] = total;
        json_array_foreach(json_object_get(json_array_get(tasks, i), "needs"), k, need) {
            json_t *j = json_is_string(need) ? json_object_get(index, json_string_value(need))
                                             : NULL;
            if (!json_is_string(need)) {
                why = xasprintf("task %s: 'needs' must be an array of task names",
                                request_name(tasks, i));
            } else if (j == NULL) {
                why = xasprintf("task %s needs %s, which is not a task of the request",
                                request_name(tasks, i), json_string_value(need));
            } else if (stamp[json_integer_value(j)] == i + 1) {
                why = xasprintf("task %s needs %s more than once", request_name(tasks, i),
                                json_string_value(need));
            } else {
                stamp[json_integer_value(j)] = i + 1;
                g->need[total++] = (size_t)json_integer_value(j);
                dependents[json_integer_value(j)]++;
            }
            if (why != NULL)
                break;
        }
        waiting[i] = total - g->first[i];
    }
    g->first[n] = total;
    if (why == NULL) {
        /* Kahn: by[] lists each task's dependents, dependents[j] .. dependents[j + 1]. */
        size_t sum = 0, *heap = stamp, nheap = 0, done = 0;
        for (i = 0; i <= n; i++) {
            size_t c = i < n ? dependents[i] : 0;
            dependents[i] = sum;
            sum += c;
        }
        size_t *fill = xcalloc(n + 1, sizeof *fill);
        for (i = 0; i < n; i++)
            for (k = g->first[i]; k < g->first[i + 1]; k++)
                by[dependents[g->need[k]] + fill[g->need[k]]++] = i;
        free(fill);
        for (i = 0; i < n; i++)
            if (waiting[i] == 0)
                request_heap_push(heap, &nheap, i);
        while (nheap > 0) {
            size_t t = request_heap_pop(heap, &nheap);
            g->order[done++] = t;
            for (k = dependents[t]; k < dependents[t + 1]; k++)
                if (--waiting[by[k]] == 0)
                    request_heap_push(heap, &nheap, by[k]);
        }
        if (done < n)
            why = request_cycle(tasks, g, waiting);
    }
    free(stamp);
    free(waiting);
    free(dependents);
    free(by);
    json_decref(index);
    return why;
}

/* --- the request --- */

static int request_int_order(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int exp_tasks_check(const json_t *tasks, bool pipeline, const json_t *base_env,
                    struct exp_graph *graph, char **why)
{
    size_t n = json_array_size(tasks), i, ntrials = 0;
    const json_t *task;
    struct exp_graph g = {0};
    *why = NULL;
    if (!json_is_array(tasks) || n == 0 || n > LIMIT_TEMPLATE_TASKS) {
        *why = xasprintf("an experiment has 1 to %d tasks (LIMIT_TEMPLATE_TASKS)",
                         LIMIT_TEMPLATE_TASKS);
        return -1;
    }
    if (!json_is_object(base_env)) {
        *why = xstrdup("exp_run needs the submitter's env");
        return -1;
    }
    int *trials = xcalloc(n, sizeof *trials);
    json_array_foreach(tasks, i, task) {
        char *reason = request_task(task, pipeline, base_env);
        if (reason != NULL) {
            char *label = request_label(task, i);
            *why = xasprintf("%s: %s", label, reason);
            free(label);
            free(reason);
            break;
        }
        const json_t *trial = json_object_get(task, "trial");
        if (json_is_integer(trial) && json_integer_value(trial) >= 0)
            trials[ntrials++] = (int)json_integer_value(trial);
    }
    if (*why == NULL && !pipeline) {
        qsort(trials, ntrials, sizeof *trials, request_int_order);
        for (i = 1; i < ntrials && *why == NULL; i++)
            if (trials[i] == trials[i - 1])
                *why = xasprintf("trial %d appears twice", trials[i]);
    }
    free(trials);
    if (*why == NULL)
        *why = request_graph(tasks, &g);
    if (*why != NULL || graph == NULL)
        exp_graph_free(&g);
    else
        *graph = g;
    return *why ? -1 : 0;
}

int exp_request_check(const json_t *req, struct exp_graph *graph, char **why)
{
    static const char *const counts[] = {"parallel", "space", "seed"};
    const json_t *name = json_object_get(req, "name"), *kind = json_object_get(req, "kind");
    const json_t *workdir = json_object_get(req, "workdir"), *env = json_object_get(req, "env");
    const json_t *spec = json_object_get(req, "spec");
    *why = NULL;
    if (!json_is_string(name) || !exp_name_valid(json_string_value(name))) {
        *why = xasprintf("the experiment name must be letters, digits, '.', '_' and '-' (at most"
                         " %d; not . or ..)", EXP_MAX_NAME);
        return -1;
    }
    const char *kind_name = json_is_string(kind) ? json_string_value(kind) : "";
    bool pipeline = strcmp(kind_name, "Pipeline") == 0;
    if (!pipeline && strcmp(kind_name, "Experiment") != 0) {
        *why = xstrdup("kind must be Experiment or Pipeline");
        return -1;
    }
    if (!json_is_string(workdir) || json_string_value(workdir)[0] != '/') {
        *why = xstrdup("exp_run needs an absolute workdir");
        return -1;
    }
    if (!request_env_ok(env, request_base_name_ok)) {
        *why = xstrdup("exp_run's env must map variable names (not empty, without '=') to"
                       " strings");
        return -1;
    }
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (!request_is_count(json_object_get(req, counts[i]))) {
            *why = xasprintf("'%s' must be a whole number >= 0", counts[i]);
            return -1;
        }
    if (!json_is_object(spec)) {
        *why = xstrdup("exp_run needs the template's spec");
        return -1;
    }
    if (exp_spec_check(spec, json_string_value(name), pipeline ? EXP_PIPELINE : EXP_EXPERIMENT,
                       why) < 0)
        return -1;
    return exp_tasks_check(json_object_get(req, "tasks"), pipeline, env, graph, why);
}
