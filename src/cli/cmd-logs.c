/* drover logs ID [-f] [--stderr] [--attempt N]: the task's output, read from its run
 * directory; -f follows it (and the next attempt's) until the task ends. */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct cmd_opt logs_opts[] = {
    {"follow", 'f', false, false, "keep printing new output until the task ends"},
    {"stderr", 0, false, false, "the standard error instead of the standard output"},
    {"attempt", 0, true, false, "this attempt (default: the latest)"},
    {NULL, 0, false, false, NULL},
};

static json_t *logs_task(const struct cmd_entry *cmd, long long id, int *rc)
{
    json_t *req = client_request("show");
    json_object_set_new(req, "id", json_integer(id));
    json_object_set_new(req, "logs", json_true()); /* the owner's or an admin's (exit 4) */
    json_t *reply = client_call(cmd->name, req, rc);
    if (reply == NULL)
        return NULL;
    json_t *task = json_incref(json_object_get(reply, "task"));
    json_decref(reply);
    return task;
}

/* The run directory of attempt n (0 = latest), or NULL. */
static const char *logs_run_dir(json_t *task, long long n, long long *which)
{
    json_t *list = json_object_get(task, "attempt_list");
    size_t count = json_array_size(list);
    if (count == 0)
        return NULL;
    json_t *a = n > 0 && (size_t)n <= count ? json_array_get(list, (size_t)n - 1)
                                            : json_array_get(list, count - 1);
    if (n > 0 && (size_t)n > count)
        return NULL;
    *which = json_integer_value(json_object_get(a, "attempt"));
    return json_string_value(json_object_get(a, "run_dir"));
}

/* Copies what is new in path since *offset to stdout. */
static void logs_copy(const char *path, off_t *offset)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t r;
    if (fd < 0)
        return;
    if (lseek(fd, *offset, SEEK_SET) < 0) {
        close(fd);
        return;
    }
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        fwrite(buf, 1, (size_t)r, stdout);
        *offset += r;
    }
    fflush(stdout);
    close(fd);
}

/* A log the disk cut short says so after it, on stderr: the attempt's reason holds "output
 * truncated at N bytes: disk full" (daemon/adopt.c). */
static void logs_note_cut(json_t *task, long long which)
{
    json_t *a;
    size_t i;
    json_array_foreach(json_object_get(task, "attempt_list"), i, a) {
        const char *reason = json_string_value(json_object_get(a, "reason"));
        const char *cut = reason ? strstr(reason, " truncated at ") : NULL;
        if (cut == NULL || json_integer_value(json_object_get(a, "attempt")) != which)
            continue;
        while (cut > reason && cut[-1] != ' ')
            cut--; /* back to the stream's name */
        fprintf(stderr, "drover logs: %s\n", cut);
    }
}

static bool logs_ended(json_t *task)
{
    const char *s = json_string_value(json_object_get(task, "state"));
    return strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
           strcmp(s, "timed_out") == 0 || strcmp(s, "cancelled") == 0 ||
           strcmp(s, "upstream_failed") == 0;
}

static int logs_follow(const struct cmd_entry *cmd, long long id, const char *stream,
                       json_t *task)
{
    long long current = 0, which = 0;
    off_t offset = 0;
    struct timespec tick = {0, 200000000};
    int rc = EXIT_OK;
    for (;;) {
        const char *dir = logs_run_dir(task, 0, &which);
        if (dir && which != current) {
            if (current)
                fprintf(stderr, "drover logs: --- attempt %lld ---\n", which);
            current = which;
            offset = 0;
        }
        char *path = dir ? xasprintf("%s/%s", dir, stream) : NULL;
        bool ended = logs_ended(task);
        if (path)
            logs_copy(path, &offset);
        free(path);
        if (ended)
            logs_note_cut(task, which);
        json_decref(task);
        if (ended)
            return rc;
        nanosleep(&tick, NULL); /* a follower polls the file, as tail -f does */
        task = logs_task(cmd, id, &rc);
        if (task == NULL)
            return rc;
    }
}

static int logs_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    long long id = out_task_id(cmd, args->argv[0]), n = 0, which = 0;
    const char *why, *v = cmd_opt(cmd, args, "attempt");
    const char *stream = cmd_opt(cmd, args, "stderr") ? "stderr" : "stdout";
    int rc;
    if (id < 0)
        return EXIT_USAGE;
    if (v && parse_int(v, 1, 1000000, &n, &why) < 0)
        return cmd_usage_error(cmd, "--attempt '%s': %s", v, why);
    json_t *task = logs_task(cmd, id, &rc);
    if (task == NULL)
        return rc;
    if (cmd_opt(cmd, args, "follow") && n == 0)
        return logs_follow(cmd, id, stream, task);
    const char *dir = logs_run_dir(task, n, &which);
    if (dir == NULL) {
        json_decref(task);
        if (n > 0)
            return cmd_usage_error(cmd, "task %lld has no attempt %lld", id, n);
        return EXIT_OK; /* not started yet: no output */
    }
    char *path = xasprintf("%s/%s", dir, stream);
    off_t offset = 0;
    logs_copy(path, &offset);
    logs_note_cut(task, which);
    free(path);
    json_decref(task);
    return EXIT_OK;
}

const struct cmd_entry cmd_logs = {
    .name = "logs",
    .usage = "logs ID [-f] [--stderr] [--attempt N]",
    .summary = "print a task's output",
    .opts = logs_opts,
    .min_args = 1,
    .max_args = 1,
    .exec = logs_exec,
};
