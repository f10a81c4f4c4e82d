/* daemon/owner.c — a task's owner on a shared machine: what the daemon (root) prepares for it
 * and checks on its behalf. Nothing here is used for a task whose owner is the daemon's own
 * user (per-user mode). See docs/ARCHITECTURE.md, "Trust boundary and privilege drop". */
#ifndef DROVER_DAEMON_OWNER_H
#define DROVER_DAEMON_OWNER_H

#include <stdint.h>
#include <sys/types.h>

/* Whether the user (uid, primary gid; name for its supplementary groups, may be NULL) can enter
 * dir: a short-lived child takes the user's identity and really chdir()s (ACLs, root-squashing
 * network file systems and all). Returns 1 if it can (always, for the daemon's own uid), 0 if
 * not with *why = "USER cannot enter DIR: REASON", -1 if it could not be told with *why; *why
 * is malloc'd, the caller frees it. */
int daemon_owner_can_enter(const char *user, uid_t uid, gid_t gid, const char *dir, char **why);

/* Prepares what a task of another user's needs under home, through descriptors of directories
 * the daemon made, never following a link: runs/, checkpoints/, metrics/ and home itself
 * searchable by others (0711, the daemon's); runs/TASK the daemon's (0711); checkpoints/TASK
 * the owner's (0700); metrics/TASK.jsonl the owner's (0600), a regular file with one link.
 * Returns 0, or -1 with errno and *why (malloc'd). */
int daemon_owner_prepare(const char *home, int64_t task, uid_t uid, char **why);

#endif
