/* The drover binary: the CLI, and the daemon, supervisor and zygote that are modes of the same
 * executable. This file alone links cli/, daemon/ and exec/ together; cli/ itself may not call
 * into the daemon (docs/ARCHITECTURE.md, "Layers"). */
#include "cli/cli.h"
#include "daemon/daemon.h"
#include "exec/exec.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "daemon") == 0)
        return daemon_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__supervise") == 0)
        exec_supervise_main(); /* internal: started by the daemon for each attempt */
    if (argc >= 2 && strcmp(argv[1], "__zygote") == 0)
        exec_zygote_main(); /* internal: forks supervisors for the daemon */
    if (argc == 2 && strcmp(argv[1], "--version") == 0)
        argv[1] = "version"; /* what a packager and a new user try first */
    return cli_main(argc, argv);
}
