/* fuzz_template — experiment templates (src/exp/): YAML text -> exp_load (read, --set, schema,
 * sweep, ${…} expansion) -> what `drover exp run` and the daemon do with the result.
 *
 * The input is the template, then optionally a NUL byte and up to FUZZ_MAX_SETS `--set PATH=VALUE`
 * strings separated by NUL bytes. The template is a memfd, loaded by its /proc/self/fd path.
 * A template that loads is then taken through what follows it in drover:
 *   - the dry run's listing (exp_print_tasks) and the exp_run request the CLI builds
 *     (exp_task_to_json for every task, exp_request_check on the request);
 *   - the daemon's second look at the stored spec (exp_spec_check), which must accept what the
 *     loader accepted, or `drover exp run` would send what the daemon refuses;
 *   - a next round (exp_trials after the first round, at most FUZZ_NEXT_ROUND trials) and a
 *     generator's proposal (exp_trial_from with the first trial's parameters).
 * The seed for random sweeps is fixed, so a crash reproduces.
 */
#include "fuzz.h"
#include "exp/request.h"
#include "exp/template.h"

#define FUZZ_MAX_SETS 8
#define FUZZ_NEXT_ROUND 4

static struct fuzz_file file;
static FILE *devnull;

static void fuzz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_template: %s: %s\n", what, detail ? detail : "");
    abort();
}

/* The request `drover exp run` sends (cli/cmd-exp.c), checked as the CLI and the daemon do. */
static void fuzz_request(const struct exp_def *def)
{
    json_t *tasks = json_array();
    for (size_t i = 0; i < def->ntasks; i++)
        json_array_append_new(tasks, exp_task_to_json(&def->tasks[i]));
    json_t *req = json_pack("{s:i,s:s,s:s,s:s,s:O,s:o,s:i,s:I,s:i,s:{s:s},s:s}", "v", 1, "op",
                            "exp_run", "kind",
                            def->kind == EXP_PIPELINE ? "Pipeline" : "Experiment", "name",
                            def->name, "spec", def->spec, "tasks", tasks, "parallel",
                            def->parallel, "space", (json_int_t)def->space, "seed", 1, "env",
                            "PATH", "/usr/bin:/bin", "workdir", "/work");
    if (req == NULL)
        fuzz_fail("the exp_run request cannot be built", def->name);
    char *why = NULL, *text = json_dumps(req, JSON_COMPACT);
    if (text == NULL)
        fuzz_fail("the exp_run request cannot be serialised", def->name);
    struct exp_graph graph;
    memset(&graph, 0, sizeof graph);
    if (exp_request_check(req, &graph, &why) == 0)
        exp_graph_free(&graph);
    free(why);
    free(text);
    json_decref(req);
}

static void fuzz_after_load(const struct exp_def *def)
{
    char *err = NULL;
    exp_print_tasks(def, devnull);
    fuzz_request(def);
    if (exp_spec_check(def->spec, def->name, def->kind, &err) < 0)
        fuzz_fail("exp_spec_check refuses the spec exp_load accepted", err);
    if (def->kind != EXP_EXPERIMENT || def->ntasks == 0)
        return;
    struct exp_task *next = NULL, one;
    size_t nnext = 0, left = def->space > def->ntasks ? def->space - def->ntasks : 0;
    if (left > 0 && exp_trials(def->spec, def->name, def->ntasks,
                               left < FUZZ_NEXT_ROUND ? left : FUZZ_NEXT_ROUND, 1, &next, &nnext,
                               &err) == 0) {
        for (size_t i = 0; i < nnext; i++)
            exp_task_clear(&next[i]);
    }
    free(next);
    free(err);
    err = NULL;
    if (exp_trial_from(def->spec, def->name, (int)def->ntasks, def->tasks[0].params, &one,
                       &err) == 0)
        exp_task_clear(&one);
    free(err);
}

static bool fuzz_newline_set(char **sets, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strchr(sets[i], '\n') != NULL)
            return true;
    return false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_file_open(&file, "template.yaml");
    devnull = fopen("/dev/null", "w");
    if (devnull == NULL)
        fatalx("fuzz_template: cannot open /dev/null");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t yaml_len = fuzz_first_len(data, size), nsets = 0;
    char *buf = NULL, *sets[FUZZ_MAX_SETS];
    if (yaml_len < size)
        nsets = fuzz_split(data + yaml_len + 1, size - yaml_len - 1, &buf, sets, FUZZ_MAX_SETS);
    fuzz_file_set(&file, data, yaml_len);
    struct exp_def *def = NULL;
    char *err = NULL;
    if (exp_load(file.path, sets, nsets, 1, &def, &err) == 0) {
        fuzz_after_load(def);
        exp_def_free(def);
    } else if (err == NULL || (strchr(err, '\n') != NULL && !fuzz_newline_set(sets, nsets))) {
        fuzz_fail("an error that is not one line", err); /* unless a --set had one */
    }
    free(err);
    free(buf);
    return 0;
}
