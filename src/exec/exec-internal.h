/* Shared between exec.c (the daemon's side) and supervisor.c (the supervisor's); not for use
 * outside exec/. */
#ifndef DROVER_EXEC_INTERNAL_H
#define DROVER_EXEC_INTERNAL_H

#include "exec/exec.h"

#include <jansson.h>

/* The supervisor: the child of exec_start's fork, entered with every signal blocked. It keeps
 * lock_fd (flock()ed), dir_fd (run_dir) and ready_fd, and closes every other descriptor. On ready_fd
 * it writes an int, 0 once the pid file is written (or an errno if that failed), then closes it;
 * exec_start waits for that. Never returns: it leaves with _exit. */
void supervisor_run(const struct exec_spec *spec, int lock_fd, int dir_fd, int ready_fd)
    __attribute__((noreturn));

/* spawn.c: starts `drover __supervise` with the lock, run_dir and ready pipe at the descriptors
 * supervisor_run expects, and writes it the spec. Returns its pid, or -1 with *err. */
pid_t exec_spawn_supervisor(const struct exec_spec *spec, int dir_fd, int lock_fd,
                            int ready_fd, char **err);

/* The spec as JSON and back (spawn.c). decode allocates what release frees. */
char *exec_spec_encode(const struct exec_spec *spec);
void exec_spec_decode(json_t *o, struct exec_spec *spec);
void exec_spec_release(struct exec_spec *spec);

/* zygote.c: has the zygote fork the supervisor; its pid or -1 with *err. */
pid_t exec_zygote_fork(const struct exec_spec *spec, int dir_fd, int lock_fd, int ready_fd,
                       char **err);

/* The text of a status file: one JSON object and a newline. The caller frees it. */
char *exec_status_encode(const struct exec_status *status);

#endif
