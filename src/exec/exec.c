/* exec.c — the daemon's side of exec/: starting a supervisor (supervisor.c) and reading what it
 * leaves in the run directory. See exec.h for the layout of that directory. */
#include "exec/exec-internal.h"
#include "util/paths.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Waits for the word on the ready pipe (struct exec_ready: the supervisor's, once its pid file is
 * written and its status's space reserved, or the zygote's if it could not fork), and for the
 * pipe's end: then the supervisor has closed all it inherited. Returns the supervisor's pid, or
 * -1 with *err and errno set. */
static pid_t exec_wait_ready(int ready_fd, const char *run_dir, char **err)
{
    char buf[sizeof(struct exec_ready) + 1]; /* room for one byte too many, to notice it */
    size_t got = 0;
    struct exec_ready word;

    while (got < sizeof buf) {
        ssize_t n = read(ready_fd, buf + got, sizeof buf - got);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got != sizeof word) {
        *err = xasprintf("%s: the supervisor died while starting", run_dir);
        errno = ECHILD;
        return -1;
    }
    memcpy(&word, buf, sizeof word);
    if (word.error != 0 && word.pid == 0) {
        *err = xasprintf("fork: %s", strerror(word.error));
        errno = word.error;
        return -1;
    }
    if (word.error != 0) {
        *err = xasprintf("%s: the supervisor could not make its directory, pid or status"
                         " files: %s", run_dir, strerror(word.error));
        errno = word.error;
        return -1;
    }
    return word.pid;
}

/* Starts the supervisor (by the zygote, or spawn.c without one) and waits until it is settled
 * (see exec_wait_ready), so that on return run_dir/pid names it and it holds none of the
 * caller's descriptors. */
static pid_t exec_fork_supervisor(const struct exec_spec *spec, int dir_fd, int lock_fd, char **err)
{
    int ready[2];
    int wstatus;

    if (pipe2(ready, O_CLOEXEC) == -1) {
        *err = xasprintf("pipe: %s", strerror(errno));
        return -1;
    }
    int rc = exec_zygote_running() ? exec_zygote_fork(spec, dir_fd, lock_fd, ready[1], err)
                                   : EXEC_ZYGOTE_GONE;
    pid_t spawned = 0;
    /* No zygote, or one that died before it got this request (the daemon sees it go and
     * starts another): the attempt is not lost for that, it is spawned from here. */
    if (rc == EXEC_ZYGOTE_GONE) {
        spawned = exec_spawn_supervisor(spec, dir_fd, lock_fd, ready[1], err);
        rc = spawned > 0 ? 0 : -1;
    }
    close(ready[1]);
    if (rc == -1) {
        close(ready[0]);
        errno = EAGAIN; /* not the disk's doing */
        return -1;
    }
    pid_t pid = exec_wait_ready(ready[0], spec->run_dir, err);
    int error = errno;
    close(ready[0]);
    if (pid > 0)
        return pid;
    if (spawned > 0) /* ours to reap; a zygote's child is the zygote's */
        while (waitpid(spawned, &wstatus, 0) == -1 && errno == EINTR)
            ;
    errno = error;
    return -1;
}

/* Whether a supervisor of a drover before 0.5 holds the `lock` file of the run directory dir_fd
 * (it locked that file, not the directory). False when there is none, as for every attempt
 * started since. Sets errno to 0 when it returns true. */
static bool exec_legacy_lock_held(int dir_fd)
{
    int fd = openat(dir_fd, "lock", O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
    if (fd == -1)
        return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK;
    close(fd);
    if (held)
        errno = 0;
    return held;
}

/* Removes what an earlier try left (the caller holds the lock). Returns 0 or -1 with errno. */
static int exec_clear(int dir_fd)
{
    static const char *const stale[] = {"pid", "pid.tmp", "status", "status.tmp"};

    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++)
        if (unlinkat(dir_fd, stale[i], 0) == -1 && errno != ENOENT)
            return -1;
    return 0;
}

/* A task run as its owner: its run directory stays the daemon's (the pid, lock and status files
 * that the daemon trusts are where only it writes) but lets others through (0711), so that the
 * owner reaches its logs, which are its own (0600) and nobody else's. */
static int exec_open_to_owner(const struct exec_spec *spec, int dir_fd)
{
    if (!spec->as_owner || spec->owner_uid == geteuid())
        return 0;
    return fchmod(dir_fd, 0711);
}

