/* The credentials' text (daemon/api-internal.h): base64url secrets from OpenSSL's generator,
 * the "drv_<id>_<secret>" format, the SHA-256 the store keeps, the constant-time compare. Pure
 * but for the generator; nothing here touches the daemon (tests/unit/test_tokens.c). */
#include "daemon/api-internal.h"
#include "util/xalloc.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

size_t auth_base64url(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t len = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[len++] = digits[(v >> 18) & 63];
        out[len++] = digits[(v >> 12) & 63];
        if (i + 1 < n)
            out[len++] = digits[(v >> 6) & 63];
        if (i + 2 < n)
            out[len++] = digits[v & 63];
    }
    out[len] = '\0';
    return len;
}

bool auth_token_parse(const char *text, int64_t *id)
{
    size_t plen = strlen(AUTH_PREFIX);
    if (text == NULL || strncmp(text, AUTH_PREFIX, plen) != 0)
        return false;
    const char *p = text + plen;
    int64_t v = 0;
    size_t digits = 0;
    if (*p == '0')
        return false;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (v > (INT64_MAX - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    if (digits == 0 || *p++ != '_')
        return false;
    size_t n = 0;
    for (; p[n] != '\0'; n++)
        if (!((p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= 'a' && p[n] <= 'z') ||
              (p[n] >= '0' && p[n] <= '9') || p[n] == '-' || p[n] == '_'))
            return false;
    if (n != AUTH_SECRET_CHARS)
        return false;
    *id = v;
    return true;
}

void auth_sha256_hex(const char *text, char out[AUTH_HASH_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL) != 1 || len != 32)
        fatalx("drover daemon: SHA-256 failed"); /* libcrypto without SHA-256: nothing to do */
    for (unsigned i = 0; i < len; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

bool auth_hash_equal(const char *a, const char *b)
{
    if (strlen(a) != AUTH_HASH_HEX - 1 || strlen(b) != AUTH_HASH_HEX - 1)
        return false;
    return CRYPTO_memcmp(a, b, AUTH_HASH_HEX - 1) == 0;
}

int auth_random(size_t nbytes, char *out)
{
    unsigned char buf[64];
    if (nbytes > sizeof buf || RAND_bytes(buf, (int)nbytes) != 1)
        return -1;
    auth_base64url(buf, nbytes, out);
    OPENSSL_cleanse(buf, sizeof buf);
    return 0;
}
