/* A real store in a temporary directory, for the store unit tests (include after cmocka.h). */
#ifndef DROVER_TEST_STORE_FIXTURE_H
#define DROVER_TEST_STORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "store/store.h"

/* Makes dir (a mkdtemp template of at most 63 bytes: "/tmp/drover-NAME.XXXXXX", filled in)
 * and opens a fresh, migrated store in it. */
static inline struct store *store_fixture_open(char dir[64], const char *template)
{
    char path[128], *err = NULL;
    snprintf(dir, 64, "%s", template);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/drover.db", dir);
    struct store *st = store_open(path, &err);
    assert_non_null(st);
    return st;
}

/* Closes st and removes dir. */
static inline void store_fixture_close(struct store *st, const char *dir)
{
    char cmd[128];
    store_close(st);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A cmocka fixture of one store: `static int setup(void **)` and `teardown` for a test file
 * whose state is a struct store_fixture. */
struct store_fixture {
    char dir[64];
    struct store *st;
};
#define STORE_FIXTURE_FUNCS(template)                                                          \
    static int setup(void **state)                                                             \
    {                                                                                          \
        struct store_fixture *fx = calloc(1, sizeof *fx);                                      \
        fx->st = store_fixture_open(fx->dir, template);                                        \
        *state = fx;                                                                           \
        return 0;                                                                              \
    }                                                                                          \
    static int teardown(void **state)                                                          \
    {                                                                                          \
        struct store_fixture *fx = *state;                                                     \
        store_fixture_close(fx->st, fx->dir);                                                  \
        free(fx);                                                                              \
        return 0;                                                                              \
    }

#endif
