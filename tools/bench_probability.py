"""Calibration of ``CVMClassifier(probability=True)`` against
``SVC(probability=True)`` (LIBSVM: Platt scaling by 5-fold cross-validation)
and scikit-learn-intelex's ``SVC(probability=True)`` (oneDAL) on the
protocol classification sets, in the same run.

All get the protocol's data and gamma (tools/datasets.py, as
tools/bench_classify.py), C = 1; streamcvm fits its sigmoids on the rows it
holds out from training (streamcvm/probability.py). sklearnex's SVC (2026.x)
fits oneDAL's SVC twice and a sigmoid on its own training rows'
decision values (``CalibratedClassifierCV`` on the frozen fit, no
cross-validation): not LIBSVM's procedure, so its calibration can differ
from LIBSVM's although the SVM is the same. Each fit runs in a fresh child
process under ``threadpoolctl.threadpool_limits(2)`` (BLAS).

Threads: LIBSVM is single-threaded (1). streamcvm runs on every core
(numba's threads, ``numba.get_num_threads()`` in its child) and sklearnex
with ``n_jobs`` = the CPU count (oneDAL's threads), for fit and
predict_proba. Speed ratios compare equal thread counts only: "train vs
sklearnex" and "predict vs sklearnex"; the former "train ratio" (streamcvm
on every core over single-threaded LIBSVM) is dropped, LIBSVM's own seconds
stay, at 1 thread. The sklearnex child records from sklearnex's logger
whether oneDAL or scikit-learn's fallback ran its fit and predict_proba
(notes; "backend" in the JSON). Without scikit-learn-intelex installed (the
``[bench]`` extra, x86_64 only) or with ``--no-sklearnex``, that reference is
skipped with a one-line message.

Figures, on the protocol's test rows:
- Brier: mean over rows of sum_c (P(c | x) - [y = c])^2 (0 is perfect; 2 the worst);
- log loss: mean -log P(y | x), P clipped to [1e-15, 1];
- accuracy of argmax P (SVC's predict_proba can disagree with its predict);
- threads: of train s and predict s;
- train s: the fit (streamcvm's includes its held-out pass and sigmoid fits;
  SVC's its five extra cross-validation fits; sklearnex's its second fit
  and the sigmoid fit);
- predict s: ``predict_proba`` on the test rows;
- Brier ratio, log-loss ratio: the row's over LIBSVM SVC's (below 1 is
  better calibrated; LIBSVM stays the calibration reference);
- train vs sklearnex, predict vs sklearnex: streamcvm's seconds over
  sklearnex's, at equal thread counts (below 1: faster).

Usage::

    python tools/bench_probability.py                      # ijcnn1 a9a usps letter
    python tools/bench_probability.py --datasets usps --quick
    python tools/bench_probability.py --datasets a9a --quick --no-sklearnex
"""
import json
import os
import shlex
import sys

import benchlib as B     # standard library only

B.use_source_tree()

DATASETS = ("ijcnn1", "a9a", "usps", "letter")


def child_prepare(spec):
    import datasets as D
    return D.summary(*B.load_data(spec))


