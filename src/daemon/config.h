/* daemon/config.h — the daemon's settings: one declarative table (daemon/config.c) gives each
 * key its type, default, range and help; values come from $DROVER_HOME/drover.conf
 * (`key = value` lines, # comments) and then from `drover daemon --key value`, which wins.
 * docs/CLI.md lists them. */
#ifndef DROVER_DAEMON_CONFIG_H
#define DROVER_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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
};

/* Defaults, then the file (if it exists), then argv (argv[0] is "daemon"). Returns 0, or -1
 * with one line in *err (malloc'd) naming the file and line or the flag. */
int config_load(struct daemon_config *cfg, const char *home, int argc, char **argv, char **err);
void config_free(struct daemon_config *cfg);
/* The options and their help, for `drover daemon --help` and the docs. */
void config_usage(FILE *fp);

#endif
