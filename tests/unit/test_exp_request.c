/* exp/request.c: the checks of an exp_run request that the CLI and the daemon both run. Each
 * test starts from a valid request and breaks one thing; the reason must say what and which
 * task. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "exp/request.h"
#include "util/limits.h"
#include "util/xalloc.h"

static json_t *stage(const char *name, const char *needs)
{
    json_t *t = json_pack("{s:s,s:i,s:{},s:[s],s:{},s:[]}", "name", name, "trial", -1, "params",
                          "command", "true", "env", "needs");
    char *list = xstrdup(needs), *save = NULL;
    for (char *n = strtok_r(list, " ", &save); n; n = strtok_r(NULL, " ", &save))
        json_array_append_new(json_object_get(t, "needs"), json_string(n));
    free(list);
    return t;
}

static json_t *trial(int i)
{
    char name[32];
    snprintf(name, sizeof name, "e-t%d", i);
    return json_pack("{s:s,s:i,s:{s:i},s:[s,s],s:{s:s},s:i,s:i,s:[i]}", "name", name, "trial", i,
                     "params", "hyperparameters.lr", i, "command", "train", "--fast", "env",
                     "OMP_NUM_THREADS", "4", "gpus", 1, "retries", 2, "backoff", 30000);
}

static json_t *request(void)
{
    return json_pack("{s:i,s:s,s:s,s:s,s:{s:[s]},s:[o,o],s:i,s:i,s:i,s:s,s:{s:s,s:s}}", "v", 1,
                     "op", "exp_run", "name", "e", "kind", "Experiment", "spec", "command",
                     "train", "tasks", trial(0), trial(1), "parallel", 2, "space", 2, "seed", 7,
                     "workdir", "/work", "env", "PATH", "/usr/bin", "weird name!", "ok");
}

static json_t *pipeline(json_t *tasks)
{
    json_t *req = request();
    json_object_set_new(req, "kind", json_string("Pipeline"));
    json_object_set_new(req, "spec", json_pack("{s:[{s:s,s:[s]}]}", "stages", "name", "a",
                                               "command", "true"));
    json_object_set_new(req, "tasks", tasks);
    return req;
}

/* req (which it takes) is refused with exactly want. */
static void refused(json_t *req, const char *want)
{
    char *why = NULL;
    assert_int_equal(exp_request_check(req, NULL, &why), -1);
    assert_non_null(why);
    assert_string_equal(why, want);
    free(why);
    json_decref(req);
}

static void test_valid(void **state)
{
    json_t *req = request();
    struct exp_graph g;
    char *why = (char *)"unset";
    assert_int_equal(exp_request_check(req, &g, &why), 0);
    assert_null(why);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.order[0], 0);
    assert_int_equal(g.order[1], 1);
    assert_int_equal(g.first[2], 0); /* no needs */
    exp_graph_free(&g);
    exp_graph_free(&g); /* emptied: a second free is harmless */
    json_decref(req);
}

