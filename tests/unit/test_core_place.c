/* core/: placement — packing shared tasks, exclusive GPUs, CPU and memory accounting, and the
 * request check. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define GB (1024ULL * 1024 * 1024)

/* ---- helpers ------------------------------------------------------------------------------- */

static struct core_node node_of(int ngpus, uint64_t gpu_mem, int cpus, uint64_t mem)
{
    struct core_node node;
    memset(&node, 0, sizeof node);
    node.ngpus = ngpus;
    for (int g = 0; g < ngpus; g++)
        node.gpu_mem[g] = gpu_mem;
    node.cpus = cpus;
    node.mem = mem;
    return node;
}

static struct core *new_core(const struct core_node *nodes, int nnodes, bool best_fit)
{
    struct core_policy policy = core_policy_default();
    policy.best_fit = best_fit;
    struct core *core = core_new(&policy);
    core_set_nodes(core, nodes, nnodes);
    return core;
}

/* Submits a task asking for req and runs a pass; returns whether it started, and where. */
static bool submit_run(struct core *core, int64_t id, struct core_request req,
                       struct core_placement *where)
{
    struct core_actions out = { 0 };
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req = req;
    assert_int_equal(core_submit(core, &spec, 0, &out), 0);
    core_schedule(core, 0, &out);
    bool started = false;
    for (size_t i = 0; i < out.n; i++) {
        if (out.v[i].type == CORE_ACT_START && out.v[i].task == id) {
            started = true;
            if (where != NULL)
                *where = out.v[i].placement;
        }
    }
    core_actions_free(&out);
    return started;
}

static struct core_request shared(int gpus, uint64_t gpu_mem)
{
    return (struct core_request){ .gpus = gpus, .gpu_mem = gpu_mem };
}

static struct core_request exclusive(int gpus)
{
    return (struct core_request){ .gpus = gpus };
}

static struct core_request cpu_only(int cpus, uint64_t mem)
{
    return (struct core_request){ .cpus = cpus, .mem = mem };
}

static void exit_ok(struct core *core, int64_t id)
{
    struct core_actions out = { 0 };
    assert_int_equal(core_attempt_exited(core, id, CORE_OUTCOME_SUCCESS, 1, &out), 0);
    core_actions_free(&out);
}

static struct core_gpu_usage usage_of(const struct core *core, int node, int gpu)
{
    struct core_gpu_usage usage;
    core_gpu_usage(core, node, gpu, &usage);
    return usage;
}

/* ---- packing ------------------------------------------------------------------------------- */

static void test_best_fit_keeps_whole_gpus(void **state)
{
    struct core_node node = node_of(2, 40 * GB, 0, 0);
    struct core *core = new_core(&node, 1, true);
    struct core_placement pl;
    for (int64_t id = 1; id <= 3; id++) {
        assert_true(submit_run(core, id, shared(1, 10 * GB), &pl));
        assert_int_equal(pl.ngpus, 1);
        assert_int_equal(pl.gpu[0], 0);
        assert_int_equal(pl.gpu_mem, 10 * GB);
    }
    assert_int_equal(usage_of(core, 0, 0).mem_claimed, 30 * GB);
    assert_int_equal(usage_of(core, 0, 0).tasks, 3);
    assert_true(submit_run(core, 4, exclusive(1), &pl));
    assert_int_equal(pl.gpu[0], 1);
    assert_int_equal(pl.gpu_mem, 0);
    struct core_gpu_usage u = usage_of(core, 0, 1);
    assert_true(u.exclusive);
    assert_int_equal(u.mem_claimed, 40 * GB);
    core_free(core);
}

static void test_four_16g_tasks_pack(void **state)
{
    struct core_node node = node_of(4, 40 * GB, 0, 0);
    struct core *core = new_core(&node, 1, true);
    struct core_placement pl;
    int want[] = { 0, 0, 1, 1 };
    for (int64_t id = 1; id <= 4; id++) {
        assert_true(submit_run(core, id, shared(1, 16 * GB), &pl));
        assert_int_equal(pl.gpu[0], want[id - 1]);
    }
    assert_int_equal(usage_of(core, 0, 2).tasks, 0);
    assert_int_equal(usage_of(core, 0, 3).tasks, 0);
    assert_true(submit_run(core, 5, exclusive(2), &pl));
    assert_int_equal(pl.ngpus, 2);
    assert_int_equal(pl.gpu[0], 2);
    assert_int_equal(pl.gpu[1], 3);
    core_free(core);
}

