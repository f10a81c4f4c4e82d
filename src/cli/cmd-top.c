/* drover top [--once] [--interval DURATION]: a live view of the GPUs, the tasks on them and the
 * queue, in the spirit of nvitop. The frame is drawn by top_render (pure, tests/unit/test_top.c);
 * the live loop redraws it in place on the alternate screen and owes the terminal its exact
 * state back on every way out. */
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
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define TOP_MAX_WIDTH 1000
#define TOP_LINE_BYTES (4 * TOP_MAX_WIDTH + 1024) /* 4 bytes a character, plus escapes */

#define C_BOLD "\033[1m"
#define C_DIM "\033[2m"
#define C_RED "\033[31m"
#define C_GREEN "\033[32m"
#define C_YELLOW "\033[33m"
#define C_CYAN "\033[36m"

/* ---- the frame ---------------------------------------------------------------------------- */

struct frame {
    FILE *out;
    int width, height; /* height <= 0: no limit */
    int lines;         /* lines produced so far, printed or cut */
    bool color;
    bool have_now;
    long long now; /* ms, the daemon's clock */
};

/* One output line: text and escapes, with the display columns it spans. */
struct line {
    char text[TOP_LINE_BYTES];
    size_t len;
    int cols, width;
    bool color, open; /* open: a colour is set and owes a reset */
};

static void line_init(struct line *l, const struct frame *f)
{
    l->len = 0;
    l->cols = 0;
    l->width = f->width;
    l->color = f->color;
    l->open = false;
}

static void line_raw(struct line *l, const char *s, size_t n)
{
    if (l->len + n < sizeof l->text) {
        memcpy(l->text + l->len, s, n);
        l->len += n;
    }
}

/* The length of the UTF-8 character at p; *printable false for a control character (C0, DEL or
 * C1) or a byte that does not start a well-formed sequence. */
static size_t utf8_step(const unsigned char *p, bool *printable)
{
    *printable = *p >= 0x20 && *p < 0x7f;
    if (*p < 0x80)
        return 1;
    size_t n = *p >= 0xc2 && *p <= 0xdf ? 2 : *p >= 0xe0 && *p <= 0xef ? 3
             : *p >= 0xf0 && *p <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 1;
    if (n == 0)
        return 1;
    *printable = !(n == 2 && p[0] == 0xc2 && p[1] < 0xa0);
    return n;
}

static int text_cols(const char *s)
{
    int cols = 0;
    bool printable;
    for (const unsigned char *p = (const unsigned char *)s; *p; cols++)
        p += utf8_step(p, &printable);
    return cols;
}

/* Appends s, one column per character, until the line is full. Control characters and malformed
 * bytes become '?', so that nothing the daemon reports (a task name) can move the cursor. */
static void line_text(struct line *l, const char *s)
{
    bool printable;
    for (const unsigned char *p = (const unsigned char *)s; *p && l->cols < l->width; l->cols++) {
        size_t n = utf8_step(p, &printable);
        line_raw(l, printable ? (const char *)p : "?", printable ? n : 1);
        p += n;
    }
}

static void line_printf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_printf(struct line *l, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    line_text(l, buf);
}

static void line_pad(struct line *l, int col)
{
    while (l->cols < col && l->cols < l->width) {
        line_raw(l, " ", 1);
        l->cols++;
    }
}

/* s in a field of `cols` columns: padded, or cut with "…". */
static void line_field(struct line *l, const char *s, int cols)
{
    int start = l->cols;
    if (text_cols(s) <= cols) {
        line_text(l, s);
    } else if (cols > 0) {
        int width = l->width;
        l->width = width < start + cols - 1 ? width : start + cols - 1;
        line_text(l, s);
        l->width = width;
        line_text(l, "\xe2\x80\xa6");
    }
    line_pad(l, start + cols);
}

/* Sets a colour (NULL: back to plain). Nothing at all without colour. */
static void line_color(struct line *l, const char *esc)
{
    if (!l->color)
        return;
    if (l->open)
        line_raw(l, "\033[0m", 4);
    l->open = esc != NULL;
    if (esc)
        line_raw(l, esc, strlen(esc));
}

static void line_colored(struct line *l, const char *esc, const char *s)
{
    line_color(l, esc);
    line_text(l, s);
    line_color(l, NULL);
}

