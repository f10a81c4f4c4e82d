/* daemon/config.h — the daemon's settings: one declarative table (daemon/config.c) gives each
 * key its type, default, range and help; values come from $DROVER_HOME/drover.conf
 * (`key = value` lines, # comments) and then from `drover daemon --key value`, which wins.
 * docs/CLI.md lists them. Four flags are not settings but say where the daemon lives, and are
 * taken before the file is read: --system (one daemon for the machine, run as root), --state-dir
 * DIR, --socket PATH and --config FILE. */
#ifndef DROVER_DAEMON_CONFIG_H
#define DROVER_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/core.h"

struct daemon_config {
    int64_t aging_ms;          /* 0 = off */
    int64_t grace_ms;
    char *gpus;                /* allow-list: "0,2" or UUIDs; NULL = all (or CUDA_VISIBLE_DEVICES) */
    int64_t sample_ms;         /* telemetry period */
    int64_t health_ms;         /* health check period */
    char *http;                /* ADDR:PORT of the HTTP API, dashboard and /metrics, or NULL */
    bool http_any;             /* allow a non-loopback http address */
    char *http_tls_cert, *http_tls_key; /* PEM files: serve HTTPS; both or neither */
    char *metrics;             /* the old name of http (config_load copies it there) */
    bool metrics_any;          /* the old name of http-any */
    char *notify;              /* webhook URL for every task and experiment end, or NULL */
    int busy_high, busy_low;   /* utilisation rule, percent */
    int claim_margin;          /* percent over a learned peak */
    double oom_factor;         /* a claim grows by this after an out-of-memory */
    /* What a submitted task that names none gets (daemon/request.c); experiment trials get
     * EXP_DEFAULT_TRIAL_RETRIES retries instead, with this backoff. */
    int default_retries;
    int ndefault_backoff;      /* 1 to REQUEST_MAX_BACKOFF */
    int64_t default_backoff[CORE_MAX_BACKOFF]; /* ms, the last repeating */
    /* Slurm (daemon/slurm.c, docs/SLURM.md): a cluster takes tasks once shared-dir is set. */
    char *shared_dir;          /* absolute: run directories of Slurm tasks, seen by both sides */
    char *slurm_partition, *slurm_account, *slurm_qos;
    char *slurm_args;          /* extra sbatch words, split like a shell (never run by one) */
    int64_t slurm_poll_ms;     /* one squeue call per poll while jobs are tracked */
    char *spill;               /* never, unfit, after DURATION */
    int64_t spill_after_ms;    /* after DURATION */
    char *admins;              /* system mode: the group whose members are admins, or NULL */
    /* Between users (core/users.c): fair share by decayed GPU usage, and what one user's tasks
     * may hold (0 = no limit), with per-user and per-group overrides (config_user_limits). */
    bool fair_share;
    int64_t fair_share_half_life_ms; /* 0 = usage never decays */
    struct core_limits user_limits;
    /* off-peak: the daily window --off-peak tasks start in (util/when.h), local time. */
    struct config_window {
        bool set;              /* off: no window (off-peak tasks wait) */
        int start, end;        /* seconds after local midnight; end <= start wraps midnight */
    } off_peak;
    struct config_override {
        char *name;            /* a user name, or a group name after '@' */
        bool group;
        int which;             /* 0 gpus, 1 running, 2 queued */
        int value;
    } *overrides;
    size_t noverrides;
    /* The scheduling policy (docs/SCHEDULING.md): drover (the default) or las, with las's
     * knobs; NULL knobs keep core_policy_las()'s defaults. */
    char *policy;
    char *las_thresholds;      /* GPU-hours, ascending, comma-separated */
    char *las_min_run;
    char *las_starve;
    char *las_starve_total;
    char *las_protect_wait;
    char *las_mrl;
    int preempt_overruns;      /* a task that overran its preemption grace this often is no
                                * longer preemptible; 0 = never */
    bool las;                  /* parsed: policy = las */
    int las_nthresholds;       /* parsed: -1 = las's default */
    double las_threshold[CORE_LAS_MAX]; /* GPU-seconds */
    int64_t las_min_run_ms;    /* -1 = las's default */
    double las_starve_k;       /* < 0 = las's default */
    int64_t las_starve_total_ms; /* -1 = las's default; 0 = off */
    int64_t las_protect_wait_ms; /* -1 = las's default; 0 = off */
    double las_mrl_factor;     /* < 0 = las's default; 0 = off */
    /* RabbitMQ (daemon/amqp.c, docs/AMQP.md): the broker's URL (credentials in it, or in the
     * amqp-credentials file), the intake queue, the events' exchange, whom messages act as. */
    char *amqp;
    char *amqp_credentials;
    char *amqp_queue;
    char *amqp_exchange;
    char *amqp_user;
    int amqp_prefetch;
    int amqp_outbox;           /* events kept while the broker is away; the oldest go first */
    /* parsed from amqp (and amqp-credentials) */
    char *amqp_host, *amqp_vhost, *amqp_login, *amqp_password;
    int amqp_port;
    /* Where the daemon lives (flags only, not in drover.conf): */
    bool system;               /* --system: every local user's daemon (docs/CLI.md) */
    char *state_dir;           /* --state-dir, or NULL: the mode's default */
    char *socket;              /* --socket, or NULL: the mode's default */
    char *config;              /* --config, or NULL: the mode's default settings file */
};

/* Defaults, then the file (if it exists), then argv (argv[0] is "daemon"). The file is
 * --config FILE, else in system mode PATHS_SYSTEM_CONFIG, else <--state-dir or home>/drover.conf;
 * home NULL and no --config: no file. Returns 0, or -1 with one line in *err (malloc'd) naming the file
 * and line or the flag. */
int config_load(struct daemon_config *cfg, const char *home, int argc, char **argv, char **err);
void config_free(struct daemon_config *cfg);
/* One user's limits: the defaults (user-gpus, user-running, user-queued), each replaced by the
 * user's own override when there is one (user-gpus.alice = 4), else by the most generous
 * override of the groups the user is in (user-gpus.@students = 1; a limit of 0, none, is the
 * most generous). name, uid and gid: the user's. */
struct core_limits config_user_limits(const struct daemon_config *cfg, const char *name,
                                      gid_t gid);
/* The options and their help, for `drover daemon --help` and the docs. */
void config_usage(FILE *fp);

/* A daemon started by a command reports its start on a pipe, so that the command can print the
 * daemon's startup error at once rather than time out. The command sets CONFIG_READY_ENV to the
 * write end's number (CONFIG_READY_FD); the daemon writes one line, why it cannot start, or
 * closes the pipe without a word once it serves, or when another daemon already serves the
 * state directory (two commands started one each: the loser's command uses the winner). */
#define CONFIG_READY_ENV "DROVER_READY_FD"
#define CONFIG_READY_FD 3
/* Takes the pipe named in the environment, if any, and removes the variable so that nothing the
 * daemon starts inherits it; the descriptor is made close-on-exec. */
void config_ready_take(void);
/* Reports the start: error (one line) when it failed, NULL once serving. Only the first call
 * counts; without a pipe it does nothing. */
void config_ready_report(const char *error);

#endif
