/* Checks against the limits table (util/limits.h) that both the CLI and the daemon run, so that
 * no check lives only in the client. */
#include "util/limits.h"
#include "util/xalloc.h"

#include <string.h>

int limits_check_exec(json_t *command, json_t *env, char **why)
{
    size_t total = 0, i;
    json_t *v;
    const char *k;
    json_array_foreach(command, i, v) {
        size_t len = json_string_length(v) + 1;
        if (len > LIMIT_EXEC_STRING) {
            *why = xasprintf("argument %zu of the command is %zu bytes; LIMIT_EXEC_STRING is %u",
                             i + 1, len - 1, LIMIT_EXEC_STRING);
            return -1;
        }
        total += len + sizeof(char *);
    }
    json_object_foreach(env, k, v) {
        size_t len = strlen(k) + 1 + json_string_length(v) + 1;
        if (len > LIMIT_EXEC_STRING) {
            *why = xasprintf("environment variable %s is %zu bytes; LIMIT_EXEC_STRING is %u", k,
                             len - 1, LIMIT_EXEC_STRING);
            return -1;
        }
        total += len + sizeof(char *);
    }
    if (total > LIMIT_EXEC_TOTAL) {
        *why = xasprintf("the command and its environment take %zu bytes; LIMIT_EXEC_TOTAL is %u"
                         " (a task could not be started with them)", total, LIMIT_EXEC_TOTAL);
        return -1;
    }
    return 0;
}
