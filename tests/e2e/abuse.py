#!/usr/bin/env python3
"""Abusive clients for t-abuse.sh and bench/robustness.sh: each mode does one bad thing to the
daemon's socket or to /metrics and prints what happened as one JSON line on stdout (when it ends,
or on SIGTERM for the modes that hold connections until killed).

  hold-http PORT N [--reconnect MS]    N connections to /metrics that never send a byte
  hold-sock PATH N [--reconnect MS]    the same on the unix socket
  wait-flood PATH ID BYTES             a `wait` for task ID, then BYTES of junk on the same
                                       connection
  partial PATH N                       N connections, each sending most of a LIMIT_FRAME frame
  headers PORT BYTES                   a GET /metrics whose headers are BYTES long
  slow-sock PATH OUT                   a request trickled one byte a second; writes the seconds
                                       until the daemon closed the connection to OUT
  idle-http PORT OUT                   a connection to /metrics that says nothing; likewise

--status FILE (any mode) writes "ready" to FILE once the attack is fully under way.
"""
import errno
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

FRAME = 4 << 20  # LIMIT_FRAME


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def ready(status):
    if status:
        with open(status + ".tmp", "w") as f:
            f.write("ready\n")
        os.rename(status + ".tmp", status)


def report(obj):
    print(json.dumps(obj), flush=True)


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def new_sock(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(addr)
    except BlockingIOError:
        if family == socket.AF_UNIX:  # the listen backlog is full: try again later
            s.close()
            return None
    except OSError:
        s.close()
        return None
    return s


def hold(family, addr, n, reconnect_ms, status):
    """Keeps n connections open (attempting again the ones not yet made), never sending; a
    connection the daemon closes is made again after reconnect_ms when that is given."""
    sel = selectors.DefaultSelector()
    stats = {"opened": 0, "closed_by_daemon": 0, "refused": 0}
    pending = [0.0] * n  # when to (re)try each slot; None = open
    socks = [None] * n
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    announced = False
    while not stop:
        now = time.monotonic()
        for i in range(n):
            if socks[i] is None and pending[i] is not None and pending[i] <= now:
                s = new_sock(family, addr)
                if s is None:
                    stats["refused"] += 1
                    pending[i] = now + 0.05
                    continue
                socks[i] = s
                pending[i] = None
                stats["opened"] += 1
                sel.register(s, selectors.EVENT_READ, i)
        if not announced and all(p is None for p in pending):
            ready(status)
            announced = True
        for key, _ in sel.select(timeout=0.02):
            i = key.data
            s = socks[i]
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if data:
                continue  # an error reply or a 503: the close follows
            sel.unregister(s)
            s.close()
            socks[i] = None
            stats["closed_by_daemon"] += 1
            pending[i] = (time.monotonic() + reconnect_ms / 1000.0) if reconnect_ms >= 0 else None
        if not announced and stats["opened"] >= n:
            ready(status)
            announced = True
    stats["open_at_end"] = sum(1 for s in socks if s is not None)
    report(stats)


def wait_flood(path, task, total):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(frame({"v": 1, "op": "wait", "ids": [int(task)]}))
    chunk = b"x" * (1 << 20)
    sent = 0
    s.settimeout(10)
    error = None
    try:
        while sent < total:
            sent += s.send(chunk[: min(len(chunk), total - sent)])
    except OSError as e:
        error = e.strerror
    reply = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            reply += b
    except OSError:
        pass
    report({"sent": sent, "send_error": error, "reply": reply[4:].decode(errors="replace")})


def partial(path, n, status):
    """n connections, each a header announcing a LIMIT_FRAME frame and all but its last byte."""
    head = struct.pack(">I", FRAME)
    want = 4 + FRAME - 1
    body = head + b"y" * (FRAME - 1)
    socks, sent, closed = [], [0] * n, [False] * n
    replies = {}
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.setblocking(False)
        socks.append(s)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    last_progress = time.monotonic()
    announced = False
    while not stop:
        progress = False
        for i, s in enumerate(socks):
            if closed[i]:
                continue
            try:
                b = s.recv(65536)
                if b == b"":
                    closed[i] = True
                    progress = True
                    continue
                replies[b[4:].decode(errors="replace")] = 1
                progress = True
            except BlockingIOError:
                pass
            except OSError:
                closed[i] = True
                progress = True
                continue
            if sent[i] < want:
                try:
                    k = s.send(body[sent[i]: sent[i] + (1 << 20)])
                    sent[i] += k
                    progress = progress or k > 0
                except BlockingIOError:
                    pass
                except OSError:
                    closed[i] = True
                    progress = True
                    try:  # the refusal came before the close
                        b = s.recv(65536)
                        if b:
                            replies[b[4:].decode(errors="replace")] = 1
                    except OSError:
                        pass
        now = time.monotonic()
        if progress:
            last_progress = now
        elif not announced and now - last_progress > 1.0:
            ready(status)
            announced = True
        time.sleep(0.005 if progress else 0.05)
    report({"connections": n, "closed_by_daemon": sum(closed), "bytes_sent": sum(sent),
            "replies": sorted(replies)[:3]})


def headers(port, total):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.settimeout(10)
    sent, error = 0, None
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Pad: ")
        chunk = b"a" * (1 << 20)
        while sent < total:
            sent += s.send(chunk[: min(len(chunk), total - sent)])
        s.sendall(b"\r\n\r\n")
    except OSError as e:
        error = e.strerror
    answer = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            answer += b
    except OSError:
        pass
    line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    report({"sent": sent, "send_error": error, "status_line": line})


def until_closed(s, trickle, out):
    start = time.monotonic()
    payload = frame({"v": 1, "op": "ls", "pad": "z" * 200})  # never completed: see below
    i = 0
    s.settimeout(1.0)
    while True:
        try:
            if trickle and i < len(payload) - 1:
                s.send(payload[i: i + 1])
                i += 1
            b = s.recv(65536)
            if b == b"":
                break
        except socket.timeout:
            continue
        except OSError:
            break
    with open(out, "w") as f:
        f.write("%.1f\n" % (time.monotonic() - start))


def main():
    args = sys.argv[1:]
    status = None
    if "--status" in args:
        k = args.index("--status")
        status = args[k + 1]
        del args[k: k + 2]
    reconnect = -1
    if "--reconnect" in args:
        k = args.index("--reconnect")
        reconnect = int(args[k + 1])
        del args[k: k + 2]
    raise_nofile()
    mode = args[0]
    if mode == "hold-http":
        hold(socket.AF_INET, ("127.0.0.1", int(args[1])), int(args[2]), reconnect, status)
    elif mode == "hold-sock":
        hold(socket.AF_UNIX, args[1], int(args[2]), reconnect, status)
    elif mode == "wait-flood":
        wait_flood(args[1], args[2], int(args[3]))
    elif mode == "partial":
        partial(args[1], int(args[2]), status)
    elif mode == "headers":
        headers(args[1], int(args[2]))
    elif mode == "slow-sock":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(args[1])
        ready(status)
        until_closed(s, True, args[2])
    elif mode == "idle-http":
        s = socket.create_connection(("127.0.0.1", int(args[1])))
        ready(status)
        until_closed(s, False, args[2])
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
