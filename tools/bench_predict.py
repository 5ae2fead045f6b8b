#!/usr/bin/env python
"""What a model costs at predict time: streamcvm's compact expansion against
its full one, the code before compact models, and Nystroem, in one run at
equal threads, with a roofline.

Cases, each predicted in fresh child processes one after the other:

- ``--sets`` (default: the ``bench_classify.py`` sets): a ``CVMClassifier``
  with the defaults (C=1, the protocol's gamma) fitted on the training rows,
  predicting the test set. Nystroem K=1000 / 4000 + ``LinearSVC(C=1)`` on the
  same rows (at most ``--nystroem-rows`` of them, and at most as many as keep
  the float64 feature matrix within ``--nystroem-gb``, random, seed 0: the fit
  rows change its accuracy a little, not its predict time).
- ``--models MODEL=TEST ...``: model folders already trained (e.g. the 2M and
  20M mixture models of ``bench_scale_accuracy.py``) predicting a test
  store, chunk by chunk, its first ``--rows`` rows; Nystroem K=1000 + LinearSVC
  on ``--nystroem-rows`` random rows of the store named by ``--train`` (one
  per model, the same order), or no Nystroem row without it.
- ``--mmda SET ...``: ``MMDATransformer(n_components=5)`` fitted with
  ``compact=False``, then its compaction alone timed ("compact fit s" in the
  JSON); transform of the test rows by the full expansions and by the compact
  basis; 1-NN test accuracy on each kind of features (the 1-NN fitted on the
  training rows' features of the same kind); "agree %": 1-NN labels equal.
- ``--friedman N`` (0: none): a Friedman #1 store of N rows (seed 0, 10
  features), ``streamcvm train --task regression`` with the defaults,
  predicting 100,000 held-out rows (``first_block=10**6``); Nystroem
  K=2000 + Ridge on ``--nystroem-rows`` rows.

Every predict runs at ``--threads`` threads (numba and BLAS, set before the
child imports anything): 1 by default, the cost of one row on one core.

What each figure is:

- predict s: wall seconds of ``predict`` on the test rows (the fastest of
  ``--repeat``, after one untimed predict that loads numba's cache). For a
  model and a store: the whole chunked predict, reading included.
- compact / exact: the same fitted estimator predicting with its compact
  expansion (the default) and with ``compact=False`` (``predict --exact``).
- baseline (``--baseline REV``): the library of revision REV (a detached
  worktree, made once) fits the same rows with its defaults and predicts:
  the code before compact models when REV is ffa76c5^.
  "exact / base" and "compact / base" are the ratios of predict s.
- accuracy %, or RMSE for the regression; "agree %": labels equal to the
  exact expansion's.
- B / SVs: basis points of the compact expansion against the distinct
  support rows of the full one.
- kernel Mval/s: rows x (the rows predict evaluates kernels against) /
  predict s, in millions; roofline Mval/s: the same count of values by a
  float32 GEMM for the cross products (numpy, BLAS threads as above) and
  ``np.exp`` on the result (split over the threads), timed in the same
  child on up to 20,000 test rows (sparse rows made dense): what the
  kernel part alone would cost at the machine's GEMM and exp speed.
  "% roofline" is their ratio: above 50% means predict runs at least at
  half of what its kernel values cost at that limit, with the
  coefficients' products and everything else included.

Usage::

    python tools/bench_predict.py --baseline ffa76c5^ --mmda letter --json /tmp/streamcvm-bench/predict.json
    python tools/bench_predict.py --sets letter --friedman 0 --threads 2
    python tools/bench_predict.py --sets --friedman 0 \\
        --models /tmp/streamcvm-bench/scale_accuracy/models/gaussian-2000000=/tmp/streamcvm-bench/scale_accuracy/gaussian-test-500000-s0.zarr \\
        --train /tmp/streamcvm-bench/scale_accuracy/gaussian-train-2000000-s0.zarr
"""
import json
import os
import sys
import time

import benchlib as B

B.use_source_tree()

SETS = ("ijcnn1", "a9a", "w8a", "usps", "letter", "shuttle", "kddcup99")
ROOF_ROWS = 20000


# ---------------------------------------------------------------------------
# child side
# ---------------------------------------------------------------------------

