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
/* Splits slurm-args into words as a POSIX shell would ('…', "…", \x; blanks separate) without
 * running one: no expansion of any kind. *words is NULL-terminated, freed with
 * slurm_argv_free. 0, or -1 with *err (malloc'd): an unterminated quote. */
int slurm_split_words(const char *text, char ***words, char **err);
/* Frees an argv from slurm_sbatch_argv(); NULL is a no-op. */
void slurm_argv_free(char **argv);

/* ---- What Slurm says (util/slurm-parse.c; docs/SLURM.md, "What drover reads back") --------
 * Pure parsers of what squeue and scontrol print, and the meaning of a Slurm job state to
 * drover. No I/O: the daemon runs the commands and hands their output here. Tested on outputs
 * captured from Slurm 22.05 (tests/unit/slurm-fixtures/, tests/unit/test_slurm_parse.c).
 *
 * One squeue call per poll for every tracked job, filtered here rather than by squeue (22.05's
 * `squeue --json` ignores -j and -t, and the text form takes a whole poll in one line per job):
 *     squeue --noheader --states=all --me --Format=SLURM_SQUEUE_FORMAT
 * one line per job or array element: "12|PENDING|Resources|0|", "7_3|FAILED|NonZeroExitCode|768|",
 * and for an array's elements not yet started one line "7_[2-3%2]|PENDING|JobArrayTaskLimit|0|".
 * `--states=all` keeps finished jobs while slurmctld remembers them (MinJobAge, 300 s by
 * default), so their exit status comes with the same call; a job squeue no longer lists is
 * asked about with `scontrol show job -o ID` (or sacct, where the cluster keeps accounting). */
#define SLURM_SQUEUE_FORMAT "JobArrayID:|,State:|,Reason:|,exit_code:|"
#define SLURM_NO_TASK (-1) /* not an array element */

/* A job, or one element of an array, as squeue or scontrol sees it. */
struct slurm_job_info {
    int64_t job_id;        /* the job's id; for an array element the array's job id (the "7"
                            * of "7_3"), which is what drover records */
    int64_t array_task_id; /* the element ("3"), or SLURM_NO_TASK */
    char *array_tasks;     /* the elements not yet started, as Slurm writes them ("2-3%2"),
                            * with array_task_id SLURM_NO_TASK; NULL otherwise */
    char *state;           /* Slurm's state as it says it ("PENDING"); never NULL */
    char *reason;          /* Slurm's reason ("Resources"); NULL for "None" or none */
    int exit_code;         /* 0-255, or -1 when not known (a line without it) */
    int signal;            /* the signal that ended it, or 0 */
    int64_t run_time_s;    /* scontrol's RunTime; 0 if it never started; -1 when not known */
};

/* What one squeue or scontrol output holds: every line it could read, and how many it could
 * not (skipped and counted, never fatal: the caller may log the count). */
struct slurm_jobs {
    struct slurm_job_info *job; /* sorted by job_id, then array_task_id (an array's rest
                                 * lines, SLURM_NO_TASK, before its elements) */
    size_t count;
    size_t skipped;             /* malformed lines or records */
};

/* Parses `squeue --noheader --Format=SLURM_SQUEUE_FORMAT` (also `--format='%i|%T|%r'`, the
 * same without the exit status): "ID|STATE|REASON[|WAIT_STATUS][|anything more…]". The exit
 * status there is a raw wait status (22.05: exit 3 prints 768, SIGKILL 9). Empty lines are
 * ignored; a line that is not one job is skipped and counted. Never NULL; free with
 * slurm_jobs_free(). */
struct slurm_jobs *slurm_squeue_parse(const char *text);
/* Parses `scontrol show job -o [ID]`: one record per line (an array shows one per element and
 * one for its rest), "JobId=… JobState=… Reason=… ExitCode=E:S RunTime=…". A record without
 * JobId and JobState is skipped and counted; so is any line not starting "JobId=" (e.g.
 * "slurm_load_jobs error: Invalid job id specified", which scontrol prints, on stderr, for a
 * job it no longer knows). A job name holding " Key=value" words cannot pass for the record's
 * own fields. Never NULL; free with slurm_jobs_free(). */
struct slurm_jobs *slurm_scontrol_parse(const char *text);
/* NULL is a no-op. */
void slurm_jobs_free(struct slurm_jobs *jobs);
/* The squeue entry that tells about job_id's element task (SLURM_NO_TASK for a job that is
 * not an array): the element's own line, else the line of the array's rest whose elements
 * include it (then it is pending). NULL when squeue does not list it. O(log n) plus the rest
 * lines of that array. */
const struct slurm_job_info *slurm_jobs_find(const struct slurm_jobs *jobs, int64_t job_id,
                                             int64_t task);
/* Splits a raw wait status as squeue prints it into an exit code (0-255, or -1 if the status
 * is not one: above 16 bits) and a signal (0 if none). Returns 0, or -1 when not a status. */
int slurm_wait_status(int64_t status, int *exit_code, int *signal);

/* What a Slurm job state means to drover. */
enum slurm_outcome {
    SLURM_OUTCOME_POLL,      /* a state this code does not know: keep polling, change nothing */
    SLURM_OUTCOME_QUEUED,    /* PENDING, and Slurm's own requeues (REQUEUED, REQUEUE_HOLD,
                              * REQUEUE_FED, RESV_DEL_HOLD, SPECIAL_EXIT): the same job id will
                              * run again, so nothing is submitted and no retry is used */
    SLURM_OUTCOME_RUNNING,   /* RUNNING, COMPLETING, CONFIGURING, and SUSPENDED, STOPPED,
                              * SIGNALING, STAGE_OUT, RESIZING (still holding its allocation) */
    SLURM_OUTCOME_SUCCEEDED, /* COMPLETED */
    SLURM_OUTCOME_FAILED,    /* FAILED (exit code or signal), OUT_OF_MEMORY */
    SLURM_OUTCOME_TIMED_OUT, /* TIMEOUT, DEADLINE */
    SLURM_OUTCOME_CANCELLED, /* CANCELLED (by drover's scancel or anyone's) */
    SLURM_OUTCOME_REQUEUE,   /* NODE_FAIL, PREEMPTED, BOOT_FAIL: ended by the cluster, not the
                              * task: submit again without using a retry */
};

/* The outcome of a job Slurm says is in state, with reason, exit_code and signal as parsed
 * above (-1 / 0 when not known), and *why: one line for drover's reason, always set, malloc'd,
 * the caller frees it: "slurm: Resources" for PENDING, "exit code 3", "killed by signal 9
 * (SIGKILL)", "out of memory (Slurm)", "slurm: unknown state 'X'" for POLL. */
enum slurm_outcome slurm_outcome_of(const char *state, const char *reason, int exit_code,
                                    int signal, char **why);
/* "poll", "queued", "running", "succeeded", "failed", "timed_out", "cancelled", "requeue". */
const char *slurm_outcome_name(enum slurm_outcome outcome);

#endif