static void test_first_fit_vs_best_fit(void **state)
{
    for (int best = 0; best <= 1; best++) {
        struct core_node node = node_of(2, 40 * GB, 0, 0);
        struct core *core = new_core(&node, 1, best);
        struct core_placement pl;
        assert_true(submit_run(core, 1, shared(1, 10 * GB), &pl));
        assert_int_equal(pl.gpu[0], 0);
        assert_true(submit_run(core, 2, exclusive(1), &pl));
        assert_int_equal(pl.gpu[0], 1);
        exit_ok(core, 2);
        assert_true(submit_run(core, 3, shared(1, 30 * GB), &pl)); /* both: GPU 0 (30 free) */
        assert_int_equal(pl.gpu[0], 0);
        exit_ok(core, 1);
        /* GPU 0: 10 free; GPU 1: 40 free. A 5G task: best fit -> 0; first fit -> 0 as well. */
        /* Make GPU 0 the roomier one: GPU 0 = 30 claimed -> 10 free; put 35G on GPU 1. */
        assert_true(submit_run(core, 4, shared(1, 35 * GB), &pl));
        assert_int_equal(pl.gpu[0], 1); /* only GPU 1 fits 35G */
        exit_ok(core, 3);
        /* Now GPU 0: 40 free, GPU 1: 5 free. A 4G task: best fit -> GPU 1, first fit -> GPU 0. */
        assert_true(submit_run(core, 5, shared(1, 4 * GB), &pl));
        assert_int_equal(pl.gpu[0], best ? 1 : 0);
        core_free(core);
    }
}

static void test_exclusive_and_shared_exclude(void **state)
{
    struct core_node node = node_of(1, 40 * GB, 0, 0);
    struct core *core = new_core(&node, 1, true);
    assert_true(submit_run(core, 1, exclusive(1), NULL));
    assert_false(submit_run(core, 2, shared(1, 1 * GB), NULL));
    exit_ok(core, 1); /* 2 is queued; let it start on the freed GPU */
    struct core_actions out = { 0 };
    core_schedule(core, 1, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.v[0].task, 2);
    core_actions_free(&out);
    assert_false(submit_run(core, 3, exclusive(1), NULL));
    /* Cancelled: a blocked exclusive task would keep the GPU reserved (backfill). */
    const char *why = NULL;
    out = (struct core_actions){ 0 };
    assert_int_equal(core_cancel(core, 3, 1, &out, &why), 0);
    core_actions_free(&out);
    assert_true(submit_run(core, 4, shared(1, 39 * GB), NULL));
    assert_false(submit_run(core, 5, shared(1, 1 * GB), NULL)); /* 40G all claimed */
    struct core_gpu_usage u = usage_of(core, 0, 0);
    assert_false(u.exclusive);
    assert_int_equal(u.tasks, 2);
    assert_int_equal(u.mem_claimed, 40 * GB);
    core_free(core);
}

static void test_multi_gpu_one_node(void **state)
{
    struct core_node nodes[2] = { node_of(2, 40 * GB, 0, 0), node_of(4, 40 * GB, 0, 0) };
    struct core *core = new_core(nodes, 2, true);
    struct core_placement pl;
    assert_true(submit_run(core, 1, exclusive(1), &pl));
    assert_int_equal(pl.node, 0);
    assert_true(submit_run(core, 2, exclusive(3), &pl)); /* does not fit node 0 */
    assert_int_equal(pl.node, 1);
    assert_int_equal(pl.ngpus, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pl.gpu[i], i);
    /* One GPU free on each node: a 2-GPU task does not span nodes. */
    assert_false(submit_run(core, 3, exclusive(2), &pl));
    assert_int_equal(usage_of(core, 0, 1).tasks, 0);
    assert_int_equal(usage_of(core, 1, 3).tasks, 0);
    core_free(core);
}

