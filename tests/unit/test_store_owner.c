/* store/: owners (keys per owner, listings filtered by owner, experiments' owners), the audit
 * log and the per-user counts, on a real database in a temporary directory. */
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
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    fx->st = store_fixture_open(fx->dir, "/tmp/drover-store-owner.XXXXXX");
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

/* Inserts a task of owner (uid, user; user NULL: not recorded) with key (may be NULL). */
static int64_t add_task(struct store *st, uid_t uid, const char *user, const char *key)
{
    struct task_record rec;
    memset(&rec, 0, sizeof rec);
    rec.command = json_pack("[s]", "true");
    rec.env = json_object();
    rec.workdir = "/";
    rec.key = key;
    rec.uid = uid;
    rec.user = user;
    rec.array_index = -1;
    rec.spec.req.gpus = 1;
    store_begin(st);
    assert_int_equal(store_insert_task(st, &rec), 0);
    assert_int_equal(store_commit(st), 0);
    json_decref(rec.command);
    json_decref(rec.env);
    return rec.spec.id;
}

static void test_keys_per_owner(void **state)
{
    struct store *st = ((struct fixture *)*state)->st;
    int64_t a = add_task(st, 5001, "alice", "k");
    int64_t b = add_task(st, 5002, "bob", "k"); /* the same key, another owner: no conflict */
    assert_true(a != b);
    assert_int_equal(store_find_key(st, "k", 5001), a);
    assert_int_equal(store_find_key(st, "k", 5002), b);
    assert_int_equal(store_find_key(st, "k", 5003), 0);
    /* A task without a recorded owner is the daemon's user's. */
    int64_t own = add_task(st, 0, NULL, "legacy");
    assert_int_equal(store_find_key(st, "legacy", getuid()), own);
    assert_int_equal(store_find_key(st, "legacy", getuid() + 1), 0);
    /* The same key twice for one owner is refused by the store. */
    struct task_record rec;
    memset(&rec, 0, sizeof rec);
    rec.command = json_pack("[s]", "true");
    rec.env = json_object();
    rec.workdir = "/";
    rec.key = "k";
    rec.uid = 5001;
    rec.user = "alice";
    rec.array_index = -1;
    store_begin(st);
    assert_int_equal(store_insert_task(st, &rec), -1);
    store_rollback(st);
    json_decref(rec.command);
    json_decref(rec.env);
}

static size_t listed(struct store *st, const struct store_list_filter *f, bool brief)
{
    json_t *l = brief ? store_list_brief(st, f, 0) : store_list_json(st, f, 0);
    size_t n = json_array_size(brief ? json_object_get(l, "tasks") : l);
    json_decref(l);
    return n;
}

static void test_list_by_owner(void **state)
{
    struct store *st = ((struct fixture *)*state)->st;
    add_task(st, 5001, "alice", NULL);
    add_task(st, 5001, "alice", NULL);
    add_task(st, 5002, "bob", NULL);
    add_task(st, 0, NULL, NULL);
    struct store_list_filter f = {.all = true};
    assert_int_equal(listed(st, &f, false), 4);
    f.by_owner = true;
    f.uid = 5001;
    assert_int_equal(listed(st, &f, false), 2);
    assert_int_equal(listed(st, &f, true), 2);
    f.uid = getuid(); /* the unrecorded one is the daemon's user's */
    assert_int_equal(listed(st, &f, false), 1);
    f.by_owner = false;
    f.user = "bob"; /* a name only: what the tasks recorded */
    assert_int_equal(listed(st, &f, false), 1);
    f.user = "nobody-here";
    assert_int_equal(listed(st, &f, false), 0);

    /* The objects name their owner; the brief listing has a "user" column. */
    f = (struct store_list_filter){.all = true, .by_owner = true, .uid = 5002};
    json_t *l = store_list_json(st, &f, 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "user")), "bob");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(l, 0), "uid")), 5002);
    json_decref(l);
    f.uid = getuid();
    l = store_list_brief(st, &f, 0);
    json_t *cols = json_object_get(l, "columns"), *row = json_array_get(json_object_get(l, "tasks"), 0);
    size_t at = json_array_size(cols);
    for (size_t i = 0; i < json_array_size(cols); i++)
        if (strcmp(json_string_value(json_array_get(cols, i)), "user") == 0)
            at = i;
    assert_true(at < json_array_size(cols));
    assert_string_equal(json_string_value(json_array_get(row, at)), store_own_user());
    json_decref(l);
}

