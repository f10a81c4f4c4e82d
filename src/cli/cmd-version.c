/* drover version [--json] (and drover --version): this build's version, the git revision it
 * was built from, and the versions of the libraries it was built against. Every value is baked
 * in by CMake (CMakeLists.txt, "version"): the client asks no daemon, and links none of them. */
#include "cli/cli.h"

#include <stdio.h>

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif
#ifndef DROVER_GIT
#define DROVER_GIT "unknown"
#endif
#ifndef DROVER_SQLITE_VERSION
#define DROVER_SQLITE_VERSION "unknown"
#endif
#ifndef DROVER_EVENT_VERSION
#define DROVER_EVENT_VERSION "unknown"
#endif
#ifndef DROVER_JANSSON_VERSION
#define DROVER_JANSSON_VERSION "unknown"
#endif
#ifndef DROVER_YAML_VERSION
#define DROVER_YAML_VERSION "unknown"
#endif

static const struct cmd_opt version_opts[] = {
    {"json", 0, false, false, "print the version and the libraries' versions as JSON"},
    {NULL, 0, false, false, NULL},
};

static int version_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    if (cmd_opt(cmd, args, "json") == NULL) {
        printf("drover %s (git %s)\n", DROVER_VERSION, DROVER_GIT);
        return EXIT_OK;
    }
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "version", DROVER_VERSION, "git",
                          DROVER_GIT, "sqlite", DROVER_SQLITE_VERSION, "libevent",
                          DROVER_EVENT_VERSION, "jansson", DROVER_JANSSON_VERSION, "yaml",
                          DROVER_YAML_VERSION);
    out_json(j);
    json_decref(j);
    return EXIT_OK;
}

const struct cmd_entry cmd_version = {
    .name = "version",
    .usage = "version [--json]",
    .summary = "print drover's version (and its libraries' with --json); also drover --version",
    .opts = version_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = version_exec,
};
