/* exp/settings.h — an experiment's spec (as stored, already checked against the schema) decoded
 * once into what the daemon acts on, and the one place for the defaults of what a template may
 * leave out. The template's reader and expander (exp/schema.c, exp/expand.c) take their defaults
 * from here too. Pure: no store, no I/O.
 */
#ifndef DROVER_EXP_SETTINGS_H
#define DROVER_EXP_SETTINGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exp/asha.h"

/* The defaults. */
#define EXP_DEFAULT_BREAKER 2              /* circuit_breaker.failures */
#define EXP_DEFAULT_TRIAL_RETRIES 3        /* a trial's retries when its template says none */
#define EXP_DEFAULT_STOP_RULE STOP_ASHA    /* early_stopping.type */
#define EXP_DEFAULT_MAXIMIZE true          /* early_stopping.mode, validation.mode: max */
#define EXP_DEFAULT_GRACE 1                /* early_stopping.grace */
#define EXP_DEFAULT_REDUCTION_FACTOR 3.0   /* early_stopping.reduction_factor */
#define EXP_DEFAULT_MAX_RUNG 0             /* early_stopping.max_rung: no bound */
#define EXP_DEFAULT_RUNG_UNIT "epoch"      /* early_stopping.rung_unit */
#define EXP_DEFAULT_FILE_METRICS true      /* metrics.file */
#define EXP_DEFAULT_PARALLEL 0             /* sweep.parallel: no limit */

struct exp_settings {
    /* early_stopping: only with a metric */
    bool early_stopping;
    struct stop_config stop;   /* rule, maximize, grace (>= 1), eta (> 1), max_resource */
    char *stop_metric;         /* NULL without early stopping */
    char *rung_unit;           /* the field that counts the resource; never NULL */
    /* metrics */
    bool file_metrics;         /* read $DROVER_METRICS_FILE */
    char **patterns;           /* log-line patterns ("loss: {value}"), npatterns of them */
    size_t npatterns;
    /* validation: only as a block */
    bool validation;
    char *val_metric;          /* NULL: none given (the experiment then fails validation) */
    bool val_maximize;         /* validation.mode, else early_stopping.mode, else max */
    bool baseline_is_value;
    double baseline;           /* baseline: NUM */
    char *baseline_experiment; /* baseline: { experiment: NAME }, or NULL */
    json_t *improvement;       /* "2%" or a number, or NULL (a reference) */
    char *max_epoch_time;      /* as written (for the reason), or NULL */
    int64_t max_epoch_ms;      /* 0: no limit */
    double min_gpu_util;       /* 0.7 = 70%; < 0: none */
    /* the leaderboard's metric: early stopping's, else validation's */
    const char *board_metric;  /* borrowed from the above; NULL: none */
    bool board_maximize;
    /* the rest */
    int breaker;               /* consecutive failed trials that pause it; 0: never */
    int parallel;              /* sweep.parallel */
    json_t *generator;         /* generator.command (an array), or NULL */
};

/* Decodes spec (NULL or not an object: every default). Never fails: values the schema would
 * have refused fall back to their defaults. exp_settings_free() releases what it holds. */
void exp_settings_decode(const json_t *spec, struct exp_settings *out);
void exp_settings_free(struct exp_settings *settings);

#endif
