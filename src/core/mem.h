/* core/mem.h — allocation that cannot return NULL, for core/ alone.
 *
 * core/ links against nothing but libc (see CMakeLists.txt), so it cannot use util/xalloc; these
 * are the same contract: out of memory aborts, call sites stay clean. No message is printed
 * because core/ does no I/O; the abort itself is the report. */
#ifndef DROVER_CORE_MEM_H
#define DROVER_CORE_MEM_H

#include <stddef.h>

void *core_xmalloc(size_t size);
void *core_xcalloc(size_t n, size_t size);
void *core_xrealloc(void *ptr, size_t size);
/* Grows *ptr (an array of *cap elements of elem bytes) so that it holds at least need. */
void core_xgrow(void **ptr, size_t *cap, size_t need, size_t elem);
/* An impossible state inside core/ (a broken invariant): abort. */
_Noreturn void core_bug(void);

#endif
