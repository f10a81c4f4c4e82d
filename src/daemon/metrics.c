/* Prometheus text exposition format 0.0.4 from the machine snapshot.
 *
 * Every family is written whole (its samples are contiguous, as the format requires) and only when
 * it has at least one sample, so a snapshot without GPUs carries no empty GPU families. Units are
 * converted to Prometheus base units: percent -> ratio 0..1, ms -> seconds; bytes stay bytes.
 */
#include "daemon/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* A growing NUL-terminated string. */
struct text {
    char *buf;
    size_t len, cap;
};

static void text_append(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_append(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        fatalx("metrics: bad format '%s'", fmt);
    xgrow((void **)&t->buf, &t->cap, t->len + (size_t)n + 1, 1);
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static const char *text_str(const struct text *t)
{
    return t->buf ? t->buf : "";
}

/* Appends name="value" (comma-separated from what is there), escaping \, " and newline as the
 * format requires. */
static void label_append(struct text *t, const char *name, const char *value)
{
    text_append(t, "%s%s=\"", t->len ? "," : "", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\\')
            text_append(t, "\\\\");
        else if (*p == '"')
            text_append(t, "\\\"");
        else if (*p == '\n')
            text_append(t, "\\n");
        else
            text_append(t, "%c", *p);
    }
    text_append(t, "\"");
}

/* The shortest of %.15g / %.17g that reads back as v; the format's spellings for the specials. */
static void format_double(double v, char out[32])
{
    if (isnan(v)) {
        strcpy(out, "NaN");
    } else if (isinf(v)) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
    } else {
        snprintf(out, 32, "%.15g", v);
        if (strtod(out, NULL) != v)
            snprintf(out, 32, "%.17g", v);
    }
}

/* Formats a JSON number divided by divisor; integers with divisor 1 are written exactly. Returns
 * false when v is not a number (missing, null, wrong type). */
static bool format_number(const json_t *v, double divisor, char out[32])
{
    if (json_is_integer(v) && divisor == 1) {
        snprintf(out, 32, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return true;
    }
    if (!json_is_number(v))
        return false;
    format_double(json_number_value(v) / divisor, out);
    return true;
}

static bool format_bool(const json_t *v, char out[32])
{
    if (!json_is_boolean(v))
        return false;
    strcpy(out, json_is_true(v) ? "1" : "0");
    return true;
}

/* One metric family being written: its header goes out before its first sample. */
struct family {
    const char *name, *type, *help;
    struct text *out;
    bool started;
};

static void family_sample(struct family *f, const char *suffix, const char *labels,
                          const char *value)
{
    if (!f->started) {
        text_append(f->out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
        f->started = true;
    }
    if (labels && *labels)
        text_append(f->out, "%s%s{%s} %s\n", f->name, suffix, labels, value);
    else
        text_append(f->out, "%s%s %s\n", f->name, suffix, value);
}

/* How a figure in a GPU or task object becomes a sample value. */
enum figure {
    FIGURE_NUMBER,       /* as given */
    FIGURE_PERCENT,      /* percent -> ratio 0..1 */
    FIGURE_BOOL,         /* false/true -> 0/1 */
    FIGURE_ARRAY_LENGTH, /* the number of elements */
};

struct object_metric {
    const char *name, *help, *key;
    enum figure figure;
};

static bool format_figure(const json_t *v, enum figure figure, char out[32])
{
    switch (figure) {
    case FIGURE_NUMBER:
        return format_number(v, 1, out);
    case FIGURE_PERCENT:
        return format_number(v, 100, out);
    case FIGURE_BOOL:
        return format_bool(v, out);
    case FIGURE_ARRAY_LENGTH:
        if (!json_is_array(v))
            return false;
        snprintf(out, 32, "%zu", json_array_size(v));
        return true;
    }
    return false;
}

static const struct object_metric gpu_metrics[] = {
    {"drover_gpu_utilization_ratio", "GPU utilisation (NVML), 0..1.", "util", FIGURE_PERCENT},
    {"drover_gpu_memory_utilization_ratio", "GPU memory-controller utilisation (NVML), 0..1.",
     "mem_util", FIGURE_PERCENT},
    {"drover_gpu_memory_used_bytes", "GPU memory used by all processes (NVML).", "mem_used",
     FIGURE_NUMBER},
    {"drover_gpu_memory_total_bytes", "GPU memory in total.", "mem_total", FIGURE_NUMBER},
    {"drover_gpu_memory_claimed_bytes",
     "GPU memory claimed by drover's running tasks (an exclusive task claims the total).",
     "mem_claimed", FIGURE_NUMBER},
    {"drover_gpu_temperature_celsius", "GPU temperature.", "temp_c", FIGURE_NUMBER},
    {"drover_gpu_power_watts", "GPU power draw.", "power_w", FIGURE_NUMBER},
    {"drover_gpu_busy", "1 when the utilisation rule holds new tasks off the GPU.", "busy",
     FIGURE_BOOL},
    {"drover_gpu_offline", "1 when the GPU is drained after a fault or has vanished.", "offline",
     FIGURE_BOOL},
};

/* Per running task. claim is written as given: per-GPU bytes, 0 meaning the task holds its GPUs
 * exclusively (a dashboard can tell the two apart, which substituting mem_total would hide);
 * drover_task_gpus says over how many GPUs claim and gpu_mem spread. */
static const struct object_metric task_metrics[] = {
    {"drover_task_gpu_memory_bytes", "GPU memory a running task uses, over all its GPUs.",
     "gpu_mem", FIGURE_NUMBER},
    {"drover_task_gpu_claim_bytes",
     "GPU memory a running task claims on each of its GPUs; 0 = it holds them exclusively.",
     "claim", FIGURE_NUMBER},
    {"drover_task_gpus", "The number of GPUs a running task holds.", "gpus", FIGURE_ARRAY_LENGTH},
};

/* Writes each metric of table for every object in items whose labels[i] is not NULL; objects
 * without the figure (or with null) have no sample in that family. */
static void render_objects(struct text *out, const struct object_metric *table, size_t count,
                           const json_t *items, char **labels)
{
    char value[32];
    for (size_t m = 0; m < count; m++) {
        struct family f = {table[m].name, "gauge", table[m].help, out, false};
        for (size_t i = 0; i < json_array_size(items); i++) {
            if (labels[i] == NULL)
                continue;
            const json_t *v = json_object_get(json_array_get(items, i), table[m].key);
            if (format_figure(v, table[m].figure, value))
                family_sample(&f, "", labels[i], value);
        }
    }
}

static const char *string_or_empty(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

static void free_labels(char **labels, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(labels[i]);
    free(labels);
}

/* Labels gpu (the index; the position in the list when the index is missing), uuid, name. */
static void render_gpus(struct text *out, const json_t *gpus)
{
    size_t n = json_array_size(gpus);
    if (n == 0)
        return;
    char **labels = xcalloc(n, sizeof *labels);
    for (size_t i = 0; i < n; i++) {
        const json_t *gpu = json_array_get(gpus, i);
        if (!json_is_object(gpu))
            continue;
        const json_t *index = json_object_get(gpu, "index");
        char id[32];
        if (json_is_integer(index))
            snprintf(id, sizeof id, "%" JSON_INTEGER_FORMAT, json_integer_value(index));
        else
            snprintf(id, sizeof id, "%zu", i);
        struct text l = {0};
        label_append(&l, "gpu", id);
        label_append(&l, "uuid", string_or_empty(json_object_get(gpu, "uuid")));
        label_append(&l, "name", string_or_empty(json_object_get(gpu, "name")));
        labels[i] = xstrdup(text_str(&l));
        free(l.buf);
    }
    render_objects(out, gpu_metrics, sizeof gpu_metrics / sizeof gpu_metrics[0], gpus, labels);
    free_labels(labels, n);
}

/* Labels task (the id; tasks without an integer id are skipped) and name ("" when null). */
static void render_running(struct text *out, const json_t *running)
{
    size_t n = json_array_size(running);
    if (n == 0)
        return;
    char **labels = xcalloc(n, sizeof *labels);
    for (size_t i = 0; i < n; i++) {
        const json_t *task = json_array_get(running, i);
        const json_t *id = json_object_get(task, "id");
        if (!json_is_integer(id))
            continue;
        char ids[32];
        snprintf(ids, sizeof ids, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        struct text l = {0};
        label_append(&l, "task", ids);
        label_append(&l, "name", string_or_empty(json_object_get(task, "name")));
        labels[i] = xstrdup(text_str(&l));
        free(l.buf);
    }
    render_objects(out, task_metrics, sizeof task_metrics / sizeof task_metrics[0], running,
                   labels);
    free_labels(labels, n);
}

/* One sample of a family with a single label whose value is key; skipped unless v is a number. */
static void keyed_sample(struct family *f, const char *label, const char *key, const json_t *v)
{
    char value[32];
    if (!format_number(v, 1, value))
        return;
    struct text l = {0};
    label_append(&l, label, key);
    family_sample(f, "", text_str(&l), value);
    free(l.buf);
}

/* The ten task states, in the order the snapshot lists them; a state missing from "states" (or
 * not a number there) has no sample. */
static const char *const task_states[] = {
    "held",      "pending", "queued",    "running",   "retrying",
    "succeeded", "failed",  "timed_out", "cancelled", "upstream_failed",
};

/* latency: {"buckets": [[le, cumulative count], ...], "sum": s, "count": n}. The whole family is
 * left out unless sum and count are numbers; buckets that are malformed or whose bound does not
 * rise are skipped (the format wants them in increasing order). */
static void render_latency(struct text *out, const json_t *latency)
{
    char value[32], le[32], sum[32], count[32];
    if (!format_number(json_object_get(latency, "sum"), 1, sum) ||
        !format_number(json_object_get(latency, "count"), 1, count))
        return;
    struct family f = {"drover_schedule_latency_seconds", "histogram",
                       "Time from queued to started, seconds.", out, false};
    const json_t *buckets = json_object_get(latency, "buckets");
    double last = -INFINITY;
    for (size_t i = 0; i < json_array_size(buckets); i++) {
        const json_t *b = json_array_get(buckets, i);
        const json_t *bound = json_array_get(b, 0);
        if (json_array_size(b) != 2 || !json_is_number(bound) ||
            !(json_number_value(bound) > last) ||
            !format_number(json_array_get(b, 1), 1, value))
            continue;
        last = json_number_value(bound);
        format_double(last, le);
        struct text l = {0};
        label_append(&l, "le", le);
        family_sample(&f, "_bucket", text_str(&l), value);
        free(l.buf);
    }
    family_sample(&f, "_bucket", "le=\"+Inf\"", count);
    family_sample(&f, "_sum", NULL, sum);
    family_sample(&f, "_count", NULL, count);
}

/* Writes name (a gauge without labels) when value formats. */
static void render_scalar(struct text *out, const char *name, const char *help, bool formatted,
                          const char *value)
{
    struct family f = {name, "gauge", help, out, false};
    if (formatted)
        family_sample(&f, "", NULL, value);
}

char *metrics_render(const json_t *snapshot)
{
    struct text out = {0};
    char value[32];
    const json_t *s = json_is_object(snapshot) ? snapshot : NULL;

    render_gpus(&out, json_object_get(s, "gpus"));

    struct family tasks = {"drover_tasks", "gauge", "Tasks by state.", &out, false};
    const json_t *states = json_object_get(s, "states");
    for (size_t i = 0; i < sizeof task_states / sizeof task_states[0]; i++)
        keyed_sample(&tasks, "state", task_states[i], json_object_get(states, task_states[i]));
    render_scalar(&out, "drover_queue_length", "Tasks queued, waiting for resources.",
                  format_number(json_object_get(s, "queue_length"), 1, value), value);
    render_scalar(&out, "drover_draining", "1 when the daemon is draining (starts nothing new).",
                  format_bool(json_object_get(s, "draining"), value), value);

    render_running(&out, json_object_get(s, "running"));

    struct family attempts = {"drover_attempts_total", "counter",
                              "Attempts ended, by outcome, since the state directory was created.",
                              &out, false};
    /* Every outcome the daemon reports, in its order: new outcomes need no change here. */
    json_t *outcomes = json_object_get(s, "attempts");
    for (void *it = json_is_object(outcomes) ? json_object_iter(outcomes) : NULL; it != NULL;
         it = json_object_iter_next(outcomes, it))
        keyed_sample(&attempts, "outcome", json_object_iter_key(it), json_object_iter_value(it));

    render_latency(&out, json_object_get(s, "latency"));
    struct family commits = {"drover_store_commits_total", "counter",
                             "Transactions the daemon committed to its store (each one fsync of"
                             " the WAL; the submissions of one loop turn share one).",
                             &out, false};
    if (format_number(json_object_get(s, "store_commits"), 1, value))
        family_sample(&commits, "", NULL, value);

    struct family preempt = {"drover_preemptions_total", "counter",
                             "Running attempts the policy (las) asked to yield since the daemon"
                             " started.", &out, false};
    if (format_number(json_object_get(s, "preemptions"), 1, value))
        family_sample(&preempt, "", NULL, value);

    const json_t *amqp = json_object_get(s, "amqp");
    if (json_is_object(amqp)) {
        render_scalar(&out, "drover_amqp_up",
                      "1 when the daemon is connected to its RabbitMQ broker, 0 when not.",
                      format_bool(json_object_get(amqp, "up"), value), value);
        render_scalar(&out, "drover_amqp_events_waiting",
                      "Events in the store not yet confirmed by the broker.",
                      format_number(json_object_get(amqp, "events_waiting"), 1, value), value);
        struct family dropped = {"drover_amqp_events_dropped_total", "counter",
                                 "Events dropped while the broker was away (amqp-outbox).",
                                 &out, false};
        if (format_number(json_object_get(amqp, "events_dropped"), 1, value))
            family_sample(&dropped, "", NULL, value);
        struct family published = {"drover_amqp_events_published_total", "counter",
                                   "Events published to the broker since the daemon started"
                                   " (again after a reconnection too).", &out, false};
        if (format_number(json_object_get(amqp, "events_published"), 1, value))
            family_sample(&published, "", NULL, value);
        struct family msgs = {"drover_amqp_messages_total", "counter",
                              "Messages taken from the intake queue since the daemon started,"
                              " by result.", &out, false};
        const json_t *m = json_object_get(amqp, "messages");
        static const char *const results[] = {"accepted", "duplicate", "rejected"};
        for (size_t i = 0; i < 3; i++)
            keyed_sample(&msgs, "result", results[i], json_object_get(m, results[i]));
    }

    const json_t *slurm = json_object_get(s, "slurm");
    if (json_is_object(slurm)) {
        render_scalar(&out, "drover_slurm_up",
                      "1 when the Slurm cluster answers drover's commands, 0 when it does not.",
                      format_bool(json_object_get(slurm, "up"), value), value);
        render_scalar(&out, "drover_slurm_jobs_tracked", "Slurm jobs drover follows.",
                      format_number(json_object_get(slurm, "tracked"), 1, value), value);
        struct family calls = {"drover_slurm_commands_total", "counter",
                               "Slurm commands run by the daemon, by command.", &out, false};
        const json_t *c = json_object_get(slurm, "calls");
        static const char *const names[] = {"sbatch", "squeue", "scontrol", "scancel"};
        for (size_t i = 0; i < 4; i++)
            keyed_sample(&calls, "command", names[i], json_object_get(c, names[i]));
    }

    render_scalar(&out, "drover_telemetry_last_sample_timestamp_seconds",
                  "When GPU telemetry was last sampled, seconds since the epoch.",
                  format_number(json_object_get(s, "sampled_at"), 1000, value), value);

    struct family build = {"drover_build_info", "gauge", "drover's version; always 1.", &out,
                           false};
    family_sample(&build, "", "version=\"" METRICS_BUILD_VERSION "\"", "1");
    return out.buf;
}
