/* The drover command: the CLI. The daemon, with the zygote and the supervisors that are modes of
 * it, is another executable, drover-daemon (src/main-daemon.c), installed beside this one: the
 * CLI links none of the daemon's libraries (SQLite, libevent, OpenSSL), so that its start — paid
 * by every command, and by every task submitted one command at a time — is small (issue 13,
 * docs/BENCHMARKS.md). `drover daemon ARGS` hands over to it. */
#include "cli/cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "daemon") == 0) {
        char *daemon = cli_daemon_path();
        if (daemon != NULL) {
            argv[0] = "drover-daemon"; /* argv[1] stays "daemon": ps shows what was asked */
            execv(daemon, argv);
        }
        fprintf(stderr, "drover: cannot run the daemon %s: %s\n",
                daemon ? daemon : "drover-daemon", strerror(errno));
        return 1;
    }
    /* jansson seeds its hash function from /dev/urandom on first use (three system calls); the
     * client only parses the daemon's answers and its own files, so a seed that is merely
     * unpredictable enough will do. The daemon, which parses what anyone sends, keeps jansson's. */
    json_object_seed((size_t)getpid() * 2654435761u ^ (size_t)time(NULL));
    if (argc == 2 && strcmp(argv[1], "--version") == 0)
        argv[1] = "version"; /* what a packager and a new user try first */
    return cli_main(argc, argv);
}
