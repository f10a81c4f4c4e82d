/* core/: policy las (discretized 2D least-attained-service with preemption) — queue assignment
 * from attained service, the order (queue, then priority, then FIFO), preemption as a decision
 * (CORE_ACT_PREEMPT, then CORE_OUTCOME_PREEMPTED: queued again, no retry used, service kept),
 * the choice of victims (never a non-preemptible task, only what frees a fitting placement, the
 * fewest, then the most-served), the minimum run, the hysteresis between queues, the starvation
 * guards (K x the last run, the total wait, the protected attempts and how long they last), the
 * history's residual service (las_mrl_factor) and core_next_wakeup. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core_fixture.h"

#define S 1000LL
#define H (3600 * S)

/* las's defaults: 1 and 10 GPU-hour thresholds, a 10-minute minimum run, no K guard, 100 h of
 * waiting in all promotes, 12 h protects for as long again, the history's residual service. */
static struct core_policy las_policy(void)
{
    struct core_policy policy = core_policy_default();
    policy.backfill = false;
    policy.fair_share = false;
    policy.best_fit = false;
    core_policy_las(&policy);
    return policy;
}

/* The first slice's guard alone: K = 8 x the last run, the promoted attempt never preempted. */
static struct core_policy las_k8_policy(void)
{
    struct core_policy policy = las_policy();
    policy.las_starve_k = 8;
    policy.las_starve_total_ms = 0;
    policy.las_protect_wait_ms = 0;
    policy.las_protect_ratio = 0;
    policy.las_mrl_factor = 0;
    return policy;
}

static void setup(struct fixture *f, int ngpus)
{
    struct core_policy policy = las_policy();
    fixture_setup(f, ngpus, 0, &policy);
}

/* nnodes nodes of ngpus GPUs each. */
static void setup_nodes(struct fixture *f, int nnodes, int ngpus)
{
    struct core_node nodes[8];
    memset(nodes, 0, sizeof nodes);
    for (int i = 0; i < nnodes; i++) {
        nodes[i].ngpus = ngpus;
        for (int g = 0; g < ngpus; g++)
            nodes[i].gpu_mem[g] = 40 * GB;
    }
    struct core_policy policy = las_policy();
    f->core = core_new(&policy);
    core_set_nodes(f->core, nodes, nnodes);
    memset(&f->out, 0, sizeof f->out);
}

static void submit(struct fixture *f, int64_t id, int gpus, bool preemptible, int priority,
                   core_time now)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = gpus;
    spec.preemptible = preemptible;
    spec.priority = priority;
    spec.submit_time = now;
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
}

/* The tasks a pass asked to preempt, in order, 0-terminated (after pass()). */
static const int64_t *preempted(const struct fixture *f)
{
    static int64_t v[64];
    size_t n = 0;
    for (size_t i = 0; i < f->out.n && n < 63; i++)
        if (f->out.v[i].type == CORE_ACT_PREEMPT)
            v[n++] = f->out.v[i].task;
    v[n] = 0;
    return v;
}

static void exit_preempted(struct fixture *f, int64_t id, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_attempt_exited(f->core, id, CORE_OUTCOME_PREEMPTED, now, &f->out), 0);
    assert_int_equal(f->out.n, 1);
    assert_int_equal(f->out.v[0].type, CORE_ACT_STATE);
    assert_int_equal(f->out.v[0].state, TASK_QUEUED);
    assert_int_equal(f->out.v[0].reason, CORE_REASON_PREEMPTED);
}

/* The queue follows attained service (GPUs x time) across the thresholds; a running attempt's
 * time counts as it goes. */
