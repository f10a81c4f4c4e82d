/* The simulation loop: arrivals and completions in time order, one core_schedule() per instant
 * at which something happened, and the statistics of the schedule that results. */
#include "sim/sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

int sim_policy_apply(const char *name, struct sim_config *config, const char **err)
{
    struct core_policy policy = core_policy_default();
    if (strcmp(name, "fifo") == 0) {
        policy.aging_ms = 0;
        policy.strict_order = true;
        policy.backfill = false;
        policy.best_fit = false;
        policy.max_scan = 0;
        policy.fair_share = false;
        config->whole_gpus = true;
        config->arrival_order = true;
    } else if (strcmp(name, "backfill") == 0) {
        policy.aging_ms = 0;
        policy.strict_order = false;
        policy.backfill = true;
        policy.best_fit = false;
        policy.fair_share = false;
    } else if (strcmp(name, "drover") != 0) {
        *err = "unknown policy (expected fifo, backfill or drover)";
        return -1;
    }
    config->policy = policy;
    return 0;
}

int sim_limits_parse(const char *s, enum sim_limits *limits, double *factor, const char **err)
{
    char *end;
    *factor = 1;
    if (strcmp(s, "none") == 0) {
        *limits = SIM_LIMITS_NONE;
        return 0;
    }
    if (strcmp(s, "exact") == 0) {
        *limits = SIM_LIMITS_EXACT;
        return 0;
    }
    if (s[0] == 'x' && s[1] != '\0') {
        double f = strtod(s + 1, &end);
        if (*end == '\0' && isfinite(f) && f >= 1 && f <= 1000) {
            *limits = SIM_LIMITS_FACTOR;
            *factor = f;
            return 0;
        }
    }
    *err = "expected none, exact or xF with F a factor from 1 to 1000 (e.g. x2)";
    return -1;
}

/* ---- the run ------------------------------------------------------------------------------- */

/* What became of one job. */
struct sim_record {
    int64_t start, end;      /* ms; start = -1 while it has not started */
    int node;
    int nspan;               /* > 1: whole nodes span[0..nspan) */
    int *span;
    uint64_t gpu_mask;       /* GPUs on node (single node) */
};

/* A min-heap of running jobs by (end, index): the same input always ends them in one order. */
struct sim_heap {
    size_t *v;
    size_t n, cap;
    const struct sim_record *rec;
};

static bool sim_heap_less(const struct sim_heap *h, size_t a, size_t b)
{
    int64_t ea = h->rec[a].end, eb = h->rec[b].end;
    return ea != eb ? ea < eb : a < b;
}

