/* exp/yaml.c — YAML into a jansson tree for exp/template.c, remembering where every node was so
 * that each later error can name FILE:LINE:COLUMN. libyaml's event API drives a recursive builder;
 * its document API would keep positions too, but it resolves aliases silently, and we reject them.
 *
 * What this reader accepts is deliberately a subset: one document, no anchors or aliases, no
 * tags other than the standard str/map/seq ones, scalar keys, no duplicate keys. Plain scalars
 * resolve as in YAML 1.2's core schema (null/~, true/false, ints incl. 0x/0o, floats incl. 1e-3);
 * quoted and block scalars are always strings. The yes/no/on/off booleans of YAML 1.1 are not
 * recognised: `country: no` stays a string. */
#include "exp/template-internal.h" /* exp_yaml_read, exp_yaml_scalar: no exp/yaml.h */
#include "util/parse.h"
#include "util/xalloc.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* Deeper than any template needs; keeps a hostile file from exhausting the stack. */
#define YAML_MAX_DEPTH 64

struct yaml_reader {
    yaml_parser_t parser;
    const char *file;  /* NULL for a --set value: errors then carry no position */
    json_t *where;     /* path -> "FILE:L:C" of the node, or NULL */
    json_t *where_keys; /* path -> "FILE:L:C" of the key that names the node, or NULL */
    char *err;
    /* Looking for the node at a position (where a file is not UTF-8): */
    bool probing;
    yaml_mark_t probe;
    char *probe_path;  /* the scalar there (malloc'd), or NULL */
    bool probe_key;    /* it is a key (probe_path names its mapping) */
};

static char *yaml_location(const struct yaml_reader *reader, yaml_mark_t mark)
{
    return xasprintf("%s:%zu:%zu", reader->file, mark.line + 1, mark.column + 1);
}

/* Records the first error only; always returns -1. */
static int yaml_fail(struct yaml_reader *reader, yaml_mark_t mark, const char *fmt, ...)
{
    if (reader->err != NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    if (reader->file != NULL) {
        char *loc = yaml_location(reader, mark);
        reader->err = xasprintf("%s: %s", loc, msg);
        free(loc);
        free(msg);
    } else {
        reader->err = msg;
    }
    return -1;
}

static int yaml_next(struct yaml_reader *reader, yaml_event_t *event)
{
    yaml_parser_t *parser = &reader->parser;
    if (yaml_parser_parse(parser, event))
        return 0;
    /* A reader error (bad encoding) has no problem_mark; the parser's own mark is close. */
    yaml_mark_t mark = parser->error == YAML_READER_ERROR ? parser->mark : parser->problem_mark;
    const char *problem = parser->problem != NULL ? parser->problem : "cannot parse";
    if (parser->context != NULL)
        return yaml_fail(reader, mark, "YAML syntax error: %s (%s at line %zu)", problem,
                         parser->context, parser->context_mark.line + 1);
    return yaml_fail(reader, mark, "YAML syntax error: %s", problem);
}

static void yaml_remember(json_t *map, const struct yaml_reader *reader, const char *path,
                          yaml_mark_t mark)
{
    if (map == NULL)
        return;
    char *location = yaml_location(reader, mark);
    json_object_set_new(map, path, json_string(location));
    free(location);
}

/* Whether the probed position lies in [start, end). */
static bool yaml_probe_in(const struct yaml_reader *reader, yaml_mark_t start, yaml_mark_t end)
{
    const yaml_mark_t *p = &reader->probe;
    bool after_start = p->line > start.line || (p->line == start.line && p->column >= start.column);
    bool before_end = p->line < end.line || (p->line == end.line && p->column < end.column);
    return reader->probing && reader->probe_path == NULL && after_start && before_end;
}

static bool yaml_all(const char *s, const char *set)
{
    return *s != '\0' && s[strspn(s, set)] == '\0';
}

/* A plain scalar by the core schema; anything that is not null, bool or a finite number is a
 * string. */
static json_t *yaml_plain(const char *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    static const char *const trues[] = {"true", "True", "TRUE"};
    static const char *const falses[] = {"false", "False", "FALSE"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp(s, nulls[i]) == 0)
            return json_null();
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(s, trues[i]) == 0)
            return json_true();
        if (strcmp(s, falses[i]) == 0)
            return json_false();
    }
    const char *digits = s + (*s == '-' || *s == '+');
    char *end;
    errno = 0;
    if (yaml_all(digits, "0123456789")) {
        long long v = strtoll(s, &end, 10);
        if (errno == 0)
            return json_integer(v);
    } else if (strncmp(s, "0x", 2) == 0 && yaml_all(s + 2, "0123456789abcdefABCDEF")) {
        long long v = strtoll(s + 2, &end, 16);
        if (errno == 0)
            return json_integer(v);
        return json_string(s);
    } else if (strncmp(s, "0o", 2) == 0 && yaml_all(s + 2, "01234567")) {
        long long v = strtoll(s + 2, &end, 8);
        if (errno == 0)
            return json_integer(v);
        return json_string(s);
    }
    /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, or an int too large for int64. */
    const char *p = digits;
    size_t whole = strspn(p, "0123456789");
    p += whole;
    size_t fraction = 0;
    if (*p == '.') {
        p++;
        fraction = strspn(p, "0123456789");
        p += fraction;
    }
    if (whole == 0 && fraction == 0)
        return json_string(s);
    if (*p == 'e' || *p == 'E') {
        p++;
        p += (*p == '-' || *p == '+');
        size_t exponent = strspn(p, "0123456789");
        if (exponent == 0)
            return json_string(s);
        p += exponent;
    }
    if (*p != '\0')
        return json_string(s);
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v))
        return json_string(s); /* 1e999: a number we cannot hold is kept as the user wrote it */
    return json_real(v);
}

