#!/usr/bin/python3
"""Compare trained models: evaluate checkpoints on the validation split, or summarise metrics.

  evaluate.py --checkpoints RUN_DIR_OR_NPZ... [--data DIR]
      loads each ckpt.npz (a directory means DIR/ckpt.npz) written by train.py, measures its loss
      and accuracy on the validation split (the same fixed split train.py holds out) and prints
      them, best first;
  evaluate.py --metrics FILE...
      reads train.py's JSON-lines metrics files and prints each run's last and best val_accuracy.

Exit status: 0, or 1 when nothing could be read. Needs Debian's python3-numpy.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True   # no __pycache__ left in the examples directory
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402


def checkpoint_path(path):
    return os.path.join(path, train.CKPT_NAME) if os.path.isdir(path) else path


def evaluate_checkpoints(paths, data_dir):
    _, _, X_val, y_val = train.split(*train.load_dataset(data_dir))
    rows = []
    for path in paths:
        file = checkpoint_path(path)
        try:
            with np.load(file, allow_pickle=False) as z:
                params = {k[len("param_"):]: z[k] for k in z.files if k.startswith("param_")}
                epoch = int(z["epoch"])
        except (OSError, KeyError, ValueError) as e:
            print(f"{file}: cannot read: {e}", file=sys.stderr)
            continue
        loss, accuracy = train.evaluate(params, X_val, y_val)
        rows.append((accuracy, loss, epoch, params["W1"].shape[1], path))
    rows.sort(key=lambda r: (-r[0], r[1]))
    if rows:
        print(f"{'val_accuracy':>12} {'val_loss':>9} {'epoch':>5} {'hidden':>6}  checkpoint")
    for accuracy, loss, epoch, hidden, path in rows:
        print(f"{accuracy:12.4f} {loss:9.4f} {epoch:5d} {hidden:6d}  {path}")
    return rows


def summarise_metrics(paths):
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                records = [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read: {e}", file=sys.stderr)
            continue
        accuracies = [r["val_accuracy"] for r in records
                      if isinstance(r.get("val_accuracy"), (int, float))]
        if not accuracies:
            print(f"{path}: no val_accuracy", file=sys.stderr)
            continue
        rows.append((max(accuracies), accuracies[-1], len(records), path))
    rows.sort(key=lambda r: -r[0])
    if rows:
        print(f"{'best':>7} {'last':>7} {'epochs':>6}  metrics")
    for best, last, epochs, path in rows:
        print(f"{best:7.4f} {last:7.4f} {epochs:6d}  {path}")
    return rows


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoints", nargs="+", metavar="PATH",
                       help="ckpt.npz files or the directories holding them")
    which.add_argument("--metrics", nargs="+", metavar="FILE", help="metrics JSON-lines files")
    p.add_argument("--data", metavar="DIR", help="the dataset the models were trained on "
                   "(prepare.py's output; default: the generated one)")
    args = p.parse_args(argv)

    if args.checkpoints:
        rows = evaluate_checkpoints(args.checkpoints, args.data)
    else:
        rows = summarise_metrics(args.metrics)
    if not rows:
        print("nothing to evaluate", file=sys.stderr)
        return 1
    print(f"best: {rows[0][-1]} (val_accuracy {rows[0][0]:.4f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
