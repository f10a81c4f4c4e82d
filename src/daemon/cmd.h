/* Short external commands (Slurm's sbatch, squeue, scontrol, scancel) run from the daemon's
 * libevent loop without ever blocking it.
 *
 * A command is a child in its own session and process group, stdin /dev/null, stdout and stderr
 * on non-blocking pipes read by events on the loop, a time limit on an evtimer (SIGKILL to the
 * group), and its exit learnt from the daemon's one reaper: daemon_reap collects every child with
 * waitpid(-1, WNOHANG) and hands each pid to cmd_reaped. A command completes when it has been
 * reaped AND both pipes are at EOF (a grandchild that keeps a pipe open holds it until then) —
 * or, after the time limit killed its group, as soon as it has been reaped. Its callback then
 * runs from an event of its own: never from inside cmd_start or cmd_reaped.
 *
 * Cost: one fork (vfork unless as_user), four descriptors and two buffers of at most max_output
 * bytes per running command; every operation on the set is O(running commands).
 */
#ifndef DROVER_DAEMON_CMD_H
#define DROVER_DAEMON_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;

struct cmd_opts {
    int64_t timeout_ms;     /* kill (SIGKILL to its process group) after this; 0 = 60 s */
    size_t max_output;      /* bytes kept of stdout and of stderr each; 0 = 1 MiB; more is dropped
                             * (still read, so the child never blocks on a full pipe) */
    bool as_user;           /* run as uid (its groups, HOME/USER/LOGNAME); only when root */
    uid_t uid;
    const char *workdir;    /* the command's working directory (entered after the drop to uid);
                             * NULL = the daemon's. sbatch makes it the job's default one */
    uint64_t nofile;        /* the command's soft RLIMIT_NOFILE; 0 = the daemon's (raised to serve
                             * many clients; sbatch hands its limits on to the job) */
};

struct cmd_result {
    int status;             /* wait status (WIFEXITED…), or -1 when it could not be run at all */
    bool timed_out;         /* killed by the timeout (its group was; status may still say it
                             * exited, when only a grandchild held the pipes) */
    const char *out;        /* stdout, NUL-terminated (len out_len); valid during the callback */
    size_t out_len;
    const char *err;        /* stderr, likewise */
    size_t err_len;
    const char *error;      /* status -1, or exec failed: why ("sbatch: No such file or directory") */
};

typedef void (*cmd_done_fn)(void *arg, const struct cmd_result *res);

/* Runs argv (argv[0] searched in PATH; stdin /dev/null; the daemon's environment; in its own
 * process group; every other descriptor closed) and calls done once, from the loop, when it has
 * exited AND both pipes are at EOF (or the timeout killed it). Returns 0, or -1 with a malloc'd
 * reason in *err (then done is never called). An exec failure is reported through done (status
 * -1, error set), never as a child that "exited 127". argv and opts are copied: the caller's may
 * go once this returns. done may call cmd_start again. */
int cmd_start(struct event_base *base, char *const argv[], const struct cmd_opts *opts,
              cmd_done_fn done, void *arg, char **err);

/* daemon_reap hands every pid it collected: returns true if it was a command's (consumed). */
bool cmd_reaped(pid_t pid, int wstatus);

/* Commands still running (started, their callback not yet called). */
size_t cmd_running(void);

/* At shutdown: kill every running command's group, free everything, call no callback. The
 * killed children are not waited for here (a child stuck in the kernel must not hold up the
 * shutdown): the caller's reaper, or init once the daemon has exited, collects them. */
void cmd_abort_all(void);

#endif