int exec_start(const struct exec_spec *spec, pid_t *supervisor_pid, char **err)
{
    int dir_fd = -1, lock_fd = -1, error = 0;
    pid_t pid = -1;

    *err = NULL;
    if (spec->argv == NULL || spec->argv[0] == NULL || spec->argv[0][0] == '\0') {
        *err = xstrdup("empty command");
        errno = EINVAL;
        return -1;
    }
    /* A run directory made just now holds nothing stale to clear. */
    bool fresh = mkdir(spec->run_dir, 0700) == 0;
    if (!fresh && errno == ENOENT)
        fresh = paths_mkdir_p(spec->run_dir) == 0; /* its parents were missing too */
    if ((!fresh && errno != EEXIST) ||
        (dir_fd = open(spec->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) == -1 ||
        exec_open_to_owner(spec, dir_fd) == -1) {
        error = errno;
        *err = xasprintf("%s: %s", spec->run_dir, strerror(error));
        goto out;
    }
    /* The lock is the run directory itself, through a descriptor of its own (an open file
     * description apart from dir_fd's, which the supervisor's output drainer keeps): no file is
     * created for it, and a file creation is the costliest thing an attempt asks of the file
     * system. Taken before the fork, it is held from the instant the supervisor exists. */
    lock_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock_fd == -1 || flock(lock_fd, LOCK_EX | LOCK_NB) == -1 ||
        (!fresh && exec_legacy_lock_held(dir_fd))) { /* a directory made now has no lock file */
        error = lock_fd != -1 && errno == 0 ? EWOULDBLOCK : errno;
        if (lock_fd != -1 && error == EWOULDBLOCK)
            *err = xasprintf("%s: a supervisor is running there", spec->run_dir);
        else
            *err = xasprintf("%s: locking it: %s", spec->run_dir, strerror(error));
        goto out;
    }
    if (!fresh && exec_clear(dir_fd) == -1) {
        error = errno;
        *err = xasprintf("%s: removing an earlier try's files: %s", spec->run_dir,
                         strerror(error));
        goto out;
    }
    pid = exec_fork_supervisor(spec, dir_fd, lock_fd, err);
    if (pid == -1) {
        error = errno;
        exec_clear(dir_fd); /* a pid file without a supervisor would read as EXEC_LOST */
    }
out:
    /* Closing ours does not release the lock while the supervisor's copy is open. */
    if (lock_fd != -1)
        close(lock_fd);
    if (dir_fd != -1)
        close(dir_fd);
    if (pid == -1) {
        errno = error;
        return -1;
    }
    *supervisor_pid = pid;
    return 0;
}

