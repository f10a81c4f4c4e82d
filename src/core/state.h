/* core/state.h — the task state machine as a table (internal to core/, used by its tests). */
#ifndef DROVER_CORE_STATE_H
#define DROVER_CORE_STATE_H

#include <stdbool.h>

#include "core/core.h"

/* Whether a live task may move from `from` to `to`. Every state change in core/ goes through
 * this table; a change it does not allow is a bug in core/ and aborts. */
bool core_state_allowed(enum task_state from, enum task_state to);
/* Whether a newly submitted task may enter in `state`. */
bool core_state_entry(enum task_state state);

#endif
