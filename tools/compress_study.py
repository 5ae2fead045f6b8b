#!/usr/bin/env python
"""Which compact expansion does best at equal B?

For a trained two-class model (a ``streamcvm train`` model folder with one
machine and dense support rows), each candidate replaces ``f(x) = sum_i a_i
k(x_i, x) + b`` over the |S| support vectors with ``f~(x) = sum_j beta_j
k(z_j, x) + b~`` over B basis points (``streamcvm.problems.compress``):

====================  =======================================================
candidate             basis points, coefficients, intercept
====================  =======================================================
pivchol/proj          support rows chosen by greedy pivoted Cholesky of K_SS
                      (among at most ``--candidates`` random support rows);
                      beta the RKHS projection K_ZZ beta = K_ZS a; b~ = b
pivchol/proj/b        the same, b~ refitted: b + mean(f - f~) on the fit rows
pivchol/lsq           the same basis; beta, b~ least squares on the full
                      model's values f at the fit rows (a tiny RKHS ridge)
kmeans/proj/b         B k-means centres of the support rows (weighted by
                      abs(a)); projection; b~ refitted
kmeans/lsq            k-means centres; least squares on f
random/proj/b         B random support rows; projection; b~ refitted
random/lsq            B random support rows; least squares on f
====================  =======================================================

Fit rows: ``--fit-rows`` random rows of the training store (never the test
rows). Test rows: the first ``--test-rows`` rows of the test store. Reported
per candidate and B: the seconds to compress, the seconds to predict the
test rows (``--threads`` threads, kernel blocks as streamcvm predicts),
labels equal to the full model's, test accuracy, and the median and 99th
percentile of abs(f - f~) (in units of the median abs(f)). The full
model's own predict time and accuracy are the first row. One process, one
run: the ratios are what to read.

Usage::

    python tools/compress_study.py --model M --train TRAIN.zarr --test TEST.zarr
    python tools/compress_study.py --model /tmp/streamcvm-bench/scale_accuracy/models/gaussian-2000000 \\
        --train /tmp/streamcvm-bench/scale_accuracy/gaussian-train-2000000-s0.zarr \\
        --test /tmp/streamcvm-bench/scale_accuracy/gaussian-test-500000-s0.zarr --sizes 500 1000 2000 4000
"""
import argparse
import json
import sys
import time

import numpy as np

import benchlib as B

B.use_source_tree()

CANDIDATES = ["pivchol/proj", "pivchol/proj/b", "pivchol/lsq", "kmeans/proj/b", "kmeans/lsq",
              "random/proj/b", "random/lsq"]


