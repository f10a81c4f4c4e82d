/* Shared between the daemon's op handlers (ops.c, ops-submit.c). */
#ifndef DROVER_OPS_H
#define DROVER_OPS_H

#include "daemon/daemon.h"

int ops_task_state(struct daemon *d, int64_t id);
int ops_get_ids(json_t *req, const char *key, int64_t **ids, size_t *n, json_t **err);
int ops_get_int(json_t *req, const char *key, long long min, long long max, long long def,
                long long *out, json_t **err);

/* Who may do what (docs/CLI.md, "Permissions"). A refusal is an error reply with this code,
 * which the CLI exits with: "not permitted: task 12 belongs to alice". */
#define OPS_NOT_PERMITTED 4
/* Whether the peer of c may act on what belongs to owner (named owner_name): it is the owner,
 * or an admin. If not, *reply is the refusal naming `what` ("task 12") and its owner. */
bool ops_may(struct daemon *d, struct conn *c, uid_t owner, const char *owner_name,
             const char *what, json_t **reply);
/* ops_may for task id; *reply is "no task N" (code 2) when there is none. */
bool ops_may_task(struct daemon *d, struct conn *c, int64_t id, json_t **reply);
/* In system mode only admins may do `what` (drain, shutdown, …); per-user mode: anyone who can
 * connect (the daemon's user). */
bool ops_admin_only(struct daemon *d, struct conn *c, const char *what, json_t **reply);
/* Records in the audit log, in the caller's transaction, that the peer of c did op to target
 * (may be NULL) with detail (may be NULL). 0, or -1 (a store write). */
int ops_audit(struct daemon *d, struct conn *c, const char *op, const char *target,
              const char *detail);

json_t *op_submit(struct daemon *d, struct conn *c, json_t *req);
json_t *op_retry(struct daemon *d, struct conn *c, json_t *req);
/* Brings one ended task back with a fresh retry budget (drover retry; drover exp resume of a
 * stopped experiment), inside the caller's transaction. Returns 0, or -1 (a store write). */
int ops_retry_task(struct daemon *d, int64_t id);
json_t *op_gpus(struct daemon *d, struct conn *c, json_t *req);
/* daemon/ops-audit.c: drover audit (admins) and drover users. */
json_t *op_audit(struct daemon *d, struct conn *c, json_t *req);
json_t *op_users(struct daemon *d, struct conn *c, json_t *req);

/* daemon/ops-token.c: the HTTP API's credentials (drover token, drover dashboard). */
json_t *op_token_create(struct daemon *d, struct conn *c, json_t *req);
json_t *op_token_ls(struct daemon *d, struct conn *c, json_t *req);
json_t *op_token_revoke(struct daemon *d, struct conn *c, json_t *req);
json_t *op_login_code(struct daemon *d, struct conn *c, json_t *req);

#endif
