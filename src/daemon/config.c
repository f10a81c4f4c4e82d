/* The daemon's settings table: one row per key, from which parsing, validation, the usage text
 * and the defaults all come. */
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/parse.h"
#include "util/paths.h"
#include "util/request.h"
#include "util/when.h"
#include "util/xalloc.h"

enum config_type { CONFIG_DURATION, CONFIG_DURATION_OFF, CONFIG_PERCENT, CONFIG_FACTOR,
                   CONFIG_STRING, CONFIG_BOOL, CONFIG_RETRIES, CONFIG_BACKOFF, CONFIG_LIMIT,
                   CONFIG_WINDOW };

#define CONFIG_MAX_LIMIT 1000000 /* the largest user limit that is not "none" */

struct config_key {
    const char *name;
    enum config_type type;
    size_t offset;
    const char *fallback; /* the default, as it would be written; CONFIG_BACKOFF: core's */
    const char *help;
};

#define OFF(f) offsetof(struct daemon_config, f)
static const struct config_key config_keys[] = {
    {"aging", CONFIG_DURATION_OFF, OFF(aging_ms), "60s",
     "waiting this long is worth one priority point (off: strict priority)"},
    {"grace", CONFIG_DURATION, OFF(grace_ms), "10s", "SIGTERM to SIGKILL delay"},
    {"gpus", CONFIG_STRING, OFF(gpus), NULL,
     "the GPUs drover may use: indices or UUIDs, comma-separated (default: all, or the"
     " daemon's CUDA_VISIBLE_DEVICES)"},
    {"sample", CONFIG_DURATION, OFF(sample_ms), "5s", "GPU telemetry period"},
    {"health", CONFIG_DURATION, OFF(health_ms), "30s", "health check period"},
    {"http", CONFIG_STRING, OFF(http), NULL,
     "serve the HTTP API, the dashboard and /metrics on ADDR:PORT, e.g. 127.0.0.1:8420"
     " (loopback only unless http-any)"},
    {"http-any", CONFIG_BOOL, OFF(http_any), "no", "allow a non-loopback http address"},
    {"http-tls-cert", CONFIG_STRING, OFF(http_tls_cert), NULL,
     "serve HTTPS: the certificate chain (PEM); needs http-tls-key"},
    {"http-tls-key", CONFIG_STRING, OFF(http_tls_key), NULL,
     "the certificate's private key (PEM)"},
    {"metrics", CONFIG_STRING, OFF(metrics), NULL,
     "the old name of http (before 0.4 it served /metrics alone); both may not differ"},
    {"metrics-any", CONFIG_BOOL, OFF(metrics_any), "no", "the old name of http-any"},
    {"notify", CONFIG_STRING, OFF(notify), NULL,
     "POST a JSON event to this http(s) URL when any task or experiment ends"},
    {"busy-high", CONFIG_PERCENT, OFF(busy_high), "80",
     "no new task joins a GPU whose utilisation is at or above this"},
    {"busy-low", CONFIG_PERCENT, OFF(busy_low), "50",
     "… until it falls to this or below"},
    {"claim-margin", CONFIG_PERCENT, OFF(claim_margin), "20",
     "a learned claim is the profile's peak plus this much"},
    {"oom-factor", CONFIG_FACTOR, OFF(oom_factor), "1.5",
     "after an out-of-memory the claim grows by this factor (up to the whole GPU)"},
    {"default-retries", CONFIG_RETRIES, OFF(default_retries), "0",
     "retries of a submitted task that names none (experiment trials: 3)"},
    {"default-backoff", CONFIG_BACKOFF, OFF(default_backoff), NULL,
     "seconds between the retries of a task that names none, the last repeating"},
    {"shared-dir", CONFIG_STRING, OFF(shared_dir), NULL,
     "hand tasks to Slurm (--on slurm): a directory this machine and the Slurm nodes see at the"
     " same path, for their run directories and checkpoints"},
    {"slurm-partition", CONFIG_STRING, OFF(slurm_partition), NULL, "sbatch --partition"},
    {"slurm-account", CONFIG_STRING, OFF(slurm_account), NULL, "sbatch --account"},
    {"slurm-qos", CONFIG_STRING, OFF(slurm_qos), NULL, "sbatch --qos"},
    {"slurm-args", CONFIG_STRING, OFF(slurm_args), NULL,
     "more sbatch flags, split into words as a shell would (never run through one)"},
    {"slurm-poll", CONFIG_DURATION, OFF(slurm_poll_ms), "5s",
     "how often one squeue call looks at every Slurm job drover tracks"},
    {"spill", CONFIG_STRING, OFF(spill), "never",
     "when a task goes to Slurm without --on slurm: never; unfit (this machine could never"
     " run it); after DURATION (it waited that long here, e.g. after 30m; unfit ones too)"},
    {"admins", CONFIG_STRING, OFF(admins), NULL,
     "system mode: members of this group are admins, as root is (default: root alone)"},
    {"fair-share", CONFIG_BOOL, OFF(fair_share), "yes",
     "among users with waiting work, the one who used the GPUs least goes first"},
    {"fair-share-half-life", CONFIG_DURATION_OFF, OFF(fair_share_half_life_ms), "7d",
     "GPU usage counts half after this long (off: never decays)"},
    {"policy", CONFIG_STRING, OFF(policy), "drover",
     "the scheduling policy: drover (priority, aging, backfill, best fit) or las (least"
     " attained GPU-time first, preempting --preemptible tasks; docs/SCHEDULING.md)"},
    {"las-thresholds", CONFIG_STRING, OFF(las_thresholds), NULL,
     "las: the queues' bounds in GPU-hours of attained service, ascending (default: las's, 1,10)"},
    {"las-min-run", CONFIG_STRING, OFF(las_min_run), NULL,
     "las: a task runs this long before it may be preempted (default: las's, 10m)"},
    {"las-starve-total", CONFIG_STRING, OFF(las_starve_total), NULL,
     "las: a task that has waited this long in all goes to the first queue (default: las's, 100h;"
     " off)"},
    {"las-protect-wait", CONFIG_STRING, OFF(las_protect_wait), NULL,
     "las: an attempt that starts after its task waited this long in all is not preempted for"
     " as long as it waited (default: las's, 12h; off)"},
    {"las-mrl", CONFIG_STRING, OFF(las_mrl), NULL,
     "las: preempt only a task that the tasks that succeeded say has more than this x the"
     " waiter's service left (default: las's, 1; 0 = off)"},
    {"las-starve", CONFIG_STRING, OFF(las_starve), NULL,
     "las: a task that waited K x its last run goes first and is not preempted (default: las's,"
     " 0 = never)"},
    {"preempt-overruns", CONFIG_LIMIT, OFF(preempt_overruns), "2",
     "a task that did not exit within its preemption grace this often is no longer preemptible"
     " (none: never)"},
    {"amqp", CONFIG_STRING, OFF(amqp), NULL,
     "take submissions from RabbitMQ and publish events there: amqp://USER:PASS@HOST:PORT/VHOST"
     " (docs/AMQP.md)"},
    {"amqp-credentials", CONFIG_STRING, OFF(amqp_credentials), NULL,
     "a file (mode 0600) holding USER:PASS for amqp, instead of the URL"},
    {"amqp-queue", CONFIG_STRING, OFF(amqp_queue), "drover.submit",
     "the queue submissions are taken from (declared durable)"},
    {"amqp-exchange", CONFIG_STRING, OFF(amqp_exchange), "drover.events",
     "the topic exchange events are published to (declared durable)"},
    {"amqp-user", CONFIG_STRING, OFF(amqp_user), NULL,
     "the drover user whose rights and limits messages have (default: the daemon's user; a"
     " system daemon needs one, not root)"},
    {"amqp-prefetch", CONFIG_LIMIT, OFF(amqp_prefetch), "64",
     "messages taken from the queue before they are acknowledged"},
    {"amqp-outbox", CONFIG_LIMIT, OFF(amqp_outbox), "100000",
     "events kept in the store while the broker is away; beyond, the oldest are dropped"},
    {"user-gpus", CONFIG_LIMIT, OFF(user_limits.gpus), "none",
     "the most GPUs one user's running tasks may hold (user-gpus.NAME, user-gpus.@GROUP)"},
    {"user-running", CONFIG_LIMIT, OFF(user_limits.running), "none",
     "the most tasks of one user running at once (.NAME and .@GROUP overrides)"},
    {"user-queued", CONFIG_LIMIT, OFF(user_limits.queued), "none",
     "the most tasks of one user waiting (.NAME and .@GROUP overrides)"},
    {"off-peak", CONFIG_WINDOW, OFF(off_peak), "off",
     "the daily window --off-peak tasks start in, local time, e.g. 20:00-08:00 (off: none;"
     " they wait)"},
};
#define NKEYS (sizeof config_keys / sizeof config_keys[0])

