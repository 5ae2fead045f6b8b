"""Calibration of ``CVMClassifier(probability=True)`` against
``SVC(probability=True)`` (LIBSVM: Platt scaling by 5-fold cross-validation)
on the protocol classification sets, in the same run.

Both get the protocol's data and gamma (tools/datasets.py, as
tools/bench_classify.py), C = 1; streamcvm fits its sigmoids on the rows it
holds out from training (streamcvm/probability.py). Each fit runs in a
fresh child process under ``threadpoolctl.threadpool_limits(2)``.

Figures, on the protocol's test rows:
- Brier: mean over rows of sum_c (P(c | x) - [y = c])^2 (0 is perfect; 2 the worst);
- log loss: mean -log P(y | x), P clipped to [1e-15, 1];
- accuracy of argmax P (SVC's predict_proba can disagree with its predict);
- train s: the fit (streamcvm's includes its held-out pass and sigmoid fits;
  SVC's its five extra cross-validation fits);
- ratios: streamcvm over SVC (Brier, log loss: below 1 is better calibrated;
  train: below 1 is faster).

Usage::

    python tools/bench_probability.py                      # ijcnn1 a9a usps letter
    python tools/bench_probability.py --datasets usps --quick
"""
import json
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
    with threadpool_limits(2):
        if spec["method"] == "svc":
            from sklearn.svm import SVC
            clf = SVC(C=spec["C"], gamma=spec["gamma"], probability=True, cache_size=2000,
                      random_state=0)
        else:
            from streamcvm import CVMClassifier
            Xw, yw = D.warmup_rows(Xte, yte)    # warm-up: numba compile / cache load
            CVMClassifier(gamma=spec["gamma"], probability=True).fit(Xw, yw)
            clf = CVMClassifier(C=spec["C"], gamma=spec["gamma"], probability=True,
                                random_state=0)
        t = time.perf_counter()
        clf.fit(Xtr, ytr)
        train_s = time.perf_counter() - t
        P = clf.predict_proba(Xte)
    classes = np.asarray(clf.classes_)
    onehot = (yte[:, None] == classes[None, :]).astype(np.float64)
    p_true = np.clip((P * onehot).sum(axis=1), 1e-15, 1.0)
    return {"train_s": train_s, "brier": float(np.mean(((P - onehot) ** 2).sum(axis=1))),
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
    ap.add_argument("--raw-dir")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, {"prepare": child_prepare, "run": child_run})
    B.log(f"command: `{shlex.join(['python'] + sys.argv)}`; commit {B.git_commit()}")
    base = {"quick": a.quick, "raw_dir": a.raw_dir, "C": a.C, "eps": "auto", "params": {},
            "repeat": 1}
    rows = []
    for ds in a.datasets:
        info = B.run_child(dict(base, kind="prepare", dataset=ds, store=False), a.timeout)
        if "error" in info:
            rows.append({"dataset": ds, "error": info["error"]})
            continue
        res = {}
        for method in ("svc", "streamcvm"):
            B.log(f"{ds}: {method} ...")
            r = B.run_child(dict(base, kind="run", dataset=ds, gamma=info["gamma"],
                                 method=method), a.timeout)
            res[method] = r
            B.log(f"  {r}")
        rows.append({"dataset": ds, "n_train": info["n_train"], "n_test": info["n_test"], **res})
    print("| dataset | train / test rows | method | train s | Brier | log loss | accuracy % "
          "| Brier ratio | log-loss ratio | train ratio |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        if "error" in row:
            print(f"| {row['dataset']} | | | | | | | | | {row['error']} |")
            continue
        s, c = row.get("svc", {}), row.get("streamcvm", {})
        for name, r in (("SVC(probability=True)", s), ("streamcvm -b 1", c)):
            if "error" in r:
                print(f"| {row['dataset']} | | {name} | {r['error']} | | | | | | |")
                continue
            ratios = ["(ref)"] * 3 if r is s or "error" in s else [
                f"{r['brier'] / s['brier']:.3f}", f"{r['log_loss'] / s['log_loss']:.3f}",
                f"{r['train_s'] / s['train_s']:.3g}"]
            print(f"| {row['dataset']} | {row['n_train']:,} / {row['n_test']:,} | {name} | "
                  f"{r['train_s']:.1f} | {r['brier']:.4f} | {r['log_loss']:.4f} | "
                  f"{100 * r['accuracy']:.2f} | " + " | ".join(ratios) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
