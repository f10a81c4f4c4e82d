#!/usr/bin/env python3
"""bench/api.py — the HTTP API under load (run by bench/api.sh, which starts the daemon).

Measures, against a live daemon whose HTTP API is at $URL with token $TOKEN:
  latency   GET /api/v1/tasks (a page of 100, and one task) with many tasks stored: p50/p99
  fanout    50 clients on /api/v1/events while a 1,000-task array runs: every client gets every
            task's end, and how long after the end each got it (p50/p99/max)
  cli       `drover ls` latency with the HTTP side idle, then with 8 clients hammering the API
  usage     the daemon's CPU and resident memory over an interval (with whatever is connected)
Prints Markdown rows."""
import http.client
import json
import selectors
import socket
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

URL = urllib.parse.urlparse(os.environ["URL"])
TOKEN = os.environ["TOKEN"]
DROVER = os.environ["DROVER"]
AUTH = {"Authorization": "Bearer " + TOKEN}


def conn():
    return http.client.HTTPConnection(URL.hostname, URL.port, timeout=60)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def get(c, path):
    c.request("GET", path, headers=AUTH)
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit("GET %s: %d %s" % (path, r.status, body[:200]))
    return r, body


def latency(n=500):
    c = conn()
    _, body = get(c, "/api/v1/tasks?all=1&limit=1")
    first = json.loads(body)[0]["id"]
    rows = []
    for label, path in (("GET /api/v1/tasks?all=1&limit=100 (first page)", "/api/v1/tasks?all=1&limit=100"),
                        ("GET /api/v1/tasks?all=1&limit=100&offset=50000", "/api/v1/tasks?all=1&limit=100&offset=50000"),
                        ("GET /api/v1/tasks?state=held&limit=100", "/api/v1/tasks?state=held&limit=100"),
                        ("GET /api/v1/tasks/ID", "/api/v1/tasks/%d" % first)):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            get(c, path)
            times.append((time.perf_counter() - t0) * 1000)
        rows.append("| %s | %.2f | %.2f |" % (label, pct(times, 50), pct(times, 99)))
    print("| request (keep-alive, %d each) | p50 ms | p99 ms |" % n)
    print("|---|---|---|")
    print("\n".join(rows))


def sse_open():
    """A raw socket on /api/v1/events?types=task, its response head read."""
    s = socket.create_connection((URL.hostname, URL.port))
    s.sendall(("GET /api/v1/events?types=task HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % TOKEN).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("events: closed before the head")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit("events: %r" % head[:100])
    s.setblocking(False)
    return s, head.split(b"\r\n\r\n", 1)[1]


def fanout(clients=50, tasks=1000):
    """One thread reads every client's socket (selectors), so that the reader is not what is
    measured: each event is stamped as it arrives, against its "time" (when it was committed)."""
    sel = selectors.DefaultSelector()
    got = []
    for i in range(clients):
        s, rest = sse_open()
        got.append({})
        sel.register(s, selectors.EVENT_READ, [i, rest])
    t0 = time.time()
    cpu0 = daemon_cpu()
    subprocess.run([DROVER, "submit", "--array", "0-%d" % (tasks - 1), "--", "true"],
                   check=True, capture_output=True)
    deadline = time.time() + 600
    while sum(len(g) for g in got) < clients * tasks and time.time() < deadline:
        for key, _ in sel.select(timeout=1):
            data = key.fileobj.recv(1 << 20)
            if not data:
                sys.exit("events: a stream closed")
            now = time.time() * 1000
            i = key.data[0]
            buf = key.data[1] + data
            # chunked framing: drop the size lines; events end with a blank line
            *events, key.data[1] = buf.split(b"\n\n")
            for ev in events:
                for line in ev.split(b"\n"):
                    if line.startswith(b"data: "):
                        d = json.loads(line[6:])
                        if d.get("state") == "succeeded":
                            got[i][d["task"]] = now - d["time"]
    wall = time.time() - t0
    cpu = daemon_cpu() - cpu0
    delays = [v for g in got for v in g.values()]
    complete = sum(1 for g in got if len(g) >= tasks)
    print("| SSE fan-out: %d clients, %d-task array | %d of %d clients got all %d ends; delay after"
          " the commit p50 %.1f ms, p99 %.1f ms, max %.1f ms; wall %.2f s; daemon CPU %.2f s (%.2f ms"
          " per task) |" % (clients, tasks, complete, clients, tasks, pct(delays, 50), pct(delays, 99),
                            max(delays), wall, cpu, cpu * 1000 / tasks))


def array_alone(tasks=1000):
    """The same array with no event client: the daemon's CPU per task without fan-out."""
    cpu0, t0 = daemon_cpu(), time.time()
    ids = subprocess.run([DROVER, "submit", "--array", "0-%d" % (tasks - 1), "--", "true"],
                         check=True, capture_output=True, text=True).stdout.split()
    subprocess.run([DROVER, "wait"] + ids, check=False, stdout=subprocess.DEVNULL)
    print("| the same array, no event client | wall %.2f s; daemon CPU %.2f s (%.2f ms per task) |"
          % (time.time() - t0, daemon_cpu() - cpu0, (daemon_cpu() - cpu0) * 1000 / tasks))


def daemon_pid():
    return int(open(os.path.join(os.environ["DROVER_HOME"], "daemon.lock")).read().split()[0])


def daemon_cpu():
    fields = open("/proc/%d/stat" % daemon_pid()).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon_rss_mib():
    for line in open("/proc/%d/status" % daemon_pid()):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1


def cli_ms(n=100):
    """`drover show 1` and `drover ls --state running`: what a person types while the queue is
    deep (plain `drover ls` would print every one of the stored tasks)."""
    times = []
    for i in range(n):
        argv = [DROVER, "show", "1"] if i % 2 == 0 else [DROVER, "ls", "--state", "running"]
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1000)
    return pct(times, 50), pct(times, 99)


def hammer(stop, counter):
    c = conn()
    while not stop.is_set():
        get(c, "/api/v1/tasks?limit=100")
        counter.append(1)


def cli():
    idle = cli_ms()
    stop, counter, threads = threading.Event(), [], []
    for _ in range(8):
        t = threading.Thread(target=hammer, args=(stop, counter), daemon=True)
        t.start()
        threads.append(t)
    time.sleep(0.5)
    t0 = time.time()
    busy = cli_ms()
    rate = len(counter) / (time.time() - t0 + 0.5)
    stop.set()
    for t in threads:
        t.join()
    print("| CLI (`drover show 1`, `drover ls --state running`), HTTP idle | p50 %.1f ms, p99 %.1f ms |"
          % idle)
    print("| the same, 8 HTTP clients busy (≈%.0f GET /api/v1/tasks?limit=100 per s) | p50 %.1f ms,"
          " p99 %.1f ms |" % (rate, busy[0], busy[1]))


def usage(label, seconds):
    cpu0, t0 = daemon_cpu(), time.time()
    time.sleep(seconds)
    cpu = daemon_cpu() - cpu0
    print("| %s | CPU %.2f %% over %d s; RSS %.1f MiB |" % (label, 100 * cpu / (time.time() - t0),
                                                         seconds, daemon_rss_mib()))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "latency":
        latency()
    elif what == "fanout":
        fanout()
    elif what == "array":
        array_alone()
    elif what == "cli":
        cli()
    elif what == "usage":
        usage(sys.argv[2], int(sys.argv[3]))