def _limits(spec):
    """Numba's and BLAS's threads, set before numpy and numba are imported
    (and held by threadpoolctl for the libraries loaded since)."""
    for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS"):
        os.environ[var] = str(spec["threads"])
    import numpy  # noqa: F401 - its BLAS loaded, so that threadpoolctl sees it
    from threadpoolctl import threadpool_limits
    return threadpool_limits(spec["threads"])


def _best(fn, repeat):
    """(fn()'s value, its fastest wall seconds of ``repeat``), after an untimed call."""
    out = fn()
    best = float("inf")
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def roofline(X, U, gamma, threads, repeat=3):
    """Values per second of the RBF kernel between the rows ``X`` and ``U`` at
    the machine's limit: float32 GEMM ``X U'`` (BLAS) plus ``np.exp`` of the
    result (threads over row blocks); the norms, a rank-one update, are left
    out, so this is a limit, not a kernel."""
    from concurrent.futures import ThreadPoolExecutor
    import numpy as np
    import scipy.sparse as sp
    X = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, np.float32)
    U = np.ascontiguousarray(U.toarray() if sp.issparse(U) else U, np.float32)
    G = np.empty((len(X), len(U)), np.float32)
    _, t_gemm = _best(lambda: np.matmul(X, U.T, out=G), repeat)
    parts = np.array_split(np.arange(len(X)), threads)
    pool = ThreadPoolExecutor(threads)

    def exp():
        G[:] = -gamma
        list(pool.map(lambda p: np.exp(G[p[0]:p[-1] + 1], out=G[p[0]:p[-1] + 1]), parts))
    _, t_exp = _best(exp, repeat)
    pool.shutdown()
    return G.size / (t_gemm + t_exp), t_gemm, t_exp


def _kernel_rows(est, compact):
    """The rows predict evaluates kernels against: the active union."""
    if hasattr(est, "_union"):
        return est._union(not compact)[0][0]
    m = est._model_record()[0][0]
    return (m.compact if compact and m.compact is not None else m).sv


def _throughput(out, est, X, repeat, threads, key):
    """kernel Mval/s of predict and of the roofline on up to ROOF_ROWS rows of X."""
    Xr = X[:ROOF_ROWS]
    for name, compact in (("compact", True), ("exact", False)):
        if name not in key:
            continue
        est.set_params(compact="auto" if compact else False)
        U = _kernel_rows(est, compact)
        _, t = _best(lambda: est.predict(Xr), repeat)
        out[f"{name}_kernel_mvals"] = Xr.shape[0] * U.shape[0] / t / 1e6
        rate, tg, te = roofline(Xr, U, est.kernel_.gamma, threads, repeat)
        out[f"{name}_roofline_mvals"] = rate / 1e6
        out[f"{name}_roofline_split"] = [tg, te]
    est.set_params(compact="auto")


def child_classify(spec):
    """Fit a CVMClassifier (this tree's, or ``spec["lib"]``'s) on a protocol
    set and time its predict on the test rows."""
    with _limits(spec):
        if spec.get("lib"):
            sys.path.insert(0, spec["lib"])
        import numpy as np
        from streamcvm import CVMClassifier
        Xtr, ytr, Xte, yte = B.load_data(spec)
        est = CVMClassifier(C=spec["C"], gamma=spec["gamma"], random_state=0)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        out = {"train_s": time.perf_counter() - t, "n_test": int(len(yte))}
        ms = est.machines_
        out["n_sv"] = int(len(np.unique(np.concatenate([m.sv_ids for m in ms]))))
        if spec.get("lib"):
            pred, out["base_s"] = _best(lambda: est.predict(Xte), spec["repeat"])
            out["base_accuracy"] = float(np.mean(pred == yte))
            return out
        est.set_params(compact=False)
        exact, out["exact_s"] = _best(lambda: est.predict(Xte), spec["repeat"])
        est.set_params(compact="auto")
        pred, out["compact_s"] = _best(lambda: est.predict(Xte), spec["repeat"])
        out["exact_accuracy"] = float(np.mean(exact == yte))
        out["compact_accuracy"] = float(np.mean(pred == yte))
        out["agree"] = float(np.mean(pred == exact))
        info = ms[0].compact_info or {}
        out["B"] = info.get("B") if ms[0].compact is not None else None
        out["compact_decision"] = info.get("decision")
        _throughput(out, est, Xte, spec["repeat"], spec["threads"],
                    ("compact", "exact") if out["B"] else ("exact",))
        return out


