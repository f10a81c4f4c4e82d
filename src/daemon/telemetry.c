/* GPU telemetry and what follows from it: every `sample` period the GPUs are read through NVML
 * (gpu/nvml.c), each running attempt's GPU memory is found in the GPUs' process lists (by its
 * session, which is its process group: the supervisor starts the task with setsid), core learns
 * what it cannot see itself (memory used outside its claims, the utilisation rule, GPUs out of
 * service), stalled attempts and attempts on a failed GPU are stopped, and the series is kept in
 * the store (raw for an hour, one-minute means for 30 days; flushed once a minute, so a crash
 * loses at most a minute of telemetry and the task path never waits on it). It also starts
 * Prometheus /metrics (http.c) when asked to. */
#include "daemon/daemon.h"
#include "core/learn.h"
#include "exec/exec.h"
#include "gpu/nvml.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Scheduling latency buckets (seconds, upper bounds). */
static const double tel_latency_le[] = {1, 5, 30, 60, 300, 1800, 3600, 21600, 86400};
#define TEL_NLAT (sizeof tel_latency_le / sizeof tel_latency_le[0])
/* Memory used outside the claims below this share of a GPU is the driver's own (reserved
 * memory, a display server): ignored. */
#define TEL_OUTSIDE_SLACK 50

struct tel_gpu {
    struct gpu_sample s;
    bool have;                 /* sampled at least once */
    bool busy, offline;
    char offline_reason[64];
    uint64_t ecc;              /* last known uncorrected ECC count */
    bool ecc_known;
    int64_t proc_task[NVML_MAX_PROCS]; /* the drover task each process belongs to, or 0 */
    uint64_t outside;
};

struct telemetry {
    struct event *timer;
    struct event *stall_timer; /* one-shot, at the earliest stall deadline (stall_due) */
    core_time stall_due;       /* CORE_TIME_NEVER: not armed */
    bool nvml;                 /* sampling: NVML, or nvidia-smi without it */
    core_time sampled_at;
    core_time next_health;
    struct tel_gpu gpu[GPU_MAX];
    struct gpu_row *rows;
    size_t nrows, rows_cap;
    int64_t minute;            /* the minute of the buffered rows */
    uint64_t lat_count[TEL_NLAT];
    uint64_t lat_total;
    double lat_sum;
};

/* ---- processes and logs -------------------------------------------------------------------- */

/* The session of pid, from /proc/PID/stat, or 0. */
static pid_t tel_session(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "pid (comm) state ppid pgrp session …": comm may hold anything, so parse after the last ')'. */
    char *p = strrchr(buf, ')');
    char state;
    int ppid, pgrp, session;
    if (p == NULL || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4)
        return 0;
    return (pid_t)session;
}

/* When the task last wrote output: the later of its logs' modification times, in ms, or 0.
 * Exact to the write, whatever the sample period; on a full disk the supervisor drops the
 * output but still moves the log's time on (exec/relay.c). */
static core_time tel_log_mtime(const char *run_dir)
{
    static const char *const names[] = {"stdout", "stderr"};
    core_time latest = 0;
    for (int i = 0; i < 2; i++) {
        char *path = xasprintf("%s/%s", run_dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0) {
            core_time t = (core_time)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
            latest = t > latest ? t : latest;
        }
        free(path);
    }
    return latest;
}

/* The last `len` bytes of run_dir/name, NUL-terminated (malloc'd), or NULL. */
static char *tel_tail(const char *run_dir, const char *name, size_t len)
{
    char *path = xasprintf("%s/%s", run_dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0) {
        off_t from = st.st_size > (off_t)len ? st.st_size - (off_t)len : 0;
        buf = xmalloc(len + 1);
        ssize_t n = pread(fd, buf, len, from);
        buf[n > 0 ? n : 0] = '\0';
        /* NUL bytes in the log would hide what follows them from strstr. */
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
    }
    close(fd);
    return buf;
}

