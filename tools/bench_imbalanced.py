#!/usr/bin/env python
"""Imbalanced classes: CVMClassifier(class_weight="balanced") against
scikit-learn's SVC(class_weight="balanced") (LIBSVM), and against streamcvm's own
unweighted model, on the protocol's skewed binary sets.

The check: on ijcnn1 (about 10% positives) and
kddcup99 10% (normal vs attack), the balanced loss of
``class_weight="balanced"`` is no worse than SVC's with the same weights,
and better than streamcvm's own unweighted model's.

Protocol. Data, splits and gamma as ``tools/bench_classify.py``
(``tools/datasets.py``, gamma = ``protocol_gamma``, the same for every
model). C = 1 for all. "balanced" is scikit-learn's
n / (2 n_c) for both libraries: LIBSVM multiplies class c's C by it, streamcvm
gives class c's rows C_i = C n / (2 n_c) (generalized-cvm sec. IV-A, a
center-constrained MEB: method cvm, eps "auto"). Models, each in its own
fresh child process, one after the other:

- SVC(class_weight="balanced") and SVC() (the unweighted reference);
- CVMClassifier(method="cvm", class_weight="balanced"), and the same with
  ``full_pass=True`` (passes over every row until none violates: the rare
  violators sampling misses);
- CVMClassifier(method="cvm") and CVMClassifier() (bvm, the default):
  streamcvm's unweighted models.

What each figure is: balanced loss = 1 - mean per-class recall on the test
split (what ``streamcvm evaluate`` prints); accuracy; AUC of the decision
function; train s = wall seconds of ``fit`` alone (ours after a warm-up fit
on 200 test rows: numba compile / cache load, not counted); #SV; peak RSS
(the child's ``ru_maxrss``).

Usage::

    python tools/bench_imbalanced.py
    python tools/bench_imbalanced.py --quick --datasets ijcnn1
"""
import datetime
import sys
import time

import benchlib as B     # standard library only
from benchlib import fmt, git_commit, log, run_child

B.use_source_tree()

DATASETS = ("ijcnn1", "kddcup99")
# (model, class_weight, full_pass), by name for --models
MODELS = {"svc-balanced": ("svc", "balanced", False), "svc": ("svc", None, False),
          "cvm-balanced": ("cvm", "balanced", False),
          "cvm-balanced-fullpass": ("cvm", "balanced", True),
          "cvm": ("cvm", None, False), "bvm": ("bvm", None, False)}


def child_prepare(spec):
    import datasets as D
    return D.summary(*B.load_data(spec))


def child_run(spec):
    import numpy as np
    from sklearn.metrics import roc_auc_score
    import datasets as D
    Xtr, ytr, Xte, yte = B.load_data(spec)
    out = {}
    cw = spec["class_weight"]
    if spec["model"] == "svc":
        from sklearn.svm import SVC
        clf = SVC(C=1.0, kernel="rbf", gamma=spec["gamma"], cache_size=2000, class_weight=cw)
    else:
        from streamcvm import CVMClassifier
        make = lambda: CVMClassifier(method=spec["model"], C=1.0, gamma=spec["gamma"],
                                     class_weight=cw, random_state=0,
                                     full_pass=spec.get("full_pass", False))
        t = time.perf_counter()
        Xw, yw = D.warmup_rows(Xte, yte)
        make().fit(Xw, yw).predict(Xw)
        out["warmup_s"] = time.perf_counter() - t
        clf = make()
    _, out["train_s"] = B.timed(clf.fit, Xtr, ytr)
    dec, out["predict_s"] = B.timed(clf.decision_function, Xte)
    pred = clf.classes_[(dec > 0).astype(int)]
    recall = [float(np.mean(pred[yte == c] == c)) for c in clf.classes_]
    out.update(accuracy=float(np.mean(pred == yte)), recall=recall,
               balanced_loss=1.0 - float(np.mean(recall)),
               auc=float(roc_auc_score(yte == clf.classes_[1], dec)),
               n_sv=int(np.sum(clf.n_support_)), peak_rss=B.peak_rss_bytes())
    if spec["model"] != "svc":
        out["core_set_size"] = int(clf.core_set_size_)
    return out