static void test_names(void **state)
{
    assert_true(exp_name_valid("resnet50-cifar10_v1.2"));
    assert_true(exp_name_valid("..."));
    assert_false(exp_name_valid(""));
    assert_false(exp_name_valid("."));
    assert_false(exp_name_valid(".."));
    assert_false(exp_name_valid("../../../x"));
    assert_false(exp_name_valid("a/b"));
    assert_false(exp_name_valid("my exp"));
    char long_name[EXP_MAX_NAME + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[EXP_MAX_NAME] = '\0';
    assert_true(exp_name_valid(long_name));
    long_name[EXP_MAX_NAME] = 'a';
    long_name[EXP_MAX_NAME + 1] = '\0';
    assert_false(exp_name_valid(long_name));
    assert_true(exp_env_name_valid("_OMP_1"));
    assert_false(exp_env_name_valid("1A"));
    assert_false(exp_env_name_valid("A=B"));
    assert_false(exp_env_name_valid(""));

    static const char name_rule[] = "the experiment name must be letters, digits, '.', '_' and "
                                    "'-' (at most 64; not . or ..)";
    json_t *req = request();
    json_object_set_new(req, "name", json_string("../../../x"));
    refused(req, name_rule);
    req = request();
    json_object_set_new(req, "name", json_string(".."));
    refused(req, name_rule);
    req = request();
    json_object_del(req, "name");
    refused(req, name_rule);
    req = request();
    json_object_set_new(json_array_get(json_object_get(req, "tasks"), 1), "name",
                        json_string("../t"));
    refused(req, "task 1 of the request: the task name must be letters, digits, '.', '_' and '-' "
                 "(at most 80)");
}

static void test_fields(void **state)
{
    json_t *req = request();
    json_object_set_new(req, "kind", json_string("Sweep"));
    refused(req, "kind must be Experiment or Pipeline");
    req = request();
    json_object_set_new(req, "workdir", json_string("relative"));
    refused(req, "exp_run needs an absolute workdir");
    req = request();
    json_object_set_new(json_object_get(req, "env"), "A=B", json_string("c"));
    refused(req, "exp_run's env must map variable names (not empty, without '=') to strings");
    req = request();
    json_object_set_new(json_object_get(req, "env"), "A", json_integer(1));
    refused(req, "exp_run's env must map variable names (not empty, without '=') to strings");
    req = request();
    json_object_set_new(req, "parallel", json_integer(-1));
    refused(req, "'parallel' must be a whole number >= 0");
    req = request();
    json_object_set_new(req, "spec", json_pack("{s:[s],s:i}", "command", "x", "frobnicate", 1));
    refused(req, "e: unknown key 'frobnicate' in spec");
    req = request();
    json_object_set_new(req, "spec", json_pack("{s:[s],s:{s:{s:[i]}}}", "command", "x", "sweep",
                                               "parameters", "nothing.here", 1));
    refused(req, "e: spec.sweep.parameters.nothing.here: sweep parameter 'nothing.here' is not in "
                 "the spec");
    req = request();
    json_object_set_new(req, "spec", json_pack("{s:[{s:s,s:[s]}]}", "stages", "name", "a",
                                               "command", "x"));
    refused(req, "e: spec.stages: stages are only allowed in kind: Pipeline");

    json_t *task;
#define TASK_REFUSED(edit, want)                                                                  \
    do {                                                                                          \
        req = request();                                                                          \
        task = json_array_get(json_object_get(req, "tasks"), 1);                                  \
        edit;                                                                                     \
        refused(req, want);                                                                       \
    } while (0)
    TASK_REFUSED(json_object_set_new(task, "env", json_pack("{s:i}", "X", 1)),
                 "trial 1 (e-t1): 'env' must map variable names (not empty, without '=') to "
                 "strings");
    TASK_REFUSED(json_object_set_new(task, "env", json_pack("{s:s}", "A=B", "1")),
                 "trial 1 (e-t1): 'env' must map variable names (not empty, without '=') to "
                 "strings");
    TASK_REFUSED(json_object_set_new(task, "env", json_pack("{s:s}", "my-var", "1")),
                 "trial 1 (e-t1): env must map variable names (letters, digits and '_') to "
                 "strings");
    TASK_REFUSED(json_object_set_new(task, "command", json_pack("[]")),
                 "trial 1 (e-t1): 'command' must be an array of strings, the first (the program)"
                 " not empty");
    TASK_REFUSED(json_object_set_new(task, "command", json_pack("[s,i]", "x", 1)),
                 "trial 1 (e-t1): 'command' must be an array of strings, the first (the program)"
                 " not empty");
    TASK_REFUSED(json_object_set_new(task, "command", json_pack("[s]", "")),
                 "trial 1 (e-t1): 'command' must be an array of strings, the first (the program)"
                 " not empty");
    TASK_REFUSED(json_object_set_new(task, "gpus", json_integer(-1)),
                 "trial 1 (e-t1): 'gpus' (--gpus) must be a whole number from 0 to 64");
    TASK_REFUSED(json_object_set_new(task, "timeout_ms", json_real(1.5)),
                 "trial 1 (e-t1): 'timeout_ms' (--timeout) must be a whole number of"
                 " milliseconds from 1 to 1000000000000000");
    TASK_REFUSED(json_object_set_new(task, "params", json_string("lr=1")),
                 "trial 1 (e-t1): 'params' must be a mapping");
    TASK_REFUSED(json_object_set_new(task, "backoff", json_pack("[i,i,i,i,i,i,i,i,i]", 1, 2, 3,
                                                                4, 5, 6, 7, 8, 9)),
                 "trial 1 (e-t1): 'backoff' (--backoff) must be 1 to 8 whole milliseconds, each"
                 " from 0 to 1000000000000");
    TASK_REFUSED(json_object_set_new(task, "after", json_pack("[i]", 1)),
                 "trial 1 (e-t1): 'after' belongs to a submission, not to one task of an"
                 " experiment");
    TASK_REFUSED(json_object_set_new(task, "gpu_type", json_string("")),
                 "trial 1 (e-t1): 'gpu_type' (--gpu-type) must be a string of 1 to 4096 bytes");
    TASK_REFUSED(json_object_set_new(task, "trial", json_integer(0)), "trial 0 appears twice");
    TASK_REFUSED(json_object_set_new(task, "trial", json_integer(-2)),
                 "task e-t1: 'trial' must be a whole number from -1 to 2147483647");
    TASK_REFUSED(json_object_set_new(task, "needs", json_pack("[s]", "e-t0")),
                 "trial 1 (e-t1): needs are only for the stages of a Pipeline");
    TASK_REFUSED(json_object_set_new(task, "name", json_string("e-t0")),
                 "two tasks are named e-t0");
#undef TASK_REFUSED

    req = request();
    json_object_set_new(req, "tasks", json_array());
    refused(req, "an experiment has 1 to 100000 tasks (LIMIT_TEMPLATE_TASKS)");
    req = request();
    json_t *tasks = json_array();
    for (int i = 0; i <= LIMIT_TEMPLATE_TASKS; i++)
        json_array_append_new(tasks, json_pack("{s:s,s:[s]}", "name", "x", "command", "x"));
    json_object_set_new(req, "tasks", tasks);
    refused(req, "an experiment has 1 to 100000 tasks (LIMIT_TEMPLATE_TASKS)");
}

/* Each task's command with the submitter's environment and its own, against the exec limits. */
static void test_exec_limits(void **state)
{
    char *big = xmalloc(200001);
    memset(big, 'x', 200000);
    big[200000] = '\0';
    json_t *req = request();
    json_array_append_new(json_object_get(json_array_get(json_object_get(req, "tasks"), 1),
                                          "command"),
                          json_string(big));
    char *why = NULL;
    assert_int_equal(exp_request_check(req, NULL, &why), -1);
    assert_memory_equal(why, "trial 1 (e-t1): argument ", 25);
    assert_non_null(strstr(why, " of the command is 200000 bytes; LIMIT_EXEC_STRING is 131071"));
    free(why);
    json_decref(req);

    /* 100 KB variables: 6 from the submitter, 5 of the task's own are too many together */
    big[100000] = '\0';
    req = request();
    for (int i = 0; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof name, "S%d", i);
        json_object_set_new(json_object_get(req, "env"), name, json_string(big));
    }
    assert_int_equal(exp_request_check(req, NULL, &why), 0);
    json_t *env = json_object_get(json_array_get(json_object_get(req, "tasks"), 1), "env");
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "T%d", i);
        json_object_set_new(env, name, json_string(big));
    }
    assert_int_equal(exp_request_check(req, NULL, &why), -1);
    assert_memory_equal(why, "trial 1 (e-t1): the command and its environment take ", 53);
    assert_non_null(strstr(why, "LIMIT_EXEC_TOTAL"));
    free(why);
    /* a task's variable replaces the submitter's of the same name: counted once */
    json_object_clear(env);
    for (int i = 0; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof name, "S%d", i);
        json_object_set_new(env, name, json_string(big));
    }
    assert_int_equal(exp_request_check(req, NULL, &why), 0);
    json_decref(req);
    free(big);
}

