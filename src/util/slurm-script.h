/* util/slurm-script.h — the batch script that runs one drover attempt on Slurm (issue 12;
 * docs/SLURM.md, "The batch script"). slurm_script_text() is pure: it returns the text, and the
 * backend writes it to the shared directory and hands its path to sbatch (util/slurm.h).
 *
 * The script is POSIX sh (Slurm runs it with the node's /bin/sh: dash on Debian, bash on RHEL):
 *
 *   - It cds to the workdir (physically, like chdir(2)); if it cannot, it writes
 *     "chdir DIR: WHY" to RUN_DIR/exec_error and to stderr and exits 1 (locally a workdir that
 *     cannot be entered is an exec error too).
 *   - It starts the task in the background, one pid from the fork on: a check (below), then
 *     `env [--default-signal] -- 'K=V'… setsid -- ARGV…`. setsid does not fork (a background
 *     job of a shell without job control is no group leader), so the task's pid, $!, is also
 *     its session and process group. The environment is the batch shell's (Slurm's SLURM_*,
 *     CUDA_VISIBLE_DEVICES, the user's login variables) plus the given entries, each one
 *     single-quoted word that no shell reads; env sets them, not sh, which would drop names
 *     that are not sh names (A-B). Where env knows --default-signal (coreutils 8.31+) every
 *     signal disposition is reset, as locally; elsewhere the task keeps the SIGINT and SIGQUIT
 *     that sh ignores in background jobs.
 *   - It writes RUN_DIR/started once the task has been forked, after removing the markers a
 *     previous run of the same job (a Slurm requeue) may have left.
 *   - SIGUSR1 (Slurm's warning, --signal=B:USR1@W): it writes RUN_DIR/warned and forwards
 *     SIGUSR1 to the task's process group. SIGTERM (scancel, the time limit): it forwards SIGTERM.
 *     Either way it goes back to waiting (Slurm SIGKILLs what is left KillWait later). A signal
 *     that comes before the task was started is forwarded right after the start.
 *   - When the task ends the script exits with its exit code, or, for a task killed by signal N,
 *     kills itself with N (traps reset, core dumps off) so that Slurm records 0:N. sh reports
 *     both "exited 128+N" and "killed by N" as 128+N, so a task that exits 129 to 192 by itself
 *     is also reported as killed by that signal. Signals that do not end a shell (CHLD, CONT,
 *     URG, WINCH) or would stop it (STOP, TSTP, TTIN, TTOU), statuses above 128+SIGRTMAX, and
 *     a signal the shell was started ignoring: the script exits 128+N instead.
 *
 * Exec failure. Before the exec, the background child looks for argv[0] the way execvp will:
 * a name with a '/' must be a regular executable file (relative to the workdir); a name
 * without one must be a regular executable file in a directory of the task's PATH (the last
 * PATH= of the given entries, else the batch shell's; an empty entry is the current
 * directory). If there is none it writes "ARGV0: No such file or directory" (or "Permission
 * denied" for a path that exists but cannot be run) to RUN_DIR/exec_error, one line (control
 * characters of argv[0] shown as '?'), and exits 127. A command that runs and exits 127 writes
 * nothing. Limits: what the check cannot see fails after it, with exit 127 (126 for EACCES)
 * and setsid's or env's message on stderr but no marker: a script whose #! interpreter is
 * missing, a file removed or made unexecutable between the check and the exec, a node without
 * setsid. A missing shared library is the same as locally (the loader exits 127 after the
 * exec). */
#ifndef DROVER_UTIL_SLURM_SCRIPT_H
#define DROVER_UTIL_SLURM_SCRIPT_H

#include <stdint.h>

/* The markers the script writes in run_dir (the daemon reads them). */
#define SLURM_SCRIPT_STARTED "started"       /* empty: the task was started */
#define SLURM_SCRIPT_WARNED "warned"         /* empty: SIGUSR1 came (and was forwarded) */
#define SLURM_SCRIPT_EXEC_ERROR "exec_error" /* one line: why the task could not be started */

struct slurm_script {
    int64_t task_id;
    int attempt;
    char *const *argv;      /* the command, NULL-terminated, argv[0] non-empty */
    char *const *env;       /* NULL-terminated "K=V" (request env first, then DROVER_* the caller
                             * computed; a later duplicate key wins); keys may be any bytes but '='
                             * and NUL, values any bytes but NUL (quotes, $, `, newlines, commas) */
    const char *workdir;    /* absolute; the task starts there */
    const char *run_dir;    /* absolute; the attempt's directory (the markers above go there) */
};

/* The batch script's text (malloc'd; caller frees), or NULL with a malloc'd reason in *err
 * (one line: an empty command, an env entry without '=' or with an empty key, a workdir or
 * run_dir that is missing or not absolute). *err is NULL on success; err may be NULL. */
char *slurm_script_text(const struct slurm_script *s, char **err);

#endif
