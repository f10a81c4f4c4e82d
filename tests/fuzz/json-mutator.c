/* A structure-aware mutator for inputs of JSON lines (json-mutator.h). */
#include "json-mutator.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

#define JM_MAX_LINES 64
#define JM_MAX_SLOTS 1024

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* A place in a document: the node, and where it hangs (parent NULL: the root). */
struct jm_slot {
    json_t *parent;
    const char *key; /* the parent is an object */
    size_t index;    /* the parent is an array */
    json_t *node;
};

struct jm {
    uint32_t state;
    struct jm_slot slot[JM_MAX_SLOTS];
    size_t nslots;
};

/* Keys the daemon's handlers read (daemon/ops*.c, daemon/experiments.c). */
static const char *const jm_keys[] = {
    "v", "op", "ids", "id", "command", "workdir", "env", "name", "key", "profile", "gpus",
    "gpu_mem", "cpus", "mem", "timeout_ms", "stall_ms", "priority", "retries", "backoff",
    "after", "after_any", "array", "index", "limit", "hold", "exclusive", "all", "brief",
    "state", "on", "kind", "spec", "tasks", "needs", "trial", "params", "generator",
    "gpu_type", "parallel", "space", "seed", "stages",
};

static uint32_t jm_rand(struct jm *m, uint32_t n)
{
    uint32_t x = m->state; /* xorshift32: deterministic from libFuzzer's seed */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    m->state = x;
    return n ? x % n : 0;
}

static json_t *jm_edge_value(struct jm *m)
{
    switch (jm_rand(m, 20)) {
    case 0: return json_integer(0);
    case 1: return json_integer(-1);
    case 2: return json_integer(1);
    case 3: return json_integer(2);
    case 4: return json_integer(3);
    case 5: return json_integer(INT32_MAX);
    case 6: return json_integer(INT64_MAX);
    case 7: return json_integer(INT64_MIN);
    case 8: return json_real(1e300);
    case 9: return json_real(0.5);
    case 10: return json_string("");
    case 11: return json_string("a");
    case 12: return json_string("/");
    case 13: return json_string("..");
    case 14: return json_null();
    case 15: return json_true();
    case 16: return json_false();
    case 17: return json_array();
    case 18: return json_object();
    default: return json_integer(1 + jm_rand(m, 8)); /* a task id that may exist */
    }
}

static void jm_collect(struct jm *m, json_t *parent, const char *key, size_t index, json_t *node)
{
    if (m->nslots == JM_MAX_SLOTS)
        return;
    m->slot[m->nslots++] = (struct jm_slot){parent, key, index, node};
    const char *k;
    json_t *v;
    size_t i;
    if (json_is_object(node)) {
        json_object_foreach(node, k, v)
            jm_collect(m, node, k, 0, v);
    } else if (json_is_array(node)) {
        json_array_foreach(node, i, v)
            jm_collect(m, node, NULL, i, v);
    }
}

/* Puts value (stolen) where slot s is. */
static void jm_set(json_t *root, const struct jm_slot *s, json_t *value)
{
    if (s->parent == NULL)
        json_decref(value); /* the root itself is not replaced */
    else if (json_is_object(s->parent))
        json_object_set_new(s->parent, s->key, value);
    else
        json_array_set_new(s->parent, s->index, value);
}

/* A random slot whose node is of kind (JSON_ARRAY, JSON_OBJECT), or -1. */
static long jm_pick_kind(struct jm *m, json_type kind)
{
    long found = -1;
    uint32_t seen = 0;
    for (size_t i = 0; i < m->nslots; i++)
        if (json_typeof(m->slot[i].node) == kind && jm_rand(m, ++seen) == 0)
            found = (long)i; /* reservoir sampling: each with the same chance */
    return found;
}