static void test_audit(void **state)
{
    struct store *st = ((struct fixture *)*state)->st;
    store_begin(st);
    assert_int_equal(store_audit(st, 1000, 5001, "alice", "submit", "task 1", NULL), 0);
    assert_int_equal(store_audit(st, 2000, 0, "root", "drain", NULL, NULL), 0);
    assert_int_equal(store_audit(st, 3000, 5002, "bob", "retry", "task 2", "1 tasks revived"), 0);
    assert_int_equal(store_commit(st), 0);
    /* A record in a transaction rolled back is gone with the change. */
    store_begin(st);
    assert_int_equal(store_audit(st, 4000, 5001, "alice", "cancel", "task 1", NULL), 0);
    store_rollback(st);
    json_t *all = store_audit_list(st, 0);
    assert_int_equal(json_array_size(all), 3);
    json_t *r = json_array_get(all, 2);
    assert_string_equal(json_string_value(json_object_get(r, "user")), "bob");
    assert_int_equal(json_integer_value(json_object_get(r, "uid")), 5002);
    assert_string_equal(json_string_value(json_object_get(r, "op")), "retry");
    assert_string_equal(json_string_value(json_object_get(r, "detail")), "1 tasks revived");
    assert_true(json_is_null(json_object_get(json_array_get(all, 1), "target")));
    json_decref(all);
    json_t *since = store_audit_list(st, 2000);
    assert_int_equal(json_array_size(since), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(since, 0), "op")), "drain");
    json_decref(since);
}

static void test_users_and_experiments(void **state)
{
    struct store *st = ((struct fixture *)*state)->st;
    add_task(st, 5001, "alice", NULL);
    add_task(st, 5001, "alice", NULL);
    add_task(st, 5002, "bob", NULL);
    json_t *u = store_users(st); /* every task is pending here */
    assert_int_equal(json_array_size(u), 2);
    json_t *alice = json_array_get(u, 0);
    assert_string_equal(json_string_value(json_object_get(alice, "user")), "alice");
    assert_int_equal(json_integer_value(json_object_get(alice, "waiting")), 2);
    assert_int_equal(json_integer_value(json_object_get(alice, "running")), 0);
    json_decref(u);

    json_t *spec = json_object();
    store_begin(st);
    assert_int_equal(store_exp_insert(st, "alice/sweep1", "Experiment", spec, "created", 0, 0, 0, 0), 0);
    assert_int_equal(store_exp_set_owner(st, "alice/sweep1", 5001, "alice"), 0);
    assert_int_equal(store_exp_insert(st, "plain", "Experiment", spec, "created", 0, 0, 0, 0), 0);
    assert_int_equal(store_commit(st), 0);
    json_decref(spec);
    uid_t uid = 0;
    char *user = NULL;
    assert_int_equal(store_exp_owner(st, "alice/sweep1", &uid, &user), 0);
    assert_string_equal(user, "alice");
    assert_int_equal(uid, 5001);
    free(user);
    assert_int_equal(store_exp_owner(st, "plain", &uid, &user), 0);
    assert_null(user); /* not recorded: the daemon's user */
    assert_int_equal(store_exp_owner(st, "none", &uid, &user), -1);
    json_t *e = store_exp_get(st, "plain");
    assert_string_equal(json_string_value(json_object_get(e, "user")), store_own_user());
    json_decref(e);
    json_t *l = store_exp_list(st);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "user")), "alice");
    json_decref(l);
}

/* The HTTP API's pages (store_list_page): a filter that matches few tasks is read through the
 * index, one that matches more than STORE_LIST_WALK_MIN (2000) by walking the tasks in id order;
 * either way a page is the same ids in id order, and the total is the whole match. */
static void test_list_pages(void **state)
{
    struct store *st = ((struct fixture *)*state)->st;
    store_begin(st);
    for (int i = 0; i < 2600; i++) {
        struct task_record rec;
        memset(&rec, 0, sizeof rec);
        rec.command = json_pack("[s]", "true");
        rec.env = json_object();
        rec.workdir = "/";
        rec.uid = i % 5 == 0 ? 5002 : 5001; /* bob owns every fifth: 520, a small match */
        rec.user = i % 5 == 0 ? "bob" : "alice";
        rec.array_index = -1;
        assert_int_equal(store_insert_task(st, &rec), 0);
        json_decref(rec.command);
        json_decref(rec.env);
    }
    assert_int_equal(store_commit(st), 0);
    struct {
        struct store_list_filter f;
        int64_t total, first; /* the first id of the page at offset 100 */
    } cases[] = {
        {{.all = true, .limit = 50, .offset = 100}, 2600, 101},                  /* walked */
        {{.all = true, .by_owner = true, .uid = 5001, .limit = 50, .offset = 100}, 2080, 127},
        {{.all = true, .by_owner = true, .uid = 5002, .limit = 50, .offset = 100}, 520, 501},
        {{.all = false, .state = "pending", .limit = 50, .offset = 100}, 2600, 101}, /* as inserted */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t total = -2;
        json_t *page = store_list_page(st, &cases[c].f, 0, &total);
        assert_int_equal(total, cases[c].total);
        assert_int_equal(json_array_size(page), 50);
        int64_t prev = 0;
        for (size_t k = 0; k < json_array_size(page); k++) {
            int64_t id = json_integer_value(json_object_get(json_array_get(page, k), "id"));
            assert_true(id > prev);
            prev = id;
        }
        assert_int_equal(json_integer_value(json_object_get(json_array_get(page, 0), "id")),
                         cases[c].first);
        json_decref(page);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keys_per_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_by_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_users_and_experiments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
