"""Measure the two step costs behind the exact / sampled choice of
``streamcvm.problems.driver.run_solver`` (``streamcvm.problems.dispatch``).

A sampled BVM step draws ``sample_size`` rows and computes their kernel
values against the |S| core vectors; an exact one (``bvm_exact``) takes one
kernel value per held row. This script times both on the noisy Gaussian
mixture (d features, dense) and on sparse text-like rows, in one process:

- sampled: a sampled fit (:meth:`MEBSolver.fit`) whose ``switch`` hook logs
  the wall time of every 32 steps (the draws without a violator, the
  search, the step) and the core-set size; a least-squares line ``seconds
  per step = a + b |S|``;
- exact: ``bvm_exact`` on m rows, fresh, its passes timed one by one from
  step 200 on, at one and at all threads; seconds per row and step.

Each figure is the 20th percentile of its repeats (windows of an eighth of
the sampled run, exact passes): the cost without the
stalls that other work on a shared machine adds.

It prints both, per layout, and the fitted constants that
``streamcvm/problems/dispatch.py`` states (per kernel value in the sampled
search, per row-step of the exact pass, by features per row). The machine is
shared and noisy: the two costs of one layout come from one run, back to
back, and it is their ratio that sets the choice.

    python tools/calibrate_dispatch.py                 # d = 4, 22, 64; text
    python tools/calibrate_dispatch.py --d 4 22 --rows 65536 262144 --json out.json
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

def _low(times, q=20):
    """The ``q``th percentile: the cost without the stalls a busy machine adds."""
    return float(np.percentile(times, q))


WINDOW = 32


def sampled_costs(X, y, gamma, max_core, seed=0):
    """(core-set size, seconds per step) of a sampled fit capped at
    ``max_core`` vectors, per window of WINDOW steps: each step's share of
    the draws that found no violator, the search and the step itself, as
    :meth:`MEBSolver.fit` pays them."""
    from streamcvm.data.sampling import ChunkPool
    from streamcvm.data.store import ArrayStore
    from streamcvm.solvers import MEBSolver
    from streamcvm.solvers.kernels import Kernel
    store = ArrayStore(X, y, chunk_rows=len(y))
    pool = ChunkPool(store, np.random.default_rng(seed), classes=(-1.0, 1.0))
    solver = MEBSolver(Kernel("rbf", gamma=gamma), X.shape[1], store.sparse, C=1.0, b=1.0,
                       method="bvm", eps="auto", max_core=max_core)
    log = []
    last = [time.perf_counter(), 0]

    def hook(s):
        last[1] += 1
        if last[1] == WINDOW:
            now = time.perf_counter()
            log.append((s.ball.core.n, (now - last[0]) / WINDOW))
            last[0], last[1] = now, 0
        return False
    solver.fit(pool, classes=(-1.0, 1.0), target="binary", switch=hook)
    pool.close()
    return np.array(log[1:])        # the first window compiles


def exact_cost(X, y, gamma, tasks, passes=60, warm=200):
    """Seconds per row and step of ``bvm_exact`` on the rows ``X``: its
    passes timed one by one from step ``warm`` on."""
    import scipy.sparse as sp
    from streamcvm.solvers import MEBSolver
    from streamcvm.solvers.exact.bvm_loop import bvm_exact, new_hist, new_state
    from streamcvm.solvers.exact.bvm import dense_columns
    from streamcvm.solvers.kernels import Kernel, sq_norms
    levels = np.array(MEBSolver(Kernel("rbf", gamma=gamma), X.shape[1], sp.issparse(X), C=1.0,
                                b=1.0, method="bvm", eps="auto").levels())
    e, ef = np.zeros(0, np.int64), np.zeros(0, np.float32)
    from streamcvm.options import Options
    if sp.issparse(X) and not dense_columns(X, Options()):
        XT = np.zeros((X.shape[1], 0), np.float32)
        Xc = X.tocsc()
        args = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data,
                Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64), Xc.data)
    else:
        Xd = X.toarray() if sp.issparse(X) else X
        XT = np.ascontiguousarray(np.asarray(Xd, np.float32).T)
        args = (e, e, ef, e, e, ef)
    n = X.shape[0]
    sq = sq_norms(X)
    st, Ka, alpha = new_state(), np.zeros(n), np.zeros(n)
    hist = new_hist(len(levels))
    cur = st[0]         # the state's record (a view: what the loop writes)

    def run(stop_at):
        return bvm_exact(XT, *args, sq, y, gamma, 1.0, 1.0, levels, 0.3, 100 * n, alpha, hist,
                         True, st, Ka, stop_at, tasks, n, False)
    run(warm)
    per_step = []
    for _ in range(passes):
        s0, t = cur["steps"], time.perf_counter()
        if run(int(cur["steps"]) + 1) >= 0:
            break
        per_step.append((time.perf_counter() - t) / max(cur["steps"] - s0, 1))
    return _low(per_step) / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[4, 22, 64])
    ap.add_argument("--rows", type=int, nargs="+", default=[16384, 65536, 262144])
    ap.add_argument("--max-core", type=int, default=4000,
                    help="the sampled fit's core-set cap")
    ap.add_argument("--text", action=argparse.BooleanOptionalAction, default=True,
                    help="also sparse text-like rows (20,000 features, ~54 nonzeros a row)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    from streamcvm.data.synthetic import gaussian_block, text_block
    from streamcvm.problems.driver import one_blas_thread
    tasks = os.cpu_count() or 1
    out = []
    layouts = [("gaussian", d) for d in a.d] + ([("text", 20000)] if a.text else [])
    for kind, d in layouts:
        n = max(a.rows)
        if kind == "gaussian":
            X, y = gaussian_block(0, n, d=d)
            cells = d
        else:
            import scipy.sparse as sp
            (ip, ind, val), y = text_block(0, n, d=d)
            X = sp.csr_matrix((val, ind, ip), shape=(n, d))
            cells = X.nnz / n
        X = X if kind == "text" else np.asarray(X, np.float32)
        gamma = 1.0 / d if kind == "text" else 1.0 / (d * X.var())
        with one_blas_thread():
            log = sampled_costs(X[:65536], y[:65536], gamma, a.max_core)
            # each eighth of the run: its median core size, its low window cost
            pts = np.array([(np.median(p[:, 0]), _low(p[:, 1]))
                            for p in np.array_split(log, 8)])
            A = np.c_[np.ones(len(pts)), pts[:, 0]]
            (a0, b0), *_ = np.linalg.lstsq(A, pts[:, 1], rcond=None)
            row = {"kind": kind, "d": d, "cells_per_row": float(cells),
                   "sampled": pts.tolist(), "sampled_fixed_s": float(a0),
                   "sampled_per_core_s": float(b0), "exact": []}
            for m in a.rows:
                for T in sorted({1, tasks}):
                    r = exact_cost(X[:m], y[:m], gamma, T)
                    row["exact"].append({"rows": m, "tasks": T, "row_step_s": r})
        out.append(row)
        print(f"{kind} d={d} ({cells:.0f} a row): sampled step {1e3 * a0:.3f} ms + "
              f"{1e9 * b0:.1f} ns x |S| ({1e9 * b0 / 59:.2f} ns a kernel value)", flush=True)
        for e in row["exact"]:
            m, T, r = e["rows"], e["tasks"], e["row_step_s"]
            print(f"   exact m={m:>7,} tasks={T}: {1e9 * r:.2f} ns a row-step; parity at "
                  f"|S| = {max(m * r - a0, 0) / b0:,.0f} (m / {b0 * m / max(m * r - a0, 1e-12):.0f})",
                  flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
