/* The HTTP API's routes (daemon/api.c) against its OpenAPI document (docs/openapi.json, as
 * embedded in the binary: daemon/assets.h): every route is documented with its method, and
 * every documented path and method is a route; the path patterns' matching ({id}, {name});
 * which routes need a caller and which write; and the conversion of option text into a
 * request's values that drover submit and the API share (util/request.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include "daemon/api-routes.h"
#include "daemon/assets.h"
#include "util/request.h"

static json_t *doc_cache;

/* The document (loaded once; freed by main). */
static json_t *openapi(void)
{
    if (doc_cache != NULL)
        return doc_cache;
    const struct asset *a = asset_find("/api/v1/openapi.json");
    assert_non_null(a);
    json_error_t err;
    json_t *doc = json_loadb((const char *)a->data, a->len, 0, &err);
    if (doc == NULL)
        fail_msg("openapi.json: %s (line %d)", err.text, err.line);
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.0.3");
    return doc_cache = doc;
}

static void lower(const char *in, char *out, size_t len)
{
    size_t i = 0;
    for (; in[i] && i + 1 < len; i++)
        out[i] = (char)(in[i] >= 'A' && in[i] <= 'Z' ? in[i] - 'A' + 'a' : in[i]);
    out[i] = '\0';
}

static void test_every_route_documented(void **state)
{
    json_t *paths = json_object_get(openapi(), "paths");
    for (const struct api_route *r = api_routes; r->method; r++) {
        char m[16];
        lower(r->method, m, sizeof m);
        json_t *item = json_object_get(paths, r->pattern);
        if (item == NULL || json_object_get(item, m) == NULL)
            fail_msg("route %s %s is not in docs/openapi.json", r->method, r->pattern);
    }
}

static void test_every_documented_route_exists(void **state)
{
    json_t *paths = json_object_get(openapi(), "paths"), *item, *operation;
    const char *path, *method;
    json_object_foreach(paths, path, item) {
        json_object_foreach(item, method, operation) {
            bool found = false;
            for (const struct api_route *r = api_routes; r->method && !found; r++)
                found = strcmp(r->pattern, path) == 0 && strcasecmp(r->method, method) == 0;
            if (!found)
                fail_msg("docs/openapi.json documents %s %s: no such route", method, path);
        }
    }
}

/* Under /api/v1/ everything but the document itself needs a caller; a route writes exactly
 * when it is not a GET, and says so in the document's security. */
static void test_auth_and_writes(void **state)
{
    json_t *paths = json_object_get(openapi(), "paths");
    for (const struct api_route *r = api_routes; r->method; r++) {
        bool api = strncmp(r->pattern, "/api/v1/", 8) == 0 &&
                   strcmp(r->pattern, "/api/v1/openapi.json") != 0;
        if (r->auth != api)
            fail_msg("%s %s: auth should be %d", r->method, r->pattern, api);
        if (r->writes != (strcmp(r->method, "GET") != 0))
            fail_msg("%s %s: writes should be %d", r->method, r->pattern, !r->writes);
        char m[16];
        lower(r->method, m, sizeof m);
        json_t *security = json_object_get(json_object_get(json_object_get(paths, r->pattern),
                                                           m), "security");
        if (json_array_size(security) != (r->auth ? 2u : 0u))
            fail_msg("%s %s: its security in openapi.json says otherwise", r->method,
                     r->pattern);
    }
}

static const struct api_route *route(const char *method, const char *pattern)
{
    for (const struct api_route *r = api_routes; r->method; r++)
        if (strcmp(r->method, method) == 0 && strcmp(r->pattern, pattern) == 0)
            return r;
    fail_msg("no route %s %s", method, pattern);
    return NULL;
}

static enum api_match match(const char *method, const char *pattern, const char *path,
                            struct api_params *p, char *name)
{
    return api_route_match(route(method, pattern), path, p, name, 256);
}

