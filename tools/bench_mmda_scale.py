#!/usr/bin/env python
"""MMDA feature extraction against the number of rows: time and peak memory
of fitting the features and of writing every row's features to a store,
with scikit-learn's KernelPCA (the n x n kernel matrix) beside it where it
can run.

Data (``streamcvm.data.synthetic.write_store``, seed 0; generated once and cached
in ``--workdir``, reused while the store has the right number of rows): the
Gaussian mixture (22 features, 2 classes that overlap: Bayes accuracy
~96.6%), at every ``--sizes`` (default 100K, 200K, 1M, 2M, 20M rows), and
one held-out test store of 500,000 rows (``first_block=10**6``, another
random stream of the same distribution). The default workdir is the one
``bench_scale_accuracy.py`` uses, so its stores are shared.

For each training store, in a fresh Python process (this script with a
hidden ``--child``), one after the other:

1. ``MMDATransformer(n_components=K).fit(store)`` (K = ``--k``, default 5:
   two classes, so K features), its defaults otherwise: fit seconds and the
   process's peak RSS after the fit (``ru_maxrss``: everything up to then);
2. ``transform_store(store, FEATURES)``: every row's features written to a
   new store (one chunk task per chunk, threads): seconds, peak RSS after it;
3. accuracy: a linear SVM (StandardScaler + LinearSVC(C=1)) on the features
   of 100,000 training rows (the first ones written), tested on the features
   of the 500,000 test rows (``transform`` of the test store, streamed).
   This checks the features carry the labels; it is not a classifier contest.

An untimed warm-up fit and transform on 5,000 rows come first in each child
(numba's cache, imports). Then KernelPCA(n_components=K, kernel="rbf", the
same gamma, eigen_solver="randomized") in its own child on the first
``--kpca-sizes`` rows (default 5,000, 10,000, 20,000, 40,000) of the
smallest store, while its n x n float64 matrix (8 n^2 bytes) fits in
``--kpca-memory-gb`` (default 16): fit seconds and peak RSS. Beyond that the
table gives the matrix's size: KernelPCA cannot run there on this machine.

The memory claim checked: the peak RSS of the 1M-row fit is within 10% of
the 100K-row fit's (RAM independent of n).

``--routes auto memory sampled`` also fits each size with the solver's route
forced (the option ``mmda_memory_rows`` set out of reach or to 0): the
compiled in-memory loop, where the pool holds the whole store (at most
``pool_chunks`` chunks), or the sampled one. How ``mmda_memory_rows`` was
chosen.

Usage::

    python tools/bench_mmda_scale.py
    python tools/bench_mmda_scale.py --sizes 100K 1M --json /tmp/mmda_scale.json
    python tools/bench_mmda_scale.py --sizes 20K 50K 100K 200K --routes memory sampled \
        --kpca-sizes 5K
"""
import os
import sys

import benchlib as B

SEED = 0
TEST_ROWS = 500_000
ACC_TRAIN_ROWS = 100_000


def child_store(spec):
    s, took = B.generated_store(spec["path"], spec["data"], spec["n"], SEED,
                                spec["first_block"])
    out = {} if took is None else {"generate_s": took}
    out.update(n=s.n, d=s.d, chunks=s.n_chunks, disk_bytes=s.sizes()[0])
    return out


def child_mmda(spec):
    import shutil
    import time

    import numpy as np
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC
    from streamcvm import MMDATransformer, open_store
    route = spec.get("route", "auto")
    # forced from the warm-up on, which then compiles that route
    opts = None if route == "auto" else \
        {"mmda_memory_rows": 1 << 62 if route == "memory" else 0,
         "mmda_memory_mb": 1 << 40 if route == "memory" else 0}
    warm = spec["warm"]
    w = MMDATransformer(n_components=spec["k"], options=opts).fit(warm)
    w.transform(warm)
    rss0 = B.peak_rss_bytes()
    store = open_store(spec["store"])
    t = time.perf_counter()
    m = MMDATransformer(n_components=spec["k"], options=opts).fit(store)
    fit_s = time.perf_counter() - t
    rss_fit = B.peak_rss_bytes()
    out_path = spec["out"]
    t = time.perf_counter()
    n = m.transform_store(store, out_path, overwrite=True)
    tr_s = time.perf_counter() - t
    rss_tr = B.peak_rss_bytes()
    feats = open_store(out_path)
    part = feats.rows(0, min(ACC_TRAIN_ROWS, feats.n))
    t = time.perf_counter()
    Ft = m.transform(spec["test"])
    test_s = time.perf_counter() - t
    yt = np.concatenate([np.asarray(c.y) for c in open_store(spec["test"])])
    clf = make_pipeline(StandardScaler(), LinearSVC(C=1.0, random_state=0))
    clf.fit(np.asarray(part.X), np.asarray(part.y))
    acc = float(clf.score(Ft, yt))
    shutil.rmtree(out_path, ignore_errors=True)
    return dict(n=store.n, route=route, rows_written=n, fit_s=fit_s, transform_s=tr_s, test_transform_s=test_s,
                rss_warm=rss0, rss_fit=rss_fit, rss_transform=rss_tr, accuracy=acc,
                gamma=m.gamma_, kernel_evaluations=m.kernel_evaluations_.tolist(),
                expansion_rows=int(m.expansion_rows_))


