/* Experiment templates: YAML in, checked, substituted and expanded into tasks (exp/template.h).
 * Each test writes its YAML into a temporary directory; errors are compared whole, FILE:LINE:COL
 * included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "exp/template.h"
#include "util/limits.h"
#include "util/xalloc.h"

static char test_dir[] = "/tmp/drover-exp-XXXXXX";
static char *test_path;

static int test_setup(void **state)
{
    if (mkdtemp(test_dir) == NULL)
        return -1;
    test_path = xasprintf("%s/exp.yaml", test_dir);
    return 0;
}

static int test_teardown(void **state)
{
    unlink(test_path);
    free(test_path);
    return rmdir(test_dir);
}

static void write_yaml(const char *text)
{
    FILE *fp = fopen(test_path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

static struct exp_def *load_sets(const char *yaml, char *const *sets, size_t nsets,
                                 unsigned seed)
{
    struct exp_def *def = NULL;
    char *err = NULL;
    write_yaml(yaml);
    if (exp_load(test_path, sets, nsets, seed, &def, &err) < 0) {
        print_error("unexpected error: %s\n", err);
        free(err);
        fail();
    }
    assert_non_null(def);
    return def;
}

static struct exp_def *load(const char *yaml)
{
    return load_sets(yaml, NULL, 0, 1);
}

/* The error for yaml (and sets), which must be "TEST_PATH:" + want, or want itself when it
 * starts with "--set". */
static void expect_error_sets(const char *yaml, char *const *sets, size_t nsets,
                              const char *want)
{
    struct exp_def *def = NULL;
    char *err = NULL;
    write_yaml(yaml);
    assert_int_equal(exp_load(test_path, sets, nsets, 1, &def, &err), -1);
    assert_null(def);
    assert_non_null(err);
    char *full = strncmp(want, "--set", 5) == 0 ? xstrdup(want)
                                                  : xasprintf("%s:%s", test_path, want);
    assert_string_equal(err, full);
    free(full);
    free(err);
}

static void expect_error(const char *yaml, const char *want)
{
    expect_error_sets(yaml, NULL, 0, want);
}

/* argv joined by spaces (malloc'd). */
static char *joined(char *const *words)
{
    char *out = xstrdup("");
    for (size_t i = 0; words[i] != NULL; i++) {
        char *longer = xasprintf("%s%s%s", out, i ? " " : "", words[i]);
        free(out);
        out = longer;
    }
    return out;
}

static void assert_argv(const struct exp_task *task, const char *want)
{
    char *got = joined(task->argv);
    assert_string_equal(got, want);
    free(got);
}

static char *printed(const struct exp_def *def)
{
    char *buf;
    size_t len;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    exp_print_tasks(def, fp);
    fclose(fp);
    return buf;
}

#define HEADER "apiVersion: drover/v1\nkind: Experiment\nmetadata:\n  name: e\nspec:\n"

static const char example[] =
    "apiVersion: drover/v1\n"
    "kind: Experiment\n"
    "metadata:\n"
    "  name: exp1\n"
    "spec:\n"
    "  model: {arch: resnet50, depth: 50}\n"
    "  data:\n"
    "    path: /data/cifar10\n"
    "  hyperparameters:\n"
    "    learning_rate: 0.01\n"
    "    epochs: 10\n"
    "  resources:\n"
    "    gpu_type: v100\n"
    "    gpu_count: 1\n"
    "    memory: 16Gi\n"
    "  env:\n"
    "    DATA_DIR: ${data.path}\n"
    "  command:\n"
    "    - python\n"
    "    - train.py\n"
    "    - --lr=${hyperparameters.learning_rate}\n"
    "    - --epochs=${hyperparameters.epochs}\n"
    "  sweep:\n"
    "    method: grid\n"
    "    parameters:\n"
    "      hyperparameters.learning_rate: [0.001, 0.01, 0.1]\n"
    "      hyperparameters.epochs: [50, 100]\n"
    "    parallel: 2\n"
    "  early_stopping: {type: asha, metric: val_loss, mode: min}\n"
    "  metrics:\n"
    "    patterns: [\"loss: {value}\", \"{name}={value}\"]\n"
    "  retry: {attempts: 2, backoff: [30s, 2m]}\n"
    "  timeout: 2h\n";

static void test_example(void **state)
{
    struct exp_def *def = load(example);
    assert_int_equal(def->kind, EXP_EXPERIMENT);
    assert_string_equal(def->name, "exp1");
    assert_int_equal(def->ntasks, 6);
    assert_int_equal(def->space, 6);
    assert_int_equal(def->parallel, 2);
    assert_non_null(def->early_stopping);
    assert_string_equal(json_string_value(json_object_get(def->early_stopping, "metric")),
                        "val_loss");
    assert_non_null(def->metrics);
    assert_null(def->validation);
    assert_null(def->generator);
    assert_null(def->circuit_breaker);
    /* the stored spec is the one written, not substituted */
    assert_string_equal(json_string_value(json_object_get(json_object_get(def->spec, "env"),
                                                          "DATA_DIR")),
                        "${data.path}");

    const struct exp_task *task = &def->tasks[0];
    assert_string_equal(task->name, "exp1-t0");
    assert_int_equal(task->trial, 0);
    assert_argv(task, "python train.py --lr=0.001 --epochs=50");
    assert_string_equal(task->env[0], "DATA_DIR=/data/cifar10");
    assert_null(task->env[1]);
    assert_int_equal(task->gpus, 1);
    assert_true(task->gpu_mem == 0);
    assert_true(task->mem == 16ull << 30);
    assert_string_equal(task->gpu_type, "v100");
    assert_int_equal(task->cpus, 0);
    assert_int_equal(task->timeout_ms, 2 * 3600 * 1000);
    assert_int_equal(task->retries, 1); /* attempts: 2 in all */
    assert_int_equal(task->nbackoff, 2);
    assert_int_equal(task->backoff_ms[0], 30000);
    assert_int_equal(task->backoff_ms[1], 120000);
    assert_non_null(task->needs);
    assert_null(task->needs[0]);
    assert_int_equal(json_object_size(task->params), 2);
    assert_true(json_real_value(json_object_get(task->params, "hyperparameters.learning_rate")) ==
                0.001);
    assert_int_equal(json_integer_value(json_object_get(task->params, "hyperparameters.epochs")),
                     50);
    assert_argv(&def->tasks[5], "python train.py --lr=0.1 --epochs=100");
    assert_string_equal(def->tasks[5].name, "exp1-t5");

    char *out = printed(def);
    const char *want_start =
        "task exp1-t0  gpus=1 gpu_mem=- mem=16G gpu_type=v100 timeout=2h00m retries=1 "
        "backoff=30s,2m00s\n"
        "  params:  hyperparameters.learning_rate=0.001 hyperparameters.epochs=50\n"
        "  env:     DATA_DIR=/data/cifar10\n"
        "  command: python train.py --lr=0.001 --epochs=50\n"
        "task exp1-t1 ";
    assert_memory_equal(out, want_start, strlen(want_start));
    const char *want_end = "6 tasks (sweep: grid, 6 configurations; parallel 2)\n";
    assert_string_equal(out + strlen(out) - strlen(want_end), want_end);
    free(out);
    exp_def_free(def);
}

