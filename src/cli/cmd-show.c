/* drover show ID [--json] */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct cmd_opt show_opts[] = {
    {"json", 0, false, false, "print the task as JSON (docs/CLI.md)"},
    {NULL, 0, false, false, NULL},
};

static void show_time(const char *label, json_t *ms)
{
    if (!json_is_integer(ms))
        return;
    time_t t = (time_t)(json_integer_value(ms) / 1000);
    char buf[64];
    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", localtime(&t));
    printf("%-12s %s\n", label, buf);
}

static void show_ids(const char *label, json_t *ids)
{
    size_t i;
    json_t *v;
    if (json_array_size(ids) == 0)
        return;
    printf("%-12s", label);
    json_array_foreach(ids, i, v)
        printf("%s%lld", i ? "," : " ", (long long)json_integer_value(v));
    printf("\n");
}

static void show_request(json_t *task)
{
    json_t *req = json_object_get(task, "request");
    const char *source = json_string_value(json_object_get(task, "claim_source"));
    char a[32], b[32];
    long long gpus = json_integer_value(json_object_get(req, "gpus"));
    long long gmem = json_integer_value(json_object_get(req, "gpu_mem"));
    long long cpus = json_integer_value(json_object_get(req, "cpus"));
    long long mem = json_integer_value(json_object_get(req, "mem"));
    long long timeout = json_integer_value(json_object_get(req, "timeout_ms"));
    printf("%-12s %lld GPU%s", "request", gpus, gpus == 1 ? "" : "s");
    if (gpus > 0)
        printf(gmem ? " sharing %s each" : " exclusive", format_size((uint64_t)gmem, a, sizeof a));
    if (gpus > 0 && source != NULL && strcmp(source, "declared") != 0)
        printf(" (%s)", strcmp(source, "learned") == 0 ? "learned from earlier runs"
                        : strcmp(source, "oom") == 0   ? "raised after running out of memory"
                                                       : source);
    if (cpus)
        printf(", %lld CPU%s", cpus, cpus == 1 ? "" : "s");
    if (mem)
        printf(", %s memory", format_size((uint64_t)mem, b, sizeof b));
    if (timeout)
        printf(", time limit %s", format_duration(timeout, a, sizeof a));
    printf("\n");
}

static void show_attempts(json_t *list)
{
    static const char *const head[] = {"ATTEMPT", "GPUS", "START", "DURATION", "EXIT",
                                       "PEAK GPU MEM", "GPU UTIL", "OUTCOME"};
    struct table *t = table_new(8, head);
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a) {
        char n[16], gpus[64] = "", start[32], dur[32] = "-", exit_code[16] = "-";
        json_t *g, *end = json_object_get(a, "end_time"), *ec = json_object_get(a, "exit_code");
        size_t k;
        long long st = json_integer_value(json_object_get(a, "start_time"));
        snprintf(n, sizeof n, "%lld", (long long)json_integer_value(json_object_get(a, "attempt")));
        json_array_foreach(json_object_get(a, "gpus"), k, g) {
            size_t len = strlen(gpus);
            snprintf(gpus + len, sizeof gpus - len, "%s%lld", k ? "," : "",
                     (long long)json_integer_value(g));
        }
        time_t tt = (time_t)(st / 1000);
        strftime(start, sizeof start, "%H:%M:%S", localtime(&tt));
        if (json_is_integer(end))
            format_duration(json_integer_value(end) - st, dur, sizeof dur);
        if (json_is_integer(ec))
            snprintf(exit_code, sizeof exit_code, "%lld", (long long)json_integer_value(ec));
        const char *reason = json_string_value(json_object_get(a, "reason"));
        char peak[32] = "-", util[16] = "-";
        json_t *pk = json_object_get(a, "peak_gpu_mem"), *ut = json_object_get(a, "mean_gpu_util");
        if (json_is_integer(pk))
            format_size((uint64_t)json_integer_value(pk), peak, sizeof peak);
        if (json_is_number(ut))
            snprintf(util, sizeof util, "%.0f%%", json_number_value(ut));
        const char *cells[] = {n, gpus[0] ? gpus : "-", start, dur, exit_code, peak, util,
                               reason ? reason : "running"};
        table_add(t, cells, NULL);
    }
    table_print(t, stdout);
    table_free(t);
}

