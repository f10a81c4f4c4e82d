/* Handing attempts to Slurm: the batch script in shared-dir, and sbatch run in the background
 * (docs/SLURM.md).
 *
 * core's START of a Slurm task makes a run that waits to be submitted; at the end of the batch
 * of actions (runner.c: carry_out) every waiting run is submitted — each alone, except the first
 * attempts of one array's elements started together, which become one Slurm array job
 * (--array=INDICES%K, Slurm keeping the parallel limit). A run whose dependencies are Slurm jobs
 * (core handed it over behind them) waits until each has its job id, then follows them with
 * --dependency=afterok/afterany.
 *
 * An array's elements each have their own run directory (runs/TASK/1) and their own batch
 * script there, as single tasks do; the array's script only picks the element's:
 * arrays/ARRAY.FIRST/INDEX is a link to the element's run directory, --output and --error name
 * arrays/ARRAY.FIRST/%a/stdout and stderr, and the array's job.sh execs INDEX/job.sh. */
#include "daemon/slurm-internal.h"
#include "util/paths.h"
#include "util/slurm-script.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- what a submission is made of ------------------------------------------------------------ */

/* The attempt's environment in the batch script: the request's, without what would point the
 * task at another machine's GPUs or Slurm job, then drover's own (docs/SLURM.md). */
static char **submit_env(struct daemon *d, json_t *info, int64_t task, int attempt)
{
    json_t *env = json_object_get(info, "env"), *val;
    const char *k;
    char **v = xcalloc(json_object_size(env) + 8, sizeof *v);
    size_t i = 0;
    json_object_foreach(env, k, val) {
        if (!json_is_string(val) || strncmp(k, "SLURM_", 6) == 0 ||
            strncmp(k, "SBATCH_", 7) == 0 || strncmp(k, "DROVER_", 7) == 0 ||
            strcmp(k, "CUDA_VISIBLE_DEVICES") == 0 || strcmp(k, "GPU_DEVICE_ORDINAL") == 0 ||
            strcmp(k, "ROCR_VISIBLE_DEVICES") == 0)
            continue;
        v[i++] = xasprintf("%s=%s", k, json_string_value(val));
    }
    const char *shared = d->cfg.shared_dir;
    v[i++] = xasprintf("DROVER_TASK_ID=%lld", (long long)task);
    v[i++] = xasprintf("DROVER_ATTEMPT=%d", attempt);
    v[i++] = xasprintf("DROVER_CHECKPOINT_DIR=%s/checkpoints/%lld", shared, (long long)task);
    v[i++] = xasprintf("DROVER_METRICS_FILE=%s/metrics/%lld.jsonl", shared, (long long)task);
    json_int_t index = json_integer_value(json_object_get(info, "array_index"));
    if (index >= 0)
        v[i++] = xasprintf("DROVER_ARRAY_INDEX=%lld", (long long)index);
    return v;
}

static void submit_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The attempt's directories in shared-dir, its owner's when it is not the daemon's user. */
static int submit_dirs(struct daemon *d, int64_t task, const char *run_dir, bool owned, uid_t uid,
                       char **err)
{
    char *ckpt = xasprintf("%s/checkpoints/%lld", d->cfg.shared_dir, (long long)task);
    char *metrics = xasprintf("%s/metrics", d->cfg.shared_dir);
    const char *dirs[] = {run_dir, ckpt, metrics};
    int rc = 0;
    for (size_t i = 0; i < 3 && rc == 0; i++) {
        if (paths_mkdir_p(dirs[i]) < 0) {
            *err = xasprintf("cannot create %s: %s", dirs[i], strerror(errno));
            rc = -1;
        }
    }
    if (rc == 0 && owned) {
        /* Only root makes entries in runs/, checkpoints/ and metrics/ (0755): nothing in them
         * can be a link a user planted; the metrics file is still checked through its fd. */
        struct passwd *pw = getpwuid(uid);
        gid_t gid = pw ? pw->pw_gid : (gid_t)-1;
        char *file = xasprintf("%s/%lld.jsonl", metrics, (long long)task);
        int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
            fchown(fd, uid, gid) < 0 || chown(run_dir, uid, gid) < 0 ||
            chown(ckpt, uid, gid) < 0) {
            *err = xasprintf("cannot give %s to uid %u: %s", run_dir, (unsigned)uid,
                             strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
        free(file);
    }
    free(ckpt);
    free(metrics);
    return rc;
}

/* The owner of a task's files in shared-dir: the task's (when the daemon runs tasks as their
 * owners), else the daemon's own (uid -1: left as created). */
struct submit_owner {
    uid_t uid;
    gid_t gid;
};

static struct submit_owner submit_owner_of(json_t *info)
{
    json_t *uid = json_object_get(info, "uid");
    struct submit_owner o = {(uid_t)-1, (gid_t)-1};
    if (json_is_integer(uid) && (uid_t)json_integer_value(uid) != geteuid()) {
        struct passwd *pw = getpwuid((uid_t)json_integer_value(uid));
        o.uid = (uid_t)json_integer_value(uid);
        o.gid = pw ? pw->pw_gid : (gid_t)-1;
    }
    return o;
}

/* Writes a script sbatch reads as the task's owner: theirs, 0600 (it holds their environment). */
static int submit_write_file(const char *path, const char *text, struct submit_owner owner,
                             char **err)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 && owner.uid != (uid_t)-1 && fchown(fd, owner.uid, owner.gid) < 0) {
        *err = xasprintf("cannot give %s to uid %u: %s", path, (unsigned)owner.uid,
                         strerror(errno));
        close(fd);
        return -1;
    }
    size_t len = strlen(text), done = 0;
    while (fd >= 0 && done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (fd < 0 || done < len || close(fd) < 0) {
        *err = xasprintf("cannot write %s: %s", path, strerror(errno));
        if (fd >= 0 && done < len)
            close(fd);
        return -1;
    }
    return 0;
}

