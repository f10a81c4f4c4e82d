#!/usr/bin/python3
"""A broker's other side for the AMQP tests (tests/e2e/amqp-lib.sh): publishes, binds, drains
and counts with pika (Debian's python3-pika, importable by /usr/bin/python3 only).

  publish URL QUEUE BODY [--message-id ID] [--count N]
      Declares QUEUE durable (as the daemon does) and publishes BODY to it through the default
      exchange, persistent, publisher-confirmed. BODY "-" is stdin. With --count N, N messages;
      "{n}" in BODY and ID becomes 1..N.
  bind URL EXCHANGE QUEUE PATTERN
      Declares the topic EXCHANGE and the queue QUEUE (both durable) and binds them by PATTERN.
  drain URL QUEUE [--count N] [--timeout S]
      Prints each message as one JSON line {"routing_key", "message_id", "delivery_mode",
      "content_type", "redelivered", "body"} and acknowledges it. Without --count: the messages
      ready now. With --count N: waits up to S seconds (10) for N of them; fewer is exit 1.
  count URL QUEUE
      Prints how many messages QUEUE holds ready (not those delivered and unacknowledged).

Bad usage or a broker that cannot be reached: one line on stderr, exit 2."""
import argparse
import json
import sys
import time

import pika


def connect(url):
    params = pika.URLParameters(url)
    params.connection_attempts = 1
    params.socket_timeout = 5
    return pika.BlockingConnection(params)


def publish(args):
    body = sys.stdin.read() if args.body == "-" else args.body
    conn = connect(args.url)
    ch = conn.channel()
    ch.queue_declare(args.queue, durable=True)
    ch.confirm_delivery()
    for n in range(1, args.count + 1):
        props = pika.BasicProperties(delivery_mode=2)
        if args.message_id is not None:
            props.message_id = args.message_id.replace("{n}", str(n))
        ch.basic_publish("", args.queue, body.replace("{n}", str(n)).encode(), props)
    conn.close()


def bind(args):
    conn = connect(args.url)
    ch = conn.channel()
    ch.exchange_declare(args.exchange, exchange_type="topic", durable=True)
    ch.queue_declare(args.queue, durable=True)
    ch.queue_bind(args.queue, args.exchange, routing_key=args.pattern)
    conn.close()


def line(method, props, body):
    return json.dumps({
        "routing_key": method.routing_key,
        "message_id": props.message_id,
        "delivery_mode": props.delivery_mode,
        "content_type": props.content_type,
        "redelivered": method.redelivered,
        "body": body.decode("utf-8", "replace"),
    })


def drain(args):
    conn = connect(args.url)
    ch = conn.channel()
    got = 0
    if args.count is None:
        while True:
            method, props, body = ch.basic_get(args.queue)
            if method is None:
                break
            print(line(method, props, body), flush=True)
            ch.basic_ack(method.delivery_tag)
        conn.close()
        return 0
    deadline = time.monotonic() + args.timeout
    ch.basic_qos(prefetch_count=args.count)
    for method, props, body in ch.consume(args.queue, inactivity_timeout=0.1):
        if method is not None:
            print(line(method, props, body), flush=True)
            ch.basic_ack(method.delivery_tag)
            got += 1
        if got >= args.count or time.monotonic() >= deadline:
            break
    ch.cancel()
    conn.close()
    if got < args.count:
        print("amqp_tool: drain: %d of %d messages from %s in %gs" %
              (got, args.count, args.queue, args.timeout), file=sys.stderr)
        return 1
    return 0


def count(args):
    conn = connect(args.url)
    ch = conn.channel()
    ok = ch.queue_declare(args.queue, passive=True)
    print(ok.method.message_count)
    conn.close()


def main():
    p = argparse.ArgumentParser(prog="amqp_tool")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("publish")
    s.add_argument("url")
    s.add_argument("queue")
    s.add_argument("body")
    s.add_argument("--message-id")
    s.add_argument("--count", type=int, default=1)
    s = sub.add_parser("bind")
    s.add_argument("url")
    s.add_argument("exchange")
    s.add_argument("queue")
    s.add_argument("pattern")
    s = sub.add_parser("drain")
    s.add_argument("url")
    s.add_argument("queue")
    s.add_argument("--count", type=int)
    s.add_argument("--timeout", type=float, default=10.0)
    s = sub.add_parser("count")
    s.add_argument("url")
    s.add_argument("queue")
    args = p.parse_args()
    try:
        return {"publish": publish, "bind": bind, "drain": drain, "count": count}[args.cmd](args) or 0
    except pika.exceptions.AMQPError as e:
        print("amqp_tool: %s: %s" % (args.cmd, repr(e) if not str(e) else e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
