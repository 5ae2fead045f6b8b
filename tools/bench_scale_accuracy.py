#!/usr/bin/env python
"""Time, peak memory and test accuracy against the number of training rows,
on noisy generated data: streamcvm (README defaults) against the references
a user would pick instead, all in the same run.

Data (``streamcvm.synthetic.write_store``, seed 0; generated once and cached
in ``--workdir``, reused while the store has the right number of rows):

- gaussian: the Gaussian mixture (22 features, 2 classes, classes overlap:
  Bayes accuracy ~96.6%), 200K, 2M and 20M training rows; one held-out test
  store of 500,000 rows from ``first_block=10**6`` (another random stream of
  the same distribution) for every size.
- text: sparse tf-idf-like rows (20,000 features), 1M training rows, a
  held-out test store of 200,000 rows (``first_block=10**6``).

For each training store, one run after the other (never concurrently):

1. streamcvm: ``streamcvm train STORE -o MODEL -q --overwrite`` plus
   ``--streamcvm-args``, in a child process, then ``streamcvm evaluate
   TEST MODEL``. Before a dataset's first run, an untimed warm-up train and
   evaluate on a 5,000-row store of the same kind (numba cache loads, page
   cache of the imports).
2. References, each in a fresh Python process (this script with a hidden
   ``--child``), with the kernel gamma of the streamcvm model just trained
   (``kernel.gamma`` in its model.json), under
   ``threadpoolctl.threadpool_limits(2)`` (streamcvm uses the 2 cores too;
   libsvm and liblinear are single-threaded whatever the limit, so only
   Nystroem's BLAS products use 2 threads):
   - ``SVC(C=1, kernel="rbf", gamma, cache_size=2000)`` on all training rows
     when there are at most ``--svc-max-rows``, and on a random subsample of
     ``--svc-subsample`` rows (50,000, seed 0) at every size (what people do
     when SVC cannot finish). Each SVC child is killed after ``--svc-timeout``
     s (each Nystroem child after ``--timeout`` s): "> 7200 s" in the table,
     or its fit time and "killed ... while predicting" when the fit was done.
   - ``make_pipeline(Nystroem(gamma, n_components=K, random_state=0),
     LinearSVC(C=1, random_state=0))`` for K = 1000 and 4000, on at most
     ``--memory-gb`` * 1e9 / (K * 8) rows (the float64 feature matrix fills
     the budget; a random subsample, seed 0, when the store has more rows).
     The features are computed block by block into that one array, which
     LinearSVC takes as it is, but liblinear copies it into its own (index,
     value) nodes, 16 bytes a value: the peak RSS is about 3x the feature
     matrix, ~15 GB once the default 5 GB budget is full (K=4000 from 156K
     rows, K=1000 from 625K). A run that would need more than the memory
     available when it starts (MemAvailable in /proc/meminfo) is skipped,
     with a note; lower ``--memory-gb`` to run it.
   Training rows are read from the store chunk by chunk; a subsample keeps
   an exact number of rows, chosen per chunk by a seeded random mask, so
   memory stays bounded by the rows kept. The test store is predicted chunk
   by chunk as well.

What each figure is:

- train s: streamcvm: wall seconds of the ``streamcvm train`` process
  (start-up, imports, reading the store, training, writing the model).
  References: ``fit`` alone, on rows already in memory (the reading is
  "load s" in the JSON).
- predict s: streamcvm: wall seconds of the ``streamcvm evaluate`` process
  (start-up, reading and scoring the test store, the report). References:
  ``predict`` calls alone, summed over the test chunks.
- test accuracy: on the held-out store, in percent; streamcvm's is parsed
  from ``evaluate``'s "accuracy" line (4 decimals).
- core vectors / SVs: streamcvm: core-set size and coefficients (length of
  each machine's coefficient vector), summed over machines; SVC: support
  vectors; Nystroem: its K landmark rows.
- steps: streamcvm's iterations (``n_iter``), summed over machines.
- peak RSS MB: 10^6 bytes. streamcvm: the train process's own ``ru_maxrss``
  (``os.wait4``); references: the child's ``ru_maxrss`` at its end (this
  parent imports only the standard library, so that figure is the child's).
- train / predict ratio: streamcvm's train s (predict s) over the
  reference's (below 1: streamcvm is faster). streamcvm's figures include
  process start-up and reading the store, the references' do not.
- growth: streamcvm's train s and peak RSS of one size over the previous.

Usage::

    python tools/bench_scale_accuracy.py                      # everything: hours, ~2 GB of stores
    python tools/bench_scale_accuracy.py --datasets gaussian --sizes 200K 2M --no-svc
    python tools/bench_scale_accuracy.py --datasets text --streamcvm-args "--method cvm"
    python tools/bench_scale_accuracy.py --datasets gaussian --sizes 20000 --test-rows 20000

The header gives the command line and the git commit ("-dirty": tracked
files differ from HEAD). The machine is shared and noisy: compare figures
of one run, not across runs.
"""
import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import shlex
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# all standard library only, as this parent must stay
from tools.bench_classify import git_commit, load_json, run_child, save_json  # noqa: E402
from tools.bench_ingest import peak_rss_bytes, vm_hwm_bytes  # noqa: E402
from tools.bench_scale import run_measured  # noqa: E402

