/* exp/stages.c — a Pipeline's stages as a graph: names unique, each need an existing stage named
 * once, and no cycle (depth first, the cycle named in the error: "a -> b -> a"). */
#include "exp/template-internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* The stages' names -> their indices (the names were checked to be strings). New reference. */
static json_t *stages_index(const json_t *stages)
{
    json_t *index = json_object();
    size_t i;
    const json_t *stage;
    json_array_foreach(stages, i, stage) {
        const char *name = json_string_value(json_object_get(stage, "name"));
        if (json_object_get(index, name) == NULL)
            json_object_set_new(index, name, json_integer((json_int_t)i));
    }
    return index;
}

static long stages_find(const json_t *index, const char *name)
{
    const json_t *i = json_object_get(index, name);
    return i ? (long)json_integer_value(i) : -1;
}

/* Depth-first along needs; state: 0 unseen, 1 on the trail, 2 done. On a cycle, returns 1 with
 * the cycle as trail[*from .. *to]. */
static int stages_visit(const json_t *stages, const json_t *index, size_t i, unsigned char *state,
                        size_t *trail, size_t depth, size_t *from, size_t *to)
{
    size_t k;
    const json_t *need;
    state[i] = 1;
    trail[depth] = i;
    json_array_foreach(json_object_get(json_array_get(stages, i), "needs"), k, need) {
        size_t j = (size_t)stages_find(index, json_string_value(need));
        if (state[j] == 1) {
            for (*from = 0; trail[*from] != j; (*from)++)
                ;
            *to = depth;
            return 1;
        }
        if (state[j] == 0 && stages_visit(stages, index, j, state, trail, depth + 1, from, to))
            return 1;
    }
    state[i] = 2;
    return 0;
}

static const char *stages_name(const json_t *stages, size_t i)
{
    return json_string_value(json_object_get(json_array_get(stages, i), "name"));
}

/* "cycle in needs: a -> b -> a", at the stage where the cycle was entered. */
static int stages_check_cycles(struct template *t, const json_t *stages, const json_t *index,
                               const char *path)
{
    size_t n = json_array_size(stages), from = 0, to = 0;
    unsigned char *state = xcalloc(n, 1);
    size_t *trail = xcalloc(n, sizeof *trail);
    for (size_t i = 0; i < n; i++) {
        if (state[i] != 0 || !stages_visit(stages, index, i, state, trail, 0, &from, &to))
            continue;
        char *cycle, *stage_path = template_index(path, trail[from]);
        size_t len;
        FILE *fp = template_memstream(&cycle, &len);
        for (size_t k = from; k <= to; k++)
            fprintf(fp, "%s -> ", stages_name(stages, trail[k]));
        fputs(stages_name(stages, trail[from]), fp);
        fclose(fp);
        template_fail(t, stage_path, 0, "cycle in needs: %s", cycle);
        free(cycle);
        free(stage_path);
        break;
    }
    free(state);
    free(trail);
    return t->err ? -1 : 0;
}

/* One stage's needs: each an existing stage, each once (the daemon refuses a request whose
 * needs repeat a task too, exp/request.c). seen[j] == i + 1: stage i already needs stage j. */
static int stages_check_needs(struct template *t, const json_t *stages, const json_t *index,
                              size_t i, const char *stage_path, size_t *seen)
{
    size_t k;
    const json_t *need;
    json_array_foreach(json_object_get(json_array_get(stages, i), "needs"), k, need) {
        const char *name = json_string_value(need);
        long j = stages_find(index, name);
        if (j >= 0 && seen[j] != i + 1) {
            seen[j] = i + 1;
            continue;
        }
        const char *best = NULL;
        size_t best_distance = SIZE_MAX, m;
        json_t *other;
        if (j < 0)
            json_array_foreach(stages, m, other)
                schema_consider(name, stages_name(stages, m), &best, &best_distance);
        char *needs_path = template_join(stage_path, "needs");
        char *need_path = template_index(needs_path, k);
        char *hint = best ? xasprintf("; did you mean '%s'?", best) : xstrdup("");
        if (j < 0)
            template_fail(t, need_path, 0, "needs unknown stage '%s'%s", name, hint);
        else
            template_fail(t, need_path, 0, "needs '%s' more than once", name);
        free(hint);
        free(need_path);
        free(needs_path);
        return -1;
    }
    return 0;
}

int stages_check(struct template *t, const json_t *stages, const char *path)
{
    size_t i, n = json_array_size(stages);
    const json_t *stage;
    json_t *index = stages_index(stages);
    size_t *seen = xcalloc(n, sizeof *seen);
    json_array_foreach(stages, i, stage) {
        const char *name = stages_name(stages, i);
        char *child = template_index(path, i), *name_path = template_join(child, "name");
        if ((size_t)stages_find(index, name) != i)
            template_fail(t, name_path, 0, "duplicate stage name '%s'", name);
        else
            stages_check_needs(t, stages, index, i, child, seen);
        free(name_path);
        free(child);
        if (t->err != NULL)
            break;
    }
    if (t->err == NULL)
        stages_check_cycles(t, stages, index, path);
    free(seen);
    json_decref(index);
    return t->err ? -1 : 0;
}
