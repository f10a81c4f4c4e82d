#!/usr/bin/env bash
# `make install PREFIX=/usr DESTDIR=…` (what a packager runs; its cmake --install step): the binary, the systemd unit
# naming the installed binary, the man page (rendered by groff without a warning), the docs,
# and bash and zsh completion — bash completion driven as bash does it (COMP_WORDS, COMP_CWORD,
# the completion function, COMPREPLY): commands, a command's options, task ids.
. "$(dirname "$0")/lib.sh"

: "${DROVER_BUILD:=$(dirname "$DROVER")}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ROOT="$TMP/root"
command -v groff >/dev/null || skip "groff is not installed (scripts/install-deps)"

t "make install PREFIX=/usr DESTDIR=…: every file in its place"
# What `make install` runs after building (its recipe in the Makefile: `make -n` would run the
# recursive build, racing the other tests), run here on the build under test without rebuilding
# it: other tests may be using the binary at the same time.
grep -qF 'DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)' "$SRC/Makefile" ||
    fail "make install does not run cmake --install with DESTDIR and PREFIX"
DESTDIR="$ROOT" cmake --install "$DROVER_BUILD" --prefix /usr >"$TMP/install.log" 2>&1 ||
    fail "cmake --install failed: $(tail -5 "$TMP/install.log")"
for f in usr/bin/drover usr/bin/drover-daemon usr/lib/systemd/system/drover.service usr/share/man/man1/drover.1 \
         usr/share/doc/drover/README.md usr/share/doc/drover/CLI.md \
         usr/share/bash-completion/completions/drover usr/share/zsh/site-functions/_drover; do
    [ -f "$ROOT/$f" ] || fail "not installed: /$f"
done
[ -x "$ROOT/usr/bin/drover" ] || fail "the installed binary is not executable"
[ -x "$ROOT/usr/bin/drover-daemon" ] || fail "the installed daemon is not executable"
# The CLI carries none of the daemon's libraries (its start is every command's cost); the
# daemon does (and shows that nm sees symbols at all).
nm "$ROOT/usr/bin/drover-daemon" > "$TMP/nm-daemon" 2>&1 || true
nm "$ROOT/usr/bin/drover" > "$TMP/nm-cli" 2>&1 || true
# Defined (T: linked in statically) or undefined (U: from a shared library, as a sanitizer build
# links them) — either way, a reference.
grep -qE ' [TU] sqlite3_open_v2(@.*)?$' "$TMP/nm-daemon" || fail "nm sees no SQLite in the daemon"
grep -qE ' [TU] amqp_new_connection(@.*)?$' "$TMP/nm-daemon" || fail "nm sees no librabbitmq in the daemon"
! grep -qE ' [TU] (sqlite3_open_v2|event_base_new|SSL_new|amqp_new_connection)(@.*)?$' "$TMP/nm-cli" ||
    fail "the CLI links the daemon's libraries"
out=$("$ROOT/usr/bin/drover" daemon --help) || fail "drover daemon --help: the hand-over to drover-daemon"
grep -q -- '--system' <<<"$out" || fail "drover daemon --help is not the daemon's: $out"
expect_eq "$("$ROOT/usr/bin/drover" --version | cut -d' ' -f1-2)" "drover 0.5" "the installed binary's --version"
grep -qx 'ExecStart=/usr/bin/drover-daemon --system' "$ROOT/usr/lib/systemd/system/drover.service" ||
    fail "the unit does not start the installed binary: $(grep ExecStart "$ROOT/usr/lib/systemd/system/drover.service")"
grep -qx 'KillMode=process' "$ROOT/usr/lib/systemd/system/drover.service" ||
    fail "the unit would kill every task with the daemon"
! grep -q '@' "$ROOT/usr/lib/systemd/system/drover.service" || fail "an unsubstituted @VAR@ in the unit"

t "the man page renders without a warning"
warnings=$(groff -man -Tutf8 -ww -P-cbou "$ROOT/usr/share/man/man1/drover.1" 2>&1 >"$TMP/man.txt")
expect_eq "$warnings" "" "groff's warnings"
grep -qE "drover +daemon +--system" "$TMP/man.txt" || fail "the man page lacks system mode" # justified: spaces vary
grep -q "DROVER_SOCKET" "$TMP/man.txt" || fail "the man page lacks the daemon selection"

# complete WORD…: the completions bash would offer for the command line WORD… (the last word
# is the one being completed), one per line, sorted.
complete_words() {
    PATH="$(dirname "$DROVER"):$PATH" bash -c '
        . "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
        _drover drover
        printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$ROOT/usr/share/bash-completion/completions/drover" "$@"
}

t "bash completion: commands"
expect_eq "$(complete_words drover su)" "submit" "drover su<TAB>"
expect_eq "$(complete_words drover wh)" "whoami" "drover wh<TAB>"
complete_words drover '' | grep -qx version || fail "drover <TAB> lacks version"

t "bash completion: a command's options"
expect_eq "$(complete_words drover submit --gp | tr '\n' ' ')" "--gpu-mem --gpu-type --gpus " "drover submit --gp<TAB>"
expect_eq "$(complete_words drover ls --al)" "--all" "drover ls --al<TAB>"
expect_eq "$(complete_words drover exp st)" "stop" "drover exp st<TAB>"
expect_eq "$(complete_words drover exp run --dr)" "--dry-run" "drover exp run --dr<TAB>"
expect_eq "$(complete_words drover submit -- ls --gp)" "" "options of the task's own command"

t "bash completion: task ids, from a running daemon only"
expect_eq "$(complete_words drover cancel '')" "" "ids with no daemon running"
[ ! -e "$DROVER_HOME/drover.sock" ] || fail "completion started a daemon"
a=$(drover submit --hold -- true)
b=$(drover submit --hold -- true)
expect_eq "$(complete_words drover cancel '' | tr '\n' ' ')" "$a $b " "drover cancel <TAB>"
drover cancel "$a" "$b"

t "zsh completion is a zsh function file"
expect_eq "$(head -1 "$ROOT/usr/share/zsh/site-functions/_drover")" "#compdef drover" "_drover's first line"
if command -v zsh >/dev/null; then
    zsh -n "$ROOT/usr/share/zsh/site-functions/_drover" || fail "_drover does not parse"
fi
bash -n "$ROOT/usr/share/bash-completion/completions/drover" || fail "the bash completion does not parse"

done_testing
