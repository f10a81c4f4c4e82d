/* drover daemon: sets up the state directory, the store, core and the event loop. */
#include "daemon/daemon.h"
#include "gpu/nvml.h"
#include "exec/exec.h"
#include "util/parse.h"
#include "util/paths.h"
#include "util/when.h"
#include "util/xalloc.h"

#include <errno.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct daemon *d = arg;
    if (sig == SIGCHLD) {
        daemon_reap(d);
        return;
    }
    fprintf(stderr, "drover daemon: signal %d: stopping (running tasks keep running)\n",
            (int)sig);
    d->stopping = true;
    event_base_loopexit(d->base, NULL);
}

static void daemon_on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct daemon *d = arg;
    core_schedule(d->core, daemon_now(), &d->acts);
    daemon_apply(d); /* what fails to commit waits for the next try (daemon/disk.c) */
}

/* The off-peak window core starts off-peak tasks in: the one open now, or the next, in local
 * time (util/when.c), given again at each of its boundaries — so a DST change or a moved
 * clock is taken at the next boundary — and a pass follows (core opens or closes it there). */
static void daemon_off_peak(struct daemon *d)
{
    const struct config_window *w = &d->cfg.off_peak;
    struct when_clock clock = when_clock_system();
    int64_t open, close;
    if (when_window_next(w->start, w->end, &clock, &open, &close) < 0) {
        fprintf(stderr, "drover daemon: cannot compute the off-peak window; trying in a minute\n");
        open = close = CORE_TIME_NEVER;
    }
    core_set_off_peak(d->core, open, close);
    int64_t due = open == CORE_TIME_NEVER ? clock.now_ms + 60000
                  : open > clock.now_ms   ? open
                                          : close;
    int64_t ms = due > clock.now_ms ? due - clock.now_ms : 0;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(d->off_peak, &tv);
}

static void daemon_on_off_peak(evutil_socket_t fd, short what, void *arg)
{
    daemon_off_peak(arg);
    daemon_kick(arg);
}

static void daemon_on_poll(evutil_socket_t fd, short what, void *arg)
{
    daemon_poll_adopted(arg);
}

/* Whether a daemon answers on the socket at path. */
static bool daemon_socket_alive(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    bool alive = false;
    if (strlen(path) < sizeof sun.sun_path) {
        strcpy(sun.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        alive = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0;
        if (fd >= 0)
            close(fd);
    }
    return alive;
}

/* One daemon per state directory: an flock held for the daemon's life. When the lock is held
 * but nobody answers on the socket, a daemon is on its way out (drover shutdown, then a command
 * at once): wait for it, up to 10 s, rather than leave the caller with no daemon at all. */
static int daemon_lock(const char *home, const char *sock)
{
    char *path = paths_join(home, "daemon.lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(path);
    if (fd < 0)
        return -1;
    struct timespec pause = {0, 50000000};
    int tries = 0;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (++tries > 200 || daemon_socket_alive(sock)) {
            close(fd);
            return -1;
        }
        nanosleep(&pause, NULL);
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == 0 && write(fd, buf, (size_t)n) < 0) {
        /* the pid in the lock file is informational only */
    }
    return fd;
}

/* System mode (--system, root only: checked first): the state directory traversable but not listable (0711: the database and every
 * state file stay root's, 0600; an owner reaches its own run directory by its name), the
 * socket's directory 0755 when we create it (an existing one is left as it is), the socket
 * itself 0666 (server_listen): who connects is the kernel's word (SO_PEERCRED), never the
 * client's. Returns 0, or -1 with *err. */
static int daemon_system_dirs(struct daemon *d, const char *sock, char **err)
{
    char *runs = paths_join(d->home, "runs");
    int rc = chmod(d->home, 0711) == 0 && chmod(runs, 0711) == 0 ? 0 : -1;
    free(runs);
    if (rc < 0) {
        *err = xasprintf("cannot set the mode of %s: %s", d->home, strerror(errno));
        return -1;
    }
    char *dir = xstrdup(sock), *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        struct stat sb;
        if (stat(dir, &sb) < 0 && errno == ENOENT &&
            (paths_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0)) {
            *err = xasprintf("cannot create %s: %s", dir, strerror(errno));
            rc = -1;
        }
    }
    free(dir);
    return rc;
}

