/* What a submit request may hold. The CLI runs request_check_submit() on the request it built
 * before sending it, and the daemon runs it on every submit it receives before anything changes:
 * one function, so that no check lives only in the client (a script speaking the protocol gets
 * the same answers as `drover submit`). What depends on the machine or the store — GPU counts and
 * memory, known dependency ids, learned claims — only the daemon can check.
 *
 * The request (docs/CLI.md has the flags):
 *   command    array of strings, the first not empty          (required)
 *   workdir    absolute path of an existing directory          (required)
 *   env        {"NAME": "value"}: names not empty, without '='
 *   name, key, profile                 strings of 1 to REQUEST_MAX_STRING bytes
 *   gpus, gpu_mem, cpus, mem, timeout_ms, stall_ms, priority, retries   request_numbers[]
 *   backoff    1 to REQUEST_MAX_BACKOFF whole milliseconds, each 0 to REQUEST_MAX_BACKOFF_MS
 *   array      {"index": [...], "limit": N}: 1 to REQUEST_MAX_ARRAY indices, ascending, unique,
 *              each 0 to REQUEST_MAX_ARRAY_INDEX; limit 0 (none) to REQUEST_MAX_ARRAY_LIMIT
 *   after, after_any   arrays of task ids (> 0)
 *   hold, exclusive    booleans; exclusive contradicts gpu_mem
 * Absent and null mean the default. Command and environment together must fit the exec limits
 * (limits_check_exec, util/limits.h). */
#ifndef DROVER_REQUEST_H
#define DROVER_REQUEST_H

#include <jansson.h>

#define REQUEST_MAX_STRING 4096            /* bytes in a name, key or profile */
#define REQUEST_MAX_ARRAY 100000           /* tasks in one array */
#define REQUEST_MAX_ARRAY_INDEX 100000000  /* the largest array index */
#define REQUEST_MAX_ARRAY_LIMIT 1000000    /* the largest %N */
#define REQUEST_MAX_BACKOFF 8              /* backoff values */
#define REQUEST_MAX_BACKOFF_MS 1000000000000LL

enum request_unit { REQUEST_COUNT, REQUEST_BYTES, REQUEST_MS };

struct request_number {
    const char *key;    /* in the request */
    const char *option; /* drover submit's flag, without dashes */
    enum request_unit unit;
    long long min, max;
};

/* The numeric fields, terminated by {NULL}. */
extern const struct request_number request_numbers[];

/* 0 if req is a well-formed submit request, else -1 with one line in *why (the caller frees). */
int request_check_submit(json_t *req, char **why);

#endif
