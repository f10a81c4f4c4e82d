/* One checked task request into a task record, for submit and experiments alike
 * (daemon/request.h). */
#include "daemon/request.h"
#include "core/learn.h"
#include "util/parse.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(REQUEST_MAX_BACKOFF <= CORE_MAX_BACKOFF, "backoff values fit core's");
_Static_assert(REQUEST_MAX_GPUS <= CORE_MAX_NODE_GPUS, "a request fits one node");

/* req[key], checked: a whole number, or absent (0). */
static long long request_int(json_t *req, const char *key)
{
    return json_integer_value(json_object_get(req, key));
}

static bool request_given(json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);
    return v != NULL && !json_is_null(v);
}

/* The mask of GPU types whose name contains pattern, in any case; 0 if none. */
static uint64_t request_gpu_types(const struct daemon *d, const char *pattern)
{
    uint64_t mask = 0;
    for (int t = 0; t < d->ngpu_types && t < CORE_MAX_GPU_TYPES; t++)
        if (strcasestr(d->gpu_type_names[t], pattern) != NULL)
            mask |= 1ULL << t;
    return mask;
}

/* "no GPU here matches gpu_type 'h100'; the GPUs here are: NVIDIA A100-SXM4-80GB, …", each
 * name once. (malloc'd) */
static char *request_no_gpu_type(const struct daemon *d, const char *pattern)
{
    char *text;
    size_t len;
    FILE *fp = open_memstream(&text, &len);
    if (fp == NULL)
        fatalx("out of memory");
    fprintf(fp, "no GPU here matches gpu_type '%s'; ", pattern);
    fputs(d->ngpu_types == 0 ? "this machine has no GPUs" : "the GPUs here are: ", fp);
    for (int t = 0; t < d->ngpu_types; t++)
        fprintf(fp, "%s%s", t ? ", " : "", d->gpu_type_names[t]);
    fclose(fp);
    return text;
}

/* The profile a task's GPU use is learned under (profile, else its command line), and its
 * claim: declared (gpu_mem), whole GPUs (exclusive, or nothing learned yet), or learned — the
 * peak of the profile's recent successful attempts plus the claim margin, if that fits the
 * smallest GPU the task may get. */
static void request_claim(struct daemon *d, json_t *task, const char *gpu_type,
                          struct task_record *rec)
{
    struct core_request *r = &rec->spec.req;
    json_t *profile = json_object_get(task, "profile");
    rec->profile = json_is_string(profile)
                       ? xstrdup(json_string_value(profile))
                       : json_dumps(json_object_get(task, "command"), JSON_COMPACT);
    if (rec->profile == NULL)
        fatalx("out of memory");
    if (r->gpus == 0)
        return;
    if (r->gpu_mem > 0) {
        rec->claim_source = "declared";
        return;
    }
    if (json_is_true(json_object_get(task, "exclusive")))
        return;
    uint64_t peak = store_profile_peak(d->store, rec->profile), smallest = UINT64_MAX;
    for (int g = 0; g < d->gpus.count; g++)
        if (d->gpus.gpu[g].mem_total < smallest &&
            (gpu_type == NULL || strcasestr(d->gpus.gpu[g].name, gpu_type) != NULL))
            smallest = d->gpus.gpu[g].mem_total;
    r->gpu_mem = learn_claim(peak, d->cfg.claim_margin, smallest);
    if (r->gpu_mem > 0)
        rec->claim_source = "learned";
}

/* A task for Slurm: what the mapping cannot express, or Slurm being away, refuses it; nothing
 * of this machine's (GPU names, learned claims) applies. */
static char *request_slurm(struct daemon *d, json_t *task, struct task_record *rec)
{
    char why[512];
    char *refused = slurm_refusal(d);
    if (refused != NULL)
        return refused;
    if (slurm_check_request(d, task, why, sizeof why) < 0)
        return xstrdup(why);
    rec->spec.backend = CORE_BACKEND_SLURM;
    rec->spec.req.gpu_types = 0;
    rec->claim_source = rec->spec.req.gpu_mem > 0 ? "declared" : NULL;
    return NULL;
}

