/* The experiment lifecycle carried out (exp/lifecycle.c decides): a trial that fails (the
 * circuit breaker: after N consecutive failures the waiting trials are held until `drover exp
 * resume`), every trial ended (done, failed, validated, the next round, the generator), the
 * generator's answer, stop and resume, and settling at start what a crash left running. */
#include "daemon/exp-internal.h"
#include "daemon/ops.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int exp_live_tasks(struct daemon *d, const char *name, int64_t **ids, size_t *n)
{
    size_t all;
    *n = 0;
    if (store_exp_task_ids(d->store, name, false, ids, &all) < 0)
        return -1;
    for (size_t i = 0; i < all; i++) {
        int state = core_task_state(d->core, (*ids)[i]);
        if (state >= 0 && !task_state_terminal((enum task_state)state))
            (*ids)[(*n)++] = (*ids)[i];
    }
    return 0;
}

void exp_describe_failure(int64_t task, json_t *attempt, char *buf, size_t len)
{
    static const char *const outcomes[][2] = {
        {"timed_out", "timed out"}, {"exec_error", "cannot execute"}, {"lost", "lost"},
        {"stalled", "stalled"},     {"oom", "out of GPU memory"}, {"preempted", "preempted"},
    };
    const char *outcome = json_string_value(json_object_get(attempt, "outcome"));
    json_t *code = json_object_get(attempt, "exit_code"), *sig = json_object_get(attempt, "signal");
    for (size_t i = 0; outcome != NULL && i < sizeof outcomes / sizeof outcomes[0]; i++)
        if (strcmp(outcome, outcomes[i][0]) == 0) {
            snprintf(buf, len, "task %lld, %s", (long long)task, outcomes[i][1]);
            return;
        }
    if (json_integer_value(sig) > 0)
        snprintf(buf, len, "task %lld, signal %lld", (long long)task,
                 (long long)json_integer_value(sig));
    else if (json_is_integer(code))
        snprintf(buf, len, "task %lld, exit %lld", (long long)task,
                 (long long)json_integer_value(code));
    else
        snprintf(buf, len, "task %lld, no attempt", (long long)task);
}

/* ---- the actions on the experiment's tasks ------------------------------------------------ */

