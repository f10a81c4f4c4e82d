/* fuzz_http — the daemon's HTTP server (daemon/http.c) and API (daemon/api*.c, events.c), fed
 * bytes exactly as a TCP client sends them, in-process, against a real store in a temp dir.
 *
 * An input is what one client sends on one connection, byte for byte, cut into pieces at each
 * 0xFF byte (a byte valid UTF-8 never holds, so JSON and YAML bodies keep every other one; at
 * most FUZZ_HTTP_PIECES pieces, the rest is the last): each piece is written, then the loop is
 * run until nothing more happens, so partial request lines and heads, bodies that come later,
 * 100-continue and pipelining are all exercised. In every piece "ROTOKEN" is replaced by a
 * read-only token's text, "TOKEN" by a read-write one's and "SESSION" by a dashboard session's
 * (its X-CSRF-Token is "fuzz-csrf"; all three the fuzzer's own user's, made once in the pristine
 * store), so that inputs reach the routes behind authentication.
 *
 * The daemon is fuzz_ops' (tests/fuzz/fuzz-daemon.c: config defaults, a copy of an empty
 * migrated store, fake GPUs 2x16G,1x80G, drained so that nothing is ever spawned: a submit over
 * HTTP just queues), plus the event backlog (events.c), and its loop is run for real:
 *   - one end of a socketpair is handed to http.c as an accepted connection (http_adopt_fd, the
 *     seam http.h has for this harness alone); the harness is the client on the other end;
 *   - the loop is run with EVLOOP_NONBLOCK, turn after turn, reading what the server answers,
 *     until two turns in a row change nothing (no answer bytes, no request bytes taken, no
 *     connection freed, no event active); a loop still busy after FUZZ_HTTP_TURNS turns aborts
 *     (the daemon would spin);
 *   - d->kick, d->carry and d->wakeup do what fuzz_ops does after each request
 *     (fuzz_daemon_turn): carry out, schedule, and abort on a START;
 *   - at the end the client closes its end and the loop runs again: the connection (a stream
 *     too: events, a followed log) must then be freed, its stream's owner told (no leak:
 *     LeakSanitizer runs after every input). Then http_stop, events_stop, a fresh daemon.
 *
 * Checks beyond the sanitizers, on the bytes the client read (fuzz_check_answers): every answer
 * begins "HTTP/1.1 " and a 3-digit status; none is 5xx but 503 (a bound); interim 100s aside,
 * there is one answer per request handed to api_handle (api_handle is wrapped at link time,
 * -Wl,--wrap=api_handle, to count them and learn which were HEAD: those answers carry no body),
 * in order, plus at most one that http.c gives itself (a bound, a malformed request) which closes
 * the connection; a body is as long as its Content-Length says, or well-formed chunks; nothing
 * follows an answer that says Connection: close, or a stream; and after the client closes, the
 * connection is gone. FUZZ_HTTP_VERBOSE=1 prints what the client read, to see what an input does.
 */
#include "daemon/api-internal.h"
#include "daemon/api.h"
#include "daemon/daemon.h"
#include "daemon/http.h"
#include "fuzz-daemon.h"
#include "fuzz.h"
#include "util/xalloc.h"

#include <errno.h>
#include <event2/event.h>
#include <linux/sockios.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_HTTP_SPLIT 0xff  /* cuts the input into pieces */
#define FUZZ_HTTP_PIECES 64
#define FUZZ_HTTP_TURNS 1000  /* loop turns to settle: more is a loop that never rests (abort) */

static char fuzz_token[AUTH_TEXT_MAX], fuzz_ro_token[AUTH_TEXT_MAX], fuzz_session[AUTH_TEXT_MAX];
/* The session's CSRF secret: fixed, so that inputs carry it as is ("X-CSRF-Token: fuzz-csrf"). */
#define FUZZ_HTTP_CSRF "fuzz-csrf"
static bool fuzz_verbose;

/* The requests http.c handed to api_handle on the connection, in order: whether each was HEAD
 * (its answer then has no body). */
static bool *fuzz_heads;
static size_t fuzz_nrequests, fuzz_heads_cap;

void __real_api_handle(struct http_req *r);
void __wrap_api_handle(struct http_req *r);
void __wrap_api_handle(struct http_req *r)
{
    if (fuzz_nrequests == fuzz_heads_cap) {
        fuzz_heads_cap = fuzz_heads_cap ? 2 * fuzz_heads_cap : 64;
        fuzz_heads = xrealloc(fuzz_heads, fuzz_heads_cap * sizeof *fuzz_heads);
    }
    fuzz_heads[fuzz_nrequests++] = r->head;
    __real_api_handle(r);
}

