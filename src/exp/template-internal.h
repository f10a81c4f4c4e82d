/* exp/template-internal.h — what the files of exp/template share, and nothing else includes:
 * the checking context with its errors and spec paths (exp/template.c), the schema
 * (exp/schema.c, its table exp/schema-table.c, a pipeline's stages exp/stages.c), the sweep
 * (exp/sweep.c), ${…} (exp/subst.c), the tasks (exp/expand.c), --dry-run's listing
 * (exp/print.c) and the YAML reader (exp/yaml.c). exp/template.h is the interface. */
#ifndef DROVER_EXP_TEMPLATE_INTERNAL_H
#define DROVER_EXP_TEMPLATE_INTERNAL_H

#include "exp/template.h"
#include "util/limits.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One load or expansion: where errors point, and the first error. */
struct template {
    const char *file;   /* NULL: a stored spec; errors begin with name and carry no position */
    const char *name;
    json_t *where;      /* path -> "FILE:L:C" of the node (exp/yaml.c, then --set) */
    json_t *where_keys; /* path -> "FILE:L:C" of the key naming the node */
    json_t *overlay;    /* path -> location of the sweep value a trial put there */
    const json_t *spec; /* the spec being checked, for sweep paths */
    char *err;
    /* ${…} (exp/subst.c): what this load or call has substituted so far, against
     * LIMIT_TEMPLATE_EXPANDED */
    size_t expanded;    /* bytes of every substituted string of the spec (all trials) */
    size_t held;        /* bytes of the strings of mappings being rendered into a ${…} */
    json_t *memo;       /* node -> [text, height]: each node of a trial substituted once */
    json_t *scripts;    /* path -> true: the script argument of a `sh -c` command */
    json_t *warnings;   /* the load's warnings, one line each; NULL: not collected */
};

/* template_fail's flags */
#define AT_KEY 1     /* locate the key that names the node, not its value */
#define NAMES_PATH 2 /* the message names the path itself, so a stored spec need not */

/* --- exp/yaml.c (no header of its own) --- */

int exp_yaml_read(const char *file, json_t **out, json_t *where, json_t *where_keys, char **err);
/* The same on text (len bytes, NUL-terminated), its errors located as in file (a label). */
int exp_yaml_read_text(const char *file, const char *text, size_t len, json_t **out,
                       json_t *where, json_t *where_keys, char **err);
int exp_yaml_scalar(const char *text, json_t **out, char **err);

/* --- exp/template.c: errors and paths --- */

/* "a.b" + "c" -> "a.b.c"; "" + "c" -> "c" (malloc'd). */
char *template_join(const char *path, const char *key);
/* "a.b" + 2 -> "a.b[2]" (malloc'd). */
char *template_index(const char *path, size_t i);
/* Where path is, as the message's prefix (malloc'd): its own position or its nearest located
 * ancestor's. */
char *template_location(struct template *t, const char *path, int flags);
/* Keeps the first error only; always returns -1. */
__attribute__((format(printf, 4, 5))) int template_fail(struct template *t, const char *path,
                                                        int flags, const char *fmt, ...);
/* "PATH: expected WHAT, got GOT (WHY)"; why (or NULL) is a parser's reason. Returns -1. */
int template_expected_because(struct template *t, const char *path, const char *what,
                              const json_t *got, const char *why);
int template_expected(struct template *t, const char *path, const char *what, const json_t *got);
/* How a value is shown after "got" (malloc'd): strings quoted, 2.0 keeps its point. */
char *template_got(const json_t *v);
/* open_memstream that cannot fail. */
FILE *template_memstream(char **buf, size_t *len);
/* The node at dotted spec path `path` below root, or NULL with *suggestion (malloc'd, or NULL):
 * the path with its first missing key replaced by a likely intended one. */
json_t *template_lookup(const json_t *root, const char *path, char **suggestion);
/* No empty component: not "", ".a", "a." or "a..b". */
bool template_good_path(const char *path);

/* --- exp/schema-table.c: what a template may hold --- */

enum schema_type {
    TYPE_STRING, TYPE_INTEGER, TYPE_COUNT, TYPE_POSITIVE, TYPE_NUMBER, TYPE_BOOL, TYPE_SIZE,
    TYPE_DURATION,
    TYPE_MAPPING, TYPE_FREE, TYPE_ARGV, TYPE_STRINGS, TYPE_ENV, TYPE_RETRY, TYPE_BACKOFF,
    TYPE_BASELINE, TYPE_IMPROVEMENT, TYPE_PARAMETERS, TYPE_STAGES,
    TYPE_GRACE,  /* true, false, or a duration (preemptible: the grace) */
    TYPE_SIGNAL, /* a signal a task can catch: TERM, SIGUSR1, 10 */
};