def labels(f, classes):
    return np.where(f > 0, classes[1], classes[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--train", required=True, help="the training store (fit rows)")
    ap.add_argument("--test", required=True, help="a held-out store (test rows)")
    ap.add_argument("--sizes", nargs="+", type=int, default=[500, 1000, 2000, 4000])
    ap.add_argument("--candidates", type=int, default=16384,
                    help="support rows the pivoted Cholesky chooses among (default 16384)")
    ap.add_argument("--only", nargs="+", choices=CANDIDATES, default=CANDIDATES)
    ap.add_argument("--fit-rows", type=int, default=50_000)
    ap.add_argument("--lsq-rows", type=int, default=None,
                    help="fit rows the least squares candidates use (default: all the fit rows)")
    ap.add_argument("--test-rows", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the records here")
    a = ap.parse_args(argv)

    from threadpoolctl import threadpool_limits
    from streamcvm.problems import compress
    from streamcvm import open_store
    from streamcvm.solvers.kernels import kernel_sums
    from streamcvm.estimators.model import load_model
    est = load_model(a.model)
    if len(est.machines_) != 1 or est.machines_[0].classes is None:
        raise SystemExit(f"{a.model}: a two-class model with one machine is needed")
    m, kern = est.machines_[0], est.kernel_
    S = np.ascontiguousarray(m.sv, np.float32)
    coef, b0, classes = np.asarray(m.coef, np.float64), float(m.intercept), m.classes
    B.log(f"{a.model}: {len(S):,} support vectors, {S.shape[1]} features, kernel {kern.name} "
          f"gamma {kern.gamma:.6g}")
    te = open_store(a.test)
    t = te.rows(0, min(a.test_rows, te.n))
    Xt, yt = np.ascontiguousarray(t.X, np.float32), np.asarray(t.y)
    Xf, _ = B.read_rows(open_store(a.train), a.fit_rows, a.seed)
    Xf = np.ascontiguousarray(Xf, np.float32)

    def predict(Z, beta, b):
        with threadpool_limits(1, user_api="blas"):
            return kernel_sums(kern, Xt, Z, beta, n_jobs=a.threads) + b

    t0 = time.perf_counter()
    f = predict(S, coef, b0)
    full_s = time.perf_counter() - t0
    with threadpool_limits(1, user_api="blas"):
        ff = kernel_sums(kern, Xf, S, coef, n_jobs=a.threads) + b0
    scale = float(np.median(np.abs(f)))
    full_labels = labels(f, classes)
    rows = [{"candidate": "full model", "B": len(S), "compress_s": 0.0, "predict_s": full_s,
             "agree": 1.0, "accuracy": float(np.mean(full_labels == yt)), "med_err": 0.0,
             "p99_err": 0.0}]
    B.log(f"full model: predict {len(Xt):,} rows {full_s:.2f} s, accuracy "
          f"{rows[0]['accuracy']:.4f}, median abs(f) {scale:.3g}")
    rng = np.random.default_rng(a.seed)
    cand = np.sort(rng.choice(len(S), size=min(a.candidates, len(S)), replace=False))
    for size in a.sizes:
        bases = {}
        for name in a.only:
            kind = name.split("/")[0]
            t0 = time.perf_counter()
            if kind not in bases:
                if kind == "pivchol":
                    Z = S[cand[compress.pivoted_cholesky(kern, S[cand], size)]]
                elif kind == "kmeans":
                    Z = compress.kmeans_centres(S, size, weights=np.abs(coef), seed=a.seed)
                else:
                    Z = S[compress.random_rows(len(S), size, a.seed)]
                bases[kind] = (Z, time.perf_counter() - t0)
            Z, basis_s = bases[kind]
            t0 = time.perf_counter()
            if name.endswith("lsq"):
                n = len(Xf) if a.lsq_rows is None else min(a.lsq_rows, len(Xf))
                beta, b = compress.fit_values(kern, Z, Xf[:n], ff[:n])
            else:
                beta = compress.project(kern, Z, S, coef, n_jobs=a.threads)
                b = b0
                if name.endswith("/b"):
                    b += compress.refit_intercept(
                        ff, kernel_sums(kern, Xf, Z, beta, n_jobs=a.threads) + b0)
            took = basis_s + time.perf_counter() - t0
            t0 = time.perf_counter()
            fc = predict(Z, beta, b)
            ps = time.perf_counter() - t0
            err = np.abs(f - fc) / scale
            r = {"candidate": name, "B": len(Z), "compress_s": took, "predict_s": ps,
                 "agree": float(np.mean(labels(fc, classes) == full_labels)),
                 "accuracy": float(np.mean(labels(fc, classes) == yt)),
                 "med_err": float(np.median(err)), "p99_err": float(np.quantile(err, 0.99))}
            rows.append(r)
            B.log(f"B={size} {name}: agree {r['agree']:.4f}, accuracy {r['accuracy']:.4f}, "
                  f"compress {took:.1f} s, predict {ps:.2f} s")
    print(f"command: `{B.command_line()}`")
    print(f"commit: {B.git_commit()}, {B.now()}")
    print(f"model {a.model}: {len(S):,} SVs; {len(Xt):,} test rows, {len(Xf):,} fit rows, "
          f"{a.threads} threads\n")
    head = ["candidate", "B", "compress s", "predict s", "predict vs full", "labels = full %",
            "test accuracy %", "median abs(f - f~) / median abs(f)", "99th pct"]
    print(B.table(head, [[r["candidate"], f"{r['B']:,}", f"{r['compress_s']:.1f}",
                          f"{r['predict_s']:.2f}", f"{r['predict_s'] / full_s:.3f}",
                          f"{100 * r['agree']:.2f}", f"{100 * r['accuracy']:.2f}",
                          f"{r['med_err']:.3g}", f"{r['p99_err']:.3g}"] for r in rows],
                  left=("candidate",)))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"args": vars(a), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
