/* Trace, node-list and cluster-spec readers: what each format's columns mean. The reading itself
 * (whole file, lines split in place, field parsers) is sim/csv.c. */
#include "sim/csv.h"
#include "sim/trace.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_MAX_FIELDS 12  /* one more than the widest format, so "found 12" can be told */
#define TRACE_MAX_GPUS 4096
#define TRACE_MAX_MIB (1LL << 40)
#define TRACE_MAX_PRIORITY 1000000
#define TRACE_NO_USER UINT32_MAX /* while reading: the row has no user field */
#define NODE_MAX_GPUS 64

typedef int (*trace_row_fn)(char **field, int n, struct sim_types *types, struct sim_job *job,
                            char *why);

/* What differs between the formats; the reading loop is shared. */
struct trace_format {
    const char *name;
    const char *id_column;  /* the first column; a first line starting with it is a header */
    const char *columns;    /* shown in field-count and header errors */
    int min_fields, max_fields;
    bool exact_header;      /* the header must name exactly these columns (fixed positions) */
    bool comments;          /* '#' lines are ignored */
    trace_row_fn row;       /* 0 = a job, 1 = skipped as pending, -1 = bad (why filled in) */
};

static int trace_row_itp(char **field, int n, struct sim_types *types, struct sim_job *job,
                         char *why);
static int trace_row_alibaba(char **field, int n, struct sim_types *types, struct sim_job *job,
                             char *why);
static int trace_row_csv(char **field, int n, struct sim_types *types, struct sim_job *job,
                         char *why);

/* Indexed by enum sim_format. */
static const struct trace_format trace_formats[] = {
    [SIM_FORMAT_ITP] = {"itp", "job_id", "job_id,submission_time,duration,num_gpu", 4, 4,
                        false, false, trace_row_itp},
    [SIM_FORMAT_ALIBABA2023] = {"alibaba2023", "name",
                                "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                                "pod_phase,creation_time,deletion_time,scheduled_time",
                                11, 11, true, false, trace_row_alibaba},
    [SIM_FORMAT_CSV] = {"csv", "job_id",
                         "job_id,submit_time,duration,gpus[,gpu_mem_fraction,priority,user]", 4, 7,
                         false, true, trace_row_csv},
};

int sim_format_parse(const char *s, enum sim_format *out, const char **err)
{
    for (int f = 0; f < (int)(sizeof trace_formats / sizeof trace_formats[0]); f++) {
        if (s != NULL && strcmp(s, trace_formats[f].name) == 0) {
            *out = (enum sim_format)f;
            return 0;
        }
    }
    *err = "expected a trace format: itp, alibaba2023 or csv";
    return -1;
}

int sim_types_intern(struct sim_types *types, const char *name)
{
    for (int i = 0; i < types->n; i++)
        if (strcmp(types->name[i], name) == 0)
            return i;
    if (types->n == SIM_MAX_TYPES)
        return -1;
    types->name[types->n] = xstrdup(name);
    return types->n++;
}

void sim_types_free(struct sim_types *types)
{
    if (types == NULL)
        return;
    for (int i = 0; i < types->n; i++)
        free(types->name[i]);
    memset(types, 0, sizeof *types);
}

static int trace_row_itp(char **field, int n, struct sim_types *types, struct sim_job *job,
                         char *why)
{
    long long gpus;
    if (csv_seconds("submission_time", field[1], &job->submit_ms, why) < 0 ||
        csv_seconds("duration", field[2], &job->duration_ms, why) < 0 ||
        csv_whole("num_gpu", field[3], 0, TRACE_MAX_GPUS, &gpus, why) < 0)
        return -1;
    job->gpus = (int)gpus;
    return 0;
}