/* The job sbatch is asked for: what the mapping needs of the task (info: the store's). */
static struct slurm_job submit_job_of(json_t *info, int64_t task, const char *run_dir,
                                      const char *script)
{
    return (struct slurm_job){
        .name = json_string_value(json_object_get(info, "name")),
        .task = task,
        .gpus = (int)json_integer_value(json_object_get(info, "gpus")),
        .gpu_type = json_string_value(json_object_get(info, "gpu_type")),
        .cpus = (int)json_integer_value(json_object_get(info, "cpus")),
        .mem = (uint64_t)json_integer_value(json_object_get(info, "mem")),
        .timeout_ms = json_integer_value(json_object_get(info, "timeout_ms")),
        .workdir = json_string_value(json_object_get(info, "workdir")),
        .run_dir = run_dir,
        .script = script,
    };
}

/* argv of sbatch for job: the mapping's, then the comment that finds the job again after a
 * crash (tag), and --no-requeue: a job a node failure or a preemption ended is submitted again
 * by drover (without using a retry), never requeued by Slurm behind drover's back. The warning
 * before the limit is 90 s, but at most half the limit, so that a short job is not warned as it
 * starts (Slurm's timing is coarse: up to a minute early). */
static char **submit_argv(struct daemon *d, const struct slurm_job *job, const char *tag,
                          char **err)
{
    struct slurm_settings set = d->slurm->set;
    int64_t limit_s = (job->timeout_ms + 59999) / 60000 * 60;
    if (job->timeout_ms > 0 && limit_s / 2 < SLURM_WARN_S)
        set.warn_signal_s = limit_s / 2 > 0 ? (int)(limit_s / 2) : -1;
    char **argv;
    if (slurm_sbatch_argv(job, &set, &argv, err) < 0)
        return NULL;
    size_t n = 0;
    while (argv[n])
        n++;
    argv = xrealloc(argv, (n + 3) * sizeof *argv);
    argv[n + 2] = NULL;
    argv[n + 1] = argv[n - 1]; /* the script stays last */
    argv[n - 1] = xasprintf("--comment=%s", tag);
    argv[n] = xstrdup("--no-requeue");
    return argv;
}

int slurm_check_request(struct daemon *d, json_t *task, char *why, size_t len)
{
    if (d->slurm == NULL)
        return 0;
    char *err = NULL, **argv = NULL;
    json_t *info = json_pack("{s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?}", "name",
                             json_object_get(task, "name"), "gpus", json_object_get(task, "gpus"),
                             "gpu_type", json_object_get(task, "gpu_type"), "cpus",
                             json_object_get(task, "cpus"), "mem", json_object_get(task, "mem"),
                             "timeout_ms", json_object_get(task, "timeout_ms"), "workdir",
                             json_object_get(task, "workdir"));
    if (info == NULL)
        info = json_object();
    if (json_object_get(info, "workdir") == NULL)
        json_object_set_new(info, "workdir", json_string("/"));
    char *run_dir = xasprintf("%s/runs/1/1", d->cfg.shared_dir);
    char *script = xasprintf("%s/job.sh", run_dir);
    struct slurm_job job = submit_job_of(info, 1, run_dir, script);
    json_t *array = json_object_get(task, "array");
    json_t *index = json_object_get(array, "index");
    int64_t *indices = xcalloc(json_array_size(index) + 1, sizeof *indices);
    for (size_t i = 0; i < json_array_size(index); i++)
        indices[i] = json_integer_value(json_array_get(index, i));
    job.array_index = indices;
    job.nindex = json_array_size(index);
    job.array_limit = (int)json_integer_value(json_object_get(array, "limit"));
    int rc = 0;
    if ((argv = submit_argv(d, &job, "drover", &err)) == NULL) {
        snprintf(why, len, "%s", err);
        rc = -1;
    }
    free(indices);
    slurm_argv_free(argv);
    free(err);
    free(run_dir);
    free(script);
    json_decref(info);
    return rc;
}