/* One change to doc. Returns false if none applied. */
static bool jm_mutate_doc(struct jm *m, json_t *doc)
{
    m->nslots = 0;
    jm_collect(m, NULL, NULL, 0, doc);
    const struct jm_slot *s = &m->slot[jm_rand(m, (uint32_t)m->nslots)];
    long a;
    switch (jm_rand(m, 6)) {
    case 0: /* repeat an element of an array 1, 2, 4 or 8 times, at random places in it */
        a = jm_pick_kind(m, JSON_ARRAY);
        if (a < 0 || json_array_size(m->slot[a].node) == 0)
            return false;
        json_t *arr = m->slot[a].node, *elem = json_array_get(arr, jm_rand(m, (uint32_t)json_array_size(arr)));
        json_incref(elem);
        for (uint32_t k = 1u << jm_rand(m, 4); k > 0; k--)
            json_array_insert_new(arr, jm_rand(m, (uint32_t)json_array_size(arr) + 1),
                                  json_deep_copy(elem));
        json_decref(elem);
        return true;
    case 1: /* drop a node */
        if (s->parent == NULL)
            return false;
        return json_is_object(s->parent) ? json_object_del(s->parent, s->key) == 0
                                         : json_array_remove(s->parent, s->index) == 0;
    case 2: /* a copy of another node of the same document */
        jm_set(doc, s, json_deep_copy(m->slot[jm_rand(m, (uint32_t)m->nslots)].node));
        return s->parent != NULL;
    case 3: /* an edge value */
        jm_set(doc, s, jm_edge_value(m));
        return s->parent != NULL;
    default: /* a key the handlers read, on some object */
        a = jm_pick_kind(m, JSON_OBJECT);
        if (a < 0)
            return false;
        const char *key = jm_keys[jm_rand(m, sizeof jm_keys / sizeof jm_keys[0])];
        json_t *value = jm_rand(m, 2) ? jm_edge_value(m)
                                      : json_deep_copy(m->slot[jm_rand(m, (uint32_t)m->nslots)].node);
        return json_object_set_new(m->slot[a].node, key, value) == 0;
    }
}

/* Writes lines[order[0..n)] joined by newlines into data; returns the size, or 0 if it does not
 * fit. */
static size_t jm_join(uint8_t *data, size_t max_size, char **line, size_t *len, const size_t *order,
                      size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += len[order[i]] + 1;
    if (total == 0 || total > max_size)
        return 0;
    uint8_t *out = xmalloc(total), *p = out;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, line[order[i]], len[order[i]]);
        p += len[order[i]];
        *p++ = '\n';
    }
    memcpy(data, out, total);
    free(out);
    return total;
}

size_t json_mutate(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
    struct jm *m = xcalloc(1, sizeof *m);
    char *copy = xmalloc(size + 1), *line[JM_MAX_LINES + 1];
    size_t len[JM_MAX_LINES + 1], order[JM_MAX_LINES + 1], n = 0, start = 0, out = 0;
    json_t *doc[JM_MAX_LINES] = {NULL};
    size_t ndocs = 0, docline[JM_MAX_LINES];
    m->state = seed | 1;
    memcpy(copy, data, size);
    for (size_t i = 0; i <= size && n < JM_MAX_LINES; i++) {
        if (i == size || copy[i] == '\n') {
            if (i > start || i < size) {
                line[n] = copy + start;
                len[n] = i - start;
                order[n] = n;
                n++;
            }
            start = i + 1;
        }
    }
    if (jm_rand(m, 2) == 0)
        goto fallback;
    for (size_t i = 0; i < n; i++) {
        json_t *j = json_loadb(line[i], len[i], 0, NULL);
        if (json_is_object(j) || json_is_array(j)) {
            docline[ndocs] = i;
            doc[ndocs++] = j;
        } else {
            json_decref(j);
        }
    }
    if (ndocs == 0)
        goto fallback;
    if (jm_rand(m, 8) == 0 && n > 0) { /* whole requests: duplicate, drop or swap one */
        size_t a = jm_rand(m, (uint32_t)n), b = jm_rand(m, (uint32_t)n), k = jm_rand(m, 3);
        if (k == 0 && n < JM_MAX_LINES) {
            memmove(order + b + 1, order + b, (n - b) * sizeof *order);
            order[b] = a;
            n++;
        } else if (k == 1 && n > 1) {
            memmove(order + a, order + a + 1, (n - a - 1) * sizeof *order);
            n--;
        } else {
            size_t t = order[a];
            order[a] = order[b];
            order[b] = t;
        }
        out = jm_join(data, max_size, line, len, order, n);
    } else {
        size_t d = jm_rand(m, (uint32_t)ndocs);
        if (jm_mutate_doc(m, doc[d])) {
            char *text = json_dumps(doc[d], JSON_COMPACT);
            if (text != NULL) {
                line[docline[d]] = text; /* freed below through doc's index */
                len[docline[d]] = strlen(text);
                out = jm_join(data, max_size, line, len, order, n);
                free(text);
            }
        }
    }
    for (size_t i = 0; i < ndocs; i++)
        json_decref(doc[i]);
    if (out > 0) {
        free(copy);
        free(m);
        return out;
    }
fallback:
    free(copy);
    free(m);
    return LLVMFuzzerMutate(data, size, max_size);
}
