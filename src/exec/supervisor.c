/* supervisor.c — the supervisor: `drover __supervise`, spawned by exec_start (spawn.c), and the
 * task's parent.
 *
 * It runs no daemon code. Its first acts are to reset every signal, leave the daemon's session,
 * close every descriptor it inherited but three and reserve the space of its status; then it forks
 * the task, relays its output (relay.c) and waits for it under the time limit and the cancel
 * signal, writes the status into the reserved space and leaves, with _exit only.
 */
#include "exec/exec-internal.h"
#include "util/io.h"
#include "util/paths.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The descriptors the supervisor keeps, at fixed numbers, all close-on-exec: the task gets none. */
enum {
    SUPERVISOR_LOCK_FD = 3,  /* run_dir/lock, flock()ed: the lock goes when the supervisor does */
    SUPERVISOR_DIR_FD = 4,   /* run_dir: every file is opened relative to it */
    SUPERVISOR_READY_FD = 5, /* exec_start waits on it; closed once the pid file is written */
    SUPERVISOR_FIRST_FREE_FD = 6,
};

#define SUPERVISOR_DEFAULT_GRACE_MS 10000
#define SUPERVISOR_DEFAULT_PREEMPT_GRACE_MS 60000

/* Where the task child failed before exec; it sends this through its close-on-exec pipe. */
enum supervisor_stage {
    STAGE_SETSID,
    STAGE_STDIN,
    STAGE_STDOUT,
    STAGE_STDERR,
    STAGE_IDENTITY,
    STAGE_CHDIR,
    STAGE_EXEC,
};

struct supervisor_failure {
    int stage;
    int error;
    const char *step; /* STAGE_IDENTITY: which call (a string literal) */
};

enum supervisor_phase {
    PHASE_RUNNING,     /* deadline_ms: the time limit */
    PHASE_TERMINATING, /* SIGTERM (or the preemption signal) sent; deadline_ms: the end of the
                        * grace */
    PHASE_KILLED,      /* SIGKILL sent; no deadline */
};

struct supervisor {
    const struct exec_spec *spec;
    pid_t task; /* the task's pid, which is its pgid too; 0 if it never ran */
    enum supervisor_phase phase;
    int64_t deadline_ms; /* CLOCK_MONOTONIC; -1 for none */
    int status_fd;       /* status.tmp, reserved at start; -1 once written */
    int signal_fd;       /* SIGCHLD, SIGTERM, SIGINT, SIGUSR1 */
    struct relay relay;  /* the task's output */
    struct exec_identity identity; /* whom the task runs as (identity.c) */
    struct exec_status status;
};

static int64_t supervisor_clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Moves the three kept descriptors to their fixed numbers, closes all others, and points 0, 1 and
 * 2 at /dev/null: a surviving supervisor must not hold the daemon's socket, database or lock. */
static int supervisor_setup_fds(int lock_fd, int dir_fd, int ready_fd)
{
    const int from[3] = {lock_fd, dir_fd, ready_fd};
    const int to[3] = {SUPERVISOR_LOCK_FD, SUPERVISOR_DIR_FD, SUPERVISOR_READY_FD};
    int high[3];

    /* Lift all three above the fixed numbers first, so that no dup3 onto a fixed number closes
     * one that has yet to move. */
    for (int i = 0; i < 3; i++)
        if ((high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, SUPERVISOR_FIRST_FREE_FD)) == -1)
            return -1;
    for (int i = 0; i < 3; i++)
        if (dup3(high[i], to[i], O_CLOEXEC) == -1)
            return -1;
    io_close_from(SUPERVISOR_FIRST_FREE_FD);

    int null = open("/dev/null", O_RDWR);
    if (null == -1)
        return -1;
    for (int fd = 0; fd <= 2; fd++)
        if (fd != null && dup2(null, fd) == -1)
            return -1;
    if (null > 2)
        close(null);
    return 0;
}

