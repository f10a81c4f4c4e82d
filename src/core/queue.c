/* The ready queue and the retry heap.
 *
 * Order: with aging, by the key priority * aging_ms - ready_time, highest first (one priority
 * point is worth aging_ms of waiting); then priority, ready_time and id. Without aging: priority,
 * then ready_time, then id. The aging key does not depend on the current time, so the order
 * never has to be re-sorted as time passes.
 *
 * Structure: one intrusive FIFO list per distinct priority, merged while iterating by a small
 * heap. Within one priority the key order is ready_time order, and ready times are handed out
 * monotonically, so an insert is an append (O(1)) and a remove an unlink plus a binary search
 * over the levels (O(log levels)). Priority levels are few, so a pass pays O(log levels) per
 * task it looks at, and nothing at all for the tasks it does not reach: a balanced tree would
 * pay O(log n) everywhere and be far more code. An insert that does not sort last (a restore,
 * several tasks queued at one instant) walks back from the tail.
 *
 * Within a level, the tasks of each request shape are also chained (snext/sprev), in the same
 * order. The iterator's heap is over those chains' heads, not the levels': merging sorted
 * chains by one total order gives the same sequence, and a pass that learns a shape cannot
 * start (sched.c) drops the shape's chains from its iteration, so the thousands of tasks of a
 * shape that does not fit cost nothing. Cost: O(log chains) per task handed out. */
#include "core/queue.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

/* Keeps priority * aging_ms within int64 for any int priority (and far beyond any sane value:
 * 2^31 ms is 24 days per point). */
#define QUEUE_MAX_AGING ((int64_t)1 << 31)

/* ---- shapes -------------------------------------------------------------------------------- */

static int queue_bucket(int64_t limit)
{
    if (limit <= 0)
        return limit < 0 ? -1 : 0;
    int b = 1;
    while (limit >>= 1)
        b++;
    return b;
}

static struct core_shape queue_shape_of(const struct core_request *req)
{
    return (struct core_shape){
        .gpus = req->gpus,
        .gpu_mem = req->gpus > 0 ? req->gpu_mem : 0,
        .cpus = req->cpus,
        .mem = req->mem,
        .gpu_types = req->gpu_types,
        .bucket = queue_bucket(req->time_limit),
    };
}

static bool queue_shape_same(const struct core_shape *a, const struct core_shape *b)
{
    return a->gpus == b->gpus && a->gpu_mem == b->gpu_mem && a->cpus == b->cpus &&
           a->mem == b->mem && a->gpu_types == b->gpu_types && a->bucket == b->bucket;
}

static size_t queue_shape_hash(const struct core_shape *s, size_t nslots)
{
    uint64_t h = 1469598103934665603ULL;
    const uint64_t parts[] = {(uint64_t)s->gpus, s->gpu_mem, (uint64_t)s->cpus, s->mem,
                              s->gpu_types, (uint64_t)s->bucket};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = (h ^ parts[i]) * 1099511628211ULL;
    return (size_t)(h ^ h >> 29) & (nslots - 1);
}

/* The slot holding s, or the empty one where it would go. */
static uint32_t *queue_shape_slot(const struct core_shapes *shapes, const struct core_shape *s)
{
    size_t i = queue_shape_hash(s, shapes->nslots);
    while (shapes->slots[i] != 0 && !queue_shape_same(&shapes->v[shapes->slots[i] - 1], s))
        i = (i + 1) & (shapes->nslots - 1);
    return &shapes->slots[i];
}

uint32_t core_shapes_id(struct core_shapes *shapes, const struct core_request *req)
{
    struct core_shape s = queue_shape_of(req);
    if (shapes->nslots < 2 * ((size_t)shapes->n + 1)) {
        size_t nslots = shapes->nslots > 0 ? 2 * shapes->nslots : 64;
        free(shapes->slots);
        shapes->slots = core_xcalloc(nslots, sizeof *shapes->slots);
        shapes->nslots = nslots;
        for (uint32_t i = 0; i < shapes->n; i++)
            *queue_shape_slot(shapes, &shapes->v[i]) = i + 1;
    }
    uint32_t *slot = queue_shape_slot(shapes, &s);
    if (*slot != 0)
        return *slot - 1;
    if (s.bucket > 0) {
        /* Its placement's own record first (which may grow the table and move the slots); an
         * invalid limit (never placed) keeps marks of its own. */
        struct core_request plain = *req;
        plain.time_limit = 0;
        s.fit = core_shapes_id(shapes, &plain);
        slot = queue_shape_slot(shapes, &s);
    } else {
        s.fit = shapes->n;
    }
    if (shapes->n == UINT32_MAX - 1)
        core_bug();
    size_t cap = shapes->cap;
    core_xgrow((void **)&shapes->v, &cap, (size_t)shapes->n + 1, sizeof *shapes->v);
    shapes->cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
    s.min_limit = INT64_MAX;
    shapes->v[shapes->n] = s;
    *slot = shapes->n + 1;
    return shapes->n++;
}

void core_shapes_free(struct core_shapes *shapes)
{
    free(shapes->v);
    free(shapes->slots);
    memset(shapes, 0, sizeof *shapes);
}

/* ---- the ready queue ----------------------------------------------------------------------- */

