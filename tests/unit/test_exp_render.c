/* drover exp render (exp/render.h): Kubernetes objects and Slurm scripts from templates loaded
 * from text — names, limits, selectors, deadlines, env, Indexed Jobs, per-trial Jobs when a sweep
 * changes the pod, pipelines, the YAML writer's quoting, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "exp/render.h"
#include "exp/template.h"
#include "util/xalloc.h"

static struct exp_def *load(const char *yaml)
{
    struct exp_def *def = NULL;
    char *err = NULL;
    if (exp_load_text("t.yaml", yaml, strlen(yaml), NULL, 0, 1, &def, &err) < 0)
        fail_msg("load: %s", err);
    return def;
}

static json_t *k8s(const char *yaml, const char *gpu_label)
{
    struct exp_def *def = load(yaml);
    struct render_k8s_options opt = {.file = "t.yaml", .gpu_label = gpu_label};
    char *err = NULL;
    json_t *objects = render_k8s(def, &opt, &err);
    if (objects == NULL)
        fail_msg("render: %s", err);
    exp_def_free(def);
    return objects;
}

static char *k8s_error(const char *yaml, const char *gpu_label)
{
    struct exp_def *def = load(yaml);
    struct render_k8s_options opt = {.file = "t.yaml", .gpu_label = gpu_label};
    char *err = NULL;
    assert_null(render_k8s(def, &opt, &err));
    assert_non_null(err);
    exp_def_free(def);
    return err;
}

/* The value at a path of keys and indices, apart by blanks (keys have dots):
 * "spec template spec containers 0 image". */
static json_t *at(json_t *j, const char *path)
{
    char *copy = xstrdup(path), *save = NULL;
    for (char *part = strtok_r(copy, " ", &save); part && j; part = strtok_r(NULL, " ", &save))
        j = json_is_array(j) ? json_array_get(j, strtoul(part, NULL, 10))
                             : json_object_get(j, part);
    free(copy);
    return j;
}

static const char *str(json_t *j, const char *path)
{
    const char *s = json_string_value(at(j, path));
    if (s == NULL)
        fail_msg("no string at %s", path);
    return s;
}

static long long num(json_t *j, const char *path)
{
    json_t *v = at(j, path);
    if (!json_is_integer(v))
        fail_msg("no integer at %s", path);
    return (long long)json_integer_value(v);
}

/* A container's env entry by name, or NULL. */
static json_t *env(json_t *job, const char *name)
{
    json_t *list = at(job, "spec template spec containers 0 env"), *e;
    size_t i;
    json_array_foreach(list, i, e)
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return e;
    return NULL;
}

#define HEAD "apiVersion: drover/v1\nkind: Experiment\nmetadata: {name: lr-sweep}\nspec:\n"

static const char *const sweep_yaml =
    HEAD "  image: ghcr.io/example/train:1.0\n"
         "  hyperparameters: {lr: 0.1}\n"
         "  resources: {gpu_count: 2, gpu_type: A100-SXM4-80GB, memory: 16G, cpus: 4}\n"
         "  env: {MODE: fast, SEED: \"1\", LR: \"${hyperparameters.lr}\"}\n"
         "  command: [python, train.py, \"--lr=${hyperparameters.lr}\", \"it's\"]\n"
         "  timeout: 61500ms\n"
         "  retry: 2\n"
         "  sweep: {method: grid, parallel: 2,\n"
         "          parameters: {hyperparameters.lr: [0.1, 0.2, 0.3]}}\n";

static void test_names(void **state)
{
    (void)state;
    char *s = render_k8s_name("spirals-asha", 63);
    assert_string_equal(s, "spirals-asha");
    free(s);
    char *a = render_k8s_name("Train_A", 63), *b = render_k8s_name("train-a", 63);
    assert_string_equal(b, "train-a");
    assert_int_equal(strncmp(a, "train-a-", 8), 0);
    assert_int_equal(strlen(a), 16);
    assert_string_not_equal(a, b);
    free(a);
    free(b);
    char longname[81];
    memset(longname, 'x', 80);
    longname[80] = '\0';
    s = render_k8s_name(longname, 63);
    assert_true(strlen(s) <= 63);
    assert_int_equal(s[strlen(s) - 9], '-');
    free(s);
    s = render_k8s_name("__", 63); /* nothing left: still a valid label */
    assert_int_equal(s[0], 'd');
    assert_int_equal(strlen(s), 9);
    free(s);
    s = render_k8s_name("a.b--c-", 63);
    assert_int_equal(strncmp(s, "a-b-c-", 6), 0);
    free(s);
}

