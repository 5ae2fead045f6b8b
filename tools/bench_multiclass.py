#!/usr/bin/env python
"""Many classes at scale: streamcvm's defaults on a K-class Gaussian mixture
against its binary twin and the references a user would pick instead, all
in the same run.

Data (``streamcvm.data.synthetic.write_store``, seed 0, cached in
``--workdir``): the ``gaussian`` generator with ``--classes`` classes (default
10), ``--d`` features (20) and ``--noise`` (1.5: classes that overlap a
little, an RBF machine scores ~91% on 10 classes, ~99% on 2; the
generator's default, 2, overlaps them much more), ``--rows`` training rows
(default 1M); its binary twin (the same generator with 2 classes, the same
rows, d and noise); a held-out test store of ``--test-rows`` rows of each
(``first_block=10**6``: another random stream of the same distribution).

One run after the other (never concurrently), each in its own process:

1. streamcvm, K classes and the binary twin: ``streamcvm train STORE -o
   MODEL -q --overwrite``, then ``streamcvm evaluate TEST MODEL`` (the wall
   time of the whole command, start-up and reading the test store
   included), and ``--exact`` when the model predicts with a compact basis.
   An untimed warm-up train and evaluate on 5,000 rows first.
2. ``sklearnex.svm.SVC(C=1, gamma)`` (gamma: the streamcvm model's) on
   random subsamples of 25K, 50K, 100K, ... rows (seed 0), doubling while
   the fits so far leave time in ``--budget`` seconds (default 900); the
   largest that finished is the reference (it predicts the test store).
3. ``Nystroem(gamma, 1000) + LinearSVC(C=1)`` likewise, its rows also capped
   by ``--memory-gb`` of float64 features (default 6).

Threads: 2 (numba / BLAS / oneDAL; liblinear is single-threaded). Each
reference child is ``bench_scale_accuracy.py``'s, so the figures are
measured as there.

Usage::

    python tools/bench_multiclass.py --rows 1M --json /tmp/streamcvm-bench/multiclass.json
    python tools/bench_multiclass.py --rows 100K --budget 120 --no-sklearnex
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import bench_scale_accuracy as S  # noqa: E402  (run_streamcvm, child_reference)

SEED = 0
WARMUP_ROWS = 5_000
FIRST_REF_ROWS = 25_000


def child_store(spec):
    """The store ``spec["path"]`` of ``spec["n"]`` gaussian rows (generated
    unless one of that many rows is there)."""
    from streamcvm import open_store
    from streamcvm.data import synthetic
    try:
        ok = open_store(spec["path"]).n == spec["n"]
    except Exception:           # missing or unreadable: generated again
        ok = False
    if not ok:
        synthetic.write_store(spec["path"], "gaussian", spec["n"], d=spec["d"], seed=SEED,
                              n_classes=spec["classes"], noise=spec["noise"],
                              first_block=spec["first_block"], overwrite=True)
    s = open_store(spec["path"])
    return {"n": s.n, "d": s.d, "chunks": s.n_chunks}


def store(a, classes, n, test=False):
    path = os.path.join(a.workdir, f"gaussian-k{classes}-d{a.d}-noise{a.noise:g}-"
                                   f"{'test' if test else 'train'}-{n}.zarr")
    r = B.run_child(dict(kind="store", path=path, n=n, d=a.d, classes=classes,
                         noise=a.noise, first_block=10 ** 6 if test else 0))
    if "error" in r:
        raise SystemExit(f"bench_multiclass.py: cannot make {path}: {r['error']}")
    return path


def ladder(a, method, train, test, gamma, n, cap):
    """The reference ``method`` on 25K, 50K, ... rows (at most ``n`` and
    ``cap``) while the budget lasts: every rung's record, the last that
    finished marked ``largest``."""
    rungs, left, rows = [], a.budget, min(FIRST_REF_ROWS, n, cap)
    while rows > 0 and left > 0:
        B.log(f"  {method} on {rows:,} rows ({left:.0f} s of the budget left) ...")
        spec = dict(kind="reference", method=method, train=train, test=test, gamma=gamma,
                    fit_rows=rows, K=1000, threads=2,
                    partial=os.path.join(a.workdir, f"partial-{os.getpid()}"))
        r = dict(B.run_reference(spec, left), method=method, fit_rows=rows)
        B.log(f"    {r}")
        rungs.append(r)
        left -= r.get("process_s", left)
        if "error" in r or rows >= min(n, cap):
            break
        rows = min(2 * rows, n, cap)
    done = [r for r in rungs if "error" not in r]
    if done:
        done[-1]["largest"] = True
    return rungs


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--rows", type=B.parse_rows, nargs="+", default=[1_000_000])
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--noise", type=float, default=1.5)
    ap.add_argument("--test-rows", type=B.parse_rows, default=500_000)
    ap.add_argument("--budget", type=float, default=900.0,
                    help="seconds each reference's ladder of subsamples may take (default 900)")
    ap.add_argument("--memory-gb", type=float, default=6.0,
                    help="GB of Nystroem features (1000 x 8 bytes a row; default 6)")
    ap.add_argument("--no-sklearnex", action="store_true")
    ap.add_argument("--no-nystroem", action="store_true")
    ap.add_argument("--no-binary", action="store_true", help="skip the binary twin")
    ap.add_argument("--timeout", type=float, default=7200.0)
    ap.add_argument("--streamcvm-args", default="", help='appended to "streamcvm train"')
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/multiclass")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, {"store": child_store, "reference": S.child_reference})
    if a.classes < 3:
        ap.error("--classes must be at least 3 (the binary twin is trained anyway)")
    os.makedirs(a.workdir, exist_ok=True)
    bench_run = B.BenchRun(packages=("numba", "scikit-learn", "scikit-learn-intelex"))
    extra = a.streamcvm_args.split()
    runs = []

    def save():
        if a.json:
            bench_run.write(a.json, runs=runs, classes=a.classes, d=a.d, noise=a.noise,
                          test_rows=a.test_rows, budget=a.budget)

    warm = store(a, a.classes, WARMUP_ROWS)
    B.log(f"warm-up train + evaluate on {WARMUP_ROWS:,} rows (untimed) ...")
    S.run_streamcvm(warm, warm, os.path.join(a.workdir, "model-warmup"), extra, a.timeout)
    for n in a.rows:
        cases = [(a.classes, "streamcvm")] + ([] if a.no_binary else [(2, "streamcvm")])
        for k, _ in cases:
            train, test = store(a, k, n), store(a, k, a.test_rows, test=True)
            B.log(f"{n:,} rows, {k} classes: streamcvm train ...")
            r = dict(rows=n, classes=k, code="streamcvm",
                     **S.run_streamcvm(train, test, os.path.join(a.workdir, f"model-k{k}-{n}"),
                                       extra, a.timeout))
            B.log(f"  {r}")
            runs.append(r)
            save()
            if k != a.classes or "gamma" not in r:
                continue
            refs = ([] if a.no_sklearnex else [("sklearnex", n)]) + \
                ([] if a.no_nystroem else [("nystroem", int(a.memory_gb * 1e9 // 8000))])
            for method, cap in refs:
                for q in ladder(a, method, train, test, r["gamma"], n, cap):
                    runs.append(dict(q, rows=n, classes=k, code=method))
                save()
    report(runs, bench_run.header)
    save()
    return 0


def report(runs, header):
    print("\n".join(header) + "\n")
    head = ["rows", "classes", "model", "fit rows", "train s", "peak RSS MB", "predict s",
            "test rows", "accuracy %", "exact predict s", "exact accuracy %",
            "SVs (over the machines)", "B"]
    out = []
    for r in runs:
        name = r["code"] + ("" if r["code"] == "streamcvm" else
                            (" (largest in budget)" if r.get("largest") else ""))
        acc = r.get("accuracy")
        out.append([f"{r['rows']:,}", str(r["classes"]), name,
                    B.fmt(r.get("fit_rows") or r["rows"], ",d"),
                    B.fmt(r.get("train_s"), ".1f") if "error" not in r else r["error"][:40],
                    B.fmt(r.get("peak_rss") and r["peak_rss"] / 2 ** 20, ".0f"),
                    B.fmt(r.get("predict_s"), ".1f"), B.fmt(r.get("test_rows"), ",d"),
                    B.fmt(None if acc is None else 100 * acc, ".2f"),
                    B.fmt(r.get("predict_exact_s"), ".1f"),
                    B.fmt(None if r.get("accuracy_exact") is None
                          else 100 * r["accuracy_exact"], ".2f"),
                    B.fmt(r.get("n_sv"), ",d"), B.fmt(r.get("compact_B"), ",d")])
    print(B.table(head, out))
    by = {(r["rows"], r["classes"], r["code"]): r for r in runs if r["code"] == "streamcvm"}
    for (n, k, _), r in sorted(by.items()):
        two = by.get((n, 2, "streamcvm"))
        if k != 2 and two and r.get("train_s") and two.get("train_s"):
            print(f"\n- {n:,} rows: {k} classes train in {r['train_s'] / two['train_s']:.2f}x "
                  f"the binary twin's time, predict in "
                  f"{r['predict_s'] / two['predict_s']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
