/* The task state machine: names, and the one table of allowed transitions.
 *
 * Written as a state x state table (after s6-supervise) rather than as scattered ifs, so that
 * the whole machine can be read in one place and tested transition by transition. */
#include "core/state.h"

#include <string.h>

static const char *const state_names[TASK_NSTATES] = {
    [TASK_HELD] = "held",
    [TASK_PENDING] = "pending",
    [TASK_QUEUED] = "queued",
    [TASK_RUNNING] = "running",
    [TASK_RETRYING] = "retrying",
    [TASK_SUCCEEDED] = "succeeded",
    [TASK_FAILED] = "failed",
    [TASK_TIMED_OUT] = "timed_out",
    [TASK_CANCELLED] = "cancelled",
    [TASK_UPSTREAM_FAILED] = "upstream_failed",
};

#define S(state) (1u << (state))
#define CANCEL S(TASK_CANCELLED)

/* state_next[from] is the set of states a task in `from` may move to; terminal states have none.
 *   held     -> pending/queued (release), upstream_failed (a success-dependency failed)
 *   pending  -> queued (deps done), held, upstream_failed, running (a Slurm task handed to
 *               Slurm behind its Slurm dependencies: core/backend.c)
 *   queued   -> running (placed), held. Never upstream_failed: queued means every dep resolved.
 *   running  -> succeeded, failed, timed_out, retrying (failed, retries left),
 *               queued (the driver never started it: NOT_STARTED; its GPU failed; it ran out
 *               of GPU memory and is claimed larger), pending (a Slurm task handed over
 *               early that never reached Slurm), upstream_failed (a dependency of a Slurm task
 *               handed over early failed)
 *   retrying -> queued (backoff over), held
 * and every non-terminal state -> cancelled. */
static const unsigned state_next[TASK_NSTATES] = {
    [TASK_HELD] = S(TASK_PENDING) | S(TASK_QUEUED) | S(TASK_UPSTREAM_FAILED) | CANCEL,
    [TASK_PENDING] = S(TASK_QUEUED) | S(TASK_HELD) | S(TASK_UPSTREAM_FAILED) | S(TASK_RUNNING) |
                     CANCEL,
    [TASK_QUEUED] = S(TASK_RUNNING) | S(TASK_HELD) | CANCEL,
    [TASK_RUNNING] = S(TASK_SUCCEEDED) | S(TASK_FAILED) | S(TASK_TIMED_OUT) | S(TASK_RETRYING) |
                     S(TASK_QUEUED) | S(TASK_PENDING) | S(TASK_UPSTREAM_FAILED) | CANCEL,
    [TASK_RETRYING] = S(TASK_QUEUED) | S(TASK_HELD) | CANCEL,
};

/* A submit enters here: held (--hold), pending (waiting on deps), queued, or upstream_failed
 * (a success-dependency had already failed). */
static const unsigned state_entries =
    S(TASK_HELD) | S(TASK_PENDING) | S(TASK_QUEUED) | S(TASK_UPSTREAM_FAILED);

static bool state_valid(int state)
{
    return state >= 0 && state < TASK_NSTATES;
}

const char *task_state_name(enum task_state state)
{
    return state_valid((int)state) ? state_names[state] : "unknown";
}

int task_state_parse(const char *s)
{
    if (s == NULL)
        return -1;
    for (int i = 0; i < TASK_NSTATES; i++)
        if (strcmp(s, state_names[i]) == 0)
            return i;
    return -1;
}

bool task_state_terminal(enum task_state state)
{
    switch (state) {
    case TASK_SUCCEEDED:
    case TASK_FAILED:
    case TASK_TIMED_OUT:
    case TASK_CANCELLED:
    case TASK_UPSTREAM_FAILED:
        return true;
    default:
        return false;
    }
}

bool core_state_allowed(enum task_state from, enum task_state to)
{
    if (!state_valid((int)from) || !state_valid((int)to))
        return false;
    return (state_next[from] & S(to)) != 0;
}

bool core_state_entry(enum task_state state)
{
    return state_valid((int)state) && (state_entries & S(state)) != 0;
}
