#include "core/mem.h"

#include <stdlib.h>

_Noreturn void core_bug(void)
{
    abort();
}

void *core_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        core_bug();
    return p;
}

void *core_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        core_bug();
    return p;
}

void *core_xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (p == NULL)
        core_bug();
    return p;
}

void core_xgrow(void **ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    *ptr = core_xrealloc(*ptr, ncap * elem);
    *cap = ncap;
}
