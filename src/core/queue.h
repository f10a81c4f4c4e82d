/* core/queue.h — the ordered ready queue and the retry heap (internal to core/). */
#ifndef DROVER_CORE_QUEUE_H
#define DROVER_CORE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

struct core_task;
struct core_request;

/* A request shape: what placement depends on, and the task's time limit to a power of two
 * (backfill may admit a task by its limit). Interned by core_shapes_id(): every queue of one
 * core shares one table, so that a pass can mark a shape once and skip its tasks in every
 * queue. The marks are sched.c's, and are kept on the placement's own record (fit: the record
 * of the same placement without a limit). A table only grows: shapes are few. */
struct core_shape {
    int gpus;
    uint64_t gpu_mem;         /* 0 when gpus == 0 */
    int cpus;                 /* as given (core_place_cpus counts it) */
    uint64_t mem;
    uint64_t gpu_types;
    int bucket;               /* time limit: 0 none, -1 invalid, b > 0: [2^(b-1), 2^b) ms */
    uint32_t fit;             /* the id of the same placement with bucket 0 (itself if < 1) */
    uint32_t no_fit_pass;     /* the pass (stamp) in which it did not fit now */
    uint32_t no_room_pass;    /* ... fit now, but not beside the head's reservation */
    uint64_t no_fit_epoch;    /* place epoch + 1 at which it did not fit (0: unknown) */
    /* Queued tasks of this record, and a lower bound of their time limits: the least limit
     * queued since the count was last 0 (INT64_MAX when none). */
    size_t queued;
    int64_t min_limit;
};

struct core_shapes {
    struct core_shape *v;
    uint32_t n, cap;
    uint32_t *slots;          /* open addressing by hash: id + 1, or 0 for empty */
    size_t nslots;            /* a power of two, at least twice n */
    /* Bumped by every queue insert and removal: core's "something changed" (sched.c). */
    uint64_t version;
};

/* The id of req's shape, interned (a hash lookup). */
uint32_t core_shapes_id(struct core_shapes *shapes, const struct core_request *req);
void core_shapes_free(struct core_shapes *shapes);

/* The tasks of one shape within a priority level, in the level's order (linked by snext). */
struct core_queue_chain {
    uint32_t shape;
    struct core_task *head, *tail;
};

struct core_queue_level {
    int priority;
    struct core_task *head, *tail;
    struct core_queue_chain *chains; /* one per shape present; unordered, few */
    size_t nchains, chains_cap;
};

/* Ready tasks, in policy order: see queue.c for the structure and why. */
struct core_queue {
    int64_t aging_ms;
    struct core_shapes *shapes;      /* shared, not owned */
    struct core_queue_level *levels; /* sorted by priority, highest first; none empty */
    size_t nlevels, levels_cap;
    size_t n;
    /* The iterator's heap over chain heads; one iteration at a time. */
    struct core_task **iter_heap;
    size_t iter_n, iter_cap;
};

void core_queue_init(struct core_queue *queue, int64_t aging_ms, struct core_shapes *shapes);
void core_queue_free(struct core_queue *queue);
/* Inserts t by (its priority, t->ready_time, t->id). O(1) when t sorts after the tail of its
 * priority level, which holds whenever ready times are handed out monotonically. */
void core_queue_insert(struct core_queue *queue, struct core_task *t);
/* Removes t if it is in the queue. O(log levels). */
void core_queue_remove(struct core_queue *queue, struct core_task *t);
/* Whether a comes before b in policy order. */
bool core_queue_before(const struct core_queue *queue, const struct core_task *a,
                       const struct core_task *b);

/* In-order iteration. The caller may remove the task last returned (and only that one). */
void core_queue_iter_start(struct core_queue *queue);
struct core_task *core_queue_iter_next(struct core_queue *queue);
/* The same, but a task for which skip(arg, task) is true is not returned, and neither is any
 * later task of its shape and priority (its whole chain is dropped from this iteration): a
 * shape skipped costs O(log chains) once, not once per task. skip may be NULL. */
typedef bool core_queue_skip_fn(void *arg, const struct core_task *t);
struct core_task *core_queue_iter_next_skip(struct core_queue *queue, core_queue_skip_fn *skip,
                                            void *arg);

/* RETRYING tasks by (retry_at, id): a binary min-heap with each task's index kept in the task,
 * so a cancel or hold removes it in O(log n). */
struct core_retry {
    struct core_task **v;
    size_t n, cap;
};

void core_retry_free(struct core_retry *heap);
void core_retry_push(struct core_retry *heap, struct core_task *t);
void core_retry_remove(struct core_retry *heap, struct core_task *t);
/* The task due first, or NULL. */
struct core_task *core_retry_top(const struct core_retry *heap);

#endif
