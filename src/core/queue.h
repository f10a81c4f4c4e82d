/* core/queue.h — the ordered ready queue and the retry heap (internal to core/). */
#ifndef DROVER_CORE_QUEUE_H
#define DROVER_CORE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/core.h"

struct core_task;

struct core_queue_level {
    int priority;
    struct core_task *head, *tail;
};

/* Ready tasks, in policy order: see queue.c for the structure and why. */
struct core_queue {
    int64_t aging_ms;
    struct core_queue_level *levels; /* sorted by priority, highest first; none empty */
    size_t nlevels, levels_cap;
    size_t n;
    /* The iterator's heap over level heads; one iteration at a time. */
    struct core_task **iter_heap;
    size_t iter_n, iter_cap;
};

void core_queue_init(struct core_queue *queue, int64_t aging_ms);
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
