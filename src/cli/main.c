/* The drover binary: the CLI, and the daemon, supervisor and zygote that are modes of the same
 * executable. This file alone links cli/, daemon/ and exec/ together; cli/ itself may not call
 * into the daemon (docs/ARCHITECTURE.md, "Layers"). */
#include "cli/cli.h"
#include "daemon/daemon.h"
#include "exec/exec.h"

#include <jansson.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "daemon") == 0)
        return daemon_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__supervise") == 0)
        exec_supervise_main(); /* internal: started by the daemon for each attempt */
    if (argc >= 2 && strcmp(argv[1], "__zygote") == 0)
        exec_zygote_main(); /* internal: forks supervisors for the daemon */
    /* jansson seeds its hash function from /dev/urandom on first use (three system calls); the
     * client only parses the daemon's answers and its own files, so a seed that is merely
     * unpredictable enough will do. The daemon, which parses what anyone sends, keeps jansson's. */
    json_object_seed((size_t)getpid() * 2654435761u ^ (size_t)time(NULL));
    if (argc == 2 && strcmp(argv[1], "--version") == 0)
        argv[1] = "version"; /* what a packager and a new user try first */
    return cli_main(argc, argv);
}
