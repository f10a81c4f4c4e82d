/* store/: what preemption keeps across a restart, on a real database in a temporary directory:
 * a task's preemptible grace and signal, its attained service (GPUs x the time of its ended
 * attempts: what las orders by), the grace overruns that make it no longer preemptible, and
 * that a preempted attempt uses none of its retries. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "store/store.h"
#include "store_fixture.h"

STORE_FIXTURE_FUNCS("/tmp/drover-store-preempt.XXXXXX")

static int64_t add_task(struct store *st, int gpus, int64_t grace_ms, int sig)
{
    struct task_record rec;
    memset(&rec, 0, sizeof rec);
    rec.command = json_pack("[s]", "true");
    rec.env = json_object();
    rec.workdir = "/";
    rec.array_index = -1;
    rec.spec.req.gpus = gpus;
    rec.preempt_grace_ms = grace_ms;
    rec.preempt_signal = sig;
    store_begin(st);
    assert_int_equal(store_insert_task(st, &rec), 0);
    assert_int_equal(store_commit(st), 0);
    json_decref(rec.command);
    json_decref(rec.env);
    return rec.spec.id;
}

/* Attempt n ran from start to end (ms); end 0: still running. */
static void add_attempt(struct store *st, int64_t id, int n, core_time start, core_time end)
{
    struct core_placement pl = {.node = 0, .ngpus = 0};
    store_begin(st);
    assert_int_equal(store_attempt_start(st, id, n, start, &pl, "/nonexistent"), 0);
    if (end > 0)
        assert_int_equal(store_attempt_end(st, id, n, start, end, 143, 0, "preempted", "x"), 0);
    assert_int_equal(store_commit(st), 0);
}

static struct core_task_spec spec_of(struct store *st, int64_t id)
{
    struct core_task_spec spec;
    struct core_dep *deps = NULL;
    assert_int_equal(store_task_spec(st, id, &spec, &deps, NULL), 0);
    free(deps);
    return spec;
}

static void test_preemptible_and_service(void **state)
{
    struct store *st = ((struct store_fixture *)*state)->st;
    int64_t plain = add_task(st, 2, 0, 0);
    int64_t pre = add_task(st, 2, 90000, SIGUSR1);
    int64_t cpu = add_task(st, 0, 60000, 0);
    assert_false(spec_of(st, plain).preemptible);
    assert_true(spec_of(st, pre).preemptible);
    assert_true(spec_of(st, pre).service == 0);

    /* Two ended attempts of 10 s and 5 s on 2 GPUs, one running (counted by core itself). */
    add_attempt(st, pre, 1, 1000, 11000);
    add_attempt(st, pre, 2, 20000, 25000);
    add_attempt(st, pre, 3, 30000, 0);
    assert_true(spec_of(st, pre).service == 2.0 * 15000);
    assert_int_equal(spec_of(st, pre).run_ms, 15000);
    add_attempt(st, cpu, 1, 1000, 11000);
    assert_true(spec_of(st, cpu).service == 0); /* no GPU, no service */

    json_t *info = store_task_exec_info(st, pre);
    assert_int_equal(json_integer_value(json_object_get(info, "preempt_grace_ms")), 90000);
    assert_int_equal(json_integer_value(json_object_get(info, "preempt_signal")), SIGUSR1);
    json_decref(info);
    info = store_task_exec_info(st, plain);
    assert_null(json_object_get(info, "preempt_grace_ms"));
    json_decref(info);
}

static void test_overruns_and_retry_budget(void **state)
{
    struct store *st = ((struct store_fixture *)*state)->st;
    int64_t id = add_task(st, 1, 1000, 0);
    assert_int_equal(store_task_preempt_overruns(st, id), 0);
    assert_int_equal(store_task_preempt_overruns(st, id + 100), -1);
    int base = spec_of(st, id).retry_base;

    store_begin(st);
    assert_int_equal(store_task_preempted(st, id, false, NULL), 0); /* yielded in time */
    assert_int_equal(store_task_preempted(st, id, true, NULL), 0);  /* killed after its grace */
    assert_int_equal(store_commit(st), 0);
    assert_int_equal(store_task_preempt_overruns(st, id), 1);
    assert_true(spec_of(st, id).preemptible);
    assert_int_equal(spec_of(st, id).retry_base, base + 2); /* no retry used */

    store_begin(st);
    assert_int_equal(store_task_preempted(st, id, true, "too often"), 0);
    assert_int_equal(store_commit(st), 0);
    assert_int_equal(store_task_preempt_overruns(st, id), 2);
    assert_false(spec_of(st, id).preemptible);

    json_t *list = store_task_json(st, id);
    assert_non_null(list);
    assert_true(json_is_false(json_object_get(list, "preemptible")));
    json_t *p = json_object_get(list, "preempt");
    assert_int_equal(json_integer_value(json_object_get(p, "grace_ms")), 1000);
    assert_string_equal(json_string_value(json_object_get(p, "signal")), "TERM");
    assert_int_equal(json_integer_value(json_object_get(p, "overruns")), 2);
    assert_string_equal(json_string_value(json_object_get(p, "off")), "too often");
    json_decref(list);
}

static void learn(void *arg, double service_ms)
{
    json_array_append_new(arg, json_real(service_ms));
}

/* What las learns at a restart: the services of the tasks that succeeded, latest first. */
static void test_services_of_succeeded(void **state)
{
    struct store *st = ((struct store_fixture *)*state)->st;
    int64_t a = add_task(st, 2, 0, 0), b = add_task(st, 1, 0, 0), c = add_task(st, 4, 0, 0);
    add_attempt(st, a, 1, 1000, 11000); /* 2 x 10 s */
    add_attempt(st, a, 2, 20000, 25000); /* + 2 x 5 s */
    add_attempt(st, b, 1, 1000, 4000);  /* 1 x 3 s */
    add_attempt(st, c, 1, 1000, 0);     /* running: not succeeded */
    struct core_action done = {.type = CORE_ACT_STATE, .state = TASK_SUCCEEDED};
    store_begin(st);
    done.task = a;
    assert_int_equal(store_set_state(st, &done, NULL, 30000), 0);
    done.task = b;
    assert_int_equal(store_set_state(st, &done, NULL, 40000), 0);
    assert_int_equal(store_commit(st), 0);
    json_t *got = json_array();
    assert_int_equal(store_each_service(st, 10, learn, got), 0);
    assert_int_equal(json_array_size(got), 2);
    assert_true(json_real_value(json_array_get(got, 0)) == 3000);  /* b, the latest */
    assert_true(json_real_value(json_array_get(got, 1)) == 30000); /* a */
    json_array_clear(got);
    assert_int_equal(store_each_service(st, 1, learn, got), 0);
    assert_int_equal(json_array_size(got), 1);
    json_decref(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_preemptible_and_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overruns_and_retry_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_services_of_succeeded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
