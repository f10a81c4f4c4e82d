#!/usr/bin/env python3
"""check_schedule.py: an independent check of a schedule written by `drover simulate --schedule-out`.

Usage:
  check_schedule.py --trace FILE --format itp|alibaba2023|csv (--cluster NxG[:MEM] | --nodes FILE)
                    [--whole-gpus] --schedule FILE [--expect-skipped N]

It re-reads the trace and the machine itself, from the documented formats only, and checks:
  (a) every job of the trace that ran (alibaba2023: not Pending) is listed exactly once, but for
      exactly --expect-skipped of them (default 0), which are missing; no unknown ids;
  (b) start >= submit, and the submit column is the trace's (times compared in ms);
  (c) end - start == the job's duration, exactly (ms);
  (d) a single-node job lists exactly its GPU count of distinct valid GPUs of one valid node (a
      CPU-only job none); a job asking more GPUs than the largest node spans >= 2 distinct valid
      nodes, each taken whole, holding >= its GPUs, none of them superfluous;
  (e) at every instant (ends before starts at equal times): the fractions on each GPU sum to at
      most 1, an exclusive use shares its GPU with nothing; with --nodes also each node's CPU
      milli and memory are not exceeded, and a job with a gpu_spec runs only on listed models;
  (f) a job asking a fraction of a GPU has that fraction on each of its GPUs (`N@F`), unless
      --whole-gpus, when it takes whole GPUs (no `@`).
Prints one line per violation (the first 20, then a count) and exits 1 on any; otherwise prints a
one-line summary and exits 0. Unreadable inputs (trace, node list, schedule header) exit 2.
"""
import argparse
import sys
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

MAX_SHOWN = int(__import__("os").environ.get("CHECK_MAX_SHOWN", "20"))
EPS = 1e-9


class InputError(Exception):
    pass


