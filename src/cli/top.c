/* The frame `drover top` draws (top.h): a pure function of the daemon's `gpus` snapshot, written
 * line by line, each line cut to the width and stripped of anything that could move the cursor.
 * The live command around it is cmd-top.c. */
#include "cli/top.h"
#include "util/parse.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define TOP_MAX_WIDTH 1000
#define TOP_LINE_BYTES (4 * TOP_MAX_WIDTH + 1024) /* 4 bytes a character, plus escapes */

#define C_BOLD "\033[1m"
#define C_DIM "\033[2m"
#define C_RED "\033[31m"
#define C_GREEN "\033[32m"
#define C_YELLOW "\033[33m"
#define C_CYAN "\033[36m"

/* ---- the frame ---------------------------------------------------------------------------- */

struct top_frame {
    FILE *out;
    int width, height; /* height <= 0: no limit */
    int lines;         /* lines produced so far, printed or cut */
    bool color;
    bool have_now;
    long long now; /* ms, the daemon's clock */
};

/* One output line: text and escapes, with the display columns it spans. */
struct top_line {
    char text[TOP_LINE_BYTES];
    size_t len;
    int cols, width;
    bool color, open; /* open: a colour is set and owes a reset */
};

static void top_line_init(struct top_line *l, const struct top_frame *f)
{
    l->len = 0;
    l->cols = 0;
    l->width = f->width;
    l->color = f->color;
    l->open = false;
}

static void top_line_raw(struct top_line *l, const char *s, size_t n)
{
    if (l->len + n < sizeof l->text) {
        memcpy(l->text + l->len, s, n);
        l->len += n;
    }
}

/* The length of the UTF-8 character at p; *printable false for a control character (C0, DEL or
 * C1) or a byte that does not start a well-formed sequence. */
static size_t top_utf8_step(const unsigned char *p, bool *printable)
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

static int top_text_cols(const char *s)
{
    int cols = 0;
    bool printable;
    for (const unsigned char *p = (const unsigned char *)s; *p; cols++)
        p += top_utf8_step(p, &printable);
    return cols;
}

/* Appends s, one column per character, until the line is full. Control characters and malformed
 * bytes become '?', so that nothing the daemon reports (a task name) can move the cursor. */
static void top_line_text(struct top_line *l, const char *s)
{
    bool printable;
    for (const unsigned char *p = (const unsigned char *)s; *p && l->cols < l->width; l->cols++) {
        size_t n = top_utf8_step(p, &printable);
        top_line_raw(l, printable ? (const char *)p : "?", printable ? n : 1);
        p += n;
    }
}

static void top_line_printf(struct top_line *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void top_line_printf(struct top_line *l, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    top_line_text(l, buf);
}

static void top_line_pad(struct top_line *l, int col)
{
    while (l->cols < col && l->cols < l->width) {
        top_line_raw(l, " ", 1);
        l->cols++;
    }
}

/* s in a field of `cols` columns: padded, or cut with "…". */
static void top_line_field(struct top_line *l, const char *s, int cols)
{
    int start = l->cols;
    if (top_text_cols(s) <= cols) {
        top_line_text(l, s);
    } else if (cols > 0) {
        int width = l->width;
        l->width = width < start + cols - 1 ? width : start + cols - 1;
        top_line_text(l, s);
        l->width = width;
        top_line_text(l, "\xe2\x80\xa6");
    }
    top_line_pad(l, start + cols);
}

/* Sets a colour (NULL: back to plain). Nothing at all without colour. */
static void top_line_color(struct top_line *l, const char *esc)
{
    if (!l->color)
        return;
    if (l->open)
        top_line_raw(l, "\033[0m", 4);
    l->open = esc != NULL;
    if (esc)
        top_line_raw(l, esc, strlen(esc));
}

static void top_line_colored(struct top_line *l, const char *esc, const char *s)
{
    top_line_color(l, esc);
    top_line_text(l, s);
    top_line_color(l, NULL);
}

static bool top_frame_room(const struct top_frame *f, int n)
{
    return f->height <= 0 || f->lines + n <= f->height;
}

static void top_frame_line(struct top_frame *f, struct top_line *l)
{
    top_line_color(l, NULL);
    if (top_frame_room(f, 1)) {
        fwrite(l->text, 1, l->len, f->out);
        fputc('\n', f->out);
    }
    f->lines++;
}

/* ---- figures, "-" when unknown ------------------------------------------------------------- */

static bool top_get_int(const json_t *o, const char *key, long long *v)
{
    const json_t *j = json_object_get(o, key);
    if (!json_is_number(j))
        return false;
    *v = json_is_integer(j) ? (long long)json_integer_value(j) : (long long)json_number_value(j);
    return true;
}

static const char *top_get_str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "-";
}

