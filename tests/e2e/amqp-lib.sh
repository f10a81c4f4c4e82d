# The tests against a real RabbitMQ (t-amqp*.sh): a private broker node of the test's own — its
# node name, AMQP and distribution ports and data directory — listening on 127.0.0.1, started by
# hand (no systemd) and stopped when the test exits. Source it after lib.sh, then call amqp_start
# before the daemon needs the broker. amqp_tool (tests/e2e/amqp_tool.py) is the other side:
# publish, bind, drain, count.
#
# Needs root (rabbitmq-server drops to the user rabbitmq, whose directories these must be) and
# the Debian packages rabbitmq-server and python3-pika; without them the test is skipped. The
# node is reachable as guest/guest, which RabbitMQ allows from localhost only. Facts this relies
# on: ../shared/testbeds/README.md ("RabbitMQ"). Erlang's epmd, started by the first node, stays
# (one per machine, shared by every node, as a system's would be).

AMQP_TOOL_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/amqp_tool.py
# Nodes started here, one file each (named by the test's pid, holding the node's pid file): a
# test killed with -9 never ran its teardown, and the next amqp_start stops what it left.
AMQP_NODES=/tmp/drover-amqp-nodes

amqp_tool() { /usr/bin/python3 "$AMQP_TOOL_PY" "$@"; }

# amqp_start: starts the node and waits until it takes connections. Exports AMQP_PORT, AMQP_URL
# (amqp://guest:guest@127.0.0.1:PORT/), AMQP_NODE and the RABBITMQ_* variables that make
# rabbitmqctl talk to it; AMQP_DIR is its directory. Chains its teardown before the EXIT trap
# already set (lib.sh's cleanup, or a test's own).
amqp_start() {
    local cmd prev
    [ "$(id -u)" = 0 ] || skip "needs root (rabbitmq-server runs as the user rabbitmq)"
    for cmd in rabbitmq-server rabbitmqctl; do
        command -v "$cmd" >/dev/null || skip "no $cmd (apt-get install rabbitmq-server)"
    done
    id rabbitmq >/dev/null 2>&1 || skip "no user rabbitmq (apt-get install rabbitmq-server)"
    /usr/bin/python3 -c 'import pika' 2>/dev/null ||
        skip "no pika for /usr/bin/python3 (apt-get install python3-pika)"
    amqp_stop_leftovers
    AMQP_DIR=$TMP/rabbitmq
    chmod 0711 "$TMP" # the user rabbitmq reaches its directory through it
    mkdir -p "$AMQP_DIR"
    echo "[]." > "$AMQP_DIR/plugins"
    chown -R rabbitmq:rabbitmq "$AMQP_DIR"
    export AMQP_NODE="drover-$$@localhost"
    export RABBITMQ_NODENAME=$AMQP_NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT RABBITMQ_DIST_PORT
    RABBITMQ_NODE_PORT=$(free_port)
    RABBITMQ_DIST_PORT=$(free_port)
    export RABBITMQ_MNESIA_BASE=$AMQP_DIR/mnesia RABBITMQ_LOG_BASE=$AMQP_DIR/log
    export RABBITMQ_PID_FILE=$AMQP_DIR/pid RABBITMQ_ENABLED_PLUGINS_FILE=$AMQP_DIR/plugins
    export AMQP_PORT=$RABBITMQ_NODE_PORT
    export AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/"
    prev=$(trap -p EXIT)
    prev=${prev#trap -- }
    eval "AMQP_PREV_TRAP=${prev% EXIT}"
    trap amqp_exit EXIT
    mkdir -p "$AMQP_NODES"
    echo "$RABBITMQ_PID_FILE" > "$AMQP_NODES/$$"
    amqp_start_broker
}

# amqp_start_broker: starts the node (again, after amqp_stop_broker: the same name, ports and
# data, so durable queues and persistent messages are there again) and waits until it is up.
amqp_start_broker() {
    rm -f "$RABBITMQ_PID_FILE"
    rabbitmq-server </dev/null >>"$AMQP_DIR/out.log" 2>&1 &
    AMQP_SERVER_PID=$!
    wait_until 90 amqp_started
}

# amqp_started: the node runs and its application is up. await_startup answers at once (an
# error) while the node's Erlang distribution is not up yet: the pid file comes first.
amqp_started() {
    proc_gone "$AMQP_SERVER_PID" &&
        fail "rabbitmq-server exited: $(tail -5 "$AMQP_DIR/out.log")"
    [ -s "$RABBITMQ_PID_FILE" ] &&
        rabbitmqctl -q -n "$AMQP_NODE" await_startup --timeout 60 >>"$AMQP_DIR/out.log" 2>&1
}

# amqp_stop_broker: stops the node (the Erlang VM and all) and waits until it is gone: the
# broker is away, as if its machine were down, until amqp_start_broker.
amqp_stop_broker() {
    local pid
    pid=$(cat "$RABBITMQ_PID_FILE" 2>/dev/null) || return 0
    [ -n "$pid" ] && ! proc_gone "$pid" || return 0
    # stop PID_FILE returns once the VM is gone; a node that does not answer is killed. (No
    # wait_until: this runs in the EXIT trap too, where failing would skip the rest.)
    rabbitmqctl -q -n "$AMQP_NODE" stop "$RABBITMQ_PID_FILE" >>"$AMQP_DIR/out.log" 2>&1 || true
    for _ in $(seq 300); do
        proc_gone "$pid" && break
        sleep 0.1
    done
    proc_gone "$pid" || kill -9 "$pid" 2>/dev/null || true
    wait "$AMQP_SERVER_PID" 2>/dev/null || true
    rm -f "$RABBITMQ_PID_FILE"
}

amqp_exit() {
    local rc=$?
    set +e
    amqp_stop_broker
    rm -f "$AMQP_NODES/$$"
    (exit "$rc")
    eval "${AMQP_PREV_TRAP:-exit $rc}"
}

# amqp_stop_leftovers: kills the nodes of tests that are gone (killed before their teardown).
amqp_stop_leftovers() {
    local f owner pid
    for f in "$AMQP_NODES"/*; do
        [ -f "$f" ] || continue
        owner=${f##*/}
        proc_gone "$owner" || continue
        pid=$(cat "$(cat "$f")" 2>/dev/null) && kill -9 "$pid" 2>/dev/null
        rm -f "$f"
    done
}