/* Replaces run_dir/name with data through name.tmp and a rename. durable: fsync the file before
 * and the directory after, so that after a crash name holds all of data or its old self. Returns
 * 0 or an errno. */
static int supervisor_write_file(const char *name, const char *data, size_t len, bool durable)
{
    char tmp[32];
    int error;

    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int fd = openat(SUPERVISOR_DIR_FD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd == -1)
        return errno;
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            goto fail;
        data += n;
        len -= (size_t)n;
    }
    if (durable && fsync(fd) == -1)
        goto fail;
    if (close(fd) == -1)
        return errno;
    if (renameat(SUPERVISOR_DIR_FD, tmp, SUPERVISOR_DIR_FD, name) == -1)
        return errno;
    if (durable && fsync(SUPERVISOR_DIR_FD) == -1)
        return errno;
    return 0;
fail:
    error = errno;
    close(fd);
    unlinkat(SUPERVISOR_DIR_FD, tmp, 0);
    return error;
}

/* Writes "<supervisor pid> <task pgid>\n" over the pid file in place, in one fixed-width write:
 * a reader sees the old line or the new one, never a mix, and no temporary file is created per
 * update (file creation is a large part of an attempt's cost; docs/BENCHMARKS.md). Returns 0 or
 * an errno. */
static int supervisor_write_pids(pid_t supervisor, pid_t task)
{
    char line[64];
    int len = snprintf(line, sizeof line, "%10ld %10ld\n", (long)supervisor, (long)task);
    int fd = openat(SUPERVISOR_DIR_FD, "pid", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd == -1)
        return errno;
    int error = pwrite(fd, line, (size_t)len, 0) == len ? 0 : errno ? errno : EIO;
    close(fd);
    return error;
}

static int supervisor_write_pid(pid_t task)
{
    return supervisor_write_pids(getpid(), task);
}

/* Reserves the status's space: status.tmp, EXEC_STATUS_RESERVE bytes of whitespace (written, not
 * fallocate()d: an overwrite of written blocks needs no allocation, while an fallocate()d extent
 * must still be converted when written). Returns 0 or an errno. */
