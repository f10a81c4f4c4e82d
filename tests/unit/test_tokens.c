/* The API's credentials: base64url, the token's text, its hash and the constant-time compare
 * (daemon/api-internal.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/api-internal.h"

static void test_base64url(void **state)
{
    static const struct { const char *in, *want; } cases[] = {
        {"", ""}, {"f", "Zg"}, {"fo", "Zm8"}, {"foo", "Zm9v"}, {"foob", "Zm9vYg"},
        {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}, {"\xfb\xff", "-_8"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = auth_base64url((const unsigned char *)cases[i].in, strlen(cases[i].in), out);
        assert_string_equal(out, cases[i].want);
        assert_int_equal(n, strlen(cases[i].want));
    }
    unsigned char secret[AUTH_SECRET_BYTES] = {0};
    assert_int_equal(auth_base64url(secret, sizeof secret, out), AUTH_SECRET_CHARS);
}

static void test_parse(void **state)
{
    char text[AUTH_TEXT_MAX], secret[AUTH_SECRET_CHARS + 2];
    int64_t id = 0;
    assert_int_equal(auth_random(AUTH_SECRET_BYTES, secret), 0);
    assert_int_equal(strlen(secret), AUTH_SECRET_CHARS);
    snprintf(text, sizeof text, "drv_42_%s", secret);
    assert_true(auth_token_parse(text, &id));
    assert_int_equal(id, 42);
    snprintf(text, sizeof text, "drv_9223372036854775807_%s", secret);
    assert_true(auth_token_parse(text, &id));
    assert_true(id == INT64_MAX);
    static const char *const bad_ids[] = {"", "0", "042", "-1", "x", "9223372036854775808",
                                          "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        snprintf(text, sizeof text, "drv_%s_%s", bad_ids[i], secret);
        assert_false(auth_token_parse(text, &id));
    }
    char shorter[AUTH_TEXT_MAX + 8];
    snprintf(shorter, sizeof shorter, "drv_1_%.*s", AUTH_SECRET_CHARS - 1, secret);
    assert_false(auth_token_parse(shorter, &id));
    snprintf(shorter, sizeof shorter, "drv_1_%sA", secret);
    assert_false(auth_token_parse(shorter, &id));
    snprintf(shorter, sizeof shorter, "drv_1_%s", secret);
    shorter[10] = '=';
    assert_false(auth_token_parse(shorter, &id));
    snprintf(shorter, sizeof shorter, "DRV_1_%s", secret);
    assert_false(auth_token_parse(shorter, &id));
    snprintf(shorter, sizeof shorter, "drv_1%s", secret);
    assert_false(auth_token_parse(shorter, &id));
    assert_false(auth_token_parse("", &id));
    assert_false(auth_token_parse(NULL, &id));
    assert_false(auth_token_parse("Bearer drv_1_x", &id));
}

static void test_hash(void **state)
{
    char a[AUTH_HASH_HEX], b[AUTH_HASH_HEX];
    auth_sha256_hex("abc", a);
    assert_string_equal(a, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    auth_sha256_hex("abd", b);
    assert_true(auth_hash_equal(a, a));
    assert_false(auth_hash_equal(a, b));
    assert_false(auth_hash_equal(a, ""));
    assert_false(auth_hash_equal("", ""));
    assert_false(auth_hash_equal("pending", "pending")); /* a row mid-insert matches nothing */
}

static void test_random(void **state)
{
    char x[AUTH_SECRET_CHARS + 2], y[AUTH_SECRET_CHARS + 2], code[AUTH_CODE_BYTES * 2];
    assert_int_equal(auth_random(AUTH_SECRET_BYTES, x), 0);
    assert_int_equal(auth_random(AUTH_SECRET_BYTES, y), 0);
    assert_string_not_equal(x, y);
    assert_int_equal(auth_random(AUTH_CODE_BYTES, code), 0);
    assert_int_equal(strlen(code), 22);
    assert_int_equal(auth_random(1000, x), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64url), cmocka_unit_test(test_parse),
        cmocka_unit_test(test_hash), cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
