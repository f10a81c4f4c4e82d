#!/usr/bin/env python3
"""check_store.py: the invariants of one fault-injection point of tests/e2e/t-fault-store.sh.

Usage: check_store.py POINT_DIR

POINT_DIR holds what the test recorded while the daemon ran under the failio shim and after a
normal restart:
  acked      "LABEL ID" per submission the CLI acknowledged (an id printed, exit 0)
  refused    "LABEL RC" per submission the CLI refused (exit 1: the daemon said it could not store it)
  seen/ID.json   `drover show --json` of a task seen ended while the faulty daemon ran
  final/ID.json  `drover show --json` after the restart, of every task there is
  marker     "ID ATTEMPT" per run of a task (each task appends one line when it starts)
  state      the failio shim's counters (struct failio_state in tests/fault/failio.c)

The first line printed is the shim's counters: "CALLS INJECTED OP(FILE)/ERRNO" (OP "-" when no
fault was injected).

Invariants (a violation prints one line starting "VIOLATION" and the exit status is 1):
  1. nothing lost: every acknowledged task exists after the restart;
  2. nothing run twice: each (task, attempt) ran at most once, and every run is a recorded
     attempt with a real outcome (an attempt the store forgot would hide a second run);
  3. the right end: A, B and D succeed on their first attempt, C fails once then succeeds;
  4. an end is final: a task seen ended by a client keeps that state and those attempts.
Notes (printed, not failures): a refused submission that exists after the restart.
"""
import collections
import json
import os
import struct
import sys

EXPECTED = {  # label -> attempt outcomes in order
    "A": ["succeeded"],
    "B": ["succeeded"],
    "C": ["failed", "succeeded"],
    "D": ["succeeded"],
}
RAN = {"succeeded", "failed", "timed_out", "cancelled", "oom", "stalled", "gpu_fault"}


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.split() for l in f if l.strip()]


def load(path):
    with open(path) as f:
        return json.load(f)


def attempts_of(task):
    return [(a["attempt"], a["outcome"], a["exit_code"]) for a in task["attempt_list"]]


def shim_state(path):
    """calls, injected and the first failed call, from struct failio_state."""
    raw = open(path, "rb").read() if os.path.exists(path) else b""
    if len(raw) < 128:
        return 0, 0, "-"
    _, calls, injected, _, _, err = struct.unpack_from("<QQQQii", raw)
    op = raw[40:64].split(b"\0")[0].decode()
    name = raw[64:128].split(b"\0")[0].decode()
    return calls, injected, f"{op}({name})/{os.strerror(err) if err else '-'}".replace(" ", "_")


def main():
    d = sys.argv[1]
    print(*shim_state(os.path.join(d, "state")))
    bad = []
    notes = []
    acked_list = [(label, int(i)) for label, i in lines(os.path.join(d, "acked"))]
    acked = {i: label for label, i in acked_list}
    if len(acked) != len(acked_list):
        bad.append(f"two acknowledged submissions were given the same id: {acked_list}")
    refused = [label for label, _ in lines(os.path.join(d, "refused"))]
    final_dir = os.path.join(d, "final")
    final = {int(n[:-5]): load(os.path.join(final_dir, n)) for n in os.listdir(final_dir)}
    final_ids = set(final)

    for i, label in acked.items():
        if i not in final:
            bad.append(f"task {label}={i} was acknowledged but is gone after the restart")
    for i in sorted(final_ids - set(acked)):
        notes.append(f"task {i} ({' '.join(final[i]['command'][-1:])!r}) exists although no"
                     f" submission was acknowledged for it (refused: {refused or 'none'})")

    runs = collections.Counter((int(t), int(a)) for t, a in lines(os.path.join(d, "marker")))
    for (task, attempt), n in sorted(runs.items()):
        if n > 1:
            bad.append(f"task {task} attempt {attempt} ran {n} times")
    for i, task in final.items():
        recorded = {a for a, outcome, _ in attempts_of(task) if outcome in RAN}
        ran = {a for t, a in runs if t == i}
        if ran - recorded:
            bad.append(f"task {i} ran attempts {sorted(ran - recorded)} that the store does not"
                       f" record as run (recorded: {attempts_of(task)})")
        if recorded - ran:
            bad.append(f"task {i}: the store records attempts {sorted(recorded - ran)} that"
                       f" never ran")

    for i, label in acked.items():
        task = final.get(i)
        if task is None:
            continue
        outcomes = [o for _, o, _ in attempts_of(task)]
        if task["state"] != "succeeded" or outcomes != EXPECTED[label]:
            bad.append(f"task {label}={i} ended {task['state']} with attempts {outcomes},"
                       f" expected succeeded with {EXPECTED[label]}")

    seen_dir = os.path.join(d, "seen")
    for name in sorted(os.listdir(seen_dir)) if os.path.isdir(seen_dir) else []:
        seen = load(os.path.join(seen_dir, name))
        task = final.get(seen["id"])
        if task is None:
            bad.append(f"task {seen['id']} was seen {seen['state']} and is gone after the restart")
        elif (task["state"], attempts_of(task)) != (seen["state"], attempts_of(seen)):
            bad.append(f"task {seen['id']} was seen {seen['state']} {attempts_of(seen)} and is"
                       f" {task['state']} {attempts_of(task)} after the restart")

    for line in bad:
        print("VIOLATION:", line)
    for line in notes:
        print("note:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
