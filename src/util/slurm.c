/* The request → sbatch mapping (util/slurm.h, docs/SLURM.md). Pure: it reads its arguments and
 * allocates; every refusal is one line naming the field and why Slurm cannot take it. */
#include "util/slurm.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ULL * 1024ULL)

struct slurm_args {
    char **word;
    size_t count, cap;
};

/* Appends word (taking it) and keeps the list NULL-terminated. */
static void slurm_add(struct slurm_args *a, char *word)
{
    xgrow((void **)&a->word, &a->cap, a->count + 2, sizeof *a->word);
    a->word[a->count++] = word;
    a->word[a->count] = NULL;
}

static bool slurm_set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* A string sbatch would see cut at a line: names, paths, settings. (A NUL cannot reach here: C
 * strings end there, and every request string was checked as UTF-8 and JSON before.) */
static char *slurm_check_line(const char *what, const char *s)
{
    if (strpbrk(s, "\n\r") != NULL)
        return xasprintf("slurm: the %s has a line break, which sbatch cannot take", what);
    return NULL;
}

static char *slurm_check_length(const char *what, const char *s, size_t max)
{
    if (strlen(s) > max)
        return xasprintf("slurm: the %s is %zu bytes long; Slurm takes at most %zu", what,
                         strlen(s), max);
    return NULL;
}

static char *slurm_check_path(const char *what, const char *s)
{
    char *err = slurm_check_line(what, s);
    if (err == NULL)
        err = slurm_check_length(what, s, SLURM_MAX_PATH);
    if (err == NULL && s[0] != '/')
        err = xasprintf("slurm: the %s '%s' is not an absolute path", what, s);
    return err;
}

/* Options drover sets itself and reads back (the job id from --parsable's answer, the output
 * files, the array and the dependencies): slurm-args may not take them over. */
static const char *const slurm_reserved_long[] = {
    "--array", "--dependency", "--export", "--output", "--error", "--chdir", "--wrap", NULL,
};
static const char slurm_reserved_short[] = "adoeD";

static char *slurm_check_extra(const char *word)
{
    char *err = slurm_check_line("slurm-args word", word);
    if (err != NULL)
        return err;
    for (const char *const *opt = slurm_reserved_long; *opt; opt++) {
        size_t n = strlen(*opt);
        if (strncmp(word, *opt, n) == 0 && (word[n] == '\0' || word[n] == '='))
            return xasprintf("slurm: slurm-args may not set %s: drover sets it itself", *opt);
    }
    if (word[0] == '-' && word[1] != '\0' && strchr(slurm_reserved_short, word[1]) != NULL)
        return xasprintf("slurm: slurm-args may not set -%c: drover sets it itself", word[1]);
    return NULL;
}

static int slurm_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "--array=0-9,12,20-22%4": the indices sorted, duplicates dropped, runs folded into ranges. */
static char *slurm_array(const struct slurm_job *job, int max_size, char **err)
{
    int64_t *index = xmalloc(job->nindex * sizeof *index);
    memcpy(index, job->array_index, job->nindex * sizeof *index);
    qsort(index, job->nindex, sizeof *index, slurm_cmp_i64);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (out == NULL)
        fatalx("open_memstream: out of memory");
    fputs("--array=", out);
    if (index[0] < 0) {
        *err = xasprintf("slurm: array index %" PRId64 " is negative", index[0]);
        goto fail;
    }
    if (index[job->nindex - 1] >= max_size) {
        *err = xasprintf("slurm: array index %" PRId64 " is above Slurm's largest, %d "
                         "(MaxArraySize %d)",
                         index[job->nindex - 1], max_size - 1, max_size);
        goto fail;
    }
    const char *sep = "";
    for (size_t i = 0; i < job->nindex;) {
        size_t j = i;
        while (j + 1 < job->nindex && index[j + 1] <= index[j] + 1)
            j++; /* a run of consecutive indices (or duplicates) */
        if (index[j] == index[i])
            fprintf(out, "%s%" PRId64, sep, index[i]);
        else
            fprintf(out, "%s%" PRId64 "-%" PRId64, sep, index[i], index[j]);
        sep = ",";
        i = j + 1;
    }
    if (job->array_limit > 0)
        fprintf(out, "%%%d", job->array_limit);
    fclose(out);
    free(index);
    return text;
fail:
    fclose(out);
    free(text);
    free(index);
    return NULL;
}

/* "afterok:1:2,afterany:3", or NULL with *err set when an id cannot be a Slurm job's. */
static char *slurm_dependency(const struct slurm_job *job, char **err)
{
    const struct {
        const char *kind;
        const int64_t *id;
        size_t count;
    } lists[] = {{"afterok", job->afterok, job->nafterok},
                 {"afterany", job->afterany, job->nafterany}};
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (out == NULL)
        fatalx("open_memstream: out of memory");
    fputs("--dependency=", out);
    const char *sep = "";
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        if (lists[l].count == 0)
            continue;
        fprintf(out, "%s%s", sep, lists[l].kind);
        for (size_t i = 0; i < lists[l].count; i++) {
            int64_t id = lists[l].id[i];
            if (id < 1 || id > SLURM_MAX_JOB_ID) {
                *err = xasprintf("slurm: %s dependency %" PRId64 " is not a Slurm job id",
                                 lists[l].kind, id);
                fclose(out);
                free(text);
                return NULL;
            }
            fprintf(out, ":%" PRId64, id);
        }
        sep = ",";
    }
    fclose(out);
    return text;
}