static void test_no_sweep(void **state)
{
    struct exp_def *def = load(HEADER "  resources: {gpu_count: 2, gpu_memory: 20G, cpus: 8}\n"
                                      "  command: [\"echo\", 'hello world', 7]\n"
                                      "  retry: 3\n"
                                      "  timeout: 90\n");
    assert_int_equal(def->ntasks, 1);
    assert_int_equal(def->space, 1);
    assert_int_equal(def->parallel, 0);
    assert_string_equal(def->tasks[0].name, "e-t0");
    assert_int_equal(json_object_size(def->tasks[0].params), 0);
    assert_argv(&def->tasks[0], "echo hello world 7");
    assert_int_equal(def->tasks[0].retries, 3);
    assert_int_equal(def->tasks[0].timeout_ms, 90000);
    assert_true(def->tasks[0].gpu_mem == 20ull << 30);
    assert_null(def->tasks[0].env[0]);
    char *out = printed(def);
    assert_string_equal(out, "task e-t0  gpus=2 gpu_mem=20G mem=- gpu_type=- timeout=1m30s "
                             "retries=3 cpus=8\n"
                             "  command: echo 'hello world' 7\n"
                             "1 task (no sweep)\n");
    free(out);
    exp_def_free(def);
}

static void test_grid_order(void **state)
{
    struct exp_def *def = load(HEADER "  hyperparameters: {a: 0, b: x}\n"
                                      "  command: [run, \"${hyperparameters.a}\", "
                                      "\"${hyperparameters.b}\"]\n"
                                      "  sweep:\n"
                                      "    parameters:\n"
                                      "      hyperparameters.a: [1, 2, 3]\n"
                                      "      hyperparameters.b: [x, y, z]\n");
    static const char *const want[] = {"run 1 x", "run 1 y", "run 1 z", "run 2 x", "run 2 y",
                                       "run 2 z", "run 3 x", "run 3 y", "run 3 z"};
    assert_int_equal(def->ntasks, 9);
    assert_int_equal(def->space, 9);
    for (size_t i = 0; i < 9; i++) {
        assert_argv(&def->tasks[i], want[i]);
        assert_int_equal(def->tasks[i].trial, (int)i);
    }
    char *out = printed(def);
    const char *end = "9 tasks (sweep: grid, 9 configurations; parallel unlimited)\n";
    assert_string_equal(out + strlen(out) - strlen(end), end);
    free(out);
    exp_def_free(def);
}

static void test_max_trials(void **state)
{
    struct exp_def *def = load(HEADER "  hyperparameters: {a: 0, b: x}\n"
                                      "  command: [run, \"${hyperparameters.a}"
                                      "${hyperparameters.b}\"]\n"
                                      "  sweep:\n"
                                      "    parameters:\n"
                                      "      hyperparameters.a: [1, 2, 3]\n"
                                      "      hyperparameters.b: [x, y, z]\n"
                                      "    max_trials: 4\n");
    assert_int_equal(def->ntasks, 4);
    assert_int_equal(def->space, 9);
    assert_argv(&def->tasks[3], "run 2x");
    exp_def_free(def);
}

static void test_ranges(void **state)
{
    struct exp_def *def = load(HEADER "  hyperparameters: {batch: 0, dropout: 0}\n"
                                      "  command: [run, \"${hyperparameters.batch}\", "
                                      "\"${hyperparameters.dropout}\"]\n"
                                      "  sweep:\n"
                                      "    parameters:\n"
                                      "      hyperparameters.batch: {min: 16, max: 64, step: 16}\n"
                                      "      hyperparameters.dropout: "
                                      "{min: 0.1, max: 0.5, step: 0.1}\n");
    assert_int_equal(def->ntasks, 4 * 5);
    assert_argv(&def->tasks[0], "run 16 0.1");
    assert_argv(&def->tasks[2], "run 16 0.3");
    assert_argv(&def->tasks[4], "run 16 0.5");
    assert_argv(&def->tasks[19], "run 64 0.5");
    assert_true(json_is_integer(json_object_get(def->tasks[0].params, "hyperparameters.batch")));
    assert_true(json_is_real(json_object_get(def->tasks[0].params, "hyperparameters.dropout")));
    exp_def_free(def);

    /* a step that does not land on max stops below it; integer bounds with a real step */
    def = load(HEADER "  hyperparameters: {x: 0}\n"
                      "  command: [run, \"${hyperparameters.x}\"]\n"
                      "  sweep:\n"
                      "    parameters:\n"
                      "      hyperparameters.x: {min: 1, max: 2, step: 0.4}\n");
    assert_int_equal(def->ntasks, 3);
    assert_argv(&def->tasks[0], "run 1");
    assert_argv(&def->tasks[1], "run 1.4");
    assert_argv(&def->tasks[2], "run 1.8");
    exp_def_free(def);
}

static const char random_yaml[] =
    HEADER "  hyperparameters: {lr: 0.1, layers: 1, opt: sgd, wd: 0, bs: 0}\n"
           "  command: [run]\n"
           "  sweep:\n"
           "    method: random\n"
           "    max_trials: 50\n"
           "    parameters:\n"
           "      hyperparameters.lr: {distribution: log_uniform, min: 1e-5, max: 1e-1}\n"
           "      hyperparameters.layers: {distribution: int_uniform, min: 2, max: 5}\n"
           "      hyperparameters.opt: [sgd, adam, adamw]\n"
           "      hyperparameters.wd: {distribution: uniform, min: 0.5, max: 0.75}\n"
           "      hyperparameters.bs: {min: 32, max: 128, step: 32}\n";

static void test_random(void **state)
{
    struct exp_def *a = load_sets(random_yaml, NULL, 0, 42);
    struct exp_def *b = load_sets(random_yaml, NULL, 0, 42);
    struct exp_def *c = load_sets(random_yaml, NULL, 0, 43);
    assert_int_equal(a->ntasks, 50);
    assert_int_equal(a->space, 50);
    bool differs = false, seen[3] = {false}, layers_seen[4] = {false};
    for (size_t i = 0; i < a->ntasks; i++) {
        const json_t *p = a->tasks[i].params;
        assert_true(json_equal(p, b->tasks[i].params));
        differs |= !json_equal(p, c->tasks[i].params);
        double lr = json_real_value(json_object_get(p, "hyperparameters.lr"));
        assert_true(lr >= 1e-5 && lr <= 1e-1);
        const json_t *layers = json_object_get(p, "hyperparameters.layers");
        assert_true(json_is_integer(layers));
        assert_in_range(json_integer_value(layers), 2, 5);
        layers_seen[json_integer_value(layers) - 2] = true;
        const char *opt = json_string_value(json_object_get(p, "hyperparameters.opt"));
        assert_non_null(opt);
        seen[strcmp(opt, "sgd") == 0 ? 0 : strcmp(opt, "adam") == 0 ? 1 : 2] = true;
        double wd = json_real_value(json_object_get(p, "hyperparameters.wd"));
        assert_true(wd >= 0.5 && wd <= 0.75);
        json_int_t bs = json_integer_value(json_object_get(p, "hyperparameters.bs"));
        assert_true(bs == 32 || bs == 64 || bs == 96 || bs == 128);
    }
    assert_true(differs);
    assert_true(seen[0] && seen[1] && seen[2]);
    assert_true(layers_seen[0] && layers_seen[1] && layers_seen[2] && layers_seen[3]);
    char *out = printed(a);
    const char *end = "50 tasks (sweep: random, 50 trials; parallel unlimited)\n";
    assert_string_equal(out + strlen(out) - strlen(end), end);
    free(out);
    exp_def_free(a);
    exp_def_free(b);
    exp_def_free(c);

    /* sweep.seed wins over the argument */
    char *fixed = xasprintf("%s    seed: 7\n", random_yaml);
    a = load_sets(fixed, NULL, 0, 1);
    b = load_sets(fixed, NULL, 0, 2);
    for (size_t i = 0; i < a->ntasks; i++)
        assert_true(json_equal(a->tasks[i].params, b->tasks[i].params));
    exp_def_free(a);
    exp_def_free(b);
    free(fixed);
}

