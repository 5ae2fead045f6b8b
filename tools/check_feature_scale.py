#!/usr/bin/env python
"""Features at any scale: fit and predict with the rows multiplied by 1e20
and by 1e-20, and with gamma=1e300, and compare with the unscaled run.

For each set and estimator, each route (``arrays``: fit / predict in
memory; ``store``: a Zarr store of the scaled float32 rows, fit and predict
by its path; ``cli``: an svmlight file of the scaled rows through
``streamcvm ingest``, ``train``, ``predict``), each scale s in 1, 1e20,
1e-20 multiplies training and test rows (in float64, then float32, as a
user's data would be). A gamma given as a number is given in the scaled
rows' units (G / s^2, G the protocol's 1 / mean squared distance of the
unscaled rows), so every scale asks for the same model. Then the same
estimator with gamma=1e300 on the unscaled rows, which must be refused in
one line (a ValueError; for the command line exit status 1, one stderr
line and no model folder).

A row of the table says what came out: the share of test labels equal to
the unscaled run's (classification, one-class), or the regression's test
RMSE against the unscaled run's and the largest |f - f_unscaled| in
target standard deviations; the number of non-finite decision values; or
the refusal's line. Exit status 1 when a decision value is not finite, a
run fails other than by a one-line refusal, gamma=1e300 is not refused,
or a scaled run's labels agree on fewer than 99% of the test rows and
fewer than the control's (RMSE: more than 10% above the unscaled run's).
The control multiplies the rows by 1 + 1e-7, which float32 holds as well
as 1: it shows how far rounding at float32's precision alone moves a model
(a selection of C and gamma on validation rows can flip on it).

Usage::

    python tools/check_feature_scale.py                     # gaussian, friedman1, ijcnn1, usps
    python tools/check_feature_scale.py --sets gaussian --routes arrays
    python tools/check_feature_scale.py --rows 10000 2000 --sets ijcnn1

Sets: ``gaussian`` (streamcvm.data.synthetic, 10 features, two classes),
``friedman1`` (regression), and the protocol sets ``ijcnn1``, ``usps``,
``cadata`` ... (tools/datasets.py, from --raw-dir; a random ``--rows``
subsample, seed 0). Classification sets run CVMClassifier() (the
defaults), CVMClassifier(C=1, gamma=G/s^2, method="bvm") and
CVMOneClass(); regression sets CVMRegressor() and CVMRegressor(gamma=G/s^2).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import benchlib as B

SCALES = (1.0, 1e20, 1e-20)
CONTROL = 1.0 + 1e-7    # no range issue: how much float32 rounding alone moves the model
HUGE_GAMMA = 1e300
SHOWN = 150             # characters of a refusal's line in the table
REGRESSION_SETS = ("friedman1", "cadata", "cpu_act", "elevators", "pol", "house_16H")


def _load(name, rows, raw_dir):
    """(Xtr, ytr, Xte, yte, regression?) as float64 dense arrays."""
    import numpy as np
    n_tr, n_te = rows
    if name == "gaussian":
        from streamcvm.data.synthetic import gaussian_block
        Xtr, ytr = gaussian_block(0, n_tr, d=10)
        Xte, yte = gaussian_block(1, n_te, d=10)
    elif name == "friedman1":
        from streamcvm.data.synthetic import friedman1_block
        Xtr, ytr = friedman1_block(0, n_tr)
        Xte, yte = friedman1_block(1, n_te)
    else:
        import datasets
        g = datasets.load_parts(name, raw_dir, quick=(n_tr, n_te))
        Xtr, ytr, Xte, yte = g["Xtr"], g["ytr"], g["Xte"], g["yte"]
    dense = lambda X: np.asarray(X.toarray() if hasattr(X, "toarray") else X, np.float64)
    return dense(Xtr), np.asarray(ytr, np.float64), dense(Xte), np.asarray(yte, np.float64), \
        name in REGRESSION_SETS


def _cases(regression, G):
    """(label, estimator class name, params as a function of the scale)."""
    if regression:
        return [("CVMRegressor()", "CVMRegressor", lambda s: {}),
                ("CVMRegressor(gamma=G/s^2)", "CVMRegressor", lambda s: {"gamma": G / s ** 2})]
    return [("CVMClassifier()", "CVMClassifier", lambda s: {}),
            ("CVMClassifier(C=1, gamma=G/s^2, bvm)", "CVMClassifier",
             lambda s: {"C": 1.0, "gamma": G / s ** 2, "method": "bvm"}),
            ("CVMOneClass()", "CVMOneClass", lambda s: {})]


def _huge(regression):
    if regression:
        return [("CVMRegressor(gamma=1e300)", "CVMRegressor", {"gamma": HUGE_GAMMA})]
    return [("CVMClassifier(C=1, gamma=1e300, bvm)", "CVMClassifier",
             {"C": 1.0, "gamma": HUGE_GAMMA, "method": "bvm"}),
            ("CVMOneClass(gamma=1e300)", "CVMOneClass", {"gamma": HUGE_GAMMA})]


def _store(path, X, y):
    from streamcvm.data.writer import StoreWriter
    w = StoreWriter(path, X.shape[1], overwrite=True)
    w.append(X, y)
    w.close()
    return path


def _svmlight(path, X, y):
    with open(path, "w") as f:
        for row, lab in zip(X, y):
            lab = f"{int(lab)}" if float(lab).is_integer() else f"{lab:.17g}"
            f.write(lab + " " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(row)
                                         if v != 0) + "\n")


def _fit_api(route, cls, params, Xtr, ytr, Xte, yte, work, key):
    """(predictions, decision values) or raises."""
    import numpy as np
    import streamcvm
    est = getattr(streamcvm, cls)(**params)
    y = None if cls == "CVMOneClass" else ytr
    if route == "arrays":
        est.fit(Xtr, y)
        p, d = est.predict_with_decision(Xte)
    else:
        tr = _store(os.path.join(work, f"{key}-train.zarr"), Xtr, ytr)
        te = _store(os.path.join(work, f"{key}-test.zarr"), Xte, yte)
        est.fit(tr)
        p, d = est.predict_with_decision(te)
    return np.asarray(p, np.float64), np.asarray(d, np.float64)


def _cli(args):
    env = dict(os.environ)
    env["PYTHONPATH"] = B.ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "streamcvm.cli"] + args, env=env,
                          capture_output=True, text=True)


class Refused(Exception):
    """The command line's refusal: its summary, and whether it was one
    stderr line, exit status 1 and no model folder."""

    def __init__(self, line, one_line=False):
        super().__init__(line)
        self.one_line = one_line


def _fit_cli(cls, params, Xtr, ytr, Xte, yte, work, key):
    """The command line's predictions (decision values: none; NaN would
    show in the predictions), or raises Refused(the stderr line)."""
    import numpy as np
    paths = {}
    for part, X, y in (("train", Xtr, ytr), ("test", Xte, yte)):
        txt = os.path.join(work, f"{key}-{part}.svm")
        _svmlight(txt, X, y)
        paths[part] = os.path.join(work, f"{key}-{part}.zarr")
        r = _cli(["ingest", txt, "-o", paths[part], "--overwrite", "--dense"])
        if r.returncode:
            raise Refused(f"ingest exit {r.returncode}: {r.stderr.strip()}")
    model = os.path.join(work, f"{key}.model")
    shutil.rmtree(model, ignore_errors=True)
    task = {"CVMClassifier": "classification", "CVMRegressor": "regression",
            "CVMOneClass": "one-class"}[cls]
    opts = ["--task", task, "-q"]
    for name, flag in (("C", "-c"), ("gamma", "-g"), ("method", "--method")):
        if name in params:
            opts += [flag, repr(params[name]) if isinstance(params[name], float)
                     else str(params[name])]
    r = _cli(["train", paths["train"], "-o", model] + opts)
    if r.returncode:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        what = "no model folder" if not os.path.exists(model) else "A MODEL FOLDER WAS WRITTEN"
        raise Refused(f"exit {r.returncode}, {len(lines)} stderr line(s), {what}: "
                      f"{lines[-1] if lines else ''}",
                      len(lines) == 1 and r.returncode == 1 and not os.path.exists(model))
    out = os.path.join(work, f"{key}.pred")
    r = _cli(["predict", paths["test"], model, "-o", out, "--overwrite"])
    if r.returncode:
        raise RuntimeError(f"predict exit {r.returncode}: {r.stderr.strip()}")
    with open(out) as f:
        p = np.array([float(v.split()[0]) for v in f if v.strip()])
    return p, p


def _run(route, cls, params, data, s, work, key):
    """A result dict: pred, dec, seconds, or refused / error (a line)."""
    import numpy as np
    Xtr, ytr, Xte, yte = data
    Xtr = (Xtr * s).astype(np.float32)
    Xte = (Xte * s).astype(np.float32)
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if route == "cli":
                p, d = _fit_cli(cls, params, Xtr, ytr, Xte, yte, work, key)
            else:
                p, d = _fit_api(route, cls, params, Xtr, ytr, Xte, yte, work, key)
    except Refused as e:
        return {"refused": str(e), "one_line": e.one_line, "s": time.perf_counter() - t}
    except ValueError as e:
        return {"refused": str(e), "one_line": "\n" not in str(e), "s": time.perf_counter() - t}
    except Exception as e:  # noqa: BLE001 - reported in the table
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0],
                "s": time.perf_counter() - t}
    return {"pred": p, "dec": d, "s": time.perf_counter() - t}


def _agreement(res, ref):
    import numpy as np
    if "pred" not in res or ref is None or "pred" not in ref:
        return None
    return float(np.mean(res["pred"] == ref["pred"]))


def _verdict(res, ref, regression, yte, huge, control=None):
    """(what came out, non-finite count, ok?). ``control``: the label
    agreement of the rows times 1 + 1e-7 (float32 rounding alone)."""
    import numpy as np
    if "error" in res:
        return f"ERROR {res['error'][:160]}", "-", False
    if "refused" in res:
        line = res["refused"].splitlines()[0] if res["refused"] else ""
        short = f"{line[:SHOWN]}{'...' if len(line) > SHOWN else ''}"
        if not res["one_line"]:
            return f"NOT ONE LINE: {short}", "-", False
        return f"refused: {short}", "-", True
    bad = int(np.sum(~np.isfinite(res["dec"])))
    if huge:
        return "NOT REFUSED", bad, False
    if ref is None or "pred" not in ref:
        return ("reference" if ref is None else "no unscaled reference"), bad, bad == 0
    p, p0 = res["pred"], ref["pred"]
    if regression:
        rmse = float(np.sqrt(np.mean((p - yte) ** 2)))
        rmse0 = float(np.sqrt(np.mean((p0 - yte) ** 2)))
        diff = float(np.max(np.abs(p - p0))) / max(float(np.std(yte)), 1e-300)
        return (f"RMSE {rmse:.4g} vs {rmse0:.4g}; max |f - f1| {diff:.3g} sd",
                bad, bad == 0 and rmse <= 1.1 * rmse0)
    agree = float(np.mean(p == p0))
    if agree == 1:
        return f"same labels ({len(p):,} rows)", bad, bad == 0
    note = ""
    if control is not None:
        note = f" (rows times 1 + 1e-7: {100 * control:.2f}%)"
    ok = bad == 0 and (agree >= 0.99 or (control is not None and agree >= control))
    return f"labels equal on {100 * agree:.2f}% of {len(p):,}{note}", bad, ok


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--sets", nargs="+", default=["gaussian", "friedman1", "ijcnn1", "usps"])
    ap.add_argument("--routes", nargs="+", default=["arrays", "store", "cli"],
                    choices=["arrays", "store", "cli"])
    ap.add_argument("--rows", nargs=2, type=int, default=[3000, 1000],
                    metavar=("TRAIN", "TEST"), help="training and test rows (3000 1000)")
    ap.add_argument("--workdir", help="where stores and models go (default: a temporary "
                                      "folder, removed after)")
    B.add_raw_dir(ap)
    a = ap.parse_args(argv)
    B.use_source_tree()
    import numpy as np
    import datasets
    work = a.workdir or tempfile.mkdtemp(prefix="check-feature-scale-")
    os.makedirs(work, exist_ok=True)
    rows, failed = [], 0
    try:
        for name in a.sets:
            try:
                Xtr, ytr, Xte, yte, regression = _load(name, a.rows, a.raw_dir)
            except FileNotFoundError as e:
                rows.append([name, "-", "-", "-", f"skipped: {e}", "-", "-", "skipped"])
                B.log(f"{name}: skipped ({e})")
                continue
            G = float(datasets.protocol_gamma(Xtr.astype(np.float32)))
            B.log(f"{name}: {len(ytr):,} training / {len(yte):,} test rows, "
                  f"{Xtr.shape[1]} features, G = {G:.4g}")
            data = (Xtr, ytr, Xte, yte)
            todo = [(label, cls, fn(s), s, False) for label, cls, fn in _cases(regression, G)
                    for s in (1.0, CONTROL) + SCALES[1:]]
            todo += [(label, cls, params, 1.0, True) for label, cls, params in _huge(regression)]
            for route in a.routes:
                refs, controls = {}, {}
                for k, (label, cls, params, s, huge) in enumerate(todo):
                    key = f"{name}-{route}-{k}"
                    res = _run(route, cls, params, data, s, work, key)
                    if s == 1.0 and not huge:
                        refs[label] = res
                    if s == CONTROL:
                        controls[label] = _agreement(res, refs.get(label))
                    what, bad, ok = _verdict(res, None if s == 1.0 and not huge
                                             else refs.get(label), regression, yte, huge,
                                             None if s == CONTROL else controls.get(label))
                    if s == CONTROL:
                        what, ok = f"control: {what}", bad in (0, "-") and "ERROR" not in what
                    failed += not ok
                    rows.append([name, label, route, "1" if s == 1.0 else
                                 "1 + 1e-7" if s == CONTROL else f"{s:g}",
                                 what.replace("|", "\\|"),
                                 bad, f"{res['s']:.1f}", "ok" if ok else "FAIL"])
                    B.log(f"  {route} {label} x{s:g}: {what} ({res['s']:.1f} s)")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(B.table(["set", "estimator", "route", "X times", "outcome", "non-finite decisions",
                   "s", "check"], rows, left=("set", "estimator", "route", "outcome",
                                              "check")))
    print(f"\n{len(rows) - failed} of {len(rows)} runs as required" +
          (f"; {failed} FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
