#include "core/map.h"

#include <stdlib.h>

#include "core/mem.h"

/* splitmix64's finalizer: ids are sequential (SQLite rowids), which would cluster badly with a
 * plain mask. */
static size_t map_slot(const struct core_map *map, int64_t key)
{
    uint64_t x = (uint64_t)key;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (size_t)x & (map->cap - 1);
}

void core_map_free(struct core_map *map)
{
    free(map->keys);
    free(map->values);
    map->keys = NULL;
    map->values = NULL;
    map->cap = map->n = 0;
}

void *core_map_get(const struct core_map *map, int64_t key)
{
    if (map->cap == 0 || key == 0)
        return NULL;
    for (size_t i = map_slot(map, key);; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == key)
            return map->values[i];
        if (map->keys[i] == 0)
            return NULL;
    }
}

static void map_resize(struct core_map *map, size_t cap)
{
    struct core_map old = *map;
    map->keys = core_xcalloc(cap, sizeof *map->keys);
    map->values = core_xcalloc(cap, sizeof *map->values);
    map->cap = cap;
    map->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i] != 0)
            core_map_put(map, old.keys[i], old.values[i]);
    core_map_free(&old);
}

void core_map_put(struct core_map *map, int64_t key, void *value)
{
    if (key == 0)
        core_bug();
    /* Keep the load under 1/2: linear probing stays short and lookups of absent keys cheap. */
    if ((map->n + 1) * 2 > map->cap)
        map_resize(map, map->cap ? map->cap * 2 : 64);
    size_t i = map_slot(map, key);
    while (map->keys[i] != 0 && map->keys[i] != key)
        i = (i + 1) & (map->cap - 1);
    if (map->keys[i] == 0)
        map->n++;
    map->keys[i] = key;
    map->values[i] = value;
}

void *core_map_del(struct core_map *map, int64_t key)
{
    if (map->cap == 0 || key == 0)
        return NULL;
    size_t mask = map->cap - 1;
    size_t i = map_slot(map, key);
    while (map->keys[i] != key) {
        if (map->keys[i] == 0)
            return NULL;
        i = (i + 1) & mask;
    }
    void *value = map->values[i];
    /* Backward shift: pull later members of the probe run into the hole when their home slot
     * does not lie cyclically in (hole, j]. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; map->keys[j] != 0; j = (j + 1) & mask) {
        size_t home = map_slot(map, map->keys[j]);
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays)
            continue;
        map->keys[hole] = map->keys[j];
        map->values[hole] = map->values[j];
        hole = j;
    }
    map->keys[hole] = 0;
    map->values[hole] = NULL;
    map->n--;
    return value;
}