static void test_set(void **state)
{
    const char *yaml = HEADER "  hyperparameters: {lr: 0.1, name: base}\n"
                              "  resources: {gpu_count: 1}\n"
                              "  command: [run, \"${hyperparameters.lr}\", "
                              "\"${hyperparameters.name}\"]\n";
    char *sets[] = {"hyperparameters.lr=0.5", "hyperparameters.name='007'",
                    "resources.gpu_count=4", "hyperparameters.extra.deep=true",
                    "env.TAG=${hyperparameters.name}-x"};
    struct exp_def *def = load_sets(yaml, sets, 5, 1);
    const json_t *hp = json_object_get(def->spec, "hyperparameters");
    assert_true(json_is_real(json_object_get(hp, "lr")));
    assert_true(json_is_string(json_object_get(hp, "name")));
    assert_true(json_is_true(json_object_get(json_object_get(hp, "extra"), "deep")));
    assert_argv(&def->tasks[0], "run 0.5 007");
    assert_int_equal(def->tasks[0].gpus, 4);
    assert_string_equal(def->tasks[0].env[0], "TAG=007-x");
    exp_def_free(def);

    char *string_number[] = {"hyperparameters.name=12"};
    def = load_sets(yaml, string_number, 1, 1);
    assert_true(json_is_integer(json_object_get(json_object_get(def->spec, "hyperparameters"),
                                                "name")));
    assert_argv(&def->tasks[0], "run 0.1 12");
    exp_def_free(def);

    char *no_eq[] = {"hyperparameters.lr"};
    expect_error_sets(yaml, no_eq, 1, "--set hyperparameters.lr: expected PATH=VALUE");
    char *empty[] = {"=3"};
    expect_error_sets(yaml, empty, 1, "--set =3: empty path");
    char *gap[] = {"a..b=3"};
    expect_error_sets(yaml, gap, 1, "--set a..b=3: empty component in the path");
    char *into_scalar[] = {"hyperparameters.lr.x=3"};
    expect_error_sets(yaml, into_scalar, 1,
                      "--set hyperparameters.lr.x=3: spec.hyperparameters.lr is not a mapping");
    char *bad_type[] = {"resources.gpu_count=two"};
    expect_error_sets(yaml, bad_type, 1,
                      "--set resources.gpu_count=two: spec.resources.gpu_count: expected an "
                      "integer >= 0, got \"two\"");
    char *unknown[] = {"resource.gpu_count=2"};
    expect_error_sets(yaml, unknown, 1,
                      "--set resource.gpu_count=2: unknown key 'resource' in spec; did you mean "
                      "'resources'?");
    char *not_scalar[] = {"hyperparameters.lr=[1, 2]"};
    expect_error_sets(yaml, not_scalar, 1,
                      "--set hyperparameters.lr=[1, 2]: expected a single value, not a list");
}

static void test_substitution(void **state)
{
    struct exp_def *def = load(
        HEADER "  model:\n"
               "    arch: {name: resnet, depth: 50}\n"
               "    tags: [a, b]\n"
               "  hyperparameters:\n"
               "    small: 0.001\n"
               "    tiny: 1e-5\n"
               "    whole: 3\n"
               "    real: 2.5\n"
               "    flag: true\n"
               "    run: \"${model.arch.name}-${model.arch.depth}\"\n"
               "  command:\n"
               "    - run\n"
               "    - ${hyperparameters.small}/${hyperparameters.tiny}/${hyperparameters.whole}\n"
               "    - \"${ hyperparameters.real } ${hyperparameters.flag}\"\n"
               "    - $${HOME} and $$ and $5\n"
               "    - ${hyperparameters.run}\n"
               "    - ${model.arch}\n"
               "    - ${model.tags}\n"
               "    - ${model.tags.1}\n");
    const struct exp_task *task = &def->tasks[0];
    assert_string_equal(task->argv[1], "0.001/1e-05/3");
    assert_string_equal(task->argv[2], "2.5 true");
    assert_string_equal(task->argv[3], "${HOME} and $$ and $5");
    assert_string_equal(task->argv[4], "resnet-50");
    assert_string_equal(task->argv[5], "{\"name\":\"resnet\",\"depth\":50}");
    assert_string_equal(task->argv[6], "[\"a\",\"b\"]");
    assert_string_equal(task->argv[7], "b");
    assert_null(task->argv[8]);
    exp_def_free(def);

    /* a sweep's value is what ${…} sees */
    def = load(HEADER "  hyperparameters: {learning_rate: 1}\n"
                      "  command: [run, \"--lr=${hyperparameters.learning_rate}\"]\n"
                      "  sweep:\n"
                      "    parameters:\n"
                      "      hyperparameters.learning_rate: [0.0001, 0.3]\n");
    assert_argv(&def->tasks[0], "run --lr=0.0001");
    assert_argv(&def->tasks[1], "run --lr=0.3");
    exp_def_free(def);
}

static const char pipeline_yaml[] =
    "apiVersion: example.com/v1\n"
    "kind: Pipeline\n"
    "metadata: {name: pipe}\n"
    "spec:\n"
    "  data: {dir: /data}\n"
    "  resources: {gpu_count: 1, memory: 8G}\n"
    "  env: {DATA: \"${data.dir}\", MODE: all}\n"
    "  timeout: 1h\n"
    "  stages:\n"
    "    - name: prepare\n"
    "      command: [prep, \"${data.dir}\"]\n"
    "      resources: {gpu_count: 0}\n"
    "    - name: train-a\n"
    "      command: [train, --seed=1]\n"
    "      needs: [prepare]\n"
    "      env: {MODE: a}\n"
    "    - name: train-b\n"
    "      command: [train, --seed=2]\n"
    "      needs: [prepare]\n"
    "      retry: 2\n"
    "    - name: train-c\n"
    "      command: [train, --seed=3]\n"
    "      needs: [prepare]\n"
    "      resources: {gpu_type: a100, gpu_count: 2}\n"
    "    - name: evaluate\n"
    "      command: [eval]\n"
    "      needs: [train-a, train-b, train-c]\n"
    "      timeout: 10m\n";