/* What the client read. */
struct fuzz_read {
    char *buf;
    size_t len, cap;
    bool eof; /* the server shut its side */
};

static void fuzz_fail(const char *what, const struct fuzz_read *in, size_t at)
{
    fprintf(stderr, "fuzz_http: %s (at byte %zu of %zu the client read)\n", what, at, in->len);
    fprintf(stderr, "fuzz_http: what the client read:\n%.*s\n", (int)(in->len < 4096 ? in->len
                                                                                    : 4096),
            in->buf);
    abort();
}

/* Reads everything the server has sent so far. Returns the number of bytes. */
static size_t fuzz_read(int fd, struct fuzz_read *in)
{
    size_t got = 0;
    while (!in->eof) {
        if (in->cap - in->len < 65536) {
            in->cap = in->cap ? 2 * in->cap : 1 << 17;
            in->buf = xrealloc(in->buf, in->cap);
        }
        ssize_t n = recv(fd, in->buf + in->len, in->cap - in->len, MSG_DONTWAIT);
        if (n > 0) {
            in->len += (size_t)n;
            got += (size_t)n;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            in->eof = true; /* shut, or reset */
        } else if (errno == EAGAIN) {
            break;
        }
    }
    return got;
}

/* Bytes the client sent that the server has not read yet. */
static int fuzz_unread(int fd)
{
    int n = 0;
    if (fd < 0 || ioctl(fd, SIOCOUTQ, &n) < 0)
        return 0;
    return n;
}

/* Runs the loop until two turns in a row change nothing. fd: the client's end, or -1 once it
 * is closed. Returns whether anything happened. */
static bool fuzz_pump(struct daemon *d, int fd, struct fuzz_read *in)
{
    int quiet = 0, turn;
    bool any = false;
    for (turn = 0; turn < FUZZ_HTTP_TURNS && quiet < 2; turn++) {
        int unread = fuzz_unread(fd), conns = d->conns_open;
        event_base_loop(d->base, EVLOOP_NONBLOCK);
        size_t got = fd >= 0 ? fuzz_read(fd, in) : 0;
        bool moved = got > 0 || fuzz_unread(fd) != unread || d->conns_open != conns ||
                     event_base_get_num_events(d->base, EVENT_BASE_COUNT_ACTIVE) > 0;
        quiet = moved ? 0 : quiet + 1;
        any |= moved;
    }
    if (quiet < 2)
        fatalx("fuzz_http: the loop is still busy after %d turns", turn);
    return any;
}

/* Writes len bytes to the server, running the loop whenever the socket is full. Returns false
 * when the server takes no more (it stopped reading, or closed). */
static bool fuzz_send(struct daemon *d, int fd, const char *p, size_t len, struct fuzz_read *in)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, p + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && errno == EAGAIN) {
            if (!fuzz_pump(d, fd, in))
                return false; /* full, and the server is not reading */
        } else {
            return false;
        }
    }
    fuzz_pump(d, fd, in);
    return true;
}

/* The header's value in head[0..len) (the lines after the status line), or NULL; *vlen set. */
static const char *fuzz_header(const char *head, size_t len, const char *name, size_t *vlen)
{
    size_t nlen = strlen(name);
    for (const char *line = head; line < head + len;) {
        const char *eol = memmem(line, (size_t)(head + len - line), "\r\n", 2);
        if (eol == NULL || eol == line)
            return NULL;
        if ((size_t)(eol - line) > nlen && line[nlen] == ':' &&
            strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen + 1;
            while (v < eol && *v == ' ')
                v++;
            *vlen = (size_t)(eol - v);
            return v;
        }
        line = eol + 2;
    }
    return NULL;
}

/* Skips well-formed chunks from *off; true with *off after the last chunk ("0\r\n\r\n"),
 * false with *off at the end when the stream goes on (still open when the client left). */