/* ---- dependencies ---------------------------------------------------------------------------- */

/* The Slurm jobs r must follow: its dependencies core still counts running (handed to Slurm
 * ahead of it, core/backend.c), by kind. Returns 1 when every one is known, 0 when one's sbatch
 * has not answered yet (r waits), -1 when one is no longer in Slurm (r waits in drover again). */
static int submit_upstream(struct daemon *d, const struct run *r, int64_t **ok, size_t *nok,
                           int64_t **any, size_t *nany)
{
    struct core_task_spec spec;
    struct core_dep *deps = NULL;
    int rc = 1;
    *ok = *any = NULL;
    *nok = *nany = 0;
    if (store_task_spec(d->store, r->task, &spec, &deps, NULL) < 0)
        return 1;
    for (size_t i = 0; i < spec.ndeps && rc != -1; i++) {
        int state = core_task_state(d->core, deps[i].id);
        if (state < 0 || task_state_terminal(state))
            continue; /* ended: core settled what that means */
        struct run *u = NULL;
        for (struct run *x = d->runs; x && u == NULL; x = x->next)
            if (x->slurm && x->task == deps[i].id)
                u = x;
        if (state != TASK_RUNNING || u == NULL || u->array_task >= 0) {
            rc = -1; /* an array element is never handed over ahead (core: single tasks) */
        } else if (u->job_id <= 0) {
            rc = 0;
        } else if (deps[i].kind == DEP_AFTER_OK) {
            *ok = xrealloc(*ok, (*nok + 1) * sizeof **ok);
            (*ok)[(*nok)++] = u->job_id;
        } else {
            *any = xrealloc(*any, (*nany + 1) * sizeof **any);
            (*any)[(*nany)++] = u->job_id;
        }
    }
    free(deps);
    return rc;
}

/* ---- sbatch's answer ------------------------------------------------------------------------- */

static void submit_done(void *arg, const struct cmd_result *res)
{
    struct slurm_call *call = arg;
    struct daemon *d = call->d;
    uint64_t submission = call->submission;
    free(call);
    long long job = 0;
    char *end = NULL;
    if (res->status == 0 && res->out_len > 0)
        job = strtoll(res->out, &end, 10);
    bool ok = job > 0 && end != NULL && (*end == '\n' || *end == ';' || *end == '\0');
    char *why = ok ? NULL : slurm_said("sbatch", res);
    bool unreachable = !ok && res->status != -1 && slurm_unreachable(res);
    if (unreachable)
        slurm_set_up(d, false, why);
    else if (ok)
        slurm_set_up(d, true, NULL);
    bool begun = false;
    struct run *r, *next;
    for (r = d->runs; r; r = next) {
        next = r->next;
        if (!r->slurm || r->submission != submission || !r->submitting)
            continue;
        r->submitting = false;
        if (!ok) {
            if (unreachable)
                slurm_not_started(d, r, why);
            else
                slurm_failed(d, r, "exec_error", CORE_OUTCOME_EXEC_ERROR, why);
            continue;
        }
        char id[48];
        r->job_id = job;
        slurm_job_text(r, id, sizeof id);
        if (!begun)
            store_begin(d->store);
        begun = true;
        if (store_attempt_slurm_job(d->store, r->task, r->attempt, id) < 0)
            fprintf(stderr, "drover daemon: task %lld: cannot record slurm job %s: %s\n",
                    (long long)r->task, id, store_error(d->store));
        if (r->cancel_wanted)
            slurm_scancel(d, r);
    }
    if (begun && store_commit(d->store) < 0) {
        fprintf(stderr, "drover daemon: cannot record slurm job %lld: %s\n", job,
                store_error(d->store));
        store_rollback(d->store); /* a restart finds them by their comment */
    }
    free(why);
    slurm_submit_waiting(d);
    daemon_apply(d);
    slurm_schedule_poll(d);
}