_Static_assert(REQUEST_MAX_BACKOFF <= CORE_MAX_BACKOFF, "backoff values fit core's");

/* key's default as it would be written (in buf when it is made), or NULL: none. The default
 * backoff is core's own list (core/core.h), so that there is one. */
static const char *config_fallback(const struct config_key *key, char *buf, size_t len)
{
    static const int64_t core_default[] = CORE_DEFAULT_BACKOFF_MS;
    size_t used = 0;
    if (key->type != CONFIG_BACKOFF)
        return key->fallback;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof core_default / sizeof core_default[0] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%g", i ? "," : "",
                                 (double)core_default[i] / 1000);
    return buf;
}

static const struct config_key *config_find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(config_keys[i].name, name) == 0)
            return &config_keys[i];
    return NULL;
}

/* USER:PASS from the amqp-credentials file: mode 0600 or stricter, one line. */
static int config_amqp_credentials(struct daemon_config *cfg, char **err)
{
    struct stat st;
    int fd = open(cfg->amqp_credentials, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, &st) < 0) {
        *err = xasprintf("amqp-credentials %s: %s", cfg->amqp_credentials, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
        close(fd);
        *err = xasprintf("amqp-credentials %s: must be a file of this daemon's user, mode 0600"
                         " (it holds a password)", cfg->amqp_credentials);
        return -1;
    }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    char *colon = strchr(buf, ':');
    if (colon == NULL || colon == buf) {
        *err = xasprintf("amqp-credentials %s: expected one line USER:PASS", cfg->amqp_credentials);
        return -1;
    }
    free(cfg->amqp_login);
    free(cfg->amqp_password);
    cfg->amqp_login = xstrndup(buf, (size_t)(colon - buf));
    cfg->amqp_password = xstrdup(colon + 1);
    return 0;
}