/* RUN_DIR with each '%' doubled (sbatch expands %j, %a, … in --output; "%%" is a '%'), and no
 * trailing '/'. A '\' is refused: its presence turns off every expansion, %a included. */
static char *slurm_run_dir(const char *run_dir, char **err)
{
    if ((*err = slurm_check_path("run directory", run_dir)) != NULL)
        return NULL;
    if (strchr(run_dir, '\\') != NULL) {
        *err = xasprintf("slurm: the run directory '%s' has a '\\', which turns off sbatch's "
                         "file name patterns",
                         run_dir);
        return NULL;
    }
    size_t len = strlen(run_dir);
    while (len > 1 && run_dir[len - 1] == '/')
        len--;
    char *out = xmalloc(2 * len + 1), *p = out;
    for (size_t i = 0; i < len; i++) {
        if (run_dir[i] == '%')
            *p++ = '%';
        *p++ = run_dir[i];
    }
    *p = '\0';
    return out;
}

/* Numbers sbatch can take (the array's indices and the dependencies' ids are checked as their
 * flags are built). */
static char *slurm_check_numbers(const struct slurm_job *job, const struct slurm_settings *s)
{
    if (job->gpus < 0)
        return xasprintf("slurm: gpus %d is negative", job->gpus);
    if (job->cpus < 0)
        return xasprintf("slurm: cpus %d is negative", job->cpus);
    if (job->timeout_ms < 0)
        return xasprintf("slurm: timeout %" PRId64 " ms is negative", job->timeout_ms);
    if (job->timeout_ms > 0 && (job->timeout_ms - 1) / 60000 + 1 > SLURM_MAX_TIME_MIN)
        return xasprintf("slurm: timeout %" PRId64 " ms is longer than Slurm's largest time "
                         "limit, %d minutes (68 years)",
                         job->timeout_ms, SLURM_MAX_TIME_MIN);
    if (job->array_limit < 0)
        return xasprintf("slurm: array limit %d is negative", job->array_limit);
    if (job->array_limit > 0 && job->nindex == 0)
        return xasprintf("slurm: array limit %%%d without array indices", job->array_limit);
    if (job->nindex > 0 && job->array_index == NULL)
        return xstrdup("slurm: array indices missing");
    if (s->warn_signal_s > SLURM_MAX_WARN_S)
        return xasprintf("slurm: warning signal %d s before the limit is above Slurm's largest, "
                         "%d s",
                         s->warn_signal_s, SLURM_MAX_WARN_S);
    if (s->max_array_size < 0)
        return xasprintf("slurm: MaxArraySize %d is negative", s->max_array_size);
    return NULL;
}

/* Strings sbatch can take (the run directory is checked as its flags are built). */
static char *slurm_check_strings(const struct slurm_job *job, const struct slurm_settings *s)
{
    char *err = NULL;
    if (!slurm_set(job->script))
        return xstrdup("slurm: no batch script");
    if ((err = slurm_check_path("batch script", job->script)))
        return err;
    if (slurm_set(job->name) && ((err = slurm_check_line("job name", job->name)) ||
                                 (err = slurm_check_length("job name", job->name, SLURM_MAX_NAME))))
        return err;
    if (slurm_set(job->workdir) && (err = slurm_check_path("working directory", job->workdir)))
        return err;
    if (slurm_set(job->gpu_type) && (err = slurm_check_line("GPU type", job->gpu_type)))
        return err;
    if (slurm_set(job->gpu_type) && strpbrk(job->gpu_type, ":, \t") != NULL)
        return xasprintf("slurm: the GPU type '%s' has a ':', ',' or blank, which a Slurm GRES "
                         "type cannot have",
                         job->gpu_type);
    const struct {
        const char *what, *value;
    } settings[] = {{"slurm-partition", s->partition},
                    {"slurm-account", s->account},
                    {"slurm-qos", s->qos}};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (slurm_set(settings[i].value) &&
            (err = slurm_check_line(settings[i].what, settings[i].value)))
            return err;
    if (s->nextra > 0 && s->extra_args == NULL)
        return xstrdup("slurm: slurm-args missing");
    for (size_t i = 0; i < s->nextra; i++)
        if ((err = slurm_check_extra(s->extra_args[i])))
            return err;
    return NULL;
}