static void test_shared_multi_gpu_ascending(void **state)
{
    struct core_node node = node_of(4, 40 * GB, 0, 0);
    struct core *core = new_core(&node, 1, true);
    struct core_placement pl;
    assert_true(submit_run(core, 1, shared(1, 30 * GB), &pl)); /* GPU 0: 10 free */
    assert_true(submit_run(core, 2, exclusive(1), &pl));       /* GPU 1 */
    assert_true(submit_run(core, 3, shared(1, 35 * GB), &pl)); /* GPU 2: 5 free */
    assert_int_equal(pl.gpu[0], 2);
    /* Two 5G GPUs: the fullest that fit are GPU 2 (5 free) and GPU 0 (10 free). */
    assert_true(submit_run(core, 4, shared(2, 5 * GB), &pl));
    assert_int_equal(pl.ngpus, 2);
    assert_int_equal(pl.gpu[0], 0);
    assert_int_equal(pl.gpu[1], 2);
    core_free(core);
}

/* ---- CPUs and memory ----------------------------------------------------------------------- */

static void test_cpu_accounting(void **state)
{
    struct core_node node = node_of(2, 40 * GB, 2, 0);
    struct core *core = new_core(&node, 1, true);
    /* Four small GPU tasks share two GPUs on a 2-core node: GPU tasks count no CPU unless asked. */
    for (int64_t id = 1; id <= 4; id++)
        assert_true(submit_run(core, id, shared(1, 16 * GB), NULL));
    /* A CPU-only task counts 1 CPU when it names none: two fit, a third does not. */
    assert_true(submit_run(core, 5, cpu_only(0, 0), NULL));
    assert_true(submit_run(core, 6, cpu_only(0, 0), NULL));
    assert_false(submit_run(core, 7, cpu_only(0, 0), NULL));
    struct core_actions out = { 0 };
    const char *why = NULL;
    assert_int_equal(core_cancel(core, 7, 0, &out, &why), 0);
    exit_ok(core, 5);
    exit_ok(core, 6);
    /* A GPU task that asks for CPUs counts them. */
    struct core_request req = shared(1, 1 * GB);
    req.cpus = 2;
    assert_true(submit_run(core, 8, req, NULL));
    assert_false(submit_run(core, 9, cpu_only(1, 0), NULL));
    core_actions_free(&out);
    core_free(core);
}

static void test_cpus_unaccounted_and_mem(void **state)
{
    struct core_node node = node_of(0, 0, 0, 10 * GB);
    struct core *core = new_core(&node, 1, true);
    for (int64_t id = 1; id <= 100; id++)
        assert_true(submit_run(core, id, cpu_only(4, 0), NULL)); /* CPUs not accounted */
    assert_true(submit_run(core, 101, cpu_only(1, 6 * GB), NULL));
    assert_false(submit_run(core, 102, cpu_only(1, 6 * GB), NULL));
    assert_true(submit_run(core, 103, cpu_only(1, 4 * GB), NULL));
    assert_false(submit_run(core, 104, cpu_only(1, 1), NULL));
    assert_true(submit_run(core, 105, cpu_only(1, 0), NULL)); /* no memory asked: not counted */
    core_free(core);
}

/* ---- the request check --------------------------------------------------------------------- */

/* core_check_request refuses req with exactly this reason. */
static void check_refused(const struct core *core, struct core_request req, const char *reason)
{
    char why[CORE_WHY_MAX] = "";
    assert_int_equal(core_check_request(core, &req, why, sizeof why), -1);
    assert_string_equal(why, reason);
}

static void check_accepted(const struct core *core, struct core_request req)
{
    char why[CORE_WHY_MAX] = "";
    assert_int_equal(core_check_request(core, &req, why, sizeof why), 0);
    assert_string_equal(why, "");
}

