/* The ready queue and the retry heap.
 *
 * Order: with aging, by the key priority * aging_ms - ready_time, highest first (one priority
 * point is worth aging_ms of waiting); then priority, ready_time and id. Without aging: priority,
 * then ready_time, then id. The aging key does not depend on the current time, so the order
 * never has to be re-sorted as time passes.
 *
 * Structure: one intrusive FIFO list per distinct priority, merged while iterating by a small
 * heap over the list heads. Within one priority the key order is ready_time order, and ready
 * times are handed out monotonically, so an insert is an append (O(1)) and a remove an unlink
 * plus a binary search over the levels (O(log levels)). Priority levels are few, so a pass
 * pays O(log levels) per task it looks at, and nothing at all for the tasks it does not reach:
 * a balanced tree would pay O(log n) everywhere and be far more code. An insert that does not
 * sort last (a restore, several tasks queued at one instant) walks back from the tail. */
#include "core/queue.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

/* Keeps priority * aging_ms within int64 for any int priority (and far beyond any sane value:
 * 2^31 ms is 24 days per point). */
#define QUEUE_MAX_AGING ((int64_t)1 << 31)

void core_queue_init(struct core_queue *queue, int64_t aging_ms)
{
    memset(queue, 0, sizeof *queue);
    if (aging_ms < 0)
        aging_ms = 0;
    queue->aging_ms = aging_ms > QUEUE_MAX_AGING ? QUEUE_MAX_AGING : aging_ms;
}

void core_queue_free(struct core_queue *queue)
{
    free(queue->levels);
    free(queue->iter_heap);
    memset(queue, 0, sizeof *queue);
}

bool core_queue_before(const struct core_queue *queue, const struct core_task *a,
                       const struct core_task *b)
{
    if (a->priority != b->priority && queue->aging_ms > 0) {
        int64_t ka = (int64_t)a->priority * queue->aging_ms - a->ready_time;
        int64_t kb = (int64_t)b->priority * queue->aging_ms - b->ready_time;
        if (ka != kb)
            return ka > kb;
    }
    if (a->priority != b->priority)
        return a->priority > b->priority;
    if (a->ready_time != b->ready_time)
        return a->ready_time < b->ready_time;
    return a->id < b->id;
}

/* The index of priority's level, or where it would go; *found says which. */
static size_t queue_find(const struct core_queue *queue, int priority, bool *found)
{
    size_t lo = 0, hi = queue->nlevels;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (queue->levels[mid].priority > priority)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < queue->nlevels && queue->levels[lo].priority == priority;
    return lo;
}

static struct core_queue_level *queue_level(struct core_queue *queue, int priority)
{
    bool found;
    size_t i = queue_find(queue, priority, &found);
    if (!found) {
        core_xgrow((void **)&queue->levels, &queue->levels_cap, queue->nlevels + 1,
                   sizeof *queue->levels);
        memmove(&queue->levels[i + 1], &queue->levels[i],
                (queue->nlevels - i) * sizeof *queue->levels);
        queue->levels[i] = (struct core_queue_level){ .priority = priority };
        queue->nlevels++;
    }
    return &queue->levels[i];
}

/* Within one level: whether a sorts after b. */
static bool queue_later(const struct core_task *a, const struct core_task *b)
{
    if (a->ready_time != b->ready_time)
        return a->ready_time > b->ready_time;
    return a->id > b->id;
}

void core_queue_insert(struct core_queue *queue, struct core_task *t)
{
    if (t->in_queue)
        core_bug();
    struct core_queue_level *level = queue_level(queue, t->priority);
    struct core_task *after = level->tail;
    while (after != NULL && queue_later(after, t))
        after = after->qprev;
    t->qprev = after;
    t->qnext = after != NULL ? after->qnext : level->head;
    if (t->qnext != NULL)
        t->qnext->qprev = t;
    else
        level->tail = t;
    if (after != NULL)
        after->qnext = t;
    else
        level->head = t;
    t->in_queue = true;
    queue->n++;
}

