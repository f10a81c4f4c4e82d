/* core/: what the GPUs really look like — memory used outside the claims, the utilisation rule,
 * GPUs out of service, topology-aware multi-GPU placement — and the outcomes that come from it:
 * out of memory (a larger claim, no retry used), a stall, a GPU fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "core_fixture.h"

static struct core_request gpus_req(int gpus, uint64_t gpu_mem)
{
    struct core_request req;
    memset(&req, 0, sizeof req);
    req.gpus = gpus;
    req.gpu_mem = gpu_mem;
    return req;
}

/* Submits id asking for req at now and runs a pass; returns the START action or NULL. */
static const struct core_action *start(struct fixture *f, int64_t id, struct core_request req,
                                       core_time now)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req = req;
    spec.max_retries = 1;
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
    core_schedule(f->core, now, &f->out);
    for (size_t i = 0; i < f->out.n; i++)
        if (f->out.v[i].type == CORE_ACT_START && f->out.v[i].task == id)
            return &f->out.v[i];
    return NULL;
}

static void set_state(struct fixture *f, int gpu, uint64_t outside, bool busy, bool offline)
{
    struct core_gpu_state st = {.outside = outside, .busy = busy, .offline = offline};
    core_set_gpu_state(f->core, 0, gpu, &st);
}

/* Memory other processes use counts against a shared claim, and keeps exclusive tasks off. */
static void test_outside_memory(void **state)
{
    struct fixture f;
    fixture_setup(&f, 2, 0, NULL);
    set_state(&f, 0, 30 * GB, false, false); /* 10G left on GPU 0 */
    const struct core_action *a = start(&f, 1, gpus_req(1, 12 * GB), 0);
    assert_non_null(a);
    assert_int_equal(a->placement.gpu[0], 1); /* does not fit beside the 30G */
    a = start(&f, 2, gpus_req(1, 8 * GB), 0);
    assert_non_null(a);
    assert_int_equal(a->placement.gpu[0], 0); /* fits in the 10G (best fit: the fuller GPU) */
    assert_null(start(&f, 3, gpus_req(1, 0), 0)); /* exclusive: GPU 0 is used, GPU 1 shared */
    struct core_gpu_usage use;
    core_gpu_usage(f.core, 0, 0, &use);
    assert_true(use.state.outside == 30 * GB);
    set_state(&f, 0, 0, false, false); /* the other process left: nothing new is placed … */
    core_actions_clear(&f.out);
    core_schedule(f.core, 1, &f.out);
    assert_int_equal(f.out.n, 0); /* … task 3 still cannot have a GPU to itself */
    teardown(&f);
}

/* The utilisation rule: nothing joins a busy GPU; an offline GPU takes nothing. */
static void test_busy_and_offline(void **state)
{
    struct fixture f;
    fixture_setup(&f, 2, 0, NULL);
    set_state(&f, 0, 0, true, false);
    set_state(&f, 1, 0, false, true);
    assert_null(start(&f, 1, gpus_req(1, 4 * GB), 0));
    assert_null(start(&f, 2, gpus_req(1, 0), 0));
    set_state(&f, 0, 0, false, false); /* utilisation fell below the low mark */
    core_actions_clear(&f.out);
    core_schedule(f.core, 1, &f.out);
    int started = 0;
    for (size_t i = 0; i < f.out.n; i++)
        if (f.out.v[i].type == CORE_ACT_START) {
            assert_int_equal(f.out.v[i].placement.gpu[0], 0);
            started++;
        }
    assert_int_equal(started, 1); /* task 1 (shared) takes GPU 0; task 2 waits for a whole one */
    teardown(&f);
}

/* A four-GPU node: 0-1 NVLink, 2-3 NVLink, pairs across the host bridge. */
static void test_topology_pairs(void **state)
{
    static const uint8_t link[16] = {
        0, 0, 2, 2,
        0, 0, 2, 2,
        2, 2, 0, 0,
        2, 2, 0, 0,
    };
    struct core_node node;
    memset(&node, 0, sizeof node);
    node.ngpus = 4;
    for (int g = 0; g < 4; g++)
        node.gpu_mem[g] = 40 * GB;
    node.gpu_link = link;
    struct fixture f;
    f.core = core_new(NULL);
    core_set_nodes(f.core, &node, 1);
    memset(&f.out, 0, sizeof f.out);
    const struct core_action *a = start(&f, 1, gpus_req(1, 0), 0); /* GPU 0 */
    assert_int_equal(a->placement.gpu[0], 0);
    /* Two GPUs: 1 and 2 are the lowest free, but 2-3 share an NVLink. */
    a = start(&f, 2, gpus_req(2, 0), 0);
    assert_non_null(a);
    assert_int_equal(a->placement.gpu[0], 2);
    assert_int_equal(a->placement.gpu[1], 3);
    teardown(&f);
}

