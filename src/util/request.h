/* What a task request may hold: one table of its fields (util/request.def), from which come the
 * check below, `drover submit`'s options and their --help (cli/cmd-submit.c), and the fields an
 * experiment's tasks may carry. A task request reaches the daemon through two doors:
 *
 *   submit   drover submit, or any client: every field below. The CLI runs
 *            request_check_submit() on the request it built before sending it, and the daemon
 *            runs it again on every submit it receives before anything changes.
 *   task     one task of an experiment (exp_run, a next round, a generator's proposals):
 *            request_check_task(), which exp/request.c runs in the client and the daemon.
 *            The fields are the same, minus those that belong to a submission rather than to
 *            one task: how it relates to other tasks (after, after_any, array — an experiment
 *            has needs and its own array), key, hold, and workdir (the experiment's). Such a
 *            field in a task is refused by name, never dropped.
 *
 * One function per door, so that no check lives only in the client (a script speaking the
 * protocol gets the same answers as `drover submit`) and a field means the same in both. What
 * depends on the machine or the store — GPU counts, memory and names, known dependency ids,
 * learned claims, the defaults of retries and backoff — only the daemon decides
 * (daemon/request.h). Absent and null mean the default; a field given is within its range. Keys
 * the table does not know are left to the caller (the protocol's "v" and "op", an experiment's
 * trial, params, needs and generator). Command and environment together must fit the exec
 * limits (limits_check_exec, util/limits.h). docs/CLI.md lists the fields. */
#ifndef DROVER_REQUEST_H
#define DROVER_REQUEST_H

#include <jansson.h>
#include <stdint.h>

#define REQUEST_MAX_STRING 4096            /* bytes in a name, key, profile or gpu_type */
#define REQUEST_MAX_URL 2048               /* bytes in a notify URL */
#define REQUEST_MAX_GPUS 64                /* GPUs one task may ask for (one node's) */
#define REQUEST_MAX_DURATION_MS 1000000000000000LL /* what parse_duration() takes */
#define REQUEST_MAX_ARRAY 100000           /* tasks in one array */
#define REQUEST_MAX_ARRAY_INDEX 100000000  /* the largest array index */
#define REQUEST_MAX_ARRAY_LIMIT 1000000    /* the largest %N */
#define REQUEST_MAX_BACKOFF 8              /* backoff values */
#define REQUEST_MAX_BACKOFF_MS 1000000000000LL
#define REQUEST_PREEMPT_GRACE_MS 60000     /* --preemptible alone: the grace to save and exit */
#define REQUEST_MAX_TIME_MS 253402300799999LL /* 9999-12-31T23:59:59.999Z */

/* What a field holds in JSON, and what `drover submit` takes for it. */
enum request_type {
    REQUEST_INT,      /* a whole number from min to max */
    REQUEST_SIZE,     /* bytes, min to max; the CLI takes 16G, 512M, 1.5T, … */
    REQUEST_DURATION, /* milliseconds, min to max; the CLI takes 90s, 15m, 2h, … */
    REQUEST_STRING,   /* min to max bytes */
    REQUEST_BOOL,     /* true or false; the flag takes no value */
    REQUEST_IDS,      /* an array of task ids, min to max; the CLI: ID[,ID…], repeatable */
    REQUEST_BACKOFF,  /* 1 to REQUEST_MAX_BACKOFF delays of min to max ms; the CLI: seconds */
    REQUEST_ENV,      /* {"NAME": "value"}, names not empty, without '='; the CLI: K=V over its
                       * own environment, repeatable */
    REQUEST_ARRAY,    /* {"index": [...], "limit": N}: 1 to REQUEST_MAX_ARRAY indices, ascending,
                       * unique, min to max; limit 0 (none) to REQUEST_MAX_ARRAY_LIMIT. The
                       * CLI: 0-99, 1,5,9, 0-99%4 */
    REQUEST_BACKEND,  /* "local" or "slurm" */
    REQUEST_WORKDIR,  /* the absolute path of an existing directory; the CLI: relative to . */
    REQUEST_TIME,     /* a point in time, epoch ms, min to max; the CLI takes 22:00, tomorrow
                       * 02:00, ISO 8601, +2h, @EPOCH (util/when.h) */
    REQUEST_COMMAND,  /* an array of strings, the first not empty; the CLI: after -- */
    REQUEST_GRACE,    /* true (a default grace), false, or min to max ms; the CLI: the flag
                       * alone, or --flag=DURATION */
    REQUEST_SIGNAL,   /* a signal a task can catch: a name ("TERM", "SIGUSR1") or 1 to 64 */
};

/* The doors a field belongs to (bits), and whether it must be there. */
#define REQUEST_SUBMIT 1u
#define REQUEST_TASK 2u
#define REQUEST_REQUIRED 4u

struct request_field {
    const char *key;    /* in the request */
    const char *option; /* drover submit's flag, without dashes; NULL: none (the command) */
    enum request_type type;
    long long min, max; /* the value's range (a string's length, each id, delay, index) */
    unsigned doors;     /* REQUEST_SUBMIT, REQUEST_TASK, REQUEST_REQUIRED */
    const char *help;   /* one line, for drover submit --help */
};

/* Every field, in util/request.def's order, then the command; terminated by {NULL}. */
extern const struct request_field request_fields[];

/* The field named key, or NULL. */
const struct request_field *request_field(const char *key);

/* Whether url is a webhook URL drover posts to: http:// or https://, a host, at most
 * REQUEST_MAX_URL bytes, no spaces or control characters. NULL, or why not (static). */
const char *request_url_problem(const char *url);

/* 0 if req is a well-formed submit request, else -1 with one line in *why (the caller frees). */
int request_check_submit(json_t *req, char **why);
/* The same, and *field (when not NULL) names the offending field's key (static), or NULL when
 * the fault is not one field's (the HTTP API's {"error", "field"}). */
int request_check_submit_field(json_t *req, char **why, const char **field);

/* A value as drover submit's option for f takes it, as text, made into the request's value: a
 * whole number ("8", "-3"), a size ("10G"), a duration ("15m"), ids ("1,2"), a backoff in
 * seconds ("5,30"), an array ("0-9%2") or a time ("22:00", "+2h": as of now, in this
 * process's time zone); a string is itself, a bool "true" or "false". The one
 * conversion the CLI and the HTTP API share, so that both say the same about a bad value.
 * Returns the value (new reference), or NULL with *why (one line, static). Ranges are
 * request_check_submit's to check. Not for env, workdir or the command (no text form). */
json_t *request_value_from_text(const struct request_field *f, const char *text,
                                const char **why);

/* The same for one task of an experiment. base_env (or NULL) is the environment the task's own
 * env goes on top of (the experiment's submitter's): the exec limits count both. */
int request_check_task(const json_t *task, const json_t *base_env, char **why);

#endif