/* One key of the schema; a mapping's keys end with {NULL}. */
struct schema_key {
    const char *key;
    enum schema_type type;
    bool required;
    const struct schema_key *children; /* TYPE_MAPPING, and the mapping forms of the others */
    const char *const *choices;        /* TYPE_STRING: the allowed values, NULL-terminated */
    int (*check)(struct template *t, const json_t *value, const char *path); /* after the type */
};

/* The document's keys (apiVersion, kind, metadata, spec), and spec's alone (a stored spec). */
extern const struct schema_key schema_top[];
extern const struct schema_key schema_spec_key;

/* --- exp/schema.c: the walk and the values --- */

/* Offers candidate as the nearest to word if it is closer than *best so far and close enough
 * to be a typo. */
void schema_consider(const char *word, const char *candidate, const char **best,
                     size_t *best_distance);
/* A size (an integer, "16G", "16Gi") or a duration ("90s", or seconds); 0, or -1 with *why. */
int schema_size(const json_t *v, uint64_t *out, const char **why);
int schema_duration(const json_t *v, int64_t *ms, const char **why);
/* A whole document (apiVersion, kind, metadata, spec) against the schema. */
int schema_check_document(struct template *t, const json_t *root);
/* A spec alone: a stored one, or a trial's after its sweep values were put in. */
int schema_check_spec(struct template *t, const json_t *spec);
/* What depends on kind: command or stages, and no sweep in a Pipeline. */
int schema_check_kind(struct template *t, enum exp_kind kind, const json_t *spec);

/* --- exp/stages.c: a pipeline's stages --- */

#define STAGES_MAX 1000 /* stages in one pipeline */

/* spec.stages, after each stage's keys were checked: unique names, needs, no cycle. */
int stages_check(struct template *t, const json_t *stages, const char *path);

/* --- exp/sweep.c: the sweep --- */

/* spec.sweep, after its keys were checked: parameter paths, ranges, distributions, size. */
int sweep_check(struct template *t, const json_t *sweep, const char *path);
bool sweep_is_random(const json_t *sweep);
/* The grid's size (random: max_trials; no sweep (NULL): 1), and in *ntrials how many trials a
 * load creates (SIZE_MAX: more than LIMIT_TEMPLATE_TASKS). */
double sweep_space(const json_t *sweep, size_t *ntrials);
/* Trial `trial`'s values, {path: value}; origins gets path -> the document path of each value's
 * source. New reference. */
json_t *sweep_trial_params(const json_t *sweep, size_t trial, uint64_t seed, json_t *origins);
/* sweep.seed if the spec fixes one, else seed. */
uint64_t sweep_seed(const json_t *spec, unsigned seed);

/* --- exp/subst.c: ${…}, and values as text --- */

/* A scalar as it goes into argv, env and ${…} (malloc'd); null is empty. */
char *subst_scalar_text(const json_t *v);
/* Any value as text (malloc'd): a scalar as subst_scalar_text, a mapping or list as JSON. */
char *subst_text(const json_t *v);
/* Compact JSON with drover's number format. */
void subst_json(FILE *fp, const json_t *v);
/* s[0 .. len) in POSIX shell single quotes (malloc'd). */
char *subst_shell_quote(const char *s, size_t len);
/* Whether s[0 .. len) holds only characters no shell gives a meaning to. */
bool subst_shell_plain(const char *s, size_t len);
/* Writes s as one word a POSIX shell reads back as s: bare when nothing in it means anything to
 * a shell, else in single quotes. */
void subst_shell_word(FILE *fp, const char *s);
/* The whole of root (a spec) substituted, each node once. New reference, or NULL with t->err. */
json_t *subst_spec(struct template *t, const json_t *root);

/* --- exp/expand.c: the tasks --- */

/* One trial of a checked spec with params put in; 0, or -1 with t->err. */
int expand_trial(struct template *t, const json_t *spec, const char *name, int trial,
                 const json_t *params, const json_t *origins, struct exp_task *task);
/* Trials [first, first + n) of a checked Experiment spec into *out (n > 0; malloc'd). */
int expand_trials(struct template *t, const json_t *spec, const char *name, size_t first,
                  size_t n, unsigned seed, struct exp_task **out);
/* One task per stage of a checked Pipeline spec. */
int expand_pipeline(struct template *t, const json_t *spec, struct exp_task **out, size_t *nout);
/* Frees a NULL-terminated list of strings and the list; NULL is a no-op. */
void expand_strings_free(char **list);

#endif
