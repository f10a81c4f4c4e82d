#!/usr/bin/env bash
# bench/amqp.sh: the RabbitMQ door (docs/AMQP.md) against a private broker node (started as
# the tests start theirs: tests/e2e/amqp-lib.sh; root, rabbitmq-server and python3-pika needed).
#   intake: N task messages waiting in the queue (held tasks: nothing runs), then the daemon
#     started: the time until all N are durable tasks, acknowledged (the queue empty), against N
#     `drover submit --hold` on the socket, one after the other and 8 clients at once;
#   fan-out: an --array of N `true`, with and without the door: the wall time until every task
#     ended, and with the door until every event (4 a task) is confirmed by the broker.
# Usage: [N=1000] bench/amqp.sh [BUILD_DIR]   (Markdown on stdout)
set -euo pipefail
BUILD=$(readlink -f "${1:-build}")
N=${N:-1000}
export DROVER=$BUILD/drover TMPDIR=${TMPDIR:-/dev/shm}
HERE=$(cd "$(dirname "$0")/.." && pwd)
. "$HERE/tests/e2e/lib.sh"
. "$HERE/tests/e2e/amqp-lib.sh"
amqp_start >&2
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
count() { "$DROVER" ls --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
amqp_field() { "$DROVER" gpus --json | python3 -c "import json,sys; print(json.load(sys.stdin)['amqp']$1)"; }
fresh() { # fresh HOME [amqp]: a new state directory, its daemon started
    "$DROVER" shutdown >/dev/null 2>&1 || true
    export DROVER_HOME=$TMP/$1
    mkdir -p "$DROVER_HOME"
    [ -z "${2:-}" ] || printf 'amqp = %s\namqp-prefetch = 256\n' "$AMQP_URL" > "$DROVER_HOME/drover.conf"
    "$DROVER" ls >/dev/null
}

echo "| $N submissions, held (nothing runs) | wall s | tasks/s |"
echo "|---|---|---|"
fresh socket
t0=$(now)
for i in $(seq "$N"); do "$DROVER" submit --hold -- true >/dev/null; done
t1=$(now)
echo "| socket, drover submit one after the other | $(elapsed "$t0" "$t1") | $(awk -v n="$N" -v s="$(elapsed "$t0" "$t1")" 'BEGIN { printf "%.0f", n / s }') |"
fresh socket8
t0=$(now)
pids=()
for c in $(seq 8); do
    (for i in $(seq $((N / 8))); do "$DROVER" submit --hold -- true >/dev/null; done) &
    pids+=($!)
done
wait "${pids[@]}" # (not every job: the broker is one)
t1=$(now)
echo "| socket, 8 clients at once | $(elapsed "$t0" "$t1") | $(awk -v n="$N" -v s="$(elapsed "$t0" "$t1")" 'BEGIN { printf "%.0f", n / s }') |"
fresh amqp 1
until [ "$(amqp_field '["up"]')" = True ]; do sleep 0.1; done
"$DROVER" shutdown >/dev/null # the queue now exists; fill it while no daemon takes from it
amqp_tool publish "$AMQP_URL" drover.submit '{"command": "true", "hold": true}' --message-id 'b{n}' --count "$N"
t0=$(now)
"$DROVER" ls >/dev/null
until [ "$(count)" -ge "$N" ] && [ "$(amqp_tool count "$AMQP_URL" drover.submit)" = 0 ]; do sleep 0.05; done
t1=$(now)
echo "| amqp, $N messages waiting in the queue (prefetch 256) | $(elapsed "$t0" "$t1") | $(awk -v n="$N" -v s="$(elapsed "$t0" "$t1")" 'BEGIN { printf "%.0f", n / s }') |"

echo
echo "| an --array of $N true, 2 at a time | all ended, s | all events confirmed, s | events |"
echo "|---|---|---|---|"
fresh plain
t0=$(now)
"$DROVER" wait $("$DROVER" submit --array "0-$((N - 1))" -- true) >/dev/null
t1=$(now)
echo "| without the door | $(elapsed "$t0" "$t1") | - | - |"
fresh fan 1
until [ "$(amqp_field '["up"]')" = True ]; do sleep 0.1; done
p0=$(amqp_field '["events_published"]')
t0=$(now)
"$DROVER" wait $("$DROVER" submit --array "0-$((N - 1))" -- true) >/dev/null
t1=$(now)
until [ "$(amqp_field '["events_waiting"]')" = 0 ]; do sleep 0.05; done
t2=$(now)
echo "| with the door (amqp) | $(elapsed "$t0" "$t1") | $(elapsed "$t0" "$t2") | $(( $(amqp_field '["events_published"]') - p0 )) |"