static bool frame_room(const struct frame *f, int n)
{
    return f->height <= 0 || f->lines + n <= f->height;
}

static void frame_line(struct frame *f, struct line *l)
{
    line_color(l, NULL);
    if (frame_room(f, 1)) {
        fwrite(l->text, 1, l->len, f->out);
        fputc('\n', f->out);
    }
    f->lines++;
}

/* ---- figures, "-" when unknown ------------------------------------------------------------- */

static bool get_int(const json_t *o, const char *key, long long *v)
{
    const json_t *j = json_object_get(o, key);
    if (!json_is_number(j))
        return false;
    *v = json_is_integer(j) ? (long long)json_integer_value(j) : (long long)json_number_value(j);
    return true;
}

static const char *get_str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "-";
}

static const char *int_text(const json_t *o, const char *key, const char *fmt, char *buf,
                            size_t len)
{
    long long v;
    if (!get_int(o, key, &v))
        return "-";
    snprintf(buf, len, fmt, v);
    return buf;
}

static const char *size_text(const json_t *o, const char *key, char *buf, size_t len)
{
    long long v;
    if (!get_int(o, key, &v))
        return "-";
    return format_size(v > 0 ? (uint64_t)v : 0, buf, len);
}

static const char *age_text(const struct frame *f, const json_t *o, const char *key, char *buf,
                            size_t len)
{
    long long since;
    if (!f->have_now || !get_int(o, key, &since))
        return "-";
    return format_duration(f->now - since, buf, len);
}

static const char *fill_color(double frac)
{
    return frac < 0.6 ? C_GREEN : frac < 0.85 ? C_YELLOW : C_RED;
}

static int cells_of(long long part, long long total, int cells)
{
    if (total <= 0 || part <= 0)
        return 0;
    double n = (double)part / (double)total * cells + 0.5;
    return n > cells ? cells : (int)n;
}

static void bar_run(struct line *l, const char *esc, char c, int n)
{
    char run[TOP_MAX_WIDTH + 1];
    if (n <= 0)
        return;
    n = n > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : n;
    memset(run, c, (size_t)n);
    run[n] = '\0';
    line_colored(l, esc, run);
}

/* [###+++|....]: '#' used, '+' claimed beyond it, '|' the claim where it falls inside the
 * used part, '.' free. Without a measured use the claim is the fill. */
static void bar_memory(struct line *l, int cells, long long total, bool have_used, long long used,
                       long long claimed)
{
    int n_used = have_used ? cells_of(used, total, cells) : 0;
    int n_claim = cells_of(claimed, total, cells);
    line_text(l, "[");
    if (have_used) {
        int mark = claimed > 0 && n_claim > 0 && n_claim < n_used ? n_claim - 1 : -1;
        const char *esc = fill_color((double)used / (double)(total > 0 ? total : 1));
        bar_run(l, esc, '#', mark >= 0 ? mark : n_used);
        if (mark >= 0) {
            bar_run(l, C_CYAN, '|', 1);
            bar_run(l, esc, '#', n_used - mark - 1);
        }
        bar_run(l, C_CYAN, '+', n_claim - n_used);
        bar_run(l, C_DIM, '.', cells - (n_claim > n_used ? n_claim : n_used));
    } else {
        bar_run(l, C_CYAN, '#', n_claim);
        bar_run(l, C_DIM, '.', cells - n_claim);
    }
    line_text(l, "] ");
}

static void bar_percent(struct line *l, int cells, bool known, long long percent)
{
    int n = known ? cells_of(percent, 100, cells) : 0;
    line_text(l, "[");
    bar_run(l, fill_color((double)percent / 100.0), '#', n);
    bar_run(l, C_DIM, '.', cells - n);
    line_text(l, "] ");
}

/* ---- sections ----------------------------------------------------------------------------- */

