/* A webhook URL (util/request.c request_url_problem): what --notify, a template's notify: and
 * the generator's proposals are checked by, through both doors of a task request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/request.h"

static void test_accepted(void **state)
{
    (void)state;
    static const char *const good[] = {
        "http://127.0.0.1:8080/hook", "https://hooks.example.com/x?a=1&b=2", "http://h",
        "https://[::1]:8443/p", "http://example.com:80", "https://a.b/c#frag",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_null(request_url_problem(good[i]));
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"ftp://x", "http:// or https://"},
        {"HTTP://x", "http:// or https://"},
        {"x", "http:// or https://"},
        {"", "http:// or https://"},
        {"http://", "no host"},
        {"https:///path", "no host"},
        {"http://:80/", "no host"},
        {"http://a b/", "spaces"},
        {"http://a/\tb", "control"},
        {"http://a/\x7f", "control"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = request_url_problem(bad[i].url);
        assert_non_null(why);
        assert_non_null(strstr(why, bad[i].why));
    }
    char long_url[REQUEST_MAX_URL + 2];
    memset(long_url, 'a', sizeof long_url);
    memcpy(long_url, "http://", 7);
    long_url[REQUEST_MAX_URL + 1] = '\0';
    assert_non_null(strstr(request_url_problem(long_url), "2048"));
    long_url[REQUEST_MAX_URL] = '\0';
    assert_null(request_url_problem(long_url));
}

/* Both doors refuse a bad notify in one line that names the field and the URL. */
static void test_doors(void **state)
{
    (void)state;
    for (int door = 0; door < 2; door++) {
        json_t *req = json_pack("{s:[s],s:s}", "command", "true", "notify", "ftp://x");
        char *why = NULL;
        int rc;
        if (door == 0) {
            json_object_set_new(req, "workdir", json_string("/"));
            rc = request_check_submit(req, &why);
        } else {
            rc = request_check_task(req, NULL, &why);
        }
        assert_int_equal(rc, -1);
        assert_non_null(strstr(why, "'notify' (--notify) 'ftp://x'"));
        assert_null(strchr(why, '\n'));
        free(why);
        json_object_set_new(req, "notify", json_string("https://example.com/h"));
        rc = door == 0 ? request_check_submit(req, &why) : request_check_task(req, NULL, &why);
        assert_int_equal(rc, 0);
        json_decref(req);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_doors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
