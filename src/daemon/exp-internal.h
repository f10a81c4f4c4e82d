/* daemon/exp-internal.h — what the daemon's experiment files share (not for the rest of daemon/):
 *
 *   exp-metrics.c   the experiments' settings in memory; reading what running trials report;
 *                   early stops
 *   exp-end.c       the lifecycle carried out: a trial that fails (the circuit breaker), every
 *                   trial ended, the generator's answer, stop and resume
 *   exp-round.c     what follows a round: the next round, the generator and its proposals
 *   exp-validate.c  the best trial against the validation block; the archive
 *   exp-insert.c    creating an experiment's tasks
 *   ops-exp.c       the requests: exp_run, exp_ls, exp_show, exp_stop, exp_resume
 *
 * The decisions are exp/lifecycle.c's: every change of an experiment's state goes through
 * exp_event(). Everything here runs inside a transaction its caller began, and every store write
 * is checked: -1 means one failed and the caller rolls the transaction back.
 */
#ifndef DROVER_DAEMON_EXP_INTERNAL_H
#define DROVER_DAEMON_EXP_INTERNAL_H

#include "daemon/daemon.h"
#include "exp/asha.h"
#include "exp/lifecycle.h"
#include "exp/request.h"
#include "exp/settings.h"

/* An experiment as the daemon keeps it between events: its spec decoded once, and the early
 * stopper fed with every value its trials reported. */
struct exp_live {
    char *name;
    bool pipeline;
    struct exp_settings settings;
    struct stopper *stopper;  /* NULL: no early stopping, or no trial of it polled yet */
    struct exp_live *next;
};

/* exp-metrics.c: the experiment named so (its spec decoded on first use), or NULL if there is
 * none. Owned by d->exps. */
struct exp_live *exp_live_get(struct daemon *d, const char *name);

/* exp-end.c */
/* The experiment's tasks that have not ended, in id order (malloc'd *ids). Returns 0, or -1 if
 * the store could not say. */
int exp_live_tasks(struct daemon *d, const char *name, int64_t **ids, size_t *n);
/* Raises ev for experiment e, now in *state: asks the lifecycle, carries out its decision (the
 * action, then the new state and reason, stored) and whatever that raises in turn. facts may be
 * NULL (they are filled here for the events the daemon raises by itself). Returns 0 — *state is
 * the new state, or the same when the event changes nothing or is refused, with refusal (or
 * NULL) filled with the lifecycle's message (malloc'd) — or -1 when a store write failed. */
int exp_event(struct daemon *d, struct exp_live *e, enum exp_state *state, enum exp_event ev,
              struct exp_facts *facts, char **refusal);
/* "task 12, exit 1": how the trial ended, from {exit_code, signal, outcome} of its last attempt. */
void exp_describe_failure(int64_t task, json_t *attempt, char *buf, size_t len);

/* exp-round.c: the actions that create tasks. Each returns 0 (appending to reason what it did:
 * "; next round: trials 4-7"), 1 when it could not (why in *why, malloc'd: the experiment then
 * fails), or -1 when a store write failed. */
int exp_next_round(struct daemon *d, struct exp_live *e, json_t *row, char *reason, size_t len,
                   char **why);
int exp_start_generator(struct daemon *d, struct exp_live *e, json_t *row, const char *verdict,
                        char *reason, size_t len, char **why);
/* The generator task ended in state: what it proposed, parsed into *tasks (a JSON array of
 * exp_run tasks, new reference). Returns the number proposed, or -1 with *why (malloc'd). */
int exp_read_proposals(struct daemon *d, struct exp_live *e, json_t *row, int64_t task,
                       enum task_state state, json_t **tasks, char **why);
int exp_run_proposed(struct daemon *d, struct exp_live *e, json_t *row, int64_t generator,
                     json_t *tasks, char *reason, size_t len, char **why);

/* exp-validate.c */
/* Checks the best trial against the validation block. Returns 1 if it passed, 0 if not (*verdict
 * says why either way), or -1 with *verdict saying why it could not be checked (no trial
 * reported the metric). *verdict is malloc'd. */
int exp_validate(struct daemon *d, struct exp_live *e, char **verdict);
/* Copies the best trial's checkpoint directory and a metadata file into archive/NAME/; appends
 * "; archived in DIR" to reason. Returns 0, or -1 with *why (malloc'd). */
int exp_archive(struct daemon *d, struct exp_live *e, json_t *row, char *reason, size_t len,
                char **why);
enum { EXP_INSERT_REFUSED = 1, EXP_INSERT_STORE = -1 };
/* Creates the tasks of an exp_run request (or of a next round, or a generator's) inside the
 * caller's transaction: store rows, trial rows and core's tasks, each after the tasks it needs.
 * checked: what exp_request_check() made of the request, or NULL to check the tasks here
 * (exp/request.c: the daemon trusts no task it did not check). Returns 0 with *ids (malloc'd)
 * the new ids in request order; EXP_INSERT_REFUSED with *why (malloc'd) when a task is refused
 * (nothing written); EXP_INSERT_STORE with *why when a store write failed. Core is changed
 * only once every write succeeded. */
int exp_insert(struct daemon *d, const char *name, const char *kind, json_t *tasks, json_t *env,
               const char *workdir, long long parallel, const struct exp_graph *checked,
               int64_t **ids, char **why);

#endif
