/* What Slurm says, read back (util/slurm.h, docs/SLURM.md "What drover reads back"): squeue's
 * and scontrol's text, and what a Slurm state means to drover. Pure: the daemon runs the
 * commands; this reads their output. Nothing a line holds can crash it: a line that is not one
 * job is skipped and counted. */
#include "util/slurm.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- small readers ----------------------------------------------------------------------- */

/* The decimal number in s[0, n): digits only, at most max. */
static bool slurm_number(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned digit = (unsigned)(s[i] - '0');
        if (v > (max - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

static bool slurm_job_id(const char *s, size_t n, int64_t *out)
{
    uint64_t v;
    if (!slurm_number(s, n, SLURM_MAX_JOB_ID, &v) || v == 0)
        return false;
    *out = (int64_t)v;
    return true;
}

/* An array's elements as Slurm writes them: "2-3%2", "0,4-9:2", "5". */
static bool slurm_task_spec_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strchr("0123456789,-:%", s[i]) == NULL)
            return false;
    return true;
}

/* Whether task is one of the elements of spec (already checked by slurm_task_spec_ok). */
static bool slurm_task_spec_has(const char *spec, int64_t task)
{
    const char *p = spec, *end = spec + strcspn(spec, "%"); /* "%K" is a limit, not elements */
    while (p < end) {
        size_t n = strcspn(p, ",");
        if (p + n > end)
            n = (size_t)(end - p);
        uint64_t first, last, step = 1;
        size_t dash = strcspn(p, "-,%"), colon = strcspn(p, ":,%");
        bool ok;
        if (dash >= n) {
            ok = slurm_number(p, n, SLURM_MAX_JOB_ID, &first);
            last = first;
        } else {
            size_t upto = colon < n ? colon : n;
            ok = slurm_number(p, dash, SLURM_MAX_JOB_ID, &first) &&
                 upto > dash + 1 &&
                 slurm_number(p + dash + 1, upto - dash - 1, SLURM_MAX_JOB_ID, &last) &&
                 (colon >= n || slurm_number(p + colon + 1, n - colon - 1, SLURM_MAX_JOB_ID,
                                             &step));
        }
        if (ok && step > 0 && task >= (int64_t)first && task <= (int64_t)last &&
            ((uint64_t)task - first) % step == 0)
            return true;
        p += n + 1;
    }
    return false;
}

static bool slurm_printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* "None" and "(null)" are Slurm's words for no reason. A reason drover could not show (a
 * control character, not UTF-8, which JSON cannot carry) is dropped. */
static char *slurm_reason(const char *s, size_t n)
{
    if (n == 0 || (n == 4 && memcmp(s, "None", 4) == 0) ||
        (n == 6 && memcmp(s, "(null)", 6) == 0) || !slurm_printable(s, n))
        return NULL;
    char *reason = xstrndup(s, n);
    if (utf8_check(reason) != 0) {
        free(reason);
        return NULL;
    }
    return reason;
}

int slurm_wait_status(int64_t status, int *exit_code, int *signal)
{
    *exit_code = -1;
    *signal = 0;
    if (status < 0 || status > 0xffff || (status & 0x7f) == 0x7f)
        return -1; /* not a wait status, or a stopped (not ended) process */
    *exit_code = (int)((status >> 8) & 0xff);
    *signal = (int)(status & 0x7f);
    return 0;
}

static void slurm_info_clear(struct slurm_job_info *job)
{
    free(job->array_tasks);
    free(job->state);
    free(job->reason);
}

void slurm_jobs_free(struct slurm_jobs *jobs)
{
    if (jobs == NULL)
        return;
    for (size_t i = 0; i < jobs->count; i++)
        slurm_info_clear(&jobs->job[i]);
    free(jobs->job);
    free(jobs);
}

static void slurm_jobs_add(struct slurm_jobs *jobs, size_t *cap, const struct slurm_job_info *job)
{
    xgrow((void **)&jobs->job, cap, jobs->count + 1, sizeof *jobs->job);
    jobs->job[jobs->count++] = *job;
}

static int slurm_cmp_job(const void *a, const void *b)
{
    const struct slurm_job_info *x = a, *y = b;
    if (x->job_id != y->job_id)
        return (x->job_id > y->job_id) - (x->job_id < y->job_id);
    return (x->array_task_id > y->array_task_id) - (x->array_task_id < y->array_task_id);
}

