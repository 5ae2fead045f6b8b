#!/usr/bin/env python
"""One-class benchmark: streamcvm's CVMOneClass against scikit-learn's
OneClassSVM (LIBSVM) as attack detectors on kddcup99 (10%).

The acceptance check: trained on the normal traffic of kddcup99 10% only,
the AUC for detecting attacks is at least that of OneClassSVM (same gamma,
nu tuned) at a fraction of its training time.

Protocol. Data come from ``tools/datasets.py`` (``load("kddcup99")``: label
-1 normal, +1 attack; 80/20 split; min-max scaled; 118 features). Both
models train on the *normal* rows of the training split only (~77.6k rows)
and score the whole test split (~98.8k rows, normal and attacks). Both use
the Gaussian kernel with the same gamma = ``protocol_gamma`` of the normal
training rows (1 / mean squared distance between rows, 5,000 rows, seed 0).
The outlier score is minus ``decision_function`` (higher = more anomalous)
for both, and AUC is ``roc_auc_score(y_test == attack, score)``.

- CVMOneClass: every ``--methods`` (default: "cvm", the estimator's default,
  and "bvm") for every ``--Cs`` (default 0.1 1 10), eps="auto". The headline
  is the default method and C=1; the other C show the sensitivity.
- OneClassSVM: kernel="rbf", cache_size=2000, every ``--nus``. "nu tuned"
  means the nu of the best test AUC is the reference: tuned on the test set
  itself, which favours the reference.

No scikit-learn-intelex reference: sklearnex (oneDAL) has no OneClassSVM
(its ``sklearnex.svm`` has SVC, SVR, NuSVC and NuSVR only), so LIBSVM's
OneClassSVM stays the only reference here, single-threaded; the report
says so. (The other benchmarks, bench_classify, bench_regression,
bench_probability and bench_scale_accuracy, run sklearnex's SVC / SVR as a
same-thread reference.)

Threads: OneClassSVM (LIBSVM) runs on 1 thread; CVMOneClass on every core
(numba's threads: "threads" column). The speed ratio compares equal thread
counts only: each CVMOneClass child fits a second time with numba and BLAS
held to one thread ("train s 1t"), and "train vs best OCSVM 1t" is that
over OneClassSVM's train s. (The former "train vs best OCSVM", every core
over one thread, is dropped.) The model scored is the first, every-core fit;
the 1-thread fit runs second in the same process (warm caches: on tiny
problems it can even come out faster).

Usage::

    python tools/bench_oneclass.py --quick
    python tools/bench_oneclass.py --json /tmp/streamcvm-bench/oneclass.json
    python tools/bench_oneclass.py --methods cvm --Cs 1 --nus 0.01 0.05

Each model runs in its own fresh Python process (this script with a hidden
``--child``), one after the other. A first child prepares the data (the
normal training rows and the test split, written as .npy to a temporary
folder, which is removed at the end) and computes gamma; that is not timed.
Run children load only those arrays, so their peak RSS is not dominated by
the full prepared dataset.

What each figure is:

- train s: wall seconds (``time.perf_counter``) of ``fit`` alone. A
  streamcvm child first fits the first 500 normal training rows with the
  same parameters and scores 500 test rows (numba compile / cache load);
  that warm-up is excluded ("warmup_s" in the JSON).
- score s: wall seconds of ``decision_function`` on the whole test split.
- AUC: ROC AUC of the outlier score for attacks against normal test rows.
  It depends only on the ranking, not on the threshold; the JSON also has
  the fractions of test rows and of normal test rows with decision < 0
  ("flagged_test", "flagged_normal": the operating point of ``predict``).
- #SV: support vectors (OneClassSVM ``support_``; CVMOneClass the support
  rows of the ball, i.e. its training outliers; "core_set_size" in the JSON).
- peak RSS MB: the child's ``ru_maxrss`` (10^6 bytes) at the end:
  interpreter, imports, the normal training rows and the test split, the
  model and the scoring ("rss_before_fit" and "vm_hwm" in the JSON).
- threads: of train s and score s (OneClassSVM 1; CVMOneClass every core).
- train s 1t: CVMOneClass's fit again at one thread (see Threads).
- train vs best OCSVM 1t: train s 1t / train s of the best-nu OneClassSVM,
  both at one thread (below 1: faster).

``--quick`` uses 5,000 random normal training rows and 10,000 random test
rows (seed 0; gamma then comes from those 5,000 rows). The header gives the
command line and the git commit ("-dirty": tracked files differ from HEAD).
"""
import os
import shutil
import sys
import tempfile
import time

import benchlib as B     # standard library only
from benchlib import fmt, log, peak_rss_bytes, run_child

B.use_source_tree()