static const char *top_int_text(const json_t *o, const char *key, const char *fmt, char *buf,
                                size_t len)
{
    long long v;
    if (!top_get_int(o, key, &v))
        return "-";
    snprintf(buf, len, fmt, v);
    return buf;
}

static const char *top_size_text(const json_t *o, const char *key, char *buf, size_t len)
{
    long long v;
    if (!top_get_int(o, key, &v))
        return "-";
    return format_size(v > 0 ? (uint64_t)v : 0, buf, len);
}

static const char *top_age_text(const struct top_frame *f, const json_t *o, const char *key,
                                char *buf, size_t len)
{
    long long since;
    if (!f->have_now || !top_get_int(o, key, &since))
        return "-";
    return format_duration(f->now - since, buf, len);
}

static const char *top_fill_color(double frac)
{
    return frac < 0.6 ? C_GREEN : frac < 0.85 ? C_YELLOW : C_RED;
}

static int top_cells_of(long long part, long long total, int cells)
{
    if (total <= 0 || part <= 0)
        return 0;
    double n = (double)part / (double)total * cells + 0.5;
    return n > cells ? cells : (int)n;
}

static void top_bar_run(struct top_line *l, const char *esc, char c, int n)
{
    char run[TOP_MAX_WIDTH + 1];
    if (n <= 0)
        return;
    n = n > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : n;
    memset(run, c, (size_t)n);
    run[n] = '\0';
    top_line_colored(l, esc, run);
}

/* [###+++|....]: '#' used, '+' claimed beyond it, '|' the claim where it falls inside the
 * used part, '.' free. Without a measured use the claim is the fill. */
static void top_bar_memory(struct top_line *l, int cells, long long total, bool have_used,
                           long long used, long long claimed)
{
    int n_used = have_used ? top_cells_of(used, total, cells) : 0;
    int n_claim = top_cells_of(claimed, total, cells);
    top_line_text(l, "[");
    if (have_used) {
        int mark = claimed > 0 && n_claim > 0 && n_claim < n_used ? n_claim - 1 : -1;
        const char *esc = top_fill_color((double)used / (double)(total > 0 ? total : 1));
        top_bar_run(l, esc, '#', mark >= 0 ? mark : n_used);
        if (mark >= 0) {
            top_bar_run(l, C_CYAN, '|', 1);
            top_bar_run(l, esc, '#', n_used - mark - 1);
        }
        top_bar_run(l, C_CYAN, '+', n_claim - n_used);
        top_bar_run(l, C_DIM, '.', cells - (n_claim > n_used ? n_claim : n_used));
    } else {
        top_bar_run(l, C_CYAN, '#', n_claim);
        top_bar_run(l, C_DIM, '.', cells - n_claim);
    }
    top_line_text(l, "] ");
}

static void top_bar_percent(struct top_line *l, int cells, bool known, long long percent)
{
    int n = known ? top_cells_of(percent, 100, cells) : 0;
    top_line_text(l, "[");
    top_bar_run(l, top_fill_color((double)percent / 100.0), '#', n);
    top_bar_run(l, C_DIM, '.', cells - n);
    top_line_text(l, "] ");
}

/* ---- sections ----------------------------------------------------------------------------- */

