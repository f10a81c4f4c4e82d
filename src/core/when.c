/* Begin times (--begin) and the off-peak window (--off-peak).
 *
 * A QUEUED task that may not start yet waits out of the ready queue, parked, so that a pass
 * never looks at it (a deep queue of tasks submitted for tonight costs the day's passes
 * nothing): one whose begin time is ahead is on core->later, a heap by that time, as a retrying
 * task is on core->retry; an off-peak one past its begin time is on core->offpeak, a list, and
 * parked there while the window is closed. The pass that sees the window open puts every
 * parked one into the ready queue (ready_time then: aging counts from when it could start);
 * the pass that sees it closed takes the queued ones out again, and asks each running attempt
 * of a preemptible off-peak task to stop — once per attempt (run->preempting, which las sets
 * too). Both happen twice a day, O(off-peak tasks + running attempts) each.
 *
 * A task without begin time or off-peak flag takes none of these paths: every other schedule
 * is what it was. */
#include "core/internal.h"

static void when_ready(struct core *core, struct core_task *t, bool keep_ready)
{
    t->parked = CORE_PARK_NONE;
    if (!keep_ready)
        t->ready_time = core_ready_time(core);
    core_task_rekey(core, t);
    core_queue_insert(core_task_queue(core, t), t);
    core_spill_note(core, t);
}

static void when_offpeak_link(struct core *core, struct core_task *t)
{
    t->oprev = NULL;
    t->onext = core->offpeak;
    if (t->onext != NULL)
        t->onext->oprev = t;
    core->offpeak = t;
    t->on_offpeak = true;
}

static void when_offpeak_unlink(struct core *core, struct core_task *t)
{
    if (t->oprev != NULL)
        t->oprev->onext = t->onext;
    else
        core->offpeak = t->onext;
    if (t->onext != NULL)
        t->onext->oprev = t->oprev;
    t->oprev = t->onext = NULL;
    t->on_offpeak = false;
}

void core_when_enqueue(struct core *core, struct core_task *t, bool keep_ready)
{
    if (t->begin > core->now) {
        t->parked = CORE_PARK_BEGIN;
        t->retry_at = t->begin;
        core_retry_push(&core->later, t);
        return;
    }
    if (t->off_peak) {
        when_offpeak_link(core, t);
        if (!core->off_is_open) {
            t->parked = CORE_PARK_WINDOW;
            return;
        }
    }
    when_ready(core, t, keep_ready);
}

void core_when_unqueue(struct core *core, struct core_task *t)
{
    core_queue_remove(core_task_queue(core, t), t);
    if (t->parked == CORE_PARK_BEGIN)
        core_retry_remove(&core->later, t);
    if (t->on_offpeak)
        when_offpeak_unlink(core, t);
    t->parked = CORE_PARK_NONE;
}

/* The window just opened (open) or closed: the off-peak tasks waiting join the ready queue,
 * or the queued ones leave it. */
static void when_window(struct core *core, bool open)
{
    for (struct core_task *t = core->offpeak; t != NULL; t = t->onext) {
        if (open && t->parked == CORE_PARK_WINDOW) {
            when_ready(core, t, false);
        } else if (!open && t->in_queue) {
            core_queue_remove(core_task_queue(core, t), t);
            t->parked = CORE_PARK_WINDOW;
        }
    }
}

/* The window is closed: each running attempt of a preemptible off-peak task is asked once to
 * stop. A Slurm attempt is Slurm's to run (it is not on core->running). */
static void when_preempt(struct core *core, struct core_actions *out)
{
    for (struct core_run *run = core->running; run != NULL; run = run->next) {
        struct core_task *t = run->task;
        if (!t->off_peak || !t->preemptible || run->preempting || t->state != TASK_RUNNING)
            continue;
        run->preempting = true;
        struct core_action *act = core_emit(out, CORE_ACT_PREEMPT, t->id);
        act->attempt = t->attempts;
        core->stats.preemptions++;
    }
}

void core_when_pass(struct core *core, core_time now, struct core_actions *out)
{
    struct core_task *t;
    while ((t = core_retry_top(&core->later)) != NULL && t->retry_at <= now) {
        core_retry_remove(&core->later, t);
        t->parked = CORE_PARK_NONE;
        core->version++;
        core_when_enqueue(core, t, false);
    }
    bool open = core->off_open <= now && now < core->off_close;
    if (open != core->off_is_open) {
        core->off_is_open = open;
        core->version++;
        when_window(core, open);
        if (!open)
            core->off_sweep = true;
    }
    if (core->off_sweep) {
        core->off_sweep = false;
        if (!open)
            when_preempt(core, out);
    }
}

core_time core_when_next(const struct core *core)
{
    const struct core_task *t = core_retry_top(&core->later);
    core_time next = t != NULL ? t->retry_at : CORE_TIME_NEVER;
    if (core->noffpeak == 0)
        return next;
    /* Open: its close. Closed: its opening, unless the window the driver gave is over (it
     * gives the next one at the boundary; until then there is nothing to wake up for). */
    core_time edge = core->off_is_open           ? core->off_close
                     : core->now < core->off_close ? core->off_open
                                                   : CORE_TIME_NEVER;
    return edge < next ? edge : next;
}

void core_when_track(struct core *core, const struct core_task *t)
{
    if (t->off_peak && t->preemptible && !core->off_is_open)
        core->off_sweep = true;
}

void core_set_off_peak(struct core *core, core_time open_at, core_time close_at)
{
    if (open_at == core->off_open && close_at == core->off_close)
        return;
    core->off_open = open_at;
    core->off_close = close_at;
    core->version++;
}
