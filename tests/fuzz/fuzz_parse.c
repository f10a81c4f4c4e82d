/* fuzz_parse — util/parse.c (sizes, durations, whole numbers, id lists, backoff lists, array
 * specs, UTF-8), util/when.c (--begin's TIME, the off-peak window) and the protocol's frame
 * reader (util/proto.c).
 *
 * The input, up to its first NUL, is given to every parser in turn (they are cheap, and one
 * corpus then serves them all); the whole input, NULs included, is a stream of frames for
 * proto_recv. Beyond the sanitizers, each parser's contract is checked on what it accepts:
 * sizes and durations survive their formatters' units, ids are positive, an array spec is sorted,
 * unique and within its bound, utf8_check agrees with jansson, which it claims to mirror, a
 * clock time is the next one within a day, and a window contains its opening and ends after now,
 * within a day and an hour of it (DST).
 */
#include "fuzz.h"
#include "util/parse.h"
#include "util/proto.h"
#include "util/when.h"

#include <jansson.h>
#include <limits.h>

#define FUZZ_MAX_ARRAY 100000 /* what drover submit --array allows */
#define FUZZ_MAX_BACKOFF 8

static struct fuzz_file frames;

static void fuzz_fail(const char *what, const char *input)
{
    fprintf(stderr, "fuzz_parse: %s (input \"%s\")\n", what, input);
    abort();
}

static void fuzz_numbers(const char *s)
{
    const char *err;
    uint64_t bytes;
    int64_t ms;
    long long v;
    char buf[64];
    if (parse_size(s, &bytes, &err) == 0)
        format_size(bytes, buf, sizeof buf);
    if (parse_duration(s, &ms, &err) == 0) {
        if (ms <= 0)
            fuzz_fail("parse_duration accepted a duration that is not > 0", s);
        format_duration(ms, buf, sizeof buf);
    }
    if (parse_int(s, LLONG_MIN, LLONG_MAX, &v, &err) == 0 &&
        parse_int(s, 0, 100, &v, &err) == 0 && (v < 0 || v > 100))
        fuzz_fail("parse_int returned a number out of its range", s);
}

static void fuzz_lists(const char *s)
{
    const char *err;
    int64_t *ids = NULL, backoff[FUZZ_MAX_BACKOFF];
    size_t n = 0;
    int nb = 0;
    if (parse_id_list(s, &ids, &n, &err) == 0) {
        if (n == 0)
            fuzz_fail("parse_id_list accepted no id", s);
        for (size_t i = 0; i < n; i++)
            if (ids[i] <= 0)
                fuzz_fail("parse_id_list returned an id that is not positive", s);
        free(ids);
    }
    if (parse_backoff(s, backoff, FUZZ_MAX_BACKOFF, &nb, &err) == 0) {
        if (nb < 1 || nb > FUZZ_MAX_BACKOFF)
            fuzz_fail("parse_backoff returned a bad count", s);
        for (int i = 0; i < nb; i++)
            if (backoff[i] < 0)
                fuzz_fail("parse_backoff returned a negative delay", s);
    }
    struct array_spec spec;
    if (parse_array_spec(s, FUZZ_MAX_ARRAY, &spec, &err) == 0) {
        if (spec.count == 0 || spec.count > FUZZ_MAX_ARRAY || spec.limit < 0)
            fuzz_fail("parse_array_spec returned a bad count or limit", s);
        for (size_t i = 0; i < spec.count; i++)
            if (spec.index[i] < 0 || (i > 0 && spec.index[i] <= spec.index[i - 1]))
                fuzz_fail("parse_array_spec: indices not sorted, unique and >= 0", s);
        array_spec_free(&spec);
    }
}

/* when.c with a fixed now (2026-12-01T12:00:00Z) in the process's time zone. */
static void fuzz_when(const char *s)
{
    struct when_clock clock = when_clock_system();
    clock.now_ms = 1796126400000LL;
    const char *err;
    int64_t ms, open, close;
    int start, end;
    if (when_parse(s, &clock, &ms, &err) == 0 && s[0] >= '0' && s[0] <= '9' && strlen(s) <= 8 &&
        (ms < clock.now_ms - 1000 || ms > clock.now_ms + 26 * 3600000LL))
        fuzz_fail("when_parse: HH:MM[:SS] is not the next such time", s);
    if (when_window_parse(s, &start, &end, &err) == 0) {
        if (start < 0 || start >= 86400 || end < 0 || end >= 86400 || start == end)
            fuzz_fail("when_window_parse returned a bad window", s);
        if (when_window_next(start, end, &clock, &open, &close) == 0 &&
            (close <= clock.now_ms || close <= open || close - open > 25 * 3600000LL))
            fuzz_fail("when_window_next returned a bad window", s);
    }
}

/* utf8_check says it refuses what jansson refuses: json_string() validates UTF-8 too. */
static void fuzz_utf8(const char *s)
{
    size_t bad = utf8_check(s);
    json_t *j = json_string(s);
    if ((bad == 0) != (j != NULL))
        fuzz_fail(bad == 0 ? "utf8_check accepts what jansson refuses"
                           : "utf8_check refuses what jansson accepts", s);
    if (bad > strlen(s))
        fuzz_fail("utf8_check points past the end", s);
    json_decref(j);
}

/* The whole input as a stream of frames, read as the CLI reads the daemon's replies. */
static void fuzz_frames(const uint8_t *data, size_t size)
{
    fuzz_file_set(&frames, data, size);
    if (lseek(frames.fd, 0, SEEK_SET) < 0)
        fatalx("fuzz_parse: lseek");
    for (int i = 0; i < 8; i++) {
        json_t *msg = NULL;
        if (proto_recv(frames.fd, &msg, PROTO_MAX_REQUEST) < 0)
            break;
        json_decref(msg);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_file_open(&frames, "frames");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, fuzz_first_len(data, size));
    fuzz_numbers(s);
    fuzz_lists(s);
    fuzz_when(s);
    fuzz_utf8(s);
    free(s);
    fuzz_frames(data, size);
    return 0;
}