bool telemetry_oom(const char *run_dir)
{
    static const char *const signs[] = {
        "CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
        "CUDNN_STATUS_ALLOC_FAILED", "torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError",
        "cudaErrorMemoryAllocation", "RESOURCE_EXHAUSTED: Out of memory",
        "out of memory trying to allocate", "XlaRuntimeError: RESOURCE_EXHAUSTED",
    };
    static const char *const names[] = {"stderr", "stdout"};
    bool found = false;
    for (int f = 0; f < 2 && !found; f++) {
        char *tail = tel_tail(run_dir, names[f], 64 * 1024);
        for (size_t i = 0; tail != NULL && i < sizeof signs / sizeof signs[0] && !found; i++)
            found = strstr(tail, signs[i]) != NULL;
        free(tail);
    }
    return found;
}

/* ---- sampling ------------------------------------------------------------------------------ */

static bool tel_run_on(const struct run *r, int gpu, int *slot)
{
    for (int i = 0; i < r->placement.ngpus; i++)
        if (r->placement.gpu[i] == gpu) {
            *slot = i;
            return true;
        }
    return false;
}

/* Stops every attempt on GPU g: it is queued again when its supervisor reports (finish()). */
static void tel_fault(struct daemon *d, int g, const char *why)
{
    struct tel_gpu *tg = &d->tel->gpu[g];
    if (tg->offline)
        return;
    tg->offline = true;
    snprintf(tg->offline_reason, sizeof tg->offline_reason, "%s", why);
    fprintf(stderr, "drover daemon: GPU %d (%s) taken out of service: %s\n", g,
            d->gpus.gpu[g].uuid, why);
    int slot;
    for (struct run *r = d->runs; r; r = r->next)
        if (tel_run_on(r, g, &slot) && !r->gpu_fault) {
            r->gpu_fault = true;
            snprintf(r->fault, sizeof r->fault, "GPU %d failed (%s)", g, why);
            exec_cancel(r->run_dir);
        }
}

/* One GPU's new sample: faults, the utilisation rule with its hysteresis. */
static void tel_gpu(struct daemon *d, int g, const struct gpu_sample *s)
{
    struct tel_gpu *tg = &d->tel->gpu[g];
    tg->s = *s;
    tg->have = true;
    char why[64];
    if (!s->ok) {
        tel_fault(d, g, "not answering");
        return;
    }
    if (s->xid != 0) {
        snprintf(why, sizeof why, "XID %llu", s->xid);
        tel_fault(d, g, why);
    }
    if (s->ecc_uncorrected != NVML_UNKNOWN_U64) {
        if (tg->ecc_known && s->ecc_uncorrected > tg->ecc) {
            snprintf(why, sizeof why, "%llu uncorrected ECC errors",
                     (unsigned long long)(s->ecc_uncorrected - tg->ecc));
            tel_fault(d, g, why);
        }
        tg->ecc = s->ecc_uncorrected;
        tg->ecc_known = true;
    }
    tg->busy = learn_busy(tg->busy, s->util, d->cfg.busy_high, d->cfg.busy_low);
}