SIZES = {"gaussian": [200_000, 2_000_000, 20_000_000], "text": [1_000_000]}
TEST_ROWS = {"gaussian": 500_000, "text": 200_000}
TEST_FIRST_BLOCK = 10 ** 6
WARMUP_ROWS = 5_000
NYSTROEM_K = (1000, 4000)
THREADS = 2
SEED = 0


def human(n):
    """200000 -> "200K", 2000000 -> "2M", 1500 -> "1,500"."""
    for div, unit in ((10 ** 9, "G"), (10 ** 6, "M"), (10 ** 3, "K")):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:,}"


def parse_rows(s):
    """ "200K", "1M", "2e6", "20000" -> a positive int."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+]?[0-9]+)?)([kKmMgG]?)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a row count: {s!r} (e.g. 200K, 1M, 20000)")
    n = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    if n < 1 or n != int(n):
        raise argparse.ArgumentTypeError(f"not a whole positive row count: {s!r}")
    return int(n)


# ---------------------------------------------------------------------------
# children: one job each in a fresh process
# ---------------------------------------------------------------------------

def child_store(spec):
    """Make sure ``spec["path"]`` is a store of ``spec["n"]`` rows (else
    generate it); its size and shape."""
    from streamcvm import open_store, synthetic
    out = {}
    try:
        ok = open_store(spec["path"]).n == spec["n"]
    except Exception:           # missing or unreadable: generated again
        ok = False
    if not ok:
        t = time.perf_counter()
        synthetic.write_store(spec["path"], spec["data"], spec["n"], seed=SEED,
                              first_block=spec["first_block"], overwrite=True)
        out["generate_s"] = time.perf_counter() - t
    s = open_store(spec["path"])
    out.update(n=s.n, d=s.d, sparse=bool(s.sparse), chunks=s.n_chunks,
               disk_bytes=s.sizes()[0])
    return out


def read_rows(store, m, seed=SEED):
    """(X, y): exactly ``min(m, store.n)`` rows of ``store``, all of them or
    a uniform random subset, read chunk by chunk. Each chunk gets its share
    by a hypergeometric draw (the rows still wanted among the rows still
    unread), then that many random positions: memory stays at the rows kept."""
    import numpy as np
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    m = min(int(m), store.n)
    need, left = m, store.n
    Xd = None if store.sparse else np.empty((m, store.d), np.float32)
    parts, ys, at = [], [], 0
    for c in store:
        r = len(c.y)
        if m == store.n:
            idx = slice(None)
            k = r
        else:
            k = int(rng.hypergeometric(r, left - r, need)) if need else 0
            idx = np.zeros(r, bool)
            idx[rng.choice(r, k, replace=False)] = True
        left -= r
        need -= k
        if k == 0:
            continue
        if Xd is None:
            parts.append(sp.csr_matrix(c.X[idx]))
        else:
            Xd[at:at + k] = c.X[idx]
        ys.append(np.asarray(c.y)[idx])
        at += k
    X = sp.vstack(parts, format="csr") if Xd is None else Xd
    return X, np.concatenate(ys)


def fit_nystroem(model, X, y, block=65536):
    """``model.fit(X, y)`` for ``make_pipeline(Nystroem, LinearSVC)``, the
    same model, but the features go block by block into one float64 array
    that LinearSVC takes as it is: no float32 features next to their float64
    copy, so the peak is that array (``--memory-gb``) plus liblinear's own
    copy of it (16 bytes a value)."""
    import numpy as np
    nys, svc = model[0], model[-1]
    nys.fit(X)
    F = np.empty((X.shape[0], nys.normalization_.shape[0]))
    for a in range(0, X.shape[0], block):
        F[a:a + block] = nys.transform(X[a:a + block])
    svc.fit(F, y)


def child_reference(spec):
    """Fit one reference on (a subsample of) the training store, predict the
    test store chunk by chunk."""
    import warnings
    import numpy as np
    from threadpoolctl import threadpool_limits
    from streamcvm import open_store
    out = {}
    with threadpool_limits(THREADS), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        X, y = read_rows(open_store(spec["train"]), spec["fit_rows"])
        out.update(load_s=time.perf_counter() - t, fit_rows=len(y))
        if spec["method"] == "svc":
            from sklearn.svm import SVC
            model = SVC(C=1.0, kernel="rbf", gamma=spec["gamma"], cache_size=2000)
        else:
            from sklearn.kernel_approximation import Nystroem
            from sklearn.pipeline import make_pipeline
            from sklearn.svm import LinearSVC
            model = make_pipeline(Nystroem(gamma=spec["gamma"], n_components=spec["K"],
                                           random_state=SEED),
                                  LinearSVC(C=1.0, random_state=SEED))
        out["rss_before_fit"] = peak_rss_bytes()
        t = time.perf_counter()
        model.fit(X, y) if spec["method"] == "svc" else fit_nystroem(model, X, y)
        out["train_s"] = time.perf_counter() - t
        del X, y
        with open(spec["partial"], "w") as f:     # what the parent reports if it kills us
            json.dump(out, f)
        correct = total = 0
        out["predict_s"] = 0.0
        for c in open_store(spec["test"]):
            t = time.perf_counter()
            pred = model.predict(c.X)
            out["predict_s"] += time.perf_counter() - t
            correct += int(np.sum(np.asarray(pred, np.float64) == c.y))
            total += len(c.y)
    out.update(accuracy=correct / total, test_rows=total, peak_rss=peak_rss_bytes(),
               vm_hwm=vm_hwm_bytes())
    if spec["method"] == "svc":
        out["n_sv"] = int(np.sum(model.n_support_))
    else:
        out["n_sv"] = spec["K"]
        out["n_iter"] = int(np.max(model[-1].n_iter_))
    msgs = sorted({f"{w.category.__name__}: {w.message}".splitlines()[0][:200]
                   for w in caught})
    if msgs:
        out["warnings"] = msgs
    return out


def child_main(spec):
    from tools.bench_classify import child_report
    job = child_store if spec["job"] == "store" else child_reference
    child_report(dict(spec, kind="run"), None, lambda _: job(spec))


# ---------------------------------------------------------------------------
# parent (standard library only)
# ---------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def streamcvm_exe():
    """The ``streamcvm`` console script of this interpreter, as a user runs it."""
    exe = os.path.join(os.path.dirname(sys.executable), "streamcvm")
    return [exe] if os.access(exe, os.X_OK) else [sys.executable, "-m", "streamcvm.cli"]


def ensure_store(workdir, kind, n, first_block):
    name = f"{kind}-{'test' if first_block else 'train'}-{n}-s{SEED}.zarr"
    path = os.path.join(workdir, name)
    log(f"store {path} ...")
    r = run_child({"job": "store", "data": kind, "path": path, "n": n,
                   "first_block": first_block}, None,
                  script=__file__)
    if "error" in r:
        raise SystemExit(f"cannot make {path}: {r['error']}")
    if "generate_s" in r:
        log(f"  generated {n:,} rows in {r['generate_s']:.0f} s "
            f"({r['disk_bytes'] / 1e9:.2f} GB on disk)")
    return path, r


def failure(e):
    """(timed out, last line of stderr) of run_measured's SystemExit; a
    failure other than a timeout is logged."""
    msg = str(e)
    m = re.match(r"failed \((-?\d+)\)", msg)
    timed_out = m is not None and int(m.group(1)) >> 8 in (124, 137)   # timeout's exit codes
    if not timed_out:
        log("  " + "\n    ".join(msg.strip().splitlines()[-8:]))
    lines = [ln for ln in msg.strip().splitlines()[1:] if ln.strip()]
    return timed_out, (lines[-1] if lines else msg)[:300]


def run_streamcvm(train, test, model, extra, timeout):
    """Train (timed, own peak RSS), evaluate, read model.json."""
    exe = streamcvm_exe()
    cmd = exe + ["train", train, "-o", model, "-q", "--overwrite"] + extra
    guard = ["timeout", "--kill-after=60", f"{timeout:g}"]   # wait4 then sees its child's peak
    out = {"command": shlex.join(["streamcvm"] + cmd[len(exe):])}
    t = time.perf_counter()
    try:
        wall, rss, _ = run_measured(guard + cmd)
    except SystemExit as e:         # run_measured's way of saying the command failed
        timed_out, why = failure(e)
        out.update(error=f"> {timeout:g} s" if timed_out else "train: " + why,
                   timeout=timed_out, process_s=time.perf_counter() - t)
        return out
    out.update(train_s=wall, peak_rss=rss)
    try:
        ev_s, _, ev = run_measured(guard + exe + ["evaluate", test, model])
    except SystemExit as e:
        out["error"] = "evaluate: " + failure(e)[1]
        return out
    out["predict_s"] = ev_s
    out["accuracy"] = next(float(ln.split()[1]) for ln in ev.splitlines()
                           if ln.startswith("accuracy"))
    with open(os.path.join(model, "model.json")) as f:
        mj = json.load(f)
    ms = mj["machines"]
    out.update(gamma=mj["kernel"]["gamma"], n_machines=len(ms),
               core_size=sum(m["core_size"] for m in ms),
               n_iter=sum(m["n_iter"] for m in ms),
               n_sv=sum(m["shape"][0] for m in ms))
    return out


def mem_available():
    """MemAvailable (bytes) from /proc/meminfo, or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def references(a, n, train, test, gamma):
    """The reference runs due for a training store of ``n`` rows, in order."""
    specs = []
    if not a.no_svc:
        if n <= a.svc_max_rows:
            specs.append(("svc", f"SVC, all {human(n)} rows", n, {}))
        if a.svc_subsample < n:
            specs.append(("svc", f"SVC, {human(a.svc_subsample)} subsample",
                          a.svc_subsample, {}))
    if not a.no_nystroem:
        for K in NYSTROEM_K:
            m = min(n, int(a.memory_gb * 1e9 // (K * 8)))
            specs.append(("nystroem", f"Nystroem K={K} + LinearSVC", m, {"K": K}))
    partial = os.path.join(a.workdir, f"partial-{os.getpid()}.json")
    for method, label, rows, kw in specs:
        need, avail = 3 * rows * kw.get("K", 0) * 8 + 1e9, mem_available()
        if method == "nystroem" and avail is not None and need > avail:
            why = (f"skipped: needs ~{need / 1e9:.0f} GB (liblinear copies the features), "
                   f"{avail / 1e9:.0f} GB available; lower --memory-gb")
            log(f"  {label} ({rows:,} fit rows) {why}")
            yield {"method": label, "fit_rows": rows, "error": why}
            continue
        log(f"  {label} ({rows:,} fit rows) ...")
        spec = dict(job="reference", method=method, train=train, test=test, gamma=gamma,
                    fit_rows=rows, partial=partial, **kw)
        limit = a.svc_timeout if method == "svc" else a.timeout
        r = run_child(spec, limit, script=__file__)
        if r.get("timeout"):        # killed: while fitting, or after (then its fit time)
            fit = load_json(partial, {})
            r.update(fit, error=f"killed at {limit:g} s while predicting" if fit else
                     f"> {limit:g} s")
        if os.path.exists(partial):
            os.remove(partial)
        r.update(method=label, fit_rows=r.get("fit_rows", rows))
        if "error" not in r:
            log(f"    fit {r['train_s']:.1f} s, predict {r['predict_s']:.1f} s, "
                f"accuracy {r['accuracy']:.4f}, peak RSS {r['peak_rss'] / 1e6:,.0f} MB")
        yield r


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def table(runs):
    head = ["rows", "method", "fit rows", "train s", "predict s", "test accuracy %",
            "core vectors / SVs", "steps", "peak RSS MB", "train ratio", "predict ratio",
            "notes"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if h in ("method", "notes") else "---:" for h in head) + "|"]
    ours = {}
    for r in runs:
        is_ours = r["method"].startswith("streamcvm")
        if is_ours:
            ours[r["rows"]] = r
        me = ours.get(r["rows"], {})
        ok = "error" not in r
        ratio = lambda k: me[k] / r[k] if not is_ours and me.get(k) and r.get(k) else None
        core = (f"{r['core_size']:,} / {r['n_sv']:,}" if is_ours and ok else
                fmt(r.get("n_sv"), ",") if ok else "-")
        fitted = r.get("train_s") is not None
        notes = [] if ok or (r.get("timeout") and not fitted) else [r["error"]]
        train_s = fmt(r.get("train_s"), ".1f") if fitted else \
            r["error"] if r.get("timeout") else "-"
        if r.get("warnings"):
            notes.append("; ".join(w.split(":")[0] for w in r["warnings"]))
        lines.append("| " + " | ".join([
            f"{r['rows']:,}", r["method"], fmt(r.get("fit_rows"), ","), train_s,
            fmt(r.get("predict_s"), ".1f") if ok else "-",
            fmt(r.get("accuracy") and 100 * r["accuracy"], ".2f") if ok else "-",
            core, fmt(r.get("n_iter"), ",") if is_ours else "-",
            fmt(r.get("peak_rss") and r["peak_rss"] / 1e6, ",.0f"),
            fmt(ratio("train_s"), ".3g"), fmt(ratio("predict_s"), ".3g"),
            "; ".join(n for n in notes if n)]) + " |")
    return "\n".join(lines)


def growth(runs):
    ours = [r for r in runs if r["method"].startswith("streamcvm") and "error" not in r]
    return [f"{human(b['rows'])} / {human(a['rows'])}: time x{b['train_s'] / a['train_s']:.2f}, "
            f"RSS x{b['peak_rss'] / a['peak_rss']:.2f}" for a, b in zip(ours, ours[1:])]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--datasets", nargs="+", choices=list(SIZES), default=list(SIZES))
    ap.add_argument("--sizes", nargs="+", type=parse_rows, metavar="ROWS",
                    help="training rows, e.g. 200K 2M (default: gaussian 200K 2M 20M, "
                         "text 1M); used for every dataset given")
    ap.add_argument("--test-rows", type=parse_rows, metavar="ROWS",
                    help="held-out rows (default: gaussian 500K, text 200K)")
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/scale_accuracy",
                    help="generated stores and models (kept for reruns)")
    ap.add_argument("--streamcvm-args", default="", metavar="ARGS",
                    help='appended to "streamcvm train", e.g. "--method cvm -e 1e-4"')
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds for streamcvm train (and evaluate) and each Nystroem run "
                         "(default 3600)")
    ap.add_argument("--no-svc", action="store_true", help="skip the SVC references")
    ap.add_argument("--svc-max-rows", type=parse_rows, default=200_000,
                    help="SVC on all rows only up to this many (default 200K)")
    ap.add_argument("--svc-subsample", type=parse_rows, default=50_000,
                    help="SVC on a random subsample of this many rows (default 50K)")
    ap.add_argument("--svc-timeout", type=float, default=7200,
                    help="seconds per SVC run (default 7200)")
    ap.add_argument("--no-nystroem", action="store_true",
                    help="skip the Nystroem + LinearSVC references")
    ap.add_argument("--memory-gb", type=float, default=5.0,
                    help="GB of Nystroem features (K * 8 bytes a row; default 5); the peak "
                         "RSS is about 3x: liblinear copies them")
    ap.add_argument("--json", metavar="OUT", help="all results (default WORKDIR/results.json; "
                                                  "rewritten after each run)")
    a = ap.parse_args(argv)
    if a.child:
        child_main(json.loads(a.child))
        return 0
    a.json = a.json or os.path.join(a.workdir, "results.json")
    os.makedirs(os.path.join(a.workdir, "models"), exist_ok=True)
    extra = shlex.split(a.streamcvm_args)
    command = shlex.join([os.path.basename(sys.executable)] + sys.argv)
    commit = git_commit()
    now = datetime.datetime.now().isoformat(timespec="seconds")
    ver = importlib.metadata.version
    header = [f"command: `{command}`", f"commit: {commit}, {now}",
              f"python {platform.python_version()}, streamcvm {ver('streamcvm')}, "
              f"scikit-learn {ver('scikit-learn')}, numpy {ver('numpy')}, "
              f"{os.cpu_count()} CPUs",
              f"threads: streamcvm uses every core (numba, BLAS); references run under "
              f"threadpool_limits({THREADS}), SVC (libsvm) and LinearSVC (liblinear) are "
              f"single-threaded, Nystroem's BLAS products use {THREADS}"]
    for line in header:
        log(line)
    result = {"command": command, "commit": commit, "date": now, "args": vars(a),
              "python": platform.python_version(), "cpus": os.cpu_count(), "datasets": {}}
    for ds in a.datasets:
        test_rows = a.test_rows or TEST_ROWS[ds]
        test, test_info = ensure_store(a.workdir, ds, test_rows, TEST_FIRST_BLOCK)
        warm, _ = ensure_store(a.workdir, ds, WARMUP_ROWS, 0)
        log(f"{ds}: warm-up train + evaluate on {WARMUP_ROWS:,} rows (untimed) ...")
        run_streamcvm(warm, warm, os.path.join(a.workdir, "models", f"{ds}-warmup"), extra,
                      a.timeout)
        res = result["datasets"][ds] = {"test": test, "test_rows": test_info["n"],
                                        "d": test_info["d"], "stores": {}, "runs": []}
        for n in a.sizes or SIZES[ds]:
            train, info = ensure_store(a.workdir, ds, n, 0)
            res["stores"][n] = dict(info, path=train)
            tag = ("-" + re.sub(r"[^\w.=-]+", "_", a.streamcvm_args.strip())
                   if a.streamcvm_args.strip() else "")
            model = os.path.join(a.workdir, "models", f"{ds}-{n}{tag}")
            log(f"{ds} {n:,} rows: streamcvm train ...")
            r = run_streamcvm(train, test, model, extra, a.timeout)
            r.update(rows=n, method="streamcvm" + (f" {a.streamcvm_args.strip()}"
                                                   if extra else ""), fit_rows=n)
            res["runs"].append(r)
            if "error" in r:
                log(f"  streamcvm failed: {r['error']}; no references (they need its gamma)")
                save_json(a.json, result)
                continue
            log(f"  train {r['train_s']:.1f} s, peak RSS {r['peak_rss'] / 1e6:,.0f} MB, "
                f"accuracy {r['accuracy']:.4f}, core {r['core_size']:,}, "
                f"steps {r['n_iter']:,}, gamma {r['gamma']:.6g}")
            for ref in references(a, n, train, test, r["gamma"]):
                ref["rows"] = n
                res["runs"].append(ref)
                save_json(a.json, result)
            save_json(a.json, result)
    print("\n".join(header))
    for ds, res in result["datasets"].items():
        gam = sorted({f"{r['gamma']:.6g}" for r in res["runs"] if r.get("gamma")})
        print(f"\n### {ds}: {res['d']:,} features, held-out {res['test_rows']:,} rows "
              f"(first_block={TEST_FIRST_BLOCK}), gamma {', '.join(gam) or '-'}\n")
        print(table(res["runs"]))
        g = growth(res["runs"])
        if g:
            print("\nstreamcvm growth: " + "; ".join(g))
    log(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
