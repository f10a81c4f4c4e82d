/* drover exp render FILE.yaml --format k8s|slurm: an experiment as another engine's input,
 * printed without running anything and without a daemon (docs/EXPERIMENTS.md, "Rendering for
 * Kubernetes and Slurm"). The template is loaded as `exp run` loads it; exp/render.h makes the
 * Kubernetes objects (one YAML stream on stdout, or --output DIR: NAME.KIND.yaml each) or the
 * batch scripts (one after another on stdout, or DIR/TASK.sbatch each). */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exp/render.h"
#include "exp/template.h"
#include "util/parse.h"
#include "util/xalloc.h"

/* text into DIR/FILE (made or replaced); EXIT_OK, or EXIT_FAILED after saying why. */
static int render_write(const struct cmd_entry *cmd, const char *dir, const char *file,
                        const char *text)
{
    char *path = xasprintf("%s/%s", dir, file);
    FILE *fp = fopen(path, "w");
    int rc = EXIT_OK;
    if (fp == NULL || fputs(text, fp) == EOF || fclose(fp) != 0) {
        fprintf(stderr, "drover %s: cannot write %s: %s\n", cmd->name, path, strerror(errno));
        rc = EXIT_FAILED;
    } else {
        printf("%s\n", path);
    }
    free(path);
    return rc;
}

/* The files of a render ([{"file", "text"}]) into dir, or their texts one after another on
 * stdout (dir NULL). Takes files. */
static int render_emit(const struct cmd_entry *cmd, json_t *files, const char *dir)
{
    size_t i;
    json_t *f;
    int rc = EXIT_OK;
    json_array_foreach(files, i, f) {
        const char *text = json_string_value(json_object_get(f, "text"));
        if (dir != NULL)
            rc = render_write(cmd, dir, json_string_value(json_object_get(f, "file")), text);
        else /* a blank line between two scripts */
            fprintf(stdout, "%s%s", i > 0 ? "\n" : "", text);
        if (rc != EXIT_OK)
            break;
    }
    json_decref(files);
    if (rc == EXIT_OK && fflush(stdout) != 0) {
        fprintf(stderr, "drover %s: cannot write stdout: %s\n", cmd->name, strerror(errno));
        rc = EXIT_FAILED;
    }
    return rc;
}

/* The objects as YAML: one stream, or (per_object) one file each, NAME.KIND.yaml. NULL after
 * saying why. Takes objects. */
static json_t *render_k8s_files(const struct cmd_entry *cmd, json_t *objects, bool per_object)
{
    json_t *files = json_array(), *o;
    size_t i;
    for (i = 0; i < (per_object ? json_array_size(objects) : 1); i++) {
        json_t *part = per_object ? json_pack("[O]", json_array_get(objects, i))
                                  : json_incref(objects);
        char *text, *err;
        size_t len;
        FILE *fp = open_memstream(&text, &len);
        if (fp == NULL)
            fatalx("out of memory");
        int rc = render_yaml(part, fp, &err);
        fclose(fp);
        json_decref(part);
        if (rc < 0) {
            fprintf(stderr, "drover %s: %s\n", cmd->name, err);
            free(err);
            free(text);
            json_decref(files);
            json_decref(objects);
            return NULL;
        }
        o = json_array_get(objects, i);
        char *kind = xstrdup(json_string_value(json_object_get(o, "kind")));
        for (char *c = kind; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        char *name = xasprintf("%s.%s.yaml", json_string_value(json_object_get(
                                                 json_object_get(o, "metadata"), "name")), kind);
        json_array_append_new(files, json_pack("{s:s,s:s}", "file", name, "text", text));
        free(name);
        free(kind);
        free(text);
    }
    json_decref(objects);
    return files;
}

static int exp_render(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *format = cmd_opt(cmd, args, "format");
    const char *gpu_label = cmd_opt(cmd, args, "gpu-label");
    const char *dir = cmd_opt(cmd, args, "output");
    if (format == NULL)
        format = "k8s";
    bool k8s = strcmp(format, "k8s") == 0;
    if (!k8s && strcmp(format, "slurm") != 0)
        return cmd_usage_error(cmd, "--format %s: expected k8s or slurm", format);
    if (gpu_label != NULL && !k8s)
        return cmd_usage_error(cmd, "--gpu-label: only with --format k8s");
    struct stat st;
    errno = 0;
    if (dir != NULL && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return cmd_usage_error(cmd, "--output %s: %s", dir,
                               errno == ENOENT || errno == 0 ? "not a directory"
                                                             : strerror(errno));
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL)
        return cmd_usage_error(cmd, "cannot read the working directory");
    size_t nsets;
    char *const *sets = cmd_opt_values(cmd, args, "set", &nsets);
    for (size_t i = 0; i < nsets; i++) {
        size_t bad = utf8_check(sets[i]);
        if (bad > 0)
            return cmd_usage_error(cmd, "--set #%zu: not valid UTF-8 (byte %zu)", i + 1, bad);
    }
    struct exp_def *def;
    char *err;
    if (exp_load(args->argv[0], sets, nsets, (unsigned)time(NULL), &def, &err) < 0) {
        int rc = cmd_usage_error(cmd, "%s", err);
        free(err);
        return rc;
    }
    json_t *files;
    if (k8s) {
        struct render_k8s_options opt = {.file = args->argv[0], .gpu_label = gpu_label};
        files = render_k8s(def, &opt, &err);
    } else {
        struct render_slurm_options opt = {.file = args->argv[0], .workdir = cwd};
        files = render_slurm(def, &opt, &err);
    }
    exp_def_free(def);
    if (files == NULL) {
        int rc = cmd_usage_error(cmd, "%s", err);
        free(err);
        return rc;
    }
    if (k8s && (files = render_k8s_files(cmd, files, dir != NULL)) == NULL)
        return EXIT_FAILED;
    return render_emit(cmd, files, dir);
}

static const struct cmd_opt exp_render_opts[] = {
    {"set", 0, true, true, "KEY=VALUE first: hyperparameters.lr=0.1, image=IMAGE, …"},
    {"format", 0, true, false, "k8s (the default): batch/v1 Jobs and a ConfigMap, as YAML;"
                               " slurm: a batch script per task"},
    {"output", 0, true, false, "DIR: one file per object or script there, not stdout"},
    {"gpu-label", 0, true, false, "the node label resources.gpu_type selects (default "
                                  RENDER_GPU_LABEL ")"},
    {NULL, 0, false, false, NULL},
};

const struct cmd_entry cmd_exp_render = {
    .name = "exp", .sub = "render",
    .usage = "exp render FILE.yaml [--set KEY=VALUE …] [--format k8s|slurm] [--gpu-label KEY]"
             " [--output DIR]",
    .summary = "print an experiment as Kubernetes Jobs or sbatch scripts; run nothing",
    .opts = exp_render_opts, .min_args = 1, .max_args = 1, .exec = exp_render,
};