static json_t *yaml_node(struct yaml_reader *reader, yaml_event_t *event, const char *path,
                         int depth);

static json_t *yaml_scalar(struct yaml_reader *reader, const yaml_event_t *event)
{
    const char *value = (const char *)event->data.scalar.value;
    const char *tag = (const char *)event->data.scalar.tag;
    if (strlen(value) != event->data.scalar.length) {
        yaml_fail(reader, event->start_mark, "NUL characters are not supported in strings");
        return NULL;
    }
    bool as_string = event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    if (tag != NULL) {
        if (strcmp(tag, YAML_STR_TAG) != 0 && strcmp(tag, "!") != 0) {
            yaml_fail(reader, event->start_mark, "tags are not supported (%s)", tag);
            return NULL;
        }
        as_string = true;
    }
    return as_string ? json_string(value) : yaml_plain(value);
}

/* The children of a mapping, up to its end event. Keys are scalars, and are kept as written. */
static int yaml_mapping(struct yaml_reader *reader, json_t *object, const char *path, int depth)
{
    for (;;) {
        yaml_event_t key;
        if (yaml_next(reader, &key) < 0)
            return -1;
        if (key.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&key);
            return 0;
        }
        if (key.type != YAML_SCALAR_EVENT) {
            yaml_fail(reader, key.start_mark,
                      key.type == YAML_ALIAS_EVENT ? "aliases are not supported"
                                                   : "keys must be scalars");
            yaml_event_delete(&key);
            return -1;
        }
        if (key.data.scalar.anchor != NULL || key.data.scalar.tag != NULL) {
            yaml_fail(reader, key.start_mark, key.data.scalar.anchor != NULL
                                                  ? "anchors and aliases are not supported"
                                                  : "tags are not supported on keys");
            yaml_event_delete(&key);
            return -1;
        }
        const char *name = (const char *)key.data.scalar.value;
        if (strlen(name) != key.data.scalar.length) {
            yaml_fail(reader, key.start_mark, "NUL characters are not supported in keys");
            yaml_event_delete(&key);
            return -1;
        }
        if (json_object_get(object, name) != NULL) {
            yaml_fail(reader, key.start_mark, "duplicate key '%s'", name);
            yaml_event_delete(&key);
            return -1;
        }
        char *child_path = *path ? xasprintf("%s.%s", path, name) : xstrdup(name);
        yaml_remember(reader->where_keys, reader, child_path, key.start_mark);
        if (yaml_probe_in(reader, key.start_mark, key.end_mark)) {
            reader->probe_path = xstrdup(path);
            reader->probe_key = true;
        }
        yaml_event_t value_event;
        json_t *value = NULL;
        if (yaml_next(reader, &value_event) == 0)
            value = yaml_node(reader, &value_event, child_path, depth + 1);
        free(child_path);
        if (value == NULL) {
            yaml_event_delete(&key);
            return -1;
        }
        json_object_set_new(object, name, value);
        yaml_event_delete(&key);
    }
}

static int yaml_sequence(struct yaml_reader *reader, json_t *array, const char *path, int depth)
{
    for (;;) {
        yaml_event_t item;
        if (yaml_next(reader, &item) < 0)
            return -1;
        if (item.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&item);
            return 0;
        }
        char *child_path = xasprintf("%s[%zu]", path, json_array_size(array));
        json_t *value = yaml_node(reader, &item, child_path, depth + 1);
        free(child_path);
        if (value == NULL)
            return -1;
        json_array_append_new(array, value);
    }
}

