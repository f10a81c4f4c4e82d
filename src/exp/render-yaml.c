/* exp/render-yaml.c — JSON objects as a multi-document YAML stream, through libyaml's emitter
 * (it escapes; nothing here builds YAML by hand). A string is written plain only when no YAML
 * reader (1.1 or 1.2) could take it for a number, a bool or null: "1", "on" and "" are quoted,
 * so a ConfigMap's values and an env value stay strings. Text with newlines is a literal block. */
#include "exp/render.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* Whether s may be written without quotes: a letter, '/' or '_' first, then only letters,
 * digits and . _ / -, and not one of the words YAML 1.1 reads as a bool or null. */
static bool yaml_plain_ok(const char *s)
{
    static const char *const words[] = {"y", "n", "yes", "no", "on", "off", "true", "false",
                                        "null"};
    if (!(isalpha((unsigned char)*s) || *s == '/' || *s == '_') || (unsigned char)*s >= 0x80)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p >= 0x80 || !(isalnum((unsigned char)*p) || strchr("._/-", *p)))
            return false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasecmp(s, words[i]) == 0)
            return false;
    return true;
}

static int yaml_emit(yaml_emitter_t *em, yaml_event_t *ev)
{
    return yaml_emitter_emit(em, ev) ? 0 : -1;
}

static int yaml_scalar(yaml_emitter_t *em, const char *text, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text),
                                      1, 1, style))
        return -1;
    return yaml_emit(em, &ev);
}

static int yaml_node(yaml_emitter_t *em, const json_t *v)
{
    yaml_event_t ev;
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *child;
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            yaml_emit(em, &ev) < 0)
            return -1;
        json_object_foreach((json_t *)v, key, child)
            if (yaml_scalar(em, key, yaml_plain_ok(key) ? YAML_PLAIN_SCALAR_STYLE
                                                        : YAML_DOUBLE_QUOTED_SCALAR_STYLE) < 0 ||
                yaml_node(em, child) < 0)
                return -1;
        if (!yaml_mapping_end_event_initialize(&ev))
            return -1;
        return yaml_emit(em, &ev);
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *child;
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                  YAML_BLOCK_SEQUENCE_STYLE) ||
            yaml_emit(em, &ev) < 0)
            return -1;
        json_array_foreach(v, i, child)
            if (yaml_node(em, child) < 0)
                return -1;
        if (!yaml_sequence_end_event_initialize(&ev))
            return -1;
        return yaml_emit(em, &ev);
    }
    case JSON_STRING: {
        const char *s = json_string_value(v);
        yaml_scalar_style_t style = yaml_plain_ok(s)      ? YAML_PLAIN_SCALAR_STYLE
                                    : strchr(s, '\n') ? YAML_LITERAL_SCALAR_STYLE
                                                      : YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        return yaml_scalar(em, s, style);
    }
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return yaml_scalar(em, num, YAML_PLAIN_SCALAR_STYLE);
    case JSON_REAL:
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
        return yaml_scalar(em, num, YAML_PLAIN_SCALAR_STYLE);
    case JSON_TRUE:
    case JSON_FALSE:
        return yaml_scalar(em, json_is_true(v) ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
    case JSON_NULL:
    default:
        return yaml_scalar(em, "null", YAML_PLAIN_SCALAR_STYLE);
    }
}

static int yaml_stream(yaml_emitter_t *em, const json_t *objects)
{
    yaml_event_t ev;
    size_t i;
    json_t *object;
    if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) || yaml_emit(em, &ev) < 0)
        return -1;
    json_array_foreach(objects, i, object) {
        if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 0) ||
            yaml_emit(em, &ev) < 0 || yaml_node(em, object) < 0 ||
            !yaml_document_end_event_initialize(&ev, 1) || yaml_emit(em, &ev) < 0)
            return -1;
    }
    if (!yaml_stream_end_event_initialize(&ev) || yaml_emit(em, &ev) < 0)
        return -1;
    return yaml_emitter_flush(em) ? 0 : -1;
}

int render_yaml(const json_t *objects, FILE *fp, char **err)
{
    yaml_emitter_t em;
    if (!yaml_emitter_initialize(&em))
        fatalx("out of memory");
    yaml_emitter_set_output_file(&em, fp);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    int rc = yaml_stream(&em, objects);
    if (rc < 0)
        *err = xasprintf("cannot write YAML: %s", em.problem ? em.problem : "write error");
    yaml_emitter_delete(&em);
    return rc;
}