/* The circuit breaker: its waiting tasks held before any of them can start. */
static int exp_hold(struct daemon *d, const char *name)
{
    int64_t *ids;
    size_t n;
    if (exp_live_tasks(d, name, &ids, &n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int st = core_task_state(d->core, ids[i]);
        if (st == TASK_QUEUED || st == TASK_PENDING || st == TASK_RETRYING)
            core_hold(d->core, ids[i], daemon_now(), &d->acts, NULL);
    }
    free(ids);
    return 0;
}

/* drover exp stop: every live task cancelled, each marked first (for a resume), so that core is
 * changed only once the store has taken every mark. */
static int exp_cancel(struct daemon *d, const char *name)
{
    int64_t *ids;
    size_t n, i;
    if (exp_live_tasks(d, name, &ids, &n) < 0)
        return -1;
    for (i = 0; i < n && store_trial_mark_stop(d->store, ids[i], true) == 0; i++)
        ;
    for (size_t k = 0; i == n && k < n; k++)
        core_cancel(d->core, ids[k], daemon_now(), &d->acts, NULL);
    free(ids);
    return i == n ? 0 : -1;
}

/* drover exp resume of a paused experiment: the held tasks released, the failures forgotten. */
static int exp_release(struct daemon *d, const char *name)
{
    int64_t *ids;
    size_t n;
    if (store_exp_failures(d->store, name, false) < 0 || exp_live_tasks(d, name, &ids, &n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (core_task_state(d->core, ids[i]) == TASK_HELD)
            core_release(d->core, ids[i], daemon_now(), &d->acts, NULL);
    free(ids);
    return 0;
}

/* drover exp resume of a stopped experiment: what the stop cancelled queued again with a fresh
 * retry budget, in id order (a stage after those it needs); a task revived by hand meanwhile is
 * left as it is. ops-exp.c has refused the resume while a cancelled task still runs. */
static int exp_requeue(struct daemon *d, const char *name)
{
    int64_t *ids;
    size_t n;
    int rc = 0;
    if (store_exp_failures(d->store, name, false) < 0 ||
        store_exp_task_ids(d->store, name, true, &ids, &n) < 0)
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = store_trial_mark_stop(d->store, ids[i], false);
        if (rc == 0 && core_task_state(d->core, ids[i]) < 0)
            rc = ops_retry_task(d, ids[i]);
    }
    free(ids);
    return rc;
}

/* ---- the lifecycle -------------------------------------------------------------------------- */

/* What the generator's end brings (EXP_EV_GENERATED). */
struct exp_proposal {
    int64_t generator;
    json_t *tasks;
};

static int exp_step(struct daemon *d, struct exp_live *e, enum exp_state *state,
                    enum exp_event ev, struct exp_facts *f, const struct exp_proposal *proposal,
                    char **refusal);

/* Stores the decision's state and reason, unless nothing changes (or it is validating, which
 * only lasts until the verdict). */
static int exp_store_state(struct daemon *d, const char *name, enum exp_state *state,
                           const struct exp_decision *dec)
{
    bool same = dec->to == *state && dec->reason[0] == '\0';
    if (dec->to != EXP_VALIDATING && !same) {
        const char *reason = dec->reason[0] ? dec->reason : NULL;
        if (store_exp_set_state(d->store, name, exp_state_name(dec->to), reason) < 0 ||
            (exp_state_final(dec->to) &&
             notify_experiment_ended(d, name, exp_state_name(dec->to), reason,
                                     daemon_now()) < 0))
            return -1;
        /* Published once this transaction commits (daemon/events.c). */
        events_stage_experiment(d, name, exp_state_name(dec->to), reason);
        fprintf(stderr, "drover daemon: experiment %s %s%s%s\n", name, exp_state_name(dec->to),
                dec->reason[0] ? ": " : "", dec->reason);
    }
    *state = dec->to;
    return 0;
}

/* The facts of EXP_EV_ALL_ENDED: the trials by how they ended, and the failure to name — the
 * last trial's of a sweep, the first stage's of a pipeline (its root cause). */
static int exp_tally(struct daemon *d, struct exp_live *e, struct exp_facts *f, char *failure,
                     size_t failure_len, char *stage, size_t stage_len)
{
    struct store_exp_tally t;
    if (store_exp_tally(d->store, e->name, &t) < 0)
        return -1;
    f->trials = t.trials;
    f->succeeded = t.succeeded;
    f->failed = t.failed;
    f->stopped_early = t.stopped_early;
    json_t *ft = t.failed > 0 ? store_exp_failed_trial(d->store, e->name, !e->pipeline) : NULL;
    if (ft != NULL) {
        exp_describe_failure(json_integer_value(json_object_get(ft, "task")), ft, failure,
                             failure_len);
        snprintf(stage, stage_len, "%s", json_string_value(json_object_get(ft, "stage"))
                                             ? json_string_value(json_object_get(ft, "stage"))
                                             : "?");
        f->failure = failure;
        f->stage = stage;
    }
    json_decref(ft);
    return 0;
}

/* EXP_ACT_VALIDATE: the verdict raised as the next event. */
static int exp_validate_step(struct daemon *d, struct exp_live *e, enum exp_state *state,
                             struct exp_facts *f)
{
    char *verdict = NULL;
    int passed = exp_validate(d, e, &verdict);
    struct exp_facts vf = *f;
    vf.detail = verdict;
    vf.passed = passed == 1;
    int rc = exp_step(d, e, state, passed < 0 ? EXP_EV_ACTION_FAILED : EXP_EV_VALIDATED, &vf,
                      NULL, NULL);
    free(verdict);
    return rc;
}

/* Carries out the decision's action: 0 done, 1 it could not be (*why), -1 a store write. */
static int exp_act(struct daemon *d, struct exp_live *e, json_t *row,
                   struct exp_decision *dec, const struct exp_proposal *proposal, char **why)
{
    char verdict[EXP_REASON_MAX];
    switch (dec->action) {
    case EXP_ACT_NONE:
    case EXP_ACT_VALIDATE: /* exp_step raises the verdict */
        return 0;
    case EXP_ACT_HOLD:
        return exp_hold(d, e->name);
    case EXP_ACT_ARCHIVE:
        return exp_archive(d, e, row, dec->reason, sizeof dec->reason, why) < 0 ? 1 : 0;
    case EXP_ACT_NEXT_ROUND:
        return exp_next_round(d, e, row, dec->reason, sizeof dec->reason, why);
    case EXP_ACT_START_GENERATOR:
        snprintf(verdict, sizeof verdict, "%s", dec->reason);
        return exp_start_generator(d, e, row, verdict, dec->reason, sizeof dec->reason, why);
    case EXP_ACT_RUN_PROPOSED:
        if (proposal == NULL)
            fatalx("experiment %s: proposed trials without a proposal", e->name);
        return exp_run_proposed(d, e, row, proposal->generator, proposal->tasks, dec->reason,
                                sizeof dec->reason, why);
    case EXP_ACT_CANCEL:
        return exp_cancel(d, e->name);
    case EXP_ACT_RELEASE:
        return exp_release(d, e->name);
    case EXP_ACT_REQUEUE:
        return exp_requeue(d, e->name);
    }
    return 0;
}

/* Carries out a decision: its action, then its state; an action that could not be carried out
 * raises EXP_EV_ACTION_FAILED instead, and the verdict of EXP_ACT_VALIDATE is raised next. */
static int exp_carry(struct daemon *d, struct exp_live *e, json_t *row, enum exp_state *state,
                     struct exp_decision *dec, struct exp_facts *f,
                     const struct exp_proposal *proposal)
{
    char *why = NULL;
    int rc = exp_act(d, e, row, dec, proposal, &why);
    if (rc > 0) {
        struct exp_facts af = *f;
        af.detail = why ? why : "?";
        rc = exp_step(d, e, state, EXP_EV_ACTION_FAILED, &af, NULL, NULL);
        free(why);
        return rc;
    }
    if (rc < 0)
        return -1;
    if (dec->action == EXP_ACT_VALIDATE) {
        *state = dec->to;
        return exp_validate_step(d, e, state, f);
    }
    if (exp_store_state(d, e->name, state, dec) < 0)
        return -1;
    /* A resume with nothing left to run ends the experiment, rather than leave it running. */
    if (dec->action == EXP_ACT_RELEASE || dec->action == EXP_ACT_REQUEUE) {
        int64_t *ids;
        size_t live;
        if (exp_live_tasks(d, e->name, &ids, &live) < 0)
            return -1;
        free(ids);
        if (live == 0)
            return exp_step(d, e, state, EXP_EV_ALL_ENDED, NULL, NULL, NULL);
    }
    return 0;
}

static int exp_step(struct daemon *d, struct exp_live *e, enum exp_state *state,
                    enum exp_event ev, struct exp_facts *f, const struct exp_proposal *proposal,
                    char **refusal)
{
    struct exp_facts own = {0};
    struct exp_decision dec;
    char failure[96] = "", stage[EXP_MAX_NAME + 1] = "";
    json_t *row = store_exp_get(d->store, e->name);
    int rc = 0;
    if (row == NULL)
        return -1;
    if (f == NULL)
        f = &own;
    f->name = e->name;
    f->pipeline = e->pipeline;
    f->validation = e->settings.validation;
    f->generator = e->settings.generator != NULL;
    f->space_left = json_integer_value(json_object_get(row, "next_trial")) <
                    json_integer_value(json_object_get(row, "space"));
    if (ev == EXP_EV_ALL_ENDED &&
        exp_tally(d, e, f, failure, sizeof failure, stage, sizeof stage) < 0)
        rc = -1;
    else if (exp_lifecycle_decide(*state, ev, f, &dec) == 0)
        rc = exp_carry(d, e, row, state, &dec, f, proposal);
    else if (refusal != NULL)
        *refusal = xstrdup(dec.reason);
    else /* an event the daemon raised where the table does not allow it: said, and ignored */
        fprintf(stderr, "drover daemon: %s\n", dec.reason);
    json_decref(row);
    return rc;
}

int exp_event(struct daemon *d, struct exp_live *e, enum exp_state *state, enum exp_event ev,
              struct exp_facts *facts, char **refusal)
{
    if (refusal != NULL)
        *refusal = NULL;
    return exp_step(d, e, state, ev, facts, NULL, refusal);
}

/* ---- what the daemon raises by itself ------------------------------------------------------ */

/* The generator task ended: its stdout proposes the next trials. */
static int exp_generated(struct daemon *d, struct exp_live *e, enum exp_state *state,
                         int64_t task, enum task_state ended)
{
    if (*state != EXP_RUNNING) /* stopped or paused meanwhile: what it says is not acted on */
        return exp_event(d, e, state, EXP_EV_GENERATED, NULL, NULL);
    json_t *row = store_exp_get(d->store, e->name), *tasks = NULL;
    char *why = NULL;
    struct exp_facts f = {0};
    f.proposed = row ? exp_read_proposals(d, e, row, task, ended, &tasks, &why) : -1;
    f.detail = why;
    struct exp_proposal proposal = {task, tasks};
    int rc = row ? exp_step(d, e, state, EXP_EV_GENERATED, &f, &proposal, NULL) : -1;
    free(why);
    json_decref(tasks);
    json_decref(row);
    return rc;
}

/* A trial ended in state: counted for the circuit breaker, and the experiment settled when it
 * was the last of its tasks. */
static int exp_trial_ended(struct daemon *d, struct exp_live *e, enum exp_state *state,
                           int64_t task, enum task_state ended)
{
    bool failed = ended == TASK_FAILED || ended == TASK_TIMED_OUT;
    if (failed || ended == TASK_SUCCEEDED) {
        int n = store_exp_failures(d->store, e->name, failed);
        if (n < 0)
            return -1;
        if (failed) {
            char last[96];
            json_t *t = store_task_json(d->store, task), *list = json_object_get(t, "attempt_list");
            exp_describe_failure(task, json_array_get(list, json_array_size(list) - 1), last,
                                 sizeof last);
            json_decref(t);
            struct exp_facts f = {.failures = n, .breaker = e->settings.breaker, .last = last};
            if (exp_event(d, e, state, EXP_EV_TRIAL_FAILED, &f, NULL) < 0)
                return -1;
        }
    }
    int64_t *ids;
    size_t live;
    if (exp_live_tasks(d, e->name, &ids, &live) < 0)
        return -1;
    free(ids);
    return live == 0 ? exp_event(d, e, state, EXP_EV_ALL_ENDED, NULL, NULL) : 0;
}

int exp_task_ended(struct daemon *d, int64_t task, enum task_state ended)
{
    int trial;
    char *name = store_trial_of_task(d->store, task, &trial);
    if (name == NULL)
        return 0;
    struct exp_live *e = exp_live_get(d, name);
    json_t *row = store_exp_get(d->store, name);
    int parsed = exp_state_parse(json_string_value(json_object_get(row, "state")));
    enum exp_state state = parsed < 0 ? EXP_CREATED : (enum exp_state)parsed;
    int rc = e == NULL || row == NULL ? -1 : 0;
    json_decref(row);
    if (rc == 0 && parsed < 0)
        fprintf(stderr, "drover daemon: experiment %s is in no state it knows\n", name);
    else if (rc == 0 && trial < 0)
        rc = exp_generated(d, e, &state, task, ended);
    else if (rc == 0)
        rc = exp_trial_ended(d, e, &state, task, ended);
    free(name);
    return rc;
}

bool exp_trial_ending(struct daemon *d)
{
    for (size_t i = 0; i < d->acts.n; i++) {
        const struct core_action *a = &d->acts.v[i];
        int trial;
        if (a->type != CORE_ACT_STATE || !task_state_terminal(a->state))
            continue;
        char *name = store_trial_of_task(d->store, a->task, &trial);
        bool is_trial = name != NULL;
        free(name);
        if (is_trial)
            return true;
    }
    return false;
}

void exp_settle(struct daemon *d)
{
    json_t *list = store_exp_list(d->store), *x;
    size_t i;
    if (d->store_lost || d->acts.n > 0 || d->nends > 0) {
        /* Ends not committed yet (a full disk): they settle their experiments when they are. */
        json_decref(list);
        return;
    }
    json_array_foreach(list, i, x) {
        const char *name = json_string_value(json_object_get(x, "name"));
        int64_t *ids;
        size_t live;
        struct exp_live *e;
        enum exp_state state = EXP_RUNNING;
        if (strcmp(json_string_value(json_object_get(x, "state")), "running") != 0 ||
            exp_live_tasks(d, name, &ids, &live) < 0)
            continue;
        free(ids);
        if (live > 0 || (e = exp_live_get(d, name)) == NULL)
            continue;
        fprintf(stderr, "drover daemon: experiment %s was left running with no task live;"
                        " settling it\n", name);
        store_begin(d->store);
        size_t before = d->acts.n;
        if (exp_event(d, e, &state, EXP_EV_ALL_ENDED, NULL, NULL) < 0) {
            fprintf(stderr, "drover daemon: cannot settle experiment %s: %s\n", name,
                    store_error(d->store));
            store_rollback(d->store);
            if (d->acts.n != before) { /* core holds what the store lost: recover from it */
                d->store_lost = true;
                event_base_loopexit(d->base, NULL);
                break;
            }
        } else if (daemon_apply_txn(d) < 0) {
            event_base_loopexit(d->base, NULL);
            break;
        }
    }
    json_decref(list);
}