static int daemon_machine(struct daemon *d, char **err)
{
    const char *why;
    long long v;
    uint64_t mem;
    if (gpu_detect(&d->gpus, err) < 0)
        return -1;
    /* Only some GPUs: the allow-list, else the daemon's own CUDA_VISIBLE_DEVICES. */
    const char *allow = d->cfg.gpus ? d->cfg.gpus : getenv("CUDA_VISIBLE_DEVICES");
    if (allow != NULL && strcmp(d->gpus.source, "fake") != 0 && d->gpus.count > 0) {
        char *why_list = NULL;
        if (gpu_filter(&d->gpus, allow, &why_list) < 0) {
            *err = xasprintf("%s %s: %s", d->cfg.gpus ? "gpus" : "CUDA_VISIBLE_DEVICES", allow,
                             why_list);
            free(why_list);
            return -1;
        }
    }
    const char *cpus = getenv("DROVER_FAKE_CPUS");
    d->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus && *cpus) {
        if (parse_int(cpus, 1, 100000, &v, &why) < 0) {
            *err = xasprintf("DROVER_FAKE_CPUS=%s: %s", cpus, why);
            return -1;
        }
        d->cpus = (int)v;
    }
    const char *memenv = getenv("DROVER_FAKE_MEM");
    d->mem = (unsigned long long)sysconf(_SC_PHYS_PAGES) * (unsigned long long)sysconf(_SC_PAGESIZE);
    if (memenv && *memenv) {
        if (parse_size(memenv, &mem, &why) < 0) {
            *err = xasprintf("DROVER_FAKE_MEM=%s: %s", memenv, why);
            return -1;
        }
        d->mem = mem;
    }
    struct core_node node = {.ngpus = d->gpus.count, .cpus = d->cpus, .mem = d->mem};
    for (int i = 0; i < d->gpus.count; i++) {
        node.gpu_mem[i] = d->gpus.gpu[i].mem_total;
        /* GPU types by name, for templates' resources.gpu_type. */
        int t = 0;
        while (t < d->ngpu_types && strcmp(d->gpu_type_names[t], d->gpus.gpu[i].name) != 0)
            t++;
        if (t == d->ngpu_types && t < GPU_MAX)
            d->gpu_type_names[d->ngpu_types++] = xstrdup(d->gpus.gpu[i].name);
        node.gpu_type[i] = (uint8_t)(t < GPU_MAX ? t : 0);
    }
    /* Multi-GPU tasks get the closest GPUs: NVML's topology between every pair. */
    uint8_t *link = NULL;
    if (strcmp(d->gpus.source, "nvml") == 0 && d->gpus.count > 1) {
        int n = d->gpus.count;
        link = xcalloc((size_t)n * (size_t)n, 1);
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                link[a * n + b] = a == b ? 0
                                         : (uint8_t)nvml_link(d->gpus.gpu[a].index,
                                                              d->gpus.gpu[b].index);
        node.gpu_link = link;
    }
    core_set_nodes(d->core, &node, 1);
    free(link);
    return 0;
}

