/* audit and users: who did what, and what each user has on the machine. */
#include "daemon/ops.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>

/* drover audit [--since]: the records at or after "since" (ms; absent = all). Admins only,
 * in either mode (in per-user mode the daemon's user is one). */
json_t *op_audit(struct daemon *d, struct conn *c, json_t *req)
{
    long long since;
    json_t *err;
    if (!conn_peer(c)->admin)
        return reply_error(OPS_NOT_PERMITTED, "not permitted: the audit log is for admins (root"
                                              " and the members of the admins group)");
    if (ops_get_int(req, "since", 0, INT64_MAX, 0, &since, &err) < 0)
        return err;
    return json_pack("{s:b,s:o}", "ok", 1, "records", store_audit_list(d->store, since));
}

/* A user's name from the user database, else its uid in decimal. */
static json_t *users_name(uid_t uid)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != NULL)
        return json_string(pw.pw_name);
    return json_sprintf("%u", (unsigned)uid);
}

/* A limit as JSON: null = none. */
static json_t *users_limit(int n)
{
    return n > 0 ? json_integer(n) : json_null();
}

/* Usage, share and limits of core's user number uid (core/users.c) into row. */
static void users_core(const struct core_user_info *info, json_t *row)
{
    json_object_set_new(row, "usage_gpu_seconds", json_real(info ? info->usage : 0));
    json_object_set_new(row, "share", json_real(info ? info->share : 0));
    json_object_set_new(row, "limits",
                        json_pack("{s:o,s:o,s:o}", "gpus", users_limit(info ? info->limits.gpus : 0),
                                  "running", users_limit(info ? info->limits.running : 0),
                                  "queued", users_limit(info ? info->limits.queued : 0)));
}

/* drover users: per user with live tasks (the store's counts) or known to core's fair share
 * (past usage, limits): tasks running and waiting, GPUs held, decayed usage and its share of
 * everyone's, the limits in force. Core numbers users by uid. Anyone may ask. */
json_t *op_users(struct daemon *d, struct conn *c, json_t *req)
{
    core_time now = daemon_now();
    size_t n = core_users(d->core, now, NULL, 0);
    struct core_user_info *v = xcalloc(n + 1, sizeof *v);
    n = core_users(d->core, now, v, n);
    json_t *list = store_users(d->store), *row;
    bool *seen = xcalloc(n + 1, sizeof *seen);
    size_t i;
    json_array_foreach(list, i, row) {
        const struct core_user_info *info = NULL;
        for (size_t k = 0; k < n && info == NULL; k++)
            if ((json_int_t)v[k].user == json_integer_value(json_object_get(row, "uid")))
                info = &v[(seen[k] = true, k)];
        users_core(info, row);
    }
    for (size_t k = 0; k < n; k++) { /* usage or limits, nothing live */
        if (seen[k])
            continue;
        row = json_pack("{s:I,s:o,s:i,s:i,s:i,s:i}", "uid", (json_int_t)v[k].user, "user",
                        users_name((uid_t)v[k].user), "running", 0, "waiting", 0, "queued", 0,
                        "gpus", 0);
        users_core(&v[k], row);
        json_array_append_new(list, row);
    }
    free(seen);
    free(v);
    return json_pack("{s:b,s:o}", "ok", 1, "users", list);
}
