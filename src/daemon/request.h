/* daemon/request.h — one task request made into a task. A submit request, or one task of an
 * experiment, that util/request.c has checked (request_check_submit, request_check_task) is
 * decoded here into a struct task_record ready for store_insert_task() and core_submit(), the
 * same way for every door. Only what depends on this daemon is decided here:
 *   - the GPU types a gpu_type pattern names on this machine (a case-insensitive substring of
 *     the GPU's name); a pattern that names none is refused with the GPUs the machine has.
 *     gpu_type or gpu_mem alone asks for one GPU;
 *   - retries when the task names none (the caller's default: the default-retries setting for
 *     a submit, EXP_DEFAULT_TRIAL_RETRIES for an experiment's trials), and the default-backoff
 *     setting when it names no backoff: a task's backoff is always written out in its spec, so
 *     the setting is what core and the store see;
 *   - the GPU memory claim: declared (gpu_mem), whole GPUs (exclusive, or nothing learned), or
 *     learned under its profile (the profile's recent peak plus claim-margin, from the store);
 *   - whether this machine could ever run it (core_check_request).
 * Dependencies and arrays belong to the submission and are left to the caller. */
#ifndef DROVER_DAEMON_REQUEST_H
#define DROVER_DAEMON_REQUEST_H

#include "daemon/daemon.h"

/* Fills *rec from task, which it borrows (rec's command, name, key and workdir point into it,
 * so task must outlive rec). base_env (or NULL): the environment the task's own env goes on top
 * of (an experiment's submitter's). workdir (or NULL: the request's own "workdir"). Returns
 * NULL, with rec to be released by daemon_request_release(); or an error reply (code 2) naming
 * the task when it has a name, with nothing to release. */
json_t *daemon_request_decode(struct daemon *d, json_t *task, json_t *base_env,
                              const char *workdir, int default_retries, struct task_record *rec);
/* The GPU types a stored task's pattern (or NULL) matches on this machine now, for a task
 * restored or retried: the store keeps the pattern, not the mask, since the GPUs may change
 * between daemons. A pattern nothing matches any more gives a mask no GPU here has (the task
 * waits, and the log says why) rather than 0, which would mean any GPU. */
uint64_t daemon_request_restored_types(const struct daemon *d, int64_t id, const char *pattern);
/* Gives core uid's limits (the user-gpus, user-running and user-queued settings with the
 * user's and its groups' overrides, daemon/config.h), looked up from the user database now:
 * before a submission of uid, and for each owner of a restored task. */
void daemon_request_user_limits(struct daemon *d, uid_t uid);
/* Gives core what users used in the last few half-lives, from the store's attempts, so fair
 * share survives a restart. */
void daemon_request_restore_usage(struct daemon *d);
/* Frees what daemon_request_decode() allocated in rec (its env and profile). */
void daemon_request_release(struct task_record *rec);

#endif