static void top_header(struct top_frame *f, const json_t *s)
{
    struct top_line l;
    char buf[64], when[32] = "-";
    long long v;
    top_line_init(&l, f);
    top_line_colored(&l, C_BOLD, "drover top");
    if (f->have_now) {
        time_t t = (time_t)(f->now / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "%H:%M:%S", &tm);
    }
    top_line_printf(&l, "  source %s  %s  queued %s", top_get_str(s, "source"), when,
                    top_int_text(s, "queue_length", "%lld", buf, sizeof buf));
    const json_t *running = json_object_get(s, "running");
    if (top_get_int(json_object_get(s, "states"), "running", &v))
        top_line_printf(&l, "  running %lld", v);
    else if (json_is_array(running))
        top_line_printf(&l, "  running %zu", json_array_size(running));
    else
        top_line_text(&l, "  running -");
    top_line_text(&l, "  draining ");
    const json_t *draining = json_object_get(s, "draining");
    if (json_is_true(draining))
        top_line_colored(&l, C_YELLOW, "yes");
    else
        top_line_text(&l, json_is_false(draining) ? "no" : "-");
    if (top_get_int(s, "sample_interval_ms", &v) && v == 0)
        top_line_text(&l, "  no telemetry");
    else if (json_is_number(json_object_get(s, "sampled_at")))
        top_line_printf(&l, "  sampled %s ago", top_age_text(f, s, "sampled_at", buf, sizeof buf));
    if (top_get_int(s, "cpus", &v))
        top_line_printf(&l, "  %lld CPUs, %s memory", v, top_size_text(s, "mem", buf, sizeof buf));
    top_frame_line(f, &l);
}

/* Widths of the task line; `mem_col` is where its memory figure starts, for the process lines. */
struct top_task_cols {
    int name, mem_col;
};

static struct top_task_cols top_task_cols(const struct top_frame *f)
{
    int name = f->width - 72;
    name = name < 8 ? 8 : name > 24 ? 24 : name;
    return (struct top_task_cols){name, 4 + 8 + name + 8 + 12 + 17};
}

static const json_t *top_running_task(const json_t *s, long long id)
{
    const json_t *r;
    size_t i;
    json_array_foreach(json_object_get(s, "running"), i, r) {
        long long v;
        if (top_get_int(r, "id", &v) && v == id)
            return r;
    }
    return NULL;
}

/* "    #12     train-a   try 1   up 16m40s  claim 8G         mem 8G      util 73%" */
static void top_task(struct top_frame *f, long long id, const json_t *r)
{
    struct top_task_cols tc = top_task_cols(f);
    struct top_line l;
    char buf[64], claim[48] = "-";
    long long v;
    top_line_init(&l, f);
    top_line_pad(&l, 4);
    top_line_color(&l, C_CYAN);
    snprintf(buf, sizeof buf, "#%lld", id);
    top_line_field(&l, buf, 8);
    top_line_color(&l, NULL);
    top_line_field(&l, top_get_str(r, "name"), tc.name);
    top_line_printf(&l, "  try %-2s", top_int_text(r, "attempt", "%lld", buf, sizeof buf));
    top_line_printf(&l, "  up %-7s", top_age_text(f, r, "started", buf, sizeof buf));
    if (json_array_size(json_object_get(r, "gpus")) > 0 && top_get_int(r, "claim", &v))
        snprintf(claim, sizeof claim, "%s%s", v == 0 ? "" : "claim ",
                 v == 0 ? "exclusive" : format_size(v > 0 ? (uint64_t)v : 0, buf, sizeof buf));
    top_line_printf(&l, "  %-15s", claim);
    top_line_printf(&l, "  mem %-6s", top_size_text(r, "gpu_mem", buf, sizeof buf));
    top_line_printf(&l, "  util %s", top_int_text(r, "util", "%lld%%", buf, sizeof buf));
    top_frame_line(f, &l);
}

static void top_process(struct top_frame *f, const json_t *p)
{
    struct top_task_cols tc = top_task_cols(f);
    struct top_line l;
    char buf[64];
    top_line_init(&l, f);
    top_line_pad(&l, 4);
    top_line_printf(&l, "pid %-7s ", top_int_text(p, "pid", "%lld", buf, sizeof buf));
    top_line_colored(&l, C_DIM, "not drover's");
    top_line_pad(&l, tc.mem_col);
    top_line_printf(&l, "  mem %s", top_size_text(p, "mem", buf, sizeof buf));
    top_frame_line(f, &l);
}