/* Eight GPUs in two sockets of two PCIe switches each; a 4-GPU task gets one socket. */
static void test_topology_socket(void **state)
{
    uint8_t link[64];
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            link[a * 8 + b] = a == b ? 0 : a / 2 == b / 2 ? 1 : a / 4 == b / 4 ? 3 : 4;
    struct core_node node;
    memset(&node, 0, sizeof node);
    node.ngpus = 8;
    for (int g = 0; g < 8; g++)
        node.gpu_mem[g] = 40 * GB;
    node.gpu_link = link;
    struct fixture f;
    f.core = core_new(NULL);
    core_set_nodes(f.core, &node, 1);
    memset(&f.out, 0, sizeof f.out);
    assert_non_null(start(&f, 1, gpus_req(1, 0), 0)); /* GPU 0: socket 0 has 3 left */
    const struct core_action *a = start(&f, 2, gpus_req(4, 0), 0);
    assert_non_null(a);
    for (int i = 0; i < 4; i++)
        assert_int_equal(a->placement.gpu[i], 4 + i);
    a = start(&f, 3, gpus_req(2, 0), 0); /* 1-2 cross a switch; 2-3 share one */
    assert_non_null(a);
    assert_int_equal(a->placement.gpu[0], 2);
    assert_int_equal(a->placement.gpu[1], 3);
    teardown(&f);
}

/* Out of memory: queued again at once with the larger claim, no retry used; at whole GPUs it
 * is an ordinary failure. */
static void test_oom_grows_claim(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    assert_non_null(start(&f, 1, gpus_req(1, 8 * GB), 0));
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited_oom(f.core, 1, 16 * GB, 10, &f.out), 0);
    const struct core_action *s = find_state(&f, 1);
    assert_non_null(s);
    assert_int_equal(s->state, TASK_QUEUED);
    assert_int_equal(s->reason, CORE_REASON_OOM);
    core_actions_clear(&f.out);
    core_schedule(f.core, 10, &f.out);
    assert_int_equal(f.out.n, 1);
    assert_int_equal(f.out.v[0].attempt, 2);
    assert_true(f.out.v[0].placement.gpu_mem == 16 * GB);
    /* Again, past the GPU's 40G: whole GPUs. */
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited_oom(f.core, 1, 64 * GB, 20, &f.out), 0);
    core_schedule(f.core, 20, &f.out);
    const struct core_action *st = NULL;
    for (size_t i = 0; i < f.out.n; i++)
        if (f.out.v[i].type == CORE_ACT_START)
            st = &f.out.v[i];
    assert_non_null(st);
    assert_int_equal(st->attempt, 3);
    assert_true(st->placement.gpu_mem == 0);
    /* Out of memory on a whole GPU: a failure; its one retry is still there. */
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited_oom(f.core, 1, 64 * GB, 30, &f.out), 0);
    s = find_state(&f, 1);
    assert_int_equal(s->state, TASK_RETRYING);
    teardown(&f);
}

static void test_stall_and_gpu_fault(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    assert_non_null(start(&f, 1, gpus_req(1, 0), 0));
    core_actions_clear(&f.out);
    /* A GPU fault: queued again, attempt 2 next, the one retry untouched. */
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_GPU_FAULT, 5, &f.out), 0);
    const struct core_action *s = find_state(&f, 1);
    assert_int_equal(s->state, TASK_QUEUED);
    assert_int_equal(s->reason, CORE_REASON_GPU_FAULT);
    core_actions_clear(&f.out);
    core_schedule(f.core, 5, &f.out);
    assert_int_equal(f.out.v[0].attempt, 2);
    /* A stall: a failure, retried once (its budget), then failed. */
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_STALLED, 10, &f.out), 0);
    s = find_state(&f, 1);
    assert_int_equal(s->state, TASK_RETRYING);
    assert_int_equal(s->reason, CORE_REASON_STALLED);
    core_actions_clear(&f.out);
    core_schedule(f.core, 10 + 5000, &f.out);
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_STALLED, 6000, &f.out), 0);
    s = find_state(&f, 1);
    assert_int_equal(s->state, TASK_FAILED);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outside_memory),
        cmocka_unit_test(test_busy_and_offline),
        cmocka_unit_test(test_topology_pairs),
        cmocka_unit_test(test_topology_socket),
        cmocka_unit_test(test_oom_grows_claim),
        cmocka_unit_test(test_stall_and_gpu_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
