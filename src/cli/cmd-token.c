/* drover token create|ls|revoke: the HTTP API's bearer tokens (docs/API.md, "Authentication").
 * A token acts as the user who created it, with that user's permissions; the daemon keeps only
 * its hash, so `create` is the one time its text is shown. */
#include "cli/cli.h"
#include "util/parse.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ms since the epoch as local "2026-12-01 09:30", or dash for null. */
static const char *token_time(json_t *v, const char *dash, char *buf, size_t len)
{
    if (!json_is_integer(v))
        return dash;
    time_t sec = (time_t)(json_integer_value(v) / 1000);
    struct tm tm;
    strftime(buf, len, "%Y-%m-%d %H:%M", localtime_r(&sec, &tm));
    return buf;
}

static int token_create(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *name = cmd_opt(cmd, args, "name"), *expires = cmd_opt(cmd, args, "expires");
    json_t *req = client_request("token_create");
    int rc;
    if (name != NULL && client_set_string(cmd, req, "name", "--name", name) != 0) {
        json_decref(req);
        return EXIT_USAGE;
    }
    if (expires != NULL) {
        int64_t ms;
        const char *why;
        if (parse_duration(expires, &ms, &why) < 0) {
            json_decref(req);
            return cmd_usage_error(cmd, "--expires %s: %s", expires, why);
        }
        json_object_set_new(req, "expires_ms", json_integer(ms));
    }
    if (cmd_opt(cmd, args, "read-only"))
        json_object_set_new(req, "read_only", json_true());
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    if (cmd_opt(cmd, args, "json")) {
        json_object_del(reply, "ok");
        out_json(reply);
    } else {
        printf("%s\n", json_string_value(json_object_get(reply, "token")));
        fprintf(stderr, "drover token: token %lld created; it is shown this once (the daemon"
                        " keeps only its hash)\n",
                (long long)json_integer_value(json_object_get(reply, "id")));
    }
    json_decref(reply);
    return EXIT_OK;
}

static int token_ls(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("token_ls"), *row;
    int rc;
    if (cmd_opt(cmd, args, "all"))
        json_object_set_new(req, "all", json_true());
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_t *list = json_object_get(reply, "tokens");
    size_t i;
    if (cmd_opt(cmd, args, "json")) {
        out_json(list);
        json_decref(reply);
        return EXIT_OK;
    }
    static const char *const head[] = {"ID", "NAME", "USER", "KIND", "RO", "CREATED",
                                        "EXPIRES", "LAST-USED", "REVOKED"};
    struct table *t = table_new(9, head);
    json_array_foreach(list, i, row) {
        char id[24], created[32], expires[32], used[32], revoked[32];
        const char *name = json_string_value(json_object_get(row, "name"));
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(row, "id")));
        const char *cells[] = {
            id, name ? name : "-", json_string_value(json_object_get(row, "user")),
            json_string_value(json_object_get(row, "kind")),
            json_is_true(json_object_get(row, "read_only")) ? "yes" : "no",
            token_time(json_object_get(row, "created"), "-", created, sizeof created),
            token_time(json_object_get(row, "expires"), "never", expires, sizeof expires),
            token_time(json_object_get(row, "last_used"), "-", used, sizeof used),
            token_time(json_object_get(row, "revoked"), "-", revoked, sizeof revoked)};
        bool dim = out_color() && json_is_integer(json_object_get(row, "revoked"));
        table_add(t, cells, dim ? "\033[2m" : NULL);
    }
    table_print(t, stdout);
    table_free(t);
    json_decref(reply);
    return EXIT_OK;
}

/* Revokes each id in turn; the exit code is the first failure's (the others are still tried). */
static int token_revoke(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int first = EXIT_OK;
    for (int i = 0; i < args->argc; i++) {
        long long id;
        const char *why;
        if (parse_int(args->argv[i], 1, INT64_MAX, &id, &why) < 0)
            return cmd_usage_error(cmd, "'%s' is not a token id", args->argv[i]);
    }
    for (int i = 0; i < args->argc; i++) {
        long long id;
        const char *why;
        int rc;
        parse_int(args->argv[i], 1, INT64_MAX, &id, &why);
        json_t *req = client_request("token_revoke");
        json_object_set_new(req, "id", json_integer(id));
        json_t *reply = client_call(cmd->name, req, &rc);
        json_decref(reply);
        if (rc != EXIT_OK && first == EXIT_OK)
            first = rc;
    }
    return first;
}

static const struct cmd_opt token_create_opts[] = {
    {"name", 0, true, false, "a name to tell it by (drover token ls)"},
    {"expires", 0, true, false, "it stops working after DURATION (30d, 12h; default: never)"},
    {"read-only", 0, false, false, "it may only read (GET), never change anything"},
    {"json", 0, false, false, "print the reply as JSON: {id, token, name, expires, read_only}"},
    {NULL, 0, false, false, NULL},
};
static const struct cmd_opt token_ls_opts[] = {
    {"all", 0, false, false, "every user's tokens and dashboard sessions (admins)"},
    {"json", 0, false, false, "print a JSON array (docs/API.md)"},
    {NULL, 0, false, false, NULL},
};
static const struct cmd_opt token_no_opts[] = {{NULL, 0, false, false, NULL}};

static const struct cmd_entry token_entries[] = {
    {.name = "token", .sub = "create",
     .usage = "token create [--name N] [--expires DURATION] [--read-only] [--json]",
     .summary = "make an API token (printed once)", .opts = token_create_opts, .min_args = 0,
     .max_args = 0, .exec = token_create},
    {.name = "token", .sub = "ls", .usage = "token ls [--all] [--json]",
     .summary = "list your API tokens (never their secrets)", .opts = token_ls_opts,
     .min_args = 0, .max_args = 0, .exec = token_ls},
    {.name = "token", .sub = "revoke", .usage = "token revoke ID…",
     .summary = "revoke tokens (yours; anyone's for an admin)", .opts = token_no_opts,
     .min_args = 1, .max_args = -1, .exec = token_revoke},
};

static const struct cmd_entry *const token_subcommands[] = {
    &token_entries[0], &token_entries[1], &token_entries[2], NULL,
};
_Static_assert(sizeof token_entries / sizeof token_entries[0] == 3,
               "token_subcommands lists every entry of token_entries");

const struct cmd_entry cmd_token = {
    .name = "token",
    .usage = "token create|ls|revoke …",
    .summary = "API tokens for the HTTP API and the dashboard",
    .subcommands = token_subcommands,
};
