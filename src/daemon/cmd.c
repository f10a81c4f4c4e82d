/* cmd.c — short external commands run from the loop without blocking it (cmd.h).
 *
 * How the child is made: vfork, unless the command runs as another user, then fork.
 * - vfork: no page table is copied (the daemon holds SQLite's cache, the event backlog, every
 *   task: a fork of it costs a page-table copy, and copy-on-write faults for as long as the child
 *   lives). The child (cmd_child) makes system calls only — setsid, sigaction, open, dup, chdir,
 *   setrlimit, close_range — and leaves by exec or _exit, as the supervisor's task child does.
 *   posix_spawnp would do as well for that path, but the as_user path needs a child of our own,
 *   and one child routine serves both.
 * - fork when as_user: the owner is looked up in the child (exec_identity_resolve: passwd and
 *   groups through NSS, which may be LDAP or sssd and may hang — in the child, a hang is the
 *   command's time limit, never the loop's). Those lookups allocate, so they cannot run after
 *   vfork; the daemon is single-threaded, so they are safe after fork. The drop itself
 *   (exec_identity_drop) is system calls only.
 * Every signal is blocked in the daemon across the fork, so that none of libevent's handlers runs
 * in the child before it has reset its dispositions; the child unblocks them just before exec.
 *
 * What went wrong before exec goes back on a close-on-exec pipe (cmd_failure): EOF on it means the
 * exec happened. A command is done when that pipe, stdout and stderr are at EOF and its exit has
 * been reaped (cmd_reaped); the callback runs from the command's own "finish" event, so a
 * callback may start commands, abort them all, or run in the same loop turn as others.
 */
#include "daemon/cmd.h"
#include "exec/exec-internal.h"
#include "util/xalloc.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define CMD_DEFAULT_TIMEOUT_MS 60000
#define CMD_DEFAULT_MAX_OUTPUT ((size_t)1 << 20)
/* Bytes read per callback at most, so that a command writing without pause cannot keep the loop
 * from its other events (level-triggered: the rest is read on the next turn). */
#define CMD_READ_BURST ((size_t)1 << 20)
/* In the child: the report pipe's fixed number, and the first one closed. */
#define CMD_REPORT_FD 3
#define CMD_FIRST_CLOSED_FD 4

extern char **environ;

enum cmd_stage { CMD_STAGE_SETUP, CMD_STAGE_LOOKUP, CMD_STAGE_DROP, CMD_STAGE_CHDIR,
                 CMD_STAGE_EXEC };

/* What the child writes on the report pipe when it cannot exec: one write, shorter than
 * PIPE_BUF, so the daemon reads all of it or nothing. */
struct cmd_failure {
    int stage;
    int error;         /* an errno; 0 for a lookup that found no such user */
    const char *step;  /* a string literal (the same address in the daemon): what failed */
    char detail[200];  /* CMD_STAGE_LOOKUP: exec_identity_resolve's reason */
};

/* What the child needs, all prepared by the daemon: nothing is allocated after vfork. */
struct cmd_child {
    char *const *argv;
    const char *workdir;
    uint64_t nofile;
    bool as_user;
    uid_t uid;
    int out_fd, err_fd, report_fd; /* the write ends */
};

struct cmd;
struct cmd_stream {
    struct cmd *owner;
    int fd;            /* the read end, non-blocking; -1 at EOF */
    struct event *ev;
    char *buf;         /* what is kept, NUL-terminated; NULL while empty */
    size_t len, cap;
};

struct cmd {
    struct cmd *next;
    pid_t pid;         /* also its process group and session */
    bool reaped, timed_out, failed, finishing;
    int wstatus;
    size_t max_output;
    struct cmd_stream stream[2]; /* stdout, stderr */
    int report_fd;     /* -1 once the exec's outcome is known */
    struct event *report_ev, *timer, *finish;
    struct cmd_failure failure;
    char *name;        /* argv[0], for messages */
    char *workdir;     /* likewise; NULL if none */
    uid_t uid;         /* whom as_user named, likewise */
    cmd_done_fn done;
    void *arg;
};

static struct cmd *cmd_list; /* every command whose callback has not run */

/* --- the child --- */

/* Closes every descriptor from first up, with system calls only (close_range, else one by one up
 * to the limit: a kernel older than 5.9). */
static void cmd_close_from(int first)
{
    struct rlimit files;

    if (close_range((unsigned)first, ~0U, 0) == 0)
        return;
    if (getrlimit(RLIMIT_NOFILE, &files) == -1 || files.rlim_cur == RLIM_INFINITY)
        files.rlim_cur = 65536;
    for (rlim_t fd = (rlim_t)first; fd < files.rlim_cur; fd++)
        close((int)fd);
}

