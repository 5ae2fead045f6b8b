#!/usr/bin/env python
"""Classification benchmark: streamcvm's CVMClassifier (BVM, CVM, Frank-Wolfe)
against scikit-learn's SVC (LIBSVM) and scikit-learn-intelex's SVC (oneDAL)
on the protocol datasets, in the same run.

Data are prepared by ``tools/datasets.py`` exactly as
``docs/protocol.md`` says (and cached). All sides get the same data,
``C`` (default 1) and the Gaussian kernel with the protocol's gamma = 1/beta,
beta the mean squared distance between training rows on 5,000 rows (seed 0);
both SVCs run with ``cache_size=2000``. Note that they solve different
problems: CVMClassifier is an L2-SVM (squared slack), SVC an L1-SVM, so the
same ``C`` is not the same regularisation.

Threads: LIBSVM is single-threaded (threads 1). streamcvm runs on every
core (numba's threads; the "threads" column is ``numba.get_num_threads()``
in its child), and so does the sklearnex reference
(``sklearnex.svm.SVC(n_jobs=os.cpu_count())``: oneDAL's threads for fit
and predict). Speed ratios only compare equal thread counts: the headline
ratios are against sklearnex (same threads; a ratio is left out, with a
note, if the counts differ); against LIBSVM only the predict ratio, with
streamcvm's predict timed again at one thread ("predict speed-up vs LIBSVM
1t"). The former "train vs SVC" and "predict speed-up" (streamcvm on every
core over single-threaded LIBSVM) are dropped; LIBSVM stays the accuracy
reference ("d acc vs LIBSVM pp") and its own train / predict seconds are
shown at one thread. The sklearnex child records from sklearnex's logger
which backend ran its fit and predict (oneDAL, or scikit-learn's fallback:
then "FALLBACK" in its notes and ``"onedal": false`` in the JSON).
Without scikit-learn-intelex installed (it is in the ``[bench]`` extra,
x86_64 only), or with ``--no-sklearnex``, that reference is skipped with a
one-line message and the "vs sklearnex" cells are "-".

Usage::

    python tools/bench_classify.py --quick --datasets ijcnn1 usps --methods bvm
    python tools/bench_classify.py --quick --datasets a9a --methods bvm --no-svc   # vs oneDAL only
    python tools/bench_classify.py --json /tmp/streamcvm-bench/classify.json
    python tools/bench_classify.py --datasets kddcup99 --store --eps 1e-3 --no-svc
    python tools/bench_classify.py --methods bvm --no-svc --repeat 5 --baseline becdcf6

Each (dataset, method) measurement runs in its own fresh Python process
(this script with a hidden ``--child``), one after the other, never
concurrently. This parent imports only the standard library, because on
Linux a child's ``ru_maxrss`` starts at the parent's peak (it is carried over
fork/exec). A first child per dataset prepares the data (filling the cache),
computes gamma and, with ``--store``, writes the training rows into a Zarr
store (cached next to the data); none of that is timed.

What each figure is:

- train s: wall seconds (``time.perf_counter``) of ``fit`` alone. For
  streamcvm, the child first fits a tiny problem of the same data (200 test
  rows of two classes, same parameters) and predicts on it, so numba's
  compile / cache load is not counted; that is "warm-up s". With
  ``--repeat N`` the fit runs N times in the child and train s is the
  fastest (all N in the JSON as ``train_all_s``): on a shared machine the
  minimum is the figure least moved by other load.
- vs base: with ``--baseline REV``, each streamcvm method also runs with the
  library of git revision REV (a detached worktree under
  ``/tmp/streamcvm-bench/baseline-<sha>``, this script and the same data),
  in the same run, right after the current code; the ratio is train s now /
  train s at REV. This, not "train vs sklearnex" across runs, is the figure
  to judge a change's speed by: a reference's own time moves 2-3x with the
  machine's load.
- predict s: wall seconds of ``predict`` on the whole test set.
- accuracy: test accuracy in percent.
- #SV: distinct training rows that are support vectors (SVC: ``n_support_``
  sum; streamcvm: distinct ``sv_ids`` over the one-vs-one machines; the
  per-machine sum is in the JSON as ``n_sv_total``).
- peak RSS MB: the child's ``ru_maxrss`` (10^6 bytes) at the end, i.e. the
  interpreter, imports, the prepared data (train + test in memory, or only
  the test set for a store run), the model and prediction. ``vm_hwm`` and
  ``rss_before_fit`` in the JSON cross-check it. With ``--quick`` the child
  still reads the full prepared arrays before subsampling, so there the
  figure mostly measures the data set size, not the solver.
- threads: the thread count of train s and predict s (LIBSVM 1;
  streamcvm and sklearnex every core).
- train vs sklearnex: method train s / sklearnex train s, same thread count
  (below 1: faster than oneDAL's SVC).
- predict vs sklearnex: method predict s / sklearnex predict s, same thread
  count (below 1: faster).
- predict speed-up vs LIBSVM 1t: LIBSVM predict s / method predict s with
  streamcvm held to one thread (see below; above 1: faster).
- d acc vs LIBSVM pp: accuracy - LIBSVM SVC's accuracy, in percentage points
  (for the sklearnex row too: oneDAL solves the same L1-SVM).
- core / eps: core-set size (summed over machines) and the largest final eps
  among the machines (``eps="auto"`` anneals until eps is small against the margin).
- store/mem: with ``--store``, the "<method> (store)" row trains from the
  Zarr store on disk (``fit(streamcvm.open_store(path))``); the ratio is its
  train s over the in-memory row's train s.

SVC runs in the same invocation by default (the machine is shared and noisy:
a ratio is only sound between runs of one invocation). For development,
``--svc-cache FILE`` (JSON) keeps SVC results keyed by dataset, training /
test rows, C, gamma (10 significant digits) and the scikit-learn version,
because SVC takes ~2,000 s on kddcup99; a cached figure is marked
"cached <date>" in the notes column and in the header. ``--rerun-svc``
measures it again (and refreshes the cache). The sklearnex reference is
never cached (``--sklearnex-timeout`` per run).
- predict speed-up vs LIBSVM 1t: at equal thread counts: streamcvm's predict
  timed again with BLAS and numba held to one thread (threadpoolctl,
  ``numba.set_num_threads``), against LIBSVM's single-threaded predict.
``--quick`` trains on 3,000 random training rows and tests on 1,000 (seed 0).
The header gives the command line and the git commit ("-dirty": tracked
files differ from HEAD, as ``git describe --dirty``).
"""
import os
import sys
import time