static void test_pipeline(void **state)
{
    struct exp_def *def = load(pipeline_yaml);
    assert_int_equal(def->kind, EXP_PIPELINE);
    assert_int_equal(def->ntasks, 5);
    assert_string_equal(def->tasks[0].name, "prepare");
    assert_int_equal(def->tasks[0].trial, -1);
    assert_int_equal(def->tasks[0].gpus, 0);
    assert_true(def->tasks[0].mem == 8ull << 30);
    assert_argv(&def->tasks[0], "prep /data");
    assert_null(def->tasks[0].needs[0]);
    assert_string_equal(def->tasks[1].env[0], "DATA=/data");
    assert_string_equal(def->tasks[1].env[1], "MODE=a");
    assert_string_equal(def->tasks[2].env[1], "MODE=all");
    assert_int_equal(def->tasks[2].retries, 2);
    assert_int_equal(def->tasks[3].gpus, 2);
    assert_string_equal(def->tasks[3].gpu_type, "a100");
    assert_int_equal(def->tasks[1].gpus, 1);
    assert_string_equal(def->tasks[4].needs[0], "train-a");
    assert_string_equal(def->tasks[4].needs[2], "train-c");
    assert_null(def->tasks[4].needs[3]);
    assert_int_equal(def->tasks[4].timeout_ms, 600000);
    assert_int_equal(def->tasks[3].timeout_ms, 3600000);
    exp_def_free(def);

    /* --set reaches into a stage by its index */
    char *sets[] = {"stages.1.retry=5", "stages.0.resources.memory=1Gi"};
    def = load_sets(pipeline_yaml, sets, 2, 1);
    assert_int_equal(def->tasks[1].retries, 5);
    assert_true(def->tasks[0].mem == 1ull << 30);
    exp_def_free(def);
    char *beyond[] = {"stages.9.retry=5"};
    expect_error_sets(pipeline_yaml, beyond, 1,
                      "--set stages.9.retry=5: spec.stages has no element 9");

    def = load(pipeline_yaml);
    char *out = printed(def);
    const char *want_end =
        "task evaluate  gpus=1 gpu_mem=- mem=8G gpu_type=- timeout=10m00s retries=default\n"
        "  needs:   train-a train-b train-c\n"
        "  env:     DATA=/data MODE=all\n"
        "  command: eval\n"
        "5 tasks (pipeline)\n";
    assert_string_equal(out + strlen(out) - strlen(want_end), want_end);
    free(out);
    exp_def_free(def);
}

static void test_stored(void **state)
{
    struct exp_def *def = load(example);
    struct exp_task *tasks;
    size_t n;
    char *err = NULL;
    assert_int_equal(exp_trials(def->spec, def->name, 2, 3, 1, &tasks, &n, &err), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(tasks[i].name, def->tasks[2 + i].name);
        assert_int_equal(tasks[i].trial, (int)(2 + i));
        assert_true(json_equal(tasks[i].params, def->tasks[2 + i].params));
        char *want = joined(def->tasks[2 + i].argv);
        assert_argv(&tasks[i], want);
        free(want);
        exp_task_clear(&tasks[i]);
    }
    free(tasks);
    assert_int_equal(exp_trials(def->spec, def->name, 5, 2, 1, &tasks, &n, &err), -1);
    assert_string_equal(err, "exp1: trials 5 to 6: the sweep has 6 configurations");
    free(err);

    struct exp_task task;
    json_t *params = json_pack("{sfsi}", "hyperparameters.learning_rate", 0.2,
                               "resources.gpu_count", 3);
    assert_int_equal(exp_trial_from(def->spec, def->name, 17, params, &task, &err), 0);
    assert_string_equal(task.name, "exp1-t17");
    assert_int_equal(task.trial, 17);
    assert_int_equal(task.gpus, 3);
    assert_argv(&task, "python train.py --lr=0.2 --epochs=10");
    assert_true(json_equal(task.params, params));
    exp_task_clear(&task);
    json_decref(params);

    params = json_pack("{sf}", "hyperparameters.learning_rat", 0.2);
    assert_int_equal(exp_trial_from(def->spec, def->name, 1, params, &task, &err), -1);
    assert_string_equal(err, "exp1: parameter 'hyperparameters.learning_rat' is not in the "
                             "spec; did you mean 'hyperparameters.learning_rate'?");
    free(err);
    json_decref(params);
    params = json_pack("{ss}", "resources.gpu_count", "two");
    assert_int_equal(exp_trial_from(def->spec, def->name, 1, params, &task, &err), -1);
    assert_string_equal(err, "exp1: spec.resources.gpu_count: expected an integer >= 0, got "
                             "\"two\"");
    free(err);
    json_decref(params);
    exp_def_free(def);

    /* random: any trial, each the same drawn alone as in the whole load */
    def = load_sets(random_yaml, NULL, 0, 9);
    assert_int_equal(exp_trials(def->spec, def->name, 40, 20, 9, &tasks, &n, &err), 0);
    assert_int_equal(n, 20);
    for (size_t i = 0; i < n; i++) {
        if (40 + i < def->ntasks)
            assert_true(json_equal(tasks[i].params, def->tasks[40 + i].params));
        exp_task_clear(&tasks[i]);
    }
    free(tasks);
    assert_int_equal(exp_trials(def->spec, def->name, 0, 0, 9, &tasks, &n, &err), 0);
    assert_int_equal(n, 0);
    exp_def_free(def);
}

static void test_yaml(void **state)
{
    /* flow and block style, quoted strings stay strings, null, hex */
    struct exp_def *def = load("{apiVersion: drover/v1, kind: Experiment, metadata: {name: f},\n"
                               " spec: {hyperparameters: {a: '0.5', b: \"true\", c: ~, d: 0x10,"
                               " e: null, f: 1., g: +3, h: no},\n"
                               "        command: [x, \"${hyperparameters.a}\"]}}\n");
    const json_t *hp = json_object_get(def->spec, "hyperparameters");
    assert_true(json_is_string(json_object_get(hp, "a")));
    assert_true(json_is_string(json_object_get(hp, "b")));
    assert_true(json_is_null(json_object_get(hp, "c")));
    assert_int_equal(json_integer_value(json_object_get(hp, "d")), 16);
    assert_true(json_is_null(json_object_get(hp, "e")));
    assert_true(json_is_real(json_object_get(hp, "f")));
    assert_int_equal(json_integer_value(json_object_get(hp, "g")), 3);
    assert_string_equal(json_string_value(json_object_get(hp, "h")), "no");
    assert_argv(&def->tasks[0], "x 0.5");
    exp_def_free(def);
}

