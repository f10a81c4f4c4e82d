/* cli/ — one file per command behind a table of descriptors (cli/commands.c). The dispatcher
 * parses options against each command's declared options and checks the argument count before
 * a handler runs. Exit codes: 0 ok, 1 a task failed (or the operation did), 2 usage or bad
 * input, 3 the daemon is unreachable, 4 not permitted. */
#ifndef DROVER_CLI_H
#define DROVER_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* EXIT_NOT_PERMITTED: what the caller asked for is someone else's (a task, an experiment) or
 * for admins only; the daemon's error names the owner (docs/CLI.md, "Permissions"). */
enum {
    EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3, EXIT_NOT_PERMITTED = 4
};

#define CMD_MAX_OPTS 32

struct cmd_opt {
    const char *name;  /* long name without dashes */
    char short_name;   /* 0 = none */
    bool takes_value;
    bool repeat;       /* may be given several times (values collected) */
    const char *help;
};

struct cmd_args {
    const char *value[CMD_MAX_OPTS]; /* last value, or "" for a flag that was given */
    char **values[CMD_MAX_OPTS];     /* every value of a repeatable option (NULL-terminated) */
    int nvalues[CMD_MAX_OPTS];
    int argc;                        /* positional arguments */
    char **argv;
};

struct cmd_entry {
    const char *name;            /* what errors begin with: "drover NAME: …" */
    const char *usage;
    const char *summary;
    const struct cmd_opt *opts;  /* terminated by {NULL} */
    int min_args, max_args;      /* positional; max -1 = any */
    bool command_tail;           /* positional arguments are a command: stop parsing options */
    int (*exec)(const struct cmd_entry *cmd, struct cmd_args *args);
    /* A command made of subcommands (drover exp run|ls|…): the word after the command picks
     * one, which has its own usage, options and arguments (NULL-terminated; the command then
     * has no opts or exec of its own). A subcommand's `sub` is its word; its name, the
     * command's. */
    const struct cmd_entry *const *subcommands;
    const char *sub;
};

/* The value of option `name`, or NULL if it was not given. */
const char *cmd_opt(const struct cmd_entry *cmd, const struct cmd_args *args, const char *name);
/* Every value of repeatable option `name`, NULL-terminated (NULL if none), their count in *n. */
char *const *cmd_opt_values(const struct cmd_entry *cmd, const struct cmd_args *args,
                            const char *name, size_t *n);
/* Prints "drover CMD: MSG" on stderr and returns EXIT_USAGE. */
int cmd_usage_error(const struct cmd_entry *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int cli_main(int argc, char **argv);

/* The daemon's executable: drover-daemon beside this one (the CLI does not carry the daemon's
 * libraries: its start is what every `drover` command pays). Malloc'd; NULL if this binary's own
 * path is unknown. */
char *cli_daemon_path(void);

/* client.c: one request, one reply; takes req. Exits with EXIT_UNREACHABLE when the daemon
 * cannot be reached (starting it first unless DROVER_NO_AUTOSTART=1), or closes the connection
 * without answering, and with EXIT_USAGE when the request is over LIMIT_FRAME. An error reply is
 * printed as "drover CMD: ERROR" and its code returned through *code; the reply is returned
 * either way (NULL on error). */
json_t *client_call(const char *cmdname, json_t *req, int *code);
/* client_call for a request that is safe to repeat (wait): when the connection breaks before
 * the reply (the daemon was killed or stopped), it connects again — starting a daemon as any
 * command does — and sends the request again. */
json_t *client_call_again(const char *cmdname, json_t *req, int *code);
/* A request object {"v": PROTO_VERSION, "op": op}. */
json_t *client_request(const char *op);
/* Connects, starting a daemon if none answers and autostart is set; -1 with errno on failure.
 * A daemon it started that cannot start (drover.conf is bad, …) is reported at once as
 * "drover CMD: the daemon could not start: WHY" and the process exits with EXIT_UNREACHABLE. */
int client_connect(const char *cmdname, bool autostart);
/* Every string a command puts into a request goes through these: a string that is not valid
 * UTF-8 is refused with "drover CMD: WHAT: not valid UTF-8 (byte N)" on stderr (and NULL, or
 * EXIT_USAGE), never dropped. client_string returns a new reference. */
json_t *client_string(const struct cmd_entry *cmd, const char *what, const char *s);
int client_set_string(const struct cmd_entry *cmd, json_t *obj, const char *key,
                      const char *what, const char *s);

/* output.c */
bool out_color(void);
const char *out_state_color(const char *state);
void out_json(json_t *j);
/* The environment a task inherits: this process's, with overrides (NAME=VALUE strings, --env;
 * may be NULL) on top, as {"NAME": "value"}; a new reference. A variable whose name or value is
 * not valid UTF-8, unless an override replaces it, and a malformed override are refused: one
 * line on stderr, NULL returned. */
json_t *out_environment(const struct cmd_entry *cmd, char *const *overrides);
/* Parses "3" into a task id, or prints an error and returns -1. */
long long out_task_id(const struct cmd_entry *cmd, const char *s);
/* A table: set headers, add rows of strings, print aligned. */
struct table;
struct table *table_new(int ncols, const char *const *headers);
void table_add(struct table *t, const char *const *cells, const char *color);
void table_print(struct table *t, FILE *fp);
void table_free(struct table *t);

extern const struct cmd_entry *const cli_commands[];

#endif
