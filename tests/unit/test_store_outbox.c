/* store/notify.c: the webhook outbox (a row lives and dies with its transaction; due rows,
 * skipping those in flight; a retry's next time; delete), a task's notify URL as stored and
 * shown, and store_on_txn_end (what daemon/events.c publishes by), on a real database. */
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

struct fixture {
    char dir[64];
    struct store *st;
    int commits, rollbacks;
};

static void on_txn_end(void *arg, bool committed)
{
    struct fixture *fx = arg;
    if (committed)
        fx->commits++;
    else
        fx->rollbacks++;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    fx->st = store_fixture_open(fx->dir, "/tmp/drover-store-outbox.XXXXXX");
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    store_fixture_close(fx->st, fx->dir);
    free(fx);
    return 0;
}

static int64_t outbox_add(struct store *st, const char *url, int64_t now)
{
    int64_t id = 0;
    store_begin(st);
    assert_int_equal(store_outbox_insert(st, url, "{\"x\":1}", now, &id), 0);
    assert_int_equal(store_commit(st), 0);
    assert_true(id > 0);
    return id;
}

static void test_txn_hook(void **state)
{
    struct fixture *fx = *state;
    int64_t id;
    store_on_txn_end(fx->st, on_txn_end, fx);
    store_begin(fx->st);
    assert_int_equal(store_outbox_insert(fx->st, "http://a/", "{}", 1, &id), 0);
    store_rollback(fx->st);
    assert_int_equal(fx->rollbacks, 1);
    assert_int_equal(fx->commits, 0);
    store_begin(fx->st);
    assert_int_equal(store_commit(fx->st), 0);
    assert_int_equal(fx->commits, 1);
    store_on_txn_end(fx->st, NULL, NULL);
    store_begin(fx->st);
    assert_int_equal(store_commit(fx->st), 0);
    assert_int_equal(fx->commits, 1);
    /* The rolled-back row is gone. */
    assert_int_equal(store_outbox_next(fx->st, NULL, 0), INT64_MAX);
}

static void test_due_retry_delete(void **state)
{
    struct fixture *fx = *state;
    struct store_outbox_row *rows;
    size_t n;
    int64_t a = outbox_add(fx->st, "http://a/", 100), b = outbox_add(fx->st, "http://b/", 200);
    assert_int_equal(store_outbox_due(fx->st, 150, NULL, 0, 8, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].id, a);
    assert_string_equal(rows[0].url, "http://a/");
    assert_string_equal(rows[0].body, "{\"x\":1}");
    assert_int_equal(rows[0].tries, 0);
    store_outbox_rows_free(rows, n);
    /* a in flight: skipped. */
    assert_int_equal(store_outbox_due(fx->st, 1000, &a, 1, 8, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].id, b);
    store_outbox_rows_free(rows, n);
    assert_int_equal(store_outbox_next(fx->st, &a, 1), 200);
    /* A failed try of a: due again at 5000. */
    store_begin(fx->st);
    assert_int_equal(store_outbox_retry(fx->st, a, 1, 5000, "HTTP 500"), 0);
    assert_int_equal(store_commit(fx->st), 0);
    assert_int_equal(store_outbox_next(fx->st, NULL, 0), 200);
    assert_int_equal(store_outbox_due(fx->st, 4999, &b, 1, 8, &rows, &n), 0);
    assert_int_equal(n, 0);
    free(rows);
    assert_int_equal(store_outbox_due(fx->st, 5000, NULL, 0, 1, &rows, &n), 0);
    assert_int_equal(n, 1); /* at most max */
    assert_int_equal(rows[0].id, b);
    store_outbox_rows_free(rows, n);
    store_begin(fx->st);
    assert_int_equal(store_outbox_delete(fx->st, b), 0);
    assert_int_equal(store_commit(fx->st), 0);
    assert_int_equal(store_outbox_due(fx->st, 5000, NULL, 0, 8, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].id, a);
    assert_int_equal(rows[0].tries, 1);
    store_outbox_rows_free(rows, n);
}

static void test_task_notify(void **state)
{
    struct fixture *fx = *state;
    struct task_record rec;
    memset(&rec, 0, sizeof rec);
    rec.command = json_pack("[s]", "true");
    rec.env = json_object();
    rec.workdir = "/";
    rec.array_index = -1;
    rec.name = "hooked";
    rec.notify = "https://example.com/hook";
    store_begin(fx->st);
    assert_int_equal(store_insert_task(fx->st, &rec), 0);
    rec.name = NULL;
    rec.notify = NULL;
    assert_int_equal(store_insert_task(fx->st, &rec), 0);
    assert_int_equal(store_commit(fx->st), 0);
    json_decref(rec.command);
    json_decref(rec.env);
    json_t *brief = store_task_brief(fx->st, 1);
    assert_string_equal(json_string_value(json_object_get(brief, "name")), "hooked");
    assert_string_equal(json_string_value(json_object_get(brief, "notify")),
                        "https://example.com/hook");
    assert_string_equal(json_string_value(json_object_get(brief, "user")), store_own_user());
    json_decref(brief);
    brief = store_task_brief(fx->st, 2);
    assert_true(json_is_null(json_object_get(brief, "name")));
    assert_true(json_is_null(json_object_get(brief, "notify")));
    json_decref(brief);
    assert_null(store_task_brief(fx->st, 3));
    json_t *shown = store_task_json(fx->st, 1);
    assert_string_equal(json_string_value(json_object_get(shown, "notify")),
                        "https://example.com/hook");
    json_decref(shown);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_txn_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_retry_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_notify, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