def label(model, cw, full_pass=False):
    name = "SVC" if model == "svc" else f"CVMClassifier {model}"
    return f"{name}{' balanced' if cw else ''}{' + full pass' if full_pass else ''}"


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--json", metavar="OUT", help="write all raw numbers here")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per run")
    ap.add_argument("--quick", action="store_true", help="3,000 train / 1,000 test rows")
    ap.add_argument("--raw-dir", help="raw data directory (default ../shared/data/raw)")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, {"prepare": child_prepare, "run": child_run})
    log(f"command: `{B.command_line()}`")
    log(f"commit: {git_commit()}, {datetime.datetime.now().isoformat(timespec='seconds')}")
    rows = []
    for ds in a.datasets:
        base = {"dataset": ds, "quick": a.quick, "raw_dir": a.raw_dir}
        info = run_child(dict(base, kind="prepare"), a.timeout)
        if "error" in info:
            log(f"{ds}: cannot prepare: {info['error']}")
            continue
        log(f"{ds}: {info['n_train']:,} train / {info['n_test']:,} test rows, train labels "
            f"{info['train_labels']}, gamma {info['gamma']:.6g}")
        for name in a.models:
            model, cw, fp = MODELS[name]
            r = run_child(dict(base, kind="run", model=model, class_weight=cw, full_pass=fp,
                               gamma=info["gamma"]), a.timeout)
            r.update(dataset=ds, model=model, class_weight=cw, full_pass=fp)
            if "error" not in r:
                log(f"  {label(model, cw, fp)}: balanced loss {r['balanced_loss']:.4f}, "
                    f"accuracy {r['accuracy']:.4f}, AUC {r['auc']:.4f}, "
                    f"train {r['train_s']:.2f} s, #SV {r['n_sv']:,}")
            rows.append(r)
    print("| dataset | model | balanced loss | recall (neg / pos) | accuracy | AUC | train s "
          "| #SV | peak RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['dataset']} | {label(r['model'], r['class_weight'], r.get('full_pass'))} | error: "
                  f"{r['error']} | | | | | | |")
            continue
        print(f"| {r['dataset']} | {label(r['model'], r['class_weight'], r.get('full_pass'))} | "
              f"{r['balanced_loss']:.4f} | {r['recall'][0]:.4f} / {r['recall'][1]:.4f} | "
              f"{r['accuracy']:.4f} | {r['auc']:.4f} | {fmt(r['train_s'], '.2f')} | "
              f"{r['n_sv']:,} | {r['peak_rss'] / 1e6:.0f} |")
    for ds in a.datasets:
        got = {(r["model"], r["class_weight"], r.get("full_pass", False)): r for r in rows
               if r["dataset"] == ds and "error" not in r}
        ours = got.get(("cvm", "balanced", True)) or got.get(("cvm", "balanced", False))
        svc = got.get(("svc", "balanced", False))
        plain = [got[k] for k in (("cvm", None, False), ("bvm", None, False)) if k in got]
        if ours and svc and plain:
            ok = ours["balanced_loss"] <= svc["balanced_loss"] and \
                all(ours["balanced_loss"] < p["balanced_loss"] for p in plain)
            unweighted = ", ".join(f"{p['balanced_loss']:.4f}" for p in plain)
            print(f"{ds}: balanced loss {ours['balanced_loss']:.4f} vs SVC balanced "
                  f"{svc['balanced_loss']:.4f} and ours unweighted {unweighted}: "
                  f"{'met' if ok else 'NOT met'}")
    if a.json:
        B.save_json(a.json, {"rows": rows, "commit": git_commit()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
