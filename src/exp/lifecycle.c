/* An experiment's lifecycle: the one table of what each event does in each state.
 *
 * Rows are read in order and the first whose states, event and guard match decides, so the rows
 * of one event go from the most particular guard to the most general. An event with no row for
 * the state is refused (EXP_REFUSED rows give it a message users can act on). */
#include "exp/lifecycle.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const state_names[EXP_NSTATES] = {
    [EXP_CREATED] = "created", [EXP_RUNNING] = "running", [EXP_PAUSED] = "paused",
    [EXP_VALIDATING] = "validating", [EXP_PASSED] = "passed", [EXP_FAILED] = "failed",
    [EXP_STOPPED] = "stopped", [EXP_DONE] = "done",
};

static const char *const event_names[EXP_NEVENTS] = {
    [EXP_EV_CREATE] = "create", [EXP_EV_TRIAL_FAILED] = "a trial failing",
    [EXP_EV_ALL_ENDED] = "every trial ending", [EXP_EV_VALIDATED] = "validation",
    [EXP_EV_GENERATED] = "the generator ending", [EXP_EV_ACTION_FAILED] = "a failed action",
    [EXP_EV_STOP] = "stop", [EXP_EV_RESUME] = "resume",
};

/* Which facts a row needs to hold. */
enum guard {
    G_ANY,
    G_BREAKER,      /* failures reached the breaker's limit */
    G_ALL_FAILED,   /* a sweep whose every trial failed */
    G_STAGE_FAILED, /* a pipeline with a failed stage (not one skipped for it) */
    G_VALIDATION,
    G_GENERATOR,
    G_PASSED,
    G_SPACE_LEFT,
    G_GEN_FAILED,   /* the generator failed, or said nothing readable */
    G_PROPOSED,     /* the generator proposed trials */
};

/* How a row words its reason. */
enum wording {
    W_KEEP,       /* the state keeps its reason */
    W_NONE,       /* none */
    W_BREAKER,    /* paused after N consecutive trial failures (the last: …); drover exp resume */
    W_ALL_FAILED, /* all N trials failed; last: … */
    W_STAGE,      /* stage S failed (…) */
    W_ENDED,      /* every trial ended: counts */
    W_DETAIL,     /* facts->detail */
    W_NO_SPACE,   /* facts->detail; no configurations left */
    W_PROPOSED,   /* the generator proposed N trials */
    W_NO_MORE,    /* the generator proposed no more trials */
    W_STOPPED,    /* stopped by user */
    W_RESUMED,    /* resumed by user */
    W_REFUSED,    /* refusals: the row's message */
};

#define S(state) (1u << (state))
#define FINAL (S(EXP_PASSED) | S(EXP_FAILED) | S(EXP_DONE))
#define RUN (S(EXP_RUNNING) | S(EXP_PAUSED)) /* live: its trials run, or wait */
#define SAME EXP_NSTATES /* the row keeps the state it was in */

struct row {
    unsigned from;        /* set of states */
    enum exp_event event;
    enum guard guard;
    enum exp_state to;    /* or SAME */
    enum exp_action action;
    enum wording wording;
    const char *refusal;  /* W_REFUSED: "cannot %s experiment %s: …", with the state's name */
};

#define REFUSE(states, ev, message) {states, ev, G_ANY, SAME, EXP_ACT_NONE, W_REFUSED, message}

