/* drover audit [--since DURATION|TIME] [--json]: the audit log, every state change a person
 * caused (who, what, when), oldest first. Admins only: the daemon refuses others (exit 4). */
#define _XOPEN_SOURCE 700
#include "cli/cli.h"
#include "util/parse.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const struct cmd_opt audit_opts[] = {
    {"since", 0, true, false, "only records since DURATION ago (2h, 7d) or TIME (2026-12-01,"
                              " 2026-12-01T09:30[:00], local time)"},
    {"json", 0, false, false, "print a JSON array of records (docs/CLI.md)"},
    {NULL, 0, false, false, NULL},
};

static long long audit_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --since as ms since the epoch: a duration back from now, or a local date and time. */
static int audit_since(const char *s, long long *out)
{
    static const char *const formats[] = {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S",
                                          "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"};
    int64_t ms;
    const char *err;
    if (parse_duration(s, &ms, &err) == 0) {
        *out = audit_now_ms() - ms;
        return *out < 0 ? (*out = 0, 0) : 0;
    }
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(s, formats[i], &tm);
        if (end != NULL && *end == '\0') {
            tm.tm_isdst = -1;
            time_t t = mktime(&tm);
            if (t == (time_t)-1 || t < 0)
                return -1;
            *out = (long long)t * 1000;
            return 0;
        }
    }
    return -1;
}

static int audit_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("audit"), *rec;
    const char *since = cmd_opt(cmd, args, "since");
    long long from;
    int rc;
    if (since != NULL) {
        if (audit_since(since, &from) < 0) {
            json_decref(req);
            return cmd_usage_error(cmd, "--since %s: expected a duration (2h, 7d) or a time"
                                        " (2026-12-01, 2026-12-01T09:30)", since);
        }
        json_object_set_new(req, "since", json_integer(from));
    }
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_t *list = json_object_get(reply, "records");
    size_t i;
    if (cmd_opt(cmd, args, "json")) {
        out_json(list);
        json_decref(reply);
        return EXIT_OK;
    }
    static const char *const head[] = {"TIME", "USER", "UID", "OP", "TARGET", "DETAIL"};
    struct table *t = table_new(6, head);
    json_array_foreach(list, i, rec) {
        char when[32], uid[24];
        time_t sec = (time_t)(json_integer_value(json_object_get(rec, "ts")) / 1000);
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&sec, &tm));
        snprintf(uid, sizeof uid, "%lld", (long long)json_integer_value(json_object_get(rec, "uid")));
        const char *target = json_string_value(json_object_get(rec, "target"));
        const char *detail = json_string_value(json_object_get(rec, "detail"));
        const char *cells[] = {when, json_string_value(json_object_get(rec, "user")), uid,
                               json_string_value(json_object_get(rec, "op")),
                               target ? target : "-", detail ? detail : "-"};
        table_add(t, cells, NULL);
    }
    table_print(t, stdout);
    table_free(t);
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_audit = {
    .name = "audit",
    .usage = "audit [--since DURATION|TIME] [--json]",
    .summary = "who changed what, and when (admins)",
    .opts = audit_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = audit_exec,
};