/* ---- submitting ------------------------------------------------------------------------------ */

/* sh's single quotes around s (into a malloc'd string). */
static char *submit_quote(const char *s)
{
    size_t n = 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = xmalloc(n), *w = q;
    *w++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(w, "'\\''", 4);
            w += 4;
        } else {
            *w++ = *p;
        }
    }
    *w++ = '\'';
    *w = '\0';
    return q;
}

/* An element's batch script, in its run directory. */
static int submit_element(struct daemon *d, struct run *r, json_t *info, char **err)
{
    json_t *command = json_object_get(info, "command"), *uid = json_object_get(info, "uid");
    bool owned = json_is_integer(uid) && (uid_t)json_integer_value(uid) != geteuid();
    char **cmd = xcalloc(json_array_size(command) + 1, sizeof *cmd);
    for (size_t i = 0; i < json_array_size(command); i++)
        cmd[i] = xstrdup(json_string_value(json_array_get(command, i)));
    char **env = submit_env(d, info, r->task, r->attempt);
    struct slurm_script script = {
        .task_id = r->task,
        .attempt = r->attempt,
        .argv = cmd,
        .env = env,
        .workdir = json_string_value(json_object_get(info, "workdir")),
        .run_dir = r->run_dir,
    };
    char *path = xasprintf("%s/job.sh", r->run_dir), *text = NULL;
    int rc = submit_dirs(d, r->task, r->run_dir, owned,
                         owned ? (uid_t)json_integer_value(uid) : 0, err) < 0 ||
                     (text = slurm_script_text(&script, err)) == NULL ||
                     submit_write_file(path, text, submit_owner_of(info), err) < 0
                 ? -1
                 : 0;
    free(path);
    free(text);
    submit_strv_free(cmd);
    submit_strv_free(env);
    return rc;
}

/* An array's directory of links to its elements' run directories, and its script. Returns the
 * directory (malloc'd), or NULL with *err. */