/* Every refusal names what was asked and what the machine has that rules it out. */
static void test_check_request(void **state)
{
    struct core_node nodes[2] = { node_of(4, 40 * GB, 16, 64 * GB), node_of(2, 80 * GB, 8, 0) };
    nodes[0].gpu_mem[3] = 80 * GB;
    struct core *core = new_core(nodes, 2, true);
    check_accepted(core, exclusive(4));
    check_accepted(core, exclusive(5)); /* more than one node has: spans both, whole */
    check_refused(core, exclusive(7), "asks for 7 GPUs; the nodes it could span have 6 in all");
    check_refused(core, shared(1, 81 * GB),
                  "asks for 81G of memory per GPU; the largest GPU has 80G");
    check_accepted(core, shared(2, 80 * GB)); /* node 1 */
    check_refused(core, shared(3, 80 * GB),
                  "asks for 3 GPUs with 80G each; the most any node has is 2");
    check_refused(core, cpu_only(17, 0), "asks for 17 CPUs; the largest node has 16");
    check_accepted(core, cpu_only(1, 65 * GB)); /* node 1 does not count memory */
    struct core_request req = exclusive(3);
    req.cpus = 9;
    check_accepted(core, req);
    req.cpus = 16;
    req.mem = 65 * GB;
    check_refused(core, req, "asks for 3 GPUs, 16 CPUs and 65G of memory; no single node has "
                             "all of them");
    check_refused(core, exclusive(-1), "asks for a negative number of GPUs (-1)");
    check_refused(core, cpu_only(-2, 0), "asks for a negative number of CPUs (-2)");
    req = cpu_only(1, 0);
    req.time_limit = -5;
    check_refused(core, req, "has a negative time limit (-5 ms)");
    check_refused(core, exclusive(CORE_MAX_SPAN * CORE_MAX_NODE_GPUS + 1),
                  "asks for 2049 GPUs; a task may span at most 32 nodes of 64");
    core_free(core);

    /* The daemon's one node: the figures are the machine's. */
    struct core_node small = node_of(1, 40 * GB, 4, 23 * GB + GB / 2);
    core = new_core(&small, 1, true);
    check_refused(core, cpu_only(1, 32 * GB),
                  "asks for 32G of memory; the largest node has 23.5G");
    check_refused(core, exclusive(2), "asks for 2 GPUs; the largest node has 1");
    check_refused(core, shared(1, 40 * GB + 512ULL * 1024 * 1024),
                  "asks for 40.5G of memory per GPU; the largest GPU has 40G");
    req = shared(1, 8 * GB);
    req.cpus = 4;
    req.mem = 23 * GB;
    check_accepted(core, req);
    req.cpus = 5;
    check_refused(core, req, "asks for 5 CPUs; the largest node has 4");
    /* A short buffer gets the start of the reason, terminated; none at all is fine. */
    char why[12];
    assert_int_equal(core_check_request(core, &req, why, sizeof why), -1);
    assert_string_equal(why, "asks for 5 ");
    assert_int_equal(core_check_request(core, &req, NULL, 0), -1);
    core_free(core);

    /* Two resources no node has together. */
    struct core_node pair[2] = { node_of(0, 0, 32, 8 * GB), node_of(0, 0, 4, 64 * GB) };
    core = new_core(pair, 2, true);
    check_refused(core, cpu_only(16, 16 * GB),
                  "asks for 16 CPUs and 16G of memory; no single node has both");
    core_free(core);

    /* More nodes than a task may span: 40 nodes of one GPU, 33 GPUs asked. */
    struct core_node many[40];
    for (int i = 0; i < 40; i++)
        many[i] = node_of(1, 16 * GB, 0, 0);
    core = new_core(many, 40, true);
    check_accepted(core, exclusive(32));
    check_refused(core, exclusive(33),
                  "asks for 33 GPUs, which would span more nodes than a task may (32)");
    core_free(core);

    core = new_core(NULL, 0, true);
    check_refused(core, cpu_only(1, 0), "there is no node to run it on");
    core_free(core);
}

/* ---- spanning nodes and GPU types ------------------------------------------------------- */

static struct core_node *cluster_of(int nnodes, int ngpus)
{
    struct core_node *nodes = calloc((size_t)nnodes, sizeof *nodes);
    for (int i = 0; i < nnodes; i++)
        nodes[i] = node_of(ngpus, 80 * GB, 0, 0);
    return nodes;
}

/* A request for more GPUs than a node has takes whole, idle nodes; one that fits a node never
 * spans. */
