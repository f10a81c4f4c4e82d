/* The command table, the option parser and the dispatcher. */
#include "cli/cli.h"
#include "util/xalloc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

extern const struct cmd_entry cmd_submit, cmd_ls, cmd_show, cmd_logs, cmd_cancel, cmd_retry,
    cmd_hold, cmd_release, cmd_wait, cmd_gpus, cmd_top, cmd_exp, cmd_simulate, cmd_drain, cmd_undrain, cmd_shutdown,
    cmd_whoami, cmd_version, cmd_audit, cmd_users, cmd_priority, cmd_token, cmd_dashboard;

const struct cmd_entry *const cli_commands[] = {
    &cmd_submit, &cmd_ls,      &cmd_show,  &cmd_logs,  &cmd_cancel,  &cmd_retry,
    &cmd_hold,   &cmd_release, &cmd_priority, &cmd_wait,  &cmd_gpus,  &cmd_top, &cmd_exp, &cmd_simulate, &cmd_drain,   &cmd_undrain,
    &cmd_shutdown, &cmd_whoami, &cmd_version, &cmd_audit, &cmd_users, &cmd_token,
    &cmd_dashboard, NULL,
};

int cmd_usage_error(const struct cmd_entry *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "drover %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int opt_index(const struct cmd_entry *cmd, const char *name, size_t len, char short_name)
{
    for (int i = 0; cmd->opts && cmd->opts[i].name; i++) {
        const struct cmd_opt *o = &cmd->opts[i];
        if (short_name ? o->short_name == short_name
                       : strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return i;
    }
    return -1;
}

const char *cmd_opt(const struct cmd_entry *cmd, const struct cmd_args *args, const char *name)
{
    int i = opt_index(cmd, name, strlen(name), 0);
    if (i < 0)
        fatalx("command %s has no option --%s", cmd->name, name);
    return args->value[i];
}

char *const *cmd_opt_values(const struct cmd_entry *cmd, const struct cmd_args *args,
                            const char *name, size_t *n)
{
    int i = opt_index(cmd, name, strlen(name), 0);
    if (i < 0)
        fatalx("command %s has no option --%s", cmd->name, name);
    *n = (size_t)args->nvalues[i];
    return args->values[i];
}

static void opt_set(struct cmd_args *args, int i, const char *value)
{
    args->value[i] = value;
    args->values[i] = xrealloc(args->values[i], (size_t)(args->nvalues[i] + 2) * sizeof(char *));
    args->values[i][args->nvalues[i]++] = (char *)value;
    args->values[i][args->nvalues[i]] = NULL;
}

static void cmd_help(const struct cmd_entry *cmd);

/* What cmd_parse returns when it printed the command's help: the command is done, exit 0. */
#define CMD_HELP_SHOWN (-1)

/* Parses argv (after the command name) into args. Returns 0; CMD_HELP_SHOWN for --help or -h
 * among the options; or EXIT_USAGE after printing why. */
static int cmd_parse(const struct cmd_entry *cmd, int argc, char **argv, struct cmd_args *args)
{
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        /* "-", and a negative number (drover priority -5 12), are arguments: no option is a
         * digit (a command's tail still starts only at its first word or after --). */
        bool number = a[1] >= '0' && a[1] <= '9' && !cmd->command_tail;
        if (a[0] != '-' || a[1] == '\0' || number) {
            if (cmd->command_tail)
                break;
            args->argv = xrealloc(args->argv, (size_t)(args->argc + 2) * sizeof(char *));
            args->argv[args->argc++] = (char *)a;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cmd_help(cmd);
            return CMD_HELP_SHOWN;
        }
        int o;
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            o = opt_index(cmd, a + 2, len, 0);
            if (eq)
                value = eq + 1;
        } else {
            o = a[2] == '\0' ? opt_index(cmd, NULL, 0, a[1]) : -1;
        }
        if (o < 0) {
            char *which = cmd->sub ? xasprintf(" for %s %s", cmd->name, cmd->sub) : xstrdup("");
            cmd_usage_error(cmd, "unknown option '%s'%s (usage: drover %s)", a, which,
                            cmd->usage);
            free(which);
            return EXIT_USAGE;
        }
        const struct cmd_opt *opt = &cmd->opts[o];
        if (opt->takes_value == true && value == NULL) {
            if (i + 1 >= argc)
                return cmd_usage_error(cmd, "option --%s needs a value", opt->name);
            value = argv[++i];
        } else if (!opt->takes_value && value) {
            return cmd_usage_error(cmd, "option --%s takes no value", opt->name);
        }
        if (args->value[o] && !opt->repeat)
            return cmd_usage_error(cmd, "option --%s given twice", opt->name);
        opt_set(args, o, value ? value : "");
    }
    for (; i < argc; i++) {
        args->argv = xrealloc(args->argv, (size_t)(args->argc + 2) * sizeof(char *));
        args->argv[args->argc++] = argv[i];
    }
    if (args->argv)
        args->argv[args->argc] = NULL;
    if (args->argc < cmd->min_args)
        return cmd_usage_error(cmd, "%s (usage: drover %s)",
                               cmd->command_tail ? "empty command: give one after --"
                                                 : "missing argument", cmd->usage);
    if (cmd->max_args >= 0 && args->argc > cmd->max_args)
        return cmd_usage_error(cmd, "too many arguments (usage: drover %s)", cmd->usage);
    return 0;
}