static void test_queue_assignment(void **state)
{
    struct fixture f;
    setup(&f, 4);
    submit(&f, 1, 2, true, 0, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    assert_int_equal(core_task_las_queue(f.core, 1, 0), 0);
    /* 2 GPUs: 1 GPU-hour after 30 minutes, 10 after 5 hours. */
    assert_int_equal(core_task_las_queue(f.core, 1, H / 2 - 1), 0);
    assert_int_equal(core_task_las_queue(f.core, 1, H / 2), 1);
    assert_int_equal(core_task_las_queue(f.core, 1, 5 * H - 1), 1);
    assert_int_equal(core_task_las_queue(f.core, 1, 5 * H), 2);
    assert_true(core_task_service(f.core, 1, H) > 7199.9 &&
                core_task_service(f.core, 1, H) < 7200.1);
    teardown(&f);
}

/* Lower queue first, then priority, then FIFO: a served task queued again goes behind a fresh
 * one of lower priority. */
static void test_order(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 1, 1, false, 5, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    /* 1 runs 2 hours (queue 1), then fails and retries: back of a queue behind 2 and 3. */
    submit(&f, 2, 1, false, 0, S);
    submit(&f, 3, 1, false, 1, 2 * S);
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_NOT_STARTED, 2 * H, &f.out), 0);
    /* NOT_STARTED hands the attempt back, but the time it ran still counts as service. */
    assert_int_equal(core_task_las_queue(f.core, 1, 2 * H), 1);
    /* Queue 0 first: 3 (priority 1) before 2 (priority 0); then 1. */
    assert_started(pass(&f, 2 * H), (int64_t[]){3, 0});
    teardown(&f);
}

/* A short task preempts a long preemptible one of a higher queue; the victim goes back to
 * queued without using a retry, keeps its service, and the short one starts in its place. */
static void test_preempt_basic(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 1, 1, true, 0, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    submit(&f, 2, 1, true, 0, 2 * H);
    assert_started(pass(&f, 2 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){1, 0});
    assert_int_equal(f.out.v[0].attempt, 1);
    /* Until the victim exits it holds its GPU: nothing starts, nothing more is preempted. */
    assert_started(pass(&f, 2 * H + S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    exit_preempted(&f, 1, 2 * H + S);
    assert_started(pass(&f, 2 * H + S), (int64_t[]){2, 0});
    assert_int_equal(core_task_state(f.core, 1), TASK_QUEUED);
    assert_int_equal(core_task_las_queue(f.core, 1, 3 * H), 1);
    /* 2 ends: 1 resumes as attempt 2; with max_retries 0 a failure of it still fails it
     * (the preempted attempt used no retry, and there were none to use). */
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 2, CORE_OUTCOME_SUCCESS, 3 * H, &f.out), 0);
    assert_started(pass(&f, 3 * H), (int64_t[]){1, 0});
    assert_int_equal(core_task_attempts(f.core, 1), 2);
    struct core_stats st;
    core_stats(f.core, &st);
    assert_int_equal(st.preemptions, 1);
    teardown(&f);
}

/* A retry budget is untouched by preemptions. */
static void test_preempt_no_retry_used(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 1;
    spec.req.gpus = 1;
    spec.preemptible = true;
    spec.max_retries = 1;
    spec.nbackoff = 1;
    spec.backoff[0] = 0;
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    pass(&f, 0);
    for (int k = 0; k < 3; k++) {
        core_time t = (core_time)(k + 1) * 2 * H;
        core_actions_clear(&f.out);
        assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_PREEMPTED, t, &f.out), 0);
        assert_started(pass(&f, t), (int64_t[]){1, 0});
    }
    /* 4 attempts, 3 preempted: the one retry is still there. */
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_EXIT_CODE, 8 * H, &f.out), 0);
    assert_int_equal(core_task_state(f.core, 1), TASK_RETRYING);
    teardown(&f);
}