static void top_header(struct frame *f, const json_t *s)
{
    struct line l;
    char buf[64], when[32] = "-";
    long long v;
    line_init(&l, f);
    line_colored(&l, C_BOLD, "drover top");
    if (f->have_now) {
        time_t t = (time_t)(f->now / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "%H:%M:%S", &tm);
    }
    line_printf(&l, "  source %s  %s  queued %s", get_str(s, "source"), when,
                int_text(s, "queue_length", "%lld", buf, sizeof buf));
    const json_t *running = json_object_get(s, "running");
    if (get_int(json_object_get(s, "states"), "running", &v))
        line_printf(&l, "  running %lld", v);
    else if (json_is_array(running))
        line_printf(&l, "  running %zu", json_array_size(running));
    else
        line_text(&l, "  running -");
    line_text(&l, "  draining ");
    const json_t *draining = json_object_get(s, "draining");
    if (json_is_true(draining))
        line_colored(&l, C_YELLOW, "yes");
    else
        line_text(&l, json_is_false(draining) ? "no" : "-");
    if (get_int(s, "sample_interval_ms", &v) && v == 0)
        line_text(&l, "  no telemetry");
    else if (json_is_number(json_object_get(s, "sampled_at")))
        line_printf(&l, "  sampled %s ago", age_text(f, s, "sampled_at", buf, sizeof buf));
    if (get_int(s, "cpus", &v))
        line_printf(&l, "  %lld CPUs, %s memory", v, size_text(s, "mem", buf, sizeof buf));
    frame_line(f, &l);
}

/* Widths of the task line; `mem_col` is where its memory figure starts, for the process lines. */
struct task_cols {
    int name, mem_col;
};

static struct task_cols task_cols(const struct frame *f)
{
    int name = f->width - 72;
    name = name < 8 ? 8 : name > 24 ? 24 : name;
    return (struct task_cols){name, 4 + 8 + name + 8 + 12 + 17};
}

static const json_t *running_task(const json_t *s, long long id)
{
    const json_t *r;
    size_t i;
    json_array_foreach(json_object_get(s, "running"), i, r) {
        long long v;
        if (get_int(r, "id", &v) && v == id)
            return r;
    }
    return NULL;
}

/* "    #12     train-a   try 1   up 16m40s  claim 8G         mem 8G      util 73%" */
static void top_task(struct frame *f, long long id, const json_t *r)
{
    struct task_cols tc = task_cols(f);
    struct line l;
    char buf[64], claim[48] = "-";
    long long v;
    line_init(&l, f);
    line_pad(&l, 4);
    line_color(&l, C_CYAN);
    snprintf(buf, sizeof buf, "#%lld", id);
    line_field(&l, buf, 8);
    line_color(&l, NULL);
    line_field(&l, get_str(r, "name"), tc.name);
    line_printf(&l, "  try %-2s", int_text(r, "attempt", "%lld", buf, sizeof buf));
    line_printf(&l, "  up %-7s", age_text(f, r, "started", buf, sizeof buf));
    if (json_array_size(json_object_get(r, "gpus")) > 0 && get_int(r, "claim", &v))
        snprintf(claim, sizeof claim, "%s%s", v == 0 ? "" : "claim ",
                 v == 0 ? "exclusive" : format_size(v > 0 ? (uint64_t)v : 0, buf, sizeof buf));
    line_printf(&l, "  %-15s", claim);
    line_printf(&l, "  mem %-6s", size_text(r, "gpu_mem", buf, sizeof buf));
    line_printf(&l, "  util %s", int_text(r, "util", "%lld%%", buf, sizeof buf));
    frame_line(f, &l);
}

static void top_process(struct frame *f, const json_t *p)
{
    struct task_cols tc = task_cols(f);
    struct line l;
    char buf[64];
    line_init(&l, f);
    line_pad(&l, 4);
    line_printf(&l, "pid %-7s ", int_text(p, "pid", "%lld", buf, sizeof buf));
    line_colored(&l, C_DIM, "not drover's");
    line_pad(&l, tc.mem_col);
    line_printf(&l, "  mem %s", size_text(p, "mem", buf, sizeof buf));
    frame_line(f, &l);
}