static void cli_help(FILE *fp)
{
    fprintf(fp, "usage: drover COMMAND [OPTIONS]\n\ncommands:\n");
    for (int i = 0; cli_commands[i]; i++)
        fprintf(fp, "  %-9s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fprintf(fp, "  %-9s %s\n", "daemon", "run the daemon in the foreground (started on demand)");
    fprintf(fp, "\n'drover COMMAND --help' shows a command's options. Docs: docs/CLI.md\n");
}

static void cmd_help(const struct cmd_entry *cmd)
{
    if (cmd->subcommands != NULL) {
        for (int i = 0; cmd->subcommands[i]; i++)
            printf("%s drover %s\n", i ? "      " : "usage:", cmd->subcommands[i]->usage);
        printf("%s\n\n'drover %s SUBCOMMAND --help' shows a subcommand's options.\n",
               cmd->summary, cmd->name);
        return;
    }
    printf("usage: drover %s\n%s\n", cmd->usage, cmd->summary);
    for (int i = 0; cmd->opts && cmd->opts[i].name; i++) {
        const struct cmd_opt *o = &cmd->opts[i];
        char flag[64];
        snprintf(flag, sizeof flag, "%s%c%s--%s%s", o->short_name ? "-" : "",
                 o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
                 o->takes_value == CMD_VALUE_OPTIONAL ? "[=VALUE]"
                 : o->takes_value                     ? " VALUE"
                                                      : "");
        printf("  %-26s %s\n", o->short_name ? flag : flag + 2, o->help);
    }
    printf("  %-26s %s\n", "-h, --help", "show this help");
}

/* The subcommand of cmd that word names, or NULL after saying why (EXIT_USAGE). */
static const struct cmd_entry *cmd_subcommand(const struct cmd_entry *cmd, const char *word)
{
    char *list;
    size_t len;
    FILE *fp = open_memstream(&list, &len);
    if (fp == NULL)
        fatalx("out of memory");
    for (int i = 0; cmd->subcommands[i]; i++) {
        if (word != NULL && strcmp(cmd->subcommands[i]->sub, word) == 0) {
            fclose(fp);
            free(list);
            return cmd->subcommands[i];
        }
        fprintf(fp, "%s%s", i ? ", " : "", cmd->subcommands[i]->sub);
    }
    fclose(fp);
    if (word == NULL)
        cmd_usage_error(cmd, "missing subcommand: %s (see drover %s --help)", list, cmd->name);
    else
        cmd_usage_error(cmd, "unknown subcommand '%s': %s (see drover %s --help)", word, list,
                        cmd->name);
    free(list);
    return NULL;
}

int cli_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cli_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    for (int i = 0; cli_commands[i]; i++) {
        const struct cmd_entry *cmd = cli_commands[i];
        if (strcmp(cmd->name, argv[1]) != 0)
            continue;
        int skip = 2; /* "drover CMD", and a subcommand's word */
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            cmd_help(cmd);
            return EXIT_OK;
        }
        if (cmd->subcommands != NULL) {
            if ((cmd = cmd_subcommand(cmd, argc > 2 ? argv[2] : NULL)) == NULL)
                return EXIT_USAGE;
            skip = 3;
        }
        struct cmd_args args;
        memset(&args, 0, sizeof args);
        int rc = cmd_parse(cmd, argc - skip, argv + skip, &args);
        if (rc == CMD_HELP_SHOWN)
            rc = EXIT_OK;
        else if (rc == 0)
            rc = cmd->exec(cmd, &args);
        for (int o = 0; o < CMD_MAX_OPTS; o++)
            free(args.values[o]);
        free(args.argv);
        return rc;
    }
    fprintf(stderr, "drover: unknown command '%s' (see drover --help)\n", argv[1]);
    return EXIT_USAGE;
}
