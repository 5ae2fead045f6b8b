#!/usr/bin/env python
"""Regression targets at any scale: ``CVMRegressor()`` with its defaults on
the same data with y in other units, which must give the same model up to
the scale.

Datasets: the protocol's regression sets (``tools/datasets.py``:
``REGRESSION``; 80/20 split, X and y z-scored on the training rows). Each is
fitted with its targets in several versions (``--target-scales``):

- ``std``: y as prepared (z-scored: mean 0, sd 1 on the training rows);
- ``raw``: y in its file's units (``datasets.load(..., raw_targets=True)``:
  the prepared y times the training sd plus the training mean; cadata is
  California house prices in dollars);
- ``xA``: A times the prepared y (``x1000``, ``x0.001`` ...);
- ``+B``: the prepared y plus B (``+1e6`` ...).

The test targets get the same transform. Every version's test RMSE is
divided by the standard deviation of that version's training targets
(``np.std``), so equal models give equal figures ("RMSE / sd"); "vs std" is
that figure over the ``std`` version's (1.000: the same accuracy), and
"max |vs std - 1|" the largest departure over the versions. R^2 is on the
test set.

The reference: scikit-learn's ``SVR()`` with its defaults (C=1,
epsilon=0.1, gamma="scale"; ``cache_size=2000`` as the protocol's reference
models, which does not change the model) on the ``std`` targets, fitted in
this run (``--no-svr``: not run).

The checks ("accept"): every version within ``TOL`` (1%, relative) of the
``std`` version's RMSE / sd, and the ``std`` version's RMSE at most
``SVR()``'s.

Usage::

    python tools/bench_target_scale.py                           # the six sets, all versions
    python tools/bench_target_scale.py --quick --datasets cpu_act cadata
    python tools/bench_target_scale.py --target-scales std raw x1000 +1e6 x0.001 \\
        --json /tmp/streamcvm-bench/target_scale.json

Each fit is one fresh child process (this script with a hidden ``--child``),
run one after the other, never concurrently; this parent imports only the
standard library. "fit s" is the child's ``fit`` alone (a first fit in a
fresh process: numba's cache load included); "peak RSS MB" the child's
``ru_maxrss``. ``--quick``: 3,000 random training rows and 1,000 test rows
(``datasets.subsample_index``, seed 0).
"""
import sys

import benchlib as B     # standard library only

B.use_source_tree()

REGRESSION = ["friedman1", "cadata", "cpu_act", "elevators", "pol", "house_16H"]
SCALES = ["std", "raw", "x1000", "+1e6"]
TOL = 0.01              # every version's RMSE / sd within 1% of the std version's


def parse_scale(s):
    """A ``--target-scales`` item: ("std" | "raw" | "mul" | "add", number or None)."""
    if s in ("std", "raw"):
        return s, None
    try:
        if s.startswith("x"):
            a = float(s[1:])
            if a == 0:
                raise ValueError
            return "mul", a
        if s.startswith("+") or s.startswith("-"):
            return "add", float(s)
    except ValueError:
        pass
    raise ValueError(f"not a target scale: {s!r} (std, raw, x<A>, +<B>, -<B>)")


