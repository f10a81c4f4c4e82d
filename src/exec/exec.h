/* exec/ — running one attempt of a task under a supervisor process.
 *
 * Each attempt has a run directory ($DROVER_HOME/runs/<task>/<attempt>/), itself flock()ed by the
 * supervisor for its whole life ("is it alive?" without pids; through a descriptor of its own, so
 * no lock file is created per attempt: drover before 0.5 locked a file named `lock` there, which
 * exec_probe still honours for supervisors started by it), holding:
 *   pid     "<supervisor pid> <task pgid>\n", written by the supervisor (pgid 0 until forked)
 *   stdout, stderr   the task's output, relayed by the supervisor from pipes (exec/relay.c)
 *   status.tmp       space for the status, reserved when the supervisor starts
 *   status  JSON, written into status.tmp, fsync'ed and renamed into place before the supervisor
 *           exits: the only file exec_probe reads a status from
 *
 * The supervisor is a fork of the zygote (exec/zygote.c) that runs no daemon code: it closes every
 * inherited descriptor but the lock, the run directory and the ready pipe, starts its own session, forks the task into a new session
 * and process group (argv exec'd directly, PATH searched with the task's environment, its stdout
 * and stderr pipes that the supervisor drains into the logs), enforces
 * the time limit (SIGTERM to the group, SIGKILL after the grace period, grandchildren included),
 * forwards a cancel (SIGTERM to the supervisor) the same way, writes the status and exits.
 * The daemon is not its only witness: when the daemon dies, the supervisor and task run on, and
 * a restarted daemon learns the outcome from the run directory.
 */
#ifndef DROVER_EXEC_H
#define DROVER_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct exec_spec {
    int64_t task_id;
    int attempt;
    char *const *argv;        /* NULL-terminated, argv[0] non-empty */
    char *const *env;         /* NULL-terminated "K=V": the task's whole environment */
    const char *workdir;      /* the task's working directory; NULL = "/" */
    const char *run_dir;      /* created by exec_start if missing (parents included) */
    const char *make_dir;     /* NULL, or a directory the supervisor makes (0700, parents
                               * included; one that exists is fine) before it reports ready: a
                               * failure fails exec_start with its errno. The task's checkpoint
                               * directory: made there, its inode is not the daemon's to pay */
    int64_t timeout_ms;       /* 0 = none */
    int64_t grace_ms;         /* SIGTERM -> SIGKILL delay; 0 = 10 s */
    int preempt_signal;       /* what asks the task to yield (exec_preempt); 0 = SIGTERM */
    int64_t preempt_grace_ms; /* how long it has to exit once asked, then SIGKILL; 0 = 60 s */
    bool set_umask;           /* the task gets task_umask (else the supervisor's) */
    mode_t task_umask;
    uint64_t task_nofile;     /* the task's soft RLIMIT_NOFILE (the daemon raises its own to
                               * serve many clients; tasks get the user's); 0 = the supervisor's */
    bool as_owner;            /* run the task as owner_uid (exec/identity.c): its groups, HOME,
                               * USER, LOGNAME; the logs become its, the run directory 0711.
                               * Nothing changes when owner_uid is the supervisor's own uid */
    uid_t owner_uid;
    const char *owner;        /* the owner's name, for messages; may be NULL */
};

/* Starts the supervisor. On success returns 0 and its pid (a child of the caller, to reap with
 * waitpid). On failure returns -1 with a malloc'd reason in *err (the caller frees it) and errno
 * set: ENOSPC or EDQUOT when the run directory's file system is full (nothing of the attempt
 * ran; exec_probe reads it as never started). */
int exec_start(const struct exec_spec *spec, pid_t *supervisor_pid, char **err);

struct exec_status {
    int exit_code;            /* -1 if killed by a signal or never executed */
    int signal;               /* 0 if it exited */
    bool timed_out;           /* the time limit killed it */
    bool cancelled;           /* a cancel (SIGTERM to the supervisor) killed it */
    bool preempted;           /* it was asked to yield (exec_preempt) before it ended */
    bool preempt_overrun;     /* … and did not exit within its preemption grace: SIGKILL */
    int64_t preempt_ms;       /* wall clock when it was asked to yield, or 0 */
    char exec_error[256];     /* non-empty: the command could not be executed, and why */
    int64_t start_ms, end_ms; /* wall clock, ms since the epoch */
    pid_t pgid;               /* the task's process group */
    int64_t truncated_at[2];  /* stdout, stderr: the size at which the log stopped (a write to
                               * it failed and the rest was dropped), or -1: complete */
    int output_error;         /* the errno of that failed write (ENOSPC: disk full), or 0 */
};

enum exec_probe {
    EXEC_RUNNING,     /* the supervisor holds its lock */
    EXEC_DONE,        /* the status file is there: *status is filled (never from status.tmp) */
    EXEC_NOT_STARTED, /* no supervisor ever ran here (the daemon died before or during spawn) */
    EXEC_LOST,        /* a supervisor ran and vanished without a status (kill -9) */
};

/* What became of the attempt in run_dir. Never blocks. */
enum exec_probe exec_probe(const char *run_dir, struct exec_status *status);

/* The task's process group (which is also its session) from run_dir/pid; 0 until forked. */
pid_t exec_task_pgid(const char *run_dir);
/* The supervisor's pid from run_dir/pid, or -1. */
pid_t exec_supervisor_pid(const char *run_dir);

/* Asks the supervisor in run_dir to stop the task: SIGTERM to the group, SIGKILL after its
 * grace. Returns 0, or -1 if no supervisor is running there. */
int exec_cancel(const char *run_dir);

/* Asks the supervisor in run_dir to preempt the task (SIGUSR1 to the supervisor): the spec's
 * preempt_signal to the task's group, SIGKILL once preempt_grace_ms have passed; the status then
 * says preempted (and preempt_overrun if the kill was needed). Nothing happens to a task already
 * being stopped (a cancel, its time limit). Returns 0, or -1 if no supervisor is running there. */
int exec_preempt(const char *run_dir);

/* The supervisor's entry point: `drover __supervise`, started by exec_start with its spec on a
 * pipe. Never returns. */
int exec_supervise_main(void) __attribute__((noreturn));

/* The zygote (exec/zygote.c): a small process that forks supervisors for the daemon, far more
 * cheaply than the daemon could fork or exec them. Once started, exec_start uses it. Start returns
 * a descriptor that becomes readable when supervisors exit; exec_zygote_exited then fills pids
 * with those reaped (returns their count, or -1 if the zygote died: stop it, and restart it or
 * let exec_start spawn supervisors directly). */
int exec_zygote_start(char **err);
int exec_zygote_exited(pid_t *pids, int max);
bool exec_zygote_running(void);
void exec_zygote_stop(void);
/* `drover __zygote`. Never returns. */
int exec_zygote_main(void) __attribute__((noreturn));

/* The room drover keeps for itself on a file system of `total` bytes: min(8 MiB, total / 16).
 * The daemon's ballast is that size (daemon/disk.c); below half of it free, the file system is
 * full to drover — the daemon refuses new work and supervisors stop growing logs (relay.c), so
 * that what room is left, and the ballast the daemon gives back, goes to the records of
 * attempts that end rather than to their output. */
uint64_t exec_disk_reserve(uint64_t total);

/* After EXEC_LOST: kills whatever is left of the task's process group (SIGKILL). */
void exec_kill_orphans(const char *run_dir);

#endif
