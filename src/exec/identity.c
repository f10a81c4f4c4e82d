/* identity.c — whom the task runs as: its owner, when the supervisor runs as someone else (root,
 * the system daemon's).
 *
 * The supervisor resolves the owner once, before it forks the task: passwd entry by uid (the
 * uid the kernel reported at submit time, never a name the client sent), primary gid,
 * supplementary groups (getgrouplist), and the environment with HOME, USER and LOGNAME made
 * the owner's. Those lookups may go through NSS (files, LDAP, sssd) and allocate, so they must
 * not happen in the vfork()ed task child; the drop itself (exec_identity_drop) is only system
 * calls: setgroups, setgid, setuid, in that order, each checked, then a check that it held.
 * The supervisor itself stays root: it writes the attempt's status and pid files into a
 * directory only root can write, and kills the task's group.
 */
#include "exec/exec-internal.h"
#include "util/xalloc.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The environment with HOME, USER and LOGNAME replaced by the owner's. */
static char **identity_env(char *const *env, const struct passwd *pw)
{
    static const char *const replaced[] = {"HOME=", "USER=", "LOGNAME="};
    size_t n = 0, i = 0;

    while (env != NULL && env[n] != NULL)
        n++;
    char **v = xcalloc(n + 4, sizeof *v);
    for (size_t k = 0; k < n; k++) {
        bool skip = false;
        for (size_t j = 0; j < sizeof replaced / sizeof replaced[0]; j++)
            skip |= strncmp(env[k], replaced[j], strlen(replaced[j])) == 0;
        if (!skip)
            v[i++] = xstrdup(env[k]);
    }
    v[i++] = xasprintf("HOME=%s", pw->pw_dir);
    v[i++] = xasprintf("USER=%s", pw->pw_name);
    v[i++] = xasprintf("LOGNAME=%s", pw->pw_name);
    return v;
}

int exec_identity_resolve(const struct exec_spec *spec, struct exec_identity *id, char *err,
                          size_t len)
{
    struct passwd pwbuf, *pw = NULL;
    char buf[16384];

    memset(id, 0, sizeof *id);
    if (!spec->as_owner || spec->owner_uid == geteuid())
        return 0; /* the task runs as the supervisor does: a per-user daemon's */
    const char *who = spec->owner != NULL ? spec->owner : "?";
    if (geteuid() != 0) {
        snprintf(err, len, "cannot run as %s (uid %ld): the daemon is not root", who,
                 (long)spec->owner_uid);
        return -1;
    }
    int rc = getpwuid_r(spec->owner_uid, &pwbuf, buf, sizeof buf, &pw);
    if (pw == NULL) {
        snprintf(err, len, "cannot run as %s (uid %ld): %s", who, (long)spec->owner_uid,
                 rc != 0 ? strerror(rc) : "no such user");
        return -1;
    }
    int n = 32;
    gid_t *groups = xcalloc((size_t)n, sizeof *groups);
    while (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) == -1) {
        groups = xrealloc(groups, (size_t)n * 2 * sizeof *groups);
        n *= 2;
    }
    id->drop = true;
    id->uid = pw->pw_uid;
    id->gid = pw->pw_gid;
    id->groups = groups;
    id->ngroups = n;
    id->env = identity_env(spec->env, pw);
    return 0;
}

int exec_identity_drop(const struct exec_identity *id, const char **step)
{
    if (!id->drop)
        return 0;
    *step = "setgroups";
    if (setgroups((size_t)id->ngroups, id->groups) == -1)
        return errno;
    *step = "setgid";
    if (setgid(id->gid) == -1)
        return errno;
    *step = "setuid";
    if (setuid(id->uid) == -1)
        return errno;
    /* The drop must have held all the way: real and effective ids, and no way back. */
    *step = "checking the drop";
    if (getuid() != id->uid || geteuid() != id->uid || getgid() != id->gid ||
        getegid() != id->gid || (id->uid != 0 && setuid(0) == 0))
        return EPERM;
    return 0;
}

void exec_identity_release(struct exec_identity *id)
{
    for (size_t i = 0; id->env != NULL && id->env[i] != NULL; i++)
        free(id->env[i]);
    free(id->env);
    free(id->groups);
    memset(id, 0, sizeof *id);
}
