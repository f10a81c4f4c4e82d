/* daemon/api-internal.h — what the API's authentication shares (daemon/api-auth.c, the HTTP
 * side; daemon/ops-token.c, the socket ops and the credentials themselves): the format of a
 * token, its hash, the dashboard's one-time login codes, and when a token was last marked used.
 * docs/API.md, "Authentication", is the contract.
 *
 * A credential's text is "drv_<id>_<secret>": id the tokens row, secret 32 random bytes in
 * base64url without padding (43 characters). The store keeps the hex SHA-256 of the whole text
 * only; a presented token is checked by loading row <id> and comparing hashes in constant time,
 * so a guess costs one indexed read and tells nothing about any secret. */
#ifndef DROVER_API_INTERNAL_H
#define DROVER_API_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"

#define AUTH_PREFIX "drv_"
#define AUTH_SECRET_BYTES 32
#define AUTH_SECRET_CHARS 43          /* base64url of 32 bytes, unpadded */
#define AUTH_TEXT_MAX 72              /* "drv_" + up to 19 digits + "_" + 43 + NUL */
#define AUTH_HASH_HEX 65              /* 64 hex digits + NUL */
#define AUTH_CODE_BYTES 16            /* a login code: 128 bits */
#define AUTH_CODE_MS 60000            /* … valid for 60 s, once */
#define AUTH_CODES_MAX 64             /* outstanding codes kept; more wait for some to expire */
#define AUTH_SESSION_MS (12LL * 3600 * 1000) /* a dashboard session */
#define AUTH_USED_EVERY_MS 60000      /* last_used is written at most this often per token */
#define AUTH_USED_MAX 4096            /* tokens remembered for that; then the memory starts over */
#define AUTH_COOKIE "drover_session"

struct auth_code {
    char hash[AUTH_HASH_HEX];        /* "" = a free slot */
    uid_t uid;
    gid_t gid;
    int64_t expires;
};

struct auth_used {
    int64_t id;
    int64_t at;
};

/* d->api: set on first use (api_state_get); nothing to free (api_state_free, in api.h, wipes
 * it). */
struct api_state {
    struct auth_code codes[AUTH_CODES_MAX];
    struct auth_used used[AUTH_USED_MAX];
    size_t nused;
};
struct api_state *api_state_get(struct daemon *d);

/* ---- the text (daemon/auth.c; tests/unit/test_tokens.c) ---- */
/* n bytes as base64url without padding into out (room for 4*n/3 + 2 bytes); returns its
 * length. */
size_t auth_base64url(const unsigned char *in, size_t n, char *out);
/* Whether text is a well-formed credential ("drv_<id>_<43 base64url characters>", id a positive
 * decimal without leading zeros); sets *id. */
bool auth_token_parse(const char *text, int64_t *id);
/* The hex SHA-256 of text into out. */
void auth_sha256_hex(const char *text, char out[AUTH_HASH_HEX]);
/* Whether two hex hashes are equal, in time independent of where they differ. */
bool auth_hash_equal(const char *a, const char *b);
/* nbytes random bytes (OpenSSL's RAND_bytes) as base64url into out. -1 when the generator
 * fails (nothing may then be issued). */
int auth_random(size_t nbytes, char *out);

/* ---- credentials (ops-token.c) ---- */
/* Issues t (uid, user, session, read_only, created, expires and csrf filled by the caller) and
 * its name (may be NULL) inside the caller's transaction: t->id and t->hash set, the text in
 * out. 0; -1 with *err malloc'd (a store write or the random generator failed). */
int auth_issue(struct daemon *d, struct store_token *t, const char *name,
               char out[AUTH_TEXT_MAX], char **err);
/* Whether token id should have last_used written now (and remembers that it has). */
bool auth_used_due(struct daemon *d, int64_t id, int64_t now);

#endif
