/* GET /api/v1/tasks/{id}/logs: a task's output, as `drover logs` prints it (cli/cmd-logs.c):
 * the file stdout or stderr in the run directory of an attempt (the latest by default). Who may
 * read it is op show's answer with logs: true (the owner and admins), asked as the caller.
 *
 * ?tail=N: the last N lines. ?follow=1: a stream (http_stream_*) that polls the file every
 * API_LOGS_TICK_MS, as tail -f does, moves on to the next attempt as `drover logs -f` does, and
 * ends once the task has ended and everything is sent. At most API_LOGS_FOLLOWERS at once
 * (503 beyond); each tick sends at most API_LOGS_CHUNK bytes, so a huge log never stalls the
 * loop, and a client that does not read is dropped by http.c (LIMIT_HTTP_STREAM_BUFFER). */
#include "daemon/api-routes.h"
#include "util/xalloc.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define API_LOGS_TICK_MS 250
#define API_LOGS_FOLLOWERS 32
#define API_LOGS_CHUNK (256u * 1024)
#define API_LOGS_MAX (16u * 1024 * 1024) /* bytes answered without follow; tail for more */
#define API_LOGS_MAX_TAIL 1000000

struct api_follower {
    struct daemon *d;
    struct http_stream *stream;
    struct event *tick;
    int64_t task;
    long long attempt;   /* the attempt followed; 0 until there is one */
    bool fixed;          /* ?attempt=N: that one only */
    const char *file;    /* "stdout" or "stderr" (static) */
    off_t offset;
};

static int api_followers;

/* The run directory of attempt n (0: the latest) of task (show's object), and its number. */
static const char *api_logs_dir(json_t *task, long long n, long long *which)
{
    json_t *list = json_object_get(task, "attempt_list");
    size_t count = json_array_size(list);
    if (count == 0 || (n > 0 && (size_t)n > count))
        return NULL;
    json_t *a = json_array_get(list, n > 0 ? (size_t)n - 1 : count - 1);
    *which = json_integer_value(json_object_get(a, "attempt"));
    return json_string_value(json_object_get(a, "run_dir"));
}

static bool api_logs_ended(json_t *task)
{
    int s = task_state_parse(json_string_value(json_object_get(task, "state")));
    return s >= 0 && task_state_terminal(s);
}

/* Reads at most max bytes of path from offset (a new buffer, *len bytes). NULL when absent. */
static char *api_logs_read(const char *path, off_t offset, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    *len = 0;
    if (fd < 0)
        return NULL;
    char *buf = xmalloc(max + 1);
    ssize_t r;
    while (*len < max && (r = pread(fd, buf + *len, max - *len, offset + (off_t)*len)) > 0)
        *len += (size_t)r;
    close(fd);
    buf[*len] = '\0';
    return buf;
}

/* Where the last n lines of path begin (0: the start). */
static off_t api_logs_tail_start(const char *path, long long n)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, &sb) < 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char buf[65536];
    off_t end = sb.st_size, at = end;
    long long lines = 0;
    bool last = true; /* the file's last byte: a final newline ends a line, begins none */
    while (at > 0) {
        size_t want = at > (off_t)sizeof buf ? sizeof buf : (size_t)at;
        ssize_t r = pread(fd, buf, want, at - (off_t)want);
        if (r <= 0)
            break;
        for (ssize_t i = r - 1; i >= 0; i--) {
            off_t pos = at - (off_t)want + i;
            if (buf[i] == '\n' && !(last && pos == end - 1) && ++lines == n) {
                close(fd);
                return pos + 1;
            }
            last = false;
        }
        at -= (off_t)want;
    }
    close(fd);
    return 0;
}

static void api_follower_free(struct api_follower *f)
{
    event_free(f->tick);
    free(f);
    api_followers--;
}

static void api_follower_closed(void *arg)
{
    api_follower_free(arg);
}

/* Sends up to API_LOGS_CHUNK bytes of dir's f->file from f->offset (which it advances).
 * Returns how many, or -1 when the client is gone (f is then gone too: on_close). */
static ssize_t api_follower_chunk(struct api_follower *f, const char *dir)
{
    char *path = xasprintf("%s/%s", dir, f->file);
    size_t len;
    char *buf = api_logs_read(path, f->offset, API_LOGS_CHUNK, &len);
    free(path);
    int rc = len > 0 ? http_stream_write(f->stream, buf, len) : 0;
    free(buf);
    if (rc < 0)
        return -1;
    f->offset += (off_t)len;
    return (ssize_t)len;
}