static void test_needs(void **state)
{
    struct exp_graph g;
    char *why = NULL;
    /* each task after those it needs, otherwise in request order */
    json_t *req = pipeline(json_pack("[o,o,o,o]", stage("last", "first middle"),
                                     stage("first", ""), stage("middle", "first"),
                                     stage("free", "")));
    assert_int_equal(exp_request_check(req, &g, &why), 0);
    assert_int_equal(g.order[0], 1);
    assert_int_equal(g.order[1], 2);
    assert_int_equal(g.order[2], 0);
    assert_int_equal(g.order[3], 3);
    assert_int_equal(g.first[0], 0);
    assert_int_equal(g.first[1], 2);
    assert_int_equal(g.need[0], 1);
    assert_int_equal(g.need[1], 2);
    assert_int_equal(g.first[3], 3);
    assert_int_equal(g.need[2], 1);
    assert_int_equal(g.first[4], 3);
    exp_graph_free(&g);
    json_decref(req);

    refused(pipeline(json_pack("[o,o]", stage("a", ""), stage("b", "a a a a a a a a"))),
            "task b needs a more than once");
    refused(pipeline(json_pack("[o,o]", stage("a", ""), stage("b", "a c"))),
            "task b needs c, which is not a task of the request");
    refused(pipeline(json_pack("[o,o,o]", stage("a", "c"), stage("b", "a"), stage("c", "b"))),
            "cycle in needs: a -> c -> b -> a");
    refused(pipeline(json_pack("[o,o,o]", stage("x", ""), stage("y", "z"), stage("z", "z"))),
            "cycle in needs: z -> z");
    refused(pipeline(json_pack("[o,o]", stage("a", ""), stage("a", ""))),
            "two tasks are named a");
    json_t *bad = stage("b", "");
    json_array_append_new(json_object_get(bad, "needs"), json_integer(0));
    refused(pipeline(json_pack("[o,o]", stage("a", ""), bad)),
            "task b: 'needs' must be an array of task names");
}

