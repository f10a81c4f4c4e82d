/* drover top [--once] [--interval DURATION]: a live view of the GPUs, the tasks on them and the
 * queue, in the spirit of nvitop. The frame is drawn by top_render (pure, cli/top.c, tested by
 * tests/unit/test_top.c); the live loop redraws it in place on the alternate screen and owes the
 * terminal its exact state back on every way out. */
#include "cli/cli.h"
#include "cli/top.h"
#include "util/io.h"
#include "util/parse.h"
#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t top_quit, top_resized, top_suspended;

static void top_on_signal(int sig)
{
    if (sig == SIGWINCH)
        top_resized = 1;
    else if (sig == SIGTSTP)
        top_suspended = 1;
    else
        top_quit = 1;
}

/* The terminal as found, and whether we still owe it back. */
static struct {
    bool screen;  /* alternate screen entered, cursor hidden, autowrap off */
    bool termios; /* stdin's modes changed; `saved` holds them */
    struct termios saved;
} top_term;

static void top_term_restore(void)
{
    static const char leave[] = "\033[0m\033[?7h\033[?25h\033[?1049l";
    if (top_term.screen)
        io_write_all(STDOUT_FILENO, leave, sizeof leave - 1);
    top_term.screen = false;
    if (top_term.termios)
        tcsetattr(STDIN_FILENO, TCSADRAIN, &top_term.saved);
    top_term.termios = false;
}

/* Keys without echo or line buffering; signals (Ctrl-C, Ctrl-Z) still come as signals. */
static void top_term_enter(void)
{
    static const char enter[] = "\033[?1049h\033[?25l\033[?7l\033[H\033[2J";
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &top_term.saved) == 0) {
        struct termios raw = top_term.saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        top_term.termios = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    top_term.screen = true;
    io_write_all(STDOUT_FILENO, enter, sizeof enter - 1);
}

static const int top_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP};
#define TOP_NSIGNALS (sizeof top_signals / sizeof top_signals[0])

/* No SA_RESTART: a signal cuts poll() short so that the loop sees its flag at once. */
static void top_signals_set(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = top_on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < TOP_NSIGNALS; i++)
        sigaction(top_signals[i], &sa, &old[i]);
}

static void top_signals_reset(const struct sigaction *old)
{
    for (size_t i = 0; i < TOP_NSIGNALS; i++)
        sigaction(top_signals[i], &old[i], NULL);
}

static long long top_clock_ms(int clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An older daemon sends no clock: measure against ours. */
static void top_stamp(json_t *snapshot)
{
    if (!json_is_integer(json_object_get(snapshot, "now")))
        json_object_set_new(snapshot, "now", json_integer(top_clock_ms(CLOCK_REALTIME)));
}

/* One `gpus` request, never starting a daemon. Returns the reply (the caller frees it), or NULL
 * when the daemon is gone, answers with an error (then *error, which the caller frees), or a quit
 * signal came while waiting: the reply is awaited in slices so that a daemon that does not answer
 * cannot hold Ctrl-C up. */
static json_t *top_fetch(char **error)
{
    int fd = client_connect("top", false);
    if (fd < 0)
        return NULL;
    json_t *req = client_request("gpus"), *reply = NULL;
    int rc = proto_send(fd, req, NULL);
    json_decref(req);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (rc == 0 && !top_quit) {
        rc = poll(&p, 1, 200);
        if (rc > 0) {
            if (proto_recv(fd, &reply, PROTO_MAX_REPLY) < 0)
                reply = NULL;
            break;
        }
        rc = rc < 0 && errno != EINTR ? -1 : 0;
    }
    close(fd);
    if (reply && !json_is_true(json_object_get(reply, "ok"))) {
        const char *msg = json_string_value(json_object_get(reply, "error"));
        *error = xstrdup(msg ? msg : "error");
        json_decref(reply);
        reply = NULL;
    }
    if (reply)
        top_stamp(reply);
    return reply;
}

static void top_size(int *width, int *height)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *width = ws.ws_col;
        *height = ws.ws_row;
    }
}

/* Overwrites the screen in place: home, each line then clear-to-end-of-line, then clear below.
 * One column is left free so that a full line never sits in the pending-wrap column. */
static void top_draw(const json_t *snapshot)
{
    int width = 80, height = 24;
    char *frame = NULL, *screen = NULL;
    size_t frame_len = 0, screen_len = 0;
    top_size(&width, &height);
    FILE *fp = open_memstream(&frame, &frame_len);
    if (fp == NULL)
        return;
    top_render(snapshot, width > 1 ? width - 1 : 1, height, out_color(), fp);
    fclose(fp);
    fp = open_memstream(&screen, &screen_len);
    if (fp == NULL) {
        free(frame);
        return;
    }
    fputs("\033[H", fp);
    for (char *line = frame, *nl; line < frame + frame_len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(frame + frame_len - line));
        if (nl == NULL)
            nl = frame + frame_len;
        fwrite(line, 1, (size_t)(nl - line), fp);
        fputs(nl + 1 < frame + frame_len ? "\033[K\r\n" : "\033[K", fp);
    }
    fputs("\033[J", fp);
    fclose(fp);
    io_write_all(STDOUT_FILENO, screen, screen_len);
    free(frame);
    free(screen);
}

