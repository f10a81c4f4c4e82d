/* store/amqp.c: the RabbitMQ outbox on a real database — events kept in order, read after an id,
 * deleted when confirmed, bounded with the oldest dropped and counted, and nothing kept from a
 * transaction rolled back. */
#include <setjmp.h>
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

STORE_FIXTURE_FUNCS("/tmp/drover-store-amqp.XXXXXX")

static void collect(void *arg, int64_t id, const char *routing_key, const char *body)
{
    json_array_append_new(arg, json_pack("[I,s,s]", (json_int_t)id, routing_key, body));
}

static json_t *pending(struct store *st, int64_t after, int limit)
{
    json_t *got = json_array();
    assert_true(store_amqp_pending(st, after, limit, collect, got) >= 0);
    return got;
}

static void add(struct store *st, int i, int64_t max, int64_t *dropped)
{
    char key[32], body[32];
    snprintf(key, sizeof key, "task.%d.queued", i);
    snprintf(body, sizeof body, "{\"n\":%d}", i);
    store_begin(st);
    assert_int_equal(store_amqp_event(st, key, body, 1000 + i, max, dropped), 0);
    assert_int_equal(store_commit(st), 0);
}

static void test_order_confirm_bound(void **state)
{
    struct store *st = ((struct store_fixture *)*state)->st;
    int64_t dropped, waiting, total;
    for (int i = 1; i <= 3; i++)
        add(st, i, 5, &dropped);
    json_t *got = pending(st, 0, 10);
    assert_int_equal(json_array_size(got), 3);
    assert_string_equal(json_string_value(json_array_get(json_array_get(got, 0), 1)),
                        "task.1.queued");
    int64_t first = json_integer_value(json_array_get(json_array_get(got, 0), 0));
    json_decref(got);
    got = pending(st, first, 1); /* after the first, one */
    assert_int_equal(json_array_size(got), 1);
    assert_string_equal(json_string_value(json_array_get(json_array_get(got, 0), 2)), "{\"n\":2}");
    json_decref(got);

    store_begin(st);
    assert_int_equal(store_amqp_confirmed(st, &first, 1), 0);
    assert_int_equal(store_commit(st), 0);
    assert_int_equal(store_amqp_counts(st, &waiting, &total), 0);
    assert_int_equal(waiting, 2);
    assert_int_equal(total, 0);

    /* Beyond 5 ids, the oldest go, counted. */
    for (int i = 4; i <= 9; i++)
        add(st, i, 5, &dropped);
    assert_int_equal(store_amqp_counts(st, &waiting, &total), 0);
    assert_true(waiting <= 5);
    assert_true(total >= 3);
    got = pending(st, 0, 10);
    json_t *last = json_array_get(got, json_array_size(got) - 1);
    assert_string_equal(json_string_value(json_array_get(last, 1)), "task.9.queued");
    json_decref(got);

    /* A rolled-back transaction leaves nothing. */
    store_begin(st);
    assert_int_equal(store_amqp_event(st, "task.10.queued", "{}", 2000, 0, &dropped), 0);
    store_rollback(st);
    got = pending(st, 0, 100);
    for (size_t i = 0; i < json_array_size(got); i++)
        assert_string_not_equal(json_string_value(json_array_get(json_array_get(got, i), 1)),
                                "task.10.queued");
    json_decref(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_order_confirm_bound, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
