/* One task request for every door: the field table (util/request.def), its check through both
 * doors (request_check_submit, request_check_task), the daemon's decoder (daemon/request.c) and
 * the default-retries / default-backoff settings it reads. Each test breaks one thing of a valid
 * request; a refusal must be one line naming the field, the same through both doors. */
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

#include "cli/cli.h"
#include "daemon/config.h"
#include "daemon/request.h"
#include "util/limits.h"
#include "util/request.h"
#include "util/xalloc.h"

/* A valid request for door: a command, and a workdir for a submit. */
static json_t *base(unsigned door)
{
    json_t *req = json_pack("{s:[s,s]}", "command", "echo", "hi");
    if (door == REQUEST_SUBMIT)
        json_object_set_new(req, "workdir", json_string("/"));
    return req;
}

/* Checks req (which it takes) through door: NULL if accepted, else the reason (malloc'd). */
static char *check(unsigned door, json_t *req)
{
    char *why = NULL;
    int rc = door == REQUEST_SUBMIT ? request_check_submit(req, &why)
                                    : request_check_task(req, NULL, &why);
    json_decref(req);
    assert_int_equal(rc, why ? -1 : 0);
    return why;
}

/* base(door) with key set to v (taken), checked. */
static char *check_with(unsigned door, const char *key, json_t *v)
{
    json_t *req = base(door);
    json_object_set_new(req, key, v);
    return check(door, req);
}

/* key = v is refused by both doors with the same line, which names the field; v is taken. */
static void refused_alike(const char *key, json_t *v)
{
    char *submit = check_with(REQUEST_SUBMIT, key, json_deep_copy(v));
    char *task = check_with(REQUEST_TASK, key, v);
    if (submit == NULL || task == NULL)
        fail_msg("%s accepted by the %s door", key, submit ? "task" : "submit");
    assert_string_equal(submit, task);
    assert_non_null(strstr(submit, key));
    assert_null(strchr(submit, '\n'));
    free(submit);
    free(task);
}

static void accepted_alike(const char *key, json_t *v)
{
    char *submit = check_with(REQUEST_SUBMIT, key, json_deep_copy(v));
    char *task = check_with(REQUEST_TASK, key, v);
    if (submit != NULL || task != NULL)
        fail_msg("%s refused: %s", key, submit ? submit : task);
}

static void test_table(void **state)
{
    size_t n = 0, options = 0;
    for (const struct request_field *f = request_fields; f->key; f++, n++) {
        assert_non_null(f->help);
        assert_true(f->min <= f->max);
        assert_true(f->doors & (REQUEST_SUBMIT | REQUEST_TASK));
        assert_ptr_equal(request_field(f->key), f);
        if (f->option == NULL) {
            assert_int_equal(f->type, REQUEST_COMMAND); /* the one field without a flag */
            continue;
        }
        options++;
        assert_true(f->doors & REQUEST_SUBMIT); /* every flag is drover submit's */
        for (const struct request_field *g = request_fields; g < f; g++) {
            assert_string_not_equal(g->key, f->key);
            if (g->option)
                assert_string_not_equal(g->option, f->option);
        }
    }
    assert_true(options <= CMD_MAX_OPTS);
    assert_null(request_field("trial")); /* an experiment's own, exp/request.c */
    /* drover submit's options are the table's, in its order. */
    extern const struct cmd_entry cmd_submit;
    size_t i = 0;
    for (const struct request_field *f = request_fields; f->key; f++)
        if (f->option)
            assert_string_equal(cmd_submit.opts[i++].name, f->option);
    assert_null(cmd_submit.opts[i].name);
    /* The fields experiments' tasks take (exp/task-json.c emits these keys). */
    static const char *const task_keys[] = {"gpus", "gpu_mem", "gpu_type", "cpus", "mem",
                                            "timeout_ms", "stall_ms", "priority", "retries",
                                            "backoff", "env", "command", "name", "profile",
                                            "exclusive"};
    for (i = 0; i < sizeof task_keys / sizeof task_keys[0]; i++)
        assert_true(request_field(task_keys[i])->doors & REQUEST_TASK);
}

/* Both edges of every numeric field, through both doors, and the same words for a value out of
 * range whichever door it came through. */
