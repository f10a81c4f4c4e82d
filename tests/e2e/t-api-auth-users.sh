#!/usr/bin/env bash
# The HTTP API's tokens on a shared machine (system mode, real users): a token acts as the user
# who created it, with exactly that user's permissions — alice's token cannot cancel bob's task
# (403, the CLI's "not permitted: task N belongs to bob") and can cancel her own; a user lists
# and revokes only their own tokens (an admin, anyone's); a token of a user who has since been
# deleted is refused (401). Needs root (useradd): exits 77 otherwise.
. "$(dirname "$0")/lib.sh"

system_setup apiauth
command -v curl >/dev/null || skip "no curl"
system_group G g
system_user A a
system_user B b
system_user C c
http_port
system_daemon_start "admins = $G" "http = 127.0.0.1:$PORT"

# bearer TOKEN METHOD PATH: the status on stdout, the body in $TMP/body.
bearer() {
    curl -sS -X "$2" -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer $1" "$URL$3"
}
error_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"])' "$TMP/body"; }

TA=$(as "$A" "$DROVER" token create --name alice 2>/dev/null)
TB=$(as "$B" "$DROVER" token create --name bob 2>/dev/null)
TC=$(as "$C" "$DROVER" token create 2>/dev/null)
TA_ID=$(cut -d_ -f2 <<<"$TA")
TB_ID=$(cut -d_ -f2 <<<"$TB")

t "a token acts as its user"
expect_eq "$(bearer "$TA" GET /api/v1/session)" 200 "alice's session"
expect_eq "$(json_get '["user"]' < "$TMP/body")" "$A" "the token's user"
expect_eq "$(json_get '["uid"]' < "$TMP/body")" "$(id -u "$A")" "the token's uid"
expect_eq "$(json_get '["admin"]' < "$TMP/body")" false "alice is no admin"
expect_eq "$(json_get '["system"]' < "$TMP/body")" true "system"

t "alice's token cannot cancel bob's task: 403, naming bob"
bobs=$(as "$B" "$DROVER" submit -- sleep 300)
expect_eq "$(bearer "$TA" DELETE "/api/v1/tasks/$bobs")" 403 "alice DELETE bob's task"
expect_eq "$(error_of)" "not permitted: task $bobs belongs to $B" "the refusal"
state_is "$bobs" cancelled && fail "alice's token cancelled bob's task"

t "alice's token cancels her own task"
alices=$(as "$A" "$DROVER" submit -- sleep 300)
expect_eq "$(bearer "$TA" DELETE "/api/v1/tasks/$alices")" 200 "alice DELETE her task"
wait_until 20 state_is "$alices" cancelled

t "tokens are each user's own: ls shows one's own; revoke and --all refuse others"
as "$A" "$DROVER" token ls > "$TMP/ls"
grep -q " alice " "$TMP/ls" || fail "alice's ls: $(cat "$TMP/ls")"
grep -q " bob " "$TMP/ls" && fail "alice's ls shows bob's token"
expect_exit 4 as "$A" "$DROVER" token revoke "$TB_ID"
expect_eq "$ERR" "drover token: not permitted: token $TB_ID belongs to $B" "revoke refusal"
expect_exit 4 as "$A" "$DROVER" token ls --all
expect_eq "$(bearer "$TA" DELETE "/api/v1/tokens/$TB_ID")" 403 "alice DELETE bob's token"
expect_eq "$(bearer "$TB" GET /api/v1/tasks)" 200 "bob's token after alice's attempts"
expect_eq "$(bearer "$TA" GET '/api/v1/tokens?all=1')" 403 "alice GET every token"

t "an admin lists every token and revokes anyone's"
"$DROVER" token ls --all | grep -q " bob " || fail "root's ls --all lacks bob's token"
expect_exit 0 "$DROVER" token revoke "$TB_ID"
expect_eq "$(bearer "$TB" GET /api/v1/tasks)" 401 "bob's token revoked by root"
expect_exit 0 as "$A" "$DROVER" token revoke "$TA_ID"
expect_eq "$(bearer "$TA" GET /api/v1/tasks)" 401 "alice's token revoked by alice"

t "the token of a user who no longer exists: 401"
expect_eq "$(bearer "$TC" GET /api/v1/tasks)" 200 "C's token while C exists"
accounts userdel "$C"
expect_eq "$(bearer "$TC" GET /api/v1/tasks)" 401 "C's token after userdel"
expect_eq "$(error_of)" "the token's user no longer exists" "the refusal"

done_testing