/* amqp = amqp://[USER[:PASS]@]HOST[:PORT][/VHOST] into its parts (vhost "/" when absent). */
static int config_amqp(struct daemon_config *cfg, char **err)
{
    if (cfg->amqp == NULL) {
        if (cfg->amqp_credentials != NULL) {
            *err = xstrdup("amqp-credentials is set but amqp is not: no broker to log in to");
            return -1;
        }
        return 0;
    }
    const char *u = cfg->amqp, *why = NULL;
    if (strncmp(u, "amqp://", 7) != 0) {
        *err = xasprintf("amqp '%s': expected amqp://USER:PASS@HOST:PORT/VHOST (amqps:// is not"
                         " supported)", u);
        return -1;
    }
    u += 7;
    const char *slash = strchr(u, '/');
    size_t auth_end = slash ? (size_t)(slash - u) : strlen(u);
    const char *at = memrchr(u, '@', auth_end);
    const char *host = at ? at + 1 : u;
    size_t hostlen = (size_t)(u + auth_end - host);
    cfg->amqp_port = 5672;
    if (at != NULL) {
        const char *colon = memchr(u, ':', (size_t)(at - u));
        cfg->amqp_login =
            parse_percent(u, colon ? (size_t)(colon - u) : (size_t)(at - u), false);
        cfg->amqp_password = colon ? parse_percent(colon + 1, (size_t)(at - colon - 1), false)
                                   : xstrdup("");
        if (cfg->amqp_login == NULL || cfg->amqp_password == NULL)
            why = "a bad %XX escape in the user or password";
    }
    const char *pc = memchr(host, ':', hostlen);
    if (why == NULL && pc != NULL) {
        long long port;
        char *text = xstrndup(pc + 1, (size_t)(host + hostlen - pc - 1));
        if (parse_int(text, 1, 65535, &port, &why) < 0)
            why = "the port must be a number from 1 to 65535";
        free(text);
        cfg->amqp_port = (int)port;
        hostlen = (size_t)(pc - host);
    }
    if (why == NULL && hostlen == 0)
        why = "no host";
    if (why == NULL) {
        cfg->amqp_host = xstrndup(host, hostlen);
        cfg->amqp_vhost = slash && slash[1] ? parse_percent(slash + 1, strlen(slash + 1), false)
                                            : xstrdup("/");
        if (cfg->amqp_vhost == NULL)
            why = "a bad %XX escape in the vhost";
    }
    if (why != NULL) {
        *err = xasprintf("amqp: %s (expected amqp://USER:PASS@HOST:PORT/VHOST)", why);
        return -1;
    }
    if (cfg->amqp_credentials != NULL && config_amqp_credentials(cfg, err) < 0)
        return -1;
    if (cfg->amqp_login == NULL) {
        cfg->amqp_login = xstrdup("guest");
        cfg->amqp_password = xstrdup("guest");
    }
    if (cfg->amqp_prefetch <= 0 || cfg->amqp_prefetch > 65535) {
        *err = xstrdup("amqp-prefetch must be from 1 to 65535");
        return -1;
    }
    if (cfg->system && cfg->amqp_user == NULL) {
        *err = xstrdup("amqp needs amqp-user on a system daemon: the drover user messages act as"
                       " (not root)");
        return -1;
    }
    return 0;
}