/* Never a non-preemptible task, whatever its service. */
static void test_never_non_preemptible(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 1, 1, false, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 20 * H);
    assert_started(pass(&f, 20 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    teardown(&f);
}

/* Two tasks of one queue never preempt each other (hysteresis), and a task preempts only what
 * sits in a strictly higher queue. */
static void test_same_queue(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    /* 2 ran 1.5 hours before (a restored task's service): queue 1, like 1 at 2 hours. */
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 2;
    spec.req.gpus = 1;
    spec.preemptible = true;
    spec.service = 1.5 * H;
    core_actions_clear(&f.out);
    assert_int_equal(core_submit(f.core, &spec, H, &f.out), 0);
    assert_int_equal(core_task_las_queue(f.core, 2, H), 1);
    assert_started(pass(&f, 2 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    /* At 10 GPU-hours 1 reaches queue 2: now 2 (queue 1) preempts it. */
    assert_started(pass(&f, 10 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){1, 0});
    teardown(&f);
}

/* The minimum run: an attempt younger than las_min_run_ms is not preempted, and the wakeup
 * names the time it becomes preemptible. */
static void test_min_run(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 2 * H);
    pass(&f, 2 * H);
    exit_preempted(&f, 1, 2 * H);
    assert_started(pass(&f, 2 * H), (int64_t[]){2, 0});
    core_actions_clear(&f.out);
    core_attempt_exited(f.core, 2, CORE_OUTCOME_SUCCESS, 2 * H + 60 * S, &f.out);
    assert_started(pass(&f, 2 * H + 60 * S), (int64_t[]){1, 0});
    /* 1 (queue 1) restarted at 2h+60s; 3 arrives 1 minute later: 1 is protected until
     * 2h+60s+10m. */
    submit(&f, 3, 1, true, 0, 2 * H + 120 * S);
    assert_started(pass(&f, 2 * H + 120 * S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    assert_int_equal(core_next_wakeup(f.core), 2 * H + 60 * S + 600 * S);
    assert_started(pass(&f, 2 * H + 660 * S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){1, 0});
    teardown(&f);
}

/* Placement-aware and fewest: a 2-GPU task, two nodes of 2 GPUs; node 0 holds two 1-GPU tasks
 * (the most-served of all among them), node 1 one 2-GPU task: one preemption on node 1 makes
 * room, two would be needed on node 0. */
static void test_fewest(void **state)
{
    struct fixture f;
    setup_nodes(&f, 2, 2);
    submit(&f, 1, 1, true, 0, 0);
    submit(&f, 2, 1, true, 0, 0);
    submit(&f, 3, 2, true, 0, S);
    assert_started(pass(&f, S), (int64_t[]){1, 2, 3, 0});
    submit(&f, 4, 2, true, 0, 20 * H);
    /* services at 20h: 1 and 2 about 20 GPU-hours each, 3 about 40: all in queue 2. */
    assert_started(pass(&f, 20 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){3, 0});
    teardown(&f);
}

/* The most-served first when one release is enough either way; and a release that cannot make
 * room (a 1-GPU victim for a 2-GPU task on 2-GPU nodes where the other GPU is held by a
 * non-preemptible task) is not made. */
static void test_most_served_and_useless(void **state)
{
    struct fixture f;
    setup_nodes(&f, 2, 2);
    submit(&f, 1, 1, true, 0, 0);      /* node 0 */
    submit(&f, 2, 1, false, 0, 0);     /* node 0 */
    submit(&f, 3, 1, true, 0, H);      /* node 1 */
    submit(&f, 4, 1, true, 0, H);      /* node 1 */
    pass(&f, 0);
    pass(&f, H);
    submit(&f, 5, 1, true, 0, 20 * H);
    assert_started(pass(&f, 20 * H), (int64_t[]){0});
    /* 1 has 20 GPU-hours, 3 and 4 19: 1 goes. */
    assert_started(preempted(&f), (int64_t[]){1, 0});
    exit_preempted(&f, 1, 20 * H);
    assert_started(pass(&f, 20 * H), (int64_t[]){5, 0});
    /* A 2-GPU task: node 0 has the non-preemptible 2, so only node 1 (3 and 4) will do. */
    submit(&f, 6, 2, true, 0, 21 * H);
    assert_started(pass(&f, 21 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){3, 4, 0});
    teardown(&f);
}

/* A task spanning nodes needs them whole: every preemptible attempt on them goes, and when a
 * non-preemptible one holds a GPU of a node the task would need, nothing is preempted. */
static void test_span(void **state)
{
    struct fixture f;
    setup_nodes(&f, 2, 2);
    submit(&f, 1, 1, true, 0, 0);
    submit(&f, 2, 1, true, 0, 0);
    submit(&f, 3, 2, true, 0, 0);
    pass(&f, 0);
    submit(&f, 4, 4, true, 0, 20 * H);
    assert_started(pass(&f, 20 * H), (int64_t[]){0});
    /* Most-served first: 3 (40 GPU-hours), then 1 and 2. */
    assert_started(preempted(&f), (int64_t[]){3, 1, 2, 0});
    teardown(&f);

    setup_nodes(&f, 2, 2);
    submit(&f, 1, 1, true, 0, 0);
    submit(&f, 2, 1, false, 0, 0);
    submit(&f, 3, 2, true, 0, 0);
    pass(&f, 0);
    submit(&f, 4, 4, true, 0, 20 * H);
    assert_started(pass(&f, 20 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    teardown(&f);
}

/* Starvation: a preempted task that waited K x its last run is promoted to queue 0; the wakeup
 * names the promotion, and once promoted it preempts a task of a higher queue. */
static void test_starvation(void **state)
{
    struct fixture f;
    struct core_policy policy = las_k8_policy();
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 2 * H);
    pass(&f, 2 * H);
    exit_preempted(&f, 1, 2 * H); /* its last run: 2 hours */
    assert_started(pass(&f, 2 * H), (int64_t[]){2, 0});
    assert_int_equal(core_task_las_queue(f.core, 1, 2 * H), 1);
    /* Promotion due at 2h + 8 x 2h = 18h; 2 reaches queue 1 at 3h (which changes nothing for
     * 1, in queue 1 too), queue 2 at 12h. */
    assert_int_equal(core_next_wakeup(f.core), 12 * H);
    assert_started(pass(&f, 3 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    /* At 12h 2 is in queue 2: 1 (queue 1) preempts it. */
    assert_started(pass(&f, 12 * H - 1), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    assert_started(pass(&f, 12 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){2, 0});
    teardown(&f);

    /* The guard alone: 2 is not preemptible, so 1 waits, and is promoted at 18h. */
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, false, 0, 2 * H);
    pass(&f, 2 * H);
    core_actions_clear(&f.out);
    core_attempt_exited(f.core, 1, CORE_OUTCOME_PREEMPTED, 2 * H, &f.out);
    assert_started(pass(&f, 2 * H), (int64_t[]){2, 0});
    pass(&f, 3 * H);
    assert_int_equal(core_next_wakeup(f.core), 18 * H);
    pass(&f, 18 * H);
    assert_int_equal(core_task_las_queue(f.core, 1, 18 * H), 0);
    struct core_stats st;
    core_stats(f.core, &st);
    assert_int_equal(st.promotions, 1);
    teardown(&f);
}

/* A promoted task's attempt is never preempted: otherwise a long task would run its minimum, be
 * preempted by the next short one, wait, be promoted, and so on. */
static void test_promoted_protected(void **state)
{
    struct fixture f;
    struct core_policy policy = las_k8_policy();
    policy.las_nthresholds = 1; /* two queues: split at 1 GPU-hour */
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 2 * H);
    pass(&f, 2 * H);
    exit_preempted(&f, 1, 2 * H);
    assert_started(pass(&f, 2 * H), (int64_t[]){2, 0});
    /* 2 reaches queue 1 at 3h, as 1 is: no preemption; 1 is promoted at 18h and preempts 2. */
    assert_int_equal(core_next_wakeup(f.core), 18 * H);
    assert_started(pass(&f, 18 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){2, 0});
    exit_preempted(&f, 2, 18 * H);
    assert_started(pass(&f, 18 * H), (int64_t[]){1, 0});
    /* 3 (queue 0) arrives an hour later: 1 (queue 1, an hour into its attempt) stays. */
    submit(&f, 3, 1, true, 0, 19 * H);
    assert_started(pass(&f, 19 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    teardown(&f);
}

/* las_max_preempt: a task preempted that many times runs its later attempts to their end. */
static void test_max_preempt(void **state)
{
    struct fixture f;
    struct core_policy policy = las_policy();
    policy.las_max_preempt = 1;
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 2 * H);
    pass(&f, 2 * H);
    assert_started(preempted(&f), (int64_t[]){1, 0});
    exit_preempted(&f, 1, 2 * H);
    assert_started(pass(&f, 2 * H), (int64_t[]){2, 0});
    core_actions_clear(&f.out);
    core_attempt_exited(f.core, 2, CORE_OUTCOME_SUCCESS, 2 * H + 60 * S, &f.out);
    assert_started(pass(&f, 2 * H + 60 * S), (int64_t[]){1, 0});
    /* 1 (queue 1) was preempted once: 3 (queue 0) waits for it. */
    submit(&f, 3, 1, true, 0, 4 * H);
    assert_started(pass(&f, 4 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    teardown(&f);
}

/* las_starve_total_ms: the time not running since submission counts, across attempts. */
static void test_starve_total(void **state)
{
    struct fixture f;
    struct core_policy policy = las_policy();
    policy.las_starve_k = 0;
    policy.las_starve_total_ms = 10 * H;
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, 1, 1, false, 0, 0);
    pass(&f, 0);
    /* 2 waits from 1h: due at 11h. The wakeup may come earlier (core keeps the earliest due
     * time it saw, here 1's at 10h from when 1 was queued), never later. */
    submit(&f, 2, 1, true, 0, H);
    pass(&f, H);
    assert_int_equal(core_next_wakeup(f.core), 10 * H);
    struct core_stats st;
    pass(&f, 10 * H);
    core_stats(f.core, &st);
    assert_int_equal(st.promotions, 0);
    assert_int_equal(core_next_wakeup(f.core), 11 * H);
    pass(&f, 11 * H);
    core_stats(f.core, &st);
    assert_int_equal(st.promotions, 1);
    teardown(&f);
}

/* las_protect_wait_ms and las_protect_ratio: an attempt that starts after its task waited 12 h
 * in all keeps its GPUs for as long as that wait (the wakeup names the end), then is
 * preemptible again; with the ratio 0, for its whole run. */
static void test_protect_wait(void **state)
{
    for (int whole = 0; whole <= 1; whole++) {
        struct fixture f;
        struct core_policy policy = las_policy();
        if (whole)
            policy.las_protect_ratio = 0;
        fixture_setup(&f, 1, 0, &policy);
        submit(&f, 1, 1, true, 0, 0);
        pass(&f, 0);
        /* 2 (not preemptible) takes the GPU at 2h and runs to 20h: 1 waits 18 h. */
        submit(&f, 2, 1, false, 0, 2 * H);
        pass(&f, 2 * H);
        assert_started(preempted(&f), (int64_t[]){1, 0});
        exit_preempted(&f, 1, 2 * H);
        assert_started(pass(&f, 2 * H), (int64_t[]){2, 0});
        core_actions_clear(&f.out);
        core_attempt_exited(f.core, 2, CORE_OUTCOME_SUCCESS, 20 * H, &f.out);
        assert_started(pass(&f, 20 * H), (int64_t[]){1, 0});
        /* 3 (queue 0) finds 1 (queue 2 soon) protected until 20h + 18h. */
        submit(&f, 3, 1, true, 0, 21 * H);
        assert_started(pass(&f, 21 * H), (int64_t[]){0});
        assert_started(preempted(&f), (int64_t[]){0});
        /* Whole: nothing by the clock but the earliest promotion check core noted (1's at
         * 100 h from its submission; it may come early, never late). */
        assert_int_equal(core_next_wakeup(f.core), whole ? 100 * H : 38 * H);
        assert_started(pass(&f, 38 * H - 1), (int64_t[]){0});
        assert_started(preempted(&f), (int64_t[]){0});
        pass(&f, 38 * H);
        if (whole)
            assert_started(preempted(&f), (int64_t[]){0});
        else
            assert_started(preempted(&f), (int64_t[]){1, 0});
        teardown(&f);
    }
}

/* las_protect_run_ms: a promoted attempt is protected only that long. */
static void test_protect_run(void **state)
{
    struct fixture f;
    struct core_policy policy = las_k8_policy();
    policy.las_nthresholds = 1;
    policy.las_protect_run_ms = 3 * H;
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 2 * H);
    pass(&f, 2 * H);
    exit_preempted(&f, 1, 2 * H);
    pass(&f, 2 * H);
    /* 1 is promoted at 18h (8 x its 2-hour run) and preempts 2; its attempt starts then. */
    pass(&f, 18 * H);
    assert_started(preempted(&f), (int64_t[]){2, 0});
    exit_preempted(&f, 2, 18 * H);
    assert_started(pass(&f, 18 * H), (int64_t[]){1, 0});
    submit(&f, 3, 1, true, 0, 19 * H);
    assert_started(pass(&f, 19 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    assert_int_equal(core_next_wakeup(f.core), 21 * H);
    pass(&f, 21 * H);
    assert_started(preempted(&f), (int64_t[]){1, 0});
    teardown(&f);
}

/* Runs n tasks one after another on the (single, free) GPU from *now, task i for ms[i % nms];
 * each succeeds, so its service joins las's history. */
static void run_history(struct fixture *f, int64_t first_id, int n, const int64_t *ms, int nms,
                        core_time *now)
{
    for (int i = 0; i < n; i++) {
        submit(f, first_id + i, 1, false, 0, *now);
        assert_started(pass(f, *now), (int64_t[]){first_id + i, 0});
        *now += ms[i % nms];
        core_actions_clear(&f->out);
        assert_int_equal(core_attempt_exited(f->core, first_id + i, CORE_OUTCOME_SUCCESS, *now,
                                             &f->out), 0);
    }
}

/* las_mrl_factor: with a history of similar tasks (all 2 GPU-hours), a task served 1.5 GPU-hours
 * is expected to end within half an hour, sooner than a new one: it is not preempted. With a
 * heavy-tailed history (0.1 or 100 GPU-hours), it is expected to run about 98 more: it is. */
static void test_mrl(void **state)
{
    for (int heavy = 0; heavy <= 1; heavy++) {
        struct fixture f;
        struct core_policy policy = las_policy();
        fixture_setup(&f, 1, 0, &policy);
        core_time now = 0;
        run_history(&f, 100, 20, heavy ? (int64_t[]){H / 10, 100 * H} : (int64_t[]){2 * H},
                    heavy ? 2 : 1, &now);
        submit(&f, 1, 1, true, 0, now);
        assert_started(pass(&f, now), (int64_t[]){1, 0});
        submit(&f, 2, 1, true, 0, now + 3 * H / 2);
        assert_started(pass(&f, now + 3 * H / 2), (int64_t[]){0});
        if (heavy)
            assert_started(preempted(&f), (int64_t[]){1, 0});
        else
            assert_started(preempted(&f), (int64_t[]){0});
        teardown(&f);
    }
}

/* las_mrl_factor at the history's edge: a victim served beyond every task that ended may have
 * anything left (it is preempted); a waiter served beyond them preempts nothing, even
 * promoted (it starts as GPUs free up). Below 20 tasks ended, the history says nothing. */
static void test_mrl_edges(void **state)
{
    struct fixture f;
    struct core_policy policy = las_policy();
    fixture_setup(&f, 1, 0, &policy);
    core_time now = 0;
    run_history(&f, 100, 20, (int64_t[]){2 * H}, 1, &now);
    /* 1 runs 3 hours (beyond every 2-hour task): 2 preempts it. */
    submit(&f, 1, 1, true, 0, now);
    pass(&f, now);
    submit(&f, 2, 1, true, 0, now + 3 * H);
    pass(&f, now + 3 * H);
    assert_started(preempted(&f), (int64_t[]){1, 0});
    exit_preempted(&f, 1, now + 3 * H);
    assert_started(pass(&f, now + 3 * H), (int64_t[]){2, 0});
    /* 2 runs on; 1 waits 100 h in all and is promoted, but preempts nothing. */
    now += 3 * H + 101 * H;
    pass(&f, now);
    assert_int_equal(core_task_las_queue(f.core, 1, now), 0);
    assert_started(preempted(&f), (int64_t[]){0});
    teardown(&f);

    /* 19 tasks ended: every preemption allowed, as without the rule. */
    fixture_setup(&f, 1, 0, &policy);
    now = 0;
    run_history(&f, 100, 19, (int64_t[]){2 * H}, 1, &now);
    submit(&f, 1, 1, true, 0, now);
    pass(&f, now);
    submit(&f, 2, 1, true, 0, now + 3 * H / 2);
    pass(&f, now + 3 * H / 2);
    assert_started(preempted(&f), (int64_t[]){1, 0});
    teardown(&f);
}

/* core_las_learn (what the daemon reads from its store after a restart) is a history like the
 * tasks that ended in this core: 20 similar 2-GPU-hour tasks leave a task served 1.5 GPU-hours
 * alone; 19 say nothing; with the rule off, learning is nothing. */
static void test_mrl_learned(void **state)
{
    for (int n = 19; n <= 20; n++) {
        struct fixture f;
        struct core_policy policy = las_policy();
        fixture_setup(&f, 1, 0, &policy);
        for (int i = 0; i < n; i++)
            core_las_learn(f.core, (double)(2 * H));
        submit(&f, 1, 1, true, 0, 0);
        assert_started(pass(&f, 0), (int64_t[]){1, 0});
        submit(&f, 2, 1, true, 0, 3 * H / 2);
        pass(&f, 3 * H / 2);
        if (n == 20)
            assert_started(preempted(&f), (int64_t[]){0});
        else
            assert_started(preempted(&f), (int64_t[]){1, 0});
        teardown(&f);
    }
    struct fixture f;
    struct core_policy policy = las_policy();
    policy.las_mrl_factor = 0;
    fixture_setup(&f, 1, 0, &policy);
    for (int i = 0; i < 50; i++)
        core_las_learn(f.core, (double)(2 * H));
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 0, 3 * H / 2);
    pass(&f, 3 * H / 2);
    assert_started(preempted(&f), (int64_t[]){1, 0});
    teardown(&f);
}

/* Off by default: the daemon's policy never preempts, however served the running task. */
static void test_off_by_default(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    submit(&f, 1, 1, true, 0, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, 100, 20 * H);
    assert_started(pass(&f, 20 * H), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    assert_int_equal(core_task_las_queue(f.core, 1, 20 * H), -1);
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_assignment),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_preempt_basic),
        cmocka_unit_test(test_preempt_no_retry_used),
        cmocka_unit_test(test_never_non_preemptible),
        cmocka_unit_test(test_same_queue),
        cmocka_unit_test(test_min_run),
        cmocka_unit_test(test_fewest),
        cmocka_unit_test(test_most_served_and_useless),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_starvation),
        cmocka_unit_test(test_promoted_protected),
        cmocka_unit_test(test_max_preempt),
        cmocka_unit_test(test_starve_total),
        cmocka_unit_test(test_protect_wait),
        cmocka_unit_test(test_protect_run),
        cmocka_unit_test(test_mrl),
        cmocka_unit_test(test_mrl_edges),
        cmocka_unit_test(test_mrl_learned),
        cmocka_unit_test(test_off_by_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