/* ---- squeue ------------------------------------------------------------------------------ */

/* "12", "7_3", "7_[2-3%2]" */
static bool squeue_id(const char *s, size_t n, struct slurm_job_info *job)
{
    size_t under = 0;
    while (under < n && s[under] != '_')
        under++;
    if (!slurm_job_id(s, under, &job->job_id))
        return false;
    if (under == n)
        return true;
    const char *t = s + under + 1;
    size_t tn = n - under - 1;
    if (tn >= 2 && t[0] == '[' && t[tn - 1] == ']') {
        if (!slurm_task_spec_ok(t + 1, tn - 2))
            return false;
        job->array_tasks = xstrndup(t + 1, tn - 2);
        return true;
    }
    uint64_t task;
    if (!slurm_number(t, tn, SLURM_MAX_JOB_ID, &task))
        return false;
    job->array_task_id = (int64_t)task;
    return true;
}

static bool squeue_state_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_'))
            return false;
    return true;
}

/* One line: ID|STATE|REASON[|WAIT_STATUS][|…]. */
static bool squeue_line(const char *line, size_t n, struct slurm_job_info *job)
{
    const char *field[4];
    size_t len[4], nfield = 0;
    const char *p = line, *end = line + n;
    while (nfield < 4) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        field[nfield] = p;
        len[nfield++] = (size_t)((bar ? bar : end) - p);
        if (bar == NULL)
            break;
        p = bar + 1;
    }
    if (nfield < 3 || !slurm_printable(line, n))
        return false;
    *job = (struct slurm_job_info){.array_task_id = SLURM_NO_TASK, .exit_code = -1,
                                   .run_time_s = -1};
    if (!squeue_id(field[0], len[0], job) || !squeue_state_ok(field[1], len[1]))
        goto fail;
    job->state = xstrndup(field[1], len[1]);
    job->reason = slurm_reason(field[2], len[2]);
    uint64_t status;
    /* Another fourth field than the exit status (a format of the caller's own) says nothing
     * about it: the line still counts. */
    if (nfield == 4 && slurm_number(field[3], len[3], UINT32_MAX, &status))
        slurm_wait_status((int64_t)status, &job->exit_code, &job->signal);
    return true;
fail:
    slurm_info_clear(job);
    return false;
}

struct slurm_jobs *slurm_squeue_parse(const char *text)
{
    struct slurm_jobs *jobs = xcalloc(1, sizeof *jobs);
    size_t cap = 0;
    for (const char *p = text ? text : ""; *p;) {
        size_t n = strcspn(p, "\n");
        size_t len = n;
        if (len > 0 && p[len - 1] == '\r')
            len--;
        struct slurm_job_info job;
        if (len > 0) {
            if (squeue_line(p, len, &job))
                slurm_jobs_add(jobs, &cap, &job);
            else
                jobs->skipped++;
        }
        p += n + (p[n] == '\n');
    }
    if (jobs->count > 1)
        qsort(jobs->job, jobs->count, sizeof *jobs->job, slurm_cmp_job);
    return jobs;
}

