/* exp/print.c — what `drover exp run --dry-run` prints: one block per task (name, resources,
 * limits, needs, params, env, command), then a line on the whole. */
#include "exp/template-internal.h"
#include "util/parse.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static void print_words(FILE *fp, const char *label, char *const *words)
{
    if (words == NULL || words[0] == NULL)
        return;
    fprintf(fp, "  %-8s", label);
    for (size_t i = 0; words[i] != NULL; i++) {
        fputc(' ', fp);
        subst_shell_word(fp, words[i]);
    }
    fputc('\n', fp);
}

/* The first line: resources and limits; "-" is none, "default" the daemon's default. */
static void print_head(const struct exp_task *task, FILE *fp)
{
    char gpu_mem[32] = "-", mem[32] = "-", timeout[32] = "-", retries[16] = "default", text[32];
    if (task->gpu_mem > 0)
        format_size(task->gpu_mem, gpu_mem, sizeof gpu_mem);
    if (task->mem > 0)
        format_size(task->mem, mem, sizeof mem);
    if (task->timeout_ms > 0)
        format_duration(task->timeout_ms, timeout, sizeof timeout);
    if (task->retries >= 0)
        snprintf(retries, sizeof retries, "%d", task->retries);
    fprintf(fp, "task %s  gpus=%d gpu_mem=%s mem=%s gpu_type=%s timeout=%s retries=%s",
            task->name, task->gpus, gpu_mem, mem, task->gpu_type ? task->gpu_type : "-", timeout,
            retries);
    if (task->cpus > 0)
        fprintf(fp, " cpus=%d", task->cpus);
    for (int i = 0; i < task->nbackoff; i++) {
        format_duration(task->backoff_ms[i], text, sizeof text);
        fprintf(fp, "%s%s", i ? "," : " backoff=", text);
    }
    if (task->preempt_grace_ms != 0) {
        format_duration(task->preempt_grace_ms > 0 ? task->preempt_grace_ms : REQUEST_PREEMPT_GRACE_MS, text,
                        sizeof text);
        fprintf(fp, " preemptible=%s", text);
    }
    if (task->stall_ms > 0) {
        format_duration(task->stall_ms, text, sizeof text);
        fprintf(fp, " stall=%s", text);
    }
    if (task->off_peak)
        fprintf(fp, " schedule=off-peak");
    if (task->has_priority)
        fprintf(fp, " priority=%d", task->priority);
}

static void print_task(const struct exp_task *task, FILE *fp)
{
    print_head(task, fp);
    fputc('\n', fp);
    print_words(fp, "needs:", task->needs);
    if (json_object_size(task->params) > 0) {
        const char *path;
        const json_t *value;
        fprintf(fp, "  %-8s", "params:");
        json_object_foreach(task->params, path, value) {
            char *text = subst_text(value), *pair = xasprintf("%s=%s", path, text);
            fputc(' ', fp);
            subst_shell_word(fp, pair);
            free(pair);
            free(text);
        }
        fputc('\n', fp);
    }
    print_words(fp, "env:", task->env);
    print_words(fp, "command:", task->argv);
}

void exp_print_tasks(const struct exp_def *def, FILE *fp)
{
    const json_t *sweep = json_object_get(def->spec, "sweep");
    char parallel[32] = "unlimited";
    for (size_t i = 0; i < def->ntasks; i++)
        print_task(&def->tasks[i], fp);
    fprintf(fp, "%zu task%s ", def->ntasks, def->ntasks == 1 ? "" : "s");
    if (def->parallel > 0)
        snprintf(parallel, sizeof parallel, "%d", def->parallel);
    if (def->kind == EXP_PIPELINE)
        fprintf(fp, "(pipeline)\n");
    else if (sweep == NULL)
        fprintf(fp, "(no sweep)\n");
    else if (sweep_is_random(sweep))
        fprintf(fp, "(sweep: random, %zu trials; parallel %s)\n", def->space, parallel);
    else
        fprintf(fp, "(sweep: grid, %zu configurations; parallel %s)\n", def->space, parallel);
}