/* Matches the GPUs' processes to attempts; updates each attempt's use, peak and utilisation. */
static void tel_runs(struct daemon *d)
{
    struct telemetry *t = d->tel;
    for (struct run *r = d->runs; r; r = r->next) {
        if (r->pgid == 0 && !r->slurm)
            r->pgid = exec_task_pgid(r->run_dir);
        memset(r->use, 0, sizeof r->use);
        r->use_known = false;
    }
    for (int g = 0; g < d->gpus.count; g++) {
        struct tel_gpu *tg = &t->gpu[g];
        for (int k = 0; k < tg->s.nprocs; k++) {
            tg->proc_task[k] = 0;
            pid_t session = tel_session((pid_t)tg->s.procs[k].pid);
            int slot;
            for (struct run *r = d->runs; r && session > 0; r = r->next)
                if (r->pgid == session && tel_run_on(r, g, &slot)) {
                    tg->proc_task[k] = r->task;
                    if (tg->s.procs[k].mem != NVML_UNKNOWN_U64) {
                        r->use[slot] += tg->s.procs[k].mem;
                        r->use_known = true;
                    }
                    break;
                }
        }
    }
    for (struct run *r = d->runs; r; r = r->next) {
        int known = 0, sum = 0;
        for (int i = 0; i < r->placement.ngpus; i++) {
            if (r->use[i] > r->peak)
                r->peak = r->use[i];
            const struct gpu_sample *s = &t->gpu[r->placement.gpu[i]].s;
            if (t->gpu[r->placement.gpu[i]].have && s->ok && s->util >= 0) {
                sum += s->util;
                known++;
            }
        }
        /* A GPU busy at the last sample counts as busy until a sample says otherwise: the
         * sample that finds it idle is when its idle time starts (tel_stalls). */
        if (r->util_now > 0 || (known > 0 && sum > 0))
            r->last_activity = t->sampled_at;
        r->util_now = known > 0 ? sum / known : -1;
        if (known > 0) {
            r->util_sum += (double)sum / known;
            r->util_n++;
        }
    }
}

/* What core should know of each GPU: memory in use that no claim covers. A task's claim covers
 * its use up to the claim (a whole GPU for an exclusive one); the rest, and every other
 * process, is outside. */
static void tel_core_state(struct daemon *d)
{
    struct telemetry *t = d->tel;
    for (int g = 0; g < d->gpus.count; g++) {
        struct tel_gpu *tg = &t->gpu[g];
        uint64_t total = d->gpus.gpu[g].mem_total, covered = 0, used = 0;
        int slot;
        if (tg->have && tg->s.ok && tg->s.mem_used != NVML_UNKNOWN_U64)
            used = tg->s.mem_used;
        for (struct run *r = d->runs; r; r = r->next)
            if (tel_run_on(r, g, &slot)) {
                uint64_t claim = r->placement.gpu_mem ? r->placement.gpu_mem : total;
                covered += r->use[slot] < claim ? r->use[slot] : claim;
            }
        uint64_t outside = used > covered ? used - covered : 0;
        tg->outside = outside > total / TEL_OUTSIDE_SLACK ? outside : 0;
        struct core_gpu_state st = {.outside = tg->outside, .busy = tg->busy,
                                    .offline = tg->offline,
                                    .util = tg->have && tg->s.ok && tg->s.util > 0 ? tg->s.util : 0};
        core_set_gpu_state(d->core, 0, g, &st);
    }
}

/* When an attempt idle since `last` reaches its --stall of ms. */
static core_time tel_stall_due(core_time last, int64_t ms)
{
    return ms > CORE_TIME_NEVER - last ? CORE_TIME_NEVER : last + ms;
}

static void tel_stall_arm(struct daemon *d, core_time due, core_time now)
{
    struct telemetry *t = d->tel;
    if (t == NULL || due >= t->stall_due)
        return;
    t->stall_due = due;
    int64_t wait = due > now ? due - now : 0;
    struct timeval tv = {wait / 1000, (wait % 1000) * 1000};
    event_add(t->stall_timer, &tv);
}

/* Attempts with --stall: no output and idle GPUs (or no GPUs) for that long are stopped. Each
 * attempt's deadline is its last activity plus its --stall: output is seen to the millisecond
 * (the logs' times), GPU activity at the sample period (a GPU busy at a sample counts as busy
 * until the next sample finds it idle). Called by a timer at the earliest deadline and at each
 * sample, so an attempt is stopped when its deadline passes, not at the next sample; its
 * reason states the idle time actually seen (adopt.c). */