static bool fuzz_chunks(const struct fuzz_read *in, size_t *off)
{
    const char *p = in->buf;
    while (*off < in->len) {
        const char *eol = memmem(p + *off, in->len - *off, "\r\n", 2);
        char *end;
        if (eol == NULL)
            fuzz_fail("a chunk size line cut short", in, *off);
        unsigned long size = strtoul(p + *off, &end, 16);
        if (end != eol || end == p + *off)
            fuzz_fail("a malformed chunk size line", in, *off);
        size_t data = (size_t)(eol + 2 - p);
        if (in->len - data < size + 2 || memcmp(p + data + size, "\r\n", 2) != 0)
            fuzz_fail("a chunk shorter than its size, or not ended by CRLF", in, *off);
        *off = data + size + 2;
        if (size == 0)
            return true;
    }
    return false;
}

/* Checks what the client read (the file's header says what). answered: how many requests
 * api_handle had been given when the client left, each of which must have its answer. */
static void fuzz_check_answers(const struct fuzz_read *in, size_t answered)
{
    const char *p = in->buf;
    size_t off = 0, request = 0;
    while (off < in->len) {
        const char *a = p + off;
        size_t left = in->len - off;
        if (left < 13 || memcmp(a, "HTTP/1.1 ", 9) != 0 || a[9] < '1' || a[9] > '5' ||
            a[10] < '0' || a[10] > '9' || a[11] < '0' || a[11] > '9' || a[12] != ' ')
            fuzz_fail("an answer that does not begin with HTTP/1.1 and a status", in, off);
        int status = (a[9] - '0') * 100 + (a[10] - '0') * 10 + (a[11] - '0');
        const char *end = memmem(a, left, "\r\n\r\n", 4);
        if (end == NULL)
            fuzz_fail("an answer's head cut short", in, off);
        const char *lines = memmem(a, left, "\r\n", 2) + 2;
        size_t hlen = (size_t)(end + 4 - a), llen = (size_t)(end + 2 - lines), vlen = 0;
        off += hlen;
        if (status == 100) {
            if (hlen != 25)
                fuzz_fail("a 100 Continue with headers", in, off - hlen);
            continue;
        }
        if (status >= 500 && status != 503)
            fuzz_fail("a 5xx answer other than 503", in, off - hlen);
        bool queued = request < fuzz_nrequests, head = queued && fuzz_heads[request];
        request++;
        const char *v = fuzz_header(lines, llen, "Connection", &vlen);
        bool close = v != NULL && vlen == 5 && strncasecmp(v, "close", 5) == 0;
        if (!queued && !close)
            fuzz_fail("an answer to no request that leaves the connection open", in,
                      off - hlen);
        bool stream = false;
        if ((v = fuzz_header(lines, llen, "Content-Length", &vlen)) != NULL) {
            char *num_end;
            unsigned long long length = strtoull(v, &num_end, 10);
            if (num_end != v + vlen)
                fuzz_fail("a malformed Content-Length", in, off - hlen);
            /* http.c's own closing answer to a HEAD request it could not hand over (a bad
             * target) has no body either; api_handle never saw that request. */
            bool own_head = !queued && close && off == in->len;
            if (!head && !own_head) {
                if (in->len - off < length)
                    fuzz_fail("a body shorter than its Content-Length", in, off - hlen);
                off += (size_t)length;
            }
        } else if ((v = fuzz_header(lines, llen, "Transfer-Encoding", &vlen)) != NULL) {
            if (vlen != 7 || strncasecmp(v, "chunked", 7) != 0)
                fuzz_fail("a Transfer-Encoding other than chunked", in, off - hlen);
            /* A HEAD answer to a stream has its head alone, and the connection goes on. */
            stream = !head;
            if (!head)
                fuzz_chunks(in, &off);
        } else if (status != 204 && status != 304 && !head) {
            if (!close)
                fuzz_fail("no Content-Length, not chunked, and no Connection: close", in,
                          off - hlen);
            off = in->len; /* until the connection closes */
        }
        if ((close || stream) && off < in->len)
            fuzz_fail(close ? "an answer after Connection: close" : "an answer after a stream",
                      in, off);
    }
    if (request < answered)
        fuzz_fail("a request handed to api_handle has no answer", in, in->len);
}

/* d->kick, d->carry, d->wakeup: what the daemon's loop does on them, drained. */
static void fuzz_on_event(struct daemon *d)
{
    fuzz_daemon_turn(d);
}

/* Replaces "ROTOKEN", "TOKEN" and "SESSION" in p[0..len) by the credentials' texts; *out_len
 * set. */