static void test_errors(void **state)
{
    expect_error(HEADER "  command: [a, b\n", "7:1: YAML syntax error: did not find expected ',' "
                                              "or ']' (while parsing a flow sequence at line 6)");
    expect_error(HEADER "  command: [x]\n  resources:\n    gpu_cont: 1\n",
                 "8:5: unknown key 'gpu_cont' in spec.resources; did you mean 'gpu_count'?");
    expect_error(HEADER "  command: [x]\n  sweep:\n    methd: grid\n",
                 "8:5: unknown key 'methd' in spec.sweep; did you mean 'method'?");
    expect_error(HEADER "  command: [x]\n  frobnicate: 1\n",
                 "7:3: unknown key 'frobnicate' in spec");
    expect_error("apiVersion: drover/v1\nkind: Experiment\nmetadata: {name: e}\nspecs: {}\n",
                 "4:1: unknown key 'specs' at the top level; did you mean 'spec'?");
    expect_error(HEADER "  command: [x]\n  resources:\n    gpu_count: two\n",
                 "8:16: spec.resources.gpu_count: expected an integer >= 0, got \"two\"");
    expect_error(HEADER "  command: [x]\n  resources: {memory: 16X}\n",
                 "7:23: spec.resources.memory: expected a size such as 16G or 512Mi, got \"16X\" "
                 "(unknown size unit (use K, M, G or T))");
    expect_error(HEADER "  command: x\n",
                 "6:12: spec.command: expected a list of strings (the command and arguments), "
                 "got \"x\"");
    expect_error(HEADER "  command: [x]\n  sweep: {method: grd, parameters: {}}\n",
                 "7:19: spec.sweep.method: expected grid or random, got \"grd\"; did you mean "
                 "'grid'?");
    expect_error(HEADER "  env: {A: b}\n", "6:3: spec: missing 'command'");
    expect_error("apiVersion: drover/v1\nkind: Experiment\nspec: {command: [x]}\n",
                 "1:1: missing 'metadata'");
    expect_error(HEADER "  hyperparameters: {lr: 0.1}\n"
                        "  command: [python, \"--lr=${hyperparameters.lrr}\"]\n",
                 "7:21: undefined ${hyperparameters.lrr} (did you mean hyperparameters.lr?)");
    expect_error(HEADER "  command: [python, \"${nothing.here}\"]\n",
                 "6:21: undefined ${nothing.here}");
    expect_error(HEADER "  command: [python, \"${unclosed\"]\n",
                 "6:21: unterminated ${ (write $${ for a literal ${)");
    expect_error(HEADER "  hyperparameters: {a: \"${hyperparameters.b}\", "
                        "b: \"${hyperparameters.a}\"}\n"
                        "  command: [\"${hyperparameters.a}\"]\n",
                 "6:51: ${…} nested more than 8 deep (does ${hyperparameters.b} refer to "
                 "itself?)");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: a, command: [x]}\n"
                 "    - {name: b, command: [x], needs: [a, d]}\n"
                 "    - {name: c, command: [x], needs: [b]}\n"
                 "    - {name: d, command: [x], needs: [c]}\n",
                 "7:7: cycle in needs: b -> d -> c -> b");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: a, command: [x], needs: [a]}\n",
                 "6:7: cycle in needs: a -> a");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: prepare, command: [x]}\n"
                 "    - {name: train, command: [x], needs: [prepar]}\n",
                 "7:43: needs unknown stage 'prepar'; did you mean 'prepare'?");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: a, command: [x]}\n"
                 "    - {name: a, command: [y]}\n",
                 "7:14: duplicate stage name 'a'");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: a}\n",
                 "6:7: spec.stages[0]: missing 'command'");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  command: [x]\n"
                 "  stages: [{name: a, command: [x]}]\n",
                 "5:3: a Pipeline runs its stages' commands; move 'command' into a stage");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec: {}\n",
                 "4:7: spec: missing 'stages'");
    expect_error(HEADER "  command: [x]\n  stages: [{name: a, command: [x]}]\n",
                 "7:3: stages are only allowed in kind: Pipeline");
    expect_error(HEADER "  command: [x]\n  env: {A: 1, A: 2}\n", "7:15: duplicate key 'A'");
    expect_error(HEADER "  hyperparameters: &hp {a: 1}\n  model: *hp\n  command: [x]\n",
                 "6:20: anchors and aliases are not supported (&hp): repeat the value instead");
    expect_error(HEADER "  command: [x]\n  model: *hp\n",
                 "7:10: aliases are not supported (*hp)");
    expect_error(HEADER "  command: [x]\n---\nkind: Pipeline\n",
                 "7:1: only one YAML document is allowed per file");
    expect_error("", "1:1: the file is empty");
    expect_error("- a\n- b\n", "1:1: expected a mapping with apiVersion, kind, metadata and spec");
    expect_error("apiVersion: drover/v2\nkind: Experiment\nmetadata: {name: e}\n"
                 "spec: {command: [x]}\n",
                 "1:13: apiVersion: expected \"…/v1\" such as \"drover/v1\", got \"drover/v2\"");
    expect_error("apiVersion: drover/v1\nkind: Experimnt\nmetadata: {name: e}\n"
                 "spec: {command: [x]}\n",
                 "2:7: kind: expected Experiment or Pipeline, got \"Experimnt\"; did you mean "
                 "'Experiment'?");
    expect_error("apiVersion: drover/v1\nkind: Experiment\nmetadata: {name: my exp}\n"
                 "spec: {command: [x]}\n",
                 "3:18: metadata.name: expected a name of letters, digits, '.', '_' and '-' (at "
                 "most 64; not . or ..), got \"my exp\"");
    expect_error("apiVersion: drover/v1\nkind: Experiment\nmetadata: {name: ..}\n"
                 "spec: {command: [x]}\n",
                 "3:18: metadata.name: expected a name of letters, digits, '.', '_' and '-' (at "
                 "most 64; not . or ..), got \"..\"");
    expect_error(HEADER "  hyperparameters: {learning_rate: 0.1}\n"
                        "  command: [x]\n"
                        "  sweep:\n"
                        "    parameters:\n"
                        "      hyperparameters.learning_rat: [1, 2]\n",
                 "10:7: sweep parameter 'hyperparameters.learning_rat' is not in the spec; did "
                 "you mean 'hyperparameters.learning_rate'?");
    expect_error(HEADER "  hyperparameters: {lr: 0.1}\n"
                        "  command: [x]\n"
                        "  sweep:\n"
                        "    method: random\n"
                        "    parameters: {hyperparameters.lr: [1, 2]}\n",
                 "9:5: spec.sweep: missing 'max_trials' (method random needs it)");
    expect_error(HEADER "  hyperparameters: {lr: 0.1}\n"
                        "  command: [x]\n"
                        "  sweep:\n"
                        "    parameters:\n"
                        "      hyperparameters.lr: {distribution: uniform, min: 0, max: 1}\n",
                 "10:27: spec.sweep.parameters.hyperparameters.lr: a distribution needs method: "
                 "random");
    expect_error(HEADER "  hyperparameters: {lr: 0.1}\n"
                        "  command: [x]\n"
                        "  sweep:\n"
                        "    parameters:\n"
                        "      hyperparameters.lr: {min: 0, max: 1, stpe: 0.1}\n",
                 "10:44: unknown key 'stpe' in spec.sweep.parameters.hyperparameters.lr; did you "
                 "mean 'step'?");
    /* a swept value is checked where the sweep wrote it */
    expect_error(HEADER "  resources: {gpu_count: 1}\n"
                        "  command: [x]\n"
                        "  sweep:\n"
                        "    parameters:\n"
                        "      resources.gpu_count: [1, -2]\n",
                 "10:32: spec.resources.gpu_count: expected an integer >= 0, got -2");
    expect_error(HEADER "  command: [x]\n  env: {my-var: 1}\n",
                 "7:9: spec.env: 'my-var' is not a variable name (letters, digits and '_')");
    expect_error(HEADER "  command: [x]\n  timeout: soon\n",
                 "7:12: spec.timeout: expected a duration such as 90s or 2h, got \"soon\"");
    char *missing = xasprintf("%s/nope.yaml", test_dir);
    struct exp_def *def;
    char *err;
    assert_int_equal(exp_load(missing, NULL, 0, 1, &def, &err), -1);
    char *want = xasprintf("%s: No such file or directory", missing);
    assert_string_equal(err, want);
    free(want);
    free(err);
    free(missing);
}