/* policy and the las knobs into their parsed fields. */
static int config_las(struct daemon_config *cfg, char **err)
{
    const char *why;
    cfg->las_nthresholds = -1;
    cfg->las_min_run_ms = -1;
    if (strcmp(cfg->policy, "las") != 0 && strcmp(cfg->policy, "drover") != 0) {
        *err = xasprintf("policy '%s': expected drover or las", cfg->policy);
        return -1;
    }
    cfg->las = strcmp(cfg->policy, "las") == 0;
    if (cfg->las_thresholds != NULL &&
        parse_hours(cfg->las_thresholds, cfg->las_threshold, CORE_LAS_MAX, &cfg->las_nthresholds,
                    &why) < 0) {
        *err = xasprintf("las-thresholds '%s': %s (GPU-hours, 1 to %d bounds)",
                         cfg->las_thresholds, why, CORE_LAS_MAX);
        return -1;
    }
    if (cfg->las_min_run != NULL && strcmp(cfg->las_min_run, "0") == 0)
        cfg->las_min_run_ms = 0;
    else if (cfg->las_min_run != NULL &&
             parse_duration(cfg->las_min_run, &cfg->las_min_run_ms, &why) < 0) {
        *err = xasprintf("las-min-run '%s': %s", cfg->las_min_run, why);
        return -1;
    }
    const struct {
        const char *name, *text;
        int64_t *ms;
    } waits[] = {{"las-starve-total", cfg->las_starve_total, &cfg->las_starve_total_ms},
                 {"las-protect-wait", cfg->las_protect_wait, &cfg->las_protect_wait_ms}};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        *waits[i].ms = -1;
        if (waits[i].text != NULL && strcmp(waits[i].text, "off") == 0)
            *waits[i].ms = 0;
        else if (waits[i].text != NULL && parse_duration(waits[i].text, waits[i].ms, &why) < 0) {
            *err = xasprintf("%s '%s': %s (or off)", waits[i].name, waits[i].text, why);
            return -1;
        }
    }
    const struct {
        const char *name, *text;
        double *value;
    } numbers[] = {{"las-starve", cfg->las_starve, &cfg->las_starve_k},
                   {"las-mrl", cfg->las_mrl, &cfg->las_mrl_factor}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        char *end;
        const char *text = numbers[i].text;
        *numbers[i].value = -1;
        if (text == NULL)
            continue;
        errno = 0;
        double k = strtod(text, &end);
        if (end == text || *end != '\0' || errno != 0 || !(k >= 0 && k <= 1e6)) {
            *err = xasprintf("%s '%s': expected a number from 0 (off) to 1000000",
                             numbers[i].name, text);
            return -1;
        }
        *numbers[i].value = k;
    }
    return 0;
}

