/* core/map.h — an int64 -> pointer hash map (internal to core/).
 *
 * Open addressing with linear probing and backward-shift deletion (no tombstones, so a map
 * that sees millions of inserts and deletes never degrades). Key 0 is reserved for "empty":
 * task ids are > 0 and array ids != 0. */
#ifndef DROVER_CORE_MAP_H
#define DROVER_CORE_MAP_H

#include <stddef.h>
#include <stdint.h>

struct core_map {
    int64_t *keys;
    void **values;
    size_t cap;   /* a power of two, or 0 */
    size_t n;
};

void core_map_free(struct core_map *map);
void *core_map_get(const struct core_map *map, int64_t key);
/* Inserts or replaces. key must not be 0. */
void core_map_put(struct core_map *map, int64_t key, void *value);
/* Removes key if present; returns its value or NULL. */
void *core_map_del(struct core_map *map, int64_t key);
/* Iteration: for (i = 0; i < map->cap; i++) if (map->keys[i]) ... */

#endif