static int supervisor_reserve_status(struct supervisor *sup)
{
    char pad[EXEC_STATUS_RESERVE];

    memset(pad, ' ', sizeof pad);
    pad[sizeof pad - 1] = '\n';
    sup->status_fd = openat(SUPERVISOR_DIR_FD, "status.tmp",
                            O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
    if (sup->status_fd == -1)
        return errno;
    if (pwrite(sup->status_fd, pad, sizeof pad, 0) != (ssize_t)sizeof pad) {
        int error = errno ? errno : ENOSPC;
        close(sup->status_fd);
        sup->status_fd = -1;
        return error;
    }
    return 0;
}

/* Writes text into the reserved status.tmp, makes it durable and renames it to status. Returns 0
 * or an errno. */
static int supervisor_fill_status(struct supervisor *sup, const char *text, size_t len)
{
    if (pwrite(sup->status_fd, text, len, 0) != (ssize_t)len)
        return errno ? errno : EIO;
    /* Were the truncation to fail, the rest is whitespace, which a JSON reader skips. */
    if (ftruncate(sup->status_fd, (off_t)len) == -1) {
        /* harmless: see above */
    }
    if (fsync(sup->status_fd) == -1)
        return errno;
    close(sup->status_fd);
    sup->status_fd = -1;
    if (renameat(SUPERVISOR_DIR_FD, "status.tmp", SUPERVISOR_DIR_FD, "status") == -1)
        return errno;
    return fsync(SUPERVISOR_DIR_FD) == -1 ? errno : 0;
}

/* The status, into its reserved space. Should even that fail (a file system that allocates on
 * overwrite, like btrfs), the supervisor keeps the status and tries again every second, holding
 * its lock: the attempt reads as running, never as lost, until the status is on disk. */
static void supervisor_write_status(struct supervisor *sup)
{
    char *text = exec_status_encode(&sup->status);
    size_t len = strlen(text);
    struct timespec second = {1, 0};

    while ((sup->status_fd != -1 ? supervisor_fill_status(sup, text, len)
                                 : supervisor_write_file("status", text, len, true)) != 0)
        nanosleep(&second, NULL);
    free(text);
}

/* Opens path (relative to dir) as descriptor target. */
static int supervisor_redirect(int dir, const char *path, int flags, int target)
{
    int fd = openat(dir, path, flags | O_CLOEXEC, 0600);
    if (fd == -1)
        return -1;
    /* The opened fd cannot be target: 0, 1 and 2 are open (/dev/null) in the supervisor. */
    int rc = dup2(fd, target);
    close(fd);
    return rc == -1 ? -1 : 0;
}

/* The task child: its own session and group, its output pipes, its directory, a clean signal
 * state, its umask and environment, then exec. Anything failing goes down report_fd as a
 * supervisor_failure. */
static void __attribute__((noreturn)) supervisor_task(const struct exec_spec *spec,
                                                      const struct exec_identity *identity,
                                                      const struct relay *relay, int report_fd)
{
    static char *const no_env[] = {NULL};
    struct supervisor_failure failure = {STAGE_SETSID, 0, NULL};
    char *const *env = identity->drop ? identity->env : spec->env;
    sigset_t none;
    ssize_t written;
    int out, err;

    if (setsid() == -1)
        goto fail;
    /* The group is on disk before any of the task runs: a kill -9 of the supervisor at any
     * moment after leaves a group exec_kill_orphans finds. (vfork: the supervisor is suspended
     * until the exec, and writes the same line again after it.) */
    supervisor_write_pids(getppid(), getpid());
    failure.stage = STAGE_STDIN;
    if (supervisor_redirect(AT_FDCWD, "/dev/null", O_RDONLY, STDIN_FILENO) == -1)
        goto fail;
    /* The pipes' ends are close-on-exec; their copies at 1 and 2 are not. */
    relay_task_fds(relay, &out, &err);
    failure.stage = STAGE_STDOUT;
    if (dup2(out, STDOUT_FILENO) == -1)
        goto fail;
    failure.stage = STAGE_STDERR;
    if (dup2(err, STDERR_FILENO) == -1)
        goto fail;
    /* The owner's identity before anything of the task, its directory included: the chdir is
     * the owner's own (a directory only root may enter stays shut). */
    failure.stage = STAGE_IDENTITY;
    if ((errno = exec_identity_drop(identity, &failure.step)) != 0)
        goto fail;
    failure.stage = STAGE_CHDIR;
    if (chdir(spec->workdir != NULL ? spec->workdir : "/") == -1)
        goto fail;
    /* Dispositions are already the defaults (see supervisor_run); the mask is not. */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (spec->set_umask)
        umask(spec->task_umask);
    struct rlimit files;
    if (spec->task_nofile > 0 && getrlimit(RLIMIT_NOFILE, &files) == 0 &&
        files.rlim_cur != (rlim_t)spec->task_nofile) {
        files.rlim_cur = (rlim_t)spec->task_nofile;
        if (files.rlim_max != RLIM_INFINITY && files.rlim_cur > files.rlim_max)
            files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    /* execvpe() searches the PATH of environ, not the one in the envp it is given: make the task's
     * environment ours, so that the search uses the task's PATH. */
    environ = env != NULL ? (char **)env : (char **)no_env;
    failure.stage = STAGE_EXEC;
    execvp(spec->argv[0], spec->argv);
fail:
    failure.error = errno;
    written = write(report_fd, &failure, sizeof failure);
    (void)written;
    _exit(127);
}

static void supervisor_describe_failure(struct supervisor *sup,
                                        const struct supervisor_failure *failure)
{
    char *buf = sup->status.exec_error;
    size_t size = sizeof sup->status.exec_error;
    const char *why = strerror(failure->error);

    switch (failure->stage) {
    case STAGE_SETSID:
        snprintf(buf, size, "setsid: %s", why);
        break;
    case STAGE_STDIN:
        snprintf(buf, size, "/dev/null: %s", why);
        break;
    case STAGE_STDOUT:
        snprintf(buf, size, "stdout: %s", why);
        break;
    case STAGE_STDERR:
        snprintf(buf, size, "stderr: %s", why);
        break;
    case STAGE_IDENTITY:
        snprintf(buf, size, "cannot run as %s (uid %ld): %s: %s",
                 sup->spec->owner != NULL ? sup->spec->owner : "?", (long)sup->identity.uid,
                 failure->step != NULL ? failure->step : "?", why);
        break;
    case STAGE_CHDIR:
        snprintf(buf, size, "chdir %s: %s", sup->spec->workdir, why);
        break;
    default:
        snprintf(buf, size, "%s: %s", sup->spec->argv[0], why);
        break;
    }
}

static pid_t supervisor_waitpid(pid_t pid, int *wstatus, int flags)
{
    pid_t rc;

    do
        rc = waitpid(pid, wstatus, flags);
    while (rc == -1 && errno == EINTR);
    if (rc == -1)
        fatalx("supervisor: waitpid %ld: %s", (long)pid, strerror(errno));
    return rc;
}

/* Forks the task and learns whether its exec worked. On success sup->task is set and the time
 * limit is running; otherwise status.exec_error says why. */
static void supervisor_spawn(struct supervisor *sup)
{
    struct supervisor_failure failure;
    int report[2];
    ssize_t n;

    sup->status.start_ms = supervisor_clock_ms(CLOCK_REALTIME);
    int64_t started = supervisor_clock_ms(CLOCK_MONOTONIC);
    if (pipe2(report, O_CLOEXEC) == -1) {
        snprintf(sup->status.exec_error, sizeof sup->status.exec_error, "pipe: %s",
                 strerror(errno));
        return;
    }
    /* vfork: the task shares our pages until it execs, so no page table is copied (a fork here
     * costs about a millisecond on a virtual machine). The child only makes system calls, sets
     * environ (ours too, which we no longer use) and leaves by exec or _exit. */
    pid_t pid = vfork();
    if (pid == 0)
        supervisor_task(sup->spec, &sup->identity, &sup->relay, report[1]);
    close(report[1]);
    relay_started(&sup->relay);
    if (pid == -1) {
        snprintf(sup->status.exec_error, sizeof sup->status.exec_error, "fork: %s",
                 strerror(errno));
        close(report[0]);
        return;
    }
    /* Recorded again (the task wrote it before its exec), before the exec's outcome: a kill -9
     * of the supervisor from here on leaves a group that exec_kill_orphans can find. (Should both
     * writes fail, the file keeps pgid 0 and only the orphan kill is lost; the status still
     * comes.) */
    sup->status.pgid = pid;
    supervisor_write_pid(pid);

    do
        n = read(report[0], &failure, sizeof failure);
    while (n == -1 && errno == EINTR);
    close(report[0]);
    if (n == (ssize_t)sizeof failure) {
        int wstatus;
        supervisor_describe_failure(sup, &failure);
        supervisor_waitpid(pid, &wstatus, 0);
        return;
    }
    /* EOF: the exec closed the pipe. From here on the group exists (setsid came before exec). */
    sup->task = pid;
    sup->phase = PHASE_RUNNING;
    sup->deadline_ms = sup->spec->timeout_ms > 0 ? started + sup->spec->timeout_ms : -1;
}

/* The time limit or a cancel: SIGTERM to the group, SIGKILL when the grace is over. */
static void supervisor_terminate(struct supervisor *sup, bool *cause, int64_t now)
{
    int64_t grace = sup->spec->grace_ms > 0 ? sup->spec->grace_ms : SUPERVISOR_DEFAULT_GRACE_MS;

    *cause = true;
    kill(-sup->task, SIGTERM);
    kill(-sup->task, SIGCONT); /* a stopped process would sit on its SIGTERM */
    sup->phase = PHASE_TERMINATING;
    sup->deadline_ms = now + grace;
}

/* A preemption (SIGUSR1 from the daemon): the task's own signal to its group, so that it saves
 * a checkpoint and exits, and SIGKILL when its preemption grace is over. The time limit no
 * longer runs: the task is stopping either way. */
static void supervisor_preempt(struct supervisor *sup, int64_t now)
{
    int sig = sup->spec->preempt_signal > 0 ? sup->spec->preempt_signal : SIGTERM;
    int64_t grace = sup->spec->preempt_grace_ms > 0 ? sup->spec->preempt_grace_ms
                                                    : SUPERVISOR_DEFAULT_PREEMPT_GRACE_MS;

    sup->status.preempted = true;
    sup->status.preempt_ms = supervisor_clock_ms(CLOCK_REALTIME);
    kill(-sup->task, sig);
    kill(-sup->task, SIGCONT);
    sup->phase = PHASE_TERMINATING;
    sup->deadline_ms = now + grace;
}

static void supervisor_deadline(struct supervisor *sup, int64_t now)
{
    if (sup->phase == PHASE_RUNNING) {
        supervisor_terminate(sup, &sup->status.timed_out, now);
        return;
    }
    if (sup->status.preempted)
        sup->status.preempt_overrun = true;
    kill(-sup->task, SIGKILL);
    sup->phase = PHASE_KILLED;
    sup->deadline_ms = -1;
}

/* The signals the supervisor waits for (through its signalfd), blocked for its whole life.
 * SIGXFSZ too: a log over RLIMIT_FSIZE is a failed write (EFBIG), not the supervisor's death. */
static void supervisor_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGXFSZ);
}