static void test_span_whole_nodes(void **state)
{
    struct core_node *nodes = cluster_of(4, 8);
    struct core *core = new_core(nodes, 4, true);
    struct core_placement pl;
    assert_true(submit_run(core, 1, exclusive(2), &pl)); /* node 0 now busy */
    assert_int_equal(pl.node, 0);
    assert_true(submit_run(core, 2, exclusive(12), &pl));
    assert_int_equal(pl.nnodes, 2);
    assert_int_equal(pl.nodes[0], 1);
    assert_int_equal(pl.nodes[1], 2);
    assert_int_equal(pl.node, 1);
    assert_int_equal(pl.ngpus, 16); /* whole nodes: the other 4 GPUs are held too */
    struct core_gpu_usage use;
    core_gpu_usage(core, 2, 7, &use);
    assert_true(use.exclusive);
    assert_int_equal(use.tasks, 1);
    /* An 8-GPU task must fit on one node: node 3, not node 0's six and two of another. */
    assert_true(submit_run(core, 3, exclusive(8), &pl));
    assert_int_equal(pl.node, 3);
    assert_int_equal(pl.nnodes, 0);
    assert_false(submit_run(core, 4, exclusive(8), NULL));
    /* Node 0 has 6 free GPUs, but a spanning task takes idle nodes only. */
    assert_false(submit_run(core, 5, exclusive(9), NULL));
    core_free(core);
    free(nodes);
}

static void test_span_release_and_reserve(void **state)
{
    struct core_node *nodes = cluster_of(3, 4);
    struct core_policy policy = core_policy_default();
    struct core *core = core_new(&policy);
    core_set_nodes(core, nodes, 3);
    struct core_actions out = {0};
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    /* 1: one GPU on node 0, no time limit; 2: twelve GPUs, all three nodes, blocked by 1. */
    spec.id = 1;
    spec.req = exclusive(1);
    assert_int_equal(core_submit(core, &spec, 0, &out), 0);
    core_schedule(core, 0, &out);
    spec.id = 2;
    spec.req = exclusive(12);
    assert_int_equal(core_submit(core, &spec, 1, &out), 0);
    /* 3: one GPU, no limit: would land on a node the head has reserved; all three are. */
    spec.id = 3;
    spec.req = exclusive(1);
    assert_int_equal(core_submit(core, &spec, 2, &out), 0);
    core_actions_clear(&out);
    core_schedule(core, 2, &out);
    assert_int_equal(out.n, 0); /* nothing starts: the head holds every node */
    assert_int_equal(core_attempt_exited(core, 1, CORE_OUTCOME_SUCCESS, 10, &out), 0);
    core_actions_clear(&out);
    core_schedule(core, 10, &out);
    bool started2 = false;
    for (size_t i = 0; i < out.n; i++)
        if (out.v[i].type == CORE_ACT_START) {
            assert_int_equal(out.v[i].task, 2);
            assert_int_equal(out.v[i].placement.nnodes, 3);
            started2 = true;
        }
    assert_true(started2);
    core_actions_clear(&out);
    assert_int_equal(core_attempt_exited(core, 2, CORE_OUTCOME_SUCCESS, 20, &out), 0);
    core_actions_clear(&out);
    core_schedule(core, 20, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.v[0].task, 3);
    for (int n = 0; n < 3; n++)
        for (int g = 0; g < 4; g++) {
            struct core_gpu_usage use;
            core_gpu_usage(core, n, g, &use);
            assert_int_equal(use.tasks, n == 0 && g == 0 ? 1 : 0);
        }
    core_actions_free(&out);
    core_free(core);
    free(nodes);
}

/* Backfill beside a spanning head: tasks may use nodes it has not reserved. */
static void test_span_backfill_elsewhere(void **state)
{
    struct core_node *nodes = cluster_of(4, 4);
    struct core *core = new_core(nodes, 4, true);
    assert_true(submit_run(core, 1, exclusive(4), NULL)); /* node 0 */
    assert_true(submit_run(core, 2, exclusive(4), NULL)); /* node 1 */
    assert_true(submit_run(core, 3, exclusive(2), NULL)); /* node 2 */
    /* 16 GPUs: every node, so all are reserved (4 nodes needed). */
    assert_false(submit_run(core, 4, exclusive(16), NULL));
    assert_false(submit_run(core, 5, exclusive(1), NULL));
    core_free(core);

    core = new_core(nodes, 4, true);
    assert_true(submit_run(core, 1, exclusive(4), NULL)); /* node 0 */
    struct core_placement pl;
    assert_true(submit_run(core, 2, exclusive(2), &pl)); /* node 1, two GPUs left */
    assert_int_equal(pl.node, 1);
    assert_true(submit_run(core, 3, exclusive(4), NULL)); /* node 2, the youngest */
    /* 8 GPUs on 4-GPU nodes: spans two; the reservation is node 3 (free) and node 2 (what the
     * youngest attempt holds), so node 1's two free GPUs may take a backfilled task. */
    assert_false(submit_run(core, 4, exclusive(8), NULL));
    assert_true(submit_run(core, 5, exclusive(1), &pl));
    assert_int_equal(pl.node, 1);
    assert_false(submit_run(core, 6, exclusive(4), NULL)); /* would need node 3 */
    core_free(core);
    free(nodes);
}