import benchlib as B     # standard library only
from benchlib import QUICK_TEST, QUICK_TRAIN, fmt, log, peak_rss_bytes

B.use_source_tree()

DATASETS = B.CLASSIFICATION
METHODS = ["bvm", "cvm", "fvm"]
REFS = ("svc", "sklearnex")     # LIBSVM, oneDAL


# ---------------------------------------------------------------------------
# child: one measurement in a fresh process
# ---------------------------------------------------------------------------

def child_prepare(spec):
    import scipy.sparse as sp
    import datasets as D
    t0 = time.perf_counter()
    Xtr, ytr, Xte, yte = B.load_data(spec)
    out = dict(D.summary(Xtr, ytr, Xte, yte),
               cache_key=D.cache_key(spec["dataset"], spec.get("raw_dir")),
               prepare_s=time.perf_counter() - t0)
    if spec.get("store"):
        path = os.path.join(D.cache_dir(), "stores",
                            f"{out['cache_key']}-{'quick' if spec['quick'] else 'full'}.zarr")
        if not os.path.exists(path):     # StoreWriter publishes atomically on close
            from streamcvm.ingest import StoreWriter
            os.makedirs(os.path.dirname(path), exist_ok=True)
            t = time.perf_counter()
            nnz_row = Xtr.nnz / max(Xtr.shape[0], 1) if sp.issparse(Xtr) else None
            with StoreWriter(path, Xtr.shape[1], sparse=sp.issparse(Xtr),
                             nnz_per_row=nnz_row) as w:
                for a in range(0, Xtr.shape[0], 65536):
                    X = Xtr[a:a + 65536]
                    w.append((X.indptr, X.indices, X.data) if sp.issparse(X) else X,
                             ytr[a:a + 65536])
                w.close({"bench_dataset": spec["dataset"]})
            out["store_write_s"] = time.perf_counter() - t
        out["store"] = path
    return out


