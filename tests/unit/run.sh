#!/usr/bin/env bash
# run.sh TEST [ARGS…]: runs one cmocka test binary for ctest. Its exit status, except that a run
# in which a test was skipped (cmocka's skip(), or a "[  SKIPPED ]" line of the test's own) and
# none failed exits 77, which ctest reports as skipped; under DROVER_NO_SKIP=1 (CI) it fails.
set -uo pipefail
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ] && grep -q '^\[  SKIPPED \]' <<< "$out"; then
    if [ "${DROVER_NO_SKIP:-0}" = 1 ]; then
        echo "FAIL: $(basename "$1") skipped a test (DROVER_NO_SKIP=1: nothing may be skipped)" >&2
        exit 1
    fi
    exit 77
fi
exit "$rc"