static int trace_row_csv(char **field, int n, struct sim_types *types, struct sim_job *job,
                         char *why)
{
    long long gpus, priority;
    if (csv_seconds("submit_time", field[1], &job->submit_ms, why) < 0 ||
        csv_seconds("duration", field[2], &job->duration_ms, why) < 0 ||
        csv_whole("gpus", field[3], 0, TRACE_MAX_GPUS, &gpus, why) < 0)
        return -1;
    job->gpus = (int)gpus;
    if (n >= 5) {
        double f;
        if (csv_number(field[4], &f) < 0 || f <= 0 || f > 1) {
            snprintf(why, CSV_WHY, "gpu_mem_fraction \"%.40s\" is not a number in (0,1]",
                     field[4]);
            return -1;
        }
        long milli = lround(f * 1000);
        job->gpu_milli = milli < 1 ? 1 : milli > 1000 ? 1000 : (int)milli;
    }
    if (n >= 6) {
        if (csv_whole("priority", field[5], -TRACE_MAX_PRIORITY, TRACE_MAX_PRIORITY, &priority,
                        why) < 0)
            return -1;
        job->priority = (int)priority;
    }
    if (job->gpus == 0)
        job->gpu_milli = 1000; /* a share of no GPU means nothing */
    return 0;
}

/* gpu_spec "A|B" -> the bits of A and B in types; empty names are ignored, empty spec = any. */
static int trace_gpu_spec(const char *spec, struct sim_types *types, uint64_t *mask, char *why)
{
    char name[256];
    *mask = 0;
    for (const char *p = spec; *p != '\0';) {
        size_t len = strcspn(p, "|");
        if (len >= sizeof name) {
            snprintf(why, CSV_WHY, "gpu_spec \"%.40s\" has a type name that is too long", spec);
            return -1;
        }
        if (len > 0) {
            memcpy(name, p, len);
            name[len] = '\0';
            int type = sim_types_intern(types, name);
            if (type < 0) {
                snprintf(why, CSV_WHY, "gpu_spec \"%.40s\": more than %d GPU types", spec,
                         SIM_MAX_TYPES);
                return -1;
            }
            *mask |= 1ull << type;
        }
        p += len;
        if (*p == '|')
            p++;
    }
    return 0;
}

static int trace_row_alibaba(char **field, int n, struct sim_types *types, struct sim_job *job,
                             char *why)
{
    long long cpu, mib, gpus, milli;
    int64_t scheduled_ms, deletion_ms;
    /* A Pending pod never ran: it has no scheduled_time and holds nothing to replay. */
    if (strcmp(field[7], "Pending") == 0)
        return 1;
    if (csv_whole("cpu_milli", field[1], 0, INT_MAX, &cpu, why) < 0 ||
        csv_whole("memory_mib", field[2], 0, TRACE_MAX_MIB, &mib, why) < 0 ||
        csv_whole("num_gpu", field[3], 0, TRACE_MAX_GPUS, &gpus, why) < 0 ||
        csv_whole("gpu_milli", field[4], gpus > 0 ? 1 : 0, 1000, &milli, why) < 0 ||
        csv_seconds("creation_time", field[8], &job->submit_ms, why) < 0 ||
        csv_seconds("deletion_time", field[9], &deletion_ms, why) < 0 ||
        csv_seconds("scheduled_time", field[10], &scheduled_ms, why) < 0)
        return -1;
    if (deletion_ms < scheduled_ms) {
        snprintf(why, CSV_WHY, "deletion_time \"%.40s\" is before scheduled_time \"%.40s\"",
                 field[9], field[10]);
        return -1;
    }
    if (trace_gpu_spec(field[5], types, &job->gpu_types, why) < 0)
        return -1;
    job->duration_ms = deletion_ms - scheduled_ms;
    job->cpu_milli = (int)cpu;
    job->mem_bytes = (uint64_t)mib << 20;
    job->gpus = (int)gpus;
    job->gpu_milli = gpus > 0 ? (int)milli : 1000;
    return 0;
}

/* Checks a header line (already split). Fatal whatever skip_bad_rows says: every row after it
 * would be read against the wrong columns. */
static int trace_header(const struct trace_format *fmt, char **field, int n, char *why)
{
    char found[256] = "";
    bool has_times = false;
    for (int i = 0; i < n && i < TRACE_MAX_FIELDS; i++) {
        size_t used = strlen(found);
        snprintf(found + used, sizeof found - used, "%s%s", i > 0 ? "," : "", field[i]);
        if (strcmp(field[i], "creation_time") == 0)
            has_times = true;
    }
    bool ok = n >= fmt->min_fields && n <= fmt->max_fields &&
              (!fmt->exact_header || strcmp(found, fmt->columns) == 0);
    if (ok)
        return 0;
    if (fmt->exact_header && !has_times)
        snprintf(why, CSV_WHY, "%s needs the columns %s (this file has no times)", fmt->name,
                 fmt->columns);
    else
        snprintf(why, CSV_WHY, "%s needs the columns %s (this file has %.200s)", fmt->name,
                 fmt->columns, found);
    return -1;
}

