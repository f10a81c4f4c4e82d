#!/usr/bin/env bash
# The HTTP API's authentication (docs/API.md, "Authentication"), over real HTTP with curl:
# no/garbage/unknown/revoked/expired tokens are 401 with a Bearer challenge; read-only tokens
# read and are refused writes (403); `drover token ls` and the store never hold a secret; the
# dashboard's one-time login link becomes an HttpOnly, SameSite=Strict session cookie that
# needs X-CSRF-Token for writes and works once; tokens over the API itself. The other-user
# cases (system mode, real users) are in t-api-auth-users.sh.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "no curl"
http_daemon

# bearer TOKEN METHOD PATH [CURL ARGS…]: req (lib.sh) with the token.
bearer() { local tok=$1 m=$2 p=$3; shift 3; req "$m" "$p" -H "Authorization: Bearer $tok" "$@"; }
error_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"])' "$TMP/body"; }
expect_error() {
    local got
    got=$(error_of)
    case "$got" in *"$1"*) ;; *) fail "expected an error saying '$1', got '$got'" ;; esac
}
challenged() { grep -qi '^WWW-Authenticate: Bearer realm="drover"' "$TMP/head" || fail "no Bearer challenge"; }

TOK=$(drover token create --name main 2>"$TMP/create.err")
RO=$(api_token --name reader --read-only)
ME=$(drover whoami --json | json_get '["user"]')

t "token create prints the token alone on stdout, and says on stderr it is shown once"
[[ "$TOK" =~ ^drv_[0-9]+_[A-Za-z0-9_-]{43}$ ]] || fail "token text: $TOK"
grep -q "shown this once" "$TMP/create.err" || fail "stderr: $(cat "$TMP/create.err")"
TOK_ID=$(cut -d_ -f2 <<<"$TOK")
RO_ID=$(cut -d_ -f2 <<<"$RO")

t "no Authorization: 401 with a Bearer challenge"
expect_status 401 "no token" req GET /api/v1/tasks
challenged
expect_error "authentication required"

t "garbage, another scheme, an unknown token, a wrong secret: 401"
expect_status 401 "garbage" bearer nonsense GET /api/v1/tasks
challenged
expect_error "malformed token"
expect_status 401 "Basic" req GET /api/v1/tasks -H "Authorization: Basic dXNlcjpwYXNz"
expect_status 401 "unknown id" bearer "drv_999999_${TOK#drv_*_}" GET /api/v1/tasks
expect_error "unknown token"
wrong="drv_${TOK_ID}_$(head -c 43 /dev/zero | tr '\0' A)"
expect_status 401 "wrong secret" bearer "$wrong" GET /api/v1/tasks
expect_error "unknown token"
expect_status 401 "a cookie that is no session" req GET /api/v1/tasks -b "drover_session=$TOK"

t "a valid token: 200"
expect_status 200 "valid token" bearer "$TOK" GET /api/v1/tasks
expect_status 200 "session of a token" bearer "$TOK" GET /api/v1/session
expect_eq "$(json_get '["user"]' < "$TMP/body")" "$ME" "session user"
expect_eq "$(json_get '["csrf"]' < "$TMP/body")" null "a token's csrf"
expect_eq "$(json_get '["token_id"]' < "$TMP/body")" "$TOK_ID" "token_id"

t "a read-only token reads (200) and may not write (403)"
task=$(drover submit --name victim -- sleep 300)
expect_status 200 "read-only GET" bearer "$RO" GET "/api/v1/tasks/$task"
expect_status 403 "read-only DELETE" bearer "$RO" DELETE "/api/v1/tasks/$task"
expect_error "not permitted: a read-only token may only read"
expect_status 403 "read-only POST" bearer "$RO" POST /api/v1/tasks \
    -H 'Content-Type: application/json' --data '{"command": ["true"]}'
expect_status 403 "read-only token create" bearer "$RO" POST /api/v1/tokens --data '{}'
expect_status 200 "read-only token list" bearer "$RO" GET /api/v1/tokens
state_is "$task" cancelled && fail "a read-only token cancelled task $task"

t "the token may cancel its user's task"
expect_status 200 "DELETE with the token" bearer "$TOK" DELETE "/api/v1/tasks/$task"
wait_until 20 state_is "$task" cancelled

t "drover token ls shows them, never the secret; last_used is recorded"
drover token ls > "$TMP/ls"
head -1 "$TMP/ls" | grep -q "ID *NAME *USER *KIND *RO *CREATED *EXPIRES *LAST-USED *REVOKED" ||
    fail "header: $(head -1 "$TMP/ls")"
