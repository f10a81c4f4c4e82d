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
    char *copy = xstrdup(dir);
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(copy, 0700) < 0 && errno != EEXIST) {
            free(copy);
            return -1;
        }
        *p = '/';
    }
    int rc = mkdir(copy, 0700) < 0 && errno != EEXIST ? -1 : 0;
    free(copy);
    return rc;
}

char *paths_join(const char *home, const char *name)
{
    return xasprintf("%s/%s", home, name);
}