static void tel_stalls(struct daemon *d, core_time now)
{
    core_time next = CORE_TIME_NEVER;
    for (struct run *r = d->runs; r; r = r->next) {
        if (r->stall_ms <= 0 || r->stalled || r->gpu_fault)
            continue;
        core_time wrote = tel_log_mtime(r->run_dir);
        if (wrote > r->last_activity)
            r->last_activity = wrote < now ? wrote : now;
        if (r->util_now > 0)
            r->last_activity = now;
        core_time due = tel_stall_due(r->last_activity, r->stall_ms);
        if (now < due) {
            next = due < next ? due : next;
            continue;
        }
        r->stalled = true;
        r->stalled_ms = now - r->last_activity;
        fprintf(stderr, "drover daemon: task %lld attempt %d stalled (idle %lld ms); stopping"
                " it\n", (long long)r->task, r->attempt, (long long)r->stalled_ms);
        exec_cancel(r->run_dir);
    }
    if (d->tel != NULL) {
        d->tel->stall_due = CORE_TIME_NEVER;
        event_del(d->tel->stall_timer);
        tel_stall_arm(d, next, now);
    }
}

static void tel_stall_tick(evutil_socket_t fd, short what, void *arg)
{
    tel_stalls(arg, daemon_now());
}

static void tel_buffer(struct daemon *d, core_time now)
{
    struct telemetry *t = d->tel;
    for (int g = 0; g < d->gpus.count; g++) {
        const struct gpu_sample *s = &t->gpu[g].s;
        if (!s->ok)
            continue;
        xgrow((void **)&t->rows, &t->rows_cap, t->nrows + 1, sizeof *t->rows);
        t->rows[t->nrows++] = (struct gpu_row){
            .ts = now, .gpu = d->gpus.gpu[g].index, .util = s->util,
            .mem_used = s->mem_used == NVML_UNKNOWN_U64 ? -1 : (int64_t)s->mem_used,
            .temp = s->temp_c, .power_mw = s->power_mw};
    }
}

static void tel_flush(struct daemon *d, core_time now)
{
    struct telemetry *t = d->tel;
    if (store_telemetry_flush(d->store, t->rows, t->nrows, now) < 0)
        fprintf(stderr, "drover daemon: cannot store telemetry: %s\n", store_error(d->store));
    t->nrows = 0;
}

static void tel_tick(evutil_socket_t fd, short what, void *arg)
{
    struct daemon *d = arg;
    struct telemetry *t = d->tel;
    core_time now = daemon_now();
    if (t->nvml) {
        static struct gpu_sample smi[GPU_MAX];
        bool from_smi = strcmp(d->gpus.source, "nvidia-smi") == 0;
        if (from_smi)
            gpu_smi_sample(&d->gpus, smi);
        for (int g = 0; g < d->gpus.count; g++) {
            struct gpu_sample s;
            if (from_smi)
                s = smi[g];
            else
                nvml_sample(d->gpus.gpu[g].index, &s);
            tel_gpu(d, g, &s);
        }
        t->sampled_at = now;
        tel_runs(d);
        tel_core_state(d);
        size_t first = t->nrows;
        tel_buffer(d, now);
        events_gpu(d, t->rows + first, t->nrows - first, now); /* /api/v1/events */
        if (now / 60000 != t->minute) {
            tel_flush(d, now);
            t->minute = now / 60000;
        }
        daemon_kick(d); /* what core may place has changed */
    }
    tel_stalls(d, now);
    if (now >= t->next_health) {
        t->next_health = now + d->cfg.health_ms;
        /* Supervisors alive: adopted ones are polled, our children report by SIGCHLD; a
         * supervisor that vanished without a word is found here. */
        daemon_poll_adopted(d);
        if (!exec_zygote_running())
            daemon_start_zygote(d);
    }
}

/* ---- the lifecycle ------------------------------------------------------------------------- */