/* Sends what is new; returns false when f is gone (the client went, or the end was sent). */
static bool api_follower_send(struct api_follower *f, json_t *task)
{
    long long which = 0;
    const char *dir = api_logs_dir(task, f->fixed ? f->attempt : 0, &which);
    if (dir == NULL)
        return true;
    if (!f->fixed && which != f->attempt) {
        if (f->attempt != 0) { /* the rest of the attempt before, then the next from its start */
            long long prev;
            const char *old = api_logs_dir(task, f->attempt, &prev);
            ssize_t sent = old != NULL ? api_follower_chunk(f, old) : 0;
            if (sent < 0)
                return false;
            if (sent == API_LOGS_CHUNK)
                return true; /* more of it at the next tick */
        }
        f->attempt = which;
        f->offset = 0;
    }
    ssize_t len = api_follower_chunk(f, dir);
    if (len < 0)
        return false;
    bool latest = f->fixed || api_logs_dir(task, 0, &which) == NULL || which == f->attempt;
    if (len < API_LOGS_CHUNK && latest && api_logs_ended(task)) {
        struct http_stream *s = f->stream;
        api_follower_free(f);
        http_stream_end(s);
        return false;
    }
    return true;
}

static void api_follower_tick(evutil_socket_t fd, short what, void *arg)
{
    struct api_follower *f = arg;
    json_t *task = store_task_json(f->d->store, f->task);
    if (task == NULL) { /* cannot be: tasks are never deleted */
        struct http_stream *s = f->stream;
        api_follower_free(f);
        http_stream_end(s);
        return;
    }
    bool alive = api_follower_send(f, task);
    json_decref(task);
    if (alive) {
        struct timeval tv = {0, API_LOGS_TICK_MS * 1000};
        evtimer_add(f->tick, &tv);
    }
}

/* Follows attempt (0: the latest, now which) from offset. */
static void api_logs_follow(struct http_req *r, int64_t id, long long attempt, long long which,
                            const char *file, off_t offset)
{
    if (api_followers >= API_LOGS_FOLLOWERS) {
        api_error(r, 503, NULL, "%d logs are followed already: try again later",
                  API_LOGS_FOLLOWERS);
        return;
    }
    struct api_follower *f = xcalloc(1, sizeof *f);
    f->d = r->d;
    f->task = id;
    f->fixed = attempt > 0;
    f->attempt = attempt > 0 ? attempt : which;
    f->file = file;
    f->offset = offset;
    f->tick = evtimer_new(r->d->base, api_follower_tick, f);
    api_followers++;
    f->stream = http_stream_begin(r, 200, "text/plain; charset=utf-8", NULL,
                                  api_follower_closed, f);
    if (f->stream == NULL) { /* http.c answered */
        api_follower_free(f);
        return;
    }
    event_active(f->tick, EV_TIMEOUT, 0); /* what there is now, at once */
}

void api_tasks_logs(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    long long tail, attempt, which = 0;
    bool follow;
    char *stream = http_query(r, "stream");
    const char *file = "stdout";
    if (stream != NULL && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
        api_error(r, 400, "stream", "'stream' must be stdout or stderr, not '%s'", stream);
        free(stream);
        return;
    }
    if (stream != NULL && strcmp(stream, "stderr") == 0)
        file = "stderr";
    free(stream);
    if (api_query_int(r, "tail", 0, API_LOGS_MAX_TAIL, 0, &tail) < 0 ||
        api_query_int(r, "attempt", 1, 1000000, 0, &attempt) < 0 ||
        api_query_bool(r, "follow", &follow) < 0)
        return;
    json_t *reply = api_call(r, who, json_pack("{s:s,s:I,s:b}", "op", "show", "id",
                                               (json_int_t)p->id, "logs", 1));
    if (reply == NULL)
        return;
    json_t *task = json_object_get(reply, "task");
    const char *dir = api_logs_dir(task, attempt, &which);
    if (dir == NULL && attempt > 0) {
        api_error(r, 404, "attempt", "task %lld has no attempt %lld", (long long)p->id, attempt);
        json_decref(reply);
        return;
    }
    char *path = dir ? xasprintf("%s/%s", dir, file) : NULL;
    off_t offset = path && tail > 0 ? api_logs_tail_start(path, tail) : 0;
    if (follow) {
        api_logs_follow(r, p->id, attempt, which, file, offset);
    } else {
        size_t len = 0;
        char *buf = path ? api_logs_read(path, offset, API_LOGS_MAX, &len) : NULL;
        http_respond(r, 200, "text/plain; charset=utf-8", buf ? buf : "", len,
                     "Cache-Control: no-store\r\n");
        free(buf);
    }
    free(path);
    json_decref(reply);
}
