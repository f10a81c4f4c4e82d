/* drover-daemon: the daemon, and the zygote and supervisors that are internal modes of the same
 * executable (the daemon spawns them as /proc/self/exe). Run by the CLI on demand, by
 * `drover daemon ARGS` (which hands over here), or directly (systemd). This file alone links
 * daemon/ and exec/ together. */
#include "daemon/daemon.h"
#include "exec/exec.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "__supervise") == 0)
        exec_supervise_main(); /* internal: started by the daemon for an attempt, without zygote */
    if (argc >= 2 && strcmp(argv[1], "__zygote") == 0)
        exec_zygote_main(); /* internal: forks supervisors for the daemon */
    if (argc >= 2 && strcmp(argv[1], "daemon") == 0) { /* `drover daemon`, and the CLI's start */
        argv[1] = argv[0];
        return daemon_main(argc - 1, argv + 1);
    }
    return daemon_main(argc, argv);
}