def child_mmda(spec):
    """MMDA features (n_components per class) on a protocol set: the fit, the
    compaction's own seconds, transform of the test rows by the compact basis
    and by the full expansions, and 1-NN test accuracy on each kind of features."""
    with _limits(spec):
        import numpy as np
        from sklearn.neighbors import KNeighborsClassifier
        from streamcvm import MMDATransformer, as_store
        Xtr, ytr, Xte, yte = B.load_data(spec)
        est = MMDATransformer(n_components=spec["n_components"], compact=False, random_state=0)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        out = {"train_s": time.perf_counter() - t, "n_test": int(len(yte)),
               "n_sv": int(est.expansion_rows_), "features": int(len(est.machines_))}
        labels, codes = np.unique(ytr, return_inverse=True)
        t = time.perf_counter()
        est.set_params(compact="auto")._compact_features(as_store(Xtr, codes.astype(float)), 0)
        out["compact_fit_s"] = time.perf_counter() - t
        info = est.machines_[0].compact_info
        out["B"] = info.get("B") if est._compact_basis is not None else None
        out["compact_decision"] = info.get("decision")
        feats = {}
        for name in ("exact", "compact"):
            if name == "compact" and not out["B"]:
                continue
            est.set_params(compact=False if name == "exact" else "auto")
            feats[name], out[f"{name}_s"] = _best(lambda: est.transform(Xte), spec["repeat"])
            knn = KNeighborsClassifier(1).fit(est.transform(Xtr), ytr)
            out[f"{name}_accuracy"] = float(np.mean(knn.predict(feats[name]) == yte))
        if out["B"]:
            out["agree"] = float(np.mean(KNeighborsClassifier(1).fit(
                est.set_params(compact=False).transform(Xtr), ytr).predict(feats["exact"]) ==
                KNeighborsClassifier(1).fit(est.set_params(compact="auto").transform(Xtr), ytr)
                .predict(feats["compact"])))
            f, g = feats["exact"], feats["compact"]
            out["r2_min_test"] = float(np.min(1 - ((g - f) ** 2).sum(0) /
                                              ((f - f.mean(0)) ** 2).sum(0)))
        return out


def _nystroem(spec, Xtr, ytr, regression):
    import numpy as np
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC
    # its float64 features, copied again by liblinear, within --nystroem-gb
    rows = int(min(spec["nystroem_rows"], Xtr.shape[0],
                   spec["nystroem_gb"] * 1e9 / (8 * spec["K"])))
    if rows < Xtr.shape[0]:
        pick = np.sort(np.random.default_rng(0).choice(Xtr.shape[0], rows, replace=False))
        Xtr, ytr = Xtr[pick], ytr[pick]
    last = Ridge(alpha=1e-3) if regression else LinearSVC(C=1.0, random_state=0)
    model = make_pipeline(Nystroem(gamma=spec["gamma"], n_components=spec["K"],
                                   random_state=0), last)
    t = time.perf_counter()
    model.fit(Xtr, ytr)
    return model, {"train_s": time.perf_counter() - t, "fit_rows": int(rows)}


def child_nystroem_set(spec):
    with _limits(spec):
        import numpy as np
        Xtr, ytr, Xte, yte = B.load_data(spec)
        model, out = _nystroem(spec, Xtr, ytr, False)
        pred, out["predict_s"] = _best(lambda: model.predict(Xte), spec["repeat"])
        out["accuracy"] = float(np.mean(pred == yte))
        return out


def _store_rows(path, rows):
    """(X, y) of the first ``rows`` rows of the store ``path``."""
    import numpy as np
    from streamcvm import open_store
    s = open_store(path)
    got = s.rows(0, min(rows, s.n))
    return got.X, np.asarray(got.y, np.float64)