static void test_labels(void **state)
{
    (void)state;
    assert_true(render_label_key_ok("nvidia.com/gpu.product"));
    assert_true(render_label_key_ok("gpu"));
    assert_false(render_label_key_ok("Nvidia.com/gpu"));
    assert_false(render_label_key_ok("nvidia.com/"));
    assert_false(render_label_key_ok("bad label"));
    assert_true(render_label_value_ok("NVIDIA-A100-SXM4-80GB"));
    assert_true(render_label_value_ok(""));
    assert_false(render_label_value_ok("Tesla V100"));
    assert_false(render_label_value_ok("-a"));
}

static void test_indexed_job(void **state)
{
    (void)state;
    json_t *objects = k8s(sweep_yaml, NULL);
    assert_int_equal(json_array_size(objects), 2);
    json_t *cm = json_array_get(objects, 0), *job = json_array_get(objects, 1);
    assert_string_equal(str(cm, "kind"), "ConfigMap");
    assert_string_equal(str(cm, "metadata name"), "lr-sweep-trials");
    assert_string_equal(str(cm, "data trial-1.json"), "{\"hyperparameters.lr\":0.2}");
    const char *script = str(cm, "data trial-2.sh");
    assert_non_null(strstr(script, "\nexec python train.py --lr=0.3 'it'\\''s'\n"));
    assert_non_null(strstr(script, "export LR=0.3\n"));  /* differs between trials */
    assert_null(strstr(script, "MODE"));                 /* the same in all: in the pod */
    assert_non_null(strstr(script, "DROVER_ATTEMPT="));
    assert_string_equal(str(job, "apiVersion"), "batch/v1");
    assert_string_equal(str(job, "kind"), "Job");
    assert_string_equal(str(job, "metadata name"), "lr-sweep");
    assert_string_equal(str(job, "spec completionMode"), "Indexed");
    assert_int_equal(num(job, "spec completions"), 3);
    assert_int_equal(num(job, "spec parallelism"), 2);
    assert_int_equal(num(job, "spec backoffLimitPerIndex"), 2);
    assert_int_equal(num(job, "spec backoffLimit"), 6);
    json_t *pod = at(job, "spec template spec");
    assert_string_equal(str(pod, "restartPolicy"), "Never");
    assert_int_equal(num(pod, "activeDeadlineSeconds"), 62); /* rounded up */
    assert_string_equal(str(pod, "nodeSelector nvidia.com/gpu.product"), "A100-SXM4-80GB");
    assert_string_equal(str(pod, "containers 0 image"), "ghcr.io/example/train:1.0");
    assert_string_equal(str(pod, "containers 0 resources limits nvidia.com/gpu"), "2");
    assert_string_equal(str(pod, "containers 0 resources requests cpu"), "4");
    assert_string_equal(str(pod, "containers 0 resources requests memory"), "16Gi");
    assert_string_equal(str(pod, "containers 0 command 1"),
                        "/etc/drover/trial-$(DROVER_ARRAY_INDEX).sh");
    assert_string_equal(str(pod, "volumes 2 configMap name"), "lr-sweep-trials");
    assert_string_equal(str(env(job, "DROVER_ARRAY_INDEX"), "valueFrom fieldRef fieldPath"),
                        "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    assert_string_equal(str(env(job, "DROVER_TASK_ID"), "value"),
                        "lr-sweep-t$(DROVER_ARRAY_INDEX)");
    assert_non_null(env(job, "DROVER_CHECKPOINT_DIR"));
    assert_non_null(env(job, "DROVER_METRICS_FILE"));
    assert_string_equal(str(env(job, "MODE"), "value"), "fast");
    assert_null(env(job, "LR"));
    json_decref(objects);
}

static void test_gpu_label_option(void **state)
{
    (void)state;
    json_t *objects = k8s(sweep_yaml, "example.com/gpu");
    json_t *job = json_array_get(objects, 1);
    assert_string_equal(str(job, "spec template spec nodeSelector example.com/gpu"),
                        "A100-SXM4-80GB");
    json_decref(objects);
    char *err = k8s_error(sweep_yaml, "Bad Key");
    assert_string_equal(err, "t.yaml: --gpu-label Bad Key: expected a label key such as "
                             "nvidia.com/gpu.product");
    free(err);
}