/* Builds the node that starts with event (which it consumes) and everything below it. */
static json_t *yaml_node(struct yaml_reader *reader, yaml_event_t *event, const char *path,
                         int depth)
{
    json_t *node = NULL;
    const char *anchor = NULL, *tag = NULL;
    if (depth > YAML_MAX_DEPTH) {
        yaml_fail(reader, event->start_mark, "nested more than %d levels deep", YAML_MAX_DEPTH);
        goto fail;
    }
    switch (event->type) {
    case YAML_ALIAS_EVENT:
        yaml_fail(reader, event->start_mark, "aliases are not supported (*%s)",
                  (const char *)event->data.alias.anchor);
        goto fail;
    case YAML_SCALAR_EVENT:
        anchor = (const char *)event->data.scalar.anchor;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = (const char *)event->data.sequence_start.anchor;
        tag = (const char *)event->data.sequence_start.tag;
        if (tag != NULL && strcmp(tag, YAML_SEQ_TAG) == 0)
            tag = NULL;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = (const char *)event->data.mapping_start.anchor;
        tag = (const char *)event->data.mapping_start.tag;
        if (tag != NULL && strcmp(tag, YAML_MAP_TAG) == 0)
            tag = NULL;
        break;
    default:
        fatalx("yaml: unexpected event %d", (int)event->type);
    }
    if (anchor != NULL) {
        yaml_fail(reader, event->start_mark,
                  "anchors and aliases are not supported (&%s): repeat the value instead",
                  anchor);
        goto fail;
    }
    if (tag != NULL) {
        yaml_fail(reader, event->start_mark, "tags are not supported (%s)", tag);
        goto fail;
    }
    yaml_remember(reader->where, reader, path, event->start_mark);
    if (event->type == YAML_SCALAR_EVENT) {
        if (yaml_probe_in(reader, event->start_mark, event->end_mark))
            reader->probe_path = xstrdup(path);
        node = yaml_scalar(reader, event);
    } else if (event->type == YAML_SEQUENCE_START_EVENT) {
        node = json_array();
        if (yaml_sequence(reader, node, path, depth) < 0)
            goto fail;
    } else {
        node = json_object();
        if (yaml_mapping(reader, node, path, depth) < 0)
            goto fail;
    }
    yaml_event_delete(event);
    return node;
fail:
    json_decref(node);
    yaml_event_delete(event);
    return NULL;
}

/* Reads the stream's one document; *out is NULL (and no error) when the stream is empty. */
static int yaml_document(struct yaml_reader *reader, json_t **out)
{
    yaml_event_t event;
    *out = NULL;
    if (yaml_next(reader, &event) < 0)
        return -1;
    yaml_event_delete(&event); /* STREAM-START */
    if (yaml_next(reader, &event) < 0)
        return -1;
    if (event.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&event);
        return 0;
    }
    yaml_event_delete(&event); /* DOCUMENT-START */
    if (yaml_next(reader, &event) < 0)
        return -1;
    json_t *root = yaml_node(reader, &event, "", 0);
    if (root == NULL)
        return -1;
    if (yaml_next(reader, &event) < 0) /* DOCUMENT-END */
        goto fail;
    yaml_event_delete(&event);
    if (yaml_next(reader, &event) < 0)
        goto fail;
    if (event.type != YAML_STREAM_END_EVENT) {
        yaml_fail(reader, event.start_mark, "only one YAML document is allowed per file");
        yaml_event_delete(&event);
        goto fail;
    }
    yaml_event_delete(&event);
    *out = root;
    return 0;
fail:
    json_decref(root);
    return -1;
}

/* The whole of fp (malloc'd, NUL-terminated; *len bytes), or NULL with errno. */
static char *yaml_slurp(FILE *fp, size_t *len)
{
    size_t cap = 65536, n = 0, got;
    char *buf = xmalloc(cap + 1);
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap)
            buf = xrealloc(buf, (cap *= 2) + 1);
    }
    if (ferror(fp)) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The first byte of text that is not UTF-8, as libyaml counts positions (line and column in
 * characters, from 0); 0 if every byte up to the first NUL is UTF-8, else its offset + 1.
 * libyaml refuses such a file too, but only as "invalid leading UTF-8 octet" at 1:1 (its reader
 * runs ahead of its parser). */
static size_t yaml_bad_utf8(const char *text, yaml_mark_t *at)
{
    size_t bad = utf8_check(text);
    if (bad == 0)
        return 0;
    memset(at, 0, sizeof *at);
    for (size_t i = 0; i + 1 < bad; i++) {
        if (text[i] == '\n') {
            at->line++;
            at->column = 0;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            at->column++;
        }
    }
    return bad;
}

/* A file that is not UTF-8: "FILE:L:C: spec.env.A: not valid UTF-8 (byte 0xff)", the field
 * found by parsing a copy whose bad bytes are '?'. */
