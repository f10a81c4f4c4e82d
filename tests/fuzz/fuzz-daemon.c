/* tests/fuzz/fuzz-daemon.c — the drained daemon of fuzz_ops and fuzz_http (fuzz-daemon.h). */
#include "fuzz-daemon.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *fuzz_name = "fuzz";
static char fuzz_root[80];     /* the temp dir: the pristine store and the daemon's home */
static char fuzz_pristine[96]; /* the empty store (fuzz_make_pristine) */
static void (*fuzz_on_event)(struct daemon *d); /* what d->kick, d->carry, d->wakeup run */

static int fuzz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void fuzz_rm_tree(const char *dir)
{
    nftw(dir, fuzz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes everything the daemon made in home but its disk ballast, `reserve`: what it holds is
 * allocated once, and posix_fallocate then finds it in place. */
static void fuzz_clear_home(const char *home)
{
    DIR *dir = opendir(home);
    struct dirent *e;
    while (dir && (e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, "reserve") == 0)
            continue;
        char *path = xasprintf("%s/%s", home, e->d_name);
        fuzz_rm_tree(path);
        free(path);
    }
    if (dir)
        closedir(dir);
}

static void fuzz_at_exit(void)
{
    if (fuzz_root[0])
        fuzz_rm_tree(fuzz_root);
}

/* A copy of the empty store: store_open then finds it migrated, which saves most of a new
 * daemon's cost (the migrations were 80% of it). */
static void fuzz_copy(const char *from, const char *to)
{
    char buf[65536];
    ssize_t n;
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (in < 0 || out < 0)
        fatalx("fuzz_%s: cannot copy %s to %s", fuzz_name, from, to);
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            fatalx("fuzz_%s: cannot write %s", fuzz_name, to);
    close(in);
    close(out);
}

/* The empty store every daemon starts from: migrated, and drained as `drover drain` leaves it
 * (daemon_restore reads that back). */
static void fuzz_make_pristine(void)
{
    char *err = NULL;
    snprintf(fuzz_pristine, sizeof fuzz_pristine, "%s/pristine.db", fuzz_root);
    struct store *st = store_open(fuzz_pristine, &err);
    if (st == NULL || store_set_setting(st, "draining", "1") < 0)
        fatalx("fuzz_%s: %s", fuzz_name, st ? store_error(st) : err);
    store_close(st); /* the last connection: SQLite checkpoints and removes the WAL */
}

static void fuzz_no_event(evutil_socket_t fd, short what, void *arg)
{
}

static void fuzz_event(evutil_socket_t fd, short what, void *arg)
{
    fuzz_on_event(arg);
}

/* The machine: what daemon_machine (daemon/main.c) builds from DROVER_FAKE_GPUS=2x16G,1x80G,
 * DROVER_FAKE_CPUS=16 and DROVER_FAKE_MEM=64G. Two GPU names, so gpu_type has a choice. */
static void fuzz_machine(struct daemon *d)
{
    const char *why;
    if (gpu_parse_fake("2x16G,1x80G", &d->gpus, &why) < 0)
        fatalx("fuzz_%s: %s", fuzz_name, why);
    d->cpus = 16;
    d->mem = 64ULL << 30;
    struct core_node node = {.ngpus = d->gpus.count, .cpus = d->cpus, .mem = d->mem};
    for (int i = 0; i < d->gpus.count; i++) {
        int t = 0;
        node.gpu_mem[i] = d->gpus.gpu[i].mem_total;
        while (t < d->ngpu_types && strcmp(d->gpu_type_names[t], d->gpus.gpu[i].name) != 0)
            t++;
        if (t == d->ngpu_types)
            d->gpu_type_names[d->ngpu_types++] = xstrdup(d->gpus.gpu[i].name);
        node.gpu_type[i] = (uint8_t)t;
    }
    core_set_nodes(d->core, &node, 1);
}

void fuzz_daemon_new(struct daemon *d, void (*on_event)(struct daemon *d))
{
    struct core_policy policy = core_policy_default();
    char *err = NULL;
    event_callback_fn cb = on_event ? fuzz_event : fuzz_no_event;
    fuzz_on_event = on_event;
    memset(d, 0, sizeof *d);
    d->fd_reserve = -1; /* no listener: daemon/listen.c never opens it */
    d->task_umask = 022;
    d->home = xasprintf("%s/home", fuzz_root); /* emptied after each input but for the ballast */
    char *runs = xasprintf("%s/runs", d->home), *metrics = xasprintf("%s/metrics", d->home);
    char *db = xasprintf("%s/drover.db", d->home);
    if ((mkdir(d->home, 0700) < 0 && errno != EEXIST) || mkdir(runs, 0700) < 0 ||
        mkdir(metrics, 0700) < 0)
        fatalx("fuzz_%s: cannot create %s", fuzz_name, d->home);
    if (config_load(&d->cfg, NULL, 0, NULL, &err) < 0)
        fatalx("fuzz_%s: %s", fuzz_name, err);
    policy.aging_ms = d->cfg.aging_ms;
    d->grace_ms = d->cfg.grace_ms;
    d->core = core_new(&policy);
    fuzz_copy(fuzz_pristine, db);
    d->store = store_open(db, &err);
    if (d->store == NULL)
        fatalx("fuzz_%s: %s", fuzz_name, err);
    d->base = event_base_new();
    event_base_priority_init(d->base, DAEMON_PRIOS); /* as daemon_main's loop */
    fuzz_machine(d);
    d->kick = event_new(d->base, -1, 0, cb, d);
    d->carry = event_new(d->base, -1, 0, cb, d);
    d->wakeup = event_new(d->base, -1, 0, cb, d);
    disk_start(d); /* kept from one input to the next: allocating it was half the time */
    if (daemon_restore(d, &err) < 0 || telemetry_start(d, &err) < 0)
        fatalx("fuzz_%s: %s", fuzz_name, err);
    if (!core_draining(d->core))
        fatalx("fuzz_%s: the daemon is not drained", fuzz_name);
    free(runs);
    free(metrics);
    free(db);
}

void fuzz_daemon_free(struct daemon *d)
{
    if (d->runs != NULL)
        fatalx("fuzz_%s: an attempt was started", fuzz_name);
    telemetry_stop(d);
    disk_stop(d);
    exp_free_all(d);
    for (int t = 0; t < d->ngpu_types; t++)
        free(d->gpu_type_names[t]);
    config_free(&d->cfg);
    event_free(d->kick);
    event_free(d->carry);
    event_free(d->wakeup);
    core_actions_free(&d->deferred);
    core_actions_free(&d->acts);
    free(d->ends);
    core_free(d->core);
    store_close(d->store);
    event_base_free(d->base);
    fuzz_clear_home(d->home);
    free(d->home);
}

static void fuzz_no_start(const struct core_actions *acts)
{
    for (size_t i = 0; i < acts->n; i++)
        if (acts->v[i].type == CORE_ACT_START)
            fatalx("fuzz_%s: a drained daemon started task %lld", fuzz_name,
                   (long long)acts->v[i].task);
}

void fuzz_daemon_turn(struct daemon *d)
{
    core_set_drain(d->core, true); /* an input may have undrained it */
    fuzz_no_start(&d->deferred);
    fuzz_no_start(&d->acts);
    if (d->deferred.n > 0)
        daemon_on_carry(-1, 0, d);
    core_schedule(d->core, daemon_now(), &d->acts);
    fuzz_no_start(&d->acts);
    daemon_apply(d);
}

/* A crash ends the process without atexit: the temp dirs of harnesses that are gone (the pid
 * in the name no longer runs) are removed here. */
static void fuzz_remove_stale(const char *base)
{
    DIR *dir = opendir(base);
    struct dirent *e;
    char pattern[48];
    int pid;
    snprintf(pattern, sizeof pattern, "drover-fuzz-%s.%%d.", fuzz_name);
    while (dir && (e = readdir(dir)) != NULL) {
        if (sscanf(e->d_name, pattern, &pid) != 1 || pid <= 0 || kill(pid, 0) == 0 ||
            errno != ESRCH)
            continue;
        char *path = xasprintf("%s/%s", base, e->d_name);
        fuzz_rm_tree(path);
        free(path);
    }
    if (dir)
        closedir(dir);
}

void fuzz_daemon_init(const char *name)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    fuzz_name = name;
    umask(077); /* as daemon_main does */
    fuzz_remove_stale(base);
    snprintf(fuzz_root, sizeof fuzz_root, "%s/drover-fuzz-%s.%d.XXXXXX", base, name,
             (int)getpid());
    if (mkdtemp(fuzz_root) == NULL)
        fatalx("fuzz_%s: cannot create a temp dir in %s", name, base);
    atexit(fuzz_at_exit);
    fuzz_make_pristine();
}

const char *fuzz_daemon_pristine(void)
{
    return fuzz_pristine;
}