char *exec_status_encode(const struct exec_status *status)
{
    char exec_error[sizeof status->exec_error];

    /* jansson takes UTF-8 only, and argv[0] may be any bytes. */
    snprintf(exec_error, sizeof exec_error, "%s", status->exec_error);
    json_t *check = json_string(exec_error);
    if (check == NULL)
        for (char *p = exec_error; *p != '\0'; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
    json_decref(check);

    json_t *obj = json_pack("{s:i, s:i, s:b, s:b, s:s, s:I, s:I, s:i, s:I, s:I, s:i,"
                            " s:b, s:b, s:I}",
                            "exit_code", status->exit_code, "signal", status->signal,
                            "timed_out", (int)status->timed_out, "cancelled",
                            (int)status->cancelled, "exec_error", exec_error, "start_ms",
                            (json_int_t)status->start_ms, "end_ms", (json_int_t)status->end_ms,
                            "pgid", (int)status->pgid, "stdout_truncated_at",
                            (json_int_t)status->truncated_at[0], "stderr_truncated_at",
                            (json_int_t)status->truncated_at[1], "output_errno",
                            status->output_error, "preempted", (int)status->preempted,
                            "preempt_overrun", (int)status->preempt_overrun, "preempt_ms",
                            (json_int_t)status->preempt_ms);
    if (obj == NULL)
        fatalx("exec_status_encode: json_pack failed");
    char *json = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (json == NULL)
        fatalx("exec_status_encode: out of memory");
    char *text = xasprintf("%s\n", json);
    free(json);
    return text;
}

/* Reads run_dir/status into *status. Returns 0, or -1 if it is missing or unreadable. */
static int exec_status_read(const char *run_dir, struct exec_status *status)
{
    char *path = xasprintf("%s/status", run_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    free(path);
    if (fd == -1)
        return -1;
    /* One read (json_loadfd would read a byte at a time): a record is far below the reserve. */
    char text[EXEC_STATUS_RESERVE + 1];
    ssize_t n;
    while ((n = read(fd, text, sizeof text)) == -1 && errno == EINTR)
        ;
    close(fd);
    json_t *obj = n > 0 && n < (ssize_t)sizeof text ? json_loadb(text, (size_t)n, 0, NULL) : NULL;
    if (obj == NULL)
        return -1;

    int exit_code, sig, timed_out, cancelled, pgid, output_error = 0, preempted = 0, overrun = 0;
    json_int_t start_ms, end_ms, cut_out = -1, cut_err = -1, preempt_ms = 0;
    const char *exec_error;
    /* The output fields are optional: a supervisor of an older drover may still be running. */
    int rc = json_unpack(obj, "{s:i, s:i, s:b, s:b, s:s, s:I, s:I, s:i, s?:I, s?:I, s?:i,"
                              " s?:b, s?:b, s?:I}",
                         "exit_code", &exit_code, "signal", &sig, "timed_out", &timed_out,
                         "cancelled", &cancelled, "exec_error", &exec_error, "start_ms",
                         &start_ms, "end_ms", &end_ms, "pgid", &pgid, "stdout_truncated_at",
                         &cut_out, "stderr_truncated_at", &cut_err, "output_errno",
                         &output_error, "preempted", &preempted, "preempt_overrun", &overrun,
                         "preempt_ms", &preempt_ms);
    if (rc == 0) {
        memset(status, 0, sizeof *status);
        status->exit_code = exit_code;
        status->signal = sig;
        status->timed_out = timed_out;
        status->cancelled = cancelled;
        snprintf(status->exec_error, sizeof status->exec_error, "%s", exec_error);
        status->start_ms = start_ms;
        status->end_ms = end_ms;
        status->pgid = pgid;
        status->truncated_at[0] = cut_out;
        status->truncated_at[1] = cut_err;
        status->output_error = output_error;
        status->preempted = preempted;
        status->preempt_overrun = overrun;
        status->preempt_ms = preempt_ms;
    }
    json_decref(obj);
    return rc == 0 ? 0 : -1;
}

/* Parses run_dir/pid. Returns 0, or -1 if it is missing or malformed. */
static int exec_pid_read(const char *run_dir, pid_t *supervisor, pid_t *pgid, struct stat *st)
{
    char *path = xasprintf("%s/pid", run_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    free(path);
    if (fd == -1)
        return -1;
    char line[64];
    ssize_t n = read(fd, line, sizeof line - 1);
    int rc = st != NULL ? fstat(fd, st) : 0;
    close(fd);
    if (n <= 0 || rc == -1)
        return -1;
    line[n] = '\0';

    long first, second;
    if (sscanf(line, "%ld %ld", &first, &second) != 2 || first <= 0 || second < 0)
        return -1;
    *supervisor = (pid_t)first;
    *pgid = (pid_t)second;
    return 0;
}

static bool exec_file_exists(const char *run_dir, const char *name)
{
    char *path = xasprintf("%s/%s", run_dir, name);
    bool exists = access(path, F_OK) == 0;
    free(path);
    return exists;
}

enum exec_probe exec_probe(const char *run_dir, struct exec_status *status)
{
    if (exec_status_read(run_dir, status) == 0)
        return EXEC_DONE;

    int fd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* Shared: two probes at once must not take each other for a supervisor. */
    if (fd != -1 && ((flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK) ||
                     exec_legacy_lock_held(fd))) {
        close(fd);
        return EXEC_RUNNING;
    }
    /* No supervisor here; one may have written its status just before it went. */
    enum exec_probe result;
    if (exec_status_read(run_dir, status) == 0)
        result = EXEC_DONE;
    else if (exec_file_exists(run_dir, "pid"))
        result = EXEC_LOST;
    else
        result = EXEC_NOT_STARTED;
    if (fd != -1)
        close(fd);
    return result;
}

pid_t exec_task_pgid(const char *run_dir)
{
    pid_t supervisor, pgid;

    return exec_pid_read(run_dir, &supervisor, &pgid, NULL) == 0 ? pgid : 0;
}

pid_t exec_supervisor_pid(const char *run_dir)
{
    pid_t supervisor, pgid;

    return exec_pid_read(run_dir, &supervisor, &pgid, NULL) == 0 ? supervisor : -1;
}

/* Sends sig to the supervisor running in run_dir. */
static int exec_signal_supervisor(const char *run_dir, int sig)
{
    struct exec_status status;

    if (exec_probe(run_dir, &status) != EXEC_RUNNING)
        return -1;
    pid_t pid = exec_supervisor_pid(run_dir);
    if (pid <= 0 || kill(pid, sig) == -1)
        return -1;
    return 0;
}

int exec_cancel(const char *run_dir)
{
    return exec_signal_supervisor(run_dir, SIGTERM);
}

int exec_preempt(const char *run_dir)
{
    return exec_signal_supervisor(run_dir, SIGUSR1);
}

/* Whether a file last modified at mtime was written before this boot: then every process it
 * names is long gone, and its numbers may belong to strangers. */
static bool exec_before_boot(const struct timespec *mtime)
{
    struct timespec now, up;

    clock_gettime(CLOCK_REALTIME, &now);
    clock_gettime(CLOCK_BOOTTIME, &up);
    /* A second of slack: the two clocks were read one after the other. */
    return mtime->tv_sec + 1 < now.tv_sec - up.tv_sec;
}

uint64_t exec_disk_reserve(uint64_t total)
{
    const uint64_t most = 8ULL << 20, block = 4096;
    uint64_t reserve = total / 16 < most ? total / 16 : most;
    reserve -= reserve % block;
    return reserve > block ? reserve : block;
}

void exec_kill_orphans(const char *run_dir)
{
    pid_t supervisor, pgid;
    struct stat st;

    if (exec_pid_read(run_dir, &supervisor, &pgid, &st) == -1 || pgid <= 0)
        return;
    if (exec_before_boot(&st.st_mtim))
        return;
    kill(-pgid, SIGKILL);
}