static void test_match(void **state)
{
    struct api_params p;
    char name[256];
    assert_int_equal(match("GET", "/api/v1/tasks/{id}", "/api/v1/tasks/12", &p, name), API_YES);
    assert_int_equal(p.id, 12);
    assert_int_equal(match("GET", "/api/v1/tasks/{id}", "/api/v1/tasks/12/", &p, name), API_YES);
    assert_int_equal(match("GET", "/api/v1/tasks", "/api/v1/tasks", &p, name), API_YES);
    assert_int_equal(match("GET", "/api/v1/tasks", "/api/v1/tasks/1", &p, name), API_NO);
    assert_int_equal(match("GET", "/api/v1/tasks/{id}", "/api/v1/tasks", &p, name), API_NO);
    assert_int_equal(match("POST", "/api/v1/tasks/{id}/retry", "/api/v1/tasks/7/retry", &p,
                           name), API_YES);
    assert_int_equal(p.id, 7);
    assert_int_equal(match("POST", "/api/v1/tasks/{id}/retry", "/api/v1/tasks/7/hold", &p,
                           name), API_NO);
    const char *bad[] = {"abc", "0", "-3", "1x", "+4", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/api/v1/tasks/%s", bad[i]);
        assert_int_equal(match("GET", "/api/v1/tasks/{id}", path, &p, name), API_BAD_ID);
        assert_string_equal(p.bad, bad[i]);
    }
    assert_int_equal(match("GET", "/api/v1/experiments/{name}", "/api/v1/experiments/s1", &p,
                           name), API_YES);
    assert_string_equal(p.name, "s1");
    assert_int_equal(match("GET", "/api/v1/experiments/{name}",
                           "/api/v1/experiments/alice/s1", &p, name), API_YES);
    assert_string_equal(p.name, "alice/s1");
    assert_int_equal(match("POST", "/api/v1/experiments/{name}/stop",
                           "/api/v1/experiments/alice/s1/stop", &p, name), API_YES);
    assert_string_equal(p.name, "alice/s1");
    assert_int_equal(match("POST", "/api/v1/experiments/{name}/stop",
                           "/api/v1/experiments/s1/stop", &p, name), API_YES);
    assert_string_equal(p.name, "s1");
    assert_int_equal(match("GET", "/api/v1/experiments/{name}", "/api/v1/experiments/a/b/c",
                           &p, name), API_NO);
    assert_int_equal(match("GET", "/healthz", "/healthz/x", &p, name), API_NO);
    char longpath[4096];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    assert_int_equal(match("GET", "/healthz", longpath, &p, name), API_NO);
    assert_int_equal(match("GET", "/api/v1/tasks", "/a/b/c/d/e/f/g/h/i/j/k", &p, name), API_NO);
}

/* One conversion for drover submit's options and the API's text values. */
static void test_value_from_text(void **state)
{
    const char *why = NULL;
    json_t *v = request_value_from_text(request_field("gpu_mem"), "10G", &why);
    assert_int_equal(json_integer_value(v), 10LL << 30);
    json_decref(v);
    v = request_value_from_text(request_field("timeout_ms"), "15m", &why);
    assert_int_equal(json_integer_value(v), 15 * 60000);
    json_decref(v);
    v = request_value_from_text(request_field("after"), "1,2", &why);
    assert_int_equal(json_array_size(v), 2);
    json_decref(v);
    v = request_value_from_text(request_field("backoff"), "5,30", &why);
    assert_int_equal(json_integer_value(json_array_get(v, 1)), 30000);
    json_decref(v);
    v = request_value_from_text(request_field("array"), "0-9%2", &why);
    assert_int_equal(json_array_size(json_object_get(v, "index")), 10);
    assert_int_equal(json_integer_value(json_object_get(v, "limit")), 2);
    json_decref(v);
    assert_null(request_value_from_text(request_field("gpu_mem"), "10X", &why));
    assert_non_null(why);
    assert_null(request_value_from_text(request_field("gpus"), "x", &why));
    assert_null(request_value_from_text(request_field("env"), "A=B", &why));
}

/* A refusal of a submit names its field. */
static void test_check_names_field(void **state)
{
    json_t *req = json_pack("{s:[s],s:s,s:s}", "command", "true", "workdir", "/", "gpus", "x");
    char *why;
    const char *field = NULL;
    assert_int_equal(request_check_submit_field(req, &why, &field), -1);
    assert_string_equal(field, "gpus");
    free(why);
    json_object_set_new(req, "gpus", json_integer(1));
    assert_int_equal(request_check_submit_field(req, &why, &field), 0);
    assert_null(field);
    json_decref(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_documented),
        cmocka_unit_test(test_every_documented_route_exists),
        cmocka_unit_test(test_auth_and_writes),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_value_from_text),
        cmocka_unit_test(test_check_names_field),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(doc_cache);
    return rc;
}
