#!/usr/bin/python3
"""Train a one-hidden-layer MLP on two interleaved spirals with PyTorch (CUDA when available).

The same task, arguments, metrics and checkpoint/resume behaviour as examples/numpy/train.py:
  * each epoch appends {"step", "epoch", "loss", "val_loss", "val_accuracy"} as one JSON line to
    $DROVER_METRICS_FILE (when set) and prints "epoch E loss L val_accuracy A";
  * each epoch ends with a checkpoint (model, optimiser, epoch, RNG state) saved atomically to
    $DROVER_CHECKPOINT_DIR/ckpt.pt (torch.save to a temporary file, then os.replace), and a
    restarted run resumes from it at the next epoch;
  * SIGTERM exits at once with status 143; the last finished epoch is already on disk.

Needs PyTorch as /usr/bin/python3 sees it: Debian's python3-torch provides it (and pulls in
python3-numpy, which the dataset comes from: the very points examples/numpy trains on).
"""
import argparse
import importlib.util
import json
import math
import os
import pickle
import signal
import sys
import time

import torch
from torch import nn


def load_numpy_example():
    # The dataset, its fixed train/validation split and the metrics-file helpers are the numpy
    # example's, so the two examples' numbers can be compared. Loaded by path: this file is
    # also called train.py, so a plain "import train" could find this one.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numpy", "train.py")
    sys.dont_write_bytecode = True   # no __pycache__ left in the examples directory
    spec = importlib.util.spec_from_file_location("drover_example_spirals", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


spirals = load_numpy_example()

CKPT_NAME = "ckpt.pt"
MOMENTUM = 0.9


class Checkpointer:
    """Atomic checkpoints; SIGTERM during a write waits for the rename, so a checkpoint on disk is
    always a whole epoch (the previous one or this one)."""

    def __init__(self, directory):
        self.path = os.path.join(directory, CKPT_NAME) if directory else None
        self.writing = False
        self.term_pending = False

    def load(self):
        if self.path is None or not os.path.exists(self.path):
            return None
        # On the CPU: the generator state must stay a CPU tensor; load_state_dict moves the
        # model's and the optimiser's tensors to the model's device.
        try:
            return torch.load(self.path, map_location="cpu", weights_only=True)
        except (TypeError, pickle.UnpicklingError):
            # torch older than 1.13 has no weights_only, and 1.13's (Debian 12's) refuses the
            # plain floats an optimiser's state holds. The file is this run's own checkpoint,
            # written by save() below into the task's own checkpoint directory.
            return torch.load(self.path, map_location="cpu")

    def save(self, state, path=None):
        """Writes to self.path, or to path when given (--save)."""
        path = path or self.path
        if path is None:
            return
        tmp = f"{path}.tmp.{os.getpid()}"
        self.writing = True
        try:
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            self.writing = False
        if self.term_pending:
            sys.exit(143)

    def on_sigterm(self, signum, frame):
        if self.writing:
            self.term_pending = True   # exit once this checkpoint is in place
        else:
            sys.exit(143)              # the last finished epoch is on disk already


def make_model(hidden):
    return nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, 1))


def run_epoch(model, optimizer, loss_fn, X, y, batch_size, generator, device):
    """One pass of minibatch SGD; returns the mean training loss."""
    model.train()
    order = torch.randperm(len(y), generator=generator).to(device)
    total = 0.0
    for start in range(0, len(y), batch_size):
        idx = order[start:start + batch_size]
        optimizer.zero_grad()
        loss = loss_fn(model(X[idx])[:, 0], y[idx])
        loss.backward()
        optimizer.step()
        total += loss.item() * len(idx)
    return total / len(y)


@torch.no_grad()
def evaluate(model, loss_fn, X, y):
    """(loss, accuracy) on a split."""
    model.eval()
    logit = model(X)[:, 0]
    return loss_fn(logit, y).item(), ((logit > 0) == (y > 0.5)).float().mean().item()


def finite_or_none(x):
    # json.dumps writes NaN/Infinity, which are not JSON: a diverged run's line would be dropped
    # whole (val_accuracy included) by a strict reader such as drover's.
    return x if math.isfinite(x) else None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=0.3, help="learning rate (SGD, momentum 0.9)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, default=32, help="hidden units")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0, help="initialisation and shuffling")
    p.add_argument("--data", metavar="DIR", help="X.npy and y.npy from "
                   "examples/numpy/prepare.py (default: generate the same dataset)")
    p.add_argument("--save", metavar="FILE", help="when training is done, also write the "
                   "final checkpoint here")
    p.add_argument("--epoch-sleep", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long each epoch (tests that kill a run mid-way)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.hidden < 1 or args.batch_size < 1 or not args.lr > 0:
        p.error("--epochs, --hidden, --batch-size and --lr must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    ckpt = Checkpointer(os.environ.get("DROVER_CHECKPOINT_DIR"))
    signal.signal(signal.SIGTERM, ckpt.on_sigterm)
    metrics_path = os.environ.get("DROVER_METRICS_FILE")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"device {device}", flush=True)

    X_train, y_train, X_val, y_val = (
        torch.as_tensor(a, dtype=torch.float32, device=device)
        for a in spirals.split(*spirals.load_dataset(args.data)))
    torch.manual_seed(args.seed)                  # the initial weights
    generator = torch.Generator().manual_seed(args.seed)   # the shuffling (CPU)
    model = make_model(args.hidden).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=MOMENTUM)
    loss_fn = nn.BCEWithLogitsLoss()
    done, last = 0, {}

    state = ckpt.load()
    if state is not None:
        if state["hidden"] != args.hidden:
            raise SystemExit(f"{ckpt.path}: a checkpoint of {state['hidden']} hidden units, "
                             f"not {args.hidden}")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        done, last = state["epoch"], json.loads(state["last_metrics"])
        print(f"resumed from epoch {done}", flush=True)
        # Killed between the checkpoint and the metrics line: write the line now, so every
        # finished epoch is reported once.
        if metrics_path and last and not spirals.metrics_has_epoch(metrics_path, done):
            spirals.append_metrics(metrics_path, last)

    def snapshot(epoch):
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch, "hidden": args.hidden, "generator": generator.get_state(),
                "last_metrics": json.dumps(last)}

    for epoch in range(done + 1, args.epochs + 1):
        loss = run_epoch(model, optimizer, loss_fn, X_train, y_train, args.batch_size,
                         generator, device)
        val_loss, val_accuracy = evaluate(model, loss_fn, X_val, y_val)
        if args.epoch_sleep > 0:
            time.sleep(args.epoch_sleep)
        last = {"step": epoch, "epoch": epoch, "loss": finite_or_none(loss),
                "val_loss": finite_or_none(val_loss), "val_accuracy": val_accuracy}
        # Checkpoint first: drover may stop the trial as soon as it reads the metrics line, and
        # what it stops should be on disk.
        ckpt.save(snapshot(epoch))
        spirals.append_metrics(metrics_path, last)
        print(f"epoch {epoch} loss {loss:.4f} val_accuracy {val_accuracy:.4f}", flush=True)

    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        ckpt.save(snapshot(max(done, args.epochs)), args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
