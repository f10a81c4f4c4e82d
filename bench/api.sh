#!/usr/bin/env bash
# bench/api.sh: the HTTP API under load (docs/BENCHMARKS.md, "HTTP API").
#   1. GET /api/v1/tasks latency (p50/p99) with 100,000 tasks stored;
#   2. `drover ls` latency with the HTTP side idle and with 8 clients hammering it;
#   3. SSE fan-out: 50 clients on /api/v1/events during a 1,000-task array;
#   4. the daemon's CPU and memory, idle, and with the dashboard open in headless Chromium
#      (when node_modules/puppeteer-core and chromium are there).
# Usage: bench/api.sh [BUILD_DIR]   (Markdown on stdout)
set -euo pipefail
BUILD=${1:-build}
export DROVER=$(readlink -f "$BUILD/drover")
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/drover-bench-api.XXXXXX)
export DROVER_HOME=$WORK/home DROVER_FAKE_GPUS=${DROVER_FAKE_GPUS:-4x80G}
trap '"$DROVER" shutdown >/dev/null 2>&1 || true; [ -n "${DASH:-}" ] && kill "$DASH" 2>/dev/null; rm -rf "$WORK"' EXIT
mkdir -p "$DROVER_HOME"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export URL=http://127.0.0.1:$PORT
echo "http = 127.0.0.1:$PORT" > "$DROVER_HOME/drover.conf"
export TOKEN=$("$DROVER" token create --name bench)
STORED=${STORED:-100000}
"$DROVER" submit --hold --array "0-$((STORED - 1))" -- true >/dev/null
echo "### $STORED tasks stored (held), $(nproc) CPUs, $(date -u +%F)"
echo
python3 "$HERE/api.py" latency
echo
echo "| measure | result |"
echo "|---|---|"
python3 "$HERE/api.py" cli
python3 "$HERE/api.py" usage "daemon idle, no HTTP client" 20
python3 "$HERE/api.py" array
python3 "$HERE/api.py" fanout
if [ -d "$HERE/../node_modules/puppeteer-core" ] && command -v chromium >/dev/null; then
    LOGIN=$("$DROVER" dashboard 2>/dev/null)
    node "$HERE/dashboard-open.mjs" "$LOGIN" 80 >/dev/null 2>&1 &
    DASH=$!
    sleep 10 # let the page load and settle before measuring
    python3 "$HERE/api.py" usage "daemon with the dashboard open (Queue page, live)" 30
    "$DROVER" submit --array 0-199 -- true >/dev/null
    python3 "$HERE/api.py" usage "the same during a 200-task array" 20
    kill "$DASH" 2>/dev/null || true
else
    echo "| dashboard open | not measured: needs npm ci and chromium |"
fi