/* What the task asks of the machine, and where it runs (core_choose_backend). NULL, or the
 * reason (malloc'd) and *field, the key at fault (NULL: the request as a whole). */
static char *request_resources(struct daemon *d, json_t *task, struct task_record *rec,
                               const char **field)
{
    struct core_request *r = &rec->spec.req;
    const char *gpu_type = json_string_value(json_object_get(task, "gpu_type"));
    const char *on = json_string_value(json_object_get(task, "on"));
    char why[CORE_WHY_MAX];
    enum core_backend backend;
    *r = (struct core_request){.gpus = (int)request_int(task, "gpus"),
                               .gpu_mem = (uint64_t)request_int(task, "gpu_mem"),
                               .cpus = (int)request_int(task, "cpus"),
                               .mem = (uint64_t)request_int(task, "mem"),
                               .time_limit = request_int(task, "timeout_ms")};
    *field = NULL;
    if ((r->gpu_mem > 0 || gpu_type != NULL) && r->gpus == 0)
        r->gpus = 1; /* a claim or a type alone asks for one GPU */
    json_t *profile = json_object_get(task, "profile");
    if (on != NULL && strcmp(on, "slurm") == 0) {
        rec->profile = json_is_string(profile) ? xstrdup(json_string_value(profile))
                                               : json_dumps(json_object_get(task, "command"),
                                                            JSON_COMPACT);
        *field = "on";
        return request_slurm(d, task, rec);
    }
    if (gpu_type != NULL && (r->gpu_types = request_gpu_types(d, gpu_type)) == 0) {
        /* No GPU here of that type: unfit, which spill = unfit sends to Slurm. */
        r->gpu_types = 1ULL << (CORE_MAX_GPU_TYPES - 1);
        if (core_choose_backend(d->core, r, CORE_BACKEND_LOCAL, &backend, why, sizeof why) == 0 &&
            backend == CORE_BACKEND_SLURM) {
            rec->profile = json_dumps(json_object_get(task, "command"), JSON_COMPACT);
            return request_slurm(d, task, rec);
        }
        *field = "gpu_type";
        return request_no_gpu_type(d, gpu_type);
    }
    request_claim(d, task, gpu_type, rec);
    if (core_choose_backend(d->core, r, CORE_BACKEND_LOCAL, &backend, why, sizeof why) < 0)
        return xstrdup(why);
    if (backend == CORE_BACKEND_SLURM) /* spill = unfit */
        return request_slurm(d, task, rec);
    return NULL;
}

static void request_retries(struct daemon *d, json_t *task, int default_retries,
                            struct core_task_spec *sp)
{
    json_t *backoff = json_object_get(task, "backoff"), *e;
    size_t i;
    sp->max_retries = request_given(task, "retries") ? (int)request_int(task, "retries")
                                                     : default_retries;
    if (json_array_size(backoff) == 0) {
        sp->nbackoff = d->cfg.ndefault_backoff;
        memcpy(sp->backoff, d->cfg.default_backoff, sizeof sp->backoff);
        return;
    }
    json_array_foreach(backoff, i, e)
        sp->backoff[sp->nbackoff++] = json_integer_value(e);
}

/* --preemptible[=GRACE] and --preempt-signal (checked already: request_check_*). */
static void request_preemption(json_t *task, struct task_record *rec)
{
    json_t *grace = json_object_get(task, "preemptible");
    json_t *sig = json_object_get(task, "preempt_signal");
    const char *why;
    rec->preempt_grace_ms = json_is_true(grace)      ? REQUEST_PREEMPT_GRACE_MS
                            : json_is_integer(grace) ? json_integer_value(grace)
                                                     : 0;
    rec->spec.preemptible = rec->preempt_grace_ms > 0;
    if (json_is_integer(sig))
        rec->preempt_signal = (int)json_integer_value(sig);
    else if (!json_is_string(sig) || parse_signal(json_string_value(sig), &rec->preempt_signal,
                                                  &why) < 0)
        rec->preempt_signal = 0;
}