int telemetry_start(struct daemon *d, char **err)
{
    struct telemetry *t = xcalloc(1, sizeof *t);
    d->tel = t;
    t->nvml = (strcmp(d->gpus.source, "nvml") == 0 && nvml_loaded()) ||
              strcmp(d->gpus.source, "nvidia-smi") == 0;
    t->minute = daemon_now() / 60000;
    t->next_health = daemon_now() + d->cfg.health_ms;
    if (d->cfg.http != NULL && http_start(d, err) < 0)
        return -1;
    t->timer = event_new(d->base, -1, EV_PERSIST, tel_tick, d);
    struct timeval every = {d->cfg.sample_ms / 1000, (d->cfg.sample_ms % 1000) * 1000};
    event_add(t->timer, &every);
    t->stall_timer = evtimer_new(d->base, tel_stall_tick, d);
    t->stall_due = CORE_TIME_NEVER;
    tel_stalls(d, daemon_now()); /* attempts adopted before telemetry started */
    return 0;
}

void telemetry_stop(struct daemon *d)
{
    struct telemetry *t = d->tel;
    if (t == NULL)
        return;
    if (t->nrows > 0)
        tel_flush(d, daemon_now());
    if (t->timer)
        event_free(t->timer);
    if (t->stall_timer)
        event_free(t->stall_timer);
    http_stop(d);
    free(t->rows);
    free(t);
    d->tel = NULL;
}

void telemetry_watch(struct daemon *d, struct run *r, int64_t stall_ms)
{
    core_time now = daemon_now();
    r->stall_ms = stall_ms;
    r->last_activity = now;
    r->util_now = -1;
    if (stall_ms > 0)
        tel_stall_arm(d, tel_stall_due(now, stall_ms), now);
}

void telemetry_started(struct daemon *d, core_time ready, core_time now)
{
    struct telemetry *t = d->tel;
    if (t == NULL || ready <= 0)
        return;
    double waited = now > ready ? (double)(now - ready) / 1000 : 0;
    for (size_t i = 0; i < TEL_NLAT; i++)
        if (waited <= tel_latency_le[i])
            t->lat_count[i]++;
    t->lat_total++;
    t->lat_sum += waited;
}

void telemetry_undrain(struct daemon *d)
{
    if (d->tel == NULL)
        return;
    for (int g = 0; g < d->gpus.count; g++) {
        d->tel->gpu[g].offline = false;
        d->tel->gpu[g].offline_reason[0] = '\0';
    }
    tel_core_state(d);
}

/* ---- the snapshot -------------------------------------------------------------------------- */

static json_t *tel_int_or_null(long long v, bool known)
{
    return known ? json_integer(v) : json_null();
}

static json_t *tel_gpu_json(struct daemon *d, int g)
{
    const struct gpu_info *gi = &d->gpus.gpu[g];
    const struct tel_gpu *tg = &d->tel->gpu[g];
    const struct gpu_sample *s = &tg->s;
    bool have = tg->have && s->ok;
    struct core_gpu_usage u;
    core_gpu_usage(d->core, 0, g, &u);
    json_t *tasks = json_array(), *procs = json_array();
    for (struct run *r = d->runs; r; r = r->next)
        for (int i = 0; i < r->placement.ngpus; i++)
            if (r->placement.gpu[i] == g)
                json_array_append_new(tasks, json_integer(r->task));
    for (int k = 0; have && k < s->nprocs; k++)
        json_array_append_new(
            procs, json_pack("{s:i,s:o,s:o}", "pid", (int)s->procs[k].pid, "mem",
                             tel_int_or_null((long long)s->procs[k].mem,
                                             s->procs[k].mem != NVML_UNKNOWN_U64),
                             "task", tel_int_or_null(tg->proc_task[k], tg->proc_task[k] != 0)));
    json_t *power = have && s->power_mw >= 0 ? json_real(s->power_mw / 1000.0) : json_null();
    return json_pack(
        "{s:i,s:s,s:s,s:I,s:I,s:b,s:o,s:o,s:o,s:o,s:o,s:b,s:b,s:o,s:o,s:o}", "index", gi->index,
        "name", gi->name, "uuid", gi->uuid, "mem_total", (json_int_t)gi->mem_total,
        "mem_claimed", (json_int_t)u.mem_claimed, "exclusive", u.exclusive, "mem_used",
        tel_int_or_null((long long)s->mem_used, have && s->mem_used != NVML_UNKNOWN_U64), "util",
        tel_int_or_null(s->util, have && s->util >= 0), "mem_util",
        tel_int_or_null(s->mem_util, have && s->mem_util >= 0), "temp_c",
        tel_int_or_null(s->temp_c, have && s->temp_c >= 0), "power_w", power, "busy", tg->busy,
        "offline", tg->offline, "offline_reason",
        tg->offline ? json_string(tg->offline_reason) : json_null(), "tasks", tasks,
        "processes", procs);
}