/* "GPU 0   NVIDIA H100 80GB HBM3   temp 61C  power 312W  shared  BUSY  OFFLINE (XID 79)" */
static void top_gpu_title(struct frame *f, const json_t *g)
{
    struct line l;
    char buf[64];
    long long v;
    int name = f->width - 72;
    line_init(&l, f);
    line_color(&l, C_BOLD);
    line_printf(&l, "GPU %s", int_text(g, "index", "%lld", buf, sizeof buf));
    line_color(&l, NULL);
    line_pad(&l, 8);
    line_field(&l, get_str(g, "name"), name < 8 ? 8 : name > 28 ? 28 : name);
    line_printf(&l, "  temp %-4s", int_text(g, "temp_c", "%lldC", buf, sizeof buf));
    const json_t *watts = json_object_get(g, "power_w");
    snprintf(buf, sizeof buf, "%.0fW", json_number_value(watts));
    line_printf(&l, "  power %-5s", json_is_number(watts) ? buf : "-");
    const json_t *tasks = json_object_get(g, "tasks");
    line_printf(&l, "  %s", json_is_true(json_object_get(g, "exclusive")) ? "exclusive"
                            : !json_is_array(tasks)                      ? "-"
                            : json_array_size(tasks) > 0                 ? "shared"
                                                                         : "free");
    if (json_is_true(json_object_get(g, "busy"))) {
        line_text(&l, "  ");
        line_colored(&l, C_YELLOW, "BUSY");
    }
    if (json_is_true(json_object_get(g, "offline"))) {
        line_text(&l, "  ");
        line_color(&l, C_RED);
        line_text(&l, "OFFLINE");
        if (json_is_string(json_object_get(g, "offline_reason")))
            line_printf(&l, " (%s)", get_str(g, "offline_reason"));
        line_color(&l, NULL);
    } else if (get_int(g, "mem_util", &v)) {
        line_printf(&l, "  mem-ctl %lld%%", v);
    }
    frame_line(f, &l);
}

/* "  mem [###+++.....] 12G/80G          claimed 16G     util [####......]  73%" */
static void top_gpu_usage(struct frame *f, const json_t *g)
{
    struct line l;
    char used_s[32], total_s[32], claimed_s[32], text[80], util_s[16];
    long long total = 0, used = 0, claimed = 0, util = 0;
    bool have_total = get_int(g, "mem_total", &total);
    bool have_used = get_int(g, "mem_used", &used);
    bool have_util = get_int(g, "util", &util);
    if (!get_int(g, "mem_claimed", &claimed))
        claimed = 0;
    int cells = f->width - 54, mem_cells = 0, util_cells = 0;
    if (cells >= 12) {
        mem_cells = cells * 3 / 5 > 50 ? 50 : cells * 3 / 5;
        util_cells = cells - cells * 3 / 5 > 30 ? 30 : cells - cells * 3 / 5;
    }
    snprintf(text, sizeof text, "%s/%s", size_text(g, "mem_used", used_s, sizeof used_s),
             size_text(g, "mem_total", total_s, sizeof total_s));
    snprintf(util_s, sizeof util_s, "%lld%%", util);
    line_init(&l, f);
    line_text(&l, "  mem ");
    if (mem_cells > 0)
        bar_memory(&l, mem_cells, have_total ? total : 0, have_used, used, claimed);
    line_printf(&l, "%-15s  claimed %-6s  util ", text,
                size_text(g, "mem_claimed", claimed_s, sizeof claimed_s));
    if (util_cells > 0)
        bar_percent(&l, util_cells, have_util, util);
    line_printf(&l, "%4s", have_util ? util_s : "-");
    frame_line(f, &l);
}

static void top_gpu(struct frame *f, const json_t *s, const json_t *g)
{
    const json_t *id, *p;
    size_t i;
    top_gpu_title(f, g);
    top_gpu_usage(f, g);
    json_array_foreach(json_object_get(g, "tasks"), i, id)
        top_task(f, json_integer_value(id), running_task(s, json_integer_value(id)));
    json_array_foreach(json_object_get(g, "processes"), i, p) {
        const json_t *task = json_object_get(p, "task");
        if (task == NULL || json_is_null(task))
            top_process(f, p);
    }
}