/* Needs that repeat a stage were accepted, and overflowed the daemon's array of dependencies. */
static void test_needs_repeated(void **state)
{
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: a, command: [x]}\n"
                 "    - {name: b, command: [x], needs: [a, a, a, a, a, a, a, a]}\n",
                 "7:42: needs 'a' more than once");
    expect_error("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n"
                 "  stages:\n"
                 "    - {name: a, command: [x]}\n"
                 "    - {name: b, command: [x]}\n"
                 "    - {name: c, command: [x], needs: [a, b, a]}\n",
                 "8:45: needs 'a' more than once");
    /* the same stage needed by several stages is fine */
    struct exp_def *def = load("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\n"
                               "spec:\n"
                               "  stages:\n"
                               "    - {name: a, command: [x]}\n"
                               "    - {name: b, command: [x], needs: [a]}\n"
                               "    - {name: c, command: [x], needs: [a, b]}\n");
    assert_string_equal(def->tasks[2].needs[1], "b");
    exp_def_free(def);
}

/* The YAML of a template whose value lN references lN-1 `refs` times, l0 being `base`, and
 * whose command's argument is l`used`. */
static char *bomb_yaml_using(int levels, int refs, const char *base, int used)
{
    char *yaml = xasprintf(HEADER "  hyperparameters:\n    l0: \"%s\"\n", base);
    for (int level = 1; level <= levels; level++) {
        char *line = xasprintf("    l%d: \"", level);
        for (int r = 0; r < refs; r++) {
            char *longer = xasprintf("%s${hyperparameters.l%d}", line, level - 1);
            free(line);
            line = longer;
        }
        char *longer = xasprintf("%s%s\"\n", yaml, line);
        free(yaml);
        free(line);
        yaml = longer;
    }
    char *full = xasprintf("%s  command: [echo, \"${hyperparameters.l%d}\"]\n", yaml, used);
    free(yaml);
    return full;
}

static char *bomb_yaml(int levels, int refs, const char *base)
{
    return bomb_yaml_using(levels, refs, base, levels);
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (now.tv_nsec - start->tv_nsec) / 1e9;
}

/* 1.6 KB of template that expanded to gigabytes over tens of seconds: refused where the limit is
 * crossed (l6, whose ten copies of l5 pass 8 MB), as soon as it is. */
static void test_bomb(void **state)
{
    char *yaml = bomb_yaml(7, 10, "xxxxxxxxxx");
    char *want = xasprintf("13:9: ${…} makes the template larger than "
                           "LIMIT_TEMPLATE_EXPANDED (%u bytes after substitution)",
                           LIMIT_TEMPLATE_EXPANDED);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    expect_error(yaml, want);
    assert_true(seconds_since(&start) < 5); /* generous: milliseconds; unbounded, minutes */
    free(want);
    free(yaml);

    /* Empty values expand to nothing, but 10^7 references are still work: each node is
     * substituted once. */
    yaml = bomb_yaml(7, 10, "");
    clock_gettime(CLOCK_MONOTONIC, &start);
    struct exp_def *def = load(yaml);
    assert_true(seconds_since(&start) < 5);
    assert_string_equal(def->tasks[0].argv[1], "");
    exp_def_free(def);
    free(yaml);

    /* Under the limit is fine: 6.7 MB in all (l5 is 6 MB). */
    char base[61];
    memset(base, 'x', 60);
    base[60] = '\0';
    yaml = bomb_yaml_using(5, 10, base, 2);
    clock_gettime(CLOCK_MONOTONIC, &start);
    def = load(yaml);
    assert_true(seconds_since(&start) < 5);
    assert_int_equal(strlen(def->tasks[0].argv[1]), 6000);
    exp_def_free(def);
    free(yaml);

    /* The limit is on the whole load: a value of 100 KB substituted into each of 100 trials
     * (twice: in the spec and in the command) passes it at trial 41. */
    yaml = xasprintf(HEADER "  hyperparameters: {big: \"%0*d\", i: 0}\n"
                            "  command: [echo, \"${hyperparameters.big}\"]\n"
                            "  sweep:\n"
                            "    parameters:\n"
                            "      hyperparameters.i: {min: 0, max: 99, step: 1}\n",
                     100000, 0);
    want = xasprintf("7:19: ${…} makes the template larger than LIMIT_TEMPLATE_EXPANDED (%u "
                     "bytes after substitution)", LIMIT_TEMPLATE_EXPANDED);
    expect_error(yaml, want);
    free(want);
    free(yaml);
}

/* Substituting each node once must not change where a chain too deep fails, nor let a cycle
 * through. */
static void test_nesting(void **state)
{
    char *yaml = bomb_yaml(7, 1, "end"); /* the command's ${l7}: 8 levels */
    struct exp_def *def = load(yaml);
    assert_string_equal(def->tasks[0].argv[1], "end");
    exp_def_free(def);
    free(yaml);
    yaml = bomb_yaml(8, 1, "end"); /* l8 in the spec is fine, the command's ${l8} is not */
    expect_error(yaml, "7:9: ${…} nested more than 8 deep (does ${hyperparameters.l0} refer to "
                       "itself?)");
    free(yaml);
    expect_error(HEADER "  hyperparameters: {a: \"${hyperparameters.a}\"}\n"
                        "  command: [x]\n",
                 "6:24: ${…} nested more than 8 deep (does ${hyperparameters.a} refer to "
                 "itself?)");
}

