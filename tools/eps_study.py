#!/usr/bin/env python
"""The effect of eps: test accuracy, training time and core-set size of
streamcvm's CVMClassifier as the ball tolerance eps goes from 1e-3 to 1e-6
(the BVM paper's Fig. 2 and its sec. 4.1, "Varying eps"; the paper uses
letter and usps, BVM and CVM, and finds accuracy flat over [1e-8, 1e-3] and
time and #SV levelling off below 1e-4).

Usage::

    python tools/eps_study.py                                   # ijcnn1, bvm
    python tools/eps_study.py --dataset usps --methods bvm cvm fvm
    python tools/eps_study.py --dataset usps --quick --eps-grid 1e-3 1e-4
    python tools/eps_study.py --replot /tmp/streamcvm-bench/eps_study/eps_study_ijcnn1.json

Writes ``eps_study_<dataset>.png``, ``.md`` and ``.json`` to ``--out-dir``
(default ``/tmp/streamcvm-bench/eps_study``; ``--quick`` appends ``_quick``).
The JSON is rewritten after every fit, so an interrupted study keeps what it
measured; ``--replot JSON`` redraws the PNG and the table from it.

Protocol: data from ``tools/datasets.py`` (``load``; ``--quick``: 3,000
training / 1,000 test rows, seed 0, as ``tools/bench_classify.py``),
C = 1, Gaussian kernel with gamma = ``protocol_gamma(Xtr)``, ``random_state=0``.
For each method (default bvm; ``--methods bvm cvm fvm``) the eps grid
(default 1e-3 5e-4 2e-4 1e-4 5e-5 2e-5 1e-5 5e-6 2e-6 1e-6) is run from the
largest eps to the smallest, then ``eps="auto"`` once. Each fit runs in its
own fresh Python process (this script with a hidden ``--child``), one after
the other, never concurrently; a fit that exceeds ``--timeout`` seconds
(default 1800; it counts the whole child: loading the data, warm-up, fit
and predict) is killed and becomes a "timeout" row, and the method's
smaller eps are then skipped (a smaller eps only takes longer), unless
``--keep-going``. The child first fits and predicts a tiny problem (200
training rows of the two most frequent classes, same parameters) so numba's
compilation / cache load is not timed.

What each figure is:

- train s: wall seconds (``time.perf_counter``) of ``fit`` alone (plot:
  middle panel, log scale; a timeout is an "x" at the timeout).
- accuracy %: test-set accuracy (plot: left panel).
- core set: ``core_set_size_``, core vectors summed over the one-vs-one
  machines (plot: right panel, log scale). With several machines (one-vs-one)
  the right panel also has each method's distinct #SV, dotted: that, not
  the summed core set, compares with SVC's #SV.
- #SV: distinct training rows with a nonzero coefficient in some machine;
  "#SV sum" is ``n_support_.sum()`` (per machine, summed).
- iters: ``n_iter_``, solver steps summed over machines.
- final eps: the eps each machine ended at (``history_``'s last level). For
  a fixed eps it is that eps; for ``eps="auto"`` the solver halves eps from
  0.1 until eps is small against the margin, so machines may stop at
  different levels: the table gives min / max, and the plot's star sits at
  the largest (loosest) one with a horizontal bar over [min, max].
- predict s, warm-up s: ``predict`` on the test set; the untimed warm-up.
- SVC (scikit-learn, LIBSVM; C = 1, same gamma, ``cache_size=2000``): the
  dashed grey lines (accuracy, train s, and its #SV on the core-set panel).
  It shares ``tools/bench_classify.py``'s SVC cache (``--svc-cache``, same
  key) and runs through that script's child when not cached. SVC solves the
  L1-SVM and CVMClassifier the L2-SVM, so the same C is not the same model.

The x axis is eps on a log scale, reversed: larger eps (looser) on the left,
smaller eps (tighter, slower) on the right. Note that every fit anneals eps
from 0.1 by halving down to its target (``eps_levels``), so a run at 1e-6
passes through levels near each larger grid value; the JSON keeps each
binary fit's per-level ``history_``.
"""
import importlib.metadata
import json
import os
import platform
import sys
import time

import benchlib as B     # standard library only
from benchlib import log, run_child

B.use_source_tree()

DATASETS = ["ijcnn1", "usps", "letter", "a9a", "w8a", "shuttle", "kddcup99"]
METHODS = ["bvm", "cvm", "fvm"]
EPS_GRID = [1e-3, 5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5, 5e-6, 2e-6, 1e-6]
BENCH_CLASSIFY = os.path.join(B.HERE, "bench_classify.py")    # runs the SVC reference
COLORS = {"bvm": "tab:blue", "cvm": "tab:orange", "fvm": "tab:green"}