/* Without a sweep: one Job, no ConfigMap, the daemon's default retries for a trial; every '$'
 * doubled, so Kubernetes' $(VAR) leaves the command as written. */
static void test_single_job(void **state)
{
    (void)state;
    json_t *objects = k8s(HEAD "  image: busybox\n  command: [sh, -c, \"echo $HOME $(X)\"]\n"
                               "  env: {A: \"$(B)\"}\n", NULL);
    assert_int_equal(json_array_size(objects), 1);
    json_t *job = json_array_get(objects, 0);
    assert_string_equal(str(job, "metadata name"), "lr-sweep-t0");
    assert_null(at(job, "spec completionMode"));
    assert_int_equal(num(job, "spec backoffLimit"), 3);
    assert_null(at(job, "spec template spec activeDeadlineSeconds"));
    assert_null(at(job, "spec template spec nodeSelector"));
    assert_null(at(job, "spec template spec containers 0 resources"));
    assert_string_equal(str(job, "spec template spec containers 0 command 2"),
                        "echo $$HOME $$(X)");
    assert_string_equal(str(env(job, "A"), "value"), "$$(B)");
    assert_string_equal(str(env(job, "DROVER_TASK_ID"), "value"), "lr-sweep-t0");
    assert_null(env(job, "DROVER_ARRAY_INDEX"));
    json_decref(objects);
}

/* A sweep that changes the pod (gpu_count) cannot be one Indexed Job: a Job per trial. */
static void test_sweep_changing_resources(void **state)
{
    (void)state;
    json_t *objects = k8s(HEAD "  image: busybox\n  resources: {gpu_count: 1}\n"
                               "  command: [run]\n  retry: {attempts: 1}\n"
                               "  sweep: {parameters: {resources.gpu_count: [1, 2]}}\n", NULL);
    assert_int_equal(json_array_size(objects), 3);
    assert_string_equal(str(objects, "0 kind"), "ConfigMap");
    assert_null(at(objects, "0 data trial-0.sh"));
    for (int i = 0; i < 2; i++) {
        char name[32], index[8];
        json_t *job = json_array_get(objects, (size_t)i + 1);
        snprintf(name, sizeof name, "lr-sweep-t%d", i);
        snprintf(index, sizeof index, "%d", i);
        assert_string_equal(str(job, "metadata name"), name);
        assert_null(at(job, "spec completionMode"));
        assert_int_equal(num(job, "spec backoffLimit"), 0);
        assert_string_equal(str(job, "spec template spec containers 0 resources limits "
                                     "nvidia.com/gpu"), i == 0 ? "1" : "2");
        assert_string_equal(str(env(job, "DROVER_ARRAY_INDEX"), "value"), index);
        assert_string_equal(str(job, "spec template spec containers 0 command 0"), "run");
    }
    json_decref(objects);
}

static void test_pipeline(void **state)
{
    (void)state;
    json_t *objects = k8s("apiVersion: drover/v1\nkind: Pipeline\nmetadata: {name: Pipe_1}\n"
                          "spec:\n  image: base:1\n  stages:\n"
                          "    - {name: prep, command: [prep]}\n"
                          "    - {name: train, command: [train], needs: [prep], image: gpu:2,"
                          " retry: 4, resources: {memory: 1500000}}\n", NULL);
    assert_int_equal(json_array_size(objects), 2);
    json_t *prep = json_array_get(objects, 0), *train = json_array_get(objects, 1);
    const char *prep_name = str(prep, "metadata name");
    assert_int_equal(strncmp(prep_name, "pipe-1-prep-", 12), 0);
    assert_string_equal(str(train, "metadata annotations drover.io/needs"), prep_name);
    assert_string_equal(str(prep, "spec template spec containers 0 image"), "base:1");
    assert_string_equal(str(train, "spec template spec containers 0 image"), "gpu:2");
    assert_int_equal(num(prep, "spec backoffLimit"), 0);
    assert_int_equal(num(train, "spec backoffLimit"), 4);
    assert_string_equal(str(train, "spec template spec containers 0 resources requests "
                                   "memory"), "1500000");
    assert_string_equal(str(env(train, "DROVER_TASK_ID"), "value"), "Pipe_1-train");
    json_decref(objects);
}