def child_model(spec):
    """A saved model predicting the first rows of a test store, compact and
    exact; with ``spec["lib"]``, that library's predict with its defaults."""
    with _limits(spec):
        if spec.get("lib"):
            sys.path.insert(0, spec["lib"])
        import numpy as np
        from streamcvm import load_model
        est = load_model(spec["model"])
        X, y = _store_rows(spec["test"], spec["rows"])
        regression = type(est).__name__ == "CVMRegressor"
        if spec.get("lib"):
            pred, base_s = _best(lambda: est.predict(X), spec["repeat"])
            return {"base_s": base_s, "base_rmse" if regression else "base_accuracy":
                    float(np.sqrt(np.mean((pred - y) ** 2))) if regression
                    else float(np.mean(np.asarray(pred, np.float64) == y))}
        machines = est._model_record()[0]
        out = {"n_test": int(len(y)), "n_sv": int(sum(len(m.coef) for m in machines))}
        m = machines[0]
        out["B"] = len(m.compact.coef) if m.compact is not None else None
        out["compact_decision"] = (m.compact_info or {}).get("decision")
        for name in ("exact", "compact"):
            est.set_params(compact=False if name == "exact" else "auto")
            pred, out[f"{name}_s"] = _best(lambda: est.predict(X), spec["repeat"])
            if regression:
                out[f"{name}_rmse"] = float(np.sqrt(np.mean((pred - y) ** 2)))
            else:
                out[f"{name}_accuracy"] = float(np.mean(np.asarray(pred, np.float64) == y))
            out[f"{name}_pred"] = pred
        out["agree"] = float(np.mean(out.pop("compact_pred") == out.pop("exact_pred")))
        _throughput(out, est, X, spec["repeat"], spec["threads"],
                    ("compact", "exact") if out["B"] else ("exact",))
        return out


def child_nystroem_store(spec):
    with _limits(spec):
        import numpy as np
        from streamcvm import open_store
        Xtr, ytr = B.read_rows(open_store(spec["train"]), spec["nystroem_rows"])
        model, out = _nystroem(spec, Xtr, ytr,
                               spec["regression"])
        X, y = _store_rows(spec["test"], spec["rows"])
        pred, out["predict_s"] = _best(lambda: model.predict(X), spec["repeat"])
        if spec["regression"]:
            out["rmse"] = float(np.sqrt(np.mean((pred - y) ** 2)))
        else:
            out["accuracy"] = float(np.mean(pred == y))
        return out


def child_store(spec):
    _, took = B.generated_store(spec["path"], spec["data"], spec["n"],
                                first_block=spec["first_block"])
    out = {"path": spec["path"]}
    if took is not None:
        out.update(generate_s=took, disk_bytes=B.path_bytes(spec["path"]))
    return out


def child_gamma(spec):
    import datasets as D
    Xtr = B.load_data(spec)[0]
    return {"gamma": float(D.protocol_gamma(Xtr))}


CHILD_JOBS = {"classify": child_classify, "nystroem_set": child_nystroem_set, "mmda": child_mmda,
              "model": child_model, "nystroem_store": child_nystroem_store,
              "store": child_store, "gamma": child_gamma}


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------

def _f(v, spec=".3f"):
    return B.fmt(v, spec)


def _ratio(a, b):
    return None if a is None or b is None else a / b


