/* store/internal.h — what the store's files share (not for the rest of drover). */
#ifndef DROVER_STORE_INTERNAL_H
#define DROVER_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store/store.h"

/* The raw handle, for one-off statements. */
sqlite3 *store_db(struct store *st);
/* Prepares a one-off statement, or returns NULL (the error is SQLite's). */
sqlite3_stmt *store_prepare(struct store *st, const char *sql);
/* A statement run often (per task), compiled once and kept by the store: sql must be a string
 * literal (it is looked up by address). The caller binds and steps it, then gives it back with
 * store_cached_done (never sqlite3_finalize). NULL if it does not compile. */
sqlite3_stmt *store_prepare_cached(struct store *st, const char *sql);
void store_cached_done(sqlite3_stmt *s);
/* Steps a statement that returns no rows and finalizes it; 0, or -1 (also for s == NULL). */
int store_step_once(sqlite3_stmt *s);
/* Records SQLite's error rc (its message from the handle) for store_error() and
 * store_error_code(), as the store's own statements do; returns -1. */
int store_failed(struct store *st, int rc);

/* Replaces the error store_error() reports (takes msg, malloc'd). */
void store_set_error(struct store *st, char *msg);
/* Applies the migrations the database lacks (store/migrate.c); 0, or -1 with the error set. */
int store_migrate(struct store *st);

#endif
