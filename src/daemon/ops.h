/* Shared between the daemon's op handlers (ops.c, ops-submit.c). */
#ifndef DROVER_OPS_H
#define DROVER_OPS_H

#include "daemon/daemon.h"

int ops_task_state(struct daemon *d, int64_t id);
int ops_get_ids(json_t *req, const char *key, int64_t **ids, size_t *n, json_t **err);
int ops_get_int(json_t *req, const char *key, long long min, long long max, long long def,
                long long *out, json_t **err);

json_t *op_submit(struct daemon *d, struct conn *c, json_t *req);
json_t *op_retry(struct daemon *d, struct conn *c, json_t *req);
/* Brings one ended task back with a fresh retry budget (drover retry; drover exp resume of a
 * stopped experiment), inside the caller's transaction. Returns 0, or -1 (a store write). */
int ops_retry_task(struct daemon *d, int64_t id);
json_t *op_gpus(struct daemon *d, struct conn *c, json_t *req);

#endif