grep -q "^$TOK_ID *main *$ME *token *no " "$TMP/ls" || fail "no row for main: $(cat "$TMP/ls")"
grep -q "^$RO_ID *reader *$ME *token *yes " "$TMP/ls" || fail "no row for reader: $(cat "$TMP/ls")"
drover token ls --json > "$TMP/ls.json"
for secret in "${TOK#drv_*_}" "${RO#drv_*_}"; do
    grep -qF -- "$secret" "$TMP/ls" "$TMP/ls.json" && fail "token ls shows a secret"
done
python3 - "$TMP/ls.json" "$TOK_ID" <<'PY'
import json, sys
rows = {r["id"]: r for r in json.load(open(sys.argv[1]))}
main = rows[int(sys.argv[2])]
assert set(main) == {"id", "name", "user", "uid", "kind", "read_only", "created", "expires",
                     "last_used", "revoked"}, main
assert main["last_used"] is not None and main["expires"] is None and main["revoked"] is None, main
PY

t "the store holds only hashes: no token text in drover.db"
python3 - "$DROVER_HOME/drover.db" "$TOK" "$RO" <<'PY'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
dump = "\n".join(db.iterdump())
hashes = {h for (h,) in db.execute("SELECT hash FROM tokens")}
for tok in sys.argv[2:]:
    secret = tok.split("_", 2)[2]
    assert secret not in dump, "a secret is in the database"
    assert hashlib.sha256(tok.encode()).hexdigest() in hashes, "no hash of a token"
PY
for f in "$DROVER_HOME"/drover.db*; do
    grep -qaF -- "${TOK#drv_*_}" "$f" && fail "$f holds the token's secret"
done

t "a revoked token: 401 'token revoked'"
drover token revoke "$RO_ID"
expect_status 401 "revoked" bearer "$RO" GET /api/v1/tasks
expect_error "token revoked"
drover token ls --json | python3 -c "import json,sys; r=[t for t in json.load(sys.stdin) if t['id']==$RO_ID][0]; assert r['revoked'], r"
drover token revoke "$RO_ID" # again: nothing to do, no error

t "an expired token: 401 'token expired'"
EXP=$(api_token --expires 1s)
expired() { [ "$(bearer "$EXP" GET /api/v1/tasks)" = 401 ]; }
wait_until 10 expired
expect_error "token expired"

t "bad input to the CLI: one line, exit 2"
expect_exit 2 drover token create --expires soon
expect_eq "$(wc -l <<<"$ERR")" 1 "lines"
case "$ERR" in "drover token: --expires soon: "*) ;; *) fail "$ERR" ;; esac
expect_exit 2 drover token revoke x
expect_exit 2 drover token revoke 999999
case "$ERR" in *"no token 999999"*) ;; *) fail "$ERR" ;; esac
expect_exit 2 drover token frob

t "tokens over the API: create (201, shown once), list (no secrets), revoke"
expect_status 201 "POST tokens" bearer "$TOK" POST /api/v1/tokens \
    --data '{"name": "ci", "expires": "30d", "read_only": true}'
API_TOK=$(json_get '["token"]' < "$TMP/body")
API_ID=$(json_get '["id"]' < "$TMP/body")
expect_eq "$(json_get '["read_only"]' < "$TMP/body")" true "read_only"
expect_eq "$(json_get '["name"]' < "$TMP/body")" ci "name"
expect_status 200 "the new token" bearer "$API_TOK" GET /api/v1/tasks
expect_status 200 "GET tokens" bearer "$TOK" GET /api/v1/tokens
grep -qF -- "${API_TOK#drv_*_}" "$TMP/body" && fail "GET /api/v1/tokens shows a secret"
python3 -c "import json,sys; assert $API_ID in [t['id'] for t in json.load(open('$TMP/body'))]"
expect_status 400 "bad expires" bearer "$TOK" POST /api/v1/tokens --data '{"expires": "soon"}'
expect_eq "$(json_get '["field"]' < "$TMP/body")" expires "field of a bad expires"
expect_status 400 "unknown field" bearer "$TOK" POST /api/v1/tokens --data '{"nmae": "x"}'
expect_eq "$(json_get '["field"]' < "$TMP/body")" nmae "field of an unknown key"
expect_status 400 "wrong type" bearer "$TOK" POST /api/v1/tokens --data '{"read_only": "yes"}'
expect_status 400 "not JSON" bearer "$TOK" POST /api/v1/tokens --data '{"name": '
expect_status 200 "DELETE token" bearer "$TOK" DELETE "/api/v1/tokens/$API_ID"
expect_status 401 "the revoked API token" bearer "$API_TOK" GET /api/v1/tasks
expect_status 404 "DELETE no token" bearer "$TOK" DELETE /api/v1/tokens/999999