/* "GPU 0   NVIDIA H100 80GB HBM3   temp 61C  power 312W  shared  BUSY  OFFLINE (XID 79)" */
static void top_gpu_title(struct top_frame *f, const json_t *g)
{
    struct top_line l;
    char buf[64];
    long long v;
    int name = f->width - 72;
    top_line_init(&l, f);
    top_line_color(&l, C_BOLD);
    top_line_printf(&l, "GPU %s", top_int_text(g, "index", "%lld", buf, sizeof buf));
    top_line_color(&l, NULL);
    top_line_pad(&l, 8);
    top_line_field(&l, top_get_str(g, "name"), name < 8 ? 8 : name > 28 ? 28 : name);
    top_line_printf(&l, "  temp %-4s", top_int_text(g, "temp_c", "%lldC", buf, sizeof buf));
    const json_t *watts = json_object_get(g, "power_w");
    snprintf(buf, sizeof buf, "%.0fW", json_number_value(watts));
    top_line_printf(&l, "  power %-5s", json_is_number(watts) ? buf : "-");
    const json_t *tasks = json_object_get(g, "tasks");
    top_line_printf(&l, "  %s", json_is_true(json_object_get(g, "exclusive")) ? "exclusive"
                                : !json_is_array(tasks)                      ? "-"
                                : json_array_size(tasks) > 0                 ? "shared"
                                                                             : "free");
    if (json_is_true(json_object_get(g, "busy"))) {
        top_line_text(&l, "  ");
        top_line_colored(&l, C_YELLOW, "BUSY");
    }
    if (json_is_true(json_object_get(g, "offline"))) {
        top_line_text(&l, "  ");
        top_line_color(&l, C_RED);
        top_line_text(&l, "OFFLINE");
        if (json_is_string(json_object_get(g, "offline_reason")))
            top_line_printf(&l, " (%s)", top_get_str(g, "offline_reason"));
        top_line_color(&l, NULL);
    } else if (top_get_int(g, "mem_util", &v)) {
        top_line_printf(&l, "  mem-ctl %lld%%", v);
    }
    top_frame_line(f, &l);
}

/* "  mem [###+++.....] 12G/80G          claimed 16G     util [####......]  73%" */
static void top_gpu_usage(struct top_frame *f, const json_t *g)
{
    struct top_line l;
    char used_s[32], total_s[32], claimed_s[32], text[80], util_s[16];
    long long total = 0, used = 0, claimed = 0, util = 0;
    bool have_total = top_get_int(g, "mem_total", &total);
    bool have_used = top_get_int(g, "mem_used", &used);
    bool have_util = top_get_int(g, "util", &util);
    if (!top_get_int(g, "mem_claimed", &claimed))
        claimed = 0;
    int cells = f->width - 54, mem_cells = 0, util_cells = 0;
    if (cells >= 12) {
        mem_cells = cells * 3 / 5 > 50 ? 50 : cells * 3 / 5;
        util_cells = cells - cells * 3 / 5 > 30 ? 30 : cells - cells * 3 / 5;
    }
    snprintf(text, sizeof text, "%s/%s", top_size_text(g, "mem_used", used_s, sizeof used_s),
             top_size_text(g, "mem_total", total_s, sizeof total_s));
    snprintf(util_s, sizeof util_s, "%lld%%", util);
    top_line_init(&l, f);
    top_line_text(&l, "  mem ");
    if (mem_cells > 0)
        top_bar_memory(&l, mem_cells, have_total ? total : 0, have_used, used, claimed);
    top_line_printf(&l, "%-15s  claimed %-6s  util ", text,
                    top_size_text(g, "mem_claimed", claimed_s, sizeof claimed_s));
    if (util_cells > 0)
        top_bar_percent(&l, util_cells, have_util, util);
    top_line_printf(&l, "%4s", have_util ? util_s : "-");
    top_frame_line(f, &l);
}

static void top_gpu(struct top_frame *f, const json_t *s, const json_t *g)
{
    const json_t *id, *p;
    size_t i;
    top_gpu_title(f, g);
    top_gpu_usage(f, g);
    json_array_foreach(json_object_get(g, "tasks"), i, id)
        top_task(f, json_integer_value(id), top_running_task(s, json_integer_value(id)));
    json_array_foreach(json_object_get(g, "processes"), i, p) {
        const json_t *task = json_object_get(p, "task");
        if (task == NULL || json_is_null(task))
            top_process(f, p);
    }
}

