#!/usr/bin/env python
"""Regression at scale: time, peak memory and test RMSE against the number of
training rows on Friedman #1, streamcvm (defaults) against what a user would
pick instead, all in the same run.

Data (``streamcvm.data.synthetic.write_store(path, "friedman1", n, seed=0)``: 10
features uniform on [0, 1], ``y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4
+ 5 x5 + N(0, 1)``, so an RMSE of 1.0 is the noise floor and the target's sd
is ~4.9): training stores of 200K, 1M and 10M rows (``--sizes``), and one
held-out test store of 100,000 rows (``--test-rows``) from
``first_block=10**6`` (another random stream of the same distribution) for
every size. Stores are generated once into ``--workdir`` and reused while
their row count matches. The target is the raw Friedman y for every model
(never standardised): RMSE is in the target's units.

For each training size, one run after the other (never concurrently), each
in a fresh process:

1. streamcvm: ``python -m streamcvm.cli train STORE -o MODEL --task
   regression -q --overwrite`` plus ``--streamcvm-args`` (``-m streamcvm``
   once the package has a ``__main__``), then ``... evaluate TEST MODEL``
   (RMSE and R^2 parsed from its report). Before the first size, an untimed
   warm-up train and evaluate on a 5,000-row store (numba cache loads, page
   cache of the imports). From the model folder's model.json: the kernel
   gamma, the support vectors, the core-set size, the steps and, when
   present, ``C_`` and ``mu_`` (what ``C="auto"`` / ``mu="auto"`` chose).
2. References, each in its own child process (this script with a hidden
   ``--child``), with gamma = 1 / the mean squared distance between rows
   (``--ref-gamma auto``, the default: streamcvm's own starting point, which
   it then doubles or not on held-out rows; the doubled value cost SVR 6%
   RMSE on Friedman) or the gamma of the streamcvm model (``--ref-gamma model``),
   under ``threadpoolctl.threadpool_limits(2)`` (libsvm is single-threaded
   whatever the limit; Nystroem's and Ridge's BLAS products use 2 threads):
   - svr20k, svr50k: ``SVR(C=10 sd, epsilon=0.1 sd, kernel="rbf", gamma,
     cache_size=2000)`` on a random subsample (seed 0) of 20,000 and of
     50,000 training rows (all rows when the store has fewer), sd the
     standard deviation of the fit rows' y. Why: tools/bench_regression.py's
     tuning chose C=10, epsilon=0.1 for Friedman on z-scored targets. Here y
     is raw (sd ~4.9). epsilon is a width in target units, so it scales with
     sd. C multiplies the slacks, which are in target units too: with y = m
     + sd * z, the solution (w, b, xi) of 1/2 |w|^2 + C sum xi is sd times
     that of the z-scored problem with C / sd (the objective is sd^2 times
     1/2 |w'|^2 + (C / sd) sum xi', and the unregularised b absorbs m).
     So C = 10 sd, epsilon = 0.1 sd is exactly the tuned z-scored SVR.
     Each SVR child is killed after ``--svr-timeout`` s: "> 7200 s" in the
     table, or its fit time and "killed ... while predicting".
   - nystroem1000, nystroem2000, nystroem4000: ``make_pipeline(Nystroem(
     gamma, n_components=K, random_state=0), Ridge(alpha=1e-3))`` on
     min(n, ``--memory-gb`` * 1e9 / (K * 8)) rows (the float64 feature matrix
     fills the budget; a random subsample, seed 0, when the store has more:
     with the default 5 GB, K=1000 from 625K rows, K=2000 from 312.5K, K=4000
     from 156.25K). The features are computed block by block (~256 MB each)
     into one preallocated float64 array, and Ridge is fitted on it with its
     default ``solver="auto"`` (Cholesky on the K x K normal equations: cheap
     against the features) and ``copy_X=False`` (the same model; Ridge
     centres that private array in place instead of copying it). The targets
     are centred first (the mean added back to the predictions; Ridge fits an
     intercept anyway). Each Nystroem child is killed after ``--timeout`` s.
   A reference that would need more than the memory available when it
   starts (MemAvailable in /proc/meminfo) is skipped, with a note.
   Training rows are read from the store chunk by chunk; a subsample keeps
   an exact number of rows, chosen per chunk by a seeded random mask
   (hypergeometric share per chunk), so memory stays at the rows kept. The
   test store is predicted chunk by chunk as well.

What each figure is:

- fit rows: the rows the model was fitted on.
- train s: streamcvm: wall seconds of the ``train`` process (start-up,
  imports, reading the store, choosing gamma / C / mu, training, writing the
  model). References: ``fit`` alone, on rows already in memory (reading and
  subsampling them is "load_s" in the JSON; for Nystroem, fit includes
  computing the features).
- predict s: streamcvm: wall seconds of the ``evaluate`` process (start-up,
  reading and scoring the test store, the report). References: the
  prediction calls alone, summed over the test chunks.
- RMSE, R^2: on the held-out store, in the target's units; computed as
  ``streamcvm evaluate`` does (sqrt(SSE / n); 1 - SSE / sum (y - mean y)^2);
  streamcvm's are parsed from its report (6 significant digits).
- SVs: streamcvm: rows kept by the model (distinct training rows with a
  coefficient; its core-set size, which counts a row once per sign, is in
  the notes); SVR: ``len(support_)``; Nystroem: K.
- peak RSS MB: 10^6 bytes. streamcvm: the train process's maximum resident
  set size (``os.wait4``'s rusage of that process; the evaluate
  process's is in the JSON); references: the child's ``ru_maxrss`` at its
  end. This parent imports only the standard library, so those figures are
  the children's.
- train ratio: the method's train s over streamcvm's (above 1: streamcvm
  trains faster). streamcvm's figure includes process start-up and reading
  the store, the references' do not.
- RMSE ratio: streamcvm's RMSE over the method's (below 1: streamcvm is
  more accurate).
- growth: streamcvm's train s and peak RSS of one size over the previous.

Usage::

    python tools/bench_regression_scale.py                    # everything: hours, ~0.5 GB of stores
    python tools/bench_regression_scale.py --sizes 200K 1M --no-svr
    python tools/bench_regression_scale.py --methods streamcvm nystroem1000 --memory-gb 2
    python tools/bench_regression_scale.py --streamcvm-args "--method fvm"
    python tools/bench_regression_scale.py --sizes 20K --test-rows 20000 \\
        --methods streamcvm svr20k nystroem1000 --workdir /tmp/brs_smoke   # smoke test

Without ``streamcvm`` in ``--methods``, the references take the gamma of the
model an earlier run left in WORKDIR/models (same size and
``--streamcvm-args``); with no such model they are skipped. The header gives
the command line and the git commit ("-dirty": tracked files differ from
HEAD). The machine is shared and noisy: compare figures of one run, not
across runs.
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import shlex
import sys
import time

# standard library only, as this parent must stay (a child's ru_maxrss starts
# at its parent's peak on Linux)
import benchlib as B
from benchlib import fmt, human_rows, log, parse_rows, peak_rss_bytes, save_json

B.use_source_tree()

KIND = "friedman1"
SIZES = [200_000, 1_000_000, 10_000_000]
TEST_ROWS = 100_000
TEST_FIRST_BLOCK = 10 ** 6
WARMUP_ROWS = 5_000
THREADS = 2
SEED = 0
SVR_ROWS = {"svr20k": 20_000, "svr50k": 50_000}
NYSTROEM_K = {"nystroem1000": 1000, "nystroem2000": 2000, "nystroem4000": 4000}
METHODS = ["streamcvm"] + list(SVR_ROWS) + list(NYSTROEM_K)
SVR_C, SVR_EPSILON = 10.0, 0.1          # per unit of the fit rows' target sd
RIDGE_ALPHA = 1e-3
BLOCK_BYTES = 256e6                     # one block of Nystroem features (and its kernel)
SVR_CACHE_MB = 2000


def positive(kind):
    def parse(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be positive: {s!r}")
        return v
    return parse


# ---------------------------------------------------------------------------
# children: one job each in a fresh process
# ---------------------------------------------------------------------------

def child_store(spec):
    """Make sure ``spec["path"]`` is a store of ``spec["n"]`` rows (else
    generate it); its size and shape (and, if asked, its y's mean and sd)."""
    import numpy as np
    s, took = B.generated_store(spec["path"], spec["data"], spec["n"], SEED,
                                spec["first_block"])
    out = {} if took is None else {"generate_s": took}
    out.update(n=s.n, d=s.d, chunks=s.n_chunks, chunk_rows=s.chunk_rows,
               disk_bytes=s.sizes()[0])
    if spec.get("y_stats"):
        y = np.concatenate([np.asarray(c.y, np.float64) for c in s])
        out.update(y_mean=float(y.mean()), y_sd=float(y.std()))
    return out


def nystroem_block(K):
    """Rows per block so that one block of K features is ~BLOCK_BYTES."""
    return max(256, int(BLOCK_BYTES // (K * 8)))


def fit_nystroem(model, X, y, block):
    """``model.fit(X, y)`` for ``make_pipeline(Nystroem, Ridge)``, the same
    model, but the features go block by block into one preallocated float64
    array that Ridge (``copy_X=False``) takes and centres in place: the peak
    is that array plus one block."""
    import numpy as np
    nys, ridge = model[0], model[-1]
    nys.fit(X)
    F = np.empty((X.shape[0], nys.normalization_.shape[0]), np.float64)
    for a in range(0, X.shape[0], block):
        F[a:a + block] = nys.transform(X[a:a + block])
    ridge.fit(F, y)


def predict_blocks(model, X, block):
    import numpy as np
    if block is None or X.shape[0] <= block:
        return np.asarray(model.predict(X), np.float64)
    return np.concatenate([np.asarray(model.predict(X[a:a + block]), np.float64)
                           for a in range(0, X.shape[0], block)])


def child_reference(spec):
    """Fit one reference on (a subsample of) the training store, predict the
    test store chunk by chunk; RMSE and R^2 as ``streamcvm evaluate``."""
    import warnings
    import numpy as np
    from threadpoolctl import threadpool_limits
    from streamcvm import open_store
    out = {}
    with threadpool_limits(THREADS), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        X, y = B.read_rows(open_store(spec["train"]), spec["fit_rows"], SEED)
        y = np.asarray(y, np.float64)
        X = X.astype(np.float64)        # what libsvm and Nystroem would make of it anyway
        out.update(load_s=time.perf_counter() - t, fit_rows=len(y))
        y_mean, y_sd = float(y.mean()), float(y.std())
        out.update(y_mean=y_mean, y_sd=y_sd)
        gamma = spec["gamma"]
        if spec.get("ref_gamma", "auto") == "auto":
            # 1 / the mean squared distance between rows (5,000 rows, seed 0):
            # streamcvm's gamma="auto" before its own choice of x1 or x2
            from streamcvm.estimators.base import resolve_gamma
            from streamcvm.options import Options
            gamma = resolve_gamma("auto", open_store(spec["train"]), Options())
        out["gamma_used"] = float(gamma)
        block = None
        if spec["method"] == "svr":
            from sklearn.svm import SVR
            C, epsilon = SVR_C * y_sd, SVR_EPSILON * y_sd
            out.update(C=C, epsilon=epsilon)
            model = SVR(C=C, epsilon=epsilon, kernel="rbf", gamma=gamma,
                        cache_size=SVR_CACHE_MB)
            offset = 0.0
        else:
            from sklearn.kernel_approximation import Nystroem
            from sklearn.linear_model import Ridge
            from sklearn.pipeline import make_pipeline
            model = make_pipeline(Nystroem(gamma=gamma, n_components=spec["K"],
                                           random_state=SEED),
                                  Ridge(alpha=RIDGE_ALPHA, copy_X=False))
            block = nystroem_block(spec["K"])
            offset = y_mean             # targets centred; added back to the predictions
            y = y - y_mean
            out.update(alpha=RIDGE_ALPHA, block_rows=block)
        out["rss_before_fit"] = peak_rss_bytes()
        t = time.perf_counter()
        if spec["method"] == "svr":
            model.fit(X, y)
        else:
            fit_nystroem(model, X, y, block)
        out["train_s"] = time.perf_counter() - t
        del X, y
        out["rss_after_fit"] = peak_rss_bytes()
        with open(spec["partial"], "w") as f:     # what the parent reports if it kills us
            json.dump(out, f)
        n = 0
        sse = sy = syy = 0.0
        out["predict_s"] = 0.0
        for c in open_store(spec["test"]):
            t = time.perf_counter()
            f = predict_blocks(model, c.X, block) + offset
            out["predict_s"] += time.perf_counter() - t
            yt = np.asarray(c.y, np.float64)
            e = f - yt
            n += len(yt)
            sse += float(e @ e)
            sy += float(yt.sum())
            syy += float(yt @ yt)
    sst = syy - sy * sy / n
    out.update(rmse=float(np.sqrt(sse / n)), r2=1.0 - sse / sst if sst > 0 else None,
               test_rows=n, peak_rss=peak_rss_bytes(), vm_hwm=B.vm_hwm_bytes())
    out["n_sv"] = int(len(model.support_)) if spec["method"] == "svr" else spec["K"]
    if spec["method"] == "svr":
        out["n_iter"] = int(np.sum(model.n_iter_))
    B.add_warnings(out, caught)
    return out


CHILD_JOBS = {"store": child_store, "reference": child_reference}


# ---------------------------------------------------------------------------
# parent (standard library only)
# ---------------------------------------------------------------------------

def streamcvm_cmd():
    """``python -m streamcvm`` when the package has a ``__main__``, else
    ``python -m streamcvm.cli`` (found without importing the package)."""
    spec = importlib.util.find_spec("streamcvm")
    pkg = os.path.dirname(spec.origin) if spec and spec.origin else None
    has_main = pkg is not None and os.path.exists(os.path.join(pkg, "__main__.py"))
    return [sys.executable, "-m", "streamcvm" if has_main else "streamcvm.cli"]


def stderr_warnings(text):
    return sorted({ln.strip()[:200] for ln in text.splitlines()
                   if "Warning" in ln or ln.strip().startswith("streamcvm: ")})


def read_model(model):
    """What the model folder's model.json says about the fit."""
    with open(os.path.join(model, "model.json")) as f:
        mj = json.load(f)
    ms = mj["machines"]
    out = {"gamma": mj["kernel"]["gamma"], "n_machines": len(ms),
           "core_size": sum(m["core_size"] for m in ms),
           "n_iter": sum(m["n_iter"] for m in ms),
           "n_sv": sum(m["shape"][0] for m in ms),
           "epsilon_bar": ms[0].get("epsilon_bar") if ms else None,
           "method_used": mj.get("params", {}).get("method")}
    for k in ("C_", "mu_"):
        if mj.get(k) is not None:
            out[k] = mj[k]
    return out


def run_streamcvm(train, test, model, extra, timeout):
    """Train (timed, its own peak RSS), evaluate (RMSE, R^2), read model.json."""
    exe = streamcvm_cmd()
    cmd = exe + ["train", train, "-o", model, "--task", "regression", "-q",
                 "--overwrite"] + extra
    out = {"command": shlex.join(["python"] + cmd[1:])}
    r = B.run_timed(cmd, timeout)
    if r["rc"] != 0:
        out.update(error=f"> {timeout:g} s" if r["timed_out"] else
                   f"train exited {r['rc']}: {B.stderr_tail(r['stderr'])}",
                   timeout=r["timed_out"], process_s=r["wall"])
        if not r["timed_out"]:
            log("  " + "\n    ".join(r["stderr"].strip().splitlines()[-8:]))
        return out
    out.update(train_s=r["wall"], peak_rss=r["rss"], rss_how=r["rss_how"])
    w = stderr_warnings(r["stderr"])
    if w:
        out["warnings"] = w
    out.update(read_model(model))
    e = B.run_timed(exe + ["evaluate", test, model], timeout)
    if e["rc"] != 0:
        out["error"] = ("evaluate: " + (f"> {timeout:g} s" if e["timed_out"] else
                                        B.stderr_tail(e["stderr"])))
        return out
    out.update(predict_s=e["wall"], evaluate_peak_rss=e["rss"], report=e["stdout"].strip())
    rm = re.search(r"^RMSE\s+(\S+)", e["stdout"], re.M)
    r2 = re.search(r"^R\^2\s+(\S+)", e["stdout"], re.M)
    try:
        out["rmse"] = float(rm.group(1))
    except (AttributeError, ValueError):
        out["error"] = f"evaluate: no RMSE in its output: {B.stderr_tail(e['stdout'])}"
        return out
    try:
        out["r2"] = float(r2.group(1)) if r2 else None
    except ValueError:          # "-": constant y
        out["r2"] = None
    rows = re.search(r"^rows\s+([\d,]+)", e["stdout"], re.M)
    out["test_rows"] = int(rows.group(1).replace(",", "")) if rows else None
    return out


def reference_specs(methods, n, memory_gb, d):
    """(method key, label, kind, fit rows, extra spec, bytes it needs) in order."""
    for key in methods:
        if key in SVR_ROWS:
            rows = min(n, SVR_ROWS[key])
            label = f"SVR, {human_rows(SVR_ROWS[key])} subsample" if rows < n else \
                f"SVR, all {human_rows(n)} rows"
            # X float32 + float64, libsvm's own copy (sparse nodes, 16 B a value), its cache
            need = rows * d * (4 + 8 + 16 * 1.5) + SVR_CACHE_MB * 2 ** 20 + 1e9
            yield key, label, "svr", rows, {}, need
        elif key in NYSTROEM_K:
            K = NYSTROEM_K[key]
            rows = min(n, int(memory_gb * 1e9 // (K * 8)))
            label = f"Nystroem K={K} + Ridge"
            # the features, X float32 + float64, two blocks of kernel / features, imports
            need = rows * K * 8 + rows * d * 12 + 2 * BLOCK_BYTES + 1e9
            yield key, label, "nystroem", rows, {"K": K}, need


def references(a, methods, n, d, train, test, gamma):
    """The reference runs due for a training store of ``n`` rows, in order."""
    partial = os.path.join(a.workdir, f"partial-{os.getpid()}.json")
    for key, label, kind, rows, kw, need in reference_specs(methods, n, a.memory_gb, d):
        avail = B.mem_available()
        if avail is not None and need > avail:
            why = (f"skipped: needs ~{need / 1e9:.1f} GB, {avail / 1e9:.1f} GB available"
                   + ("; lower --memory-gb" if kind == "nystroem" else ""))
            log(f"  {label} ({rows:,} fit rows) {why}")
            yield {"key": key, "method": label, "fit_rows": rows, "error": why,
                   "skipped": True}
            continue
        log(f"  {label} ({rows:,} fit rows) ...")
        spec = dict(kind="reference", method=kind, train=train, test=test, gamma=gamma,
                    ref_gamma=a.ref_gamma, fit_rows=rows, partial=partial, **kw)
        r = B.run_reference(spec, a.svr_timeout if kind == "svr" else a.timeout)
        r.update(key=key, method=label, fit_rows=r.get("fit_rows", rows))
        if "error" not in r:
            log(f"    fit {r['train_s']:.1f} s (load {r['load_s']:.1f} s), predict "
                f"{r['predict_s']:.1f} s, RMSE {r['rmse']:.4f}, R^2 {r['r2']:.4f}, "
                f"peak RSS {r['peak_rss'] / 1e6:,.0f} MB")
        yield r


def table(runs):
    head = ["rows", "method", "fit rows", "train s", "predict s", "RMSE", "R^2", "SVs",
            "peak RSS MB", "train ratio", "RMSE ratio", "notes"]
    lines = []
    ours = {}
    for r in runs:
        is_ours = r.get("key") == "streamcvm"
        if is_ours:
            ours[r["rows"]] = r
        me = ours.get(r["rows"], {})
        ok = "error" not in r
        fitted = r.get("train_s") is not None
        train_ratio = (r["train_s"] / me["train_s"]
                       if not is_ours and fitted and me.get("train_s") else None)
        rmse_ratio = (me["rmse"] / r["rmse"]
                      if not is_ours and ok and me.get("rmse") and r.get("rmse") else None)
        notes = []
        if not ok and not (r.get("timeout") and not fitted):
            notes.append(r["error"])
        if is_ours and fitted:
            notes.append(f"core {r['core_size']:,}, steps {r['n_iter']:,}")
            if r.get("C_") is not None:
                notes.append(f"C {r['C_']:.4g}")
            if r.get("mu_") is not None:
                notes.append(f"mu {r['mu_']:.4g}")
        if r.get("C") is not None:
            notes.append(f"C {r['C']:.3g}, epsilon {r['epsilon']:.3g}")
        if r.get("gamma_from"):
            notes.append(r["gamma_from"])
        if r.get("warnings"):
            notes.append("; ".join(sorted({w.split(":")[0] for w in r["warnings"]})))
        train_s = fmt(r.get("train_s"), ".1f") if fitted else \
            r["error"] if r.get("timeout") else "-"
        lines.append([
            f"{r['rows']:,}", r["method"], fmt(r.get("fit_rows"), ","), train_s,
            fmt(r.get("predict_s"), ".1f") if ok else "-",
            fmt(r.get("rmse"), ".4f") if ok else "-",
            fmt(r.get("r2"), ".4f") if ok else "-",
            fmt(r.get("n_sv"), ",") if fitted else "-",
            fmt(r.get("peak_rss") and r["peak_rss"] / 1e6, ",.0f"),
            fmt(train_ratio, ".3g"), fmt(rmse_ratio, ".3g"),
            "; ".join(n for n in notes if n)])
    return B.table(head, lines, left=("method", "notes"))


class Parser(argparse.ArgumentParser):
    def error(self, message):           # one line, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv=None):
    ap = B.parser(__doc__, Parser)
    ap.add_argument("--sizes", nargs="+", type=parse_rows, metavar="ROWS", default=SIZES,
                    help="training rows, e.g. 200K 1M 10M (the default)")
    ap.add_argument("--test-rows", type=parse_rows, default=TEST_ROWS, metavar="ROWS",
                    help="held-out rows (default 100K)")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS, metavar="M",
                    help=f"a subset of: {' '.join(METHODS)} (default: all)")
    ap.add_argument("--no-svr", action="store_true", help="skip svr20k and svr50k")
    ap.add_argument("--no-nystroem", action="store_true",
                    help="skip the Nystroem + Ridge references")
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/scale_regression",
                    help="generated stores and models (kept for reruns)")
    ap.add_argument("--streamcvm-args", default="", metavar="ARGS",
                    help='appended to "streamcvm train", e.g. "--method fvm -e 1e-3"')
    ap.add_argument("--timeout", type=positive(float), default=3600,
                    help="seconds for streamcvm train (and evaluate) and each Nystroem run "
                         "(default 3600)")
    ap.add_argument("--svr-timeout", type=positive(float), default=7200,
                    help="seconds per SVR run (default 7200)")
    ap.add_argument("--ref-gamma", choices=["auto", "model"], default="auto",
                    help="the references' gamma: 'auto' (default) 1 / the mean squared "
                         "distance between rows, the value streamcvm's gamma='auto' starts "
                         "from; 'model': the gamma the streamcvm model chose")
    ap.add_argument("--memory-gb", type=positive(float), default=5.0,
                    help="GB of Nystroem features (K * 8 bytes a row; default 5)")
    ap.add_argument("--json", metavar="OUT", help="all results (default WORKDIR/results.json; "
                                                  "rewritten after each run)")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    try:
        extra = shlex.split(a.streamcvm_args)
    except ValueError as e:
        ap.error(f"--streamcvm-args: {e}")
    clash = [x for x in extra if x in ("-o", "--output", "--task", "--one-class")
             or x.startswith(("--output=", "--task="))]
    if clash:
        ap.error(f"--streamcvm-args: {clash[0]} is set by this script")
    methods = [m for m in dict.fromkeys(a.methods)
               if not (a.no_svr and m in SVR_ROWS) and not (a.no_nystroem and m in NYSTROEM_K)]
    if not methods:
        ap.error("nothing to run: --methods, --no-svr and --no-nystroem leave no method")
    sizes = list(dict.fromkeys(a.sizes))
    a.json = a.json or os.path.join(a.workdir, "results.json")
    try:
        os.makedirs(os.path.join(a.workdir, "models"), exist_ok=True)
    except OSError as e:
        ap.error(f"--workdir: {e}")
    refs = [m for m in methods if m != "streamcvm"]
    bench_run = B.BenchRun(("streamcvm", "scikit-learn", "numpy"), more=[
        f"threads: streamcvm uses every core (numba, BLAS); references run under "
        f"threadpool_limits({THREADS}): SVR (libsvm) is single-threaded, Nystroem's "
        f"and Ridge's BLAS products use {THREADS}"])
    result = bench_run.record(args=vars(a), methods=methods, stores={}, runs=[])
    test, test_info = B.ensure_store(a.workdir, KIND, a.test_rows, TEST_FIRST_BLOCK, SEED,
                                     y_stats=True)
    result["test"] = dict(test_info, path=test, first_block=TEST_FIRST_BLOCK)
    tag = ("-" + re.sub(r"[^\w.=-]+", "_", a.streamcvm_args.strip())
           if a.streamcvm_args.strip() else "")
    if "streamcvm" in methods:
        warm, _ = B.ensure_store(a.workdir, KIND, WARMUP_ROWS, 0, SEED)
        log(f"warm-up train + evaluate on {WARMUP_ROWS:,} rows (untimed) ...")
        w = run_streamcvm(warm, warm, os.path.join(a.workdir, "models", f"{KIND}-warmup{tag}"),
                          extra, a.timeout)
        if "error" in w:
            log(f"  warm-up failed: {w['error']}")
    label = "streamcvm" + (f" {a.streamcvm_args.strip()}" if extra else "")
    for n in sizes:
        train, info = B.ensure_store(a.workdir, KIND, n, 0, SEED)
        result["stores"][str(n)] = dict(info, path=train)
        model = os.path.join(a.workdir, "models", f"{KIND}-{n}{tag}")
        gamma, gamma_from = None, None
        if "streamcvm" in methods:
            log(f"{n:,} rows: streamcvm train ...")
            r = run_streamcvm(train, test, model, extra, a.timeout)
            r.update(rows=n, key="streamcvm", method=label, fit_rows=n)
            result["runs"].append(r)
            save_json(a.json, result)
            if "error" in r and r.get("gamma") is None:
                log(f"  streamcvm failed: {r['error']}; no references (they need its gamma)")
                for key in refs:
                    result["runs"].append({"rows": n, "key": key, "method": key,
                                           "error": "no gamma: streamcvm failed"})
                save_json(a.json, result)
                continue
            if "error" in r:
                log(f"  streamcvm: {r['error']}")
            else:
                rss = fmt(r["peak_rss"] and r["peak_rss"] / 1e6, ",.0f")
                log(f"  train {r['train_s']:.1f} s, peak RSS {rss} MB, "
                    f"RMSE {r['rmse']:.4f}, R^2 {fmt(r['r2'], '.4f')}, core {r['core_size']:,}, "
                    f"SVs {r['n_sv']:,}, gamma {r['gamma']:.6g}"
                    + (f", C_ {r['C_']:.6g}" if r.get("C_") is not None else "")
                    + (f", mu_ {r['mu_']:.6g}" if r.get("mu_") is not None else ""))
            gamma = r["gamma"]
        elif refs and a.ref_gamma == "auto":
            gamma = None        # each reference computes 1 / the mean squared distance
        elif refs:
            try:
                gamma = read_model(model)["gamma"]
                when = datetime.datetime.fromtimestamp(
                    os.path.getmtime(os.path.join(model, "model.json")))
                gamma_from = f"gamma of the model of {when.isoformat(timespec='minutes')}"
                log(f"{n:,} rows: {gamma_from}: {gamma:.6g}")
            except (OSError, ValueError, KeyError) as e:
                why = (f"skipped: no gamma (streamcvm not in --methods and no earlier model "
                       f"{model}: {type(e).__name__})")
                log(f"{n:,} rows: references {why}")
                for key in refs:
                    result["runs"].append({"rows": n, "key": key, "method": key, "error": why})
                save_json(a.json, result)
                continue
        for ref in references(a, refs, n, info["d"], train, test, gamma):
            ref.update(rows=n, gamma=ref.get("gamma_used", gamma))
            if gamma_from:
                ref["gamma_from"] = gamma_from
            result["runs"].append(ref)
            save_json(a.json, result)
        save_json(a.json, result)
    ti, runs = result["test"], result["runs"]
    print("\n".join(bench_run.header))
    B.print_sizes(f"Friedman #1, {ti['d']} features, noise sd 1 (RMSE floor 1.0): held-out "
                  f"{ti['n']:,} rows (first_block={TEST_FIRST_BLOCK}, y sd {ti['y_sd']:.3f})",
                  runs, table(runs), [r for r in runs if r.get("key") == "streamcvm"
                                      and r.get("train_s") and r.get("peak_rss")])
    log(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