static void test_number_ranges(void **state)
{
    for (const struct request_field *f = request_fields; f->key; f++) {
        if (f->type != REQUEST_INT && f->type != REQUEST_SIZE && f->type != REQUEST_DURATION)
            continue;
        accepted_alike(f->key, json_integer(f->min));
        accepted_alike(f->key, json_integer(f->max));
        accepted_alike(f->key, json_null());
        if (f->min > INT64_MIN)
            refused_alike(f->key, json_integer(f->min - 1));
        if (f->max < INT64_MAX)
            refused_alike(f->key, json_integer(f->max + 1));
        refused_alike(f->key, json_real(1.5));
        refused_alike(f->key, json_string("2"));
        char *why = check_with(REQUEST_SUBMIT, f->key, json_integer(f->min - 1));
        if (f->min > INT64_MIN) {
            char want[200];
            snprintf(want, sizeof want, "'%s' (--%s) must be a whole number%s from %lld to %lld",
                     f->key, f->option,
                     f->type == REQUEST_SIZE       ? " of bytes"
                     : f->type == REQUEST_DURATION ? " of milliseconds"
                                                   : "",
                     f->min, f->max);
            assert_string_equal(why, want);
        }
        free(why);
    }
    /* The bounds themselves, as documented (docs/CLI.md). */
    assert_int_equal(request_field("gpus")->max, 64);
    assert_int_equal(request_field("retries")->max, 1000);
    assert_int_equal(request_field("priority")->min, -1000000);
}

/* cpus: absent or null is the default (1 for a CPU-only task, none for a GPU task); given, it
 * is at least 1, through every door. */
static void test_cpus_rule(void **state)
{
    assert_null(check(REQUEST_SUBMIT, base(REQUEST_SUBMIT)));
    assert_null(check(REQUEST_TASK, base(REQUEST_TASK)));
    accepted_alike("cpus", json_null());
    accepted_alike("cpus", json_integer(1));
    refused_alike("cpus", json_integer(0));
    char *why = check_with(REQUEST_TASK, "cpus", json_integer(0));
    assert_string_equal(why, "'cpus' (--cpus) must be a whole number from 1 to 1000000");
    free(why);
}

