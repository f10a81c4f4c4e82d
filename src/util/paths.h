/* Where drover keeps its state. */
#ifndef DROVER_PATHS_H
#define DROVER_PATHS_H

/* $DROVER_HOME, or ~/.local/share/drover. Malloc'd; the caller frees it. */
char *paths_home(void);
/* Creates dir and its parents (mode 0700). 0, or -1 with errno. */
int paths_mkdir_p(const char *dir);
/* <home>/<name>, malloc'd. */
char *paths_join(const char *home, const char *name);

#endif
