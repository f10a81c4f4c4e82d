/* util/slurm-parse.c: reading back what Slurm says (docs/SLURM.md, "What drover reads back").
 * The fixtures are outputs of a real Slurm 22.05 (tests/unit/slurm-fixtures/README.md says how
 * each was made); the edge cases are written by hand: truncated and garbage lines, huge ids,
 * raw wait statuses, job names that look like fields, and mutated fixtures (no crash, ever). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"
#include "util/slurm.h"

/* ---- fixtures ---------------------------------------------------------------------------- */

/* The fixture NAME (malloc'd, NUL-terminated), from slurm-fixtures/ beside this file. */
static char *fixture(const char *name)
{
    const char *self = __FILE__, *slash = strrchr(self, '/');
    char path[4096];
    snprintf(path, sizeof path, "%.*s/slurm-fixtures/%s", slash ? (int)(slash - self) : 1,
             slash ? self : ".", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open fixture %s", path);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, out);
    fclose(f);
    fclose(out);
    return text;
}

static struct slurm_jobs *squeue_fixture(const char *name)
{
    char *text = fixture(name);
    struct slurm_jobs *jobs = slurm_squeue_parse(text);
    free(text);
    return jobs;
}

static struct slurm_jobs *scontrol_fixture(const char *name)
{
    char *text = fixture(name);
    struct slurm_jobs *jobs = slurm_scontrol_parse(text);
    free(text);
    return jobs;
}

static void assert_reason(const char *got, const char *want)
{
    if (want == NULL)
        assert_null(got);
    else {
        assert_non_null(got);
        assert_string_equal(got, want);
    }
}

/* The entry for job (task) has this state, reason, exit code and signal. */
static const struct slurm_job_info *expect_job(const struct slurm_jobs *jobs, int64_t job,
                                               int64_t task, const char *state,
                                               const char *reason, int exit_code, int signal)
{
    const struct slurm_job_info *j = slurm_jobs_find(jobs, job, task);
    if (j == NULL)
        fail_msg("job %lld_%lld not found", (long long)job, (long long)task);
    assert_string_equal(j->state, state);
    assert_reason(j->reason, reason);
    assert_int_equal(j->exit_code, exit_code);
    assert_int_equal(j->signal, signal);
    return j;
}

/* What drover makes of a job: the outcome and the reason it shows. */
static void expect_outcome(const struct slurm_job_info *j, enum slurm_outcome outcome,
                           const char *why)
{
    char *got = NULL;
    assert_int_equal(slurm_outcome_of(j->state, j->reason, j->exit_code, j->signal, &got),
                     outcome);
    assert_non_null(got);
    assert_string_equal(got, why);
    free(got);
}

/* ---- squeue, captured -------------------------------------------------------------------- */

/* Pending (held, Resources, Dependency, an array's rest), running, and just finished. */
static void test_squeue_live(void **state)
{
    (void)state;
    struct slurm_jobs *q = squeue_fixture("squeue-live.txt");
    assert_int_equal(q->count, 13);
    assert_int_equal(q->skipped, 0);
    expect_outcome(expect_job(q, 1, SLURM_NO_TASK, "PENDING", "JobHeldUser", 0, 0),
                   SLURM_OUTCOME_QUEUED, "slurm: JobHeldUser");
    expect_outcome(expect_job(q, 12, SLURM_NO_TASK, "PENDING", "Resources", 0, 0),
                   SLURM_OUTCOME_QUEUED, "slurm: Resources");
    expect_outcome(expect_job(q, 13, SLURM_NO_TASK, "PENDING", "Dependency", 0, 0),
                   SLURM_OUTCOME_QUEUED, "slurm: Dependency");
    expect_outcome(expect_job(q, 2, SLURM_NO_TASK, "RUNNING", NULL, 0, 0),
                   SLURM_OUTCOME_RUNNING, "running on Slurm");
    expect_job(q, 8, SLURM_NO_TASK, "RUNNING", NULL, 0, 0);
    expect_outcome(expect_job(q, 3, SLURM_NO_TASK, "COMPLETED", NULL, 0, 0),
                   SLURM_OUTCOME_SUCCEEDED, "exit code 0");
    /* 22.05 prints the raw wait status: exit 3 is 768, SIGKILL is 9. */
    expect_outcome(expect_job(q, 4, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", 3, 0),
                   SLURM_OUTCOME_FAILED, "exit code 3");
    expect_outcome(expect_job(q, 5, SLURM_NO_TASK, "FAILED", "JobLaunchFailure", 0, 9),
                   SLURM_OUTCOME_FAILED, "killed by signal 9 (SIGKILL)");
    expect_job(q, 9, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", 4, 0);
    expect_outcome(expect_job(q, 6, SLURM_NO_TASK, "CANCELLED", "DependencyNeverSatisfied", 0, 0),
                   SLURM_OUTCOME_CANCELLED, "cancelled in Slurm (DependencyNeverSatisfied)");
    /* An array: two elements running, the rest one line "7_[2-3%2]". */
    const struct slurm_job_info *e0 = expect_job(q, 7, 0, "RUNNING", NULL, 0, 0);
    assert_int_equal(e0->array_task_id, 0);
    assert_null(e0->array_tasks);
    expect_job(q, 7, 1, "RUNNING", NULL, 0, 0);
    const struct slurm_job_info *rest = expect_job(q, 7, 2, "PENDING", "JobArrayTaskLimit", 0, 0);
    assert_int_equal(rest->array_task_id, SLURM_NO_TASK);
    assert_string_equal(rest->array_tasks, "2-3%2");
    assert_ptr_equal(slurm_jobs_find(q, 7, 3), rest);
    assert_null(slurm_jobs_find(q, 7, 4));
    assert_null(slurm_jobs_find(q, 7, SLURM_NO_TASK)); /* an array, asked as a plain job */
    assert_null(slurm_jobs_find(q, 99, SLURM_NO_TASK));
    assert_null(slurm_jobs_find(q, 1, 0));
    /* Sorted by job, then element (the rest first). */
    for (size_t i = 1; i < q->count; i++)
        assert_true(q->job[i - 1].job_id < q->job[i].job_id ||
                    (q->job[i - 1].job_id == q->job[i].job_id &&
                     q->job[i - 1].array_task_id < q->job[i].array_task_id));
    slurm_jobs_free(q);
}

/* The same moment as `--format='%i|%T|%r'`: the same jobs, no exit status. */
static void test_squeue_three_fields(void **state)
{
    (void)state;
    struct slurm_jobs *q = squeue_fixture("squeue-live-o.txt");
    assert_int_equal(q->count, 13);
    assert_int_equal(q->skipped, 0);
    expect_job(q, 4, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", -1, 0);
    expect_job(q, 7, 3, "PENDING", "JobArrayTaskLimit", -1, 0);
    char *why = NULL;
    assert_int_equal(slurm_outcome_of("FAILED", "NonZeroExitCode", -1, 0, &why),
                     SLURM_OUTCOME_FAILED);
    assert_string_equal(why, "failed (Slurm: NonZeroExitCode)");
    free(why);
    slurm_jobs_free(q);
}

/* squeue --json of the same moment says the same of every job (jansson reads it): the text
 * format loses nothing drover needs. */
static void test_squeue_matches_json(void **state)
{
    (void)state;
    struct slurm_jobs *q = squeue_fixture("squeue-live.txt");
    char *text = fixture("squeue-live.json");
    json_error_t error;
    json_t *root = json_loads(text, 0, &error);
    free(text);
    assert_non_null(root);
    json_t *jobs = json_object_get(root, "jobs"), *job;
    size_t i;
    assert_int_equal(json_array_size(jobs), q->count);
    json_array_foreach(jobs, i, job) {
        int64_t id = json_integer_value(json_object_get(job, "job_id"));
        int64_t array = json_integer_value(json_object_get(job, "array_job_id"));
        json_t *task = json_object_get(job, "array_task_id");
        const char *rest = json_string_value(json_object_get(job, "array_task_string"));
        int64_t t = json_is_integer(task) ? json_integer_value(task) : SLURM_NO_TASK;
        if (array != 0 && t == SLURM_NO_TASK) /* the rest: ask for its first element */
            t = strtoll(rest, NULL, 10);
        const struct slurm_job_info *j = slurm_jobs_find(q, array ? array : id, t);
        if (j == NULL)
            fail_msg("job %lld from the JSON is not in the text", (long long)id);
        assert_string_equal(j->state, json_string_value(json_object_get(job, "job_state")));
        const char *reason = json_string_value(json_object_get(job, "state_reason"));
        assert_reason(j->reason, strcmp(reason, "None") == 0 ? NULL : reason);
        int exit_code, signal;
        assert_int_equal(slurm_wait_status(json_integer_value(json_object_get(job, "exit_code")),
                                           &exit_code, &signal), 0);
        assert_int_equal(j->exit_code, exit_code);
        assert_int_equal(j->signal, signal);
        if (j->array_tasks)
            assert_string_equal(j->array_tasks, rest);
    }
    json_decref(root);
    slurm_jobs_free(q);
}

/* Everything ended: TIMEOUT, CANCELLED (running and pending), array elements' exit codes. */
static void test_squeue_final(void **state)
{
    (void)state;
    struct slurm_jobs *q = squeue_fixture("squeue-final.txt");
    assert_int_equal(q->count, 14);
    assert_int_equal(q->skipped, 0);
    expect_outcome(expect_job(q, 8, SLURM_NO_TASK, "TIMEOUT", "TimeLimit", 0, 15),
                   SLURM_OUTCOME_TIMED_OUT, "time limit reached (Slurm)");
    expect_outcome(expect_job(q, 2, SLURM_NO_TASK, "CANCELLED", NULL, 0, 15),
                   SLURM_OUTCOME_CANCELLED, "cancelled in Slurm");
    expect_job(q, 1, SLURM_NO_TASK, "CANCELLED", "JobHeldUser", 0, 0);
    expect_job(q, 12, SLURM_NO_TASK, "COMPLETED", NULL, 0, 0);
    expect_outcome(expect_job(q, 7, 0, "COMPLETED", NULL, 0, 0), SLURM_OUTCOME_SUCCEEDED,
                   "exit code 0");
    for (int t = 1; t <= 3; t++)
        expect_job(q, 7, t, "FAILED", "NonZeroExitCode", t, 0);
    /* afterok on a cancelled job without --kill-on-invalid-dep: pending for ever (drover's
     * mapping always adds it, so drover's own jobs end instead, as job 6 did). */
    expect_job(q, 13, SLURM_NO_TASK, "PENDING", "DependencyNeverSatisfied", 0, 0);
    slurm_jobs_free(q);
}

/* ---- scontrol show job -o, captured ------------------------------------------------------ */

struct scontrol_case {
    const char *file;
    int64_t job, task;
    const char *state, *reason;
    int exit_code, signal;
    int64_t run_time_s;
    enum slurm_outcome outcome;
    const char *why;
};

static void test_scontrol_fixtures(void **state)
{
    (void)state;
    static const struct scontrol_case cases[] = {
        {"scontrol-pending-held.txt", 1, SLURM_NO_TASK, "PENDING", "JobHeldUser", 0, 0, 0,
         SLURM_OUTCOME_QUEUED, "slurm: JobHeldUser"},
        {"scontrol-pending-resources.txt", 12, SLURM_NO_TASK, "PENDING", "Resources", 0, 0, 0,
         SLURM_OUTCOME_QUEUED, "slurm: Resources"},
        {"scontrol-running.txt", 2, SLURM_NO_TASK, "RUNNING", NULL, 0, 0, 3,
         SLURM_OUTCOME_RUNNING, "running on Slurm"},
        {"scontrol-completed.txt", 3, SLURM_NO_TASK, "COMPLETED", NULL, 0, 0, 0,
         SLURM_OUTCOME_SUCCEEDED, "exit code 0"},
        {"scontrol-failed-exit3.txt", 4, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", 3, 0, 0,
         SLURM_OUTCOME_FAILED, "exit code 3"},
        /* The same without -o: indented lines, a blank line after. */
        {"scontrol-multiline-failed-exit3.txt", 4, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", 3,
         0, 0, SLURM_OUTCOME_FAILED, "exit code 3"},
        {"scontrol-failed-signal9.txt", 5, SLURM_NO_TASK, "FAILED", "JobLaunchFailure", 0, 9, 0,
         SLURM_OUTCOME_FAILED, "killed by signal 9 (SIGKILL)"},
        /* Its name is 'x JobState=COMPLETED ExitCode=0:0 UserId=y': not its state. */
        {"scontrol-failed-odd-name.txt", 9, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", 4, 0, 0,
         SLURM_OUTCOME_FAILED, "exit code 4"},
        {"scontrol-timeout.txt", 8, SLURM_NO_TASK, "TIMEOUT", "TimeLimit", 0, 15, 86,
         SLURM_OUTCOME_TIMED_OUT, "time limit reached (Slurm)"},
        {"scontrol-cancelled-running.txt", 2, SLURM_NO_TASK, "CANCELLED", NULL, 0, 15, 3,
         SLURM_OUTCOME_CANCELLED, "cancelled in Slurm"},
        {"scontrol-cancelled-pending.txt", 1, SLURM_NO_TASK, "CANCELLED", "JobHeldUser", 0, 0, 0,
         SLURM_OUTCOME_CANCELLED, "cancelled in Slurm (JobHeldUser)"},
        /* Never started: 22.05 prints RunTime=20788-06:35:24 (now − 0); read as 0. */
        {"scontrol-cancelled-invalid-dep.txt", 6, SLURM_NO_TASK, "CANCELLED",
         "DependencyNeverSatisfied", 0, 0, 0, SLURM_OUTCOME_CANCELLED,
         "cancelled in Slurm (DependencyNeverSatisfied)"},
        /* The last element of an array keeps the array's JobId (7), the others their own. */
        {"scontrol-array-task-failed.txt", 7, 3, "FAILED", "NonZeroExitCode", 3, 0, 8,
         SLURM_OUTCOME_FAILED, "exit code 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct scontrol_case *c = &cases[i];
        struct slurm_jobs *jobs = scontrol_fixture(c->file);
        if (jobs->count != 1 || jobs->skipped != 0)
            fail_msg("%s: %zu records, %zu skipped", c->file, jobs->count, jobs->skipped);
        const struct slurm_job_info *j = &jobs->job[0];
        assert_int_equal(j->job_id, c->job);
        assert_int_equal(j->array_task_id, c->task);
        assert_null(j->array_tasks);
        if (strcmp(j->state, c->state) != 0)
            fail_msg("%s: state %s, not %s", c->file, j->state, c->state);
        assert_reason(j->reason, c->reason);
        assert_int_equal(j->exit_code, c->exit_code);
        assert_int_equal(j->signal, c->signal);
        assert_int_equal(j->run_time_s, c->run_time_s);
        expect_outcome(j, c->outcome, c->why);
        slurm_jobs_free(jobs);
    }
}

/* `scontrol show job -o ARRAY`: one line per element, and one for the rest. */
static void test_scontrol_array(void **state)
{
    (void)state;
    struct slurm_jobs *jobs = scontrol_fixture("scontrol-array-running.txt");
    assert_int_equal(jobs->count, 3);
    assert_int_equal(jobs->skipped, 0);
    const struct slurm_job_info *rest = slurm_jobs_find(jobs, 7, 3);
    assert_non_null(rest);
    assert_string_equal(rest->array_tasks, "2-3%2");
    assert_string_equal(rest->state, "PENDING");
    for (int t = 0; t <= 1; t++) {
        const struct slurm_job_info *j = slurm_jobs_find(jobs, 7, t);
        assert_non_null(j);
        assert_int_equal(j->array_task_id, t);
        assert_string_equal(j->state, "RUNNING");
        assert_int_equal(j->run_time_s, 2);
    }
    slurm_jobs_free(jobs);
}

/* A job slurmctld forgot: an error line, no record. No accounting: sacct says so. */
static void test_scontrol_gone(void **state)
{
    (void)state;
    struct slurm_jobs *jobs = scontrol_fixture("scontrol-gone.txt");
    assert_int_equal(jobs->count, 0);
    assert_true(jobs->skipped >= 1);
    slurm_jobs_free(jobs);
}

/* ---- by hand: squeue ---------------------------------------------------------------------- */

static void test_squeue_edges(void **state)
{
    (void)state;
    struct slurm_jobs *q = slurm_squeue_parse(NULL);
    assert_int_equal(q->count + q->skipped, 0);
    slurm_jobs_free(q);
    slurm_jobs_free(NULL);
    q = slurm_squeue_parse("\n\r\n\n");
    assert_int_equal(q->count + q->skipped, 0);
    assert_null(slurm_jobs_find(q, 1, SLURM_NO_TASK));
    slurm_jobs_free(q);

    static const char *const bad[] = {
        "hello",                               /* garbage */
        "JOBID|STATE|REASON|EXIT_CODE|",       /* the header, without --noheader */
        "|||",
        "12|RUNN",                             /* truncated */
        "12|RUNNING",
        "0|RUNNING|None",                      /* not a job id */
        "-1|RUNNING|None",
        "4294967294|RUNNING|None",             /* Slurm's NO_VAL: above the largest id */
        "99999999999999999999999|RUNNING|None",
        "12_|RUNNING|None",
        "12_x|RUNNING|None",
        "12_[|PENDING|None",
        "12_[]|PENDING|None",
        "12_[1-3;rm]|PENDING|None",
        "1 2|RUNNING|None",
        "12|running|None",                     /* a state is upper case */
        "12||None",
        "12|RUN\001NING|None",                 /* a control character */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        q = slurm_squeue_parse(bad[i]);
        if (q->count != 0 || q->skipped != 1)
            fail_msg("'%s': %zu read, %zu skipped", bad[i], q->count, q->skipped);
        slurm_jobs_free(q);
    }

    /* Good lines among bad, CRLF, extra fields, no final newline, odd exit fields. */
    q = slurm_squeue_parse("garbage\r\n"
                           "4294967293|RUNNING|None|0|\r\n"
                           "12|FAILED|NonZeroExitCode|768|00:17|anything|more\n"
                           "13|FAILED|X|abc\n"
                           "14|FAILED|X|4294967295\n"
                           "15|FAILED|X|99999999999\n"
                           "16|FAILED|X|134\n"
                           "17|FAILED|X|127\n"
                           "18|WEIRD_NEW_STATE|(null)|0\n"
                           "19_4000000|RUNNING|None|0|\n"
                           "20_[0,4-9:2%3]|PENDING|JobArrayTaskLimit|0|\n"
                           "21|PENDING|ReqNodeNotAvail,_UnavailableNodes:vm|0|\n"
                           "22|PENDING|caf\xc3\xa9|0|\n"
                           "23|PENDING|bad\xff\xfe|0|");
    assert_int_equal(q->count, 13);
    assert_int_equal(q->skipped, 1);
    expect_job(q, 22, SLURM_NO_TASK, "PENDING", "caf\xc3\xa9", 0, 0); /* UTF-8 is kept */
    expect_job(q, 23, SLURM_NO_TASK, "PENDING", NULL, 0, 0); /* not UTF-8: no reason */
    expect_job(q, 4294967293LL, SLURM_NO_TASK, "RUNNING", NULL, 0, 0);
    expect_job(q, 12, SLURM_NO_TASK, "FAILED", "NonZeroExitCode", 3, 0);
    expect_job(q, 13, SLURM_NO_TASK, "FAILED", "X", -1, 0);     /* not a number: unknown */
    expect_job(q, 14, SLURM_NO_TASK, "FAILED", "X", -1, 0);     /* above 16 bits */
    expect_job(q, 15, SLURM_NO_TASK, "FAILED", "X", -1, 0);     /* above 32 bits */
    expect_job(q, 16, SLURM_NO_TASK, "FAILED", "X", 0, 6);      /* SIGABRT + core dumped */
    expect_job(q, 17, SLURM_NO_TASK, "FAILED", "X", -1, 0);     /* 0x7f: stopped, not ended */
    expect_outcome(expect_job(q, 18, SLURM_NO_TASK, "WEIRD_NEW_STATE", NULL, 0, 0),
                   SLURM_OUTCOME_POLL, "slurm: unknown state 'WEIRD_NEW_STATE'");
    expect_job(q, 19, 4000000, "RUNNING", NULL, 0, 0);
    for (int t = 0; t <= 10; t++) {
        const struct slurm_job_info *j = slurm_jobs_find(q, 20, t);
        bool in = t == 0 || t == 4 || t == 6 || t == 8;
        if ((j != NULL) != in)
            fail_msg("element %d of 0,4-9:2%%3 %s", t, in ? "not found" : "found");
    }
    expect_outcome(expect_job(q, 21, SLURM_NO_TASK, "PENDING",
                              "ReqNodeNotAvail,_UnavailableNodes:vm", 0, 0),
                   SLURM_OUTCOME_QUEUED, "slurm: ReqNodeNotAvail,_UnavailableNodes:vm");
    slurm_jobs_free(q);
}

/* Many jobs: every one found, in time (one poll of 100,000 tracked jobs). */
static void test_squeue_many(void **state)
{
    (void)state;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    for (int i = 100000; i > 0; i--)
        fprintf(out, "%d_%d|RUNNING|None|0|\n", 1000 + i / 10, i % 10);
    fprintf(out, "%s\n", "garbage");
    fclose(out);
    struct slurm_jobs *q = slurm_squeue_parse(text);
    free(text);
    assert_int_equal(q->count, 100000);
    assert_int_equal(q->skipped, 1);
    for (int i = 1; i <= 100000; i++)
        assert_non_null(slurm_jobs_find(q, 1000 + i / 10, i % 10));
    assert_null(slurm_jobs_find(q, 1000, 0));
    slurm_jobs_free(q);
}

static void test_wait_status(void **state)
{
    (void)state;
    static const struct {
        int64_t status;
        int rc, exit_code, signal;
    } cases[] = {
        {0, 0, 0, 0},        {768, 0, 3, 0},     {256, 0, 1, 0},   {0xff00, 0, 255, 0},
        {9, 0, 0, 9},        {15, 0, 0, 15},     {0x86, 0, 0, 6},  {0x7f, -1, -1, 0},
        {0x10000, -1, -1, 0}, {-1, -1, -1, 0},   {INT64_MAX, -1, -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int exit_code = 42, signal = 42;
        assert_int_equal(slurm_wait_status(cases[i].status, &exit_code, &signal), cases[i].rc);
        assert_int_equal(exit_code, cases[i].exit_code);
        assert_int_equal(signal, cases[i].signal);
    }
}

/* ---- by hand: scontrol -------------------------------------------------------------------- */

static void expect_one(const char *text, const char *state, int64_t job, int exit_code,
                       int signal, int64_t run_time_s)
{
    struct slurm_jobs *jobs = slurm_scontrol_parse(text);
    if (jobs->count != 1)
        fail_msg("'%s': %zu records, %zu skipped", text, jobs->count, jobs->skipped);
    assert_string_equal(jobs->job[0].state, state);
    assert_int_equal(jobs->job[0].job_id, job);
    assert_int_equal(jobs->job[0].exit_code, exit_code);
    assert_int_equal(jobs->job[0].signal, signal);
    assert_int_equal(jobs->job[0].run_time_s, run_time_s);
    slurm_jobs_free(jobs);
}

static void test_scontrol_edges(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "JobId=5",                             /* no state */
        "JobId=5 JobName=x UserId=root(0) GroupId=root(0) JobSta", /* truncated */
        "JobId=abc JobState=RUNNING",
        "JobId=0 JobState=RUNNING",
        "JobId=4294967294 JobState=RUNNING",
        "JobId=5 JobState=running",
        "JobId=5 JobState=",
        "slurm_load_jobs error: Invalid job id specified",
        "   JobState=RUNNING",                 /* indented, with no record before */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct slurm_jobs *jobs = slurm_scontrol_parse(bad[i]);
        if (jobs->count != 0 || jobs->skipped != 1)
            fail_msg("'%s': %zu read, %zu skipped", bad[i], jobs->count, jobs->skipped);
        slurm_jobs_free(jobs);
    }
    struct slurm_jobs *jobs = slurm_scontrol_parse("");
    assert_int_equal(jobs->count + jobs->skipped, 0);
    slurm_jobs_free(jobs);

    expect_one("JobId=5 JobState=RUNNING ExitCode=garbage RunTime=xx", "RUNNING", 5, -1, 0, -1);
    expect_one("JobId=5 JobState=FAILED ExitCode=256:0 RunTime=1-02:03:04", "FAILED", 5, -1, 0,
               93784);
    expect_one("JobId=5 JobState=FAILED ExitCode=0:9 RunTime=00:60:00", "FAILED", 5, 0, 9, -1);
    expect_one("JobId=4294967293 JobState=COMPLETED ExitCode=0:0 RunTime=00:00:07", "COMPLETED",
               4294967293LL, 0, 0, 7);
    /* A name with blanks and fields in it, ending at the real UserId/GroupId pair. */
    expect_one("JobId=5 JobName=a JobState=COMPLETED ExitCode=0:0 UserId=b GroupId=c "
               "UserId=root(0) GroupId=root(0) JobState=FAILED ExitCode=2:0",
               "FAILED", 5, 2, 0, -1);
    expect_one("JobId=5 JobName= UserId=u(1000) GroupId=g(1000) JobState=PENDING", "PENDING", 5,
               -1, 0, -1);
    /* A Slurm that prints no UserId after the name: its first word is the name. */
    expect_one("JobId=5 JobName=train JobState=RUNNING Reason=None", "RUNNING", 5, -1, 0, -1);
    /* The multi-line form (scontrol without -o), two records, CRLF. */
    jobs = slurm_scontrol_parse("JobId=5 JobName=a b\r\n"
                                "   UserId=root(0) GroupId=root(0) MCS_label=N/A\r\n"
                                "   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)\r\n"
                                "   ExitCode=0:15 RunTime=00:01:01\r\n"
                                "\r\n"
                                "JobId=6 ArrayJobId=4 ArrayTaskId=2 JobName=x\n"
                                "   UserId=root(0) GroupId=root(0)\n"
                                "   JobState=OUT_OF_MEMORY Reason=OutOfMemory\n");
    assert_int_equal(jobs->count, 2);
    assert_int_equal(jobs->skipped, 0);
    const struct slurm_job_info *j = slurm_jobs_find(jobs, 5, SLURM_NO_TASK);
    assert_non_null(j);
    assert_string_equal(j->state, "TIMEOUT");
    assert_int_equal(j->signal, 15);
    assert_int_equal(j->run_time_s, 61);
    j = slurm_jobs_find(jobs, 4, 2);
    assert_non_null(j);
    expect_outcome(j, SLURM_OUTCOME_FAILED, "out of memory (Slurm)");
    slurm_jobs_free(jobs);
}

/* ---- what a state means ------------------------------------------------------------------ */

static void test_outcomes(void **state)
{
    (void)state;
    static const struct {
        const char *state, *reason;
        int exit_code, signal;
        enum slurm_outcome outcome;
        const char *why;
    } cases[] = {
        {"PENDING", "Priority", 0, 0, SLURM_OUTCOME_QUEUED, "slurm: Priority"},
        {"PENDING", NULL, 0, 0, SLURM_OUTCOME_QUEUED, "slurm: PENDING"},
        {"PENDING", "None", 0, 0, SLURM_OUTCOME_QUEUED, "slurm: PENDING"},
        {"REQUEUED", NULL, 0, 0, SLURM_OUTCOME_QUEUED, "slurm: REQUEUED"},
        {"REQUEUE_HOLD", "JobHeldAdmin", 0, 0, SLURM_OUTCOME_QUEUED, "slurm: JobHeldAdmin"},
        {"REQUEUE_FED", NULL, 0, 0, SLURM_OUTCOME_QUEUED, "slurm: REQUEUE_FED"},
        {"RESV_DEL_HOLD", NULL, 0, 0, SLURM_OUTCOME_QUEUED, "slurm: RESV_DEL_HOLD"},
        {"SPECIAL_EXIT", NULL, 3, 0, SLURM_OUTCOME_QUEUED, "slurm: SPECIAL_EXIT"},
        {"RUNNING", NULL, 0, 0, SLURM_OUTCOME_RUNNING, "running on Slurm"},
        {"COMPLETING", NULL, 3, 0, SLURM_OUTCOME_RUNNING, "running on Slurm (completing)"},
        {"CONFIGURING", NULL, 0, 0, SLURM_OUTCOME_RUNNING,
         "running on Slurm (configuring its nodes)"},
        {"SUSPENDED", NULL, 0, 0, SLURM_OUTCOME_RUNNING, "suspended by Slurm"},
        {"STOPPED", NULL, 0, 0, SLURM_OUTCOME_RUNNING, "stopped by Slurm"},
        {"SIGNALING", NULL, 0, 0, SLURM_OUTCOME_RUNNING, "running on Slurm (being signalled)"},
        {"STAGE_OUT", NULL, 0, 0, SLURM_OUTCOME_RUNNING, "running on Slurm (staging out)"},
        {"RESIZING", NULL, 0, 0, SLURM_OUTCOME_RUNNING, "running on Slurm (resizing)"},
        {"COMPLETED", NULL, 0, 0, SLURM_OUTCOME_SUCCEEDED, "exit code 0"},
        {"FAILED", "NonZeroExitCode", 3, 0, SLURM_OUTCOME_FAILED, "exit code 3"},
        {"FAILED", "JobLaunchFailure", 0, 9, SLURM_OUTCOME_FAILED,
         "killed by signal 9 (SIGKILL)"},
        {"FAILED", NULL, 0, 0, SLURM_OUTCOME_FAILED, "failed (Slurm: no reason given)"},
        {"FAILED", "None", -1, 0, SLURM_OUTCOME_FAILED, "failed (Slurm: no reason given)"},
        {"OUT_OF_MEMORY", "OutOfMemory", 0, 9, SLURM_OUTCOME_FAILED, "out of memory (Slurm)"},
        {"TIMEOUT", "TimeLimit", 0, 15, SLURM_OUTCOME_TIMED_OUT, "time limit reached (Slurm)"},
        {"DEADLINE", NULL, 0, 0, SLURM_OUTCOME_TIMED_OUT, "deadline reached (Slurm)"},
        {"CANCELLED", NULL, 0, 15, SLURM_OUTCOME_CANCELLED, "cancelled in Slurm"},
        {"NODE_FAIL", NULL, 0, 0, SLURM_OUTCOME_REQUEUE, "node failure (Slurm): submitted again"},
        {"PREEMPTED", NULL, 0, 0, SLURM_OUTCOME_REQUEUE, "preempted (Slurm): submitted again"},
        {"BOOT_FAIL", NULL, 0, 0, SLURM_OUTCOME_REQUEUE,
         "node boot failure (Slurm): submitted again"},
        {"REVOKED", NULL, 0, 0, SLURM_OUTCOME_POLL, "slurm: unknown state 'REVOKED'"},
        {"", NULL, 0, 0, SLURM_OUTCOME_POLL, "slurm: unknown state ''"},
        {NULL, NULL, 0, 0, SLURM_OUTCOME_POLL, "slurm: unknown state ''"},
        {"PD", NULL, 0, 0, SLURM_OUTCOME_POLL, "slurm: unknown state 'PD'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *why = NULL;
        enum slurm_outcome got = slurm_outcome_of(cases[i].state, cases[i].reason,
                                                  cases[i].exit_code, cases[i].signal, &why);
        if (got != cases[i].outcome || strcmp(why, cases[i].why) != 0)
            fail_msg("%s: %s '%s', not %s '%s'", cases[i].state ? cases[i].state : "NULL",
                     slurm_outcome_name(got), why, slurm_outcome_name(cases[i].outcome),
                     cases[i].why);
        free(why);
    }
    assert_string_equal(slurm_outcome_name(SLURM_OUTCOME_POLL), "poll");
    assert_string_equal(slurm_outcome_name(SLURM_OUTCOME_TIMED_OUT), "timed_out");
    assert_string_equal(slurm_outcome_name(SLURM_OUTCOME_REQUEUE), "requeue");
}

/* ---- no crash, whatever the bytes --------------------------------------------------------- */

/* Every fixture, cut at random places, bytes changed at random (a fixed seed): both parsers
 * read it without a crash, and what they keep is well-formed. */
static void test_mutated(void **state)
{
    (void)state;
    static const char *const files[] = {
        "squeue-live.txt", "squeue-final.txt", "scontrol-array-running.txt",
        "scontrol-failed-odd-name.txt", "scontrol-timeout.txt",
    };
    static const char alphabet[] = "|_[]%-:,= \n\r0123456789ABZaz()\x01\xff";
    unsigned seed = 12;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char *orig = fixture(files[f]);
        size_t len = strlen(orig);
        for (int round = 0; round < 400; round++) {
            char *text = strdup(orig);
            int changes = 1 + (int)(rand_r(&seed) % 8);
            for (int c = 0; c < changes; c++)
                text[rand_r(&seed) % len] = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
            text[rand_r(&seed) % (len + 1)] = '\0';
            struct slurm_jobs *jobs[2] = {slurm_squeue_parse(text), slurm_scontrol_parse(text)};
            for (int k = 0; k < 2; k++) {
                for (size_t i = 0; i < jobs[k]->count; i++) {
                    const struct slurm_job_info *j = &jobs[k]->job[i];
                    assert_true(j->job_id >= 1 && j->job_id <= SLURM_MAX_JOB_ID);
                    assert_non_null(j->state);
                    assert_true(j->exit_code >= -1 && j->exit_code <= 255);
                    assert_true(j->reason == NULL || utf8_check(j->reason) == 0);
                    char *why = NULL;
                    slurm_outcome_of(j->state, j->reason, j->exit_code, j->signal, &why);
                    assert_null(strchr(why, '\n'));
                    free(why);
                    slurm_jobs_find(jobs[k], j->job_id, j->array_task_id);
                    slurm_jobs_find(jobs[k], j->job_id, 3);
                }
                slurm_jobs_free(jobs[k]);
            }
            free(text);
        }
        free(orig);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_squeue_live),       cmocka_unit_test(test_squeue_three_fields),
        cmocka_unit_test(test_squeue_matches_json), cmocka_unit_test(test_squeue_final),
        cmocka_unit_test(test_scontrol_fixtures), cmocka_unit_test(test_scontrol_array),
        cmocka_unit_test(test_scontrol_gone),     cmocka_unit_test(test_squeue_edges),
        cmocka_unit_test(test_squeue_many),       cmocka_unit_test(test_wait_status),
        cmocka_unit_test(test_scontrol_edges),    cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_mutated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
