#!/usr/bin/python3
"""Train a one-hidden-layer MLP on two interleaved spirals, in numpy alone.

A real (if small) training run shaped the way drover expects:
  * each epoch appends one JSON line {"step", "epoch", "loss", "val_loss", "val_accuracy"} to
    $DROVER_METRICS_FILE (when set) and prints "epoch E loss L val_accuracy A";
  * each epoch ends with a checkpoint (weights, optimiser state, epoch, RNG state) written
    atomically to $DROVER_CHECKPOINT_DIR/ckpt.npz (when set), and a restarted run resumes from it
    at the next epoch, so a retry or a preempted trial loses at most the epoch in flight;
  * SIGTERM (drover's cancel, and ASHA's early stop) exits at once with status 143; the last
    finished epoch is already on disk.

Needs numpy as /usr/bin/python3 sees it: Debian's python3-numpy (apt-get install python3-numpy).
"""
import argparse
import json
import math
import os
import signal
import sys
import time

import numpy as np

DATA_SEED = 20240601   # the dataset and its split are the same for every trial
VAL_FRACTION = 0.2
CKPT_NAME = "ckpt.npz"
MOMENTUM = 0.9


# ---- data ----------------------------------------------------------------------------------

def make_dataset(n=2000, noise=0.25, turns=1.25, seed=DATA_SEED):
    """Two interleaved spirals, n points in all, labels 0/1; features scaled to about [-1, 1]."""
    rng = np.random.default_rng(seed)
    half = n // 2
    t = np.sqrt(rng.uniform(0.0, 1.0, size=n)) * turns * 2 * math.pi
    label = np.concatenate([np.zeros(half), np.ones(n - half)])
    angle = t + label * math.pi
    radius = t / (turns * 2 * math.pi)
    X = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    X += rng.normal(0.0, noise / (turns * 2 * math.pi), size=X.shape)
    return X.astype(np.float64), label.astype(np.float64)


def load_dataset(data_dir):
    """X.npy/y.npy written by prepare.py, or the generated dataset when data_dir is None."""
    if data_dir is None:
        return make_dataset()
    X = np.load(os.path.join(data_dir, "X.npy"))
    y = np.load(os.path.join(data_dir, "y.npy"))
    if X.ndim != 2 or X.shape[1] != 2 or y.shape != (X.shape[0],):
        raise SystemExit(f"{data_dir}: want X of shape (n, 2) and y of shape (n,)")
    return X.astype(np.float64), y.astype(np.float64)


def split(X, y):
    """The fixed train/validation split (the same permutation whatever the trial's seed)."""
    order = np.random.default_rng(DATA_SEED + 1).permutation(len(y))
    n_val = int(len(y) * VAL_FRACTION)
    val, train = order[:n_val], order[n_val:]
    return X[train], y[train], X[val], y[val]


# ---- model ---------------------------------------------------------------------------------

def init_params(hidden, rng):
    return {
        "W1": rng.normal(0.0, 1.0, size=(2, hidden)) * math.sqrt(2.0 / 2),
        "b1": np.zeros(hidden),
        "W2": rng.normal(0.0, 1.0, size=(hidden, 1)) * math.sqrt(1.0 / hidden),
        "b2": np.zeros(1),
    }


def forward(params, X):
    """Hidden activations and the logit of class 1."""
    h = np.tanh(X @ params["W1"] + params["b1"])
    return h, (h @ params["W2"] + params["b2"])[:, 0]