def main():
    ap = B.parser(__doc__)
    ap.add_argument("--sets", nargs="*", default=list(SETS), metavar="SET")
    ap.add_argument("--mmda", nargs="*", default=[], metavar="SET",
                    help="protocol sets for MMDA features (5 per class): transform s, "
                         "1-NN accuracy on compact and full features")
    ap.add_argument("--models", nargs="*", default=[], metavar="MODEL=TEST")
    ap.add_argument("--train", nargs="*", default=[], metavar="STORE",
                    help="training stores of --models, for their Nystroem rows")
    ap.add_argument("--friedman", type=int, default=1_000_000, metavar="N")
    ap.add_argument("--rows", type=int, default=500_000,
                    help="test rows of --models (default 500,000)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nystroem", type=int, nargs="*", default=[1000, 4000], metavar="K",
                    help="Nystroem sizes on the protocol sets (default 1000 4000; none: "
                         "no Nystroem rows)")
    ap.add_argument("--nystroem-rows", type=int, default=200_000)
    ap.add_argument("--nystroem-gb", type=float, default=2.0,
                    help="Nystroem's feature matrix at most this many GB (default 2: "
                         "K=4000 on at most 62,500 rows)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="a Nystroem child on a protocol set is killed after this many "
                         "seconds (default 600: LinearSVC on 4,000 dense features at one "
                         "thread can run for hours)")
    ap.add_argument("--baseline", metavar="REV")
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/predict")
    ap.add_argument("--json")
    B.add_raw_dir(ap)
    ap.add_argument("--report", metavar="JSON", help="print the report of a saved run")
    a = ap.parse_args()
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    if a.report:
        saved = B.load_json(a.report, None)
        if saved is None:
            raise SystemExit(f"--report: cannot read {a.report}")
        report(saved["runs"], [f"command: `{saved['command']}`",
                               f"commit: {saved['commit']}, {saved['date']}",
                               f"threads: {saved['threads']}"], saved.get("baseline"))
        return 0
    more = [f"threads: {a.threads} (numba and BLAS) in every child"]
    lib = None
    if a.baseline:
        sha, lib = B.baseline_worktree(a.baseline)
        more.append(f"baseline: {a.baseline} = {sha} ({lib})")
    bench_run = B.BenchRun(packages=("scikit-learn", "numpy", "numba"), more=more)
    common = dict(threads=a.threads, repeat=a.repeat, nystroem_rows=a.nystroem_rows,
                  nystroem_gb=a.nystroem_gb)
    runs = []
    for ds in a.sets:
        spec = dict(common, dataset=ds, raw_dir=a.raw_dir, quick=False, C=1.0)
        g = B.run_child(dict(spec, kind="gamma"))
        if "error" in g:
            runs.append({"case": ds, "error": g["error"]})
            continue
        spec["gamma"] = g["gamma"]
        B.log(f"{ds}: streamcvm ...")
        r = dict(B.run_child(dict(spec, kind="classify")), case=ds, gamma=g["gamma"])
        if lib:
            B.log(f"{ds}: baseline ...")
            base = B.run_child(dict(spec, kind="classify", lib=lib))
            r.update(base_s=base.get("base_s"), base_accuracy=base.get("base_accuracy"),
                     base_train_s=base.get("train_s"), base_error=base.get("error"))
        for K in a.nystroem:
            B.log(f"{ds}: Nystroem K={K} ...")
            r[f"nys{K}"] = B.run_child(dict(spec, kind="nystroem_set", K=K), a.timeout)
        runs.append(r)
    for ds in a.mmda:
        spec = dict(common, dataset=ds, raw_dir=a.raw_dir, quick=False, n_components=5)
        B.log(f"{ds}: MMDA, 5 features per class ...")
        runs.append(dict(B.run_child(dict(spec, kind="mmda")), case=f"{ds} MMDA 5/class"))
    os.makedirs(a.workdir, exist_ok=True)
    for i, mt in enumerate(a.models):
        model, test = mt.split("=", 1)
        B.log(f"{model}: predict ...")
        r = dict(B.run_child(dict(common, kind="model", model=model, test=test, rows=a.rows)),
                 case=os.path.basename(model.rstrip("/")))
        if lib:
            B.log(f"{model}: baseline ...")
            base = B.run_child(dict(common, kind="model", model=model, test=test,
                                    rows=a.rows, lib=lib))
            r.update({k: v for k, v in base.items() if k.startswith("base_")},
                     base_error=base.get("error"))
        if i < len(a.train):
            gamma = json.load(open(os.path.join(model, "model.json")))["kernel"]["gamma"]
            B.log(f"{model}: Nystroem K=1000 ...")
            r["nys1000"] = B.run_child(dict(common, kind="nystroem_store", train=a.train[i],
                                            test=test, rows=a.rows, K=1000, gamma=gamma,
                                            regression=False))
        runs.append(r)
    if a.friedman:
        train, _ = B.ensure_store(a.workdir, "friedman1", a.friedman, 0)
        test, _ = B.ensure_store(a.workdir, "friedman1", 100_000, 10 ** 6)
        model = os.path.join(a.workdir, f"friedman-{a.friedman}")
        B.log(f"friedman {a.friedman:,}: streamcvm train --task regression ...")
        env = dict(os.environ, PYTHONPATH=B.ROOT)
        t = time.perf_counter()
        import subprocess
        p = subprocess.run([sys.executable, "-m", "streamcvm", "train", train, "-o", model,
                            "--task", "regression", "-q", "--overwrite"], env=env,
                           capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"streamcvm train failed: {p.stderr.strip()[-300:]}")
        train_s = time.perf_counter() - t
        r = dict(B.run_child(dict(common, kind="model", model=model, test=test, rows=100_000)),
                 case=f"friedman1 {B.human_rows(a.friedman)} (SVR)", train_s=train_s)
        gamma = json.load(open(os.path.join(model, "model.json")))["kernel"]["gamma"]
        B.log("friedman: Nystroem K=2000 + Ridge ...")
        r["nys2000"] = B.run_child(dict(common, kind="nystroem_store", train=train, test=test,
                                        rows=100_000, K=2000, gamma=gamma, regression=True))
        runs.append(r)
    report(runs, bench_run.header, a.baseline)
    if a.json:
        bench_run.write(a.json, threads=a.threads, baseline=a.baseline, runs=runs)