static void top_gpus(struct frame *f, const json_t *s)
{
    const json_t *gpus = json_object_get(s, "gpus"), *g, *r;
    struct line l;
    size_t i;
    line_init(&l, f);
    if (!json_is_array(gpus)) {
        line_text(&l, "GPUs -");
        frame_line(f, &l);
    } else if (json_array_size(gpus) == 0) {
        line_text(&l, "no GPUs: only CPU-only tasks (--gpus 0) run here");
        frame_line(f, &l);
    }
    json_array_foreach(gpus, i, g)
        top_gpu(f, s, g);
    bool titled = false;
    json_array_foreach(json_object_get(s, "running"), i, r) {
        long long id;
        if (json_array_size(json_object_get(r, "gpus")) > 0 || !get_int(r, "id", &id))
            continue;
        if (!titled) {
            line_init(&l, f);
            line_colored(&l, C_BOLD, "CPU only");
            frame_line(f, &l);
            titled = true;
        }
        top_task(f, id, r);
    }
}

static void top_queued(struct frame *f, const json_t *q, int name_cols)
{
    struct line l;
    char buf[64], claim[32] = "-";
    long long gpus = 0, v;
    line_init(&l, f);
    line_text(&l, "  ");
    line_field(&l, int_text(q, "id", "#%lld", buf, sizeof buf), 8);
    line_field(&l, get_str(q, "name"), name_cols);
    line_printf(&l, "  %4s", int_text(q, "priority", "%lld", buf, sizeof buf));
    line_printf(&l, "  %4s", int_text(q, "gpus", "%lld", buf, sizeof buf));
    if (get_int(q, "gpus", &gpus) && gpus > 0 && get_int(q, "claim", &v))
        snprintf(claim, sizeof claim, "%s",
                 v == 0 ? "exclusive" : format_size(v > 0 ? (uint64_t)v : 0, buf, sizeof buf));
    line_printf(&l, "  %-9s", claim);
    line_printf(&l, "  %s", age_text(f, q, "since", buf, sizeof buf));
    frame_line(f, &l);
}

static void top_queue(struct frame *f, const json_t *s)
{
    const json_t *queued = json_object_get(s, "queued");
    long long total;
    struct line l;
    char buf[32];
    size_t listed = json_array_size(queued), shown = listed;
    int name_cols = f->width - 45;
    name_cols = name_cols < 6 ? 6 : name_cols > 32 ? 32 : name_cols;
    if (!get_int(s, "queue_length", &total) || total < (long long)listed)
        total = (long long)listed;
    if (frame_room(f, 4) && f->lines > 0) {
        line_init(&l, f);
        frame_line(f, &l);
    }
    line_init(&l, f);
    line_colored(&l, C_BOLD, "QUEUE");
    if (!json_is_array(queued)) {
        line_printf(&l, "  %s", int_text(s, "queue_length", "%lld queued", buf, sizeof buf));
        frame_line(f, &l);
        return;
    }
    if (total > 0)
        line_printf(&l, "  %lld queued", total);
    else
        line_text(&l, "  empty");
    frame_line(f, &l);
    if (total == 0 || !frame_room(f, 2))
        return; /* the title says how many */
    if (f->height > 0) {
        size_t room = (size_t)(f->height - f->lines - 1); /* less the column titles */
        if (listed > room || (long long)listed < total)
            shown = listed < room - 1 ? listed : room - 1;
    }
    line_init(&l, f);
    line_color(&l, C_DIM);
    line_text(&l, "  ");
    line_field(&l, "ID", 8);
    line_field(&l, "NAME", name_cols);
    line_text(&l, "  PRIO  GPUS  CLAIM      WAITING");
    frame_line(f, &l);
    for (size_t i = 0; i < shown; i++)
        top_queued(f, json_array_get(queued, i), name_cols);
    if ((long long)shown < total) {
        line_init(&l, f);
        line_printf(&l, "  \xe2\x80\xa6 %lld more", total - (long long)shown);
        frame_line(f, &l);
    }
}

void top_render(const json_t *snapshot, int width, int height, bool color, FILE *out)
{
    struct frame f = {
        .out = out,
        .width = width < 1 ? 1 : width > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : width,
        .height = height,
        .color = color,
    };
    f.have_now = get_int(snapshot, "now", &f.now);
    top_header(&f, snapshot);
    top_gpus(&f, snapshot);
    top_queue(&f, snapshot);
}

/* ---- the command ------------------------------------------------------------------------- */

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
    int fd = client_connect(false);
    if (fd < 0)
        return NULL;
    json_t *req = client_request("gpus"), *reply = NULL;
    int rc = proto_send(fd, req);
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