static void daemon_events(struct daemon *d)
{
    d->kick = event_new(d->base, -1, 0, daemon_on_kick, d);
    d->carry = event_new(d->base, -1, 0, daemon_on_carry, d);
    d->wakeup = event_new(d->base, -1, 0, daemon_on_kick, d);
    if (d->cfg.off_peak.set) {
        d->off_peak = evtimer_new(d->base, daemon_on_off_peak, d);
        daemon_off_peak(d);
    }
    d->poll = event_new(d->base, -1, EV_PERSIST, daemon_on_poll, d);
    struct timeval every = {0, 200000};
    event_add(d->poll, &every);
    d->sigchld = evsignal_new(d->base, SIGCHLD, daemon_on_signal, d);
    d->sigterm = evsignal_new(d->base, SIGTERM, daemon_on_signal, d);
    d->sigint = evsignal_new(d->base, SIGINT, daemon_on_signal, d);
    event_add(d->sigchld, NULL);
    event_add(d->sigterm, NULL);
    event_add(d->sigint, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void daemon_free(struct daemon *d)
{
    group_stop(d); /* first: its commit publishes events and answers clients */
    amqp_stop(d);  /* what it took and did not ack goes back to the queue */
    telemetry_stop(d);
    notify_stop(d);
    slurm_backend_stop(d);
    events_stop(d);
    disk_stop(d);
    exp_free_all(d);
    for (int t = 0; t < d->ngpu_types; t++)
        free(d->gpu_type_names[t]);
    config_free(&d->cfg);
    if (d->zygote)
        event_free(d->zygote);
    exec_zygote_stop();
    event_free(d->kick);
    event_free(d->carry);
    core_actions_free(&d->deferred);
    event_free(d->wakeup);
    if (d->off_peak)
        event_free(d->off_peak);
    event_free(d->poll);
    event_free(d->sigchld);
    event_free(d->sigterm);
    event_free(d->sigint);
    while (d->runs) {
        struct run *r = d->runs;
        d->runs = r->next;
        exp_run_free(r);
        free(r->run_dir);
        free(r);
    }
    free(d->ends);
    core_actions_free(&d->acts);
    core_free(d->core);
    store_close(d->store);
    event_base_free(d->base);
    free(d->home);
}

/* policy = las: core's las with the settings' knobs. No backfill reservation (las passes over
 * what does not fit and preempts instead); best fit, fair share and the limits as set. */
static void daemon_policy_las(const struct daemon_config *cfg, struct core_policy *policy)
{
    core_policy_las(policy);
    policy->backfill = false;
    if (cfg->las_nthresholds >= 0) {
        policy->las_nthresholds = cfg->las_nthresholds;
        memcpy(policy->las_threshold, cfg->las_threshold, sizeof policy->las_threshold);
    }
    if (cfg->las_min_run_ms >= 0)
        policy->las_min_run_ms = cfg->las_min_run_ms;
    if (cfg->las_starve_k >= 0)
        policy->las_starve_k = cfg->las_starve_k;
    if (cfg->las_starve_total_ms >= 0)
        policy->las_starve_total_ms = cfg->las_starve_total_ms;
    if (cfg->las_protect_wait_ms >= 0)
        policy->las_protect_wait_ms = cfg->las_protect_wait_ms;
    if (cfg->las_mrl_factor >= 0)
        policy->las_mrl_factor = cfg->las_mrl_factor;
}

int daemon_main(int argc, char **argv)
{
    struct daemon d = {.grace_ms = 10000, .fd_reserve = -1, .started = daemon_now()};
    struct core_policy policy = core_policy_default();
    char *err = NULL;
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        config_usage(stdout);
        return 0;
    }
    config_ready_take(); /* a command that started us waits there for how the start went */
    /* Every state file the owner's alone, whatever the directory's mode (the database holds
     * every task's command and environment); tasks get the umask we were started with. */
    d.task_umask = umask(077);
    struct rlimit files; /* before server_listen raises it: what tasks get back */
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY)
        d.task_nofile = (uint64_t)files.rlim_cur;
    d.home = paths_home();
    if (config_load(&d.cfg, d.home, argc, argv, &err) < 0 ||
        (d.cfg.system && geteuid() != 0 &&
         (err = xasprintf("--system needs root (it serves every user and runs tasks as their"
                          " owners); run it as root, or without --system for a daemon of your"
                          " own")) != NULL)) {
        fprintf(stderr, "drover daemon: %s\n", err);
        config_ready_report(err);
        free(err);
        config_free(&d.cfg);
        free(d.home);
        return 2;
    }
    if (d.cfg.state_dir != NULL || d.cfg.system) {
        free(d.home);
        d.home = xstrdup(d.cfg.state_dir ? d.cfg.state_dir : PATHS_SYSTEM_STATE);
    }
    char *sock = d.cfg.socket   ? xstrdup(d.cfg.socket)
                 : d.cfg.system ? xstrdup(PATHS_SYSTEM_SOCKET)
                                : paths_join(d.home, "drover.sock");
    policy.aging_ms = d.cfg.aging_ms;
    policy.fair_share = d.cfg.fair_share;
    policy.fair_share_half_life_ms = d.cfg.fair_share_half_life_ms;
    policy.user_limits = d.cfg.user_limits;
    policy.slurm = d.cfg.shared_dir != NULL;
    policy.spill = strcmp(d.cfg.spill, "unfit") == 0   ? CORE_SPILL_UNFIT
                   : strcmp(d.cfg.spill, "never") == 0 ? CORE_SPILL_NEVER
                                                       : CORE_SPILL_AFTER;
    policy.spill_after_ms = d.cfg.spill_after_ms;
    if (d.cfg.las)
        daemon_policy_las(&d.cfg, &policy);
    d.grace_ms = d.cfg.grace_ms;
    char *runs = paths_join(d.home, "runs"), *metrics = paths_join(d.home, "metrics");
    bool made = paths_mkdir_p(d.home) == 0 && paths_mkdir_p(runs) == 0 &&
                paths_mkdir_p(metrics) == 0;
    free(runs);
    free(metrics);
    if (!made)
        err = xasprintf("cannot create %s: %s", d.home, strerror(errno));
    if (err != NULL || (d.cfg.system && daemon_system_dirs(&d, sock, &err) < 0)) {
        fprintf(stderr, "drover daemon: %s\n", err);
        config_ready_report(err);
        free(err);
        config_free(&d.cfg);
        free(d.home);
        free(sock);
        return 1;
    }
    int lock = daemon_lock(d.home, sock);
    if (lock < 0) {
        fprintf(stderr, "drover daemon: another daemon is running for %s\n", d.home);
        config_ready_report(NULL); /* the command that started us uses that one */
        config_free(&d.cfg);
        free(d.home);
        free(sock);
        return 1;
    }
    /* Orphans below us (supervisors whose zygote died, tasks' stray grandchildren) are re-parented
     * to the daemon, which reaps them, rather than to an init that may not. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* Keep freed heap instead of returning it with brk() after every burst: each page handed
     * back and taken again is a page fault, a measurable part of an attempt's cost. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_TOP_PAD, 4 << 20);
    d.core = core_new(&policy);
    char *dbpath = paths_join(d.home, "drover.db");
    d.store = store_open(dbpath, &err);
    free(dbpath);
    /* HTTP's events run last and one callback at a time (http.c sets their priority): a socket
     * client — the CLI — waits behind at most one HTTP request, however busy the API is. */
    struct event_config *ecfg = event_config_new();
    event_config_set_max_dispatch_interval(ecfg, NULL, 1, DAEMON_PRIO_HTTP);
    d.base = event_base_new_with_config(ecfg);
    event_config_free(ecfg);
    if (d.base == NULL || event_base_priority_init(d.base, DAEMON_PRIOS) < 0)
        fatalx("cannot make the event loop");
    if (d.store == NULL || daemon_machine(&d, &err) < 0)
        goto fail;
    daemon_events(&d);
    events_start(&d); /* before restore: what it commits is published */
    group_start(&d);
    disk_start(&d);
    daemon_start_zygote(&d);
    if (slurm_backend_start(&d, &err) < 0 || amqp_start(&d, &err) < 0)
        goto fail;
    int rc = daemon_restore(&d, &err) < 0 || telemetry_start(&d, &err) < 0
                 ? -1
                 : server_listen(&d, sock, &err);
    if (rc < 0)
        goto fail;
    notify_start(&d); /* resumes the webhook outbox */
    fprintf(stderr, "drover daemon: serving %s%s (pid %d, %d GPUs from %s, %d CPUs)\n", sock,
            d.cfg.system ? " for every user" : "", (int)getpid(), d.gpus.count, d.gpus.source,
            d.cpus);
    config_ready_report(NULL);
    daemon_kick(&d);
    event_base_dispatch(d.base);
    server_close(&d);
    unlink(sock);
    free(sock);
    daemon_free(&d);
    close(lock);
    return 0;
fail:
    fprintf(stderr, "drover daemon: %s\n", err ? err : "cannot start");
    config_ready_report(err ? err : "cannot start");
    free(err);
    if (d.sigchld)
        daemon_free(&d);
    else {
        config_free(&d.cfg);
        core_free(d.core);
        store_close(d.store);
        if (d.base)
            event_base_free(d.base);
        free(d.home);
    }
    free(sock);
    close(lock);
    return 1;
}