static void test_quote(void **state)
{
    struct exp_def *def = load(HEADER "  hyperparameters:\n"
                                      "    plain: abc\n"
                                      "    quote: \"it's\"\n"
                                      "    empty: \"\"\n"
                                      "    lines: \"a\\nb\"\n"
                                      "    run: \"1; touch /tmp/p\"\n"
                                      "    number: 0.5\n"
                                      "  command: [sh, -c, \"echo ${hyperparameters.plain:q} "
                                      "${hyperparameters.quote:q} ${hyperparameters.empty:q} "
                                      "${ hyperparameters.lines :q} ${hyperparameters.run:q} "
                                      "${hyperparameters.number:q} ${hyperparameters.plain}\"]\n");
    assert_string_equal(def->tasks[0].argv[2],
                        "echo 'abc' 'it'\\''s' '' 'a\nb' '1; touch /tmp/p' '0.5' abc");
    assert_int_equal(json_array_size(def->warnings), 0); /* the unquoted value is harmless */
    char *out = printed(def);
    assert_non_null(strstr(out, "  command: sh -c 'echo '\\''abc'\\'' '\\''it'\\''\\'\\'''"));
    free(out);
    exp_def_free(def);

    /* Unquoted values the shell would interpret: one warning per place and reference, however
     * many trials have such values. */
    def = load(HEADER "  hyperparameters: {x: \"a\"}\n"
                      "  command: [/bin/bash, -ec, \"echo ${hyperparameters.x}\", "
                      "\"${hyperparameters.x}\"]\n"
                      "  sweep:\n"
                      "    parameters:\n"
                      "      hyperparameters.x: [safe, \"1; touch /tmp/p\", \"$HOME\"]\n");
    assert_int_equal(def->ntasks, 3);
    assert_int_equal(json_array_size(def->warnings), 1);
    char *want = xasprintf("%s:7:29: warning: ${hyperparameters.x} goes unquoted into a shell "
                           "script, and its value '1; touch /tmp/p' holds characters the shell "
                           "interprets; write ${hyperparameters.x:q}", test_path);
    assert_string_equal(json_string_value(json_array_get(def->warnings, 0)), want);
    free(want);
    exp_def_free(def);

    /* not a shell: argv goes to the program as it is */
    def = load(HEADER "  hyperparameters: {x: \"1; touch /tmp/p\"}\n"
                      "  command: [python3, -c, \"${hyperparameters.x}\"]\n");
    assert_int_equal(json_array_size(def->warnings), 0);
    assert_string_equal(def->tasks[0].argv[2], "1; touch /tmp/p");
    exp_def_free(def);

    expect_error(HEADER "  hyperparameters: {x: 1}\n  command: [\"${hyperparameters.x:z}\"]\n",
                 "7:13: undefined ${hyperparameters.x:z} (${PATH:q} is the only form with a "
                 "':')");
}

/* A task the exec limits refuse is refused at load, naming it (the daemon checks it again). */
static void test_exec_limits(void **state)
{
    char *yaml = xasprintf(HEADER "  command: [echo, \"%0*d\"]\n", 200000, 0);
    struct exp_def *def = NULL;
    char *err = NULL;
    write_yaml(yaml);
    assert_int_equal(exp_load(test_path, NULL, 0, 1, &def, &err), -1);
    char *want = xasprintf("%s:6:12: trial 0 (e-t0): argument", test_path);
    assert_memory_equal(err, want, strlen(want));
    assert_non_null(strstr(err, " of the command is 200000 bytes; LIMIT_EXEC_STRING is 131071"));
    free(want);
    free(err);
    free(yaml);
}

/* Templates that are not UTF-8: refused where, naming the field; nothing dropped or replaced. */
static void test_utf8(void **state)
{
    expect_error(HEADER "  env: {A: \"ab\xff" "cd\"}\n  command: [x]\n",
                 "6:15: spec.env.A: not valid UTF-8 (byte 0xff)");
    expect_error(HEADER "  command: [x, \"caf\xc3\"]\n",
                 "6:20: spec.command[1]: not valid UTF-8 (byte 0xc3)");
    expect_error(HEADER "  command: [x, \"\xed\xa0\x80\"]\n", /* a surrogate */
                 "6:17: spec.command[1]: not valid UTF-8 (byte 0xed)");
    expect_error(HEADER "  env: {\"A\xe9\": x}\n  command: [x]\n",
                 "6:11: a key in spec.env is not valid UTF-8 (byte 0xe9)");
    expect_error(HEADER "  command: [x] # caf\xe9\n", "6:21: not valid UTF-8 (byte 0xe9)");
    char *sets[] = {"hyperparameters.x=ok", "hyperparameters.y=a\xff"};
    expect_error_sets(HEADER "  hyperparameters: {x: 1}\n  command: [x]\n", sets, 2,
                      "--set #2: not valid UTF-8 (byte 20)");
    /* valid UTF-8 goes through untouched */
    struct exp_def *def = load(HEADER "  command: [x, \"caf\xc3\xa9 \xe2\x9c\x93\"]\n");
    assert_string_equal(def->tasks[0].argv[1], "caf\xc3\xa9 \xe2\x9c\x93");
    exp_def_free(def);
}

/* retry: N is N retries; {attempts: N} N attempts in all; {retries: N} N retries; neither:
 * not given (-1), and the request leaves retries out so the daemon's default applies. */