def child_kpca(spec):
    import time

    import numpy as np
    from sklearn.decomposition import KernelPCA
    from streamcvm import open_store
    X = np.asarray(open_store(spec["store"]).rows(0, spec["n"]).X, np.float64)
    t = time.perf_counter()
    KernelPCA(n_components=spec["k"], kernel="rbf", gamma=spec["gamma"],
              eigen_solver="randomized", random_state=0).fit(X)
    return dict(n=len(X), fit_s=time.perf_counter() - t, rss=B.peak_rss_bytes())


CHILD_JOBS = {"store": child_store, "mmda": child_mmda, "kpca": child_kpca}


def main():
    ap = B.parser(__doc__)
    ap.add_argument("--sizes", nargs="+", default=["100K", "200K", "1M", "2M", "20M"])
    ap.add_argument("--k", type=int, default=5, help="MMDA features (2 classes: K in all)")
    ap.add_argument("--kpca-sizes", nargs="+", default=["5K", "10K", "20K", "40K"])
    ap.add_argument("--kpca-memory-gb", type=float, default=16.0)
    ap.add_argument("--routes", nargs="+", choices=("auto", "memory", "sampled"),
                    default=["auto"], help="the solver's route: its own choice, or forced")
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/scale_accuracy")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    sess = B.BenchRun(packages=("scikit-learn", "numpy"))
    os.makedirs(a.workdir, exist_ok=True)
    sizes = sorted(B.parse_rows(s) for s in a.sizes)
    warm, _ = B.ensure_store(a.workdir, "gaussian", 5000, 0)
    test, _ = B.ensure_store(a.workdir, "gaussian", TEST_ROWS, 10 ** 6)
    runs = []
    for n in sizes:
        path, info = B.ensure_store(a.workdir, "gaussian", n, 0)
        for route in a.routes:
            B.log(f"MMDA on {n:,} rows, route {route} ...")
            r = B.run_child(dict(kind="mmda", store=path, warm=warm, test=test, k=a.k,
                                 route=route,
                                 out=os.path.join(a.workdir, f"mmda-features-{n}.zarr")))
            r.setdefault("route", route)
            r["disk_bytes"] = info.get("disk_bytes")
            runs.append(r)
            if "error" in r:
                continue
            B.log(f"  fit {r['fit_s']:.1f} s, peak {r['rss_fit'] / 2**20:.0f} MiB; transform "
                  f"{r['transform_s']:.1f} s, peak {r['rss_transform'] / 2**20:.0f} MiB; "
                  f"accuracy {100 * r['accuracy']:.2f}%")
    gamma = next((r["gamma"] for r in runs if "gamma" in r), None)
    kp = []
    for n in sorted(B.parse_rows(s) for s in a.kpca_sizes):
        need = 8.0 * n * n
        if need > a.kpca_memory_gb * 1e9 or gamma is None:
            kp.append({"n": n, "skipped": f"needs {need / 1e9:.0f} GB for K"})
            continue
        B.log(f"KernelPCA on {n:,} rows ...")
        kp.append(B.run_child(dict(kind="kpca", store=os.path.join(
            a.workdir, f"gaussian-train-{sizes[0]}-s{SEED}.zarr"), n=n, k=a.k, gamma=gamma)))
    mib = lambda v: B.fmt(None if v is None else v / 2**20, ".0f")     # noqa: E731
    rows = []
    for r in runs:
        if "error" in r:
            rows.append([B.human_rows(r.get("n", 0)), r["route"], r["error"]] + [""] * 7)
            continue
        rows.append([B.human_rows(r["n"]), r["route"], f"{r['fit_s']:.1f}", mib(r["rss_fit"]),
                     f"{r['transform_s']:.1f}", mib(r["rss_transform"]),
                     f"{r['transform_s'] * 1e6 / r['n']:.1f}",
                     f"{sum(r['kernel_evaluations']) / len(r['kernel_evaluations']):.0f}",
                     str(r["expansion_rows"]), f"{100 * r['accuracy']:.2f}"])
    print("\n".join(sess.header))
    print()
    print(B.table(["rows", "route", "fit s", "fit peak MiB", "transform s", "transform peak MiB",
                   "us/row", "kernel evals/feature", "distinct rows", "test acc %"], rows))
    print()
    print(B.table(["KernelPCA rows", "fit s", "peak MiB"],
                  [[B.human_rows(r["n"]), B.fmt(r.get("fit_s"), ".1f"),
                    mib(r.get("rss")) if "rss" in r else r.get("skipped", r.get("error"))]
                   for r in kp]))
    by_n = {r["n"]: r for r in runs if "error" not in r and r["route"] == "auto"}
    if 100_000 in by_n and 1_000_000 in by_n:
        q = by_n[1_000_000]["rss_fit"] / by_n[100_000]["rss_fit"]
        print(f"\npeak RSS of the fit, 1M rows / 100K rows: {q:.3f} "
              f"({'within' if q <= 1.10 else 'NOT within'} 10%)")
    if a.json:
        sess.write(a.json, runs=runs, kpca=kp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