void core_queue_init(struct core_queue *queue, int64_t aging_ms, struct core_shapes *shapes)
{
    memset(queue, 0, sizeof *queue);
    queue->shapes = shapes;
    if (aging_ms < 0)
        aging_ms = 0;
    queue->aging_ms = aging_ms > QUEUE_MAX_AGING ? QUEUE_MAX_AGING : aging_ms;
}

void core_queue_free(struct core_queue *queue)
{
    for (size_t i = 0; i < queue->nlevels; i++)
        free(queue->levels[i].chains);
    free(queue->levels);
    free(queue->iter_heap);
    memset(queue, 0, sizeof *queue);
}

bool core_queue_before(const struct core_queue *queue, const struct core_task *a,
                       const struct core_task *b)
{
    if (a->qprio != b->qprio && queue->aging_ms > 0) {
        int64_t ka = (int64_t)a->qprio * queue->aging_ms - a->ready_time;
        int64_t kb = (int64_t)b->qprio * queue->aging_ms - b->ready_time;
        if (ka != kb)
            return ka > kb;
    }
    if (a->qprio != b->qprio)
        return a->qprio > b->qprio;
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

/* The chain of shape in level; created if missing when create, else it must exist. */
static struct core_queue_chain *queue_chain(struct core_queue_level *level, uint32_t shape,
                                            bool create)
{
    for (size_t i = 0; i < level->nchains; i++)
        if (level->chains[i].shape == shape)
            return &level->chains[i];
    if (!create)
        core_bug();
    core_xgrow((void **)&level->chains, &level->chains_cap, level->nchains + 1,
               sizeof *level->chains);
    level->chains[level->nchains] = (struct core_queue_chain){.shape = shape};
    return &level->chains[level->nchains++];
}

void core_queue_insert(struct core_queue *queue, struct core_task *t)
{
    if (t->in_queue)
        core_bug();
    struct core_queue_level *level = queue_level(queue, t->qprio);
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
    /* The same within its shape's chain: the req may have changed since it was last queued
     * (a larger claim after running out of memory), so the shape is looked up each time. */
    t->shape = core_shapes_id(queue->shapes, &t->req);
    struct core_queue_chain *chain = queue_chain(level, t->shape, true);
    after = chain->tail;
    while (after != NULL && queue_later(after, t))
        after = after->sprev;
    t->sprev = after;
    t->snext = after != NULL ? after->snext : chain->head;
    if (t->snext != NULL)
        t->snext->sprev = t;
    else
        chain->tail = t;
    if (after != NULL)
        after->snext = t;
    else
        chain->head = t;
    struct core_shape *shape = &queue->shapes->v[t->shape];
    shape->queued++;
    if (t->req.time_limit < shape->min_limit)
        shape->min_limit = t->req.time_limit;
    t->in_queue = true;
    queue->n++;
    queue->shapes->version++;
}

void core_queue_remove(struct core_queue *queue, struct core_task *t)
{
    if (!t->in_queue)
        return;
    bool found;
    size_t i = queue_find(queue, t->qprio, &found);
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
    struct core_queue_chain *chain = queue_chain(level, t->shape, false);
    if (t->sprev != NULL)
        t->sprev->snext = t->snext;
    else
        chain->head = t->snext;
    if (t->snext != NULL)
        t->snext->sprev = t->sprev;
    else
        chain->tail = t->sprev;
    if (chain->head == NULL)
        *chain = level->chains[--level->nchains];
    struct core_shape *shape = &queue->shapes->v[t->shape];
    if (--shape->queued == 0)
        shape->min_limit = INT64_MAX;
    t->qprev = t->qnext = t->sprev = t->snext = NULL;
    t->in_queue = false;
    queue->n--;
    queue->shapes->version++;
    if (level->head == NULL) {
        free(level->chains);
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
    size_t nchains = 0;
    for (size_t i = 0; i < queue->nlevels; i++)
        nchains += queue->levels[i].nchains;
    core_xgrow((void **)&queue->iter_heap, &queue->iter_cap, nchains + 1,
               sizeof *queue->iter_heap);
    queue->iter_n = 0;
    for (size_t i = 0; i < queue->nlevels; i++)
        for (size_t c = 0; c < queue->levels[i].nchains; c++)
            queue->iter_heap[queue->iter_n++] = queue->levels[i].chains[c].head;
    for (size_t i = queue->iter_n / 2; i-- > 0;)
        queue_sift_down(queue, i);
}

struct core_task *core_queue_iter_next_skip(struct core_queue *queue, core_queue_skip_fn *skip,
                                            void *arg)
{
    while (queue->iter_n > 0) {
        struct core_task *t = queue->iter_heap[0];
        bool drop = skip != NULL && skip(arg, t);
        /* Read the successor now: the caller may unlink t before the next call. */
        if (!drop && t->snext != NULL)
            queue->iter_heap[0] = t->snext;
        else
            queue->iter_heap[0] = queue->iter_heap[--queue->iter_n];
        queue_sift_down(queue, 0);
        if (!drop)
            return t;
    }
    return NULL;
}

struct core_task *core_queue_iter_next(struct core_queue *queue)
{
    return core_queue_iter_next_skip(queue, NULL, NULL);
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