static void test_retry(void **state)
{
    static const struct {
        const char *retry;
        int retries, nbackoff;
    } cases[] = {
        {"3", 3, 0},
        {"{attempts: 1}", 0, 0},
        {"{attempts: 4, backoff: [10s]}", 3, 1},
        {"{retries: 0}", 0, 0},
        {"{retries: 2}", 2, 0},
        {"{backoff: [10s, 1m]}", -1, 2},
        {NULL, -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *yaml = cases[i].retry ? xasprintf(HEADER "  command: [x]\n  retry: %s\n",
                                                cases[i].retry)
                                    : xstrdup(HEADER "  command: [x]\n");
        struct exp_def *def = load(yaml);
        assert_int_equal(def->tasks[0].retries, cases[i].retries);
        assert_int_equal(def->tasks[0].nbackoff, cases[i].nbackoff);
        json_t *o = exp_task_to_json(&def->tasks[0]);
        if (cases[i].retries < 0)
            assert_null(json_object_get(o, "retries"));
        else
            assert_int_equal(json_integer_value(json_object_get(o, "retries")),
                             cases[i].retries);
        json_decref(o);
        exp_def_free(def);
        free(yaml);
    }
    expect_error(HEADER "  command: [x]\n  retry: {attempts: 2, retries: 1}\n",
                 "7:10: spec.retry: give attempts (in all) or retries (after the first attempt),"
                 " not both");
    expect_error(HEADER "  command: [x]\n  retry: {attempts: 0}\n",
                 "7:21: spec.retry.attempts: expected an integer >= 1, got 0");
    expect_error(HEADER "  command: [x]\n  retry: {attempts: 1002}\n",
                 "7:21: spec.retry.attempts: expected an integer from 1 to 1001, got 1002");
    expect_error(HEADER "  command: [x]\n  retry: {retries: 1001}\n",
                 "7:20: spec.retry.retries: expected an integer from 0 to 1000, got 1001");
    expect_error(HEADER "  command: [x]\n  retry: 1001\n",
                 "7:10: spec.retry: expected an integer from 0 to 1000, got 1001");
    expect_error(HEADER "  command: [x]\n  retry: -1\n",
                 "7:10: spec.retry: expected an integer >= 0 (retries) or { attempts | retries,"
                 " backoff }, got -1");
    expect_error(HEADER "  command: [x]\n  retry: {attempt: 2}\n",
                 "7:11: unknown key 'attempt' in spec.retry; did you mean 'attempts'?");
    /* a stage's retry, and attempts through --set */
    char *sets[] = {"stages.0.retry.attempts=3"};
    struct exp_def *def = load_sets(pipeline_yaml, sets, 1, 1);
    assert_int_equal(def->tasks[0].retries, 2);
    assert_int_equal(def->tasks[1].retries, -1);
    assert_int_equal(def->tasks[2].retries, 2);
    exp_def_free(def);
}

/* spec.priority and spec.stall, and a stage's own. */
static void test_priority_stall(void **state)
{
    struct exp_def *def = load(HEADER "  command: [x]\n  priority: -5\n  stall: 10m\n");
    assert_true(def->tasks[0].has_priority);
    assert_int_equal(def->tasks[0].priority, -5);
    assert_int_equal(def->tasks[0].stall_ms, 600000);
    char *out = printed(def);
    assert_string_equal(out, "task e-t0  gpus=0 gpu_mem=- mem=- gpu_type=- timeout=- "
                             "retries=default stall=10m00s priority=-5\n"
                             "  command: x\n"
                             "1 task (no sweep)\n");
    free(out);
    exp_def_free(def);

    def = load(HEADER "  command: [x]\n");
    assert_false(def->tasks[0].has_priority);
    assert_int_equal(def->tasks[0].stall_ms, 0);
    exp_def_free(def);

    const char *pipeline = "apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: p}\n"
                           "spec:\n"
                           "  priority: 7\n"
                           "  stall: 1h\n"
                           "  stages:\n"
                           "    - {name: a, command: [x], priority: 0, stall: 90}\n"
                           "    - {name: b, command: [x], needs: [a]}\n";
    def = load(pipeline);
    assert_true(def->tasks[0].has_priority);
    assert_int_equal(def->tasks[0].priority, 0);
    assert_int_equal(def->tasks[0].stall_ms, 90000);
    assert_int_equal(def->tasks[1].priority, 7);
    assert_int_equal(def->tasks[1].stall_ms, 3600000);
    exp_def_free(def);

    expect_error(HEADER "  command: [x]\n  priority: 1.5\n",
                 "7:13: spec.priority: expected an integer, got 1.5");
    expect_error(HEADER "  command: [x]\n  priority: 1000001\n",
                 "7:13: spec.priority: expected an integer from -1000000 to 1000000, got 1000001");
    expect_error(HEADER "  command: [x]\n  stall: soon\n",
                 "7:10: spec.stall: expected a duration such as 90s or 2h, got \"soon\"");
}

/* The request's task: the submit request's keys and units, and nothing the template did not
 * give. */
static void test_task_json(void **state)
{
    struct exp_def *def = load(HEADER "  command: [x]\n");
    json_t *o = exp_task_to_json(&def->tasks[0]);
    json_t *want = json_pack("{s:s,s:i,s:{},s:[s]}", "name", "e-t0", "trial", 0, "params",
                             "command", "x");
    assert_true(json_equal(o, want));
    json_decref(want);
    json_decref(o);
    exp_def_free(def);

    def = load(HEADER "  resources: {gpu_count: 2, gpu_memory: 1Gi, gpu_type: a100, memory: 2G,"
                      " cpus: 3}\n"
                      "  env: {A: 1}\n"
                      "  command: [x]\n"
                      "  timeout: 1m\n"
                      "  stall: 2s\n"
                      "  priority: 4\n"
                      "  retry: {attempts: 3, backoff: [5s]}\n");
    o = exp_task_to_json(&def->tasks[0]);
    want = json_pack("{s:s,s:i,s:{},s:[s],s:{s:s},s:i,s:I,s:s,s:i,s:I,s:I,s:I,s:i,s:i,s:[I]}",
                     "name", "e-t0", "trial", 0, "params", "command", "x", "env", "A", "1",
                     "gpus", 2, "gpu_mem", (json_int_t)1 << 30, "gpu_type", "a100", "cpus", 3,
                     "mem", (json_int_t)2 << 30, "timeout_ms", (json_int_t)60000, "stall_ms",
                     (json_int_t)2000, "priority", 4, "retries", 2, "backoff",
                     (json_int_t)5000);
    if (!json_equal(o, want)) {
        char *got = json_dumps(o, JSON_SORT_KEYS);
        print_error("got %s\n", got);
        free(got);
        fail();
    }
    json_decref(want);
    json_decref(o);
    exp_def_free(def);

    def = load(pipeline_yaml); /* needs only where a stage has them */
    o = exp_task_to_json(&def->tasks[0]);
    assert_null(json_object_get(o, "needs"));
    assert_int_equal(json_integer_value(json_object_get(o, "trial")), -1);
    json_decref(o);
    o = exp_task_to_json(&def->tasks[4]);
    assert_int_equal(json_array_size(json_object_get(o, "needs")), 3);
    json_decref(o);
    exp_def_free(def);
}

/* --set metadata.name=NAME renames the experiment, checked like the template's own name. */
static void test_set_name(void **state)
{
    char *rename[] = {"metadata.name=run-2"};
    struct exp_def *def = load_sets(example, rename, 1, 1);
    assert_string_equal(def->name, "run-2");
    assert_string_equal(def->tasks[0].name, "run-2-t0");
    exp_def_free(def);
    char *digits[] = {"metadata.name=20240101"}; /* a name, not a number */
    def = load_sets(example, digits, 1, 1);
    assert_string_equal(def->name, "20240101");
    exp_def_free(def);
    char *both[] = {"metadata.name=a", "hyperparameters.epochs=3"};
    def = load_sets(example, both, 2, 1);
    assert_string_equal(def->name, "a");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(def->spec,
                                                                        "hyperparameters"),
                                                        "epochs")),
                     3);
    exp_def_free(def);
    char *bad[] = {"metadata.name=a/b"};
    expect_error_sets(example, bad, 1,
                      "--set metadata.name=a/b: metadata.name: expected a name of letters, "
                      "digits, '.', '_' and '-' (at most 64; not . or ..), got \"a/b\"");
    char *empty[] = {"metadata.name="};
    expect_error_sets(example, empty, 1,
                      "--set metadata.name=: metadata.name: expected a name of letters, "
                      "digits, '.', '_' and '-' (at most 64; not . or ..), got \"\"");
    char *typo[] = {"metadata.nam=x"};
    expect_error_sets(example, typo, 1,
                      "--set metadata.nam=x: unknown key 'nam' in metadata; did you mean "
                      "'name'?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example),   cmocka_unit_test(test_no_sweep),
        cmocka_unit_test(test_grid_order), cmocka_unit_test(test_max_trials),
        cmocka_unit_test(test_ranges),    cmocka_unit_test(test_random),
        cmocka_unit_test(test_set),       cmocka_unit_test(test_substitution),
        cmocka_unit_test(test_pipeline),  cmocka_unit_test(test_stored),
        cmocka_unit_test(test_yaml),      cmocka_unit_test(test_errors),
        cmocka_unit_test(test_needs_repeated), cmocka_unit_test(test_bomb),
        cmocka_unit_test(test_nesting),   cmocka_unit_test(test_quote),
        cmocka_unit_test(test_exec_limits), cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_retry),     cmocka_unit_test(test_priority_stall),
        cmocka_unit_test(test_task_json), cmocka_unit_test(test_set_name),
    };
    return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
