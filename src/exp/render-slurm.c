/* exp/render-slurm.c — an experiment as Slurm batch scripts, one per task: "#SBATCH" lines from
 * util/slurm.h's mapping (the same flags the daemon's Slurm backend passes to sbatch), then
 * drover's variables and the task's environment exported, then `exec` of the command, every
 * word in single quotes unless no shell character is in it. */
#include "exp/render.h"
#include "exp/template-internal.h"
#include "util/slurm.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* An sbatch option as an "#SBATCH" word: sbatch splits those lines at blanks, takes quotes and
 * '\', and ends the line at an unescaped '#', so every other character is escaped. */
static void slurm_word(FILE *fp, const char *s)
{
    for (; *s; s++) {
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:@%,+-",
                   *s) == NULL)
            fputc('\\', fp);
        fputc(*s, fp);
    }
}

static bool slurm_ours(const char *kv)
{
    static const char *const ours[] = {"DROVER_TASK_ID=", "DROVER_ATTEMPT=",
                                       "DROVER_CHECKPOINT_DIR=", "DROVER_ARRAY_INDEX=",
                                       "DROVER_METRICS_FILE="};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (strncmp(kv, ours[i], strlen(ours[i])) == 0)
            return true;
    return false;
}

/* The script of one task, or NULL with *err. */
static char *slurm_script(const struct exp_def *def, const struct exp_task *task,
                          const char *job_name, const struct render_slurm_options *opt,
                          char **err)
{
    struct slurm_job job = {.name = job_name, .gpus = task->gpus, .gpu_type = task->gpu_type,
                            .cpus = task->cpus, .mem = task->mem,
                            .timeout_ms = task->timeout_ms, .workdir = opt->workdir,
                            .script = "/" /* sbatch's last argument: not written here */};
    static const struct slurm_settings none = {0};
    char **argv, *why, *text;
    size_t len;
    if (slurm_sbatch_argv(&job, opt->settings ? opt->settings : &none, &argv, &why) < 0) {
        *err = xasprintf("%s: task %s: %s", opt->file, task->name, why);
        free(why);
        return NULL;
    }
    FILE *fp = template_memstream(&text, &len);
    fprintf(fp, "#!/bin/sh\n# task %s of %s (drover exp render --format slurm)\n", task->name,
            def->name);
    for (char **n = task->needs; n && *n; n++)
        fprintf(fp, "# needs %s-%s: sbatch --dependency=afterok:JOBID\n", def->name, *n);
    for (size_t i = 2; argv[i] != NULL && argv[i + 1] != NULL; i++) { /* not sbatch --parsable,
                                                                       * nor the script */
        fputs("#SBATCH ", fp);
        slurm_word(fp, argv[i]);
        fputc('\n', fp);
    }
    slurm_argv_free(argv);
    fputs("export DROVER_TASK_ID=", fp);
    subst_shell_word(fp, job_name);
    fputs("\nexport DROVER_ATTEMPT=$((${SLURM_RESTART_COUNT:-0} + 1))\n", fp);
    if (task->trial >= 0 && json_object_get(def->spec, "sweep") != NULL)
        fprintf(fp, "export DROVER_ARRAY_INDEX=%d\n", task->trial);
    fputs("export DROVER_CHECKPOINT_DIR=\"$PWD/drover/$DROVER_TASK_ID/checkpoints\"\n"
          "export DROVER_METRICS_FILE=\"$PWD/drover/$DROVER_TASK_ID/metrics.jsonl\"\n"
          "mkdir -p \"$DROVER_CHECKPOINT_DIR\" || exit 1\n", fp);
    for (char **e = task->env; e && *e; e++) {
        char *eq = strchr(*e, '=');
        if (eq == NULL || slurm_ours(*e))
            continue;
        fprintf(fp, "export %.*s=", (int)(eq - *e), *e);
        subst_shell_word(fp, eq + 1);
        fputc('\n', fp);
    }
    fputs("exec", fp); /* the task is the batch shell: --signal=B:USR1 reaches it */
    for (char **a = task->argv; a && *a; a++) {
        fputc(' ', fp);
        subst_shell_word(fp, *a);
    }
    fputc('\n', fp);
    fclose(fp);
    return text;
}

json_t *render_slurm(const struct exp_def *def, const struct render_slurm_options *opt,
                     char **err)
{
    json_t *out = json_array();
    for (size_t i = 0; i < def->ntasks; i++) {
        const struct exp_task *task = &def->tasks[i];
        char *name = def->kind == EXP_PIPELINE ? xasprintf("%s-%s", def->name, task->name)
                                               : xstrdup(task->name);
        char *text = slurm_script(def, task, name, opt, err);
        if (text == NULL) {
            free(name);
            json_decref(out);
            return NULL;
        }
        char *file = xasprintf("%s.sbatch", name);
        json_array_append_new(out, json_pack("{s:s,s:s}", "file", file, "text", text));
        free(file);
        free(text);
        free(name);
    }
    return out;
}
