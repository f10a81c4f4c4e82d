#!/usr/bin/python3
"""Write the two-spirals dataset that train.py trains on, as DIR/X.npy and DIR/y.npy.

train.py makes the same dataset itself when it is not given --data; this is the "prepare" stage of
a pipeline (examples/pipeline.yaml), and a way to train on other data: any X.npy of shape (n, 2)
with labels y.npy of shape (n,) in {0, 1} will do.

Needs Debian's python3-numpy, as /usr/bin/python3 sees it.
"""
import argparse
import os
import sys

import numpy as np

sys.dont_write_bytecode = True   # no __pycache__ left in the examples directory
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (the dataset lives with the model that uses it)


def save_atomically(path, array):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        np.save(f, array)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write into")
    p.add_argument("--n", type=int, default=2000, help="points (half of each class)")
    p.add_argument("--noise", type=float, default=0.25)
    p.add_argument("--turns", type=float, default=1.25, help="turns of each spiral")
    p.add_argument("--seed", type=int, default=train.DATA_SEED)
    args = p.parse_args(argv)
    if args.n < 10:
        p.error("--n: at least 10 points")

    X, y = train.make_dataset(args.n, args.noise, args.turns, args.seed)
    os.makedirs(args.out, exist_ok=True)
    save_atomically(os.path.join(args.out, "X.npy"), X)
    save_atomically(os.path.join(args.out, "y.npy"), y)
    n_val = int(len(y) * train.VAL_FRACTION)
    print(f"wrote {len(y)} points ({int(y.sum())} of class 1) to {args.out}: "
          f"{len(y) - n_val} for training, {n_val} for validation", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