DATASET = "kddcup99"
QUICK_TRAIN, QUICK_TEST = 5000, 10000
WARMUP_ROWS = 500
NUS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.2]
CS = [0.1, 1.0, 10.0]
METHODS = ["cvm", "bvm"]
HEADLINE = ("cvm", 1.0)     # CVMOneClass defaults
NO_SKLEARNEX = ("sklearnex: no reference: scikit-learn-intelex has no OneClassSVM (only SVC, "
                "SVR, NuSVC, NuSVR); LIBSVM's OneClassSVM is the only reference")


# ---------------------------------------------------------------------------
# children
# ---------------------------------------------------------------------------

def child_prepare(spec):
    """Normal training rows and the test split -> .npy in spec["dir"]; gamma."""
    import numpy as np
    import datasets as D
    t0 = time.perf_counter()
    Xtr, ytr, Xte, yte = D.load(DATASET, spec.get("raw_dir"))
    Xn = Xtr[ytr == -1]
    if spec["quick"]:
        tr, te = D.subsample_index(len(Xn), len(yte), QUICK_TRAIN, QUICK_TEST, seed=0)
        Xn, Xte, yte = Xn[tr], Xte[te], yte[te]
    for name, a in (("Xtr", Xn), ("Xte", Xte), ("yte", yte)):
        np.save(os.path.join(spec["dir"], name + ".npy"), np.ascontiguousarray(a))
    return {"n_train_split": int(len(ytr)), "n_train": int(len(Xn)), "n_test": int(len(yte)),
            "n_test_attack": int(np.sum(yte == 1)), "d": int(Xn.shape[1]),
            "gamma": float(D.protocol_gamma(Xn)),
            "cache_key": D.cache_key(DATASET, spec.get("raw_dir")),
            "prepare_s": time.perf_counter() - t0}


def child_run(spec):
    import numpy as np
    from sklearn.metrics import roc_auc_score
    load = lambda n: np.load(os.path.join(spec["dir"], n + ".npy"))
    Xtr, Xte, yte = load("Xtr"), load("Xte"), load("yte")
    out = {}
    if spec["model"] == "ocsvm":
        from sklearn.svm import OneClassSVM
        est = OneClassSVM(kernel="rbf", gamma=spec["gamma"], nu=spec["nu"], cache_size=2000)
        out["threads"] = 1          # LIBSVM
    else:
        import numba
        from streamcvm import CVMOneClass
        make = lambda: CVMOneClass(method=spec["model"], C=spec["C"], gamma=spec["gamma"],
                                   eps="auto", random_state=0)
        t = time.perf_counter()         # warm-up: numba compile / cache load
        make().fit(Xtr[:WARMUP_ROWS]).decision_function(Xte[:WARMUP_ROWS])
        out["warmup_s"] = time.perf_counter() - t
        est = make()
        out["threads"] = numba.get_num_threads()
    out["rss_before_fit"] = peak_rss_bytes()
    _, out["train_s"] = B.timed(est.fit, Xtr)
    if spec["model"] != "ocsvm":    # again at OneClassSVM's one thread, for the ratio
        from threadpoolctl import threadpool_limits
        numba.set_num_threads(1)
        try:
            with threadpool_limits(1):
                _, out["train_1t_s"] = B.timed(make().fit, Xtr)
        finally:
            numba.set_num_threads(out["threads"])
    dec, out["score_s"] = B.timed(
        lambda: np.asarray(est.decision_function(Xte), np.float64).ravel())
    if not np.all(np.isfinite(dec)):
        raise FloatingPointError(f"{int(np.sum(~np.isfinite(dec)))} non-finite decisions")
    out["auc"] = float(roc_auc_score(yte == 1, -dec))
    out["flagged_test"] = float(np.mean(dec < 0))             # predicted outliers
    out["flagged_normal"] = float(np.mean(dec[yte == -1] < 0))  # false-positive rate
    if spec["model"] == "ocsvm":
        out["n_sv"] = int(len(est.support_))
        out["n_iter"] = int(np.sum(getattr(est, "n_iter_", -1)))
    else:
        out["n_sv"] = int(len(est.dual_coef_))
        out["core_set_size"] = int(est.core_set_size_)
        out["n_iter"] = int(est.n_iter_)
        out["eps_reached"] = est.history_[-1]["eps"] if est.history_ else None
    out["peak_rss"] = peak_rss_bytes()
    out["vm_hwm"] = B.vm_hwm_bytes()
    return out


CHILD_JOBS = {"prepare": child_prepare, "run": child_run}


# ---------------------------------------------------------------------------
# parent (standard library only: a child's ru_maxrss starts at the parent's)
# ---------------------------------------------------------------------------

def label(r):
    if r["model"] == "ocsvm":
        return "OneClassSVM", f"nu={r['nu']:g}"
    return f"CVMOneClass {r['model']}", f"C={r['C']:g}"


