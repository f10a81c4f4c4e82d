#!/bin/sh
# Builds and runs drover's libFuzzer harnesses (tests/fuzz/README.md).
#
#   scripts/fuzz.sh build                  configure build-fuzz/ with clang and build them
#   scripts/fuzz.sh run [HARNESS…]         fuzz each for $FUZZ_SECONDS (default 60), one at a time
#   scripts/fuzz.sh corpus [HARNESS…]      run each over its corpus once (a quick regression test)
#   scripts/fuzz.sh repro HARNESS FILE…    run one harness on the given inputs
#
# `run` grows a working corpus in build-fuzz/corpus/HARNESS (tests/fuzz/corpus/HARNESS, the seeds,
# is only read), logs to build-fuzz/logs/HARNESS.log, and leaves what fails in build-fuzz/crashes/
# with the command that reproduces it. It goes on with the other harnesses, then exits 1 if any
# failed. Harness names may be given with or without their fuzz_ prefix.
set -eu

cd "$(dirname "$0")/.."
BUILD=build-fuzz
SECONDS_EACH=${FUZZ_SECONDS:-60}
# A harness input takes milliseconds: one that takes longer than this is a bug to look at.
TIMEOUT=${FUZZ_TIMEOUT:-25}
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

die() { echo "fuzz.sh: $*" >&2; exit 2; }

find_clang() {
    if [ -n "${CC:-}" ] && "$CC" --version 2>/dev/null | grep -q clang; then echo "$CC"; return; fi
    for c in clang clang-14 clang-15 clang-16 clang-17 clang-18; do
        if command -v "$c" >/dev/null 2>&1; then echo "$c"; return; fi
    done
    die "no clang found (libFuzzer needs it; Debian: apt-get install clang libclang-rt-14-dev)"
}

harnesses() {
    if [ $# -gt 0 ]; then
        for h in "$@"; do
            case $h in fuzz_*) echo "$h" ;; *) echo "fuzz_$h" ;; esac
        done
    else
        for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done
    fi
}

build() {
    cc=$(find_clang)
    # Static dependencies off, as under DROVER_SANITIZE: shared libraries link faster, and the
    # harnesses need nothing of what static linking buys the CLI.
    CC=$cc cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDROVER_FUZZ=ON \
        -DDROVER_STATIC_DEPS=OFF >/dev/null
    cmake --build "$BUILD" --target fuzzers -- -j"${FUZZ_BUILD_JOBS:-2}" >/dev/null
}

# The figures of a finished run, from its log: the last exec/s and cov lines libFuzzer printed.
summary() {
    execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$1" | tail -1 | grep -o "[0-9]*$" || true)
    rate=$(grep -o "stat::average_exec_per_sec: *[0-9]*" "$1" | tail -1 | grep -o "[0-9]*$" || true)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$1" | tail -1)
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$1" | tail -1)
    echo "${execs:-?} runs, ${rate:-?} exec/s, ${cov:-cov ?}, ${corp:-corp ?}"
}

run_one() {
    h=$1
    bin=$BUILD/$h
    [ -x "$bin" ] || die "$bin is not built (scripts/fuzz.sh build)"
    mkdir -p "$BUILD/corpus/$h" "$BUILD/crashes" "$BUILD/logs"
    log=$BUILD/logs/$h.log
    before=$(ls "$BUILD/crashes" | wc -l)
    dict=
    [ -f "tests/fuzz/$h.dict" ] && dict=-dict=tests/fuzz/$h.dict
    printf '%-14s %ss ... ' "$h" "$SECONDS_EACH"
    # shellcheck disable=SC2086 # $dict is one word or none
    if "$bin" -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb=2048 $dict \
        -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$h-" \
        "$BUILD/corpus/$h" "tests/fuzz/corpus/$h" >"$log" 2>&1; then
        echo "ok: $(summary "$log")"
        return 0
    fi
    echo "FAILED: $(summary "$log")"
    grep -m1 -E '^==[0-9]+==ERROR|^SUMMARY|runtime error|fuzz_[a-z]+: |ERROR: libFuzzer' "$log" |
        sed 's/^/    /' || true
    if [ "$(ls "$BUILD/crashes" | wc -l)" -gt "$before" ]; then
        artifact=$(ls -t "$BUILD/crashes" | head -1)
        echo "    input:     $BUILD/crashes/$artifact"
        echo "    reproduce: scripts/fuzz.sh repro $h $BUILD/crashes/$artifact"
    fi
    echo "    log:       $log"
    return 1
}

cmd=${1:-run}
[ $# -gt 0 ] && shift
case $cmd in
build)
    build
    ;;
run)
    [ -x "$BUILD/fuzz_parse" ] || build
    failed=0
    for h in $(harnesses "$@"); do
        run_one "$h" || failed=1
    done
    exit $failed
    ;;
corpus)
    [ -x "$BUILD/fuzz_parse" ] || build
    failed=0
    for h in $(harnesses "$@"); do
        printf '%-14s ' "$h"
        if "$BUILD/$h" -runs=0 -timeout="$TIMEOUT" "tests/fuzz/corpus/$h" >"$BUILD/$h.corpus.log" 2>&1; then
            echo "ok ($(ls "tests/fuzz/corpus/$h" | wc -l) inputs)"
        else
            echo "FAILED: see $BUILD/$h.corpus.log"
            failed=1
        fi
    done
    exit $failed
    ;;
repro)
    [ $# -ge 2 ] || die "usage: scripts/fuzz.sh repro HARNESS FILE…"
    h=$(harnesses "$1")
    shift
    exec "$BUILD/$h" -timeout="$TIMEOUT" "$@"
    ;;
*)
    die "usage: scripts/fuzz.sh build | run [HARNESS…] | corpus [HARNESS…] | repro HARNESS FILE…"
    ;;
esac