def child_run(spec):
    import numpy as np
    import datasets as D
    method, from_store = spec["method"], bool(spec.get("store"))
    Xtr, ytr, Xte, yte = B.load_data(spec, train=not from_store)
    lib = spec.get("lib")
    if lib:         # --baseline: the library of another revision (tools/ stays this one's)
        sys.path.insert(0, lib)
    out = {"n_test": int(len(yte))}
    onedal = None
    if method == "svc":
        import sklearn
        from sklearn.svm import SVC
        clf = SVC(C=spec["C"], kernel="rbf", gamma=spec["gamma"], cache_size=2000)
        out["sklearn"] = sklearn.__version__
        out["warmup_s"] = None
        out["threads"] = 1          # LIBSVM
    elif method == "sklearnex":
        import sklearn
        make = lambda: B.sklearnex_estimator("svc", spec["threads"], C=spec["C"],
                                             kernel="rbf", gamma=spec["gamma"],
                                             cache_size=2000)
        t = time.perf_counter()       # warm-up: imports, oneDAL's thread pool
        Xw, yw = D.warmup_rows(Xte, yte)
        make().fit(Xw, yw).predict(Xw)
        out["warmup_s"] = time.perf_counter() - t
        out["sklearn"] = sklearn.__version__
        out["threads"] = int(spec["threads"])
        clf = make()
        onedal = B.OnedalLog().__enter__()
    else:
        from streamcvm import CVMClassifier, open_store
        eps = spec["eps"]
        extra = spec.get("params") or {}
        make = lambda **kw: CVMClassifier(method=method, C=spec["C"], gamma=spec["gamma"],
                                          eps=eps, random_state=0, **kw)
        t = time.perf_counter()       # warm-up: numba compile / cache load, imports
        Xw, yw = D.warmup_rows(Xte, yte)
        # (without --params: stop="validation" needs more rows than the warm-up has)
        make().fit(Xw, yw).predict(Xw)
        if from_store:
            st = open_store(spec["store"])
            st.chunk(0)
        out["warmup_s"] = time.perf_counter() - t
        clf = make(**extra)
    out["rss_before_fit"] = peak_rss_bytes()
    times = []
    for _ in range(max(1, int(spec.get("repeat", 1))) if method not in REFS else 1):
        t = time.perf_counter()
        clf.fit(open_store(spec["store"]) if from_store else Xtr, None if from_store else ytr)
        times.append(time.perf_counter() - t)
    out["train_s"], out["train_all_s"] = min(times), times
    if method not in REFS:
        import streamcvm
        out["library"] = os.path.dirname(os.path.dirname(os.path.abspath(streamcvm.__file__)))
    t = time.perf_counter()
    pred = clf.predict(Xte)
    out["predict_s"] = time.perf_counter() - t
    if onedal is not None:
        onedal.__exit__(None, None, None)
        out.update(onedal.record())
    if method not in REFS:     # at LIBSVM's thread count: one
        import numba
        from threadpoolctl import threadpool_limits
        before = numba.get_num_threads()
        out["threads"] = before
        numba.set_num_threads(1)
        try:
            with threadpool_limits(1):
                t = time.perf_counter()
                clf.predict(Xte)
                out["predict_1t_s"] = time.perf_counter() - t
        finally:
            numba.set_num_threads(before)
    out["accuracy"] = float(np.mean(np.asarray(pred, np.float64) == yte))
    if method in REFS:
        out["n_sv"] = int(np.sum(clf.n_support_))
    else:
        ms = clf.machines_
        out["n_sv"] = int(len(np.unique(np.concatenate([m.sv_ids for m in ms]))))
        out["n_sv_total"] = int(np.sum(getattr(clf, "machine_n_support_", clf.n_support_)))
        out["n_machines"] = len(ms)
        out["core_set_size"] = int(clf.core_set_size_)
        out["n_iter"] = int(clf.n_iter_)
        eps_final = [m.history[-1]["eps"] for m in ms if m.history]
        out["eps_reached"] = max(eps_final) if eps_final else None
        out["gamma_used"] = float(clf.gamma_)
    out["peak_rss"] = peak_rss_bytes()
    out["vm_hwm"] = B.vm_hwm_bytes()
    return out


CHILD_JOBS = {"prepare": child_prepare, "run": child_run}


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------