/* A user limit: none (0) or 1 to CONFIG_MAX_LIMIT. */
static int config_limit(const char *text, int *out, const char **why)
{
    long long v;
    if (strcmp(text, "none") == 0) {
        *out = 0;
        return 0;
    }
    if (parse_int(text, 1, CONFIG_MAX_LIMIT, &v, why) < 0) {
        *why = "expected none or a whole number from 1 to 1000000";
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Sets key from text. Returns 0, or -1 with a static reason. */
static int config_set(struct daemon_config *cfg, const struct config_key *key, const char *text,
                      const char **why)
{
    char *field = (char *)cfg + key->offset;
    long long v;
    int64_t ms;
    switch (key->type) {
    case CONFIG_DURATION_OFF:
        if (strcmp(text, "off") == 0) {
            *(int64_t *)field = 0;
            return 0;
        }
        /* fall through */
    case CONFIG_DURATION:
        if (parse_duration(text, &ms, why) < 0)
            return -1;
        *(int64_t *)field = ms;
        return 0;
    case CONFIG_PERCENT:
        if (parse_int(text, 0, 100, &v, why) < 0)
            return -1;
        *(int *)field = (int)v;
        return 0;
    case CONFIG_FACTOR: {
        char *end;
        errno = 0;
        double f = strtod(text, &end);
        if (end == text || *end != '\0' || errno != 0 || !(f > 1 && f <= 100)) {
            *why = "expected a factor above 1 and at most 100, e.g. 1.5";
            return -1;
        }
        *(double *)field = f;
        return 0;
    }
    case CONFIG_BOOL:
        if (strcmp(text, "yes") == 0 || strcmp(text, "true") == 0 || strcmp(text, "1") == 0)
            *(bool *)field = true;
        else if (strcmp(text, "no") == 0 || strcmp(text, "false") == 0 || strcmp(text, "0") == 0)
            *(bool *)field = false;
        else {
            *why = "expected yes or no";
            return -1;
        }
        return 0;
    case CONFIG_RETRIES: {
        const struct request_field *f = request_field("retries"); /* one range for both */
        static char range[64];
        if (parse_int(text, f->min, f->max, &v, why) < 0) {
            snprintf(range, sizeof range, "expected a whole number from %lld to %lld", f->min,
                     f->max);
            *why = range;
            return -1;
        }
        *(int *)field = (int)v;
        return 0;
    }
    case CONFIG_BACKOFF:
        /* parse_backoff() bounds each value as the request check does (REQUEST_MAX_BACKOFF_MS) */
        return parse_backoff(text, (int64_t *)field, REQUEST_MAX_BACKOFF, &cfg->ndefault_backoff,
                             why);
    case CONFIG_LIMIT:
        return config_limit(text, (int *)field, why);
    case CONFIG_WINDOW: {
        struct config_window *w = (struct config_window *)field;
        if (strcmp(text, "off") == 0) {
            w->set = false;
            return 0;
        }
        if (when_window_parse(text, &w->start, &w->end, why) < 0)
            return -1;
        w->set = true;
        return 0;
    }
    case CONFIG_STRING:
        if (*text == '\0') {
            *why = "empty value";
            return -1;
        }
        free(*(char **)field);
        *(char **)field = xstrdup(text);
        return 0;
    }
    return -1;
}

static char *config_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

static const char *const config_limit_names[] = {"user-gpus", "user-running", "user-queued"};

/* name = value where name is LIMIT.USER or LIMIT.@GROUP: an override of a user limit. Returns
 * 1 if name is one (0 when it is not, -1 with *why_text when it is one but is wrong). */
static int config_override(struct daemon_config *cfg, const char *name, const char *value,
                           char **why_text)
{
    const char *dot = strchr(name, '.');
    int which = -1;
    for (int i = 0; dot && i < 3; i++)
        if (strlen(config_limit_names[i]) == (size_t)(dot - name) &&
            strncmp(name, config_limit_names[i], (size_t)(dot - name)) == 0)
            which = i;
    if (which < 0)
        return 0;
    const char *who = dot + 1, *why = NULL;
    bool group = *who == '@';
    who += group;
    if (*who == '\0' || strlen(who) > 255 || strchr(who, ' ') || strchr(who, '\t')) {
        *why_text = xasprintf("'%s': expected %s.USER or %s.@GROUP", name,
                              config_limit_names[which], config_limit_names[which]);
        return -1;
    }
    for (size_t i = 0; i < cfg->noverrides; i++) {
        const struct config_override *o = &cfg->overrides[i];
        if (o->which == which && o->group == group && strcmp(o->name, who) == 0) {
            *why_text = xasprintf("'%s' is set twice", name);
            return -1;
        }
    }
    int limit;
    if (config_limit(value, &limit, &why) < 0) {
        *why_text = xasprintf("%s = %s: %s", name, value, why);
        return -1;
    }
    cfg->overrides = xrealloc(cfg->overrides, (cfg->noverrides + 1) * sizeof *cfg->overrides);
    cfg->overrides[cfg->noverrides++] = (struct config_override){xstrdup(who), group, which,
                                                                 limit};
    return 1;
}

/* The limit `which` of a struct core_limits. */
static int *config_limit_field(struct core_limits *l, int which)
{
    return which == 0 ? &l->gpus : which == 1 ? &l->running : &l->queued;
}

struct core_limits config_user_limits(const struct daemon_config *cfg, const char *name,
                                      gid_t gid)
{
    struct core_limits out = cfg->user_limits;
    gid_t groups[256];
    int ngroups = 256;
    bool known = name != NULL && getgrouplist(name, gid, groups, &ngroups) >= 0;
    for (int which = 0; which < 3; which++) {
        bool user_set = false, group_set = false;
        int group_best = 0;
        for (size_t i = 0; i < cfg->noverrides; i++) {
            const struct config_override *o = &cfg->overrides[i];
            if (o->which != which)
                continue;
            if (!o->group && name != NULL && strcmp(o->name, name) == 0) {
                *config_limit_field(&out, which) = o->value;
                user_set = true;
            } else if (o->group && known) {
                struct group *g = getgrnam(o->name);
                for (int k = 0; g != NULL && k < ngroups; k++)
                    if (groups[k] == g->gr_gid) {
                        /* the most generous of the user's groups: none (0) beats any number */
                        group_best = !group_set || o->value == 0 ||
                                     (group_best != 0 && o->value > group_best)
                                         ? o->value : group_best;
                        group_set = true;
                        break;
                    }
            }
        }
        if (!user_set && group_set)
            *config_limit_field(&out, which) = group_best;
    }
    return out;
}

static int config_file(struct daemon_config *cfg, const char *path, char **err)
{
    struct stat sb;
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        if (errno == ENOENT)
            return 0;
        *err = xasprintf("%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(fp), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        *err = xasprintf("%s: is a directory, not a settings file", path);
        fclose(fp);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned n = 0, set_on[NKEYS] = {0}; /* the line that set each key */
    int rc = 0;
    errno = 0;
    while (getline(&line, &cap, fp) > 0) {
        n++;
        char *s = config_trim(line), *eq = strchr(s, '='), *why_text = NULL;
        const char *why = NULL;
        if (*s == '\0' || *s == '#')
            continue;
        if (eq == NULL) {
            why_text = xasprintf("expected key = value");
        } else {
            *eq = '\0';
            char *name = config_trim(s), *value = config_trim(eq + 1);
            const struct config_key *key = config_find(name);
            if (key == NULL && config_override(cfg, name, value, &why_text) != 0)
                ; /* an override: taken, or why_text says what is wrong */
            else if (key == NULL)
                why_text = xasprintf("unknown setting '%s'", name);
            else if (set_on[key - config_keys] != 0)
                why_text = xasprintf("'%s' is set twice (first on line %u)", name,
                                     set_on[key - config_keys]);
            else if (config_set(cfg, key, value, &why) < 0)
                why_text = xasprintf("%s = %s: %s", name, value, why);
            else
                set_on[key - config_keys] = n;
        }
        if (why_text != NULL) {
            *err = xasprintf("%s:%u: %s", path, n, why_text);
            free(why_text);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(fp)) {
        *err = xasprintf("%s:%u: cannot read: %s", path, n + 1, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(fp);
    return rc;
}

/* The flags that say where the daemon lives. */
static const struct config_place {
    const char *flag;
    size_t offset; /* of a char * in struct daemon_config; 0: the --system flag */
} config_places[] = {
    {"--system", 0},
    {"--state-dir", OFF(state_dir)},
    {"--socket", OFF(socket)},
    {"--config", OFF(config)},
};
#define NPLACES (sizeof config_places / sizeof config_places[0])

static const struct config_place *config_place(const char *arg)
{
    for (size_t i = 0; i < NPLACES; i++)
        if (strcmp(config_places[i].flag, arg) == 0)
            return &config_places[i];
    return NULL;
}

/* Takes the place flags out of argv first: they decide which settings file is read. */
static int config_places_load(struct daemon_config *cfg, int argc, char **argv, char **err)
{
    for (int i = 1; i < argc; i++) {
        const struct config_place *p = config_place(argv[i]);
        if (p == NULL) {
            if (strncmp(argv[i], "--", 2) == 0 && i + 1 < argc &&
                strncmp(argv[i + 1], "--", 2) != 0)
                i++; /* a setting's value, even one that reads like a place flag */
            continue;
        }
        if (p->offset == 0) {
            cfg->system = true;
            continue;
        }
        char **field = (char **)((char *)cfg + p->offset);
        if (i + 1 >= argc || argv[i + 1][0] == '\0') {
            *err = xasprintf("option %s needs a value", argv[i]);
            return -1;
        }
        if (*field != NULL) {
            *err = xasprintf("option %s given twice", argv[i]);
            return -1;
        }
        if (argv[i + 1][0] != '/') {
            *err = xasprintf("%s '%s': expected an absolute path", argv[i], argv[i + 1]);
            return -1;
        }
        *field = xstrdup(argv[++i]);
    }
    return 0;
}

/* http and its old name metrics (one listener serves both), TLS's two files together, and the
 * notify URL's scheme. */
static int config_http(struct daemon_config *cfg, char **err)
{
    const char *why;
    if (cfg->metrics != NULL && cfg->http != NULL && strcmp(cfg->metrics, cfg->http) != 0) {
        *err = xasprintf("metrics (%s) and http (%s) differ: metrics is the old name of http,"
                         " one listener serves both; set http alone", cfg->metrics, cfg->http);
        return -1;
    }
    if (cfg->http == NULL && cfg->metrics != NULL)
        cfg->http = xstrdup(cfg->metrics);
    cfg->http_any |= cfg->metrics_any;
    if ((cfg->http_tls_cert == NULL) != (cfg->http_tls_key == NULL)) {
        *err = xasprintf("%s is set without %s: HTTPS needs both",
                         cfg->http_tls_cert ? "http-tls-cert" : "http-tls-key",
                         cfg->http_tls_cert ? "http-tls-key" : "http-tls-cert");
        return -1;
    }
    if (cfg->http_tls_cert != NULL && cfg->http == NULL) {
        *err = xstrdup("http-tls-cert is set but http is not: nothing would serve HTTPS");
        return -1;
    }
    if (strcmp(cfg->spill, "never") != 0 && strcmp(cfg->spill, "unfit") != 0 &&
        (strncmp(cfg->spill, "after ", 6) != 0 ||
         parse_duration(cfg->spill + 6, &cfg->spill_after_ms, &why) < 0 ||
         cfg->spill_after_ms <= 0)) {
        *err = xasprintf("spill '%s': expected never, unfit, or after DURATION (after 30m)",
                         cfg->spill);
        return -1;
    }
    if (strcmp(cfg->spill, "never") != 0 && cfg->shared_dir == NULL) {
        *err = xasprintf("spill = %s needs shared-dir (a Slurm cluster to spill to)", cfg->spill);
        return -1;
    }
    if (cfg->shared_dir != NULL && cfg->shared_dir[0] != '/') {
        *err = xasprintf("shared-dir '%s' is not an absolute path", cfg->shared_dir);
        return -1;
    }
    if (config_las(cfg, err) < 0 || config_amqp(cfg, err) < 0)
        return -1;
    if (cfg->slurm_poll_ms < 100) {
        *err = xstrdup("slurm-poll must be at least 100ms");
        return -1;
    }
    if (cfg->notify != NULL && strncmp(cfg->notify, "http://", 7) != 0 &&
        strncmp(cfg->notify, "https://", 8) != 0) {
        *err = xasprintf("notify '%s': expected an http:// or https:// URL", cfg->notify);
        return -1;
    }
    return 0;
}

int config_load(struct daemon_config *cfg, const char *home, int argc, char **argv, char **err)
{
    const char *why, *fallback;
    char buf[128];
    memset(cfg, 0, sizeof *cfg);
    if (config_places_load(cfg, argc, argv, err) < 0)
        return -1;
    for (size_t i = 0; i < NKEYS; i++)
        if ((fallback = config_fallback(&config_keys[i], buf, sizeof buf)) != NULL &&
            config_set(cfg, &config_keys[i], fallback, &why) < 0)
            abort(); /* a bad default is a bug */
    if (home != NULL || cfg->config != NULL) {
        char *path = cfg->config      ? xstrdup(cfg->config)
                     : cfg->system    ? xstrdup(PATHS_SYSTEM_CONFIG)
                     : cfg->state_dir ? xasprintf("%s/drover.conf", cfg->state_dir)
                                      : xasprintf("%s/drover.conf", home);
        int rc = config_file(cfg, path, err);
        free(path);
        if (rc < 0)
            return -1;
    }
    for (int i = 1; i < argc; i++) {
        const struct config_place *place = config_place(argv[i]);
        if (place != NULL) {
            i += place->offset != 0; /* taken above */
            continue;
        }
        const struct config_key *key =
            strncmp(argv[i], "--", 2) == 0 ? config_find(argv[i] + 2) : NULL;
        if (key == NULL) {
            *err = xasprintf("unknown option '%s' (drover daemon --help lists them)", argv[i]);
            return -1;
        }
        if (key->type == CONFIG_BOOL && (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)) {
            *(bool *)((char *)cfg + key->offset) = true;
            continue;
        }
        if (i + 1 >= argc) {
            *err = xasprintf("option %s needs a value", argv[i]);
            return -1;
        }
        if (config_set(cfg, key, argv[i + 1], &why) < 0) {
            *err = xasprintf("%s '%s': %s", argv[i], argv[i + 1], why);
            return -1;
        }
        i++;
    }
    if (cfg->busy_low > cfg->busy_high) {
        *err = xasprintf("busy-low (%d) is above busy-high (%d)", cfg->busy_low, cfg->busy_high);
        return -1;
    }
    return config_http(cfg, err);
}

void config_free(struct daemon_config *cfg)
{
    free(cfg->gpus);
    free(cfg->metrics);
    free(cfg->http);
    free(cfg->http_tls_cert);
    free(cfg->http_tls_key);
    free(cfg->notify);
    free(cfg->admins);
    free(cfg->shared_dir);
    free(cfg->slurm_partition);
    free(cfg->slurm_account);
    free(cfg->slurm_qos);
    free(cfg->slurm_args);
    free(cfg->spill);
    free(cfg->policy);
    free(cfg->las_thresholds);
    free(cfg->las_min_run);
    free(cfg->las_starve);
    free(cfg->las_starve_total);
    free(cfg->las_protect_wait);
    free(cfg->las_mrl);
    free(cfg->amqp);
    free(cfg->amqp_credentials);
    free(cfg->amqp_queue);
    free(cfg->amqp_exchange);
    free(cfg->amqp_user);
    free(cfg->amqp_host);
    free(cfg->amqp_vhost);
    free(cfg->amqp_login);
    free(cfg->amqp_password);
    cfg->amqp = cfg->amqp_credentials = cfg->amqp_queue = cfg->amqp_exchange = NULL;
    cfg->amqp_user = cfg->amqp_host = cfg->amqp_vhost = cfg->amqp_login = NULL;
    cfg->amqp_password = NULL;
    cfg->policy = cfg->las_thresholds = cfg->las_min_run = cfg->las_starve = NULL;
    cfg->las_starve_total = cfg->las_protect_wait = cfg->las_mrl = NULL;
    cfg->shared_dir = cfg->slurm_partition = cfg->slurm_account = cfg->slurm_qos = NULL;
    cfg->slurm_args = cfg->spill = NULL;
    free(cfg->state_dir);
    free(cfg->socket);
    free(cfg->config);
    for (size_t i = 0; i < cfg->noverrides; i++)
        free(cfg->overrides[i].name);
    free(cfg->overrides);
    cfg->overrides = NULL;
    cfg->noverrides = 0;
    cfg->gpus = cfg->metrics = cfg->admins = cfg->state_dir = cfg->socket = cfg->config = NULL;
    cfg->http = cfg->http_tls_cert = cfg->http_tls_key = cfg->notify = NULL;
}

void config_usage(FILE *fp)
{
    fprintf(fp, "usage: drover daemon [--system] [--state-dir DIR] [--socket PATH] [--config FILE]"
                " [--KEY VALUE …]\n"
                "  (KEY = VALUE lines also in $DROVER_HOME/drover.conf, or " PATHS_SYSTEM_CONFIG
                " with --system)\n"
                "  --%-15s %s\n  --%-15s %s\n  --%-15s %s\n  --%-15s %s\n",
            "system", "one daemon for every local user; run as root (state " PATHS_SYSTEM_STATE
            ", socket " PATHS_SYSTEM_SOCKET ")",
            "state-dir DIR", "where the state lives (default $DROVER_HOME, or the system one)",
            "socket PATH", "where the daemon listens (default STATE-DIR/drover.sock, or the"
            " system one)",
            "config FILE", "the settings file (default STATE-DIR/drover.conf, or the system one)");
    char buf[128];
    for (size_t i = 0; i < NKEYS; i++) {
        const char *fallback = config_fallback(&config_keys[i], buf, sizeof buf);
        fprintf(fp, "  --%-15s %s%s%s%s\n", config_keys[i].name, config_keys[i].help,
                fallback ? " (default " : "", fallback ? fallback : "", fallback ? ")" : "");
    }
}

static int config_ready_fd = -1;

void config_ready_take(void)
{
    const char *v = getenv(CONFIG_READY_ENV);
    struct stat sb;
    long long fd;
    const char *why;
    if (v != NULL && parse_int(v, 3, 1 << 20, &fd, &why) == 0 && fstat((int)fd, &sb) == 0 &&
        S_ISFIFO(sb.st_mode)) {
        config_ready_fd = (int)fd;
        fcntl(config_ready_fd, F_SETFD, FD_CLOEXEC);
    }
    unsetenv(CONFIG_READY_ENV);
}

void config_ready_report(const char *error)
{
    if (config_ready_fd < 0)
        return;
    if (error != NULL) {
        char *line = xasprintf("%s\n", error);
        signal(SIGPIPE, SIG_IGN); /* the daemon is on its way out; the command may be too */
        if (write(config_ready_fd, line, strlen(line)) < 0) {
            /* the command that waited is gone: nobody to tell */
        }
        free(line);
    }
    close(config_ready_fd);
    config_ready_fd = -1;
}
