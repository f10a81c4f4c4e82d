/* Shared between exec.c (the daemon's side) and supervisor.c (the supervisor's); not for use
 * outside exec/. */
#ifndef DROVER_EXEC_INTERNAL_H
#define DROVER_EXEC_INTERNAL_H

#include "exec/exec.h"

/* The supervisor: the child of exec_start's fork, entered with every signal blocked. It keeps
 * lock_fd (flock()ed), dir_fd (run_dir) and ready_fd, and closes every other descriptor. On ready_fd
 * it writes an int, 0 once the pid file is written (or an errno if that failed), then closes it;
 * exec_start waits for that. Never returns: it leaves with _exit. */
void supervisor_run(const struct exec_spec *spec, int lock_fd, int dir_fd, int ready_fd)
    __attribute__((noreturn));

/* The text of a status file: one JSON object and a newline. The caller frees it. */
char *exec_status_encode(const struct exec_status *status);

#endif