# ---------------------------------------------------------------------------
# child: one fit in a fresh process
# ---------------------------------------------------------------------------

def child_prepare(spec):
    import numpy as np
    import datasets as D
    Xtr, ytr, Xte, yte = B.load_data(spec)
    return dict(D.summary(Xtr, ytr, Xte, yte), n_classes=int(len(np.unique(ytr))))


def child_fit(spec):
    import numpy as np
    from streamcvm import CVMClassifier
    import datasets as D
    Xtr, ytr, Xte, yte = B.load_data(spec)
    make = lambda: CVMClassifier(method=spec["method"], C=spec["C"], gamma=spec["gamma"],
                                 eps=spec["eps"], random_state=0)
    t = time.perf_counter()            # warm-up: numba compile / cache load
    Xw, yw = D.warmup_rows(Xtr, ytr)
    make().fit(Xw, yw).predict(Xw)
    out = {"warmup_s": time.perf_counter() - t}
    clf = make()
    _, out["train_s"] = B.timed(clf.fit, Xtr, ytr)
    pred, out["predict_s"] = B.timed(clf.predict, Xte)
    ms = clf.machines_
    finals = [m.history[-1]["eps"] for m in ms if m.history]
    out.update(
        accuracy=float(np.mean(np.asarray(pred, np.float64) == yte)),
        core_set_size=int(clf.core_set_size_), n_iter=int(clf.n_iter_),
        n_sv=int(len(np.unique(np.concatenate([m.sv_ids for m in ms])))),
        n_sv_total=int(np.sum(getattr(clf, "machine_n_support_", clf.n_support_))),
        n_machines=len(ms),
        eps_final_min=min(finals) if finals else None,
        eps_final_max=max(finals) if finals else None,
        eps_final_median=float(np.median(finals)) if finals else None,
        peak_rss=B.peak_rss_bytes())
    if len(ms) == 1:
        out["history"] = ms[0].history
    else:
        out["eps_final"] = finals
    return out


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------

def svc_reference(a, info, commit, now):
    """SVC's result from bench_classify's cache, else measured by its child
    (and cached there). None on error."""
    key = B.svc_key(a.dataset, info, a.C)
    hit = B.load_json(a.svc_cache, {}).get(key)
    if hit and not a.rerun_svc:
        log(f"svc: cached result of {hit['date']}")
        return dict(hit, cached=True, key=key)
    log("svc ...")
    spec = {"kind": "run", "method": "svc", "dataset": a.dataset, "raw_dir": a.raw_dir,
            "quick": a.quick, "C": a.C, "gamma": info["gamma"], "eps": None, "store": None}
    ref = run_child(spec, a.svc_timeout, script=BENCH_CLASSIFY)
    if "error" in ref:
        return None
    ref.update(date=now, commit=commit)
    cache = B.load_json(a.svc_cache, {})     # re-read: bench_classify may have written
    cache[key] = ref
    B.save_json(a.svc_cache, cache)
    return dict(ref, cached=False, key=key)


def eps_label(e):
    return "auto" if e == "auto" else f"{e:g}"