def table(rows, with_store, with_base=False):
    head = ["dataset", "method", "threads", "train s", "predict s", "accuracy %", "#SV",
            "peak RSS MB", "train vs sklearnex", "predict vs sklearnex",
            "predict speed-up vs LIBSVM 1t", "d acc vs LIBSVM pp", "warm-up s", "core", "eps"]
    head += ["store/mem"] if with_store else []
    head += ["vs base"] if with_base else []
    head += ["notes"]
    lines = []
    for r in rows:
        if "error" in r:
            cells = [r["dataset"], r["method"]] + [""] * (len(head) - 3) + [r["error"]]
        else:
            acc = r["accuracy"] * 100
            m = r["method"]
            ref = lambda who, cell: "(ref)" if m in who else cell
            cells = [r["dataset"], m, fmt(r.get("threads"), "d"), fmt(r["train_s"], ".2f"),
                     fmt(r["predict_s"], ".3f"), f"{acc:.2f}", f"{r['n_sv']:,}",
                     f"{r['peak_rss'] / 1e6:,.0f}",
                     ref(REFS, fmt(r.get("train_vs_sklearnex"), ".3g")),
                     ref(REFS, fmt(r.get("predict_vs_sklearnex"), ".3g")),
                     ref(REFS, fmt(r.get("predict_speedup_1t"), ".2f")),
                     ref(("svc",), fmt(r.get("acc_diff_pp"), "+.2f")),
                     fmt(r.get("warmup_s"), ".2f"), fmt(r.get("core_set_size"), ","),
                     fmt(r.get("eps_reached"), ".2g")]
            cells += [fmt(r.get("store_ratio"), ".2f")] if with_store else []
            cells += [fmt(r.get("base_ratio"), ".2f")] if with_base else []
            cells += [r.get("note", "")]
        lines.append(cells)
    return B.table(head, lines, left=("dataset", "method", "notes"))


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS, metavar="NAME")
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS + ["svc"])
    ap.add_argument("--no-svc", action="store_true", help="skip the SVC (LIBSVM) reference")
    ap.add_argument("--no-sklearnex", action="store_true",
                    help="skip the scikit-learn-intelex SVC (oneDAL) reference")
    ap.add_argument("--eps", default="auto", help='"auto" (default) or a float in (0, 1)')
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--gamma-scale", type=float, default=1.0,
                    help="gamma = this / beta for every side (default 1: the protocol's)")
    ap.add_argument("--json", metavar="OUT", help="write all raw numbers here")
    ap.add_argument("--svc-cache", metavar="FILE",
                    help="development only: reuse SVC results kept in FILE (JSON; marked "
                         "'cached' in the output) instead of running SVC in this invocation")
    ap.add_argument("--rerun-svc", action="store_true",
                    help="with --svc-cache: run SVC again and refresh the cache")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--svc-timeout", type=float, default=7200,
                    help="seconds per SVC run (default 7200: SVC takes ~2,000 s on kddcup99)")
    ap.add_argument("--sklearnex-timeout", type=float, default=7200,
                    help="seconds per sklearnex SVC run (default 7200)")
    ap.add_argument("--store", action="store_true",
                    help="also train streamcvm from a Zarr store on disk")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_TRAIN:,} training / {QUICK_TEST:,} test rows (seed 0)")
    ap.add_argument("--params", nargs="+", default=[], metavar="KEY=VALUE",
                    help="more CVMClassifier parameters, e.g. stop=validation "
                         "train_size=all (numbers are read as numbers)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="fit each streamcvm method N times in its process; train s is "
                         "the fastest")
    ap.add_argument("--baseline", metavar="REV",
                    help="also run each streamcvm method with the library of git "
                         "revision REV, in the same run (column 'vs base')")
    B.add_raw_dir(ap)
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    eps = a.eps if a.eps == "auto" else float(a.eps)
    methods = [m for m in a.methods if m != "svc"]
    with_svc = not a.no_svc
    skx_missing = None if a.no_sklearnex else B.sklearnex_missing()
    with_skx = not a.no_sklearnex and skx_missing is None
    threads = os.cpu_count() or 1
    bench_run = B.BenchRun(
        details=f", C={a.C:g}, eps={eps}"
        + (", QUICK (3,000 train / 1,000 test rows)" if a.quick else ""),
        more=[f"threads: streamcvm every core (numba), sklearnex SVC n_jobs={threads} "
              f"(oneDAL), LIBSVM SVC 1; speed ratios only between equal thread counts"]
        + ([f"{B.SKLEARNEX} {B.sklearnex_version()}"] if with_skx else [])
        + ([skx_missing] if skx_missing else []))
    commit, now, header = bench_run.commit, bench_run.date, bench_run.header
    svc_cache = B.load_json(a.svc_cache, {}) if a.svc_cache else {}
    if a.svc_cache and with_svc:
        header.append(f"SVC: cached results from {a.svc_cache} where present "
                      "(marked 'cached' in the notes): not this invocation's")
        log(header[-1])
    params = dict(B.parse_param(p) for p in a.params)
    base = {"quick": a.quick, "raw_dir": a.raw_dir, "C": a.C, "eps": eps, "params": params,
            "repeat": a.repeat}
    libs = [("", None)]
    if a.baseline:
        sha, path = B.baseline_worktree(a.baseline)
        libs.append((f" @{sha}", path))
        header.append(f"baseline: {a.baseline} = {sha} ({path})")
        log(header[-1])
    tag = "".join(f" {k}={v}" for k, v in params.items())
    infos, rows = {}, []
    for ds in a.datasets:
        log(f"{ds}: preparing data ...")
        info = B.run_child(dict(base, kind="prepare", dataset=ds, store=a.store), a.timeout)
        infos[ds] = info
        if "error" in info:
            rows += [dict(dataset=ds, method=m, error=info["error"])
                     for m in (["svc"] if with_svc else []) + (["sklearnex"] if with_skx else [])
                     + methods]
            continue
        log(f"  {info['n_train']:,} train / {info['n_test']:,} test rows, d={info['d']}, "
            f"{'sparse' if info['sparse'] else 'dense'}, gamma={info['gamma']:.6g}, "
            f"train labels {info['train_labels']}")
        spec = dict(base, kind="run", dataset=ds, gamma=info["gamma"] * a.gamma_scale)
        ref = None
        if with_svc:
            key = B.svc_key(ds, dict(info, gamma=info["gamma"] * a.gamma_scale), a.C)
            hit = svc_cache.get(key)
            if hit and not a.rerun_svc:
                ref = dict(hit, note=f"cached {hit['date'][:16]} ({hit.get('commit', '?')})",
                           cached=True)
                log(f"  svc: cached result of {hit['date']}")
            else:
                log("  svc ...")
                ref = B.run_child(dict(spec, method="svc"), a.svc_timeout)
                if "error" not in ref:
                    ref.update(date=now, commit=commit)
                    if a.svc_cache:
                        svc_cache[key] = ref
                        B.save_json(a.svc_cache, svc_cache)
            rows.append(dict(ref, dataset=ds, method="svc"))
            if "error" in ref:
                ref = None
        skx = None
        if with_skx:
            log(f"  sklearnex SVC ({threads} threads) ...")
            skx = B.run_child(dict(spec, method="sklearnex", threads=threads),
                              a.sklearnex_timeout)
            if "error" not in skx:
                skx["note"] = B.backend_note(skx)
                log(f"    train {skx['train_s']:.2f} s, predict {skx['predict_s']:.3f} s, "
                    f"accuracy {skx['accuracy']:.4f}; {skx['note']}")
                if ref is not None:
                    skx["acc_diff_pp"] = (skx["accuracy"] - ref["accuracy"]) * 100
            elif skx.get("timeout"):
                skx["error"] = f"> {a.sklearnex_timeout:g} s (timeout)"
            rows.append(dict(skx, dataset=ds, method="sklearnex"))
            if "error" in skx:
                skx = None
        for m in methods:
            mem = {}                    # the in-memory row of each library
            for from_store in ([False, True] if a.store else [False]):
                now_row = None
                for at, lib in libs:
                    name = m + tag + (" (store)" if from_store else "") + at
                    log(f"  {name} ...")
                    r = B.run_child(dict(spec, method=m, lib=lib,
                                         store=info["store"] if from_store else None),
                                    a.timeout)
                    r.update(dataset=ds, method=name)
                    rows.append(r)
                    if "error" in r:
                        continue
                    log(f"    train {r['train_s']:.2f} s, accuracy {r['accuracy']:.4f}, "
                        f"peak RSS {r['peak_rss'] / 1e6:,.0f} MB")
                    if skx is not None:     # equal thread counts only
                        why = B.threads_note(r.get("threads"), skx["threads"])
                        if why:
                            r["note"] = "; ".join(filter(None, (r.get("note"), why)))
                        else:
                            r["train_vs_sklearnex"] = r["train_s"] / skx["train_s"]
                            r["predict_vs_sklearnex"] = r["predict_s"] / skx["predict_s"]
                    if ref is not None:
                        if r.get("predict_1t_s"):   # LIBSVM's one thread against ours at one
                            r["predict_speedup_1t"] = ref["predict_s"] / r["predict_1t_s"]
                        r["acc_diff_pp"] = (r["accuracy"] - ref["accuracy"]) * 100
                    if not from_store:
                        mem[lib] = r
                    elif lib in mem:
                        r["store_ratio"] = r["train_s"] / mem[lib]["train_s"]
                    if lib is None:
                        now_row = r
                    elif now_row is not None:
                        now_row["base_ratio"] = now_row["train_s"] / r["train_s"]
    print("\n".join(header) + "\n")
    for ds, info in infos.items():
        if "error" not in info:
            print(f"- {ds}: {info['n_train']:,} train / {info['n_test']:,} test, d={info['d']}"
                  f"{' sparse' if info['sparse'] else ''}, gamma={info['gamma']:.6g}"
                  + (f" x {a.gamma_scale:g}" if a.gamma_scale != 1.0 else ""))
    print()
    print(table(rows, a.store, bool(a.baseline)))
    if a.json:
        bench_run.write(a.json, args=vars(a), datasets=infos, runs=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