static const struct row rows[] = {
    {S(EXP_CREATED), EXP_EV_CREATE, G_ANY, EXP_RUNNING, EXP_ACT_NONE, W_NONE, NULL},

    /* The circuit breaker; a failure anywhere else only counts. */
    {S(EXP_RUNNING), EXP_EV_TRIAL_FAILED, G_BREAKER, EXP_PAUSED, EXP_ACT_HOLD, W_BREAKER, NULL},
    {S(EXP_RUNNING) | S(EXP_PAUSED) | S(EXP_STOPPED) | FINAL, EXP_EV_TRIAL_FAILED, G_ANY, SAME,
     EXP_ACT_NONE, W_KEEP, NULL},

    /* Every trial ended. A paused experiment with nothing live has nothing held to resume
     * either (the breaker tripped on its last trials): it ends as a running one would. A stopped
     * or finished one stays as it is. */
    {RUN, EXP_EV_ALL_ENDED, G_ALL_FAILED, EXP_FAILED, EXP_ACT_NONE, W_ALL_FAILED, NULL},
    {RUN, EXP_EV_ALL_ENDED, G_STAGE_FAILED, EXP_FAILED, EXP_ACT_NONE, W_STAGE, NULL},
    {RUN, EXP_EV_ALL_ENDED, G_VALIDATION, EXP_VALIDATING, EXP_ACT_VALIDATE, W_NONE, NULL},
    {RUN, EXP_EV_ALL_ENDED, G_GENERATOR, EXP_RUNNING, EXP_ACT_START_GENERATOR, W_ENDED, NULL},
    {RUN, EXP_EV_ALL_ENDED, G_ANY, EXP_DONE, EXP_ACT_NONE, W_ENDED, NULL},
    {S(EXP_STOPPED) | FINAL, EXP_EV_ALL_ENDED, G_ANY, SAME, EXP_ACT_NONE, W_KEEP, NULL},

    /* The verdict: archive the winner, or try again (the generator, the next round), or stop. */
    {S(EXP_VALIDATING), EXP_EV_VALIDATED, G_PASSED, EXP_PASSED, EXP_ACT_ARCHIVE, W_DETAIL, NULL},
    {S(EXP_VALIDATING), EXP_EV_VALIDATED, G_GENERATOR, EXP_RUNNING, EXP_ACT_START_GENERATOR,
     W_DETAIL, NULL},
    {S(EXP_VALIDATING), EXP_EV_VALIDATED, G_SPACE_LEFT, EXP_RUNNING, EXP_ACT_NEXT_ROUND, W_DETAIL,
     NULL},
    {S(EXP_VALIDATING), EXP_EV_VALIDATED, G_ANY, EXP_FAILED, EXP_ACT_NONE, W_NO_SPACE, NULL},

    /* The generator's answer. */
    {S(EXP_RUNNING), EXP_EV_GENERATED, G_GEN_FAILED, EXP_FAILED, EXP_ACT_NONE, W_DETAIL, NULL},
    {S(EXP_RUNNING), EXP_EV_GENERATED, G_PROPOSED, EXP_RUNNING, EXP_ACT_RUN_PROPOSED, W_PROPOSED,
     NULL},
    {S(EXP_RUNNING), EXP_EV_GENERATED, G_ANY, EXP_DONE, EXP_ACT_NONE, W_NO_MORE, NULL},
    {S(EXP_PAUSED) | S(EXP_STOPPED) | FINAL, EXP_EV_GENERATED, G_ANY, SAME, EXP_ACT_NONE, W_KEEP,
     NULL},

    {S(EXP_RUNNING) | S(EXP_VALIDATING), EXP_EV_ACTION_FAILED, G_ANY, EXP_FAILED, EXP_ACT_NONE,
     W_DETAIL, NULL},

    /* The user's. */
    {S(EXP_RUNNING) | S(EXP_PAUSED), EXP_EV_STOP, G_ANY, EXP_STOPPED, EXP_ACT_CANCEL, W_STOPPED,
     NULL},
    REFUSE(S(EXP_STOPPED), EXP_EV_STOP, "it is stopped already"),
    REFUSE(FINAL, EXP_EV_STOP, "it has already ended (%s); stopping it would change nothing"),
    {S(EXP_PAUSED), EXP_EV_RESUME, G_ANY, EXP_RUNNING, EXP_ACT_RELEASE, W_RESUMED, NULL},
    {S(EXP_STOPPED), EXP_EV_RESUME, G_ANY, EXP_RUNNING, EXP_ACT_REQUEUE, W_RESUMED, NULL},
    REFUSE(S(EXP_RUNNING), EXP_EV_RESUME, "it is running (only a paused or stopped experiment"
                                          " resumes)"),
    REFUSE(FINAL, EXP_EV_RESUME, "it has already ended (%s); drover exp run starts another"),
};

static bool state_valid(int state)
{
    return state >= 0 && state < EXP_NSTATES;
}

const char *exp_state_name(enum exp_state state)
{
    return state_valid((int)state) ? state_names[state] : "unknown";
}

int exp_state_parse(const char *name)
{
    for (int i = 0; name != NULL && i < EXP_NSTATES; i++)
        if (strcmp(name, state_names[i]) == 0)
            return i;
    return -1;
}

const char *exp_event_name(enum exp_event event)
{
    return (int)event >= 0 && event < EXP_NEVENTS ? event_names[event] : "unknown";
}

bool exp_state_final(enum exp_state state)
{
    return state_valid((int)state) && (FINAL & S(state)) != 0;
}