const struct slurm_job_info *slurm_jobs_find(const struct slurm_jobs *jobs, int64_t job_id,
                                             int64_t task)
{
    if (jobs == NULL || jobs->count == 0)
        return NULL;
    /* The first entry not before (job_id, SLURM_NO_TASK): the array's rest lines come first. */
    size_t lo = 0, hi = jobs->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (jobs->job[mid].job_id < job_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct slurm_job_info *rest = NULL;
    for (size_t i = lo; i < jobs->count && jobs->job[i].job_id == job_id; i++) {
        const struct slurm_job_info *j = &jobs->job[i];
        if (j->array_task_id == task && (task != SLURM_NO_TASK || j->array_tasks == NULL))
            return j;
        if (task != SLURM_NO_TASK && j->array_task_id == SLURM_NO_TASK && j->array_tasks &&
            rest == NULL && slurm_task_spec_has(j->array_tasks, task))
            rest = j;
        if (j->array_task_id != SLURM_NO_TASK) {
            /* past the rest lines: the element is found by bisection */
            struct slurm_job_info key = {.job_id = job_id, .array_task_id = task};
            const struct slurm_job_info *hit = bsearch(&key, j, jobs->count - i, sizeof *j,
                                                       slurm_cmp_job);
            return hit ? hit : rest;
        }
    }
    return rest;
}

/* ---- scontrol show job -o ---------------------------------------------------------------- */

static bool scontrol_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The next blank-separated word of [*p, end) into [*word, *word + *n); false at the end. */
static bool scontrol_word(const char **p, const char *end, const char **word, size_t *n)
{
    const char *s = *p;
    while (s < end && scontrol_blank(*s))
        s++;
    if (s == end)
        return false;
    const char *e = s;
    while (e < end && !scontrol_blank(*e))
        e++;
    *word = s;
    *n = (size_t)(e - s);
    *p = e;
    return true;
}

static bool scontrol_is(const char *word, size_t n, const char *key, const char **value,
                        size_t *vn)
{
    size_t k = strlen(key);
    if (n <= k || memcmp(word, key, k) != 0 || word[k] != '=')
        return false;
    *value = word + k + 1;
    *vn = n - k - 1;
    return true;
}

/* "UserId=root(0)" followed by "GroupId=…": where the fields after JobName begin. A job name
 * may hold blanks and "Key=value" words (Slurm prints it as it is), so the name runs to the
 * first such pair; a name would have to fake this very pair, and a uid, to hide the fields. */
static bool scontrol_name_ends(const char *word, size_t n, const char *rest, const char *end)
{
    const char *v, *next;
    size_t vn, nn;
    if (!scontrol_is(word, n, "UserId", &v, &vn) || vn < 3 || v[vn - 1] != ')')
        return false;
    const char *open = v + vn - 2;
    while (open > v && *open >= '0' && *open <= '9')
        open--;
    if (*open != '(' || open == v + vn - 2)
        return false;
    return scontrol_word(&rest, end, &next, &nn) && scontrol_is(next, nn, "GroupId", &v, &vn);
}

/* "[D-]HH:MM:SS" → seconds, or -1. */
static int64_t scontrol_run_time(const char *s, size_t n)
{
    uint64_t days = 0, h, m, sec;
    const char *dash = memchr(s, '-', n);
    if (dash) {
        if (!slurm_number(s, (size_t)(dash - s), 1000000, &days))
            return -1;
        n -= (size_t)(dash + 1 - s);
        s = dash + 1;
    }
    if (n != 8 || s[2] != ':' || s[5] != ':' || !slurm_number(s, 2, 99, &h) ||
        !slurm_number(s + 3, 2, 59, &m) || !slurm_number(s + 6, 2, 59, &sec))
        return -1;
    return (int64_t)(((days * 24 + h) * 60 + m) * 60 + sec);
}

/* The fields of one record, the first of each winning. skip_name: treat the words after
 * "JobName=" as the name until scontrol_name_ends(); false when that never comes (a Slurm
 * that prints fields in another order), and then only the first word is the name. */
static bool scontrol_fields(const char *p, const char *end, bool skip_name,
                            struct slurm_job_info *job, bool *name_ended)
{
    enum { ID = 1, ARRAY = 2, TASK = 4, STATE = 8, REASON = 16, EXIT = 32, RUN = 64 };
    unsigned seen = 0;
    bool in_name = false, never_started = false;
    int64_t array = 0;
    const char *w, *v;
    size_t n, vn;
    *name_ended = true;
    while (scontrol_word(&p, end, &w, &n)) {
        if (in_name) {
            if (!scontrol_name_ends(w, n, p, end))
                continue;
            in_name = false;
            *name_ended = true;
        }
        uint64_t a, b;
        if (scontrol_is(w, n, "JobName", &v, &vn)) {
            in_name = skip_name;
            *name_ended = !skip_name;
        }
        else if (!(seen & ID) && scontrol_is(w, n, "JobId", &v, &vn)) {
            if (!slurm_job_id(v, vn, &job->job_id))
                return false;
            seen |= ID;
        } else if (!(seen & ARRAY) && scontrol_is(w, n, "ArrayJobId", &v, &vn)) {
            if (!slurm_job_id(v, vn, &array))
                array = 0;
            seen |= ARRAY;
        } else if (!(seen & TASK) && scontrol_is(w, n, "ArrayTaskId", &v, &vn)) {
            if (slurm_number(v, vn, SLURM_MAX_JOB_ID, &a))
                job->array_task_id = (int64_t)a;
            else if (slurm_task_spec_ok(v, vn))
                job->array_tasks = xstrndup(v, vn);
            seen |= TASK;
        } else if (!(seen & STATE) && scontrol_is(w, n, "JobState", &v, &vn)) {
            if (!squeue_state_ok(v, vn))
                return false;
            job->state = xstrndup(v, vn);
            seen |= STATE;
        } else if (!(seen & REASON) && scontrol_is(w, n, "Reason", &v, &vn)) {
            job->reason = slurm_reason(v, vn);
            seen |= REASON;
        } else if (!(seen & EXIT) && scontrol_is(w, n, "ExitCode", &v, &vn)) {
            const char *colon = memchr(v, ':', vn);
            if (colon && slurm_number(v, (size_t)(colon - v), 255, &a) &&
                slurm_number(colon + 1, vn - (size_t)(colon + 1 - v), 127, &b)) {
                job->exit_code = (int)a;
                job->signal = (int)b;
            }
            seen |= EXIT;
        } else if (!(seen & RUN) && scontrol_is(w, n, "RunTime", &v, &vn)) {
            job->run_time_s = scontrol_run_time(v, vn);
            seen |= RUN;
        } else if (scontrol_is(w, n, "StartTime", &v, &vn) && vn == 7 &&
                   memcmp(v, "Unknown", 7) == 0)
            never_started = true; /* 22.05 then prints now − 0 as its RunTime */
    }
    if (never_started)
        job->run_time_s = 0;
    if (array != 0)
        job->job_id = array; /* drover records an element by its array's id */
    return (seen & (ID | STATE)) == (ID | STATE);
}

static void scontrol_record(const char *p, const char *end, struct slurm_jobs *jobs, size_t *cap)
{
    struct slurm_job_info job = {.array_task_id = SLURM_NO_TASK, .exit_code = -1,
                                 .run_time_s = -1};
    bool name_ended, ok = scontrol_fields(p, end, true, &job, &name_ended);
    if (!name_ended) {
        slurm_info_clear(&job);
        job = (struct slurm_job_info){.array_task_id = SLURM_NO_TASK, .exit_code = -1,
                                      .run_time_s = -1};
        ok = scontrol_fields(p, end, false, &job, &name_ended);
    }
    if (ok)
        slurm_jobs_add(jobs, cap, &job);
    else {
        slurm_info_clear(&job);
        jobs->skipped++;
    }
}

struct slurm_jobs *slurm_scontrol_parse(const char *text)
{
    struct slurm_jobs *jobs = xcalloc(1, sizeof *jobs);
    size_t cap = 0;
    const char *record = NULL, *p = text ? text : "";
    /* A record is a line starting "JobId=", and the indented lines after it (scontrol
     * without -o); any other line is skipped and counted. */
    while (*p) {
        size_t n = strcspn(p, "\n");
        bool blank = strspn(p, " \t\r") >= n, indented = p[0] == ' ' || p[0] == '\t';
        if (!blank && !(indented && record)) {
            if (record)
                scontrol_record(record, p, jobs, &cap);
            record = NULL;
            if (strncmp(p, "JobId=", 6) == 0)
                record = p;
            else
                jobs->skipped++;
        }
        p += n + (p[n] == '\n');
    }
    if (record)
        scontrol_record(record, p, jobs, &cap);
    if (jobs->count > 1)
        qsort(jobs->job, jobs->count, sizeof *jobs->job, slurm_cmp_job);
    return jobs;
}

/* ---- what a state means ------------------------------------------------------------------ */

/* Slurm's job states (squeue(1), "JOB STATE CODES") and drover's reading of each. why: the
 * reason drover shows; NULL = "slurm: REASON" (or "slurm: STATE" without a reason). */
static const struct {
    const char *state;
    enum slurm_outcome outcome;
    const char *why;
} slurm_states[] = {
    {"PENDING", SLURM_OUTCOME_QUEUED, NULL},
    /* Slurm runs the same job id again itself: submitting another would run it twice. */
    {"REQUEUED", SLURM_OUTCOME_QUEUED, NULL},
    {"REQUEUE_HOLD", SLURM_OUTCOME_QUEUED, NULL},
    {"REQUEUE_FED", SLURM_OUTCOME_QUEUED, NULL},
    {"RESV_DEL_HOLD", SLURM_OUTCOME_QUEUED, NULL},
    {"SPECIAL_EXIT", SLURM_OUTCOME_QUEUED, NULL},
    {"RUNNING", SLURM_OUTCOME_RUNNING, "running on Slurm"},
    {"COMPLETING", SLURM_OUTCOME_RUNNING, "running on Slurm (completing)"},
    {"CONFIGURING", SLURM_OUTCOME_RUNNING, "running on Slurm (configuring its nodes)"},
    {"SUSPENDED", SLURM_OUTCOME_RUNNING, "suspended by Slurm"},
    {"STOPPED", SLURM_OUTCOME_RUNNING, "stopped by Slurm"},
    {"SIGNALING", SLURM_OUTCOME_RUNNING, "running on Slurm (being signalled)"},
    {"STAGE_OUT", SLURM_OUTCOME_RUNNING, "running on Slurm (staging out)"},
    {"RESIZING", SLURM_OUTCOME_RUNNING, "running on Slurm (resizing)"},
    {"COMPLETED", SLURM_OUTCOME_SUCCEEDED, "exit code 0"},
    {"FAILED", SLURM_OUTCOME_FAILED, NULL}, /* the exit code or signal */
    {"OUT_OF_MEMORY", SLURM_OUTCOME_FAILED, "out of memory (Slurm)"},
    {"TIMEOUT", SLURM_OUTCOME_TIMED_OUT, "time limit reached (Slurm)"},
    {"DEADLINE", SLURM_OUTCOME_TIMED_OUT, "deadline reached (Slurm)"},
    {"CANCELLED", SLURM_OUTCOME_CANCELLED, NULL},
    {"NODE_FAIL", SLURM_OUTCOME_REQUEUE, "node failure (Slurm): submitted again"},
    {"PREEMPTED", SLURM_OUTCOME_REQUEUE, "preempted (Slurm): submitted again"},
    {"BOOT_FAIL", SLURM_OUTCOME_REQUEUE, "node boot failure (Slurm): submitted again"},
};

static char *slurm_failed_why(const char *reason, int exit_code, int signal)
{
    if (signal > 0) {
        const char *abbrev = sigabbrev_np(signal);
        return xasprintf("killed by signal %d (SIG%s)", signal, abbrev ? abbrev : "?");
    }
    if (exit_code > 0)
        return xasprintf("exit code %d", exit_code);
    return xasprintf("failed (Slurm: %s)", reason ? reason : "no reason given");
}

enum slurm_outcome slurm_outcome_of(const char *state, const char *reason, int exit_code,
                                    int signal, char **why)
{
    if (reason && (reason[0] == '\0' || strcmp(reason, "None") == 0))
        reason = NULL;
    for (size_t i = 0; state && i < sizeof slurm_states / sizeof *slurm_states; i++) {
        if (strcmp(state, slurm_states[i].state) != 0)
            continue;
        enum slurm_outcome outcome = slurm_states[i].outcome;
        if (slurm_states[i].why)
            *why = xstrdup(slurm_states[i].why);
        else if (outcome == SLURM_OUTCOME_FAILED)
            *why = slurm_failed_why(reason, exit_code, signal);
        else if (outcome == SLURM_OUTCOME_CANCELLED)
            *why = reason ? xasprintf("cancelled in Slurm (%s)", reason)
                          : xstrdup("cancelled in Slurm");
        else
            *why = xasprintf("slurm: %s", reason ? reason : state);
        return outcome;
    }
    *why = xasprintf("slurm: unknown state '%s'", state ? state : "");
    return SLURM_OUTCOME_POLL;
}

const char *slurm_outcome_name(enum slurm_outcome outcome)
{
    static const char *const name[] = {
        [SLURM_OUTCOME_POLL] = "poll",           [SLURM_OUTCOME_QUEUED] = "queued",
        [SLURM_OUTCOME_RUNNING] = "running",     [SLURM_OUTCOME_SUCCEEDED] = "succeeded",
        [SLURM_OUTCOME_FAILED] = "failed",       [SLURM_OUTCOME_TIMED_OUT] = "timed_out",
        [SLURM_OUTCOME_CANCELLED] = "cancelled", [SLURM_OUTCOME_REQUEUE] = "requeue",
    };
    if ((unsigned)outcome >= sizeof name / sizeof *name)
        fatalx("slurm_outcome_name: no outcome %d", (int)outcome);
    return name[outcome];
}