static void yaml_fail_utf8(struct yaml_reader *reader, char *text, size_t len, size_t bad,
                           yaml_mark_t at)
{
    unsigned char byte = (unsigned char)text[bad - 1];
    struct yaml_reader probe = {.file = reader->file, .probing = true, .probe = at};
    yaml_mark_t ignored;
    size_t more;
    text[bad - 1] = '?';
    while ((more = yaml_bad_utf8(text, &ignored)) > 0)
        text[more - 1] = '?';
    if (!yaml_parser_initialize(&probe.parser))
        fatalx("out of memory");
    yaml_parser_set_input_string(&probe.parser, (const unsigned char *)text, len);
    json_t *root = NULL;
    yaml_document(&probe, &root);
    json_decref(root);
    yaml_parser_delete(&probe.parser);
    free(probe.err);
    if (probe.probe_path == NULL)
        yaml_fail(reader, at, "not valid UTF-8 (byte 0x%02x)", byte);
    else if (probe.probe_key)
        yaml_fail(reader, at, "a key %s%s is not valid UTF-8 (byte 0x%02x)",
                  *probe.probe_path ? "in " : "at the top level", probe.probe_path, byte);
    else
        yaml_fail(reader, at, "%s: not valid UTF-8 (byte 0x%02x)",
                  *probe.probe_path ? probe.probe_path : "the document", byte);
    free(probe.probe_path);
}

/* Reads file into *out. where and where_keys (objects, may be NULL) receive, for every node, its
 * dotted path ("spec.command[2]", the root is "") mapped to "FILE:LINE:COLUMN". Returns 0, or -1
 * with *err (malloc'd, one line, located). A file that is not UTF-8 is refused where it is not,
 * naming the field: nothing of it is dropped or replaced. */
int exp_yaml_read(const char *file, json_t **out, json_t *where, json_t *where_keys, char **err)
{
    FILE *fp = fopen(file, "rb");
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    *out = NULL;
    if (fp == NULL || fstat(fileno(fp), &st) < 0) {
        *err = xasprintf("%s: %s", file, strerror(errno));
        if (fp != NULL)
            fclose(fp);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) { /* fopen() opens one; libyaml would only say "input error" */
        *err = xasprintf("%s: is a directory", file);
        fclose(fp);
        return -1;
    }
    text = yaml_slurp(fp, &len);
    if (text == NULL) {
        *err = xasprintf("%s: %s", file, strerror(errno));
        fclose(fp);
        return -1;
    }
    fclose(fp);
    int rc = exp_yaml_read_text(file, text, len, out, where, where_keys, err);
    free(text);
    return rc;
}

int exp_yaml_read_text(const char *file, const char *text, size_t len, json_t **out,
                       json_t *where, json_t *where_keys, char **err)
{
    struct yaml_reader reader = {.file = file, .where = where, .where_keys = where_keys};
    json_t *root = NULL;
    size_t bad;
    yaml_mark_t at;
    *out = NULL;
    if (!yaml_parser_initialize(&reader.parser))
        fatalx("out of memory");
    if ((bad = yaml_bad_utf8(text, &at)) > 0) {
        char *copy = xmalloc(len + 1); /* yaml_fail_utf8 marks the bad bytes in it */
        memcpy(copy, text, len + 1);
        yaml_fail_utf8(&reader, copy, len, bad, at);
        free(copy);
        goto fail;
    }
    yaml_parser_set_input_string(&reader.parser, (const unsigned char *)text, len);
    if (yaml_document(&reader, &root) < 0)
        goto fail;
    if (root == NULL) {
        yaml_mark_t start = {0, 0, 0};
        yaml_fail(&reader, start, "the file is empty");
        goto fail;
    }
    yaml_parser_delete(&reader.parser);
    *out = root;
    return 0;
fail:
    yaml_parser_delete(&reader.parser);
    *err = reader.err;
    return -1;
}

/* Reads text (a --set value) as one YAML scalar: "0.01" is a number, "true" a bool, "'7'" a
 * string; an empty text is the empty string. Returns 0, or -1 with *err (malloc'd, unlocated). */
int exp_yaml_scalar(const char *text, json_t **out, char **err)
{
    struct yaml_reader reader = {.file = NULL};
    json_t *value = NULL;
    *out = NULL;
    if (!yaml_parser_initialize(&reader.parser))
        fatalx("out of memory");
    yaml_parser_set_input_string(&reader.parser, (const unsigned char *)text, strlen(text));
    if (yaml_document(&reader, &value) < 0)
        goto fail;
    if (value == NULL)
        value = json_string("");
    if (json_is_object(value) || json_is_array(value)) {
        yaml_mark_t start = {0, 0, 0};
        yaml_fail(&reader, start, "expected a single value, not a %s",
                  json_is_object(value) ? "mapping" : "list");
        goto fail;
    }
    yaml_parser_delete(&reader.parser);
    *out = value;
    return 0;
fail:
    json_decref(value);
    yaml_parser_delete(&reader.parser);
    *err = reader.err;
    return -1;
}