static json_t *tel_running_json(struct daemon *d)
{
    json_t *list = json_array();
    for (struct run *r = d->runs; r; r = r->next) {
        json_t *gpus = json_array();
        for (int i = 0; i < r->placement.ngpus; i++)
            json_array_append_new(gpus, json_integer(d->gpus.gpu[r->placement.gpu[i]].index));
        uint64_t use = 0;
        for (int i = 0; i < r->placement.ngpus; i++)
            use = r->use[i] > use ? r->use[i] : use;
        char *name = store_task_name(d->store, r->task);
        json_array_append_new(
            list, json_pack("{s:I,s:o,s:i,s:I,s:o,s:I,s:o,s:o}", "id", (json_int_t)r->task,
                            "name", name ? json_string(name) : json_null(), "attempt",
                            r->attempt, "started", (json_int_t)r->start, "gpus", gpus, "claim",
                            (json_int_t)r->placement.gpu_mem, "gpu_mem",
                            tel_int_or_null((long long)use, r->use_known), "util",
                            tel_int_or_null(r->util_now, r->util_now >= 0)));
        free(name);
    }
    return list;
}

json_t *telemetry_snapshot(struct daemon *d)
{
    struct telemetry *t = d->tel;
    json_t *gpus = json_array();
    for (int g = 0; g < d->gpus.count; g++)
        json_array_append_new(gpus, tel_gpu_json(d, g));
    json_t *counts = store_counts(d->store);
    json_t *buckets = json_array();
    for (size_t i = 0; i < TEL_NLAT; i++)
        json_array_append_new(buckets, json_pack("[f,I]", tel_latency_le[i],
                                                 (json_int_t)t->lat_count[i]));
    size_t live[TASK_NSTATES];
    core_count_states(d->core, live);
    json_t *snap = json_pack(
        "{s:b,s:I,s:s,s:I,s:o,s:i,s:I,s:b,s:o,s:O,s:I,s:o,s:o,s:O,s:{s:o,s:f,s:I}}", "ok", 1,
        "now", (json_int_t)daemon_now(), "source", d->gpus.source, "sample_interval_ms",
        (json_int_t)(t->nvml ? d->cfg.sample_ms : 0), "sampled_at",
        tel_int_or_null(t->sampled_at, t->sampled_at > 0), "cpus", d->cpus, "mem",
        (json_int_t)d->mem, "draining", core_draining(d->core), "gpus", gpus, "states",
        json_object_get(counts, "states"), "queue_length", (json_int_t)live[TASK_QUEUED],
        "running", tel_running_json(d), "queued", store_queued_brief(d->store, 50), "attempts",
        json_object_get(counts, "attempts"), "latency", "buckets", buckets, "sum", t->lat_sum,
        "count", (json_int_t)t->lat_total);
    json_decref(counts);
    json_object_set_new(snap, "store_commits", json_integer((json_int_t)store_commits(d->store)));
    json_object_set_new(snap, "policy", json_string(d->cfg.las ? "las" : "drover"));
    json_object_set_new(snap, "preemptions", json_integer((json_int_t)d->preemptions));
    json_object_set_new(snap, "amqp", amqp_status(d));
    slurm_gpus_json(d, snap);
    return snap;
}