t "the login link: 303 to / with an HttpOnly, SameSite=Strict session cookie"
LINK=$(drover dashboard 2>"$TMP/dash.err")
grep -q "valid for 60 s, once" "$TMP/dash.err" || fail "dashboard stderr: $(cat "$TMP/dash.err")"
case "$LINK" in "$URL/login?code="*) ;; *) fail "link: $LINK" ;; esac
code=$(curl -sS -D "$TMP/head" -o /dev/null -w '%{http_code}' "$LINK")
expect_eq "$code" 303 "login status"
grep -qi '^Location: /\s*$' "$TMP/head" || fail "no Location: / in $(cat "$TMP/head")"
cookie_line=$(grep -i '^Set-Cookie: drover_session=' "$TMP/head") || fail "no session cookie"
for attr in HttpOnly SameSite=Strict Path=/ Max-Age=43200; do
    grep -q "; $attr" <<<"$cookie_line" || fail "the cookie lacks $attr: $cookie_line"
done
grep -q Secure <<<"$cookie_line" && fail "Secure on plain HTTP: $cookie_line"
SESSION=$(sed -E 's/^[^=]*=([^;]*);.*/\1/' <<<"$cookie_line")

t "the same code again: 401"
expect_eq "$(curl -sS -o "$TMP/body" -w '%{http_code}' "$LINK")" 401 "second use of the code"
grep -q "already used" "$TMP/body" || fail "page: $(cat "$TMP/body")"
expect_eq "$(curl -sS -o /dev/null -w '%{http_code}' "$URL/login?code=nonsense")" 401 "a bad code"
expect_eq "$(curl -sS -o /dev/null -w '%{http_code}' "$URL/login")" 401 "no code"

t "the cookie reads the session: user and CSRF token"
expect_status 200 "session by cookie" req GET /api/v1/session -b "drover_session=$SESSION"
CSRF=$(json_get '["csrf"]' < "$TMP/body")
[ -n "$CSRF" ] && [ "$CSRF" != null ] || fail "no csrf: $(cat "$TMP/body")"
expect_eq "$(json_get '["user"]' < "$TMP/body")" "$ME" "session user"
expect_status 200 "tasks by cookie" req GET /api/v1/tasks -b "drover_session=$SESSION"

t "a write with the cookie needs X-CSRF-Token"
task=$(drover submit -- sleep 300)
expect_status 403 "no CSRF" req DELETE "/api/v1/tasks/$task" -b "drover_session=$SESSION"
expect_error "missing or wrong X-CSRF-Token"
expect_status 403 "wrong CSRF" req DELETE "/api/v1/tasks/$task" -b "drover_session=$SESSION" \
    -H "X-CSRF-Token: ${CSRF%?}x"
state_is "$task" cancelled && fail "cancelled without the CSRF token"
expect_status 200 "with CSRF" req DELETE "/api/v1/tasks/$task" -b "drover_session=$SESSION" \
    -H "X-CSRF-Token: $CSRF"
wait_until 20 state_is "$task" cancelled

t "sessions: hidden from token ls, shown with --all; logout ends one"
drover token ls | grep -q session && fail "token ls shows sessions"
drover token ls --all | grep -q " session " || fail "token ls --all hides sessions"
expect_status 403 "logout without CSRF" req POST /api/v1/logout -b "drover_session=$SESSION"
expect_status 200 "logout" req POST /api/v1/logout -b "drover_session=$SESSION" \
    -H "X-CSRF-Token: $CSRF"
grep -qi '^Set-Cookie: drover_session=;.*Max-Age=0' "$TMP/head" || fail "the cookie is not cleared"
expect_status 401 "after logout" req GET /api/v1/session -b "drover_session=$SESSION"
expect_error "session revoked"

t "drover dashboard without HTTP: one line, exit 2"
(
    export DROVER_HOME=$TMP/home2
    mkdir -p "$DROVER_HOME"
    trap '"$DROVER" shutdown >/dev/null 2>&1 || true' EXIT
    expect_exit 2 "$DROVER" dashboard
    case "$ERR" in "drover dashboard: the daemon serves no HTTP: set http = "*) ;; *) fail "$ERR" ;; esac
)

done_testing
