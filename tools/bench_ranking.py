#!/usr/bin/env python
"""Ranking benchmark: CVMRanker (kernel ranking SVM, pairs drawn within
queries) against the linear pairwise-transform baseline, scikit-learn's
LinearSVC on the difference vectors of every preference pair.

Data (``../shared/data/raw``, see its MANIFEST):

- ``rank_lightgbm``: LightGBM's lambdarank example, ``rank.train`` (3,005
  documents, 201 queries, labels 0-4; groups from ``rank.train.query``) and
  ``rank.test`` (768 / 50);
- ``mq2008_subset``: partial LETOR 4.0 MQ2008, ``val.txt`` (1,000 documents,
  69 queries) to train and ``test.txt`` (795 / 36) to test (svmlight with qid).

Features are min-max scaled on the training rows. Every model's C is tuned
on a query-level split of the training set (80% of the queries to fit, 20%
to validate; seed 0) by validation NDCG@10, then refit on the whole training
set and scored on the test set:

- LinearSVC(fit_intercept=False) on x_i - x_j for every pair with
  y_i > y_j (half of them negated, labelled -1): C in {0.01, 0.1, 1};
- CVMRanker, linear and rbf kernels (gamma = 1 / mean squared distance),
  method cvm, eps 1e-4 (its default; eps="auto" does not finish in minutes
  here: the L2 ranking SVM makes most pairs support vectors): C in
  {0.1, 1, 10}.

Metrics: NDCG@10 (gain 2^y - 1) and pairwise accuracy
(``streamcvm.predict.metrics``), training seconds of the final fit (in-process,
after a warm-up fit for numba; the data are a few thousand rows).

Usage::

    python tools/bench_ranking.py
"""
import argparse
import sys
import time

import numpy as np

import benchlib as B
from datasets import load_ranking, raw_dir

B.use_source_tree()

LSVC_CS = (0.01, 0.1, 1.0)
CVM_CS = (0.1, 1.0, 10.0)


def pair_diffs(X, y, q):
    """Difference vectors of every preference pair, alternately negated."""
    D = []
    for g in np.unique(q):
        r = np.flatnonzero(q == g)
        hi, lo = np.nonzero(y[r][:, None] > y[r][None, :])
        D.append(X[r[hi]] - X[r[lo]])
    D = np.concatenate(D)
    lab = np.where(np.arange(len(D)) % 2 == 0, 1, -1)
    return D * lab[:, None], lab


def make(model, C, gamma):
    if model == "linearsvc":
        from sklearn.svm import LinearSVC
        return LinearSVC(C=C, fit_intercept=False, max_iter=50000)
    from streamcvm import CVMRanker
    return CVMRanker(C=C, kernel=model, gamma=gamma if model == "rbf" else "auto")


def fit_score(model, C, gamma, X, y, q, Xt, yt, qt):
    from streamcvm.predict.metrics import ndcg_at_k, pairwise_accuracy
    est = make(model, C, gamma)
    t = time.perf_counter()
    if model == "linearsvc":
        D, lab = pair_diffs(X, y, q)
        est.fit(D, lab)
        s = Xt @ est.coef_[0]
    else:
        est.fit(X, y, q)
    dt = time.perf_counter() - t
    if model != "linearsvc":
        s = est.predict(Xt)
    return {"ndcg10": ndcg_at_k(yt, s, qt), "pair_acc": pairwise_accuracy(yt, s, qt),
            "train_s": dt, "core": getattr(est, "core_set_size_", None)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["rank_lightgbm", "mq2008_subset"])
    ap.add_argument("--models", nargs="+", default=["linearsvc", "linear", "rbf"],
                    choices=["linearsvc", "linear", "rbf"])
    ap.add_argument("--raw-dir")
    a = ap.parse_args(argv)
    raw = raw_dir(a.raw_dir)        # default $STREAMCVM_DATA, else ../shared/data/raw
    from streamcvm.solvers.kernels import estimate_beta
    from streamcvm.problems import one_blas_thread
    print(f"command: `python tools/bench_ranking.py {' '.join(sys.argv[1:])}`  commit "
          f"{B.git_commit()}", flush=True)
    rows = []
    with one_blas_thread():
        for ds in a.datasets:
            X, y, q, Xt, yt, qt = load_ranking(ds, raw)
            gamma = 1.0 / estimate_beta(X)
            rng = np.random.default_rng(0)
            uq = rng.permutation(np.unique(q))
            val_q = uq[:max(1, len(uq) // 5)]
            v = np.isin(q, val_q)
            print(f"{ds}: {len(y):,} train docs / {len(np.unique(q))} queries, {len(yt):,} "
                  f"test docs / {len(np.unique(qt))} queries, d={X.shape[1]}, "
                  f"gamma {gamma:.4g}", flush=True)
            fit_score("linear", 1.0, gamma, X[:200], y[:200], q[:200], Xt, yt, qt)  # warm-up
            for model in a.models:
                Cs = LSVC_CS if model == "linearsvc" else CVM_CS
                val = {C: fit_score(model, C, gamma, X[~v], y[~v], q[~v], X[v], y[v], q[v])
                       ["ndcg10"] for C in Cs}
                C = max(Cs, key=lambda c: val[c])
                r = fit_score(model, C, gamma, X, y, q, Xt, yt, qt)
                r.update(dataset=ds, model=model, C=C, val_ndcg=val[C])
                rows.append(r)
                print(f"  {model} C={C:g}: NDCG@10 {r['ndcg10']:.4f}, pairwise accuracy "
                      f"{r['pair_acc']:.4f}, train {r['train_s']:.2f} s", flush=True)
    print("\n| dataset | model | C (tuned) | NDCG@10 | pairwise accuracy | train s | core pairs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        name = {"linearsvc": "LinearSVC on pair differences", "linear": "CVMRanker linear",
                "rbf": "CVMRanker rbf"}[r["model"]]
        core = "-" if r["core"] is None else f"{r['core']:,}"
        print(f"| {r['dataset']} | {name} | {r['C']:g} | {r['ndcg10']:.4f} | "
              f"{r['pair_acc']:.4f} | {r['train_s']:.2f} | {core} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