static void test_backoff(void **state)
{
    static const char want[] = "'backoff' (--backoff) must be 1 to 8 whole milliseconds, each "
                               "from 0 to 1000000000000";
    accepted_alike("backoff", json_pack("[i]", 0));
    accepted_alike("backoff", json_pack("[I,i,i,i,i,i,i,i]", (json_int_t)1000000000000LL, 1, 2,
                                        3, 4, 5, 6, 7));
    json_t *bad[] = {
        json_pack("[]"), json_pack("[i,i,i,i,i,i,i,i,i]", 1, 2, 3, 4, 5, 6, 7, 8, 9),
        json_pack("[i]", -1), json_pack("[I]", (json_int_t)1000000000001LL),
        json_pack("[f]", 1.5), json_pack("[s]", "5"), json_integer(5), json_string("5,30"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *why = check_with(REQUEST_TASK, "backoff", json_deep_copy(bad[i]));
        assert_string_equal(why, want);
        free(why);
        refused_alike("backoff", bad[i]);
    }
}

static void test_env(void **state)
{
    static const char want[] =
        "'env' must map variable names (not empty, without '=') to strings";
    accepted_alike("env", json_pack("{s:s,s:s}", "A", "", "B_2", "x=y"));
    json_t *bad[] = {json_pack("{s:s}", "A=B", "x"), json_pack("{s:s}", "", "x"),
                     json_pack("{s:i}", "A", 1), json_pack("[s]", "A=x"), json_string("A=x")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *why = check_with(REQUEST_SUBMIT, "env", json_deep_copy(bad[i]));
        assert_string_equal(why, want);
        free(why);
        refused_alike("env", bad[i]);
    }
}

static void test_other_fields(void **state)
{
    char big[REQUEST_MAX_STRING + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    accepted_alike("name", json_string(big + 1)); /* REQUEST_MAX_STRING bytes */
    refused_alike("name", json_string(big));
    refused_alike("gpu_type", json_string(""));
    accepted_alike("gpu_type", json_string("a100"));
    refused_alike("exclusive", json_integer(1));
    refused_alike("command", json_pack("[]"));
    refused_alike("command", json_pack("[s]", ""));
    refused_alike("command", json_pack("[s,i]", "a", 1));
    refused_alike("command", json_string("true"));
    json_t *req = base(REQUEST_TASK);
    json_object_del(req, "command");
    char *why = check(REQUEST_TASK, req);
    assert_string_equal(why, "'command' must be an array of strings, the first (the program) "
                             "not empty");
    free(why);
    /* exclusive and a claim contradict each other, in both doors. */
    for (unsigned door = REQUEST_SUBMIT; door <= REQUEST_TASK; door++) {
        req = base(door);
        json_object_set_new(req, "exclusive", json_true());
        json_object_set_new(req, "gpu_mem", json_integer(5));
        why = check(door, req);
        assert_string_equal(why, "--exclusive and --gpu-mem contradict each other");
        free(why);
    }
}

/* --preemptible[=GRACE] and --preempt-signal: both doors, and the signal only with the flag. */
static void test_preemption_fields(void **state)
{
    accepted_alike("preemptible", json_true());
    accepted_alike("preemptible", json_false());
    accepted_alike("preemptible", json_integer(90000));
    refused_alike("preemptible", json_integer(0));
    refused_alike("preemptible", json_string("90s")); /* text is the CLI's and HTTP's to convert */
    for (unsigned door = REQUEST_SUBMIT; door <= REQUEST_TASK; door++) {
        json_t *req = base(door);
        json_object_set_new(req, "preemptible", json_true());
        json_object_set_new(req, "preempt_signal", json_string("SIGUSR1"));
        assert_null(check(door, req));
        req = base(door);
        json_object_set_new(req, "preemptible", json_true());
        json_object_set_new(req, "preempt_signal", json_integer(9));
        char *why = check(door, req);
        assert_non_null(strstr(why, "preempt_signal"));
        free(why);
        req = base(door);
        json_object_set_new(req, "preempt_signal", json_string("TERM"));
        why = check(door, req);
        assert_string_equal(why, "'preempt_signal' (--preempt-signal) is for a preemptible"
                                 " task: give --preemptible too");
        free(why);
        req = base(door);
        json_object_set_new(req, "preemptible", json_false());
        json_object_set_new(req, "preempt_signal", json_string("TERM"));
        why = check(door, req);
        assert_non_null(why); /* a signal for a task that is not preemptible */
        free(why);
    }
    /* The text forms, as drover submit and the HTTP API take them. */
    const struct request_field *f = request_field("preemptible");
    const char *why;
    json_t *v = request_value_from_text(f, "", &why);
    assert_true(json_is_true(v));
    json_decref(v);
    v = request_value_from_text(f, "2m", &why);
    assert_int_equal(json_integer_value(v), 120000);
    json_decref(v);
    assert_null(request_value_from_text(f, "soon", &why));
    f = request_field("preempt_signal");
    v = request_value_from_text(f, "usr2", &why);
    assert_int_equal(json_integer_value(v), SIGUSR2);
    json_decref(v);
    assert_null(request_value_from_text(f, "STOP", &why));
}

/* What belongs to a submission is refused by name in one task of an experiment. */
static void test_submission_fields(void **state)
{
    static const char *const keys[] = {"after", "after_any", "array", "key", "hold", "workdir"};
    json_t *values[] = {json_pack("[i]", 1), json_pack("[i]", 1),
                        json_pack("{s:[i]}", "index", 0), json_string("k"), json_true(),
                        json_string("/")};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        assert_null(check_with(REQUEST_SUBMIT, keys[i], json_deep_copy(values[i])));
        char *why = check_with(REQUEST_TASK, keys[i], values[i]);
        char want[128];
        snprintf(want, sizeof want,
                 "'%s' belongs to a submission, not to one task of an experiment", keys[i]);
        assert_string_equal(why, want);
        free(why);
        assert_false(request_field(keys[i])->doors & REQUEST_TASK);
    }
    assert_null(check_with(REQUEST_TASK, "after", json_null())); /* null is absent */
    /* A submit must say where it runs; a task runs in its experiment's workdir. */
    json_t *req = base(REQUEST_SUBMIT);
    json_object_del(req, "workdir");
    char *why = check(REQUEST_SUBMIT, req);
    assert_string_equal(why, "'workdir' must be an absolute path");
    free(why);
}

/* The exec limits count a task's own env on top of the experiment's. */
static void test_task_exec_limits(void **state)
{
    char *big = xcalloc(120001, 1);
    memset(big, 'x', 120000);
    json_t *base_env = json_object(), *task = base(REQUEST_TASK), *env = json_object();
    for (int i = 0; i < 5; i++)
        json_object_set_new(base_env, (char[]){'B', (char)('0' + i), '\0'}, json_string(big));
    char *why = NULL;
    assert_int_equal(request_check_task(task, base_env, &why), 0);
    for (int i = 0; i < 4; i++)
        json_object_set_new(env, (char[]){'T', (char)('0' + i), '\0'}, json_string(big));
    json_object_set_new(task, "env", env);
    assert_int_equal(request_check_task(task, base_env, &why), -1);
    assert_non_null(strstr(why, "LIMIT_EXEC_TOTAL"));
    free(why);
    assert_int_equal(request_check_task(task, NULL, &why), 0); /* its own env alone fits */
    json_decref(task);
    json_decref(base_env);
    free(big);
}

/* ---- the settings ---------------------------------------------------------------------------- */

static int load(struct daemon_config *cfg, const char *key, const char *value, char **err)
{
    char *argv[] = {"daemon", (char *)key, (char *)value, NULL};
    *err = NULL;
    return config_load(cfg, NULL, key ? 3 : 1, argv, err);
}

static void test_settings(void **state)
{
    struct daemon_config cfg;
    char *err;
    assert_int_equal(load(&cfg, NULL, NULL, &err), 0);
    assert_int_equal(cfg.default_retries, 0);
    static const int64_t core_default[] = CORE_DEFAULT_BACKOFF_MS;
    assert_int_equal(cfg.ndefault_backoff, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cfg.default_backoff[i], core_default[i]);
    config_free(&cfg);

    assert_int_equal(load(&cfg, "--default-retries", "1000", &err), 0);
    assert_int_equal(cfg.default_retries, 1000);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--default-backoff", "0.5,2", &err), 0);
    assert_int_equal(cfg.ndefault_backoff, 2);
    assert_int_equal(cfg.default_backoff[0], 500);
    assert_int_equal(cfg.default_backoff[1], 2000);
    config_free(&cfg);

    /* The policy and las's knobs (NULL knobs: las's own defaults). */
    assert_int_equal(load(&cfg, NULL, NULL, &err), 0);
    assert_false(cfg.las);
    assert_int_equal(cfg.las_nthresholds, -1);
    assert_int_equal(cfg.preempt_overruns, 2);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--policy", "las", &err), 0);
    assert_true(cfg.las);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--las-thresholds", "0.5,5,50", &err), 0);
    assert_int_equal(cfg.las_nthresholds, 3);
    assert_true(cfg.las_threshold[0] == 1800 && cfg.las_threshold[2] == 180000);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--las-min-run", "0", &err), 0);
    assert_int_equal(cfg.las_min_run_ms, 0);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--las-starve", "2.5", &err), 0);
    assert_true(cfg.las_starve_k == 2.5);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--las-starve-total", "off", &err), 0);
    assert_int_equal(cfg.las_starve_total_ms, 0);
    assert_int_equal(cfg.las_protect_wait_ms, -1);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--las-mrl", "0", &err), 0);
    assert_true(cfg.las_mrl_factor == 0 && cfg.las_starve_k == -1);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--las-protect-wait", "6h", &err), 0);
    assert_int_equal(cfg.las_protect_wait_ms, 6 * 3600 * 1000LL);
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--preempt-overruns", "none", &err), 0);
    assert_int_equal(cfg.preempt_overruns, 0);
    config_free(&cfg);

    /* amqp: the URL's parts, %XX escapes, defaults. */
    assert_int_equal(load(&cfg, "--amqp", "amqp://bot:p%40ss@mq.example.com:5673/ml%2Fprod", &err),
                     0);
    assert_string_equal(cfg.amqp_host, "mq.example.com");
    assert_int_equal(cfg.amqp_port, 5673);
    assert_string_equal(cfg.amqp_login, "bot");
    assert_string_equal(cfg.amqp_password, "p@ss");
    assert_string_equal(cfg.amqp_vhost, "ml/prod");
    assert_string_equal(cfg.amqp_queue, "drover.submit");
    assert_string_equal(cfg.amqp_exchange, "drover.events");
    config_free(&cfg);
    assert_int_equal(load(&cfg, "--amqp", "amqp://127.0.0.1", &err), 0);
    assert_int_equal(cfg.amqp_port, 5672);
    assert_string_equal(cfg.amqp_vhost, "/");
    assert_string_equal(cfg.amqp_login, "guest");
    config_free(&cfg);
    static const char *const bad_amqp[] = {"http://h/", "amqp://", "amqp://h:0/", "amqp://h:x/",
                                           "amqp://u:%zz@h/", "amqps://h/"};
    for (size_t i = 0; i < sizeof bad_amqp / sizeof bad_amqp[0]; i++) {
        assert_int_equal(load(&cfg, "--amqp", bad_amqp[i], &err), -1);
        assert_non_null(strstr(err, "amqp"));
        free(err);
        config_free(&cfg);
    }
    assert_int_equal(load(&cfg, "--amqp-credentials", "/nonexistent", &err), -1);
    assert_non_null(strstr(err, "amqp-credentials is set but amqp is not"));
    free(err);
    config_free(&cfg);

    /* Checked once all are read (from the file or a flag): the line names the setting. */
    static const char *const bad_las[][2] = {
        {"--policy", "sjf"},       {"--las-thresholds", "10,1"}, {"--las-thresholds", "1,"},
        {"--las-thresholds", "0"}, {"--las-thresholds", "1,2,3,4,5,6,7,8"},
        {"--las-min-run", "soon"}, {"--las-starve", "-1"}, {"--las-starve-total", "never"},
        {"--las-protect-wait", "-3h"}, {"--las-mrl", "x"},
    };
    for (size_t i = 0; i < sizeof bad_las / sizeof bad_las[0]; i++) {
        assert_int_equal(load(&cfg, bad_las[i][0], bad_las[i][1], &err), -1);
        assert_non_null(strstr(err, bad_las[i][0] + 2));
        assert_non_null(strstr(err, bad_las[i][1]));
        free(err);
        config_free(&cfg);
    }
    static const char *const bad[][2] = {
        {"--preempt-overruns", "0"},
        {"--default-retries", "1001"}, {"--default-retries", "-1"},
        {"--default-retries", "x"},    {"--default-backoff", "5,,6"},
        {"--default-backoff", ""},     {"--default-backoff", "1,2,3,4,5,6,7,8,9"},
        {"--default-backoff", "-1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(&cfg, bad[i][0], bad[i][1], &err), -1);
        assert_non_null(strstr(err, bad[i][0]));
        free(err);
        config_free(&cfg);
    }
}

/* ---- the decoder -------------------------------------------------------------------------- */

/* A daemon with what the decoder reads: two 16G GPUs and one 24G, its core, a fresh store, the
 * default settings. */
struct fixture {
    struct daemon d;
    char dir[64];
};

static int setup(void **state)
{
    struct fixture *fx = xcalloc(1, sizeof *fx);
    struct daemon *d = &fx->d;
    const char *why;
    char *err = NULL;
    assert_int_equal(gpu_parse_fake("2x16G,1x24G", &d->gpus, &why), 0);
    struct core_policy policy = core_policy_default();
    struct core_node node = {.ngpus = 3, .cpus = 8, .mem = 64ULL << 30};
    d->core = core_new(&policy);
    for (int i = 0; i < 3; i++) {
        node.gpu_mem[i] = d->gpus.gpu[i].mem_total;
        node.gpu_type[i] = i < 2 ? 0 : 1;
    }
    d->gpu_type_names[0] = xstrdup(d->gpus.gpu[0].name);
    d->gpu_type_names[1] = xstrdup(d->gpus.gpu[2].name);
    d->ngpu_types = 2;
    core_set_nodes(d->core, &node, 1);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/drover-request.XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    char *path = xasprintf("%s/drover.db", fx->dir);
    d->store = store_open(path, &err);
    free(path);
    assert_non_null(d->store);
    assert_int_equal(load(&d->cfg, NULL, NULL, &err), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    char *cmd = xasprintf("rm -rf '%s'", fx->dir);
    store_close(fx->d.store);
    core_free(fx->d.core);
    for (int t = 0; t < fx->d.ngpu_types; t++)
        free(fx->d.gpu_type_names[t]);
    config_free(&fx->d.cfg);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    free(fx);
    return 0;
}

/* Decodes task (which it takes) into rec, expecting success. */
static void decode(struct daemon *d, json_t *task, json_t *base_env, const char *workdir,
                   int default_retries, struct task_record *rec, json_t **keep)
{
    json_t *err = daemon_request_decode(d, task, base_env, workdir, default_retries, rec);
    if (err != NULL)
        fail_msg("refused: %s", json_string_value(json_object_get(err, "error")));
    *keep = task;
}

/* Decodes task (which it takes), expecting a refusal (code 2) that starts with want. */
static void refused_decode(struct daemon *d, json_t *task, const char *want)
{
    struct task_record rec;
    json_t *err = daemon_request_decode(d, task, NULL, "/", 0, &rec);
    assert_non_null(err);
    assert_int_equal(json_integer_value(json_object_get(err, "code")), 2);
    const char *got = json_string_value(json_object_get(err, "error"));
    if (strncmp(got, want, strlen(want)) != 0)
        fail_msg("got '%s', expected '%s…'", got, want);
    json_decref(err);
    json_decref(task);
}

static void test_decode_defaults(void **state)
{
    struct daemon *d = &((struct fixture *)*state)->d;
    struct task_record rec;
    json_t *task;
    /* Nothing given: the caller's retries, the default-backoff setting written out, a CPU-only
     * task whose profile is its command line, in the request's workdir. */
    decode(d, json_pack("{s:[s],s:s}", "command", "true", "workdir", "/tmp"), NULL, NULL, 3,
           &rec, &task);
    assert_int_equal(rec.spec.max_retries, 3);
    assert_int_equal(rec.spec.nbackoff, 3);
    assert_int_equal(rec.spec.backoff[0], 5000);
    assert_int_equal(rec.spec.backoff[2], 60000);
    assert_int_equal(rec.spec.req.gpus, 0);
    assert_int_equal(rec.spec.req.cpus, 0); /* core counts 1 for a CPU-only task */
    assert_string_equal(rec.workdir, "/tmp");
    assert_string_equal(rec.profile, "[\"true\"]");
    assert_null(rec.claim_source);
    assert_int_equal(rec.array_index, -1);
    assert_false(rec.spec.hold);
    assert_int_equal(json_object_size(rec.env), 0);
    daemon_request_release(&rec);
    json_decref(task);

    /* The settings, when changed, are what the task gets. */
    d->cfg.default_backoff[0] = 250;
    d->cfg.ndefault_backoff = 1;
    decode(d, json_pack("{s:[s]}", "command", "true"), NULL, "/w", 0, &rec, &task);
    assert_int_equal(rec.spec.max_retries, 0);
    assert_int_equal(rec.spec.nbackoff, 1);
    assert_int_equal(rec.spec.backoff[0], 250);
    assert_string_equal(rec.workdir, "/w");
    daemon_request_release(&rec);
    json_decref(task);

    /* Everything given wins over the defaults. */
    json_t *base_env = json_pack("{s:s,s:s}", "A", "a", "B", "base");
    decode(d,
           json_pack("{s:[s],s:i,s:[i,i],s:i,s:i,s:b,s:s,s:i,s:I,s:s,s:{s:s,s:s}}", "command",
                     "train", "retries", 0, "backoff", 100, 200, "priority", -5, "stall_ms",
                     90000, "hold", 1, "name", "t1", "cpus", 4, "mem", (json_int_t)(1LL << 30),
                     "profile", "resnet", "env", "B", "task", "C", "c"),
           base_env, NULL, 3, &rec, &task);
    assert_int_equal(rec.spec.max_retries, 0);
    assert_int_equal(rec.spec.nbackoff, 2);
    assert_int_equal(rec.spec.backoff[1], 200);
    assert_int_equal(rec.spec.priority, -5);
    assert_int_equal(rec.stall_ms, 90000);
    assert_true(rec.spec.hold);
    assert_string_equal(rec.name, "t1");
    assert_int_equal(rec.spec.req.cpus, 4);
    assert_true(rec.spec.req.mem == 1ULL << 30);
    assert_string_equal(rec.profile, "resnet");
    /* The task's env over the base env. */
    assert_string_equal(json_string_value(json_object_get(rec.env, "A")), "a");
    assert_string_equal(json_string_value(json_object_get(rec.env, "B")), "task");
    assert_string_equal(json_string_value(json_object_get(rec.env, "C")), "c");
    assert_int_equal(json_object_size(rec.env), 3);
    assert_int_equal(json_object_size(base_env), 2); /* borrowed, not changed */
    daemon_request_release(&rec);
    json_decref(task);
    json_decref(base_env);
}

static void test_decode_gpus(void **state)
{
    struct daemon *d = &((struct fixture *)*state)->d;
    struct task_record rec;
    json_t *task;
    /* A type alone asks for one GPU of it; the pattern is a substring in any case. */
    decode(d, json_pack("{s:[s],s:s}", "command", "x", "gpu_type", "24g"), NULL, "/", 0, &rec,
           &task);
    assert_int_equal(rec.spec.req.gpus, 1);
    assert_true(rec.spec.req.gpu_types == 2);
    daemon_request_release(&rec);
    json_decref(task);
    decode(d, json_pack("{s:[s],s:s,s:i}", "command", "x", "gpu_type", "FAKE GPU", "gpus", 2),
           NULL, "/", 0, &rec, &task);
    assert_true(rec.spec.req.gpu_types == 3);
    assert_int_equal(rec.spec.req.gpus, 2);
    daemon_request_release(&rec);
    json_decref(task);
    /* A claim alone asks for one shared GPU, declared. */
    decode(d, json_pack("{s:[s],s:I}", "command", "x", "gpu_mem", (json_int_t)(4LL << 30)),
           NULL, "/", 0, &rec, &task);
    assert_int_equal(rec.spec.req.gpus, 1);
    assert_string_equal(rec.claim_source, "declared");
    daemon_request_release(&rec);
    json_decref(task);
    /* Whole GPUs when asked, or when nothing was learned. */
    decode(d, json_pack("{s:[s],s:i,s:b}", "command", "x", "gpus", 1, "exclusive", 1), NULL,
           "/", 0, &rec, &task);
    assert_true(rec.spec.req.gpu_mem == 0);
    assert_null(rec.claim_source);
    daemon_request_release(&rec);
    json_decref(task);

    /* What this machine can never run is refused, naming the task when it has a name. */
    refused_decode(d, json_pack("{s:[s],s:s}", "command", "x", "gpu_type", "h100"),
                   "no GPU here matches gpu_type 'h100'; the GPUs here are: Fake GPU 16G, "
                   "Fake GPU 24G");
    refused_decode(d, json_pack("{s:[s],s:s,s:s}", "command", "x", "name", "e-t3", "gpu_type",
                                "a100"),
                   "task e-t3: no GPU here matches gpu_type 'a100'; the GPUs here are: Fake GPU "
                   "16G, Fake GPU 24G");
    /* core_check_request's reasons (core/place-check.c), under the task's name. */
    refused_decode(d, json_pack("{s:[s],s:s,s:i}", "command", "x", "gpu_type", "24G", "gpus", 2),
                   "asks for 2 GPUs");
    refused_decode(d, json_pack("{s:[s],s:i}", "command", "x", "gpus", 4),
                   "asks for 4 GPUs; the largest node has 3");
    refused_decode(d, json_pack("{s:[s],s:I,s:s}", "command", "x", "gpu_mem",
                                (json_int_t)(30LL << 30), "name", "big"),
                   "task big: asks for 30G of memory per GPU");
    refused_decode(d, json_pack("{s:[s],s:I,s:s,s:s}", "command", "x", "gpu_mem",
                                (json_int_t)(20LL << 30), "name", "big", "gpu_type", "16G"),
                   "task big: asks for 20G of memory per GPU; the largest GPU of its types");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_number_ranges),
        cmocka_unit_test(test_cpus_rule),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_other_fields),
        cmocka_unit_test(test_preemption_fields),
        cmocka_unit_test(test_submission_fields),
        cmocka_unit_test(test_task_exec_limits),
        cmocka_unit_test(test_settings),
        cmocka_unit_test_setup_teardown(test_decode_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_gpus, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