static bool guard_holds(enum guard guard, const struct exp_facts *f)
{
    switch (guard) {
    case G_ANY:
        return true;
    case G_BREAKER:
        return f->breaker > 0 && f->failures >= f->breaker;
    case G_ALL_FAILED:
        return !f->pipeline && f->trials > 0 && f->failed == f->trials;
    case G_STAGE_FAILED:
        return f->pipeline && f->failed > 0;
    case G_VALIDATION:
        return f->validation;
    case G_GENERATOR:
        return f->generator;
    case G_PASSED:
        return f->passed;
    case G_SPACE_LEFT:
        return f->space_left;
    case G_GEN_FAILED:
        return f->proposed < 0;
    case G_PROPOSED:
        return f->proposed > 0;
    }
    return false;
}

static const char *text(const char *s)
{
    return s != NULL ? s : "?";
}

/* Appends ", N what" to buf when n > 0. */
static void count_part(char *buf, size_t len, int n, const char *what)
{
    size_t used = strlen(buf);
    if (n > 0 && used < len)
        snprintf(buf + used, len - used, ", %d %s", n, what);
}

static void word(const struct row *row, enum exp_state from, const struct exp_facts *f,
                 char *buf, size_t len)
{
    const char *unit = f->pipeline ? "stage" : "trial";
    buf[0] = '\0';
    switch (row->wording) {
    case W_KEEP:
    case W_NONE:
        break;
    case W_BREAKER:
        snprintf(buf, len, "paused after %d consecutive trial failures (the last: %s); drover exp"
                           " resume %s", f->failures, text(f->last), text(f->name));
        break;
    case W_ALL_FAILED:
        snprintf(buf, len, "all %d %s%s failed; last: %s", f->trials, unit,
                 f->trials == 1 ? "" : "s", text(f->failure));
        break;
    case W_STAGE:
        snprintf(buf, len, "stage %s failed (%s)", text(f->stage), text(f->failure));
        if (f->failed > 1)
            snprintf(buf + strlen(buf), len - strlen(buf), "; %d more stage%s failed",
                     f->failed - 1, f->failed == 2 ? "" : "s");
        break;
    case W_ENDED:
        snprintf(buf, len, "every %s ended: %d succeeded", unit, f->succeeded);
        count_part(buf, len, f->failed, "failed");
        count_part(buf, len, f->stopped_early, "stopped early");
        count_part(buf, len, f->trials - f->succeeded - f->failed - f->stopped_early,
                   "cancelled or skipped");
        break;
    case W_DETAIL:
        snprintf(buf, len, "%s", text(f->detail));
        break;
    case W_NO_SPACE:
        snprintf(buf, len, "%s; no configurations left", text(f->detail));
        break;
    case W_PROPOSED:
        snprintf(buf, len, "the generator proposed %d trial%s", f->proposed,
                 f->proposed == 1 ? "" : "s");
        break;
    case W_NO_MORE:
        snprintf(buf, len, "the generator proposed no more trials");
        break;
    case W_STOPPED:
        snprintf(buf, len, "stopped by user");
        break;
    case W_RESUMED:
        snprintf(buf, len, "resumed by user");
        break;
    case W_REFUSED: {
        char why[160];
        snprintf(why, sizeof why, row->refusal, exp_state_name(from));
        snprintf(buf, len, "cannot %s experiment %s: %s", exp_event_name(row->event),
                 text(f->name), why);
        break;
    }
    }
}

int exp_lifecycle_decide(enum exp_state from, enum exp_event ev, const struct exp_facts *f,
                         struct exp_decision *out)
{
    static const struct exp_facts none = {0};
    if (f == NULL)
        f = &none;
    out->to = from;
    out->action = EXP_ACT_NONE;
    out->reason[0] = '\0';
    if (!state_valid((int)from) || (int)ev < 0 || ev >= EXP_NEVENTS) {
        snprintf(out->reason, sizeof out->reason, "experiment %s: unknown state or event",
                 text(f->name));
        return -1;
    }
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *row = &rows[i];
        if (row->event != ev || (row->from & S(from)) == 0 || !guard_holds(row->guard, f))
            continue;
        word(row, from, f, out->reason, sizeof out->reason);
        if (row->wording == W_REFUSED)
            return -1;
        out->to = row->to == SAME ? from : row->to;
        out->action = row->action;
        return 0;
    }
    snprintf(out->reason, sizeof out->reason, "experiment %s: %s cannot happen while it is %s",
             text(f->name), exp_event_name(ev), exp_state_name(from));
    return -1;
}