static void sim_heap_push(struct sim_heap *h, size_t job)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->v = xrealloc(h->v, h->cap * sizeof *h->v);
    }
    size_t i = h->n++;
    while (i > 0 && sim_heap_less(h, job, h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = job;
}

static size_t sim_heap_pop(struct sim_heap *h)
{
    size_t top = h->v[0], last = h->v[--h->n], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && sim_heap_less(h, h->v[c + 1], h->v[c]))
            c++;
        if (!sim_heap_less(h, h->v[c], last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

struct sim_state;
static void sim_why(struct sim_state *st, int64_t now);
static void sim_print_seconds(FILE *fp, int64_t ms);

struct sim_state {
    const struct sim_config *config;
    struct core *core;
    struct core_actions acts;
    struct sim_record *rec;
    bool *unfit;
    struct sim_heap running;
    double core_cpu;         /* seconds inside core/ */
    uint64_t passes;
    /* Since the previous step: how long jobs waited, and how many ran meanwhile (x time). */
    int64_t last_step;
    bool waiting;
    double contended, running_contended;
    int64_t why_id;          /* --why: the job's core id (index + 1), or 0 */
    char why_last[CORE_WAIT_TEXT];
};

static double sim_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct core_request sim_request(const struct sim_config *config, const struct sim_job *job)
{
    struct core_request req;
    memset(&req, 0, sizeof req);
    req.gpus = job->gpus;
    if (job->gpus > 0 && job->gpu_milli < 1000 && !config->whole_gpus) {
        req.gpu_mem = config->gpu_mem / 1000 * (uint64_t)job->gpu_milli;
        if (req.gpu_mem == 0)
            req.gpu_mem = 1;
    }
    if (config->use_host) {
        req.cpus = job->cpu_milli;
        req.mem = job->mem_bytes;
    }
    if (config->use_types)
        req.gpu_types = job->gpu_types;
    if (config->limits != SIM_LIMITS_NONE) {
        double limit = (double)job->duration_ms * config->limit_factor;
        req.time_limit = limit < 1 ? 1 : (int64_t)llround(limit);
    }
    return req;
}

static void sim_submit(struct sim_state *st, size_t i)
{
    const struct sim_job *job = &st->config->trace->jobs[i];
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = (int64_t)i + 1;
    spec.priority = st->config->arrival_order ? 0 : job->priority;
    spec.submit_time = job->submit_ms;
    spec.user = job->user;
    spec.req = sim_request(st->config, job);
    if (core_submit(st->core, &spec, job->submit_ms, &st->acts) != 0)
        fatalx("simulate: core refused job %s", job->id);
}

static void sim_record_start(struct sim_state *st, const struct core_action *act, int64_t now)
{
    size_t i = (size_t)(act->task - 1);
    struct sim_record *r = &st->rec[i];
    const struct core_placement *pl = &act->placement;
    r->start = now;
    r->end = now + st->config->trace->jobs[i].duration_ms;
    r->node = pl->node;
    if (pl->nnodes > 1) {
        r->nspan = pl->nnodes;
        r->span = xmalloc((size_t)pl->nnodes * sizeof *r->span);
        memcpy(r->span, pl->nodes, (size_t)pl->nnodes * sizeof *r->span);
    } else {
        for (int g = 0; g < pl->ngpus; g++)
            r->gpu_mask |= 1ULL << pl->gpu[g];
    }
    sim_heap_push(&st->running, i);
}

/* One instant: the jobs that end now, those that arrive now, then one scheduling pass. */
static void sim_step(struct sim_state *st, int64_t now, size_t *next)
{
    const struct sim_trace *trace = st->config->trace;
    if (st->waiting) {
        double dt = (double)(now - st->last_step) / 1000;
        st->contended += dt;
        st->running_contended += dt * (double)st->running.n;
    }
    double t0 = sim_cpu_seconds();
    core_actions_clear(&st->acts);
    while (st->running.n > 0 && st->rec[st->running.v[0]].end <= now) {
        size_t i = sim_heap_pop(&st->running);
        if (core_attempt_exited(st->core, (int64_t)i + 1, CORE_OUTCOME_SUCCESS, now, &st->acts))
            fatalx("simulate: core lost job %s", trace->jobs[i].id);
    }
    for (; *next < trace->n && trace->jobs[*next].submit_ms <= now; (*next)++)
        if (!st->unfit[*next])
            sim_submit(st, *next);
    core_actions_clear(&st->acts);
    core_schedule(st->core, now, &st->acts);
    st->passes++;
    st->core_cpu += sim_cpu_seconds() - t0;
    for (size_t k = 0; k < st->acts.n; k++)
        if (st->acts.v[k].type == CORE_ACT_START)
            sim_record_start(st, &st->acts.v[k], now);
    size_t counts[TASK_NSTATES];
    core_count_states(st->core, counts);
    st->waiting = counts[TASK_QUEUED] > 0;
    st->last_step = now;
    if (st->why_id != 0)
        sim_why(st, now);
}

/* --why: the job's reason, when it changed (after its start, once: "started"). */
static void sim_why(struct sim_state *st, int64_t now)
{
    struct core_why w;
    core_why(st->core, &st->why_id, 1, now, &w);
    const struct sim_trace *trace = st->config->trace;
    /* core names tasks by its ids (index + 1); people know the trace's */
    if (w.wait == CORE_WAIT_RESERVED && w.task > 0 && (size_t)w.task <= trace->n)
        snprintf(w.text, sizeof w.text, "reserved for job %s (backfill: it would delay it)",
                 trace->jobs[w.task - 1].id);
    else if (w.wait == CORE_WAIT_ORDER && w.task > 0 && (size_t)w.task <= trace->n)
        snprintf(w.text, sizeof w.text, "behind job %s, which does not fit (strict order)",
                 trace->jobs[w.task - 1].id);
    const char *text = w.wait != CORE_WAIT_NONE ? w.text
                       : st->rec[st->why_id - 1].start >= 0 ? "started"
                                                            : "";
    if (text[0] == '\0' || strcmp(text, st->why_last) == 0)
        return;
    snprintf(st->why_last, sizeof st->why_last, "%s", text);
    sim_print_seconds(st->config->why_out, now);
    fprintf(st->config->why_out, " %s %s\n", st->config->trace->jobs[st->why_id - 1].id, text);
}

/* Marks the jobs no node could ever run. Returns how many can run. */
static size_t sim_check_jobs(struct sim_state *st, struct sim_result *result)
{
    const struct sim_trace *trace = st->config->trace;
    size_t ok = 0;
    for (size_t i = 0; i < trace->n; i++) {
        struct core_request req = sim_request(st->config, &trace->jobs[i]);
        char why[CORE_WHY_MAX];
        if (core_check_request(st->core, &req, why, sizeof why) == 0) {
            ok++;
            continue;
        }
        st->unfit[i] = true;
        if (result->skipped_unfit++ == 0)
            result->first_unfit = xasprintf("job %s (line %u) %s", trace->jobs[i].id,
                                            trace->jobs[i].line, why);
    }
    return ok;
}

/* ---- statistics ---------------------------------------------------------------------------- */

static int sim_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest rank over a sorted array. */
static double sim_percentile(const double *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100 * (double)n);
    return sorted[rank == 0 ? 0 : rank - 1];
}

static void sim_statistics(const struct sim_state *st, struct sim_result *result)
{
    const struct sim_trace *trace = st->config->trace;
    double *jct = xmalloc((trace->n + 1) * sizeof *jct);
    double *wait = xmalloc((trace->n + 1) * sizeof *wait);
    double gpu_time = 0, run_time = 0, jct_sum = 0, wait_sum = 0;
    int64_t first = INT64_MAX, last = INT64_MIN;
    size_t n = 0;
    for (size_t i = 0; i < trace->n; i++) {
        if (st->unfit[i])
            continue;
        const struct sim_job *job = &trace->jobs[i];
        const struct sim_record *r = &st->rec[i];
        jct[n] = (double)(r->end - job->submit_ms) / 1000;
        wait[n] = (double)(r->start - job->submit_ms) / 1000;
        jct_sum += jct[n];
        wait_sum += wait[n];
        n++;
        double seconds = (double)job->duration_ms / 1000;
        gpu_time += seconds * job->gpus * (job->gpu_milli < 1000 ? job->gpu_milli / 1000.0 : 1);
        run_time += seconds;
        if (job->submit_ms < first)
            first = job->submit_ms;
        if (r->end > last)
            last = r->end;
    }
    qsort(jct, n, sizeof *jct, sim_cmp_double);
    qsort(wait, n, sizeof *wait, sim_cmp_double);
    result->jobs = n;
    result->makespan = (double)(last - first) / 1000;
    result->jct_avg = jct_sum / (double)n;
    result->jct_p50 = sim_percentile(jct, n, 50);
    result->jct_p95 = sim_percentile(jct, n, 95);
    result->jct_p99 = sim_percentile(jct, n, 99);
    result->wait_avg = wait_sum / (double)n;
    result->wait_p99 = sim_percentile(wait, n, 99);
    result->wait_max = wait[n - 1];
    double capacity = (double)result->ngpus * result->makespan;
    result->utilisation = capacity > 0 ? gpu_time / capacity : 0;
    result->avg_running = result->makespan > 0 ? run_time / result->makespan : 0;
    result->bound_makespan = result->ngpus > 0 ? gpu_time / result->ngpus : 0;
    result->bound_jct = run_time / (double)n;
    free(jct);
    free(wait);
}

static void sim_user_statistics(const struct sim_state *st, struct sim_result *result)
{
    const struct sim_trace *trace = st->config->trace;
    if (trace->nusers == 0)
        return;
    result->nusers = trace->nusers;
    result->users = xcalloc(trace->nusers, sizeof *result->users);
    for (size_t u = 0; u < trace->nusers; u++)
        result->users[u].name = trace->users[u];
    for (size_t i = 0; i < trace->n; i++) {
        if (st->unfit[i])
            continue;
        const struct sim_job *job = &trace->jobs[i];
        const struct sim_record *r = &st->rec[i];
        struct sim_user_result *u = &result->users[job->user];
        double wait = (double)(r->start - job->submit_ms) / 1000;
        u->jobs++;
        u->jct_avg += (double)(r->end - job->submit_ms) / 1000;
        u->wait_avg += wait;
        if (wait > u->wait_max)
            u->wait_max = wait;
        u->gpu_hours += (double)job->duration_ms / 3600e3 * job->gpus *
                        (job->gpu_milli < 1000 ? job->gpu_milli / 1000.0 : 1);
    }
    for (size_t u = 0; u < result->nusers; u++) {
        if (result->users[u].jobs == 0)
            continue;
        result->users[u].jct_avg /= (double)result->users[u].jobs;
        result->users[u].wait_avg /= (double)result->users[u].jobs;
    }
}

/* ---- the schedule as CSV ------------------------------------------------------------------- */

/* ms as seconds, without a fraction when there is none. */
static void sim_print_seconds(FILE *fp, int64_t ms)
{
    if (ms % 1000 == 0) {
        fprintf(fp, "%lld", (long long)(ms / 1000));
        return;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
    for (char *p = buf + strlen(buf) - 1; *p == '0'; p--)
        *p = '\0';
    fputs(buf, fp);
}

static void sim_print_node(FILE *fp, const struct sim_config *config, int node)
{
    if (config->node_names != NULL)
        fputs(config->node_names[node], fp);
    else
        fprintf(fp, "%d", node);
}

static int sim_write_schedule(const struct sim_state *st, char **err)
{
    const struct sim_config *config = st->config;
    const struct sim_trace *trace = config->trace;
    FILE *fp = config->schedule_out;
    fputs("job_id,submit,start,end,node,gpus\n", fp);
    for (size_t i = 0; i < trace->n; i++) {
        if (st->unfit[i])
            continue;
        const struct sim_job *job = &trace->jobs[i];
        const struct sim_record *r = &st->rec[i];
        fprintf(fp, "%s,", job->id);
        sim_print_seconds(fp, job->submit_ms);
        fputc(',', fp);
        sim_print_seconds(fp, r->start);
        fputc(',', fp);
        sim_print_seconds(fp, r->end);
        fputc(',', fp);
        if (r->nspan > 1) {
            /* Whole nodes: every GPU of each. */
            for (int k = 0; k < r->nspan; k++) {
                if (k > 0)
                    fputc(';', fp);
                sim_print_node(fp, config, r->span[k]);
            }
            fputc(',', fp);
            for (int g = 0; g < config->nodes[r->span[0]].ngpus; g++)
                fprintf(fp, "%s%d", g > 0 ? ";" : "", g);
            fputc('\n', fp);
            continue;
        }
        sim_print_node(fp, config, r->node);
        fputc(',', fp);
        bool shared = job->gpus > 0 && job->gpu_milli < 1000 && !config->whole_gpus;
        int printed = 0;
        for (int g = 0; g < CORE_MAX_NODE_GPUS; g++) {
            if (!(r->gpu_mask >> g & 1))
                continue;
            fprintf(fp, "%s%d", printed++ > 0 ? ";" : "", g);
            if (shared)
                fprintf(fp, "@%g", job->gpu_milli / 1000.0);
        }
        fputc('\n', fp);
    }
    if (fflush(fp) != 0 || ferror(fp)) {
        *err = xasprintf("writing the schedule: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the driver ---------------------------------------------------------------------------- */

int sim_run(const struct sim_config *config, struct sim_result *result, char **err)
{
    const struct sim_trace *trace = config->trace;
    struct sim_state st;
    memset(&st, 0, sizeof st);
    memset(result, 0, sizeof *result);
    *err = NULL;
    st.config = config;
    st.core = core_new(&config->policy);
    core_set_nodes(st.core, config->nodes, config->nnodes);
    for (int i = 0; i < config->nnodes; i++)
        result->ngpus += config->nodes[i].ngpus;
    st.rec = xcalloc(trace->n + 1, sizeof *st.rec);
    st.unfit = xcalloc(trace->n + 1, sizeof *st.unfit);
    st.running.rec = st.rec;
    int rc = -1;
    if (sim_check_jobs(&st, result) == 0) {
        *err = xasprintf("no job can run on these nodes; the first: %s", result->first_unfit);
        goto out;
    }
    for (size_t i = 0; i < trace->n; i++)
        st.rec[i].start = -1;
    if (config->why_job != NULL) {
        for (size_t i = 0; i < trace->n && st.why_id == 0; i++)
            if (strcmp(trace->jobs[i].id, config->why_job) == 0)
                st.why_id = (int64_t)i + 1;
        if (st.why_id == 0) {
            *err = xasprintf("--why: no job '%s' in the trace", config->why_job);
            goto out;
        }
        if (st.unfit[st.why_id - 1]) {
            *err = xasprintf("--why: job %s fits no node of this cluster", config->why_job);
            goto out;
        }
    }

    size_t next = 0;
    for (;;) {
        while (next < trace->n && st.unfit[next])
            next++;
        int64_t now = INT64_MAX;
        if (next < trace->n)
            now = trace->jobs[next].submit_ms;
        if (st.running.n > 0 && st.rec[st.running.v[0]].end < now)
            now = st.rec[st.running.v[0]].end;
        if (now == INT64_MAX)
            break;
        sim_step(&st, now, &next);
    }
    size_t counts[TASK_NSTATES];
    core_count_states(st.core, counts);
    size_t stuck = counts[TASK_QUEUED] + counts[TASK_PENDING] + counts[TASK_HELD];
    if (stuck > 0) {
        /* Cannot happen with jobs that fit: nothing is left running to free anything. */
        *err = xasprintf("%zu jobs never started (the scheduler left them queued with the "
                         "cluster idle)", stuck);
        goto out;
    }
    sim_statistics(&st, result);
    sim_user_statistics(&st, result);
    result->passes = st.passes;
    result->contended = st.contended;
    result->avg_running_contended = st.contended > 0 ? st.running_contended / st.contended : 0;
    result->sched_seconds = st.core_cpu;
    rc = config->schedule_out != NULL ? sim_write_schedule(&st, err) : 0;
out:
    for (size_t i = 0; i < trace->n; i++)
        free(st.rec[i].span);
    free(st.rec);
    free(st.unfit);
    free(st.running.v);
    core_actions_free(&st.acts);
    core_free(st.core);
    return rc;
}

void sim_result_free(struct sim_result *result)
{
    free(result->first_unfit);
    result->first_unfit = NULL;
    free(result->users);
    result->users = NULL;
    result->nusers = 0;
}