void core_queue_remove(struct core_queue *queue, struct core_task *t)
{
    if (!t->in_queue)
        return;
    bool found;
    size_t i = queue_find(queue, t->priority, &found);
    if (!found)
        core_bug();
    struct core_queue_level *level = &queue->levels[i];
    if (t->qprev != NULL)
        t->qprev->qnext = t->qnext;
    else
        level->head = t->qnext;
    if (t->qnext != NULL)
        t->qnext->qprev = t->qprev;
    else
        level->tail = t->qprev;
    t->qprev = t->qnext = NULL;
    t->in_queue = false;
    queue->n--;
    if (level->head == NULL) {
        memmove(&queue->levels[i], &queue->levels[i + 1],
                (queue->nlevels - i - 1) * sizeof *queue->levels);
        queue->nlevels--;
    }
}

static void queue_sift_down(struct core_queue *queue, size_t i)
{
    struct core_task **h = queue->iter_heap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < queue->iter_n && core_queue_before(queue, h[l], h[top]))
            top = l;
        if (r < queue->iter_n && core_queue_before(queue, h[r], h[top]))
            top = r;
        if (top == i)
            return;
        struct core_task *tmp = h[i];
        h[i] = h[top];
        h[top] = tmp;
        i = top;
    }
}

void core_queue_iter_start(struct core_queue *queue)
{
    core_xgrow((void **)&queue->iter_heap, &queue->iter_cap, queue->nlevels + 1,
               sizeof *queue->iter_heap);
    queue->iter_n = 0;
    for (size_t i = 0; i < queue->nlevels; i++)
        queue->iter_heap[queue->iter_n++] = queue->levels[i].head;
    for (size_t i = queue->iter_n / 2; i-- > 0;)
        queue_sift_down(queue, i);
}

struct core_task *core_queue_iter_next(struct core_queue *queue)
{
    if (queue->iter_n == 0)
        return NULL;
    struct core_task *t = queue->iter_heap[0];
    /* Read the successor now: the caller may unlink t before the next call. */
    if (t->qnext != NULL)
        queue->iter_heap[0] = t->qnext;
    else
        queue->iter_heap[0] = queue->iter_heap[--queue->iter_n];
    queue_sift_down(queue, 0);
    return t;
}

/* ---- retry heap ---------------------------------------------------------------------------- */

static bool retry_before(const struct core_task *a, const struct core_task *b)
{
    if (a->retry_at != b->retry_at)
        return a->retry_at < b->retry_at;
    return a->id < b->id;
}

static void retry_set(struct core_retry *heap, size_t i, struct core_task *t)
{
    heap->v[i] = t;
    t->heap_index = i;
}

static void retry_up(struct core_retry *heap, size_t i)
{
    struct core_task *t = heap->v[i];
    while (i > 0 && retry_before(t, heap->v[(i - 1) / 2])) {
        retry_set(heap, i, heap->v[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    retry_set(heap, i, t);
}

static void retry_down(struct core_retry *heap, size_t i)
{
    struct core_task *t = heap->v[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, c = l;
        if (l >= heap->n)
            break;
        if (r < heap->n && retry_before(heap->v[r], heap->v[l]))
            c = r;
        if (!retry_before(heap->v[c], t))
            break;
        retry_set(heap, i, heap->v[c]);
        i = c;
    }
    retry_set(heap, i, t);
}

void core_retry_free(struct core_retry *heap)
{
    free(heap->v);
    memset(heap, 0, sizeof *heap);
}

void core_retry_push(struct core_retry *heap, struct core_task *t)
{
    core_xgrow((void **)&heap->v, &heap->cap, heap->n + 1, sizeof *heap->v);
    retry_set(heap, heap->n++, t);
    retry_up(heap, heap->n - 1);
}

void core_retry_remove(struct core_retry *heap, struct core_task *t)
{
    size_t i = t->heap_index;
    if (i >= heap->n || heap->v[i] != t)
        core_bug();
    struct core_task *last = heap->v[--heap->n];
    if (i == heap->n)
        return;
    retry_set(heap, i, last);
    retry_up(heap, i);
    retry_down(heap, last->heap_index);
}

struct core_task *core_retry_top(const struct core_retry *heap)
{
    return heap->n > 0 ? heap->v[0] : NULL;
}