/* Without time limits the head is reserved what the most recently started attempts hold: the
 * longer a job has run, the longer it is likely to go on (heavy-tailed durations). */
static void test_reserve_youngest_first(void **state)
{
    struct core_node nodes[2] = { node_of(2, 80 * GB, 0, 0), node_of(2, 80 * GB, 0, 0) };
    struct core_policy policy = core_policy_default();
    struct core *core = core_new(&policy);
    core_set_nodes(core, nodes, 2);
    struct core_actions out = {0};
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 1; /* both GPUs of node 0, from t = 0 */
    spec.req = exclusive(2);
    assert_int_equal(core_submit(core, &spec, 0, &out), 0);
    core_schedule(core, 0, &out);
    spec.id = 2; /* one GPU of node 1, from t = 100 s */
    spec.req = exclusive(1);
    assert_int_equal(core_submit(core, &spec, 100000, &out), 0);
    core_schedule(core, 100000, &out);
    spec.id = 3; /* the head: two GPUs, blocked; reserved node 1 (task 2 is the younger) */
    spec.req = exclusive(2);
    assert_int_equal(core_submit(core, &spec, 200000, &out), 0);
    spec.id = 4; /* one GPU, no limit: node 1's free GPU is the head's */
    spec.req = exclusive(1);
    assert_int_equal(core_submit(core, &spec, 200000, &out), 0);
    core_actions_clear(&out);
    core_schedule(core, 200000, &out);
    for (size_t i = 0; i < out.n; i++)
        assert_int_not_equal(out.v[i].type, CORE_ACT_START);
    /* Task 2 ends: the head starts on node 1 at once. */
    assert_int_equal(core_attempt_exited(core, 2, CORE_OUTCOME_SUCCESS, 300000, &out), 0);
    core_actions_clear(&out);
    core_schedule(core, 300000, &out);
    int starts = 0;
    for (size_t i = 0; i < out.n; i++)
        if (out.v[i].type == CORE_ACT_START) {
            assert_int_equal(out.v[i].task, 3);
            assert_int_equal(out.v[i].placement.node, 1);
            starts++;
        }
    assert_int_equal(starts, 1);
    core_actions_free(&out);
    core_free(core);
}

/* Starts exclusive(gpus) as task id at now, alone in its pass, and checks it went to want_node. */
static void start_at(struct core *core, int64_t id, int gpus, core_time now, int want_node)
{
    struct core_actions out = {0};
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req = exclusive(gpus);
    assert_int_equal(core_submit(core, &spec, now, &out), 0);
    core_actions_clear(&out);
    core_schedule(core, now, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.v[0].type, CORE_ACT_START);
    assert_int_equal(out.v[0].placement.node, want_node);
    core_actions_free(&out);
}

/* Best fit across nodes for exclusive tasks (core_place_fit): a task of several GPUs goes to the
 * node with the fewest idle GPUs, ties to the lowest index; a one-GPU task takes the first node
 * with a GPU free, even when a later node is fuller. */