def child_run(spec):
    import time
    import numpy as np
    from threadpoolctl import threadpool_limits
    import datasets as D
    Xtr, ytr, Xte, yte = B.load_data(spec)
    onedal = None
    with threadpool_limits(2):
        if spec["method"] == "svc":
            from sklearn.svm import SVC
            clf = SVC(C=spec["C"], gamma=spec["gamma"], probability=True, cache_size=2000,
                      random_state=0)
            threads = 1
        elif spec["method"] == "sklearnex":
            # no random_state: oneDAL's fit does not use one (sklearnex warns)
            make = lambda: B.sklearnex_estimator("svc", spec["threads"], C=spec["C"],
                                                 gamma=spec["gamma"], probability=True,
                                                 cache_size=2000)
            Xw, yw = D.warmup_rows(Xte, yte)    # warm-up: oneDAL's thread pool
            make().fit(Xw, yw).predict_proba(Xw)
            clf = make()
            threads = int(spec["threads"])
            onedal = B.OnedalLog().__enter__()
        else:
            from streamcvm import CVMClassifier
            Xw, yw = D.warmup_rows(Xte, yte)    # warm-up: numba compile / cache load
            CVMClassifier(gamma=spec["gamma"], probability=True).fit(Xw, yw)
            clf = CVMClassifier(C=spec["C"], gamma=spec["gamma"], probability=True,
                                random_state=0)
            import numba
            threads = numba.get_num_threads()
        t = time.perf_counter()
        clf.fit(Xtr, ytr)
        train_s = time.perf_counter() - t
        t = time.perf_counter()
        P = clf.predict_proba(Xte)
        predict_s = time.perf_counter() - t
    extra = {}
    if onedal is not None:
        onedal.__exit__(None, None, None)
        extra = onedal.record()
    classes = np.asarray(clf.classes_)
    onehot = (yte[:, None] == classes[None, :]).astype(np.float64)
    p_true = np.clip((P * onehot).sum(axis=1), 1e-15, 1.0)
    return {"train_s": train_s, "predict_s": predict_s, "threads": threads, **extra,
            "brier": float(np.mean(((P - onehot) ** 2).sum(axis=1))),
            "log_loss": float(np.mean(-np.log(p_true))),
            "accuracy": float(np.mean(classes[P.argmax(axis=1)] == yte)),
            "n_train": int(len(ytr)), "n_test": int(len(yte)),
            "peak_rss": B.peak_rss_bytes()}


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--datasets", nargs="+", default=DATASETS, choices=B.CLASSIFICATION)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true",
                    help=f"{B.QUICK_TRAIN:,} training / {B.QUICK_TEST:,} test rows")
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--no-sklearnex", action="store_true",
                    help="skip the scikit-learn-intelex SVC (oneDAL) reference")
    ap.add_argument("--raw-dir")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, {"prepare": child_prepare, "run": child_run})
    threads = os.cpu_count() or 1
    skx_missing = None if a.no_sklearnex else B.sklearnex_missing()
    methods = ["svc"] + ([] if a.no_sklearnex or skx_missing else ["sklearnex"]) + ["streamcvm"]
    B.log(f"command: `{shlex.join(['python'] + sys.argv)}`; commit {B.git_commit()}")
    B.log("threads: LIBSVM SVC 1, "
          + (f"sklearnex SVC n_jobs={threads} (oneDAL), " if "sklearnex" in methods else "")
          + "streamcvm numba's (every core); speed ratios only between equal thread counts")
    if skx_missing:
        B.log(skx_missing)
    elif "sklearnex" in methods:
        B.log(f"{B.SKLEARNEX} {B.sklearnex_version()}")
    base = {"quick": a.quick, "raw_dir": a.raw_dir, "C": a.C, "eps": "auto", "params": {},
            "repeat": 1}
    rows = []
    for ds in a.datasets:
        info = B.run_child(dict(base, kind="prepare", dataset=ds, store=False), a.timeout)
        if "error" in info:
            rows.append({"dataset": ds, "error": info["error"]})
            continue
        res = {}
        for method in methods:
            B.log(f"{ds}: {method} ...")
            r = B.run_child(dict(base, kind="run", dataset=ds, gamma=info["gamma"],
                                 method=method, threads=threads), a.timeout)
            if r.get("timeout"):
                r["error"] = f"> {a.timeout:g} s (timeout)"
            if method == "sklearnex" and "error" not in r:
                r["note"] = B.backend_note(r)
            res[method] = r
            B.log(f"  {r}")
        rows.append({"dataset": ds, "n_train": info["n_train"], "n_test": info["n_test"], **res})
    print("| dataset | train / test rows | method | threads | train s | predict s | Brier "
          "| log loss | accuracy % | Brier ratio | log-loss ratio | train vs sklearnex "
          "| predict vs sklearnex | notes |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    names = {"svc": "SVC(probability=True)",
             "sklearnex": "sklearnex SVC(probability=True)", "streamcvm": "streamcvm -b 1"}
    for row in rows:
        if "error" in row:
            print(f"| {row['dataset']} | | | | | | | | | | | | | {row['error']} |")
            continue
        s, x = row.get("svc", {}), row.get("sklearnex")
        for method in methods:
            r, name = row.get(method, {}), names[method]
            if "error" in r:
                print(f"| {row['dataset']} | | {name} | | {r['error']} | | | | | | | | | |")
                continue
            ratios = ["(ref)"] * 2 if method == "svc" or "error" in s else [
                f"{r['brier'] / s['brier']:.3f}", f"{r['log_loss'] / s['log_loss']:.3f}"]
            note = r.get("note", "")
            if method == "streamcvm":   # equal thread counts only
                why = None if x is None or "error" in x else \
                    B.threads_note(r.get("threads"), x.get("threads"))
                ok = x is not None and "error" not in x and not why
                speed = ([f"{r['train_s'] / x['train_s']:.3g}",
                          f"{r['predict_s'] / x['predict_s']:.3g}"] if ok else ["-", "-"])
                note = why or note
            else:
                speed = ["(ref)"] * 2 if method == "sklearnex" else ["-", "-"]
            print(f"| {row['dataset']} | {row['n_train']:,} / {row['n_test']:,} | {name} | "
                  f"{r.get('threads', '-')} | {r['train_s']:.1f} | {r['predict_s']:.2f} | "
                  f"{r['brier']:.4f} | {r['log_loss']:.4f} | {100 * r['accuracy']:.2f} | "
                  + " | ".join(ratios + speed) + f" | {note} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