static void top_gpus(struct top_frame *f, const json_t *s)
{
    const json_t *gpus = json_object_get(s, "gpus"), *g, *r;
    struct top_line l;
    size_t i;
    top_line_init(&l, f);
    if (!json_is_array(gpus)) {
        top_line_text(&l, "GPUs -");
        top_frame_line(f, &l);
    } else if (json_array_size(gpus) == 0) {
        top_line_text(&l, "no GPUs: only CPU-only tasks (--gpus 0) run here");
        top_frame_line(f, &l);
    }
    json_array_foreach(gpus, i, g)
        top_gpu(f, s, g);
    bool titled = false;
    json_array_foreach(json_object_get(s, "running"), i, r) {
        long long id;
        if (json_array_size(json_object_get(r, "gpus")) > 0 || !top_get_int(r, "id", &id))
            continue;
        if (!titled) {
            top_line_init(&l, f);
            top_line_colored(&l, C_BOLD, "CPU only");
            top_frame_line(f, &l);
            titled = true;
        }
        top_task(f, id, r);
    }
}

static void top_queued(struct top_frame *f, const json_t *q, int name_cols)
{
    struct top_line l;
    char buf[64], claim[32] = "-";
    long long gpus = 0, v;
    top_line_init(&l, f);
    top_line_text(&l, "  ");
    top_line_field(&l, top_int_text(q, "id", "#%lld", buf, sizeof buf), 8);
    top_line_field(&l, top_get_str(q, "name"), name_cols);
    top_line_printf(&l, "  %4s", top_int_text(q, "priority", "%lld", buf, sizeof buf));
    top_line_printf(&l, "  %4s", top_int_text(q, "gpus", "%lld", buf, sizeof buf));
    if (top_get_int(q, "gpus", &gpus) && gpus > 0 && top_get_int(q, "claim", &v))
        snprintf(claim, sizeof claim, "%s",
                 v == 0 ? "exclusive" : format_size(v > 0 ? (uint64_t)v : 0, buf, sizeof buf));
    top_line_printf(&l, "  %-9s", claim);
    top_line_printf(&l, "  %s", top_age_text(f, q, "since", buf, sizeof buf));
    top_frame_line(f, &l);
}

static void top_queue(struct top_frame *f, const json_t *s)
{
    const json_t *queued = json_object_get(s, "queued");
    long long total;
    struct top_line l;
    char buf[32];
    size_t listed = json_array_size(queued), shown = listed;
    int name_cols = f->width - 45;
    name_cols = name_cols < 6 ? 6 : name_cols > 32 ? 32 : name_cols;
    if (!top_get_int(s, "queue_length", &total) || total < (long long)listed)
        total = (long long)listed;
    if (top_frame_room(f, 4) && f->lines > 0) {
        top_line_init(&l, f);
        top_frame_line(f, &l);
    }
    top_line_init(&l, f);
    top_line_colored(&l, C_BOLD, "QUEUE");
    if (!json_is_array(queued)) {
        top_line_printf(&l, "  %s",
                        top_int_text(s, "queue_length", "%lld queued", buf, sizeof buf));
        top_frame_line(f, &l);
        return;
    }
    if (total > 0)
        top_line_printf(&l, "  %lld queued", total);
    else
        top_line_text(&l, "  empty");
    top_frame_line(f, &l);
    if (total == 0 || !top_frame_room(f, 2))
        return; /* the title says how many */
    if (f->height > 0) {
        size_t room = (size_t)(f->height - f->lines - 1); /* less the column titles */
        if (listed > room || (long long)listed < total)
            shown = listed < room - 1 ? listed : room - 1;
    }
    top_line_init(&l, f);
    top_line_color(&l, C_DIM);
    top_line_text(&l, "  ");
    top_line_field(&l, "ID", 8);
    top_line_field(&l, "NAME", name_cols);
    top_line_text(&l, "  PRIO  GPUS  CLAIM      WAITING");
    top_frame_line(f, &l);
    for (size_t i = 0; i < shown; i++)
        top_queued(f, json_array_get(queued, i), name_cols);
    if ((long long)shown < total) {
        top_line_init(&l, f);
        top_line_printf(&l, "  \xe2\x80\xa6 %lld more", total - (long long)shown);
        top_frame_line(f, &l);
    }
}

void top_render(const json_t *snapshot, int width, int height, bool color, FILE *out)
{
    struct top_frame f = {
        .out = out,
        .width = width < 1 ? 1 : width > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : width,
        .height = height,
        .color = color,
    };
    f.have_now = top_get_int(snapshot, "now", &f.now);
    top_header(&f, snapshot);
    top_gpus(&f, snapshot);
    top_queue(&f, snapshot);
}
