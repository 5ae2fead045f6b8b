#!/usr/bin/env python
"""Test accuracy along the path of exact BVM, step by step.

Why BVM returns the mean of its last two centers (docs/solvers.md): a BVM
step moves the center by ``1 - beta ~ eps`` towards one row, and near the end
of an eps level furthest-point steps alternate between two states, so every
decision value (and the bias ``sum a_i y_i``) goes up and down by about eps
from one step to the next. This script runs the exact two-class BVM
(``streamcvm.solvers.exact.bvm_loop.bvm_exact``, every row checked each step) on a
binary dataset of ``tools/datasets.py``, stops it after each number of steps
in ``--steps``, and prints the test accuracy of the last center ("raw") and of
the mean of the last two ("mean2", what the solver returns), the fraction
predicted positive and the bias of the raw center, and the eps level and
margin slack reached.

Usage::

    python tools/bvm_path.py                                 # ijcnn1, around two level ends
    python tools/bvm_path.py --dataset a9a --steps 20000:27000:500

``--steps`` takes comma-separated values or ``start:stop:step`` ranges. Each
snapshot is a fresh run from step 0 (the solver is deterministic), so the
cost grows with the step counts.
"""
import argparse
import sys
import time

import numpy as np

import benchlib as B

B.use_source_tree()


def parse_steps(text):
    out = []
    for part in text.split(","):
        if ":" in part:
            a, b, c = (int(float(v)) for v in part.split(":"))
            out.extend(range(a, b, c))
        elif part:
            out.append(int(float(part)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="ijcnn1")
    ap.add_argument("--steps", default="9000:9501:250,9598:9611:1,12745:12755:1,16000:16003:1")
    ap.add_argument("--C", type=float, default=1.0)
    a = ap.parse_args(argv)

    from datasets import load, protocol_gamma
    from streamcvm.solvers.kernels import Kernel, sq_norms
    from streamcvm.solvers import meb
    from streamcvm.solvers.exact.bvm_loop import bvm_exact, new_hist, new_state

    Xtr, ytr, Xte, yte = load(a.dataset)
    if len(np.unique(ytr)) != 2:
        sys.exit(f"bvm_path: {a.dataset} is not a two-class dataset")
    gamma = protocol_gamma(Xtr)
    kern = Kernel("rbf", gamma=gamma)
    pos = np.max(ytr)
    y = np.where(ytr == pos, 1.0, -1.0)
    yt = np.where(yte == pos, 1.0, -1.0)
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0, np.float32)
    if hasattr(Xtr, "tocsr"):
        X = Xtr.tocsr().astype(np.float32)
        Xc = X.tocsc()
        XT = np.zeros((X.shape[1], 0), np.float32)
        args = (XT, X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data,
                Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64), Xc.data)
    else:
        X = np.ascontiguousarray(Xtr, np.float32)
        args = (np.ascontiguousarray(X.T), empty_i, empty_i, empty_f, empty_i, empty_i, empty_f)
    Xte = Xte.astype(np.float32)
    sq = sq_norms(X)
    levels = np.array(meb.eps_levels(1e-7))
    b, invC = 1.0, 1.0 / a.C
    r2 = 1.0 + b + invC
    print(f"{a.dataset}: {X.shape[0]} training rows, {Xte.shape[0]} test rows, "
          f"gamma {gamma:.4g}, C {a.C}")
    print("steps  raw     mean2   pred+   bias        last level  slack  seconds")
    # last level: the finest eps level finished before the cap; slack: its margin slack
    def decision(alpha):
        k = np.flatnonzero(alpha > 0)
        ay = alpha[k] * y[k]
        f = np.empty(Xte.shape[0])
        for s in range(0, Xte.shape[0], 8192):
            f[s:s + 8192] = (kern.block(Xte[s:s + 8192], X[k]).astype(np.float64) + b) @ ay
        return f, ay.sum()

    for ms in parse_steps(a.steps):
        out = {}
        for average in (False, True):
            alpha = np.zeros(X.shape[0])
            hist = new_hist(len(levels))
            t = time.perf_counter()
            bvm_exact(*args, sq, y, gamma, b, invC, levels, 0.0, ms, alpha, hist, average,
                      new_state(), np.zeros(X.shape[0]), -1, 1, -1, False)
            t = time.perf_counter() - t
            out[average] = decision(alpha)
        f, bias = out[False]
        acc_mean = np.mean(np.sign(out[True][0]) == yt)
        done = np.flatnonzero(hist["steps"] < ms)
        if len(done):
            li = done[-1]
            lev = f"{levels[li]:.2e}"
            slack = f"{levels[li] * (2 + levels[li]) * r2 / (2 * hist['c2'][li]):.3f}"
        else:
            lev, slack = "-", "-"
        print(f"{ms:5d}  {np.mean(np.sign(f) == yt):.4f}  {acc_mean:.4f}  {np.mean(f > 0):.4f}  "
              f"{bias:+.3e}  {lev:>10s}  {slack:>5s}  {t:6.2f}", flush=True)


if __name__ == "__main__":
    main()