/* A raw request of the largest size is checked in time linear in it: 100,000 tasks each needing
 * the next (the reverse of creation order), and each needing one in a cycle at the end. */
static void test_large(void **state)
{
    json_t *tasks = json_array();
    char name[32], next[32];
    for (int i = 0; i < LIMIT_TEMPLATE_TASKS; i++) {
        snprintf(name, sizeof name, "s%d", i);
        snprintf(next, sizeof next, "s%d", i + 1);
        json_array_append_new(tasks, stage(name, i + 1 < LIMIT_TEMPLATE_TASKS ? next : ""));
    }
    json_t *req = pipeline(tasks);
    struct exp_graph g;
    char *why = NULL;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    assert_int_equal(exp_request_check(req, &g, &why), 0);
    assert_int_equal(g.order[0], LIMIT_TEMPLATE_TASKS - 1);
    assert_int_equal(g.order[LIMIT_TEMPLATE_TASKS - 1], 0);
    exp_graph_free(&g);
    json_array_append_new(json_object_get(json_array_get(tasks, LIMIT_TEMPLATE_TASKS - 1),
                                          "needs"),
                          json_string("s99998"));
    assert_int_equal(exp_request_check(req, &g, &why), -1);
    assert_string_equal(why, "cycle in needs: s99998 -> s99999 -> s99998");
    free(why);
    clock_gettime(CLOCK_MONOTONIC, &end);
    assert_true(end.tv_sec - start.tv_sec < 10); /* well under a second */
    json_decref(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),       cmocka_unit_test(test_names),
        cmocka_unit_test(test_fields),      cmocka_unit_test(test_exec_limits),
        cmocka_unit_test(test_needs),       cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