def scale_arg(s):
    import argparse
    try:
        parse_scale(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return s


# ---------------------------------------------------------------------------
# children
# ---------------------------------------------------------------------------

def _data(spec):
    """(Xtr, ytr, Xte, yte) of the spec's dataset, its targets in the spec's version."""
    import numpy as np
    import datasets as D
    kind, v = parse_scale(spec["scale"])
    got = D.load_parts(spec["dataset"], spec.get("raw_dir"), ("Xtr", "ytr", "Xte", "yte"),
                       quick=(B.QUICK_TRAIN, B.QUICK_TEST) if spec["quick"] else None,
                       raw_targets=kind == "raw")
    ytr, yte = np.asarray(got["ytr"], np.float64), np.asarray(got["yte"], np.float64)
    if kind == "mul":
        ytr, yte = v * ytr, v * yte
    elif kind == "add":
        ytr, yte = ytr + v, yte + v
    return got["Xtr"], ytr, got["Xte"], yte


def _scores(y, f, sd):
    import numpy as np
    r = np.asarray(f, np.float64) - y
    rmse = float(np.sqrt(np.mean(r * r)))
    return {"rmse": rmse, "rmse_sd": rmse / sd,
            "r2": float(1.0 - np.sum(r * r) / np.sum((y - y.mean()) ** 2))}


def child_cvr(spec):
    import time
    import warnings
    import numpy as np
    from streamcvm import CVMRegressor
    Xtr, ytr, Xte, yte = _data(spec)
    sd = float(np.std(ytr))
    est = CVMRegressor()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t
    f = est.predict(Xte)
    out = {"dataset": spec["dataset"], "scale": spec["scale"], "n_train": int(len(ytr)),
           "n_test": int(len(yte)), "y_mean": float(np.mean(ytr)), "y_sd": sd,
           "fit_s": fit_s, "mu_sd": float(est.mu_) / sd, "gamma": float(est.gamma_),
           "epsilon_bar_sd": float(est.epsilon_bar_) / sd, "n_support": int(est.n_support_),
           "exact": bool(est.history_ and est.history_[-1].get("exact")),
           "warnings": [str(w.message) for w in caught
                        if str(w.message).startswith("streamcvm")],
           "peak_rss": B.peak_rss_bytes()}
    out.update(_scores(yte, f, sd))
    return out


def child_svr(spec):
    import time
    import numpy as np
    from sklearn.svm import SVR
    Xtr, ytr, Xte, yte = _data(dict(spec, scale="std"))
    est = SVR(cache_size=2000)
    t = time.perf_counter()
    est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t
    out = {"dataset": spec["dataset"], "fit_s": fit_s, "n_support": int(len(est.support_)),
           "peak_rss": B.peak_rss_bytes()}
    out.update(_scores(yte, est.predict(Xte), float(np.std(ytr))))
    return out


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------

def main():
    ap = B.parser(__doc__)
    ap.add_argument("--datasets", nargs="+", default=REGRESSION, choices=REGRESSION)
    ap.add_argument("--target-scales", nargs="+", default=SCALES, type=scale_arg,
                    metavar="SCALE", help="versions of y to fit: std, raw, x<A>, +<B> "
                                          f"(default: {' '.join(SCALES)}; std is always run)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{B.QUICK_TRAIN:,} training and {B.QUICK_TEST:,} test rows")
    ap.add_argument("--no-svr", action="store_true", help="no SVR() reference")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    ap.add_argument("--json", help="write the results here")
    B.add_raw_dir(ap)
    args = ap.parse_args()
    if args.child:
        import json
        spec = json.loads(args.child)
        return B.child_main(spec, {"cvr": child_cvr, "svr": child_svr})
    scales = ["std"] + [s for s in dict.fromkeys(args.target_scales) if s != "std"]
    bench_run = B.BenchRun(details=", one fit per child process")
    fits, svr = [], {}
    for ds in args.datasets:
        base = {"dataset": ds, "quick": args.quick, "raw_dir": args.raw_dir}
        if not args.no_svr:
            B.log(f"{ds}: SVR() on the std targets")
            svr[ds] = B.run_child(dict(base, kind="svr"), timeout=args.timeout)
        for s in scales:
            B.log(f"{ds}: CVMRegressor() on the {s} targets")
            r = B.run_child(dict(base, kind="cvr", scale=s), timeout=args.timeout)
            r.setdefault("dataset", ds)
            r.setdefault("scale", s)
            fits.append(r)
    summary = report(args, scales, fits, svr)
    if args.json:
        bench_run.write(args.json, quick=args.quick, scales=scales, tol=TOL, fits=fits, svr=svr,
                      summary=summary)
    return 0 if all(s["accept"] for s in summary) else 1


def report(args, scales, fits, svr):
    """Print the two tables; returns the per-dataset summary records."""
    F = B.fmt
    by = {(r["dataset"], r["scale"]): r for r in fits}
    head = ["data", "rows"] + [f"RMSE / sd: {s}" for s in scales] + \
        ["max \\|vs std - 1\\|", "SVR() RMSE", "std vs SVR()", "R2 std / raw", "accept"]
    rows, summary = [], []
    for ds in args.datasets:
        std = by.get((ds, "std"), {})
        ref = std.get("rmse_sd")
        vals = [by.get((ds, s), {}).get("rmse_sd") for s in scales]
        dev = None if ref is None or None in vals else max(abs(v / ref - 1.0) for v in vals)
        sv = svr.get(ds, {})
        ratio = None if "rmse" not in sv or "rmse" not in std else std["rmse"] / sv["rmse"]
        same = dev is not None and dev <= TOL
        beats = ratio is None or ratio <= 1.0
        ok = same and beats and ("rmse" in sv or args.no_svr)
        r2 = [by.get((ds, s), {}).get("r2") for s in ("std", "raw")]
        summary.append({"dataset": ds, "max_rel_dev": dev, "svr_ratio": ratio, "accept": ok})
        rows.append([ds, F(std.get("n_train"), ",")] + [F(v, ".4f") for v in vals]
                    + [F(dev, ".2%"), F(sv.get("rmse"), ".4f"), F(ratio, ".3f"),
                       " / ".join(F(v, ".4f") for v in r2),
                       ("yes" if ok else "**no**") + ("" if ok else
                                                     " (scale)" if not same else " (SVR)")])
    print()
    print(B.table(head, rows, left=("data", "accept")))
    print()
    head = ["data", "y", "y mean", "y sd", "RMSE", "RMSE / sd", "R2", "mu_ / sd", "gamma_",
            "epsbar / sd", "#SV", "fit s", "peak RSS MB", "warnings"]
    rows = []
    for r in fits:
        if "error" in r:
            rows.append([r["dataset"], r["scale"]] + ["-"] * 11 + [r["error"][:80]])
            continue
        rows.append([r["dataset"], r["scale"], F(r["y_mean"], ".6g"), F(r["y_sd"], ".6g"),
                     F(r["rmse"], ".5g"), F(r["rmse_sd"], ".4f"), F(r["r2"], ".4f"),
                     F(r["mu_sd"], ".3g"), F(r["gamma"], ".4g"), F(r["epsilon_bar_sd"], ".3g"),
                     F(r["n_support"], ","), F(r["fit_s"], ".2f"),
                     F(r["peak_rss"] / 1e6, ",.0f"),
                     "; ".join(w[:70] for w in r["warnings"]) or "none"])
    print(B.table(head, rows, left=("data", "y", "warnings")))
    if svr:
        print()
        print("SVR() (C=1, epsilon=0.1, gamma='scale') on the std targets: "
              + ", ".join(f"{ds} {F(s.get('rmse'), '.4f')} in {F(s.get('fit_s'), '.1f')} s"
                          for ds, s in svr.items()))
    return summary


if __name__ == "__main__":
    sys.exit(main())
