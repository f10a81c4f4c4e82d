/* Shared between exec.c (the daemon's side) and supervisor.c (the supervisor's); not for use
 * outside exec/. */
#ifndef DROVER_EXEC_INTERNAL_H
#define DROVER_EXEC_INTERNAL_H

#include "exec/exec.h"

#include <jansson.h>
#include <poll.h>
#include <stdint.h>

/* The supervisor: the child of exec_start's fork, entered with every signal blocked. It keeps
 * lock_fd (flock()ed), dir_fd (run_dir) and ready_fd, and closes every other descriptor. On ready_fd
 * it writes a struct exec_ready, error 0 once the pid file is written and the status's space
 * reserved (or the errno of what failed), then closes it; exec_start waits for that. Never returns: it leaves with
 * _exit. */
void supervisor_run(const struct exec_spec *spec, int lock_fd, int dir_fd, int ready_fd)
    __attribute__((noreturn));

/* spawn.c: starts `drover __supervise` with the lock, run_dir and ready pipe at the descriptors
 * supervisor_run expects, and writes it the spec. Returns its pid, or -1 with *err. */
pid_t exec_spawn_supervisor(const struct exec_spec *spec, int dir_fd, int lock_fd,
                            int ready_fd, char **err);

/* The spec on the wire and back (spawn.c): encode returns a malloc'd buffer of *len bytes;
 * decode allocates what release frees and returns 0, or -1 (nothing to release) if buf is not a
 * whole spec with a command. */
char *exec_spec_encode(const struct exec_spec *spec, size_t *len);
int exec_spec_decode(const char *buf, size_t len, struct exec_spec *spec);
void exec_spec_release(struct exec_spec *spec);

/* zygote.c: asks the zygote to fork the supervisor: 0 once the request is sent (the ready pipe
 * then tells how it went: the supervisor's word, the zygote's fork errno, or EOF), -1 with *err,
 * or EXEC_ZYGOTE_GONE when the zygote was gone before the request reached it (nothing can have
 * been forked: the caller may spawn the supervisor itself). */
#define EXEC_ZYGOTE_GONE (-2)
int exec_zygote_fork(const struct exec_spec *spec, int dir_fd, int lock_fd, int ready_fd,
                     char **err);

/* The word on the ready pipe: from the supervisor, error 0 (or the errno of what failed) and its
 * pid; from the zygote, the errno of a failed fork and pid 0. */
struct exec_ready {
    int32_t error;
    int32_t pid;
};

/* The text of a status file: one JSON object and a newline. The caller frees it. */
char *exec_status_encode(const struct exec_status *status);

/* identity.c: whom the task runs as. */
struct exec_identity {
    bool drop;      /* false: as the supervisor, nothing changes */
    uid_t uid;
    gid_t gid;
    gid_t *groups;  /* supplementary groups, getgrouplist's */
    int ngroups;
    char **env;     /* the spec's environment with HOME, USER, LOGNAME the owner's */
};
/* Resolves spec's owner (passwd entry by uid, groups, environment) in the supervisor, before
 * the task's fork. Returns 0, or -1 with the reason in err (the task must not run). */
int exec_identity_resolve(const struct exec_spec *spec, struct exec_identity *id, char *err,
                          size_t len);
/* In the task child: setgroups, setgid, setuid, in that order, each checked, then verifies that
 * the drop held (real and effective ids, setuid(0) refused). System calls only (safe after
 * vfork). Returns 0, or an errno with *step naming what failed. */
int exec_identity_drop(const struct exec_identity *id, const char **step);
void exec_identity_release(struct exec_identity *id);

/* The space reserved for the status at the attempt's start (status.tmp, whitespace): the record
 * is written into it at the end, so that a full disk cannot refuse it. A record is far shorter. */
#define EXEC_STATUS_RESERVE 4096

/* relay.c: the task's stdout and stderr, through pipes, into run_dir/stdout and run_dir/stderr. */
struct relay_stream {
    int pipe_fd;  /* our end, non-blocking; -1 at EOF */
    int write_fd; /* the task's end, until it has it */
    int log_fd;   /* -1 if it could not be opened */
    int64_t kept; /* the log's size: where it stops if full */
    bool full;    /* a write failed: the rest is drained and dropped */
    bool copy;    /* splice refused by the file system: read and write */
};
struct relay {
    struct relay_stream stream[2]; /* stdout, stderr */
    int error;                     /* errno of the first failed log write, 0 if none */
};
void relay_init(struct relay *r);
/* Makes the pipes and opens the logs (relative to dir_fd) at their ends. A log that cannot be
 * opened only loses the output. Returns 0, or an errno if a pipe could not be made. */
int relay_open(struct relay *r, int dir_fd);
/* The write ends, for the task's 1 and 2 (close-on-exec: dup2 them). */
void relay_task_fds(const struct relay *r, int *out, int *err);
/* The task has its copies: closes ours, so that EOF comes when the task's are gone. */
void relay_started(struct relay *r);
/* Pollfds for the two pipes (fd -1 once at EOF, which poll skips). */
void relay_poll_fds(const struct relay *r, struct pollfd *fds);
/* Moves what stream i's pipe holds into its log, until the pipe is empty or at EOF. */
void relay_pump(struct relay *r, int i);
/* Where the logs stop, if they do, and why. */
void relay_result(const struct relay *r, struct exec_status *status);
/* The task's main process is gone: moves what is left, then, if processes it left behind still
 * hold a pipe, forks a drainer to carry on (closing the n descriptors of not_for_drainer in it)
 * and closes everything here. */
void relay_finish(struct relay *r, const int *not_for_drainer, int n);

#endif