def ms_of(text, what):
    """Seconds (decimals allowed, >= 0) to integer ms, rounding half up at the 3rd decimal."""
    s = text.strip()
    if s.isdigit():
        return int(s) * 1000
    try:
        d = Decimal(s)
    except InvalidOperation:
        raise InputError("%s %r is not a number of seconds" % (what, text))
    if not d.is_finite() or d < 0:
        raise InputError("%s %r is not a number of seconds >= 0" % (what, text))
    return int((d * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def sched_ms(text):
    """A schedule time: an integer, or a decimal with at most 3 digits after the point. None if
    it is neither."""
    if text.isdigit():
        return int(text) * 1000
    whole, dot, frac = text.partition(".")
    if dot and whole.isdigit() and frac.isdigit() and 1 <= len(frac) <= 3:
        return int(whole) * 1000 + int(frac.ljust(3, "0"))
    return None


class Job:
    __slots__ = ("id", "line", "submit", "duration", "gpus", "frac", "cpu", "mem", "spec")

    def __init__(self, jid, line, submit, duration, gpus, frac=None, cpu=0, mem=0, spec=None):
        self.id = jid
        self.line = line
        self.submit = submit        # ms
        self.duration = duration    # ms
        self.gpus = gpus
        self.frac = frac            # None = whole GPUs, else the share of each GPU in (0, 1)
        self.cpu = cpu              # milli-CPU asked (alibaba2023)
        self.mem = mem              # MiB asked (alibaba2023)
        self.spec = spec            # set of allowed models, None = any


def whole_number(text, what, lineno=0):
    s = text.strip()
    if not s.isdigit():
        raise InputError("%s %r is not a whole number >= 0" % (what, text))
    return int(s)


def read_trace(path, fmt):
    """Returns (jobs that ran, number of Pending rows)."""
    jobs = []
    pending = set()
    with open(path, encoding="utf-8-sig", newline="") as fp:
        first = True
        for lineno, raw in enumerate(fp, 1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            if fmt == "csv" and line.lstrip().startswith("#"):
                continue
            f = line.split(",")
            if first:
                first = False
                head = "name" if fmt == "alibaba2023" else "job_id"
                if f[0].strip() == head:
                    continue
            try:
                if fmt == "itp":
                    if len(f) != 4:
                        raise InputError("expected 4 fields, found %d" % len(f))
                    jobs.append(Job(f[0], lineno, ms_of(f[1], "submission_time"),
                                    ms_of(f[2], "duration"),
                                    whole_number(f[3], "num_gpu", lineno)))
                elif fmt == "csv":
                    if not 4 <= len(f) <= 6:
                        raise InputError("expected 4 to 6 fields, found %d" % len(f))
                    gpus = whole_number(f[3], "gpus", lineno)
                    frac = None
                    if len(f) >= 5 and f[4].strip():
                        v = float(f[4])
                        if not 0 < v <= 1:
                            raise InputError("gpu_mem_fraction %r is not in (0,1]" % f[4])
                        if v < 1 and gpus > 0:
                            frac = v
                    jobs.append(Job(f[0], lineno, ms_of(f[1], "submit_time"),
                                    ms_of(f[2], "duration"), gpus, frac))
                else:
                    if len(f) != 11:
                        raise InputError("expected 11 fields, found %d" % len(f))
                    if f[7].strip() == "Pending":
                        pending.add(f[0])
                        continue
                    gpus = whole_number(f[3], "num_gpu", lineno)
                    milli = whole_number(f[4], "gpu_milli", lineno)
                    frac = milli / 1000.0 if gpus > 0 and milli < 1000 else None
                    if gpus > 0 and milli == 0:
                        raise InputError("gpu_milli 0 for a GPU task")
                    spec = {m for m in f[5].split("|") if m} or None
                    submit = ms_of(f[8], "creation_time")
                    duration = ms_of(f[9], "deletion_time") - ms_of(f[10], "scheduled_time")
                    if duration < 0:
                        raise InputError("deletion_time is before scheduled_time")
                    jobs.append(Job(f[0], lineno, submit, duration, gpus, frac,
                                    whole_number(f[1], "cpu_milli", lineno),
                                    whole_number(f[2], "memory_mib", lineno), spec))
            except (InputError, ValueError) as e:
                raise InputError("%s:%d: %s" % (path, lineno, e))
    return jobs, pending


class Node:
    __slots__ = ("name", "ngpus", "cpu", "mem", "model")

    def __init__(self, name, ngpus, cpu=None, mem=None, model=None):
        self.name = name
        self.ngpus = ngpus
        self.cpu = cpu      # milli-CPU, None = not accounted
        self.mem = mem      # MiB, None = not accounted
        self.model = model


def read_cluster(spec):
    text = spec.split(":", 1)[0]
    n, sep, g = text.partition("x")
    if not sep or not n.isdigit() or not g.isdigit() or int(n) < 1:
        raise InputError("--cluster %r: expected NODESxGPUS[:MEM]" % spec)
    return [Node(str(i), int(g)) for i in range(int(n))]


def read_nodes(path):
    nodes = []
    with open(path, encoding="utf-8-sig", newline="") as fp:
        for lineno, raw in enumerate(fp, 1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            f = line.split(",")
            if lineno == 1 and f[0].strip() == "sn":
                continue
            if len(f) != 5 or not f[1].isdigit() or not f[2].isdigit() or not f[3].isdigit():
                raise InputError("%s:%d: expected sn,cpu_milli,memory_mib,gpu,model" % (path, lineno))
            nodes.append(Node(f[0], int(f[3]), int(f[1]), int(f[2]), f[4]))
    if not nodes:
        raise InputError("%s: no nodes" % path)
    return nodes


class Checker:
    def __init__(self, args):
        self.args = args
        self.violations = []
        self.nviol = 0

    def bad(self, msg):
        self.nviol += 1
        if len(self.violations) < MAX_SHOWN:
            self.violations.append(msg)

    def run(self):
        a = self.args
        jobs, pending = read_trace(a.trace, a.format)
        if a.nodes:
            nodes = read_nodes(a.nodes)
            host = True
        else:
            nodes = read_cluster(a.cluster)
            host = False
        node_index = {}
        for i, n in enumerate(nodes):
            if n.name in node_index:
                raise InputError("node %r is listed twice" % n.name)
            node_index[n.name] = i
        max_gpus = max(n.ngpus for n in nodes)

        by_id = {}
        for j in jobs:
            by_id.setdefault(j.id, []).append(j)

        # ---- read the schedule, match rows to jobs (a) ----
        placed = []   # (job, start, end, [node indices], [(node, gpu, fraction or None)])
        unused = {k: list(v) for k, v in by_id.items()}   # trace jobs not yet listed
        with open(a.schedule, encoding="utf-8", newline="") as fp:
            header = fp.readline().rstrip("\r\n")
            if header != "job_id,submit,start,end,node,gpus":
                raise InputError("%s: the header is %r, not job_id,submit,start,end,node,gpus"
                                 % (a.schedule, header))
            for lineno, raw in enumerate(fp, 2):
                line = raw.rstrip("\r\n")
                if not line:
                    self.bad("schedule line %d: an empty line" % lineno)
                    continue
                f = line.split(",")
                if len(f) != 6:
                    self.bad("schedule line %d: %d fields, expected 6: %s" % (lineno, len(f), line))
                    continue
                jid = f[0]
                left = unused.get(jid)
                if left is None:
                    self.bad("job %s (schedule line %d): %s" % (
                        jid, lineno, "Pending in the trace (it never ran)" if jid in pending
                        else "not a job of the trace"))
                    continue
                if not left:
                    self.bad("job %s (schedule line %d): listed more than once" % (jid, lineno))
                    continue
                sub, start, end = sched_ms(f[1]), sched_ms(f[2]), sched_ms(f[3])
                # The same id twice in the trace: pair rows with jobs by submit time.
                job = next((c for c in left if c.submit == sub), left[0])
                left.remove(job)
                if sub is None or start is None or end is None:
                    self.bad("job %s (schedule line %d): a time is not seconds with at most 3 "
                             "decimals: %s" % (jid, lineno, line))
                    continue
                self.check_row(job, lineno, sub, start, end, f[4], f[5], nodes, node_index,
                               max_gpus, host, placed)

        missing = sorted((j for v in unused.values() for j in v), key=lambda j: j.line)
        nmissing = len(missing)
        if nmissing != a.expect_skipped:
            # Those that plainly fit the machine first: the likelier to have been lost.
            total = sum(n.ngpus for n in nodes)
            order = sorted(missing, key=lambda j: (j.gpus > total, j.line))
            shown = list(dict.fromkeys(j.id for j in order))[:5]
            self.bad("%d jobs of the trace are missing from the schedule, expected %d%s"
                     % (nmissing, a.expect_skipped,
                        (" (e.g. " + ", ".join(shown) + ")") if shown else ""))

        peak = self.sweep(placed, nodes, host)
        return len(jobs), len(pending), nmissing, len(placed), peak

    def check_row(self, job, lineno, sub, start, end, node_field, gpu_field, nodes, node_index,
                  max_gpus, host, placed):
        jid = "job %s (trace line %d)" % (job.id, job.line)
        a = self.args
        if sub != job.submit:
            self.bad("%s: submit %s in the schedule, %s in the trace"
                     % (jid, fmt_ms(sub), fmt_ms(job.submit)))
        if start < job.submit:
            self.bad("%s: starts at %s, before its submit %s"
                     % (jid, fmt_ms(start), fmt_ms(job.submit)))
        if end - start != job.duration:
            self.bad("%s: runs %s (start %s, end %s), its duration is %s"
                     % (jid, fmt_ms(end - start), fmt_ms(start), fmt_ms(end),
                        fmt_ms(job.duration)))
        names = node_field.split(";")
        idx = []
        for n in names:
            if n not in node_index:
                self.bad("%s: node %r does not exist" % (jid, n))
                return
            idx.append(node_index[n])
        if len(set(idx)) != len(idx):
            self.bad("%s: node list %r repeats a node" % (jid, node_field))
            return

        gpus = []   # (node, gpu, fraction or None = exclusive)
        if job.gpus > max_gpus:
            # (d) spanning whole nodes
            if len(idx) < 2:
                self.bad("%s: asks %d GPUs (> %d on the largest node) but lists one node %r"
                         % (jid, job.gpus, max_gpus, node_field))
                return
            total = sum(nodes[i].ngpus for i in idx)
            if total < job.gpus:
                self.bad("%s: asks %d GPUs, its nodes %s hold %d"
                         % (jid, job.gpus, node_field, total))
            smallest = min(nodes[i].ngpus for i in idx)
            if total - smallest >= job.gpus:
                self.bad("%s: asks %d GPUs, its nodes %s hold %d: a node is wasted"
                         % (jid, job.gpus, node_field, total))
            listed = self.parse_gpus(jid, gpu_field)
            if listed is None:
                return
            if any(fr is not None for _, fr in listed):
                self.bad("%s: spans whole nodes but lists fractions %r" % (jid, gpu_field))
            lset = sorted(g for g, _ in listed)
            if not any(lset == list(range(nodes[i].ngpus)) for i in idx):
                self.bad("%s: spans nodes %s but lists GPUs %r, not every GPU of a node"
                         % (jid, node_field, gpu_field))
            for i in idx:
                for g in range(nodes[i].ngpus):
                    gpus.append((i, g, None))
        else:
            if len(idx) != 1:
                self.bad("%s: asks %d GPUs (fits one node) but lists nodes %r"
                         % (jid, job.gpus, node_field))
                return
            node = idx[0]
            listed = self.parse_gpus(jid, gpu_field)
            if listed is None:
                return
            ids = [g for g, _ in listed]
            if len(set(ids)) != len(ids):
                self.bad("%s: GPU list %r repeats a GPU" % (jid, gpu_field))
                return
            if len(ids) != job.gpus:
                self.bad("%s: asks %d GPUs, the schedule lists %d (%r)"
                         % (jid, job.gpus, len(ids), gpu_field))
            for g in ids:
                if g >= nodes[node].ngpus:
                    self.bad("%s: GPU %d does not exist on node %s (%d GPUs)"
                             % (jid, g, nodes[node].name, nodes[node].ngpus))
                    return
            shared = job.frac is not None and not a.whole_gpus
            for g, fr in listed:
                # (f) the fraction asked, on each GPU
                if shared:
                    if fr is None:
                        self.bad("%s: asks %g of a GPU, GPU %d is listed whole"
                                 % (jid, job.frac, g))
                    elif abs(fr - job.frac) > 5e-4 + EPS:
                        self.bad("%s: asks %g of a GPU, GPU %d is listed @%g"
                                 % (jid, job.frac, g, fr))
                elif fr is not None:
                    self.bad("%s: takes whole GPUs, GPU %d is listed @%g" % (jid, g, fr))
                gpus.append((node, g, job.frac if shared else None))
        if host:
            for i in idx:
                n = nodes[i]
                if job.spec is not None and job.gpus > 0 and n.model not in job.spec:
                    self.bad("%s: gpu_spec %s, runs on node %s of model %s"
                             % (jid, "|".join(sorted(job.spec)), n.name, n.model))
        placed.append((job, start, end, idx, gpus))

    def parse_gpus(self, jid, field):
        if field == "":
            return []
        out = []
        for part in field.split(";"):
            g, at, fr = part.partition("@")
            if not g.isdigit():
                self.bad("%s: bad GPU %r in %r" % (jid, part, field))
                return None
            frac = None
            if at:
                try:
                    frac = float(fr)
                except ValueError:
                    frac = -1.0
                if not 0 < frac <= 1:
                    self.bad("%s: bad fraction %r in %r" % (jid, part, field))
                    return None
            out.append((int(g), frac))
        return out

    def sweep(self, placed, nodes, host):
        """(e): capacity at every instant. Returns the most GPU jobs seen running at once."""
        events = {}
        zero = {}
        for p in placed:
            job, start, end = p[0], p[1], p[2]
            if end < start:
                continue   # already reported by (c)
            if end == start:
                # Holds nothing over time, but must fit beside what runs across that instant.
                zero.setdefault(start, []).append(p)
                continue
            events.setdefault(start, ([], []))[1].append(p)
            events.setdefault(end, ([], []))[0].append(p)
        for t in zero:
            events.setdefault(t, ([], []))
        gpu_sum = {}     # (node, gpu) -> sum of fractions
        gpu_excl = {}    # (node, gpu) -> exclusive holders
        gpu_users = {}   # (node, gpu) -> holders
        holders = {}     # (node, gpu) -> set of job ids, for messages
        cpu = [0] * len(nodes)
        mem = [0] * len(nodes)
        reported = set()
        running = peak = 0

        def fits(p, t, add):
            job = p[0]
            jid = "job %s (trace line %d)" % (job.id, job.line)
            ok = True
            for node, g, fr in p[4]:
                key = (node, g)
                users = gpu_users.get(key, 0)
                what = "%s:%d" % (nodes[node].name, g)
                if fr is None:
                    if users > 0:
                        ok = False
                        self.report(reported, (job.id, key),
                                    "%s: takes GPU %s whole at %s while %s hold it"
                                    % (jid, what, fmt_ms(t), others(holders, key)))
                else:
                    if gpu_excl.get(key, 0) > 0:
                        ok = False
                        self.report(reported, (job.id, key),
                                    "%s: shares GPU %s at %s, but it is held whole (by one of %s)"
                                    % (jid, what, fmt_ms(t), others(holders, key)))
                    elif gpu_sum.get(key, 0.0) + fr > 1 + EPS:
                        ok = False
                        self.report(reported, (job.id, key),
                                    "%s: GPU %s over-committed at %s: %g + %g > 1 (with %s)"
                                    % (jid, what, fmt_ms(t), gpu_sum.get(key, 0.0), fr,
                                       others(holders, key)))
                if add:
                    gpu_users[key] = users + 1
                    if fr is None:
                        gpu_excl[key] = gpu_excl.get(key, 0) + 1
                    else:
                        gpu_sum[key] = gpu_sum.get(key, 0.0) + fr
                    holders.setdefault(key, set()).add(job.id)
            if host:
                c = job.cpu if job.cpu > 0 or job.gpus > 0 else 1
                for node in p[3]:
                    n = nodes[node]
                    if cpu[node] + c > n.cpu:
                        self.report(reported, (job.id, "cpu", node),
                                    "%s: node %s CPU over-committed at %s: %d + %d > %d milli"
                                    % (jid, n.name, fmt_ms(t), cpu[node], c, n.cpu))
                    if mem[node] + job.mem > n.mem:
                        self.report(reported, (job.id, "mem", node),
                                    "%s: node %s memory over-committed at %s: %d + %d > %d MiB"
                                    % (jid, n.name, fmt_ms(t), mem[node], job.mem, n.mem))
                    if add:
                        cpu[node] += c
                        mem[node] += job.mem
            return ok

        for t in sorted(events):
            ends, starts = events[t]
            for p in ends:
                job = p[0]
                for node, g, fr in p[4]:
                    key = (node, g)
                    gpu_users[key] -= 1
                    if fr is None:
                        gpu_excl[key] -= 1
                    else:
                        gpu_sum[key] -= fr
                        if gpu_users[key] == 0:
                            gpu_sum[key] = 0.0   # no drift from float sums
                    holders[key].discard(job.id)
                if host:
                    c = job.cpu if job.cpu > 0 or job.gpus > 0 else 1
                    for node in p[3]:
                        cpu[node] -= c
                        mem[node] -= job.mem
                running -= 1
            for p in zero.get(t, ()):
                fits(p, t, False)
            for p in starts:
                fits(p, t, True)
                running += 1
            peak = max(peak, running)
        return peak

    def report(self, reported, key, msg):
        if key in reported:
            return
        reported.add(key)
        self.bad(msg)


def others(holders, key):
    ids = sorted(holders.get(key, ()))
    if not ids:
        return "nothing"
    s = ", ".join(ids[:3])
    return s + (" and %d more" % (len(ids) - 3) if len(ids) > 3 else "")


def fmt_ms(ms):
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms % 1000 == 0:
        return "%s%ds" % (sign, ms // 1000)
    return ("%s%d.%03d" % (sign, ms // 1000, ms % 1000)).rstrip("0") + "s"


def main():
    ap = argparse.ArgumentParser(description="check a drover simulate schedule against its trace")
    ap.add_argument("--trace", required=True)
    ap.add_argument("--format", required=True, choices=["itp", "alibaba2023", "csv"])
    m = ap.add_mutually_exclusive_group(required=True)
    m.add_argument("--cluster")
    m.add_argument("--nodes")
    ap.add_argument("--whole-gpus", action="store_true")
    ap.add_argument("--schedule", required=True)
    ap.add_argument("--expect-skipped", type=int, default=0)
    args = ap.parse_args()
    ck = Checker(args)
    try:
        njobs, pending, missing, listed, peak = ck.run()
    except (InputError, OSError, UnicodeDecodeError) as e:
        print("check_schedule: %s" % e, file=sys.stderr)
        return 2
    if ck.nviol:
        for v in ck.violations:
            print("VIOLATION: " + v)
        if ck.nviol > len(ck.violations):
            print("... and %d more violations" % (ck.nviol - len(ck.violations)))
        print("check_schedule: %s: %d violations" % (args.schedule, ck.nviol), file=sys.stderr)
        return 1
    print("ok: %s: %d jobs scheduled, %d skipped, %d pending rows; at most %d running at once"
          % (args.schedule, listed, missing, pending, peak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
