/* exp/lifecycle.h — an experiment's lifecycle as a table, pure: given the state it is in, what
 * happened, and the few facts that decide between outcomes, says which state comes next, why (the
 * reason users read), and what the daemon must carry out. No clock, no store, no I/O: the daemon
 * (daemon/exp-end.c, daemon/ops-exp.c) gathers the facts, asks, carries the decision out and
 * stores the new state. An event the table does not allow in a state is refused with a message
 * and changes nothing.
 *
 *   created ──create──► running ──every trial ended──► done | failed | validating
 *   running ──N consecutive trial failures (the circuit breaker)──► paused   (hold the waiting)
 *   paused ──every trial ended (nothing held)──► as running
 *   validating ──validated──► passed (archive) | running (next round, generator) | failed
 *   running ──the generator ended──► running (its trials) | done (none proposed) | failed
 *   running, paused ──stop──► stopped (cancel every live task)
 *   paused ──resume──► running (release the held);  stopped ──resume──► running (re-queue what
 *   the stop cancelled)
 *   running, validating ──an action failed (archive, next round, generator)──► failed
 * passed, failed and done are final: stop and resume are refused there. Events the daemon raises
 * by itself (a trial failed, every trial ended, the generator ended) change nothing in a state
 * they do not apply to (a stopped experiment's tasks ending, a trial `drover retry` revived after
 * the end). `validating` only exists within the transaction that validates: it is never stored.
 */
#ifndef DROVER_EXP_LIFECYCLE_H
#define DROVER_EXP_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

enum exp_state {
    EXP_CREATED,    /* the request is being stored */
    EXP_RUNNING,
    EXP_PAUSED,     /* the circuit breaker: waiting trials held until resumed */
    EXP_VALIDATING, /* every trial ended; the best is being checked (never stored) */
    EXP_PASSED,
    EXP_FAILED,
    EXP_STOPPED,    /* drover exp stop; resumable */
    EXP_DONE,
    EXP_NSTATES
};

enum exp_event {
    EXP_EV_CREATE,        /* the exp_run request is stored */
    EXP_EV_TRIAL_FAILED,  /* a trial failed or timed out: failures, breaker */
    EXP_EV_ALL_ENDED,     /* no task of it is live: the counts, validation, generator */
    EXP_EV_VALIDATED,     /* the best trial was checked: passed, detail, generator, space_left */
    EXP_EV_GENERATED,     /* the generator task ended: proposed, detail */
    EXP_EV_ACTION_FAILED, /* the decision's action could not be carried out: detail says why */
    EXP_EV_STOP,          /* drover exp stop */
    EXP_EV_RESUME,        /* drover exp resume */
    EXP_NEVENTS
};

/* What the daemon carries out before it stores the decision's state. */
enum exp_action {
    EXP_ACT_NONE,
    EXP_ACT_HOLD,            /* hold the experiment's waiting tasks */
    EXP_ACT_VALIDATE,        /* check the best trial, then raise EXP_EV_VALIDATED */
    EXP_ACT_ARCHIVE,         /* copy the best trial's checkpoint and metadata to the archive */
    EXP_ACT_NEXT_ROUND,      /* submit the next configurations of the search space */
    EXP_ACT_START_GENERATOR, /* submit the generator task */
    EXP_ACT_RUN_PROPOSED,    /* submit the trials the generator proposed */
    EXP_ACT_CANCEL,          /* cancel every live task, remembering which (for a resume) */
    EXP_ACT_RELEASE,         /* release the held tasks, reset the failure count */
    EXP_ACT_REQUEUE,         /* queue again what a stop cancelled, reset the failure count */
};

/* What decides between outcomes; each event reads only the fields named beside it. */
struct exp_facts {
    const char *name;      /* the experiment, for messages */
    bool pipeline;         /* stages, not trials */
    /* EXP_EV_TRIAL_FAILED */
    int failures;          /* consecutive failed trials, this one included */
    int breaker;           /* circuit_breaker.failures; 0: never pause */
    const char *last;      /* the trial that failed: "task 12, exit 1" */
    /* EXP_EV_ALL_ENDED: the trials (stages) by how they ended; the generator task not counted */
    int trials, succeeded, failed, stopped_early;
    const char *failure;   /* a failure to name: the last trial's ("task 12, exit 1"), a
                            * pipeline's first failed stage's ("task 4, exit 1") */
    const char *stage;     /* that stage's name (pipelines) */
    bool validation;       /* the spec has a validation block */
    bool generator;        /* ... a generator */
    /* EXP_EV_VALIDATED (and generator above) */
    bool passed;
    bool space_left;       /* configurations of the search space not tried yet */
    /* EXP_EV_GENERATED: trials proposed, or -1 when the generator failed or its output is not
     * a list of trials */
    int proposed;
    const char *detail;    /* VALIDATED: the verdict; GENERATED (-1), ACTION_FAILED: why */
};

#define EXP_REASON_MAX 1024

struct exp_decision {
    enum exp_state to;
    enum exp_action action;
    char reason[EXP_REASON_MAX]; /* "" when the state keeps its reason */
};

/* Decides what event ev does to an experiment in state from. Returns 0 with *out filled (out->to
 * may equal from: nothing changes but the action), or -1 with out->reason saying why the event
 * is refused there (out->to = from, out->action = EXP_ACT_NONE). */
int exp_lifecycle_decide(enum exp_state from, enum exp_event ev, const struct exp_facts *facts,
                         struct exp_decision *out);

/* The stored spelling ("running", "passed", …), and back (-1 for an unknown word). */
const char *exp_state_name(enum exp_state state);
int exp_state_parse(const char *name);
const char *exp_event_name(enum exp_event event);
/* passed, failed, done: nothing changes them. */
bool exp_state_final(enum exp_state state);

#endif
