/* tests/fuzz/fuzz-daemon.h — a drained daemon in-process on a real store, for the harnesses that
 * feed the daemon (fuzz_ops, fuzz_http). fuzz_ops.c's header says how it is set up and why.
 *
 * Everything lives in one temp dir, drover-fuzz-NAME.PID.XXXXXX in /dev/shm (else /tmp),
 * removed at exit; those of harnesses that are gone (crashed) are removed at the next start.
 * Every daemon's store is a copy of one empty, migrated, drained store (the pristine one). */
#ifndef DROVER_FUZZ_DAEMON_H
#define DROVER_FUZZ_DAEMON_H

#include "daemon/daemon.h"

/* Makes the temp dir and the pristine store; name ("ops", "http") names the dir and prefixes
 * the harness's fatal messages. Call once, from LLVMFuzzerInitialize. */
void fuzz_daemon_init(const char *name);
/* The pristine store's path: a harness may add to it after fuzz_daemon_init (fuzz_http's
 * token), before the first fuzz_daemon_new. */
const char *fuzz_daemon_pristine(void);

/* A fresh daemon on a copy of the pristine store, set up as daemon_main does but drained, with
 * no socket and no zygote. d->kick, d->carry and d->wakeup call on_event(d) when the loop runs
 * them (NULL: nothing; fuzz_ops never runs the loop and calls fuzz_daemon_turn itself). */
void fuzz_daemon_new(struct daemon *d, void (*on_event)(struct daemon *d));
/* Frees what fuzz_daemon_new made and empties the home directory (but for the ballast). Aborts
 * if an attempt was ever started. */
void fuzz_daemon_free(struct daemon *d);
/* What the loop does after a request: drains again (an input may have undrained it), carries
 * out the deferred actions (daemon_on_carry), then a scheduling pass (daemon_on_kick); aborts if
 * core ever decides to START an attempt. */
void fuzz_daemon_turn(struct daemon *d);

#endif
