/* Where drover keeps its state. */
#ifndef DROVER_PATHS_H
#define DROVER_PATHS_H

/* The system daemon's places (drover daemon --system): one daemon for every local user. The
 * client uses PATHS_SYSTEM_SOCKET when it exists and neither DROVER_SOCKET nor DROVER_HOME is
 * set (cli/client.c). */
#define PATHS_SYSTEM_STATE "/var/lib/drover"
#define PATHS_SYSTEM_SOCKET "/run/drover/drover.sock"
#define PATHS_SYSTEM_CONFIG "/etc/drover/drover.conf"

/* $DROVER_HOME, or ~/.local/share/drover. Malloc'd; the caller frees it. */
char *paths_home(void);
/* Creates dir and its parents (mode 0700). 0, or -1 with errno. */
int paths_mkdir_p(const char *dir);
/* <home>/<name>, malloc'd. */
char *paths_join(const char *home, const char *name);

#endif
