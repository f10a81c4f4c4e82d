#include "util/paths.h"
#include "util/xalloc.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *paths_home(void)
{
    const char *home = getenv("DROVER_HOME");
    if (home && *home)
        return xstrdup(home);
    const char *user = getenv("HOME");
    if (user == NULL || *user == '\0') {
        struct passwd *pw = getpwuid(getuid());
        user = pw ? pw->pw_dir : "/tmp";
    }
    return xasprintf("%s/.local/share/drover", user);
}

int paths_mkdir_p(const char *dir)
{
    /* The leaf first: it is usually all that is missing (one run directory per attempt), and a
     * walk from the root would cost a lookup per component every time. */
    if (dir[0] == '\0') {
        errno = ENOENT;
        return -1;
    }
    if (mkdir(dir, 0700) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -1;
    char *parent = xstrdup(dir);
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') { /* trailing slashes */
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    int rc = -1;
    if (slash && slash > parent) {
        *slash = '\0';
        rc = paths_mkdir_p(parent);
    }
    free(parent);
    if (rc < 0)
        return -1;
    return mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

char *paths_join(const char *home, const char *name)
{
    return xasprintf("%s/%s", home, name);
}
