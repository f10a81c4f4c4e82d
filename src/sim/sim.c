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
    } else if (strcmp(name, "las") == 0) {
        /* Discretized 2D-LAS with preemption (core/sched.c): every job preemptible, first
         * fit, no aging, no fair share; the las knobs at their defaults (core_policy_las). */
        policy.aging_ms = 0;
        policy.strict_order = false;
        policy.backfill = false;
        policy.best_fit = false;
        policy.fair_share = false;
        core_policy_las(&policy);
        config->preemptible = true;
    } else if (strcmp(name, "drover") != 0) {
        *err = "unknown policy (expected fifo, backfill, drover or las)";
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

/* Where one run segment of a job ran. */
struct sim_where {
    int node;
    int nspan;               /* > 1: whole nodes span[0..nspan) */
    int *span;
    uint64_t gpu_mask;       /* GPUs on node (single node) */
};

/* A segment that ended by a preemption (las). */
struct sim_segment {
    int64_t start, end;
    struct sim_where where;
};

/* What became of one job. */
struct sim_record {
    int64_t start, end;      /* ms; start = -1 while it has not started; the first start and
                              * the last end (the end of the running segment while it runs) */
    int64_t seg_start;       /* the running segment's start */
    int64_t remaining;       /* work left when it next starts: duration, plus the preemption
                              * cost for each preemption, less what ran */
    uint32_t gen;            /* bumped by a preemption: the heap's older entries are stale */
    bool running;
    struct sim_where where;  /* the running (or last) segment's */
    struct sim_segment *segs; /* segments ended by preemption, in order */
    size_t nsegs;
};

/* A min-heap of running segments by (end, index): the same input always ends them in one
 * order. An entry whose gen is not its job's is a preempted segment's: skipped. */
struct sim_hent {
    int64_t end;
    size_t job;
    uint32_t gen;
};

struct sim_heap {
    struct sim_hent *v;
    size_t n, cap;
    const struct sim_record *rec;
};

static bool sim_heap_less(const struct sim_hent *a, const struct sim_hent *b)
{
    return a->end != b->end ? a->end < b->end : a->job < b->job;
}

static void sim_heap_push(struct sim_heap *h, size_t job)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->v = xrealloc(h->v, h->cap * sizeof *h->v);
    }
    struct sim_hent e = {.end = h->rec[job].end, .job = job, .gen = h->rec[job].gen};
    size_t i = h->n++;
    while (i > 0 && sim_heap_less(&e, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = e;
}

static bool sim_heap_stale(const struct sim_heap *h, const struct sim_hent *e)
{
    return !h->rec[e->job].running || h->rec[e->job].gen != e->gen;
}

static size_t sim_heap_pop(struct sim_heap *h)
{
    size_t top = h->v[0].job, i = 0;
    struct sim_hent last = h->v[--h->n];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && sim_heap_less(&h->v[c + 1], &h->v[c]))
            c++;
        if (!sim_heap_less(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

/* Drops the stale entries on top; then the top (if any) is a running segment's end. */
static void sim_heap_clean(struct sim_heap *h)
{
    while (h->n > 0 && sim_heap_stale(h, &h->v[0]))
        sim_heap_pop(h);
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
    size_t nrunning;         /* segments running (the heap may hold stale entries too) */
    uint64_t preemptions;
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
    spec.preemptible = st->config->preemptible;
    if (core_submit(st->core, &spec, job->submit_ms, &st->acts) != 0)
        fatalx("simulate: core refused job %s", job->id);
}

static void sim_record_start(struct sim_state *st, const struct core_action *act, int64_t now)
{
    size_t i = (size_t)(act->task - 1);
    struct sim_record *r = &st->rec[i];
    const struct core_placement *pl = &act->placement;
    if (r->start < 0)
        r->start = now;
    r->seg_start = now;
    r->end = now + r->remaining;
    r->running = true;
    memset(&r->where, 0, sizeof r->where);
    r->where.node = pl->node;
    if (pl->nnodes > 1) {
        r->where.nspan = pl->nnodes;
        r->where.span = xmalloc((size_t)pl->nnodes * sizeof *r->where.span);
        memcpy(r->where.span, pl->nodes, (size_t)pl->nnodes * sizeof *r->where.span);
    } else {
        for (int g = 0; g < pl->ngpus; g++)
            r->where.gpu_mask |= 1ULL << pl->gpu[g];
    }
    st->nrunning++;
    sim_heap_push(&st->running, i);
}

/* core asked to preempt job i now: its segment ends, and the work it loses (the preemption
 * cost) is added to what is left. core hears of the exit at once (a checkpoint is instant in
 * the simulation; its cost is the lost work). */
static void sim_preempt(struct sim_state *st, size_t i, int64_t now)
{
    struct sim_record *r = &st->rec[i];
    if (!r->running)
        return;
    r->segs = xrealloc(r->segs, (r->nsegs + 1) * sizeof *r->segs);
    r->segs[r->nsegs++] = (struct sim_segment){.start = r->seg_start, .end = now,
                                               .where = r->where};
    memset(&r->where, 0, sizeof r->where);
    r->remaining = r->end - now + st->config->preempt_cost_ms;
    r->running = false;
    r->gen++;
    st->nrunning--;
    st->preemptions++;
}

/* One instant: the jobs that end now, those that arrive now, then one scheduling pass. */
static void sim_step(struct sim_state *st, int64_t now, size_t *next)
{
    const struct sim_trace *trace = st->config->trace;
    if (st->waiting) {
        double dt = (double)(now - st->last_step) / 1000;
        st->contended += dt;
        st->running_contended += dt * (double)st->nrunning;
    }
    double t0 = sim_cpu_seconds();
    core_actions_clear(&st->acts);
    for (sim_heap_clean(&st->running);
         st->running.n > 0 && st->running.v[0].end <= now; sim_heap_clean(&st->running)) {
        size_t i = sim_heap_pop(&st->running);
        st->rec[i].running = false;
        st->nrunning--;
        if (core_attempt_exited(st->core, (int64_t)i + 1, CORE_OUTCOME_SUCCESS, now, &st->acts))
            fatalx("simulate: core lost job %s", trace->jobs[i].id);
    }
    for (; *next < trace->n && trace->jobs[*next].submit_ms <= now; (*next)++)
        if (!st->unfit[*next])
            sim_submit(st, *next);
    /* A pass; with preemptions, the victims exit at once and another pass fills the room. */
    for (;;) {
        core_actions_clear(&st->acts);
        core_schedule(st->core, now, &st->acts);
        st->passes++;
        size_t npreempt = 0;
        for (size_t k = 0; k < st->acts.n; k++) {
            if (st->acts.v[k].type == CORE_ACT_START) {
                sim_record_start(st, &st->acts.v[k], now);
            } else if (st->acts.v[k].type == CORE_ACT_PREEMPT) {
                sim_preempt(st, (size_t)(st->acts.v[k].task - 1), now);
                npreempt++;
            }
        }
        if (npreempt == 0)
            break;
        struct core_actions acts = st->acts;
        st->acts = (struct core_actions){0};
        for (size_t k = 0; k < acts.n; k++)
            if (acts.v[k].type == CORE_ACT_PREEMPT &&
                core_attempt_exited(st->core, acts.v[k].task, CORE_OUTCOME_PREEMPTED, now,
                                    &st->acts) != 0)
                fatalx("simulate: core lost job %s", trace->jobs[acts.v[k].task - 1].id);
        core_actions_free(&acts);
    }
    st->core_cpu += sim_cpu_seconds() - t0;
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
        /* Time not running (and, with preemption, the work lost): start - submit without. */
        wait[n] = (double)(r->end - job->submit_ms - job->duration_ms) / 1000;
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
        double wait = (double)(r->end - job->submit_ms - job->duration_ms) / 1000;
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

static int sim_cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static void sim_preempt_statistics(const struct sim_state *st, struct sim_result *result)
{
    const struct sim_trace *trace = st->config->trace;
    size_t *v = xmalloc((trace->n + 1) * sizeof *v), n = 0, sum = 0;
    for (size_t i = 0; i < trace->n; i++)
        if (!st->unfit[i]) {
            v[n++] = st->rec[i].nsegs;
            sum += st->rec[i].nsegs;
        }
    qsort(v, n, sizeof *v, sim_cmp_size);
    result->preempt_enabled = st->config->policy.las;
    result->preemptions = sum;
    result->preempt_mean = n > 0 ? (double)sum / (double)n : 0;
    result->preempt_p50 = n > 0 ? (double)v[(n - 1) / 2] : 0;
    if (n > 0 && n % 2 == 0)
        result->preempt_p50 = ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
    result->preempt_max = n > 0 ? v[n - 1] : 0;
    free(v);
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

/* One row: job_id,submit,start,end,node,gpus. */
static void sim_write_row(FILE *fp, const struct sim_config *config, const struct sim_job *job,
                          int64_t start, int64_t end, const struct sim_where *w)
{
    fprintf(fp, "%s,", job->id);
    sim_print_seconds(fp, job->submit_ms);
    fputc(',', fp);
    sim_print_seconds(fp, start);
    fputc(',', fp);
    sim_print_seconds(fp, end);
    fputc(',', fp);
    if (w->nspan > 1) {
        /* Whole nodes: every GPU of each. */
        for (int k = 0; k < w->nspan; k++) {
            if (k > 0)
                fputc(';', fp);
            sim_print_node(fp, config, w->span[k]);
        }
        fputc(',', fp);
        for (int g = 0; g < config->nodes[w->span[0]].ngpus; g++)
            fprintf(fp, "%s%d", g > 0 ? ";" : "", g);
        fputc('\n', fp);
        return;
    }
    sim_print_node(fp, config, w->node);
    fputc(',', fp);
    bool shared = job->gpus > 0 && job->gpu_milli < 1000 && !config->whole_gpus;
    int printed = 0;
    for (int g = 0; g < CORE_MAX_NODE_GPUS; g++) {
        if (!(w->gpu_mask >> g & 1))
            continue;
        fprintf(fp, "%s%d", printed++ > 0 ? ";" : "", g);
        if (shared)
            fprintf(fp, "@%g", job->gpu_milli / 1000.0);
    }
    fputc('\n', fp);
}

/* One row per run segment: a job never preempted has one; a preempted one a row for each
 * segment, in order (each ended by a preemption, the last by the job's end). */
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
        for (size_t k = 0; k < r->nsegs; k++)
            sim_write_row(fp, config, job, r->segs[k].start, r->segs[k].end, &r->segs[k].where);
        sim_write_row(fp, config, job, r->nsegs > 0 ? r->seg_start : r->start, r->end,
                      &r->where);
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
    for (size_t i = 0; i < trace->n; i++) {
        st.rec[i].start = -1;
        st.rec[i].remaining = trace->jobs[i].duration_ms;
    }
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
        sim_heap_clean(&st.running);
        if (st.running.n > 0 && st.running.v[0].end < now)
            now = st.running.v[0].end;
        /* las acts by the clock too (a threshold reached, a promotion due). */
        core_time wake = config->policy.las ? core_next_wakeup(st.core) : CORE_TIME_NEVER;
        if (wake > st.last_step && wake < now && (st.nrunning > 0 || next < trace->n))
            now = wake;
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
    sim_preempt_statistics(&st, result);
    rc = config->schedule_out != NULL ? sim_write_schedule(&st, err) : 0;
out:
    for (size_t i = 0; i < trace->n; i++) {
        free(st.rec[i].where.span);
        for (size_t k = 0; k < st.rec[i].nsegs; k++)
            free(st.rec[i].segs[k].where.span);
        free(st.rec[i].segs);
    }
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
