/* The Slurm batch script of one attempt (util/slurm-script.h, docs/SLURM.md "The batch
 * script"). Pure: it checks its arguments and writes text. Every string that comes from the
 * request is written as one single-quoted sh word, so no byte of it is read by a shell. */
#include "util/slurm-script.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A function the background child runs as the task (its pid, before the exec of env, which sets
 * the task's environment; sh itself would drop the variables whose names are not sh names, A-B,
 * when it execs): finds argv[0] as execvp will, or writes why not to the exec_error marker (see
 * the header for what this cannot see). */
static const char script_start_function[] =
    "# In the background child, as the task: finds $3 (argv[0]) in $2 (the task's PATH) as\n"
    "# execvp will and execs the rest, or says why not ($1: argv[0] as the message shows it).\n"
    "start() {\n"
    "    label=$1 path=$2 cmd=$3; shift 3\n"
    "    case $cmd in\n"
    "    */*) [ -f \"$cmd\" ] && [ -x \"$cmd\" ] ;;\n"
    "    *) (IFS=:; set -f; for d in $path; do\n"
    "            [ -f \"${d:-.}/$cmd\" ] && [ -x \"${d:-.}/$cmd\" ] && exit 0\n"
    "        done; exit 1) ;;\n"
    "    esac && exec \"$@\"\n"
    "    why='No such file or directory'\n"
    "    case $cmd in */*) [ -e \"$cmd\" ] && why='Permission denied' ;; esac\n"
    "    printf '%s: %s\\n' \"$label\" \"$why\" >\"$run_dir/" SLURM_SCRIPT_EXEC_ERROR "\"\n"
    "    printf 'drover: cannot execute %s: %s\\n' \"$label\" \"$why\" >&2\n"
    "    exit 127\n"
    "}\n";

/* After the start: the marker, early signals, the wait, and the end as the task ended. */
static const char script_wait[] =
    "task=$!\n"
    ": >\"$run_dir/" SLURM_SCRIPT_STARTED "\"\n"
    "for sig in $pending; do forward \"$sig\"; done\n"
    "# A trap cuts `wait` short (128+N): wait again while the task runs. A wait cut short just\n"
    "# as the task ended kept its status, which a second wait returns (127: none was kept, so\n"
    "# the first status was the task's).\n"
    "while :; do\n"
    "    wait \"$task\" 2>/dev/null; status=$?\n"
    "    [ \"$status\" -gt 128 ] || break\n"
    "    kill -0 \"$task\" 2>/dev/null && continue\n"
    "    wait \"$task\" 2>/dev/null; again=$?\n"
    "    [ \"$again\" -eq 127 ] || status=$again\n"
    "    break\n"
    "done\n"
    "# Killed by signal N (or exited 128+N: sh cannot tell): die of N too, so that Slurm records\n"
    "# 0:N. Not of a signal that would not end this shell or would stop it: exit 128+N.\n"
    "if [ \"$status\" -gt 128 ] && signal=$(kill -l \"$status\" 2>/dev/null); then\n"
    "    case $signal in\n"
    "    CHLD|CONT|STOP|TSTP|TTIN|TTOU|URG|WINCH) ;;\n"
    "    *) trap - USR1 TERM; ulimit -c 0 2>/dev/null; kill -s \"$signal\" \"$$\" ;;\n"
    "    esac\n"
    "fi\n"
    "exit \"$status\"\n";

/* s as one sh word: single quotes, and each ' as '\'' (nothing inside '' is special). */
static void script_quote(FILE *out, const char *s)
{
    fputc('\'', out);
    for (; *s != '\0'; s++) {
        if (*s == '\'')
            fputs("'\\''", out);
        else
            fputc(*s, out);
    }
    fputc('\'', out);
}

/* s with its control characters as '?', so that a message about it stays one line (malloc'd). */
static char *script_label(const char *s)
{
    char *label = xstrdup(s);
    for (char *c = label; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return label;
}

static char *script_check(const struct slurm_script *s)
{
    if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0')
        return xstrdup("slurm: the command is empty");
    if (s->workdir == NULL || s->workdir[0] != '/')
        return xasprintf("slurm: the working directory '%s' is not an absolute path",
                         s->workdir != NULL ? s->workdir : "");
    if (s->run_dir == NULL || s->run_dir[0] != '/')
        return xasprintf("slurm: the run directory '%s' is not an absolute path",
                         s->run_dir != NULL ? s->run_dir : "");
    for (char *const *e = s->env; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL)
            return xasprintf("slurm: the environment entry '%s' has no '='", *e);
        if (eq == *e)
            return xasprintf("slurm: the environment entry '%s' has an empty name", *e);
    }
    return NULL;
}

