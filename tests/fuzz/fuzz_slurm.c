/* fuzz_slurm — what Slurm's commands print, as the daemon will read it (util/slurm-parse.c):
 * squeue's one-line-per-job text and `scontrol show job -o` records, then the state mapping.
 *
 * The input, up to its first NUL, goes to both parsers (one corpus serves both: squeue lines
 * and scontrol records captured from a real Slurm 22.05, tests/unit/slurm-fixtures/). Beyond
 * the sanitizers, the contract of slurm.h is checked on what they return: entries sorted by
 * job id then array task, every state a string, exit codes 0-255 or -1, every entry found again
 * by slurm_jobs_find, and every state mapped to an outcome with a one-line reason. */
#include "fuzz.h"
#include "util/slurm.h"

static void fuzz_fail(const char *what, const char *input)
{
    fprintf(stderr, "fuzz_slurm: %s (input \"%.200s\")\n", what, input);
    abort();
}

static void fuzz_check(const struct slurm_jobs *jobs, const char *input)
{
    for (size_t i = 0; i < jobs->count; i++) {
        const struct slurm_job_info *j = &jobs->job[i];
        if (j->state == NULL)
            fuzz_fail("an entry without a state", input);
        if (j->exit_code < -1 || j->exit_code > 255)
            fuzz_fail("an exit code out of 0-255", input);
        if (j->job_id <= 0 || j->array_task_id < SLURM_NO_TASK)
            fuzz_fail("a job id that is not positive, or a bad array task", input);
        if (i > 0) {
            const struct slurm_job_info *p = &jobs->job[i - 1];
            if (p->job_id > j->job_id ||
                (p->job_id == j->job_id && p->array_task_id > j->array_task_id))
                fuzz_fail("entries not sorted by job id, then array task", input);
        }
        if (j->array_tasks == NULL && slurm_jobs_find(jobs, j->job_id, j->array_task_id) == NULL)
            fuzz_fail("an entry slurm_jobs_find cannot find", input);
        char *why = NULL;
        enum slurm_outcome o =
            slurm_outcome_of(j->state, j->reason, j->exit_code, j->signal, &why);
        if (why == NULL || strchr(why, '\n') != NULL)
            fuzz_fail("an outcome without a one-line reason", input);
        if (slurm_outcome_name(o) == NULL)
            fuzz_fail("an outcome without a name", input);
        free(why);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_string(data, size);
    struct slurm_jobs *squeue = slurm_squeue_parse(text);
    fuzz_check(squeue, text);
    slurm_jobs_free(squeue);
    struct slurm_jobs *scontrol = slurm_scontrol_parse(text);
    fuzz_check(scontrol, text);
    slurm_jobs_free(scontrol);
    free(text);
    return 0;
}