def table(runs):
    head = ["method", "eps", "train s", "accuracy %", "core set", "#SV", "#SV sum", "iters",
            "final eps (min / max)", "predict s", "warm-up s", "notes"]
    lines = []
    for r in runs:
        if "error" in r or "skipped" in r:
            cells = [r["method"], eps_label(r["eps"])] + [""] * (len(head) - 3) + \
                    [r.get("error") or r.get("skipped")]
        else:
            lo, hi = r.get("eps_final_min"), r.get("eps_final_max")
            fe = "-" if lo is None else (f"{lo:.3g}" if lo == hi else f"{lo:.3g} / {hi:.3g}")
            cells = [r["method"], eps_label(r["eps"]), f"{r['train_s']:.2f}",
                     f"{100 * r['accuracy']:.2f}", f"{r['core_set_size']:,}",
                     f"{r['n_sv']:,}", f"{r['n_sv_total']:,}", f"{r['n_iter']:,}", fe,
                     f"{r['predict_s']:.3f}", f"{r['warmup_s']:.2f}", ""]
        lines.append(cells)
    return B.table(head, lines, left=("method", "notes"))


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    runs, ref, info = res["runs"], res.get("svc"), res["info"]
    timeout = res["args"]["timeout"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), sharex=True)
    panels = [("accuracy", "test accuracy (%)", lambda r: 100 * r["accuracy"], False),
              ("train_s", "training time (s)", lambda r: r["train_s"], True),
              ("core_set_size", "core-set size (summed over machines)",
               lambda r: r["core_set_size"], True)]
    methods = list(dict.fromkeys(r["method"] for r in runs))
    for ax, (key, ylabel, val, logy) in zip(axes, panels):
        for m in methods:
            c = COLORS.get(m)
            ok = sorted([r for r in runs if r["method"] == m and r["eps"] != "auto"
                         and "error" not in r and "skipped" not in r], key=lambda r: r["eps"])
            if ok:
                ax.plot([r["eps"] for r in ok], [val(r) for r in ok], "o-", color=c, label=m)
                if key == "core_set_size" and any(r["n_sv"] != r["core_set_size"] for r in ok):
                    ax.plot([r["eps"] for r in ok], [r["n_sv"] for r in ok], ".:", color=c,
                            label=f"{m} distinct #SV (right panel)")
            for r in runs:
                if r["method"] == m and r["eps"] == "auto" and "error" not in r \
                        and r.get("eps_final_max"):
                    x, lo = r["eps_final_max"], r["eps_final_min"]
                    ax.errorbar([x], [val(r)], xerr=[[x - lo], [0.0]] if lo < x else None,
                                fmt="*", ms=15, color=c, mec="k", capsize=3,
                                label=f"{m} eps=auto")
            if key == "train_s":
                to = [r["eps"] for r in runs if r["method"] == m and r.get("timeout")
                      and r["eps"] != "auto"]
                if to:
                    ax.plot(to, [timeout] * len(to), "x", color=c, ms=10, mew=2,
                            label=f"{m} timeout (> {timeout:g} s)")
        if ref is not None:
            rv = {"accuracy": 100 * ref["accuracy"], "train_s": ref["train_s"],
                  "core_set_size": ref.get("n_sv")}[key]
            if rv is not None:
                ax.axhline(rv, ls="--", color="0.5", label="SVC (right panel: its #SV)")
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("eps  (smaller to the right)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        if logy:        # plain numbers (0.5, 20, 800), not 8x10^2
            g = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(g)
            lo, hi = ax.get_ylim()
            ax.yaxis.set_minor_formatter(g if hi < 10 * lo else matplotlib.ticker.NullFormatter())
    axes[0].invert_xaxis()          # shared: larger eps left, smaller (tighter) right
    handles = {}                    # one legend for the three panels, below them
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    q = " (quick: 3,000 train / 1,000 test rows)" if res["args"]["quick"] else ""
    fig.suptitle(f"{res['args']['dataset']}{q}: {info['n_train']:,} train / "
                 f"{info['n_test']:,} test, d={info['d']}, C={res['args']['C']:g}, "
                 f"gamma={info['gamma']:.4g}; commit {res['commit']}", fontsize=10)
    fig.legend(list(handles.values()), list(handles), loc="lower center",
               ncol=min(len(handles), 6), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(res, stem):
    """Write <stem>.png and <stem>.md from the result dict; returns the md text."""
    plot(res, stem + ".png")
    info, ref, a = res["info"], res.get("svc"), res["args"]
    lines = [f"# eps study: {a['dataset']}" + (" (quick)" if a["quick"] else ""), "",
             f"- command: `{res['command']}`",
             f"- commit: {res['commit']}, {res['date']}",
             f"- python {res['python']}, scikit-learn {res['sklearn']}, {res['cpus']} CPUs",
             f"- data: {info['n_train']:,} train / {info['n_test']:,} test rows, d={info['d']}"
             f"{' sparse' if info['sparse'] else ''}, {info['n_classes']} classes, "
             f"gamma={info['gamma']:.6g}, C={a['C']:g}, timeout {a['timeout']:g} s per fit"]
    if ref is not None:
        lines.append(f"- SVC reference: train {ref['train_s']:.2f} s, accuracy "
                     f"{100 * ref['accuracy']:.2f} %, #SV {ref['n_sv']:,}"
                     + (f" (cached {ref['date'][:16]}, {ref.get('commit', '?')})"
                        if ref.get("cached") else ""))
    lines += ["", table(res["runs"]), "",
              f"![eps study]({os.path.basename(stem)}.png)", "",
              "train s: fit wall seconds; core set: core vectors summed over machines; "
              "#SV: distinct support rows (#SV sum: per machine, summed); final eps: "
              "where the machines' annealing stopped (eps=auto: min / max over machines). "
              "Plot x axis reversed: smaller eps to the right. See the module docstring "
              "of tools/eps_study.py."]
    md = "\n".join(lines) + "\n"
    with open(stem + ".md", "w") as f:
        f.write(md)
    return md


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--dataset", default="ijcnn1", choices=DATASETS)
    ap.add_argument("--methods", nargs="+", default=["bvm"], choices=METHODS)
    ap.add_argument("--eps-grid", nargs="+", type=float, default=EPS_GRID, metavar="EPS")
    ap.add_argument("--no-auto", action="store_true", help='skip the eps="auto" runs')
    ap.add_argument("--no-svc", dest="svc", action="store_false",
                    help="no SVC reference line")
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per fit's child process, data loading and "
                    "warm-up included (default 1800)")
    ap.add_argument("--keep-going", action="store_true",
                    help="after a timeout, still run the method's smaller eps")
    ap.add_argument("--quick", action="store_true",
                    help=f"{B.QUICK_TRAIN:,} training / {B.QUICK_TEST:,} test rows (seed 0)")
    ap.add_argument("--out-dir", default="/tmp/streamcvm-bench/eps_study")
    ap.add_argument("--svc-cache", default="/tmp/streamcvm-bench/svc_cache.json",
                    help="SVC result cache shared with tools/bench_classify.py")
    ap.add_argument("--rerun-svc", action="store_true", help="ignore the cached SVC result")
    ap.add_argument("--svc-timeout", type=float, default=7200)
    B.add_raw_dir(ap)
    ap.add_argument("--replot", metavar="JSON", help="redraw PNG and md from a result JSON")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, {"prepare": child_prepare, "fit": child_fit})
    if a.replot:
        with open(a.replot) as f:
            res = json.load(f)
        stem = os.path.splitext(a.replot)[0]
        print(report(res, stem))
        log(f"wrote {stem}.png, {stem}.md")
        return 0
    if any(not 0 < e < 1 for e in a.eps_grid):
        ap.error("--eps-grid values must be in (0, 1)")
    grid = sorted(set(a.eps_grid), reverse=True)
    os.makedirs(a.out_dir, exist_ok=True)
    stem = os.path.join(a.out_dir, f"eps_study_{a.dataset}" + ("_quick" if a.quick else ""))
    command, commit, now = B.command_line(), B.git_commit(), B.now()
    log(f"command: {command}\ncommit: {commit}, {now}")
    base = {"dataset": a.dataset, "raw_dir": a.raw_dir, "quick": a.quick, "C": a.C}
    log(f"{a.dataset}: preparing data ...")
    info = run_child(dict(base, kind="prepare"), max(a.timeout, 600))
    if "error" in info:
        log(f"data preparation failed: {info['error']}")
        return 1
    log(f"  {info['n_train']:,} train / {info['n_test']:,} test rows, d={info['d']}, "
        f"{info['n_classes']} classes, gamma={info['gamma']:.6g}")
    res = {"command": command, "commit": commit, "date": now,
           "python": platform.python_version(),
           "sklearn": importlib.metadata.version("scikit-learn"), "cpus": os.cpu_count(),
           "args": vars(a), "info": info, "svc": None, "runs": []}
    if a.svc:
        res["svc"] = svc_reference(a, info, commit, now)
    spec = dict(base, kind="fit", gamma=info["gamma"])
    for m in a.methods:
        stopped = None
        for eps in grid + ([] if a.no_auto else ["auto"]):
            if stopped is not None and eps != "auto":
                res["runs"].append({"method": m, "eps": eps,
                                    "skipped": f"skipped: timeout at eps={stopped:g}"})
                continue
            log(f"{m} eps={eps_label(eps)} ...")
            r = run_child(dict(spec, method=m, eps=eps), a.timeout)
            r.update(method=m, eps=eps)
            if "error" not in r:
                log(f"  train {r['train_s']:.2f} s, accuracy {100 * r['accuracy']:.2f} %, "
                    f"core {r['core_set_size']:,}, #SV {r['n_sv']:,}, final eps "
                    f"{r['eps_final_min']:.3g}..{r['eps_final_max']:.3g}")
            elif r.get("timeout") and eps != "auto" and not a.keep_going:
                stopped = eps
            res["runs"].append(r)
            B.save_json(stem + ".json", res)     # partial results survive an interrupt
    B.save_json(stem + ".json", res)
    print(report(res, stem))
    log(f"wrote {stem}.png, {stem}.md, {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
