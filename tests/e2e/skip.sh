# skip REASON: this test cannot run on this machine. Exits 77, which ctest reports as skipped
# (SKIP_RETURN_CODE in CMakeLists.txt), never as passed; under DROVER_NO_SKIP=1 (CI, where
# nothing may be skipped: .ci/run) it fails instead. Sourced by lib.sh and by the tests that do
# without it.
skip() {
    if [ "${DROVER_NO_SKIP:-0}" = 1 ]; then
        echo "FAIL: cannot run: $* (DROVER_NO_SKIP=1: nothing may be skipped)" >&2
        exit 1
    fi
    echo "SKIP: $*"
    exit 77
}