/* 0, 1 and 2 become /dev/null and the two pipes, the report pipe CMD_REPORT_FD (close-on-exec),
 * and nothing else stays open. Everything is first lifted above CMD_REPORT_FD, so that no dup2
 * closes a descriptor that has yet to move. Returns 0, or -1 with *step set. */
static int cmd_child_fds(const struct cmd_child *c, const char **step)
{
    int from[4] = {-1, c->out_fd, c->err_fd, c->report_fd}, lifted[4];
    const int to[4] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, CMD_REPORT_FD};

    *step = "/dev/null";
    if ((from[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1)
        return -1;
    *step = "descriptors";
    for (int i = 0; i < 4; i++)
        if ((lifted[i] = fcntl(from[i], F_DUPFD_CLOEXEC, CMD_FIRST_CLOSED_FD)) == -1)
            return -1;
    for (int i = 0; i < 3; i++)
        if (dup2(lifted[i], to[i]) == -1)
            return -1;
    if (dup3(lifted[3], CMD_REPORT_FD, O_CLOEXEC) == -1)
        return -1;
    cmd_close_from(CMD_FIRST_CLOSED_FD);
    return 0;
}

static void __attribute__((noreturn)) cmd_child(const struct cmd_child *c)
{
    struct cmd_failure failure = {.stage = CMD_STAGE_SETUP, .step = "setsid"};
    struct exec_identity identity = {.drop = false};
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    int report = c->report_fd;
    sigset_t none;
    ssize_t written;

    if (setsid() == -1)
        goto fail;
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* fails, harmlessly, for SIGKILL, SIGSTOP and libc's own */
    if (c->as_user) { /* fork, not vfork: the lookup may allocate and go through NSS */
        struct exec_spec spec = {.env = environ, .as_owner = true, .owner_uid = c->uid,
                                 .owner = "the user"};
        failure.stage = CMD_STAGE_LOOKUP;
        if (exec_identity_resolve(&spec, &identity, failure.detail, sizeof failure.detail) == -1)
            goto fail;
    }
    failure.stage = CMD_STAGE_SETUP;
    if (cmd_child_fds(c, &failure.step) == -1)
        goto fail;
    report = CMD_REPORT_FD;
    failure.stage = CMD_STAGE_DROP;
    if ((errno = exec_identity_drop(&identity, &failure.step)) != 0)
        goto fail;
    failure.stage = CMD_STAGE_CHDIR;
    if (c->workdir != NULL && chdir(c->workdir) == -1)
        goto fail;
    struct rlimit files;
    if (c->nofile > 0 && getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = (rlim_t)c->nofile;
        if (files.rlim_max != RLIM_INFINITY && files.rlim_cur > files.rlim_max)
            files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    if (identity.drop)
        environ = identity.env; /* HOME, USER, LOGNAME the owner's; execvp searches its PATH */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    failure.stage = CMD_STAGE_EXEC;
    execvp(c->argv[0], c->argv);
fail:
    failure.error = errno;
    written = write(report, &failure, sizeof failure);
    (void)written;
    _exit(127);
}

/* --- the daemon's side --- */

static void cmd_stream_close(struct cmd_stream *s)
{
    if (s->ev != NULL)
        event_free(s->ev);
    s->ev = NULL;
    if (s->fd != -1)
        close(s->fd);
    s->fd = -1;
}

static void cmd_report_close(struct cmd *c)
{
    if (c->report_ev != NULL)
        event_free(c->report_ev);
    c->report_ev = NULL;
    if (c->report_fd != -1)
        close(c->report_fd);
    c->report_fd = -1;
}

/* Frees c and everything it holds; c must be off the list. */
static void cmd_free(struct cmd *c)
{
    for (int i = 0; i < 2; i++) {
        cmd_stream_close(&c->stream[i]);
        free(c->stream[i].buf);
    }
    cmd_report_close(c);
    if (c->timer != NULL)
        event_free(c->timer);
    if (c->finish != NULL)
        event_free(c->finish);
    free(c->name);
    free(c->workdir);
    free(c);
}

/* Done once reaped with every pipe closed (at EOF, or dropped by the time limit): the callback
 * runs from the finish event, never from the caller of this (cmd_reaped, a read callback). */
static void cmd_check(struct cmd *c)
{
    if (c->finishing || !c->reaped || c->report_fd != -1 || c->stream[0].fd != -1 ||
        c->stream[1].fd != -1)
        return;
    c->finishing = true;
    event_active(c->finish, 0, 0);
}

/* Keeps what fits under max_output of n bytes just read into the stream's buffer. */
static void cmd_stream_keep(struct cmd_stream *s, const char *data, size_t n, size_t max)
{
    if (s->len >= max)
        return;
    if (n > max - s->len)
        n = max - s->len;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap > 0 ? s->cap : 4096;
        while (cap < s->len + n + 1)
            cap *= 2;
        if (cap > max + 1)
            cap = max + 1;
        s->buf = xrealloc(s->buf, cap);
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

static void cmd_on_output(evutil_socket_t fd, short what, void *arg)
{
    static char chunk[65536];
    struct cmd_stream *s = arg;
    struct cmd *c = s->owner;

    for (size_t total = 0; total < CMD_READ_BURST;) {
        ssize_t n = read(s->fd, chunk, sizeof chunk);
        if (n > 0) {
            cmd_stream_keep(s, chunk, (size_t)n, c->max_output);
            total += (size_t)n;
            continue;
        }
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN)
            return;
        /* EOF, or an error a pipe should never give: either way nothing more will come. */
        cmd_stream_close(s);
        cmd_check(c);
        return;
    }
}

static void cmd_on_report(evutil_socket_t fd, short what, void *arg)
{
    struct cmd *c = arg;
    ssize_t n;

    do
        n = read(c->report_fd, &c->failure, sizeof c->failure);
    while (n == -1 && errno == EINTR);
    if (n == -1 && errno == EAGAIN)
        return;
    if (n != 0) { /* a report; or a short one or an error, which no exec ever causes */
        c->failed = true;
        if (n != (ssize_t)sizeof c->failure)
            c->failure = (struct cmd_failure){.stage = CMD_STAGE_SETUP, .error = EIO,
                                              .step = "the child's report"};
    }
    cmd_report_close(c);
    cmd_check(c);
}

/* The time limit: the whole group is killed, and whatever holds the pipes is no longer waited
 * for. The command is done once its own process has been reaped (at once, if it already was). */
static void cmd_on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct cmd *c = arg;

    c->timed_out = true;
    /* The group outlives its leader while a member lives, and its id is not reused meanwhile. */
    kill(-c->pid, SIGKILL);
    if (!c->reaped)
        kill(c->pid, SIGKILL); /* a fork child that has not reached its setsid yet */
    for (int i = 0; i < 2; i++)
        cmd_stream_close(&c->stream[i]);
    cmd_report_close(c);
    cmd_check(c);
}

/* The reason a command could not be run (the caller frees it). */
static char *cmd_describe_failure(const struct cmd *c)
{
    const struct cmd_failure *f = &c->failure;
    const char *why = strerror(f->error);

    switch (f->stage) {
    case CMD_STAGE_LOOKUP:
        return xasprintf("%s: %.*s", c->name, (int)sizeof f->detail, f->detail);
    case CMD_STAGE_DROP:
        return xasprintf("%s: cannot run as uid %ld: %s: %s", c->name, (long)c->uid,
                         f->step != NULL ? f->step : "?", why);
    case CMD_STAGE_CHDIR:
        return xasprintf("%s: chdir %s: %s", c->name, c->workdir != NULL ? c->workdir : "?",
                         why);
    case CMD_STAGE_EXEC:
        return xasprintf("%s: %s", c->name, why);
    default:
        return xasprintf("%s: %s: %s", c->name, f->step != NULL ? f->step : "?", why);
    }
}

static void cmd_on_finish(evutil_socket_t fd, short what, void *arg)
{
    struct cmd *c = arg, **p;

    for (p = &cmd_list; *p != c; p = &(*p)->next)
        ;
    *p = c->next;
    char *error = c->failed ? cmd_describe_failure(c) : NULL;
    const struct cmd_result res = {
        .status = c->failed ? -1 : c->wstatus,
        .timed_out = c->timed_out,
        .out = c->stream[0].buf != NULL ? c->stream[0].buf : "",
        .out_len = c->stream[0].len,
        .err = c->stream[1].buf != NULL ? c->stream[1].buf : "",
        .err_len = c->stream[1].len,
        .error = error,
    };
    c->done(c->arg, &res);
    free(error);
    cmd_free(c);
}

/* Three pipes, read ends non-blocking, all close-on-exec: ends[i] = {read, write}. */
static int cmd_pipes(int ends[3][2], char **err)
{
    for (int i = 0; i < 3; i++)
        ends[i][0] = ends[i][1] = -1;
    for (int i = 0; i < 3; i++) {
        if (pipe2(ends[i], O_CLOEXEC) == -1 || fcntl(ends[i][0], F_SETFL, O_NONBLOCK) == -1) {
            *err = xasprintf("pipe: %s", strerror(errno));
            for (int j = 0; j <= i; j++)
                for (int k = 0; k < 2; k++)
                    if (ends[j][k] != -1)
                        close(ends[j][k]);
            return -1;
        }
    }
    return 0;
}

/* Forks the child (vfork unless it must look its user up) with every signal blocked meanwhile.
 * The pid, or -1 with errno. */
static pid_t cmd_fork(const struct cmd_child *child)
{
    sigset_t all, old;
    pid_t pid;

    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid = child->as_user ? fork() : vfork();
    if (pid == 0)
        cmd_child(child);
    int saved = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return pid;
}

int cmd_start(struct event_base *base, char *const argv[], const struct cmd_opts *opts,
              cmd_done_fn done, void *arg, char **err)
{
    int ends[3][2];

    if (argv == NULL || argv[0] == NULL || argv[0][0] == '\0') {
        *err = xstrdup("no command to run");
        return -1;
    }
    /* As ourselves, no lookup is needed (and none would change anything): vfork will do. */
    bool as_user = opts->as_user && opts->uid != geteuid();
    if (as_user && geteuid() != 0) {
        *err = xasprintf("%s: cannot run as uid %ld: the daemon is not root", argv[0],
                         (long)opts->uid);
        return -1;
    }
    if (cmd_pipes(ends, err) == -1)
        return -1;
    const struct cmd_child child = {
        .argv = argv, .workdir = opts->workdir, .nofile = opts->nofile, .as_user = as_user,
        .uid = opts->uid, .out_fd = ends[0][1], .err_fd = ends[1][1], .report_fd = ends[2][1],
    };
    pid_t pid = cmd_fork(&child);
    int saved = errno;
    for (int i = 0; i < 3; i++)
        close(ends[i][1]);
    if (pid == -1) {
        for (int i = 0; i < 3; i++)
            close(ends[i][0]);
        *err = xasprintf("%s: fork: %s", argv[0], strerror(saved));
        return -1;
    }

    struct cmd *c = xcalloc(1, sizeof *c);
    c->pid = pid;
    c->max_output = opts->max_output > 0 ? opts->max_output : CMD_DEFAULT_MAX_OUTPUT;
    c->name = xstrdup(argv[0]);
    c->workdir = opts->workdir != NULL ? xstrdup(opts->workdir) : NULL;
    c->uid = opts->uid;
    c->done = done;
    c->arg = arg;
    for (int i = 0; i < 2; i++) {
        struct cmd_stream *s = &c->stream[i];
        s->owner = c;
        s->fd = ends[i][0];
        s->ev = event_new(base, s->fd, EV_READ | EV_PERSIST, cmd_on_output, s);
    }
    c->report_fd = ends[2][0];
    c->report_ev = event_new(base, c->report_fd, EV_READ | EV_PERSIST, cmd_on_report, c);
    c->timer = evtimer_new(base, cmd_on_timeout, c);
    c->finish = event_new(base, -1, 0, cmd_on_finish, c);
    int64_t ms = opts->timeout_ms > 0 ? opts->timeout_ms : CMD_DEFAULT_TIMEOUT_MS;
    const struct timeval limit = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (c->stream[0].ev == NULL || c->stream[1].ev == NULL || c->report_ev == NULL ||
        c->timer == NULL || c->finish == NULL || event_add(c->stream[0].ev, NULL) == -1 ||
        event_add(c->stream[1].ev, NULL) == -1 || event_add(c->report_ev, NULL) == -1 ||
        evtimer_add(c->timer, &limit) == -1)
        fatalx("cmd_start: cannot add %s's events to the loop", argv[0]);
    c->next = cmd_list;
    cmd_list = c;
    return 0;
}

bool cmd_reaped(pid_t pid, int wstatus)
{
    for (struct cmd *c = cmd_list; c != NULL; c = c->next) {
        if (c->pid == pid && !c->reaped) {
            c->reaped = true;
            c->wstatus = wstatus;
            cmd_check(c);
            return true;
        }
    }
    return false;
}

size_t cmd_running(void)
{
    size_t n = 0;
    for (struct cmd *c = cmd_list; c != NULL; c = c->next)
        n++;
    return n;
}

void cmd_abort_all(void)
{
    struct cmd *c, *next;

    for (c = cmd_list; c != NULL; c = next) {
        next = c->next;
        if (!c->finishing) { /* a finishing one was reaped with its pipes closed: nothing left */
            kill(-c->pid, SIGKILL);
            if (!c->reaped)
                kill(c->pid, SIGKILL);
        }
        cmd_free(c);
    }
    cmd_list = NULL;
}