/* "preemptible  yes: SIGTERM, 60s to exit" or "no longer: REASON" (nothing for a task never
 * submitted --preemptible). */
static void show_preempt(json_t *p)
{
    char grace[32];
    if (!json_is_object(p))
        return;
    const char *off = json_string_value(json_object_get(p, "off"));
    json_t *sig = json_object_get(p, "signal");
    long long overruns = json_integer_value(json_object_get(p, "overruns"));
    if (off != NULL) {
        printf("%-12s no longer: %s\n", "preemptible", off);
        return;
    }
    format_duration(json_integer_value(json_object_get(p, "grace_ms")), grace, sizeof grace);
    if (json_is_string(sig))
        printf("%-12s yes: SIG%s, %s to exit", "preemptible", json_string_value(sig), grace);
    else
        printf("%-12s yes: signal %lld, %s to exit", "preemptible",
               (long long)json_integer_value(sig), grace);
    if (overruns > 0)
        printf(" (overran it %lld time%s)", overruns, overruns == 1 ? "" : "s");
    printf("\n");
}

static void show_human(json_t *task)
{
    const char *name = json_string_value(json_object_get(task, "name"));
    const char *state = json_string_value(json_object_get(task, "state"));
    const char *reason = json_string_value(json_object_get(task, "reason"));
    const char *color = out_state_color(state);
    json_t *cmd = json_object_get(task, "command"), *arg;
    size_t i;
    printf("%-12s %lld%s%s\n", "task", (long long)json_integer_value(json_object_get(task, "id")),
           name ? "  " : "", name ? name : "");
    printf("%-12s %s%s%s%s%s\n", "state", color ? color : "", state, color ? "\033[0m" : "",
           reason ? "  " : "", reason ? reason : "");
    printf("%-12s", "command");
    json_array_foreach(cmd, i, arg)
        printf(" %s", json_string_value(arg));
    printf("\n%-12s %s\n", "workdir", json_string_value(json_object_get(task, "workdir")));
    printf("%-12s %lld\n", "priority", (long long)json_integer_value(json_object_get(task, "priority")));
    show_request(task);
    show_ids("after", json_object_get(task, "after"));
    show_ids("after-any", json_object_get(task, "after_any"));
    if (json_is_integer(json_object_get(task, "array_index")))
        printf("%-12s %lld (array %lld)\n", "array index",
               (long long)json_integer_value(json_object_get(task, "array_index")),
               (long long)json_integer_value(json_object_get(task, "array_id")));
    printf("%-12s %lld\n", "retries", (long long)json_integer_value(json_object_get(task, "retries")));
    show_preempt(json_object_get(task, "preempt"));
    show_time("submitted", json_object_get(task, "submit_time"));
    show_time("retry at", json_object_get(task, "retry_at"));
    show_time("begin", json_object_get(task, "begin_ms"));
    if (json_is_true(json_object_get(task, "off_peak")))
        printf("%-12s %s\n", "schedule", "off-peak");
    show_time("ended", json_object_get(task, "end_time"));
    if (json_is_string(json_object_get(task, "run_dir")))
        printf("%-12s %s\n", "logs", json_string_value(json_object_get(task, "run_dir")));
    if (json_array_size(json_object_get(task, "attempt_list")) > 0) {
        printf("\n");
        show_attempts(json_object_get(task, "attempt_list"));
    }
}

static int show_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    long long id = out_task_id(cmd, args->argv[0]);
    int rc;
    if (id < 0)
        return EXIT_USAGE;
    json_t *req = client_request("show");
    json_object_set_new(req, "id", json_integer(id));
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    if (cmd_opt(cmd, args, "json"))
        out_json(json_object_get(reply, "task"));
    else
        show_human(json_object_get(reply, "task"));
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_show = {
    .name = "show",
    .usage = "show ID [--json]",
    .summary = "show one task: request, state and reason, attempts",
    .opts = show_opts,
    .min_args = 1,
    .max_args = 1,
    .exec = show_exec,
};
