#!/usr/bin/env bash
# The AMQP I/O thread (daemon/amqp-io.c) alone against a real RabbitMQ node: no broker, a wrong
# password, connect, deliveries with ack, reject and prefetch, publishes with confirms, the broker
# away and back (generations, redelivery), the broker frozen (heartbeats), stop. The checks are in
# tests/amqp/amqp_io_check.c; this starts the node (amqp-lib.sh) and runs it. Then the fixture's
# own stop and restart: the same node, its durable queue and persistent message still there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/amqp-lib.sh"

CHECK=${DROVER_BUILD:-$(dirname "$DROVER")}/tests/amqp/amqp_io_check
[ -x "$CHECK" ] || fail "no $CHECK (make amqp_io_check)"
amqp_start
AMQP_TOOL_PY=$AMQP_TOOL_PY "$CHECK" "$AMQP_PORT" 2>&1 | tee "$TMP/check.out" ||
    fail "amqp_io_check failed"
# A sanitizer build (make asan) reports UBSan's findings and goes on: they fail the test too.
! grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" "$TMP/check.out" ||
    fail "amqp_io_check: a sanitizer report (above)"

t "the fixture: amqp_stop_broker, amqp_start_broker keep the node's data"
# amqp_io_check left one message (m4) ready in check.submit.
expect_eq "$(amqp_tool count "$AMQP_URL" check.submit)" 1 "ready before the stop"
amqp_stop_broker
expect_exit 2 amqp_tool count "$AMQP_URL" check.submit
amqp_start_broker
expect_eq "$(amqp_tool count "$AMQP_URL" check.submit)" 1 "ready after the restart"
amqp_tool drain "$AMQP_URL" check.submit --count 1 | grep -q '"message_id": "m4"' ||
    fail "the message after the restart is not m4"
done_testing