static void test_exclusive_fit_by_size(void **state)
{
    struct core_node nodes[3] = { node_of(4, 80 * GB, 0, 0), node_of(4, 80 * GB, 0, 0),
                                  node_of(4, 80 * GB, 0, 0) };
    struct core_policy policy = core_policy_default();
    struct core *core = core_new(&policy);
    core_set_nodes(core, nodes, 3);
    struct core_actions out = {0};
    start_at(core, 1, 4, 0, 0);  /* all equally idle: the lowest index */
    start_at(core, 2, 2, 1, 1);  /* idle GPUs now 0, 2, 4 */
    assert_int_equal(core_attempt_exited(core, 1, CORE_OUTCOME_SUCCESS, 2, &out), 0);
    /* Idle 4, 2, 4: one GPU goes to node 0, first fit, not to the fuller node 1. */
    start_at(core, 3, 1, 3, 0);
    /* Idle 3, 2, 4: two GPUs go to node 1, where they fit exactly, past node 0. */
    start_at(core, 4, 2, 4, 1);
    start_at(core, 5, 3, 5, 0);  /* idle 3, 0, 4: node 0 fits exactly */
    start_at(core, 6, 1, 6, 2);  /* idle 0, 0, 4 */
    core_actions_free(&out);
    core_free(core);
}

static void test_gpu_types(void **state)
{
    struct core_node nodes[2] = { node_of(4, 16 * GB, 0, 0), node_of(4, 32 * GB, 0, 0) };
    for (int g = 0; g < 4; g++)
        nodes[1].gpu_type[g] = 1;
    nodes[0].gpu_type[3] = 2;
    struct core *core = new_core(nodes, 2, true);
    struct core_request req = exclusive(2);
    req.gpu_types = 1ULL << 1;
    struct core_placement pl;
    assert_true(submit_run(core, 1, req, &pl));
    assert_int_equal(pl.node, 1);
    assert_true(submit_run(core, 2, req, &pl));
    assert_int_equal(pl.node, 1);
    assert_false(submit_run(core, 3, req, &pl)); /* type 1 is full; type 0 GPUs are free */
    req = exclusive(1);
    req.gpu_types = 1ULL << 2;
    assert_true(submit_run(core, 4, req, &pl));
    assert_int_equal(pl.node, 0);
    assert_int_equal(pl.gpu[0], 3);
    req.gpus = 2;
    check_refused(core, req, "asks for 2 GPUs of its types; the most any node has is 1");
    req.gpu_types = (1ULL << 0) | (1ULL << 2);
    check_accepted(core, req);
    req.gpu_types = 1ULL << 5;
    check_refused(core, req, "asks for GPUs of types that no node has");
    req = shared(1, 20 * GB);
    req.gpu_types = 1ULL << 2;
    check_refused(core, req, "asks for 20G of memory per GPU; the largest GPU of its types "
                             "has 16G");
    /* Spanning needs every GPU of each node to be of an allowed type. */
    req = exclusive(8);
    req.gpu_types = (1ULL << 0) | (1ULL << 1);
    check_refused(core, req, "asks for 8 GPUs of its types; the nodes it could span have 4 in "
                             "all");
    core_free(core);
}

static void test_gpu_usage_out_of_range(void **state)
{
    struct core_node node = node_of(1, 40 * GB, 0, 0);
    struct core *core = new_core(&node, 1, true);
    struct core_gpu_usage u = usage_of(core, 0, 0);
    assert_int_equal(u.mem_total, 40 * GB);
    u = usage_of(core, 0, 1);
    assert_int_equal(u.mem_total, 0);
    u = usage_of(core, 1, 0);
    assert_int_equal(u.mem_total, 0);
    u = usage_of(core, -1, 0);
    assert_int_equal(u.tasks, 0);
    core_free(core);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_best_fit_keeps_whole_gpus),
        cmocka_unit_test(test_four_16g_tasks_pack),
        cmocka_unit_test(test_first_fit_vs_best_fit),
        cmocka_unit_test(test_exclusive_and_shared_exclude),
        cmocka_unit_test(test_multi_gpu_one_node),
        cmocka_unit_test(test_shared_multi_gpu_ascending),
        cmocka_unit_test(test_cpu_accounting),
        cmocka_unit_test(test_cpus_unaccounted_and_mem),
        cmocka_unit_test(test_check_request),
        cmocka_unit_test(test_span_whole_nodes),
        cmocka_unit_test(test_span_release_and_reserve),
        cmocka_unit_test(test_span_backfill_elsewhere),
        cmocka_unit_test(test_reserve_youngest_first),
        cmocka_unit_test(test_exclusive_fit_by_size),
        cmocka_unit_test(test_gpu_types),
        cmocka_unit_test(test_gpu_usage_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