def bce(logit, y):
    """Mean binary cross-entropy from logits, without overflow for large |logit|."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.mean(np.logaddexp(0.0, logit) - y * logit))


def evaluate(params, X, y):
    """(loss, accuracy) on a split."""
    _, logit = forward(params, X)
    return bce(logit, y), float(np.mean((logit > 0) == (y > 0.5)))


def sgd_epoch(params, velocity, X, y, lr, batch_size, rng):
    """One pass of minibatch SGD with momentum; returns the mean training loss."""
    order = rng.permutation(len(y))
    total = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, len(y), batch_size):
            idx = order[start:start + batch_size]
            xb, yb = X[idx], y[idx]
            h, logit = forward(params, xb)
            total += bce(logit, yb) * len(idx)
            g = (1.0 / (1.0 + np.exp(-logit)) - yb)[:, None] / len(idx)   # dLoss/dlogit
            grads = {"W2": h.T @ g, "b2": g.sum(axis=0)}
            gh = (g @ params["W2"].T) * (1.0 - h * h)
            grads["W1"] = xb.T @ gh
            grads["b1"] = gh.sum(axis=0)
            for k in params:
                velocity[k] = MOMENTUM * velocity[k] - lr * grads[k]
                params[k] += velocity[k]
    return total / len(y)


# ---- checkpoints ---------------------------------------------------------------------------

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
        with np.load(self.path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def save(self, params, velocity, epoch, rng, hidden, last_metrics, path=None):
        """Writes to self.path, or to path when given (--save)."""
        path = path or self.path
        if path is None:
            return
        arrays = {f"param_{k}": v for k, v in params.items()}
        arrays.update({f"velocity_{k}": v for k, v in velocity.items()})
        arrays["epoch"] = np.array(epoch)
        arrays["hidden"] = np.array(hidden)
        arrays["rng_state"] = np.array(json.dumps(rng.bit_generator.state))
        arrays["last_metrics"] = np.array(json.dumps(last_metrics))
        tmp = f"{path}.tmp.{os.getpid()}"
        self.writing = True
        try:
            with open(tmp, "wb") as f:        # a file object: savez adds no ".npz" to it
                np.savez(f, **arrays)
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


def params_from_checkpoint(ckpt):
    params = {k[len("param_"):]: ckpt[k] for k in ckpt if k.startswith("param_")}
    velocity = {k[len("velocity_"):]: ckpt[k] for k in ckpt if k.startswith("velocity_")}
    return params, velocity


# ---- metrics -------------------------------------------------------------------------------

def finite_or_none(x):
    # json.dumps writes NaN/Infinity, which are not JSON: a diverged run's line would be dropped
    # whole (val_accuracy included) by a strict reader such as drover's.
    return x if math.isfinite(x) else None


def append_metrics(path, record):
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def metrics_has_epoch(path, epoch):
    """Whether the metrics file already holds a line for this epoch (see resume)."""
    try:
        with open(path) as f:
            lines = [line for line in f if line.strip()]
    except FileNotFoundError:
        return False
    for line in reversed(lines):
        try:
            return json.loads(line).get("epoch") == epoch
        except ValueError:
            continue
    return False


# ---- main ----------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=0.3, help="learning rate (SGD, momentum 0.9)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, default=32, help="hidden units")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0, help="initialisation and shuffling")
    p.add_argument("--data", metavar="DIR", help="X.npy and y.npy from prepare.py "
                   "(default: generate the same dataset)")
    p.add_argument("--save", metavar="FILE", help="when training is done, also write the "
                   "final checkpoint here (for a pipeline's evaluate stage)")
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

    X_train, y_train, X_val, y_val = split(*load_dataset(args.data))
    rng = np.random.default_rng(args.seed)
    params = init_params(args.hidden, rng)
    velocity = {k: np.zeros_like(v) for k, v in params.items()}
    done = 0
    last = {}   # the last finished epoch's metrics

    state = ckpt.load()
    if state is not None:
        if int(state["hidden"]) != args.hidden:
            raise SystemExit(f"{ckpt.path}: a checkpoint of {int(state['hidden'])} hidden "
                             f"units, not {args.hidden}")
        params, velocity = params_from_checkpoint(state)
        rng.bit_generator.state = json.loads(str(state["rng_state"]))
        done = int(state["epoch"])
        print(f"resumed from epoch {done}", flush=True)
        # Killed between the checkpoint and the metrics line: write the line now, so every
        # finished epoch is reported once.
        last = json.loads(str(state["last_metrics"]))
        if metrics_path and last and not metrics_has_epoch(metrics_path, done):
            append_metrics(metrics_path, last)

    for epoch in range(done + 1, args.epochs + 1):
        loss = sgd_epoch(params, velocity, X_train, y_train, args.lr, args.batch_size, rng)
        val_loss, val_accuracy = evaluate(params, X_val, y_val)
        if args.epoch_sleep > 0:
            time.sleep(args.epoch_sleep)
        record = {"step": epoch, "epoch": epoch, "loss": finite_or_none(loss),
                  "val_loss": finite_or_none(val_loss), "val_accuracy": val_accuracy}
        # Checkpoint first: drover may stop the trial as soon as it reads the metrics line, and
        # what it stops should be on disk.
        ckpt.save(params, velocity, epoch, rng, args.hidden, record)
        append_metrics(metrics_path, record)
        last = record
        print(f"epoch {epoch} loss {loss:.4f} val_accuracy {val_accuracy:.4f}", flush=True)

    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        ckpt.save(params, velocity, max(done, args.epochs), rng, args.hidden, last, args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
