/* util/slurm.h — handing a task to Slurm (issue 12; docs/SLURM.md). The mapping from drover's
 * request to sbatch's flags is one pure function, slurm_sbatch_argv(): no I/O, unit-tested
 * (tests/unit/test_slurm_map.c), and used both by the daemon's Slurm backend and by
 * `drover exp render --format slurm` (so it lives in util/, which both may use). Nothing here
 * runs Slurm.
 *
 * Every flag is one word, "--flag=value", so that a renderer can also write it as an
 * "#SBATCH --flag=value" line (quoting a value with a space or a quote is the renderer's job:
 * sbatch splits #SBATCH lines at blanks). A string that is empty is the same as NULL: not set. */
#ifndef DROVER_UTIL_SLURM_H
#define DROVER_UTIL_SLURM_H

#include <stddef.h>
#include <stdint.h>

/* The daemon's Slurm settings (drover.conf: slurm-partition, slurm-account, slurm-qos,
 * slurm-args, shared-dir). NULL / "" / 0 = not set. */
struct slurm_settings {
    const char *partition, *account, *qos;
    char *const *extra_args;   /* slurm-args, already split into words (no shell); they come
                                * after drover's flags, before the script. Words that would
                                * take over what drover relies on (--array, --dependency,
                                * --export, --output, --error, --chdir, --wrap, and their
                                * short forms) are refused. */
    size_t nextra;
    int warn_signal_s;         /* --signal=B:USR1@N before the time limit; 0 = SLURM_WARN_S,
                                * < 0 = no warning; at most SLURM_MAX_WARN_S */
    int max_array_size;        /* the cluster's MaxArraySize: indices must be below it;
                                * 0 = SLURM_MAX_ARRAY_SIZE (Slurm's default) */
};

#define SLURM_WARN_S 90        /* seconds of warning before the time limit (SIGUSR1) */
#define SLURM_MAX_WARN_S 65535 /* Slurm keeps the warning time in 16 bits */
#define SLURM_MAX_ARRAY_SIZE 1001 /* Slurm's default MaxArraySize: indices 0 to 1000 */
/* The longest --time Slurm can take: sbatch converts the limit to seconds in an int and adds 59
 * to round up, so 35791394 minutes already wraps (checked on 22.05: 35791393 is 24855-03:13:00,
 * one more is 2957761 days). */
#define SLURM_MAX_TIME_MIN ((INT32_MAX - 59) / 60)
#define SLURM_MAX_NAME 1024    /* bytes in --job-name; slurmctld refuses longer */
#define SLURM_MAX_PATH 4096    /* bytes in --chdir and --output/--error; slurmctld refuses longer */
#define SLURM_MAX_JOB_ID 0xfffffffdLL /* above are Slurm's NO_VAL and INFINITE */

/* What one task (or one array of tasks) asks of Slurm. Negative numbers are refused. */
struct slurm_job {
    const char *name;          /* --job-name (default "drover-TASK") */
    int64_t task;              /* drover's task id (the array's first) */
    int gpus;                  /* --gres=gpu[:TYPE]:N when > 0 (a gpu_type alone: 1 GPU, as
                                * drover submit --gpu-type does) */
    const char *gpu_type;      /* the Slurm GRES type name, or NULL; no ':' ',' or blank */
    int cpus;                  /* --cpus-per-task when > 0 */
    uint64_t mem;              /* bytes; --mem=…M rounded up to MiB when > 0 */
    int64_t timeout_ms;        /* --time=MINUTES rounded up when > 0 */
    const int64_t *array_index; /* --array=… (sorted, duplicates dropped, ranges folded:
                                 * 0-9,12) when nindex > 0; a single index is still an array */
    size_t nindex;
    int array_limit;           /* …%K when > 0 (only with array_index) */
    const int64_t *afterok, *afterany; /* Slurm job ids (never drover's) */
    size_t nafterok, nafterany;
    const char *workdir;       /* --chdir (absolute) */
    const char *run_dir;       /* absolute; --output/--error: RUN_DIR/stdout, RUN_DIR/stderr,
                                * or RUN_DIR/%a/stdout, RUN_DIR/%a/stderr for an array (the
                                * caller makes RUN_DIR/INDEX/ first: Slurm makes no directory).
                                * NULL: Slurm's default, slurm-%j.out in the workdir. */
    const char *script;        /* the batch script's path (in the shared directory, absolute):
                                * last argument */
};

/* The argv of `sbatch` for job (NULL-terminated, malloc'd, each string malloc'd; free with
 * slurm_argv_free): "sbatch", "--parsable", the flags, then job->script. Never a shell: no
 * string is quoted or spliced. Returns 0, or -1 with *err (malloc'd, one line; the caller frees
 * it) and *argv NULL when job cannot be expressed (e.g. a name or path with a newline, a GPU type
 * with ':' or ',', an array index at or above MaxArraySize). */
int slurm_sbatch_argv(const struct slurm_job *job, const struct slurm_settings *s, char ***argv,
                      char **err);
/* Frees an argv from slurm_sbatch_argv(); NULL is a no-op. */
void slurm_argv_free(char **argv);

#endif