/* Reads what the signalfd holds: a cancel (SIGTERM, SIGINT) starts the termination, a
 * preemption (SIGUSR1) the task's yielding. Either only while the task runs undisturbed: a cancel
 * during a preemption leaves it a preemption (the daemon's core knows the task is cancelled).
 * SIGCHLD needs nothing here: the loop calls waitpid after every wake. */
static void supervisor_read_signals(struct supervisor *sup, int64_t now)
{
    struct signalfd_siginfo si;

    while (read(sup->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (sup->phase != PHASE_RUNNING)
            continue;
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            supervisor_terminate(sup, &sup->status.cancelled, now);
        else if (si.ssi_signo == SIGUSR1)
            supervisor_preempt(sup, now);
    }
}

/* Waits for the task's main process, relaying its output and meeting the deadlines and
 * SIGTERM/SIGINT (a cancel) and SIGUSR1 (a preemption) on the way: one poll on the two pipes and
 * the signalfd. */
static void supervisor_wait(struct supervisor *sup)
{
    int wstatus;

    while (supervisor_waitpid(sup->task, &wstatus, WNOHANG) == 0) {
        int64_t now = supervisor_clock_ms(CLOCK_MONOTONIC);
        if (sup->deadline_ms >= 0 && now >= sup->deadline_ms) {
            supervisor_deadline(sup, now);
            continue;
        }
        struct pollfd fds[3];
        relay_poll_fds(&sup->relay, fds);
        fds[2] = (struct pollfd){.fd = sup->signal_fd, .events = POLLIN};
        int64_t left = sup->deadline_ms < 0 ? -1 : sup->deadline_ms - now;
        if (poll(fds, 3, left > INT32_MAX ? INT32_MAX : (int)left) == -1 && errno != EINTR)
            fatalx("supervisor: poll: %s", strerror(errno));
        for (int i = 0; i < 2; i++)
            if (fds[i].revents != 0)
                relay_pump(&sup->relay, i);
        if (fds[2].revents != 0) /* a grace counts from now, not from before the poll */
            supervisor_read_signals(sup, supervisor_clock_ms(CLOCK_MONOTONIC));
    }
    /* What we stopped goes entirely, grandchildren included; a task that ended by itself may
     * leave what it chose to leave. */
    if (sup->phase != PHASE_RUNNING)
        kill(-sup->task, SIGKILL);
    if (WIFEXITED(wstatus)) {
        sup->status.exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        sup->status.signal = WTERMSIG(wstatus);
    }
}

/* Pipes and signals for the task; on failure the status says why and no task runs. */
static int supervisor_prepare(struct supervisor *sup)
{
    sigset_t waited;
    int error;

    supervisor_signals(&waited);
    sup->signal_fd = signalfd(-1, &waited, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sup->signal_fd == -1) {
        snprintf(sup->status.exec_error, sizeof sup->status.exec_error, "signalfd: %s",
                 strerror(errno));
        return -1;
    }
    if (exec_identity_resolve(sup->spec, &sup->identity, sup->status.exec_error,
                              sizeof sup->status.exec_error) == -1)
        return -1;
    if ((error = relay_open(&sup->relay, SUPERVISOR_DIR_FD)) != 0) {
        snprintf(sup->status.exec_error, sizeof sup->status.exec_error, "pipe: %s",
                 strerror(error));
        return -1;
    }
    /* The logs are the owner's: readable by it alone (the run directory lets it through). */
    for (int i = 0; i < 2 && sup->identity.drop; i++)
        if (sup->relay.stream[i].log_fd != -1 &&
            fchown(sup->relay.stream[i].log_fd, sup->identity.uid, sup->identity.gid) == -1) {
            snprintf(sup->status.exec_error, sizeof sup->status.exec_error,
                     "giving the log to uid %ld: %s", (long)sup->identity.uid, strerror(errno));
            return -1;
        }
    return 0;
}

void supervisor_run(const struct exec_spec *spec, int lock_fd, int dir_fd, int ready_fd)
{
    struct supervisor sup = {.spec = spec, .deadline_ms = -1, .status_fd = -1, .signal_fd = -1,
                             .status.exit_code = -1};
    sigset_t waited;
    ssize_t written;

    relay_init(&sup.relay);
    /* Entered with every signal blocked and every disposition the default: its two makers see
     * to both (spawn.c's posix_spawn with POSIX_SPAWN_SETSIGDEF, and the zygote, itself spawned
     * so and installing no handler); resetting all 64 here cost 64 system calls a task. */
    if (setsid() == -1 || supervisor_setup_fds(lock_fd, dir_fd, ready_fd) == -1)
        _exit(127); /* exec_start sees the ready pipe close without a word */
    /* Before the word: an attempt that starts has the room for its end (or never starts), and
     * the directory its spec asks for. */
    int error = spec->make_dir != NULL && paths_mkdir_p(spec->make_dir) == -1 ? errno : 0;
    if (error == 0)
        error = supervisor_write_pid(0);
    if (error == 0)
        error = supervisor_reserve_status(&sup);
    struct exec_ready word = {error, (int32_t)getpid()};
    written = write(SUPERVISOR_READY_FD, &word, sizeof word);
    (void)written;
    close(SUPERVISOR_READY_FD);
    if (error != 0)
        _exit(127);
    /* If the daemon died while waiting for that word, the write raised SIGPIPE, pending while
     * every signal is blocked: drain it, or unblocking below would kill us before the task
     * starts (the task must outlive the daemon). */
    sigset_t pipe_only;
    struct timespec no_wait = {0, 0};
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    while (sigtimedwait(&pipe_only, NULL, &no_wait) == SIGPIPE)
        ;

    supervisor_signals(&waited);
    sigprocmask(SIG_SETMASK, &waited, NULL);
    if (supervisor_prepare(&sup) == 0)
        supervisor_spawn(&sup);
    if (sup.task > 0)
        supervisor_wait(&sup);
    const int not_for_drainer[] = {SUPERVISOR_LOCK_FD, sup.status_fd, sup.signal_fd};
    relay_finish(&sup.relay, not_for_drainer, 3);
    relay_result(&sup.relay, &sup.status);
    sup.status.end_ms = supervisor_clock_ms(CLOCK_REALTIME);
    supervisor_write_status(&sup);
    _exit(0);
}