static enum sim_format trace_guess(const char *first_line)
{
    if (strncmp(first_line, "job_id,submission_time", 22) == 0)
        return SIM_FORMAT_ITP;
    if (strncmp(first_line, "name,cpu_milli", 14) == 0)
        return SIM_FORMAT_ALIBABA2023;
    return SIM_FORMAT_CSV;
}

static int trace_job_cmp(const void *a, const void *b)
{
    const struct sim_job *x = a, *y = b;
    if (x->submit_ms != y->submit_ms)
        return x->submit_ms < y->submit_ms ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

/* ---- users -------------------------------------------------------------------------------- */

static void trace_users_free(struct sim_trace *trace)
{
    for (size_t i = 0; i < trace->nusers; i++)
        free(trace->users[i]);
    free(trace->users);
    trace->users = NULL;
    trace->nusers = 0;
}

static uint32_t trace_user_add(struct sim_trace *trace, const char *name)
{
    trace->users = xrealloc(trace->users, (trace->nusers + 1) * sizeof *trace->users);
    trace->users[trace->nusers] = xstrdup(name);
    return (uint32_t)trace->nusers++;
}

/* The index of user name ("-" when empty), added if new. Users in a trace are few. */
static uint32_t trace_user(struct sim_trace *trace, const char *name)
{
    if (name[0] == '\0')
        name = "-";
    for (size_t i = 0; i < trace->nusers; i++)
        if (strcmp(trace->users[i], name) == 0)
            return (uint32_t)i;
    return trace_user_add(trace, name);
}

/* Rows without a user field were marked TRACE_NO_USER: user "-" if any row names one, else 0. */
static void trace_users_settle(struct sim_trace *trace)
{
    uint32_t none = 0;
    bool found = false;
    for (size_t i = 0; i < trace->n; i++) {
        if (trace->jobs[i].user != TRACE_NO_USER)
            continue;
        if (!found && trace->nusers > 0)
            none = trace_user(trace, "");
        found = true;
        trace->jobs[i].user = none;
    }
}

int sim_trace_assign_users(struct sim_trace *trace, int nusers, double heavy_share,
                           uint64_t seed, const char **err)
{
    if (nusers < 1 || nusers > 1000) {
        *err = "the number of users must be from 1 to 1000";
        return -1;
    }
    if (!(heavy_share >= 0 && heavy_share <= 1)) {
        *err = "the heavy user's share must be from 0 to 1";
        return -1;
    }
    trace_users_free(trace);
    for (int u = 1; u <= nusers; u++) {
        char name[32];
        snprintf(name, sizeof name, "user%d", u);
        trace_user_add(trace, name);
    }
    /* user1 takes a job whenever its share of the work (GPU-time) so far is below heavy_share,
     * which holds its share of the work, not of the jobs, near heavy_share throughout; the
     * others are drawn uniformly (splitmix64: a fixed, portable sequence for a seed). */
    uint64_t state = seed;
    double total = 0, heavy = 0;
    for (size_t i = 0; i < trace->n; i++) {
        const struct sim_job *job = &trace->jobs[i];
        double work = (double)job->duration_ms * job->gpus *
                      (job->gpu_milli < 1000 ? job->gpu_milli / 1000.0 : 1);
        total += work;
        uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        double r = (double)(z >> 11) / 9007199254740992.0; /* [0,1) */
        uint32_t user = 0;
        if (nusers > 1 && !(heavy_share >= 1 || heavy < heavy_share * total))
            user = 1 + (uint32_t)(r * (nusers - 1));
        if (user >= (uint32_t)nusers)
            user = (uint32_t)nusers - 1;
        if (user == 0)
            heavy += work;
        trace->jobs[i].user = user;
    }
    return 0;
}

int sim_trace_read(const char *path, enum sim_format format, bool skip_bad_rows,
                   struct sim_types *types, struct sim_trace *out, char **err)
{
    struct sim_trace trace = {0};
    struct csv_lines lines;
    char *buf = NULL, *line, *field[TRACE_MAX_FIELDS], why[CSV_WHY];
    size_t len, cap = 0;
    bool first = true;
    memset(out, 0, sizeof *out);
    *err = NULL;
    if (format < SIM_FORMAT_AUTO || format > SIM_FORMAT_CSV)
        fatalx("sim_trace_read: format %d", (int)format);
    if (csv_load(path, &buf, &len, err) < 0)
        return -1;
    csv_lines_init(&lines, buf, len);
    if (format == SIM_FORMAT_AUTO)
        format = trace_guess(lines.p);
    const struct trace_format *fmt = &trace_formats[format];
    trace.format = format;

    while ((line = csv_lines_next(&lines, &len)) != NULL) {
        if (len == 0 || (fmt->comments && line[0] == '#'))
            continue;
        bool may_be_header = first;
        first = false;
        struct sim_job job = {.gpu_milli = 1000, .line = lines.line};
        int n = 0, rc = csv_line_sane(line, len, why);
        if (rc == 0) {
            n = csv_split(line, field, TRACE_MAX_FIELDS);
            if (may_be_header && strcmp(field[0], fmt->id_column) == 0) {
                if (trace_header(fmt, field, n, why) < 0) {
                    *err = xasprintf("%s:%u: %s", path, lines.line, why);
                    goto fail;
                }
                continue;
            }
            rc = csv_field_count(fmt->columns, fmt->min_fields, fmt->max_fields, n, why);
        }
        if (rc == 0 && field[0][0] == '\0') {
            snprintf(why, CSV_WHY, "%s is empty", fmt->id_column);
            rc = -1;
        }
        if (rc == 0)
            rc = fmt->row(field, n, types, &job, why);
        if (rc == 1) {
            trace.skipped_pending++;
            continue;
        }
        if (rc < 0) {
            char *msg = xasprintf("%s:%u: %s", path, lines.line, why);
            if (!skip_bad_rows) {
                *err = msg;
                goto fail;
            }
            trace.skipped_bad++;
            if (trace.first_bad == NULL)
                trace.first_bad = msg;
            else
                free(msg);
            continue;
        }
        job.user = format == SIM_FORMAT_CSV && n >= 7 ? trace_user(&trace, field[6])
                                                      : TRACE_NO_USER;
        job.id = xstrdup(field[0]);
        xgrow((void **)&trace.jobs, &cap, trace.n + 1, sizeof *trace.jobs);
        trace.jobs[trace.n++] = job;
    }
    if (trace.n == 0) {
        if (trace.first_bad != NULL)
            *err = xasprintf("%s: no jobs (%zu bad rows skipped, the first: %s)", path,
                             trace.skipped_bad, trace.first_bad);
        else if (trace.skipped_pending > 0)
            *err = xasprintf("%s: no jobs (%zu Pending rows skipped)", path,
                             trace.skipped_pending);
        else
            *err = xasprintf("%s: no jobs", path);
        goto fail;
    }
    trace_users_settle(&trace);
    qsort(trace.jobs, trace.n, sizeof *trace.jobs, trace_job_cmp);
    free(buf);
    *out = trace;
    return 0;
fail:
    free(buf);
    sim_trace_free(&trace);
    return -1;
}

void sim_trace_free(struct sim_trace *trace)
{
    if (trace == NULL)
        return;
    for (size_t i = 0; i < trace->n; i++)
        free(trace->jobs[i].id);
    free(trace->jobs);
    free(trace->first_bad);
    trace_users_free(trace);
    memset(trace, 0, sizeof *trace);
}

#define NODE_COLUMNS "sn,cpu_milli,memory_mib,gpu,model"

static int nodes_row(char **field, int n, struct sim_types *types, struct sim_node *node,
                     char *why)
{
    long long cpu, mib, gpus;
    if (csv_field_count(NODE_COLUMNS, 5, 5, n, why) < 0)
        return -1;
    if (field[0][0] == '\0') {
        snprintf(why, CSV_WHY, "sn is empty");
        return -1;
    }
    if (csv_whole("cpu_milli", field[1], 0, INT_MAX, &cpu, why) < 0 ||
        csv_whole("memory_mib", field[2], 0, TRACE_MAX_MIB, &mib, why) < 0 ||
        csv_whole("gpu", field[3], 0, NODE_MAX_GPUS, &gpus, why) < 0)
        return -1;
    node->type = sim_types_intern(types, field[4]);
    if (node->type < 0) {
        snprintf(why, CSV_WHY, "model \"%.40s\": more than %d GPU types", field[4],
                 SIM_MAX_TYPES);
        return -1;
    }
    node->ngpus = (int)gpus;
    node->cpu_milli = (int)cpu;
    node->mem_bytes = (uint64_t)mib << 20;
    return 0;
}

int sim_nodes_read(const char *path, struct sim_types *types, struct sim_nodes *out, char **err)
{
    struct sim_nodes nodes = {0};
    struct csv_lines lines;
    char *buf = NULL, *line, *field[TRACE_MAX_FIELDS], why[CSV_WHY];
    size_t len, cap = 0;
    bool first = true;
    memset(out, 0, sizeof *out);
    *err = NULL;
    if (csv_load(path, &buf, &len, err) < 0)
        return -1;
    csv_lines_init(&lines, buf, len);
    while ((line = csv_lines_next(&lines, &len)) != NULL) {
        struct sim_node node = {0};
        if (len == 0)
            continue;
        if (csv_line_sane(line, len, why) < 0)
            goto bad;
        int n = csv_split(line, field, TRACE_MAX_FIELDS);
        if (first && strcmp(field[0], "sn") == 0) {
            first = false;
            if (csv_field_count(NODE_COLUMNS, 5, 5, n, why) < 0)
                goto bad;
            continue;
        }
        first = false;
        if (nodes_row(field, n, types, &node, why) < 0)
            goto bad;
        if (nodes.n == INT_MAX) {
            snprintf(why, CSV_WHY, "too many nodes");
            goto bad;
        }
        node.name = xstrdup(field[0]);
        xgrow((void **)&nodes.v, &cap, (size_t)nodes.n + 1, sizeof *nodes.v);
        nodes.v[nodes.n++] = node;
    }
    if (nodes.n == 0) {
        *err = xasprintf("%s: no nodes", path);
        goto fail;
    }
    free(buf);
    *out = nodes;
    return 0;
bad:
    *err = xasprintf("%s:%u: %s", path, lines.line, why);
fail:
    free(buf);
    sim_nodes_free(&nodes);
    return -1;
}

void sim_nodes_free(struct sim_nodes *nodes)
{
    if (nodes == NULL)
        return;
    for (int i = 0; i < nodes->n; i++)
        free(nodes->v[i].name);
    free(nodes->v);
    memset(nodes, 0, sizeof *nodes);
}

/* A decimal count at *p within [1, max], advancing *p past it. */
static int cluster_count(const char **p, long max, int *out)
{
    char *end;
    if (!isdigit((unsigned char)**p))
        return -1;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (errno != 0 || v < 1 || v > max)
        return -2;
    *out = (int)v;
    *p = end;
    return 0;
}

int sim_cluster_parse(const char *s, int *nodes, int *gpus, uint64_t *gpu_mem, const char **err)
{
    static const char usage[] = "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G";
    const char *p = s;
    int n, g, rc;
    uint64_t mem = 0;
    if (s == NULL)
        goto bad;
    if ((rc = cluster_count(&p, 100000, &n)) < 0) {
        *err = rc == -2 ? "the number of nodes must be 1 to 100000" : usage;
        return -1;
    }
    if (*p != 'x')
        goto bad;
    p++;
    if ((rc = cluster_count(&p, 64, &g)) < 0) {
        *err = rc == -2 ? "the GPUs per node must be 1 to 64" : usage;
        return -1;
    }
    if (*p == ':') {
        const char *size_err;
        if (parse_size(p + 1, &mem, &size_err) < 0 || mem == 0) {
            *err = "the memory per GPU must be a size above 0, such as 80G";
            return -1;
        }
    } else if (*p != '\0') {
        goto bad;
    }
    *nodes = n;
    *gpus = g;
    *gpu_mem = mem;
    return 0;
bad:
    *err = usage;
    return -1;
}