/* The traps, the marker cleanup and the cd: everything before the task starts. */
static void script_prologue(FILE *out, const struct slurm_script *s)
{
    fprintf(out, "#!/bin/sh\n# drover task %" PRId64 ", attempt %d: its Slurm batch script "
                 "(docs/SLURM.md, \"The batch script\").\n", s->task_id, s->attempt);
    fputs("run_dir=", out);
    script_quote(out, s->run_dir);
    fputs("\ntask= pending=\n"
          "# A signal for the task's process group (for its pid alone until it has called\n"
          "# setsid), or for later while it has not been started.\n"
          "forward() {\n"
          "    if [ -z \"$task\" ]; then pending=\"$pending $1\"; return; fi\n"
          "    kill -s \"$1\" -- \"-$task\" 2>/dev/null || kill -s \"$1\" \"$task\" 2>/dev/null\n"
          "}\n"
          "trap ': >\"$run_dir/" SLURM_SCRIPT_WARNED "\"; forward USR1' USR1\n"
          "trap 'forward TERM' TERM\n"
          "# A requeued job runs this again: what the last run left says nothing of this one.\n"
          "rm -f -- \"$run_dir/" SLURM_SCRIPT_STARTED "\" \"$run_dir/" SLURM_SCRIPT_WARNED
          "\" \"$run_dir/" SLURM_SCRIPT_EXEC_ERROR "\"\n", out);
    char *label = script_label(s->workdir);
    fputs("if ! cd -P -- ", out);
    script_quote(out, s->workdir);
    fputs("; then\n    why='No such file or directory'; [ -d ", out);
    script_quote(out, s->workdir);
    fputs(" ] && why='Permission denied'\n    printf 'chdir %s: %s\\n' ", out);
    script_quote(out, label);
    fputs(" \"$why\" >\"$run_dir/" SLURM_SCRIPT_EXEC_ERROR "\"\n"
          "    printf 'drover: cannot enter the working directory %s: %s\\n' ", out);
    script_quote(out, label);
    fputs(" \"$why\" >&2\n    exit 1\nfi\n", out);
    free(label);
}

/* The line that starts the task (the check, then env, then setsid, all one pid):
 *   start 'LABEL' PATH 'ARGV0' env [--default-signal] -- 'K=V'… "$setsid" -- 'ARGV0' 'ARGV1'… &
 * PATH is the last PATH= of the given entries, else the batch shell's. setsid comes after env
 * so that an argv[0] with '=' is not taken for a variable, and is found before env so that the
 * task's PATH need not hold it. */
static void script_start(FILE *out, const struct slurm_script *s)
{
    const char *path = NULL;
    for (char *const *e = s->env; e != NULL && *e != NULL; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    fputs(script_start_function, out);
    fputs("# sh ignores SIGINT and SIGQUIT in a background job; env 8.31+ can undo it.\n"
          "reset=; env --default-signal true 2>/dev/null && reset=--default-signal\n"
          "setsid=$(command -v setsid) || setsid=setsid\n"
          "start ", out);
    char *label = script_label(s->argv[0]);
    script_quote(out, label);
    free(label);
    fputc(' ', out);
    if (path != NULL)
        script_quote(out, path);
    else
        fputs("\"$PATH\"", out);
    fputc(' ', out);
    script_quote(out, s->argv[0]);
    fputs(" \\\n    env $reset --", out);
    for (char *const *e = s->env; e != NULL && *e != NULL; e++) {
        fputc(' ', out);
        script_quote(out, *e);
    }
    fputs(" \"$setsid\" --", out);
    for (char *const *a = s->argv; *a != NULL; a++) {
        fputc(' ', out);
        script_quote(out, *a);
    }
    fputs(" &\n", out);
}

char *slurm_script_text(const struct slurm_script *s, char **err)
{
    char *text = NULL;
    size_t size = 0;

    char *why = script_check(s);
    if (err != NULL)
        *err = why;
    else
        free(why);
    if (why != NULL)
        return NULL;
    FILE *out = open_memstream(&text, &size);
    if (out == NULL)
        fatalx("open_memstream: out of memory");
    script_prologue(out, s);
    script_start(out, s);
    fputs(script_wait, out);
    if (fclose(out) != 0)
        fatalx("open_memstream: out of memory");
    return text;
}