static char *fuzz_substitute(const char *p, size_t len, size_t *out_len)
{
    size_t cap = len + 1, n = 0;
    char *out = xmalloc(cap);
    for (size_t i = 0; i < len;) {
        const char *with = NULL;
        size_t skip = 0;
        if (len - i >= 7 && memcmp(p + i, "ROTOKEN", 7) == 0) {
            with = fuzz_ro_token;
            skip = 7;
        } else if (len - i >= 5 && memcmp(p + i, "TOKEN", 5) == 0) {
            with = fuzz_token;
            skip = 5;
        } else if (len - i >= 7 && memcmp(p + i, "SESSION", 7) == 0) {
            with = fuzz_session;
            skip = 7;
        }
        size_t add = with ? strlen(with) : 1;
        if (n + add >= cap) {
            cap = 2 * cap + add;
            out = xrealloc(out, cap);
        }
        if (with) {
            memcpy(out + n, with, add);
            i += skip;
        } else {
            out[n] = p[i++];
        }
        n += add;
    }
    *out_len = n;
    return out;
}

/* The fuzzer's user's credentials in the pristine store, as `drover token create` (and
 * --read-only) and a dashboard login make them, less the audit rows: a token, a read-only one,
 * a session whose CSRF secret is FUZZ_HTTP_CSRF. */
static void fuzz_make_tokens(void)
{
    char *err = NULL;
    struct daemon d = {0};
    struct passwd *pw = getpwuid(getuid());
    d.store = store_open(fuzz_daemon_pristine(), &err);
    if (d.store == NULL)
        fatalx("fuzz_http: %s", err);
    char *texts[3] = {fuzz_token, fuzz_ro_token, fuzz_session};
    for (int i = 0; i < 3; i++) {
        struct store_token t = {.uid = getuid(), .read_only = i == 1, .session = i == 2,
                                .created = daemon_now()};
        snprintf(t.user, sizeof t.user, "%s", pw ? pw->pw_name : "fuzzer");
        if (t.session) {
            t.expires = daemon_now() + 366LL * 24 * 3600 * 1000; /* a run never outlives it */
            snprintf(t.csrf, sizeof t.csrf, "%s", FUZZ_HTTP_CSRF);
        }
        store_begin(d.store);
        if (auth_issue(&d, &t, t.session ? NULL : "fuzz", texts[i], &err) < 0 ||
            store_commit(d.store) < 0)
            fatalx("fuzz_http: cannot make a token: %s", err ? err : store_error(d.store));
    }
    store_close(d.store);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    signal(SIGPIPE, SIG_IGN); /* as daemon_main does: a write to a closed peer is EPIPE */
    fuzz_daemon_init("http");
    fuzz_make_tokens();
    fuzz_verbose = getenv("FUZZ_HTTP_VERBOSE") && strcmp(getenv("FUZZ_HTTP_VERBOSE"), "1") == 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct daemon d;
    struct fuzz_read in = {0};
    int sv[2];
    fuzz_daemon_new(&d, fuzz_on_event);
    d.started = daemon_now();
    events_start(&d);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        fatalx("fuzz_http: socketpair: %s", strerror(errno));
    fuzz_nrequests = 0;
    http_adopt_fd(&d, sv[0]);
    size_t off = 0;
    for (int piece = 0; off <= size; piece++) {
        const uint8_t *cut = piece + 1 < FUZZ_HTTP_PIECES
                                 ? memchr(data + off, FUZZ_HTTP_SPLIT, size - off) : NULL;
        size_t len = cut ? (size_t)(cut - (data + off)) : size - off, n;
        char *text = fuzz_substitute((const char *)data + off, len, &n);
        bool taken = fuzz_send(&d, sv[1], text, n, &in);
        free(text);
        off += len + 1;
        if (!taken)
            break;
    }
    fuzz_pump(&d, sv[1], &in);
    size_t answered = fuzz_nrequests;
    if (fuzz_verbose)
        fprintf(stderr, "fuzz_http: %zu requests; the client read:\n%.*s\n", answered,
                (int)in.len, in.buf ? in.buf : "");
    fuzz_check_answers(&in, answered);
    /* The client leaves: the connection, and a stream it held, must go. */
    close(sv[1]);
    fuzz_pump(&d, -1, &in);
    if (d.conns_open != 0)
        fatalx("fuzz_http: the connection outlived its client");
    http_stop(&d);
    events_stop(&d);
    api_state_free(&d);
    fuzz_daemon_free(&d);
    free(in.buf);
    return 0;
}