/* The environment the task is started with: base_env, then its own env. (a new reference) */
static json_t *request_env(json_t *task, json_t *base_env)
{
    json_t *env = json_object_get(task, "env");
    if (base_env == NULL)
        return json_is_object(env) ? json_incref(env) : json_object();
    json_t *merged = json_copy(base_env);
    if (json_is_object(env))
        json_object_update(merged, env);
    return merged;
}

json_t *daemon_request_decode(struct daemon *d, json_t *task, json_t *base_env,
                              const char *workdir, int default_retries, struct task_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->name = json_string_value(json_object_get(task, "name"));
    rec->key = json_string_value(json_object_get(task, "key"));
    rec->workdir = workdir ? workdir : json_string_value(json_object_get(task, "workdir"));
    rec->command = json_object_get(task, "command");
    rec->array_index = -1;
    rec->stall_ms = request_int(task, "stall_ms");
    rec->gpu_type = json_string_value(json_object_get(task, "gpu_type"));
    rec->notify = json_string_value(json_object_get(task, "notify"));
    rec->spec.priority = (int)request_int(task, "priority");
    rec->spec.hold = json_is_true(json_object_get(task, "hold"));
    request_preemption(task, rec);
    rec->spec.begin = request_int(task, "begin_ms");
    rec->spec.off_peak = json_is_true(json_object_get(task, "off_peak"));
    request_retries(d, task, default_retries, &rec->spec);
    const char *field;
    char *why = request_resources(d, task, rec, &field);
    if (why != NULL) {
        json_t *reply = rec->name ? reply_error(2, "task %s: %s", rec->name, why)
                                  : reply_error(2, "%s", why);
        if (field != NULL)
            json_object_set_new(reply, "field", json_string(field));
        free(why);
        daemon_request_release(rec);
        return reply;
    }
    rec->env = request_env(task, base_env);
    return NULL;
}

uint64_t daemon_request_restored_types(const struct daemon *d, int64_t id, const char *pattern)
{
    if (pattern == NULL)
        return 0;
    uint64_t mask = request_gpu_types(d, pattern);
    if (mask != 0)
        return mask;
    fprintf(stderr, "drover daemon: task %lld asks for gpu_type '%s', which no GPU here matches"
                    " now; it waits until one does\n", (long long)id, pattern);
    return 1ULL << (CORE_MAX_GPU_TYPES - 1); /* a type no GPU of this machine has */
}

void daemon_request_user_limits(struct daemon *d, uid_t uid)
{
    if (d->cfg.noverrides == 0)
        return; /* every user has the settings' limits, core's default: no lookup per submit */
    struct passwd pw, *found = NULL;
    char buf[4096];
    bool known = getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != NULL;
    struct core_limits limits = config_user_limits(&d->cfg, known ? pw.pw_name : NULL,
                                                   known ? pw.pw_gid : 0);
    core_set_user_limits(d->core, (uint32_t)uid, &limits);
}

static void request_usage(void *arg, uint32_t uid, double gpu_seconds, core_time end)
{
    core_add_usage(arg, uid, gpu_seconds, end);
}

void daemon_request_restore_usage(struct daemon *d)
{
    int64_t half = d->cfg.fair_share_half_life_ms;
    /* After eight half-lives what is left is under 0.4 %: older attempts are not read. */
    core_time since = half > 0 && half < INT64_MAX / 16 ? daemon_now() - 8 * half : 0;
    if (store_each_usage(d->store, since, request_usage, d->core) < 0)
        fprintf(stderr, "drover daemon: cannot read past GPU usage: %s (fair share starts from"
                        " nothing)\n", store_error(d->store));
}

void daemon_request_release(struct task_record *rec)
{
    json_decref(rec->env);
    free((char *)rec->profile); /* decode's own copy: the record's field is const for the store */
    rec->env = NULL;
    rec->profile = NULL;
}