/* Reads what keys are waiting; false once stdin has nothing more to give. */
static bool top_keys(void)
{
    char keys[64];
    ssize_t n = read(STDIN_FILENO, keys, sizeof keys);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    for (ssize_t i = 0; i < n; i++)
        if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3 /* Ctrl-C without ISIG */)
            top_quit = 1;
    return n > 0;
}

/* Ctrl-Z: give the terminal back, stop, and take it again on fg. */
static void top_suspend(void)
{
    struct sigaction dfl, mine;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    top_term_restore();
    sigaction(SIGTSTP, &dfl, &mine);
    raise(SIGTSTP);
    sigaction(SIGTSTP, &mine, NULL);
    top_term_enter();
}

/* The live loop; takes `snapshot`. Every way out passes top_term_restore (an exit() elsewhere
 * through atexit). */
static int top_live(json_t *snapshot, long long interval_ms)
{
    struct sigaction old[TOP_NSIGNALS];
    static bool registered;
    bool stdin_open = true, gone = false, redraw = true;
    char *error = NULL;
    if (!registered && atexit(top_term_restore) == 0)
        registered = true;
    signal(SIGPIPE, SIG_IGN); /* a daemon that dies mid-request is an error, not our death */
    top_signals_set(old);
    top_term_enter();
    long long next = top_clock_ms(CLOCK_MONOTONIC) + interval_ms;
    while (!top_quit) {
        if (top_suspended) {
            top_suspended = 0;
            top_suspend();
            redraw = true;
        }
        if (top_resized) {
            top_resized = 0;
            redraw = true;
        }
        if (redraw)
            top_draw(snapshot);
        redraw = false;
        long long wait = next - top_clock_ms(CLOCK_MONOTONIC);
        if (wait <= 0) {
            json_t *fresh = top_fetch(&error);
            if (fresh == NULL) {
                gone = !top_quit && error == NULL;
                break;
            }
            json_decref(snapshot);
            snapshot = fresh;
            next = top_clock_ms(CLOCK_MONOTONIC) + interval_ms;
            redraw = true;
            continue;
        }
        struct pollfd p = {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN};
        if (poll(&p, 1, wait > INT_MAX ? INT_MAX : (int)wait) > 0 && p.revents)
            stdin_open = (p.revents & POLLIN) ? top_keys() : false;
    }
    top_term_restore();
    top_signals_reset(old);
    json_decref(snapshot);
    if (error) {
        fprintf(stderr, "drover top: %s\n", error);
        free(error);
        return EXIT_FAILED;
    }
    if (gone) {
        fprintf(stderr, "drover top: the daemon went away\n");
        return EXIT_UNREACHABLE;
    }
    return EXIT_OK;
}

static const struct cmd_opt top_opts[] = {
    {"once", 0, false, false, "print one frame and exit (the default when stdout is not a TTY)"},
    {"interval", 0, true, false, "time between refreshes (default 1s, at least 100ms)"},
    {NULL, 0, false, false, NULL},
};

static int top_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *interval_s = cmd_opt(cmd, args, "interval"), *why;
    int64_t interval_ms = 1000;
    if (interval_s && parse_duration(interval_s, &interval_ms, &why) < 0)
        return cmd_usage_error(cmd, "bad --interval '%s': %s", interval_s, why);
    if (interval_ms < 100)
        return cmd_usage_error(cmd, "--interval must be at least 100ms");
    bool tty = isatty(STDOUT_FILENO);
    int rc;
    /* The first request may start the daemon, and exits if it cannot be reached: before the
     * terminal is touched. */
    json_t *snapshot = client_call(cmd->name, client_request("gpus"), &rc);
    if (snapshot == NULL)
        return rc;
    top_stamp(snapshot);
    if (tty && !cmd_opt(cmd, args, "once"))
        return top_live(snapshot, interval_ms);
    int width = 100, height = 0;
    if (tty) {
        top_size(&width, &height);
        height = height > 1 ? height - 1 : 1; /* room for the prompt after */
    }
    top_render(snapshot, width, height, out_color(), stdout);
    json_decref(snapshot);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
}

const struct cmd_entry cmd_top = {
    .name = "top",
    .usage = "top [--once] [--interval DURATION]",
    .summary = "a live view of the GPUs, their tasks and the queue",
    .opts = top_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = top_exec,
};
