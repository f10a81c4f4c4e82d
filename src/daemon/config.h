/* daemon/config.h — the daemon's settings: one declarative table (daemon/config.c) gives each
 * key its type, default, range and help; values come from $DROVER_HOME/drover.conf
 * (`key = value` lines, # comments) and then from `drover daemon --key value`, which wins.
 * docs/CLI.md lists them. */
#ifndef DROVER_DAEMON_CONFIG_H
#define DROVER_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"

struct daemon_config {
    int64_t aging_ms;          /* 0 = off */
    int64_t grace_ms;
    char *gpus;                /* allow-list: "0,2" or UUIDs; NULL = all (or CUDA_VISIBLE_DEVICES) */
    int64_t sample_ms;         /* telemetry period */
    int64_t health_ms;         /* health check period */
    char *metrics;             /* ADDR:PORT for /metrics, or NULL */
    bool metrics_any;          /* allow a non-loopback metrics address */
    int busy_high, busy_low;   /* utilisation rule, percent */
    int claim_margin;          /* percent over a learned peak */
    double oom_factor;         /* a claim grows by this after an out-of-memory */
    /* What a submitted task that names none gets (daemon/request.c); experiment trials get
     * EXP_DEFAULT_TRIAL_RETRIES retries instead, with this backoff. */
    int default_retries;
    int ndefault_backoff;      /* 1 to REQUEST_MAX_BACKOFF */
    int64_t default_backoff[CORE_MAX_BACKOFF]; /* ms, the last repeating */
};

/* Defaults, then the file (if it exists), then argv (argv[0] is "daemon"). Returns 0, or -1
 * with one line in *err (malloc'd) naming the file and line or the flag. */
int config_load(struct daemon_config *cfg, const char *home, int argc, char **argv, char **err);
void config_free(struct daemon_config *cfg);
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