static void test_errors(void **state)
{
    (void)state;
    char *err = k8s_error(HEAD "  command: [x]\n", NULL);
    assert_string_equal(err, "t.yaml: spec.image: required by --format k8s: the container "
                             "image to run (add it, or --set image=IMAGE)");
    free(err);
    err = k8s_error(HEAD "  image: \"a b\"\n  command: [x]\n", NULL);
    assert_string_equal(err, "t.yaml: spec.image: expected an image reference without spaces,"
                             " got \"a b\"");
    free(err);
    err = k8s_error(HEAD "  image: x\n  command: [x]\n  resources: {gpu_type: Tesla V100}\n",
                    NULL);
    assert_non_null(strstr(err, "resources.gpu_type: \"Tesla V100\" cannot be the value of "
                                "node label nvidia.com/gpu.product"));
    free(err);
    /* 20,001 trials: more than one ConfigMap can hold */
    err = k8s_error(HEAD "  image: x\n  hyperparameters: {lr: 0}\n"
                         "  command: [x, \"${hyperparameters.lr}\"]\n  sweep: {parameters:\n"
                         "    {hyperparameters.lr: {min: 0, max: 20000, step: 1}}}\n", NULL);
    assert_non_null(strstr(err, "t.yaml: the 20001 trials' parameters and commands are "));
    assert_non_null(strstr(err, "more than a ConfigMap holds (1048576)"));
    free(err);
}

/* Strings a YAML reader would take for something else are quoted; text with lines is a block. */
static void test_yaml(void **state)
{
    (void)state;
    json_t *objects = json_pack("[{s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:[s]}]", "a", "1", "b", "on",
                                "c", "", "d", "plain/text-1.0", "e", 5, "f", 1, "g",
                                "two\nlines\n", "h", "x: y");
    char *text;
    size_t len;
    FILE *fp = open_memstream(&text, &len);
    char *err = NULL;
    assert_int_equal(render_yaml(objects, fp, &err), 0);
    fclose(fp);
    assert_string_equal(text, "---\na: \"1\"\nb: \"on\"\nc: \"\"\nd: plain/text-1.0\ne: 5\n"
                              "f: true\ng: |\n  two\n  lines\nh:\n- \"x: y\"\n");
    free(text);
    json_decref(objects);
}

static void test_slurm(void **state)
{
    (void)state;
    struct exp_def *def = load(sweep_yaml);
    struct render_slurm_options opt = {.file = "t.yaml", .workdir = "/work dir"};
    char *err = NULL;
    json_t *files = render_slurm(def, &opt, &err);
    if (files == NULL)
        fail_msg("render: %s", err);
    assert_int_equal(json_array_size(files), 3);
    assert_string_equal(str(files, "1 file"), "lr-sweep-t1.sbatch");
    const char *text = str(files, "1 text");
    assert_int_equal(strncmp(text, "#!/bin/sh\n", 10), 0);
    static const char *const lines[] = {
        "#SBATCH --job-name=lr-sweep-t1\n", "#SBATCH --gres=gpu:A100-SXM4-80GB:2\n",
        "#SBATCH --cpus-per-task=4\n", "#SBATCH --mem=16384M\n", "#SBATCH --time=2\n",
        "#SBATCH --chdir=/work\\ dir\n", "export DROVER_TASK_ID=lr-sweep-t1\n",
        "export DROVER_ARRAY_INDEX=1\n", "export LR=0.2\n", "export MODE=fast\n",
        "\nexec python train.py --lr=0.2 'it'\\''s'\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (strstr(text, lines[i]) == NULL)
            fail_msg("no %s in:\n%s", lines[i], text);
    /* every #SBATCH line before the first command: sbatch stops reading them there */
    assert_true(strstr(text, "#SBATCH --chdir") < strstr(text, "export "));
    json_decref(files);
    exp_def_free(def);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),         cmocka_unit_test(test_labels),
        cmocka_unit_test(test_indexed_job),   cmocka_unit_test(test_gpu_label_option),
        cmocka_unit_test(test_single_job),    cmocka_unit_test(test_sweep_changing_resources),
        cmocka_unit_test(test_pipeline),      cmocka_unit_test(test_errors),
        cmocka_unit_test(test_yaml),          cmocka_unit_test(test_slurm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