def _nys(r):
    """The Nystroem records of a run: [(K, record)], smallest K first."""
    return sorted((int(k[3:]), v) for k, v in r.items() if k.startswith("nys"))


def _quality(r, rec, key):
    """Accuracy in percent, or RMSE (regression), of ``rec[key]``."""
    if "exact_rmse" in r:
        return _f(rec.get(key.replace("accuracy", "rmse")), ".4f")
    v = rec.get(key)
    return _f(None if v is None else 100 * v, ".2f")


def report(runs, header, baseline):
    """The report of ``runs`` (also from a saved JSON: ``--report``)."""
    print("\n".join(header) + "\n")
    print("Predict seconds, one run, the same test rows in every cell of a row; \"ours\" is "
          "the compact expansion where the model has one, else the exact one.\n")
    head = ["case", "test rows", "SVs", "B", "exact s", "compact s", "exact / compact"]
    head += ["base s", "ours / base"] if baseline else []
    head += ["Nystroem s", "ours / Nystroem (smallest K)"]
    qhead = ["case", "exact", "compact", "base", "Nystroem", "agree %", "kernel Mval/s",
             "roofline Mval/s", "% roofline"]
    rows, qrows = [], []
    for r in runs:
        if "error" in r and "exact_s" not in r:
            rows.append([r["case"], f"error: {r['error']}"] + [""] * (len(head) - 2))
            continue
        nys = _nys(r)
        ours = r.get("compact_s") if r.get("B") else r.get("exact_s")
        row = [r["case"], f"{r.get('n_test', 0):,}", f"{r.get('n_sv', 0):,}",
               f"{r['B']:,}" if r.get("B") else "-", _f(r.get("exact_s")),
               _f(r.get("compact_s")) if r.get("B") else "-",
               _f(_ratio(r.get("exact_s"), r.get("compact_s")) if r.get("B") else None, ".2f")]
        if baseline:
            row += [_f(r.get("base_s")), _f(_ratio(ours, r.get("base_s")), ".2f")]
        row += ["; ".join(f"K={k}: " + (_f(v.get("predict_s")) if "predict_s" in v
                                         else v.get("error", "-")[:40]) for k, v in nys) or "-",
                _f(_ratio(ours, nys[0][1].get("predict_s")) if nys else None, ".2f")]
        rows.append(row)
        best = "compact" if r.get("B") else "exact"
        rate, roof = r.get(f"{best}_kernel_mvals"), r.get(f"{best}_roofline_mvals")
        qrows.append([r["case"], _quality(r, r, "exact_accuracy"),
                      _quality(r, r, "compact_accuracy") if r.get("B") else "-",
                      _quality(r, r, "base_accuracy"),
                      "; ".join(f"K={k}: {_quality(r, v, 'accuracy')}" for k, v in nys) or "-",
                      _f(None if r.get("agree") is None else 100 * r["agree"], ".2f"),
                      _f(rate, ".0f"), _f(roof, ".0f"),
                      _f(None if not (rate and roof) else 100 * rate / roof, ".0f")])
    print(B.table(head, rows, left=("case", "Nystroem s")))
    print("\nAccuracy % (RMSE for the regression) of the same runs; the kernel throughput of "
          "ours against the roofline:\n")
    print(B.table(qhead, qrows, left=("case", "Nystroem")))
    fits = [r for r in runs if r.get("train_s") and r.get("base_train_s")]
    if fits:
        print("\nTraining, one thread, the same rows (this tree, compaction included, "
              "against the baseline): " + "; ".join(
                  f"{r['case']} {r['train_s']:.2f} s / {r['base_train_s']:.2f} s = "
                  f"{r['train_s'] / r['base_train_s']:.2f}x" for r in fits))
    for r in runs:
        if r.get("compact_fit_s") is not None:
            print(f"\n- {r['case']}: fit {r['train_s']:.1f} s without compaction, the "
                  f"compaction {r['compact_fit_s']:.1f} s more; test R^2 of the worst "
                  f"feature {B.fmt(r.get('r2_min_test'), '.4f')}")
    for r in runs:
        if r.get("compact_decision"):
            print(f"\n- {r['case']}: {r['compact_decision']}")


if __name__ == "__main__":
    sys.exit(main())