def table(rows):
    head = ["model", "params", "threads", "train s", "train s 1t", "score s", "AUC", "#SV",
            "peak RSS MB", "train vs best OCSVM 1t", "notes"]
    lines = []
    for r in rows:
        model, params = label(r)
        if "error" in r:
            cells = [model, params] + [""] * (len(head) - 3) + [r["error"]]
        else:
            cells = [model, params, fmt(r.get("threads"), ""), f"{r['train_s']:.2f}",
                     fmt(r.get("train_1t_s"), ".2f"), f"{r['score_s']:.2f}",
                     f"{r['auc']:.4f}", f"{r['n_sv']:,}", f"{r['peak_rss'] / 1e6:,.0f}",
                     fmt(r.get("train_ratio_1t"), ".3g"), r.get("note", "")]
        lines.append(cells)
    return B.table(head, lines, left=("model", "params", "notes"))


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--nus", nargs="+", type=float, default=NUS, help="OneClassSVM nu grid")
    ap.add_argument("--Cs", nargs="+", type=float, default=CS, help="CVMOneClass C grid")
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=["cvm", "bvm", "fvm"])
    ap.add_argument("--json", metavar="OUT", help="write all raw numbers here")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run (default 3600)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_TRAIN:,} normal training / {QUICK_TEST:,} test rows (seed 0)")
    B.add_raw_dir(ap)
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    bench_run = B.BenchRun(details=f", QUICK ({QUICK_TRAIN:,} normal train / {QUICK_TEST:,} "
                                f"test rows, seed 0)" if a.quick else "",
                        more=[NO_SKLEARNEX, "threads: OneClassSVM (LIBSVM) 1, CVMOneClass "
                              "numba's (every core), also timed at 1 thread for the ratio"])
    tmp = tempfile.mkdtemp(prefix="bench_oneclass-")
    try:
        log(f"{DATASET}: preparing data ...")
        info = run_child({"kind": "prepare", "quick": a.quick, "raw_dir": a.raw_dir,
                          "dir": tmp}, a.timeout)
        if "error" in info:
            log(f"cannot prepare {DATASET}: {info['error']}")
            return 1
        data = (f"{DATASET}: trained on {info['n_train']:,} normal rows of the training "
                f"split ({info['n_train_split']:,} rows); scored on {info['n_test']:,} test "
                f"rows ({info['n_test_attack']:,} attacks), d={info['d']}; "
                f"gamma={info['gamma']:.6g} (protocol_gamma of the normal training rows, "
                f"same for both models)")
        log(data)
        base = {"kind": "run", "dir": tmp, "gamma": info["gamma"]}
        specs = [dict(base, model="ocsvm", nu=nu) for nu in a.nus]
        specs += [dict(base, model=m, C=C) for m in a.methods for C in a.Cs]
        rows = []
        for spec in specs:
            log(f"  {' '.join(label(spec))} ...")
            r = dict(run_child(spec, a.timeout), **{k: v for k, v in spec.items()
                                                     if k not in ("kind", "dir")})
            if "error" not in r:
                log(f"    train {r['train_s']:.2f} s, score {r['score_s']:.2f} s, "
                    f"AUC {r['auc']:.4f}, #SV {r['n_sv']:,}")
            rows.append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = [r for r in rows if "error" not in r]
    ocsvm = [r for r in ok if r["model"] == "ocsvm"]
    best = max(ocsvm, key=lambda r: r["auc"]) if ocsvm else None
    if best is not None:
        best["note"] = "reference: best nu (tuned on the test set)"
        for r in ok:            # both at one thread
            t1 = r["train_s"] if r["model"] == "ocsvm" else r.get("train_1t_s")
            if t1 is not None:
                r["train_ratio_1t"] = t1 / best["train_s"]
    for r in ok:
        if (r["model"], r.get("C")) == HEADLINE:
            r["note"] = "headline (defaults)"
    print("\n".join(bench_run.header) + "\n")
    print(f"- {data}\n")
    print(table(rows))
    head = next((r for r in ok if (r["model"], r.get("C")) == HEADLINE), None)
    if head is not None and best is not None:
        print(f"\nheadline: CVMOneClass({HEADLINE[0]}, C={HEADLINE[1]:g}) AUC "
              f"{head['auc']:.4f} vs OneClassSVM(nu={best['nu']:g}) AUC {best['auc']:.4f} "
              f"({'>=' if head['auc'] >= best['auc'] else '<'}), train time at one thread "
              f"{fmt(head.get('train_1t_s'), '.2f')} s vs {best['train_s']:.2f} s "
              f"(ratio {fmt(head.get('train_ratio_1t'), '.3g')}; CVMOneClass on "
              f"{head.get('threads')} threads: {head['train_s']:.2f} s)")
    if a.json:
        bench_run.write(a.json, args=vars(a), data=info, runs=rows, sklearnex=NO_SKLEARNEX)
    return 0


if __name__ == "__main__":
    sys.exit(main())