/* The flags that come from the request's resources. */
static void slurm_resources(const struct slurm_job *job, struct slurm_args *a)
{
    int gpus = job->gpus == 0 && slurm_set(job->gpu_type) ? 1 : job->gpus;
    if (gpus > 0 && slurm_set(job->gpu_type))
        slurm_add(a, xasprintf("--gres=gpu:%s:%d", job->gpu_type, gpus));
    else if (gpus > 0)
        slurm_add(a, xasprintf("--gres=gpu:%d", gpus));
    if (job->cpus > 0)
        slurm_add(a, xasprintf("--cpus-per-task=%d", job->cpus));
    if (job->mem > 0)
        slurm_add(a, xasprintf("--mem=%lluM",
                               (unsigned long long)(job->mem / MIB + (job->mem % MIB != 0))));
    if (job->timeout_ms > 0) /* plain minutes, rounded up: 60 s → 1, 61 s → 2 */
        slurm_add(a, xasprintf("--time=%" PRId64, (job->timeout_ms - 1) / 60000 + 1));
}

int slurm_sbatch_argv(const struct slurm_job *job, const struct slurm_settings *s, char ***argv,
                      char **err)
{
    static const struct slurm_settings none = {0};
    struct slurm_args a = {0};
    char *why = NULL, *word;
    if (s == NULL)
        s = &none;
    *argv = NULL;
    if ((why = slurm_check_numbers(job, s)) != NULL || (why = slurm_check_strings(job, s)) != NULL)
        goto fail;
    slurm_add(&a, xstrdup("sbatch"));
    slurm_add(&a, xstrdup("--parsable"));
    /* The environment goes through the batch script: --export's commas cannot be escaped. */
    slurm_add(&a, xstrdup("--export=NONE"));
    if (slurm_set(job->name))
        slurm_add(&a, xasprintf("--job-name=%s", job->name));
    else if (job->task > 0)
        slurm_add(&a, xasprintf("--job-name=drover-%" PRId64, job->task));
    else
        slurm_add(&a, xstrdup("--job-name=drover"));
    if (slurm_set(s->partition))
        slurm_add(&a, xasprintf("--partition=%s", s->partition));
    if (slurm_set(s->account))
        slurm_add(&a, xasprintf("--account=%s", s->account));
    if (slurm_set(s->qos))
        slurm_add(&a, xasprintf("--qos=%s", s->qos));
    if (job->nindex > 0) {
        int max_size = s->max_array_size > 0 ? s->max_array_size : SLURM_MAX_ARRAY_SIZE;
        if ((word = slurm_array(job, max_size, &why)) == NULL)
            goto fail;
        slurm_add(&a, word);
    }
    slurm_resources(job, &a);
    if (s->warn_signal_s >= 0)
        slurm_add(&a, xasprintf("--signal=B:USR1@%d",
                                s->warn_signal_s > 0 ? s->warn_signal_s : SLURM_WARN_S));
    if (job->nafterok + job->nafterany > 0) {
        if ((word = slurm_dependency(job, &why)) == NULL)
            goto fail;
        slurm_add(&a, word);
        slurm_add(&a, xstrdup("--kill-on-invalid-dep=yes"));
    }
    if (slurm_set(job->workdir))
        slurm_add(&a, xasprintf("--chdir=%s", job->workdir));
    if (slurm_set(job->run_dir)) {
        char *dir = slurm_run_dir(job->run_dir, &why);
        if (dir == NULL)
            goto fail;
        const char *each = job->nindex > 0 ? "/%a" : "";
        char *output = xasprintf("%s%s/stdout", dir, each);
        char *error = xasprintf("%s%s/stderr", dir, each);
        free(dir);
        why = slurm_check_length("run directory's stdout path", output, SLURM_MAX_PATH);
        if (why == NULL) {
            slurm_add(&a, xasprintf("--output=%s", output));
            slurm_add(&a, xasprintf("--error=%s", error));
        }
        free(output);
        free(error);
        if (why != NULL)
            goto fail;
    }
    for (size_t i = 0; i < s->nextra; i++)
        slurm_add(&a, xstrdup(s->extra_args[i]));
    slurm_add(&a, xstrdup(job->script));
    *argv = a.word;
    return 0;
fail:
    slurm_argv_free(a.word);
    if (err != NULL)
        *err = why;
    else
        free(why);
    return -1;
}

void slurm_argv_free(char **argv)
{
    if (argv == NULL)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

int slurm_split_words(const char *text, char ***words, char **err)
{
    size_t n = 0, cap = 0, len = strlen(text);
    char **v = NULL;
    char *word = xmalloc(len + 1);
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (*p == '\0')
            break;
        size_t w = 0;
        char quote = 0;
        for (; *p != '\0' && (quote || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
            if (quote == '\'' ? *p == '\'' : quote == '"' ? *p == '"' : false) {
                quote = 0;
            } else if (!quote && (*p == '\'' || *p == '"')) {
                quote = *p;
            } else if (*p == '\\' && quote != '\'' && p[1] != '\0') {
                word[w++] = *++p;
            } else {
                word[w++] = *p;
            }
        }
        if (quote) {
            *err = xasprintf("unterminated %c quote", quote);
            free(word);
            for (size_t i = 0; i < n; i++)
                free(v[i]);
            free(v);
            *words = NULL;
            return -1;
        }
        xgrow((void **)&v, &cap, n + 2, sizeof *v);
        v[n++] = xstrndup(word, w);
    }
    free(word);
    xgrow((void **)&v, &cap, n + 1, sizeof *v);
    v[n] = NULL;
    *words = v;
    return 0;
}