static char *submit_array_dir(struct daemon *d, struct run **runs, size_t n,
                              struct submit_owner owner, char **err)
{
    char *dir = xasprintf("%s/arrays/%lld.%lld", d->cfg.shared_dir, (long long)runs[0]->group,
                          (long long)runs[0]->task);
    if (paths_mkdir_p(dir) < 0 ||
        (owner.uid != (uid_t)-1 && chown(dir, owner.uid, owner.gid) < 0)) {
        *err = xasprintf("cannot create %s: %s", dir, strerror(errno));
        free(dir);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char *link = xasprintf("%s/%lld", dir, (long long)runs[i]->array_task);
        unlink(link);
        int rc = symlink(runs[i]->run_dir, link);
        free(link);
        if (rc < 0) {
            *err = xasprintf("cannot link %s's elements: %s", dir, strerror(errno));
            free(dir);
            return NULL;
        }
    }
    char *quoted = submit_quote(dir), *path = xasprintf("%s/job.sh", dir);
    char *text = xasprintf("#!/bin/sh\n# drover array %lld: each element's own script\n"
                           "exec /bin/sh %s/\"$SLURM_ARRAY_TASK_ID\"/job.sh\n",
                           (long long)runs[0]->group, quoted);
    int rc = submit_write_file(path, text, owner, err);
    free(quoted);
    free(path);
    free(text);
    if (rc < 0) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* Submits runs[0..n): one attempt, or the first attempts of one array's elements. */
static void submit_runs(struct daemon *d, struct run **runs, size_t n)
{
    int64_t *ok = NULL, *any = NULL, *indices = NULL;
    size_t nok = 0, nany = 0;
    int upstream = submit_upstream(d, runs[0], &ok, &nok, &any, &nany);
    if (upstream <= 0) {
        for (size_t i = 0; i < n; i++) {
            runs[i]->waiting = upstream == 0;
            if (upstream < 0)
                slurm_not_started(d, runs[i], "a job it was to follow in Slurm is not there");
        }
        free(ok);
        free(any);
        return;
    }
    struct slurm_backend *sb = d->slurm;
    uint64_t submission = ++sb->submissions;
    json_t *info = NULL;
    char *err = NULL, *dir = NULL, *script = NULL, **argv = NULL, tag[96];
    bool array = runs[0]->group != 0;
    indices = xcalloc(n, sizeof *indices);
    for (size_t i = 0; i < n; i++) {
        runs[i]->waiting = false;
        runs[i]->submission = submission;
        json_decref(info);
        info = store_task_exec_info(d->store, runs[i]->task);
        if (info == NULL) {
            err = xstrdup("the task is not in the store");
            goto fail;
        }
        runs[i]->array_task = array ? json_integer_value(json_object_get(info, "array_index"))
                                    : SLURM_NO_TASK;
        indices[i] = runs[i]->array_task;
        if (submit_element(d, runs[i], info, &err) < 0)
            goto fail;
    }
    json_decref(info);
    info = store_task_exec_info(d->store, runs[0]->task); /* the job's resources and owner */
    if (array) {
        if ((dir = submit_array_dir(d, runs, n, submit_owner_of(info), &err)) == NULL)
            goto fail;
        snprintf(tag, sizeof tag, "drover:A%lld.1:%s", (long long)runs[0]->group, sb->home_tag);
    } else {
        dir = xstrdup(runs[0]->run_dir);
        snprintf(tag, sizeof tag, "drover:%lld.%d:%s", (long long)runs[0]->task,
                 runs[0]->attempt, sb->home_tag);
    }
    script = xasprintf("%s/job.sh", dir);
    struct slurm_job job = submit_job_of(info, runs[0]->task, dir, script);
    job.afterok = ok;
    job.nafterok = nok;
    job.afterany = any;
    job.nafterany = nany;
    if (array) {
        job.array_index = indices;
        job.nindex = n;
        job.array_limit = (int)json_integer_value(json_object_get(info, "array_limit"));
    }
    if ((argv = submit_argv(d, &job, tag, &err)) == NULL)
        goto fail;
    json_t *uid = json_object_get(info, "uid");
    bool owned = json_is_integer(uid) && (uid_t)json_integer_value(uid) != geteuid();
    struct cmd_opts opts = {
        .timeout_ms = SLURM_CMD_TIMEOUT_MS,
        .as_user = owned,
        .uid = owned ? (uid_t)json_integer_value(uid) : 0,
        .workdir = job.workdir,
        .nofile = d->task_nofile,
    };
    struct slurm_call *call = xcalloc(1, sizeof *call);
    *call = (struct slurm_call){.d = d, .submission = submission};
    if (cmd_start(d->base, argv, &opts, submit_done, call, &err) < 0) {
        free(call);
        goto fail;
    }
    sb->calls[SLURM_CALL_SBATCH]++;
    goto done;
fail:
    fprintf(stderr, "drover daemon: task %lld: cannot hand it to slurm: %s\n",
            (long long)runs[0]->task, err);
    for (size_t i = 0; i < n; i++)
        slurm_failed(d, runs[i], "exec_error", CORE_OUTCOME_EXEC_ERROR, err);
done:
    free(ok);
    free(any);
    free(indices);
    free(err);
    free(dir);
    free(script);
    slurm_argv_free(argv);
    json_decref(info);
}

void slurm_submit_waiting(struct daemon *d)
{
    if (d->slurm == NULL)
        return;
    struct key { int64_t task; int attempt; } *v = NULL;
    size_t n = 0, cap = 0;
    for (struct run *r = d->runs; r; r = r->next) {
        if (r->slurm && r->waiting) {
            xgrow((void **)&v, &cap, n + 1, sizeof *v);
            v[n++] = (struct key){r->task, r->attempt};
        }
    }
    struct run **group = NULL;
    size_t gcap = 0;
    for (size_t i = 0; i < n; i++) {
        struct run *r = slurm_run(d, v[i].task, v[i].attempt);
        if (r == NULL || !r->waiting)
            continue;
        size_t ng = 0;
        xgrow((void **)&group, &gcap, 1, sizeof *group);
        group[ng++] = r;
        if (r->group != 0) /* its array's other first attempts waiting now go with it */
            for (struct run *x = d->runs; x; x = x->next)
                if (x != r && x->slurm && x->waiting && x->group == r->group) {
                    xgrow((void **)&group, &gcap, ng + 1, sizeof *group);
                    group[ng++] = x;
                }
        submit_runs(d, group, ng);
    }
    free(group);
    free(v);
}

void slurm_start_attempt(struct daemon *d, const struct core_action *a, core_time now)
{
    char *run_dir = xasprintf("%s/runs/%lld/%d", d->cfg.shared_dir, (long long)a->task,
                              a->attempt);
    struct run *r = run_add(d, a->task, a->attempt, 0, false, run_dir, now, &a->placement);
    r->slurm = true;
    r->submitting = true;
    r->waiting = true; /* submitted at the end of the batch: slurm_submit_waiting */
    r->array_task = SLURM_NO_TASK;
    r->group = a->array_id != 0 && a->attempt == 1 ? a->array_id : 0;
    telemetry_started(d, a->at, now);
}
