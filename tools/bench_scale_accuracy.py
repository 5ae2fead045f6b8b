#!/usr/bin/env python
"""Time, peak memory and test accuracy against the number of training rows,
on noisy generated data: streamcvm (README defaults) against the references
a user would pick instead, all in the same run.

Data (``streamcvm.data.synthetic.write_store``, seed 0; generated once and cached
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
     s (each Nystroem child after ``--timeout`` s): "> 7200 s (timeout)" in the
     table, or its fit time and "killed ... while predicting" when the fit
     was done.
   - ``sklearnex.svm.SVC(C=1, kernel="rbf", gamma, cache_size=2000,
     n_jobs=<streamcvm's threads>)`` (scikit-learn-intelex: oneDAL's SVC, the
     same L1-SVM as LIBSVM, on every core as streamcvm) on as many training
     rows as fit in memory: all of them unless the rows (float32, counted
     twice for a copy, plus solver arrays; sparse: 3x the CSR arrays) and
     the 2 GB kernel cache would not fit in MemAvailable when it starts
     (then a random subsample of the rows that fit, seed 0), at most
     ``--sklearnex-max-rows``; and, like SVC, on the ``--svc-subsample``
     subsample when that is fewer rows. Each sklearnex child is killed after
     ``--sklearnex-timeout`` s: "> T s (timeout)" in the table (or its fit
     time and "killed ... while predicting"), never dropped; once it timed
     out on all the rows of one size, the larger sizes record "not run"
     instead of spending the timeout again. The child
     records from sklearnex's logger whether oneDAL or scikit-learn's
     fallback ran fit and predict (notes column; "backend" in the JSON).
     Without scikit-learn-intelex installed (``[bench]`` extra, x86_64
     only) or with ``--no-sklearnex`` these rows are skipped with a
     one-line message.
   - ``make_pipeline(Nystroem(gamma, n_components=K, random_state=0),
     LinearSVC(C=1, random_state=0))`` for K in ``--nystroem-k`` (1000 and 4000), on at most
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
- fit s: streamcvm only: the fit alone, as the estimator timed it
  (``training.seconds`` in model.json: reading the store's chunks during the
  fit included; start-up, imports and writing the model not). The
  references' train s is the same span (their ``fit``), so "fit ratio"
  (streamcvm's fit s over a reference's train s; against the baseline, fit s
  over fit s) compares like with like, where "train ratio" charges
  streamcvm's start-up and model writing too.
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
- threads: the threads of train s and predict s. streamcvm: every core
  (numba's threads: ``NUMBA_NUM_THREADS`` or the CPU count); sklearnex: the
  same count (``n_jobs``); SVC (libsvm): 1; Nystroem + LinearSVC: its
  features (BLAS) on 2, liblinear's fit on 1, predict on 2.
- train / predict ratio: streamcvm's train s (predict s) over the
  reference's (below 1: streamcvm is faster), only where both ran on the same
  number of threads: the sklearnex rows (train and predict) and Nystroem's
  predict (when streamcvm has 2 threads). Against single-threaded SVC
  (libsvm) or liblinear's fit the cell is "-": streamcvm on every core over
  one thread is not a like-for-like ratio (their absolute seconds stay).
  streamcvm's figures include process start-up and reading the store, the
  references' do not.
- growth: streamcvm's train s and peak RSS of one size over the previous.
- notes: a model that predicts with a compact expansion (``streamcvm info``:
  "compact") is evaluated a second time with ``evaluate --exact`` (its full
  expansion): that predict s and accuracy are in its notes.
- ``--baseline REV [REV ...]``: streamcvm of each git revision REV (a
  detached worktree under WORKDIR, as ``compare_models.py`` makes) runs
  first at each size, in the order given, on its own copies of the stores
  written without chunk checksums (what versions before them read;
  ``--same-stores``: on this tree's stores, for revisions that read
  checksums); its row's method ends in "stores w/o checksums", and this
  tree's row then has
  train / predict ratio = this tree's seconds over the first baseline's
  (above 1: this tree is slower).

Usage::

    python tools/bench_scale_accuracy.py                      # everything: hours, ~2 GB of stores
    python tools/bench_scale_accuracy.py --datasets gaussian --sizes 200K 2M --no-svc
    python tools/bench_scale_accuracy.py --datasets text --streamcvm-args "--method cvm"
    python tools/bench_scale_accuracy.py --datasets gaussian --sizes 20000 --test-rows 20000
    python tools/bench_scale_accuracy.py --datasets gaussian --sizes 200K --no-svc \
        --no-nystroem --sklearnex-timeout 600          # streamcvm against oneDAL only
    python tools/bench_scale_accuracy.py --datasets gaussian --no-svc --no-nystroem \
        --baseline 5aff467                                    # before / after a change

The header gives the command line and the git commit ("-dirty": tracked
files differ from HEAD). The machine is shared and noisy: compare figures
of one run, not across runs.
"""
import json
import os
import re
import shlex
import sys
import time

import benchlib as B     # standard library only, as this parent must stay
from benchlib import fmt, human_rows, log, parse_rows, peak_rss_bytes, save_json

B.use_source_tree()

SIZES = {"gaussian": [200_000, 2_000_000, 20_000_000], "text": [1_000_000]}
TEST_ROWS = {"gaussian": 500_000, "text": 200_000}
TEST_FIRST_BLOCK = 10 ** 6
BASELINE_TAG = ", stores w/o checksums"     # the --baseline rows' method suffix
WARMUP_ROWS = 5_000
NYSTROEM_K = (1000, 4000)
THREADS = 2
SEED = 0


# ---------------------------------------------------------------------------
# children: one job each in a fresh process
# ---------------------------------------------------------------------------

def child_store(spec):
    """Make sure ``spec["path"]`` is a store of ``spec["n"]`` rows (else
    generate it); its size and shape."""
    s, took = B.generated_store(spec["path"], spec["data"], spec["n"], SEED,
                                spec["first_block"], checksums=spec.get("checksums", True))
    out = {} if took is None else {"generate_s": took}
    out.update(n=s.n, d=s.d, sparse=bool(s.sparse), chunks=s.n_chunks,
               disk_bytes=s.sizes()[0], nnz=int(s.nnz) if s.sparse else None)
    return out


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
    onedal = None
    with threadpool_limits(THREADS), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        X, y = B.read_rows(open_store(spec["train"]), spec["fit_rows"], SEED)
        out.update(load_s=time.perf_counter() - t, fit_rows=len(y))
        if spec["method"] == "svc":
            from sklearn.svm import SVC
            model = SVC(C=1.0, kernel="rbf", gamma=spec["gamma"], cache_size=2000)
            out.update(train_threads=1, predict_threads=1)      # libsvm
        elif spec["method"] == "sklearnex":
            model = B.sklearnex_estimator("svc", spec["threads"], C=1.0, kernel="rbf",
                                          gamma=spec["gamma"], cache_size=2000)
            out.update(train_threads=spec["threads"], predict_threads=spec["threads"])
            onedal = B.OnedalLog().__enter__()
        else:
            from sklearn.kernel_approximation import Nystroem
            from sklearn.pipeline import make_pipeline
            from sklearn.svm import LinearSVC
            model = make_pipeline(Nystroem(gamma=spec["gamma"], n_components=spec["K"],
                                           random_state=SEED),
                                  LinearSVC(C=1.0, random_state=SEED))
            out.update(train_threads=f"{THREADS} + 1 (liblinear)",
                       predict_threads=THREADS)
        out["rss_before_fit"] = peak_rss_bytes()
        t = time.perf_counter()
        model.fit(X, y) if spec["method"] != "nystroem" else fit_nystroem(model, X, y)
        out["train_s"] = time.perf_counter() - t
        del X, y
        if onedal is not None:
            out.update(onedal.record())
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
    if onedal is not None:
        onedal.__exit__(None, None, None)
        out.update(onedal.record())
    out.update(accuracy=correct / total, test_rows=total, peak_rss=peak_rss_bytes(),
               vm_hwm=B.vm_hwm_bytes())
    if spec["method"] != "nystroem":
        out["n_sv"] = int(np.sum(model.n_support_))
    else:
        out["n_sv"] = spec["K"]
        out["n_iter"] = int(np.max(model[-1].n_iter_))
    B.add_warnings(out, caught)
    return out


CHILD_JOBS = {"store": child_store, "reference": child_reference}


# ---------------------------------------------------------------------------
# parent (standard library only)
# ---------------------------------------------------------------------------

def streamcvm_exe():
    """The ``streamcvm`` console script of this interpreter, as a user runs it."""
    exe = os.path.join(os.path.dirname(sys.executable), "streamcvm")
    return [exe] if os.access(exe, os.X_OK) else [sys.executable, "-m", "streamcvm.cli"]


def failure(r):
    """The last line of a failed command's stderr (``run_timed``'s record);
    the last 8 lines are logged."""
    log("  " + "\n    ".join(r["stderr"].strip().splitlines()[-8:]))
    return B.stderr_tail(r["stderr"])


def run_streamcvm(train, test, model, extra, timeout, exe=None):
    """Train (timed, own peak RSS), evaluate, read model.json (``exe``: the
    command that runs streamcvm; default this interpreter's)."""
    exe = exe or streamcvm_exe()
    cmd = exe + ["train", train, "-o", model, "-q", "--overwrite"] + extra
    out = {"command": shlex.join(["streamcvm"] + cmd[len(exe):])}
    r = B.run_timed(cmd, timeout)
    if r["rc"] != 0:
        out.update(error=f"> {timeout:g} s" if r["timed_out"] else "train: " + failure(r),
                   timeout=r["timed_out"], process_s=r["wall"])
        return out
    out.update(train_s=r["wall"], peak_rss=r["rss"])
    ev = B.run_timed(exe + ["evaluate", test, model], timeout)
    if ev["rc"] != 0:
        out["error"] = "evaluate: " + (f"> {timeout:g} s" if ev["timed_out"] else failure(ev))
        return out
    out["predict_s"] = ev["wall"]
    out["accuracy"] = next(float(ln.split()[1]) for ln in ev["stdout"].splitlines()
                           if ln.startswith("accuracy"))
    with open(os.path.join(model, "model.json")) as f:
        mj = json.load(f)
    # the fit alone, as the estimator timed it (reading the store's chunks
    # included; start-up, imports and writing the model not): the references'
    # train s measures the same span, on rows already in memory
    out["fit_s"] = (mj.get("training") or {}).get("seconds")
    ms = mj["machines"]
    out.update(gamma=mj["kernel"]["gamma"], n_machines=len(ms),
               core_size=sum(m["core_size"] for m in ms),
               n_iter=sum(m["n_iter"] for m in ms),
               n_sv=sum(m["shape"][0] for m in ms))
    # each machine's stages (rows, route, steps, core set, validation error): the
    # learning curve the figures draw
    if any(m.get("stages") for m in ms):
        out["stages"] = [m.get("stages") or [] for m in ms]
    comp = [m["compact"] for m in ms if isinstance(m.get("compact"), dict)
            and m["compact"].get("intercept") is not None]
    if comp:        # the model predicts with a compact expansion: the full one too
        out["compact_B"] = sum(c["B"] for c in comp)
        ex = B.run_timed(exe + ["evaluate", test, model, "--exact"], timeout)
        if ex["rc"] == 0:
            out["predict_exact_s"] = ex["wall"]
            out["accuracy_exact"] = next(float(ln.split()[1]) for ln in ex["stdout"].splitlines()
                                         if ln.startswith("accuracy"))
    return out


def our_threads():
    """streamcvm's threads: numba's (NUMBA_NUM_THREADS, else the CPU count)."""
    return int(os.environ.get("NUMBA_NUM_THREADS") or os.cpu_count() or 1)


SKLEARNEX_CACHE = 2e9       # cache_size=2000 (MB) of its kernel rows
SKLEARNEX_SPARE = 1e9       # interpreter, libraries, a test chunk


def sklearnex_rows(n, info, cap=None):
    """(rows, why): how many training rows sklearnex SVC gets: all ``n``
    unless they would not fit in MemAvailable now (the rows in float32,
    twice for a copy, plus ~256 bytes of solver arrays a row; sparse: 3x
    the CSR arrays), nor ``cap``."""
    if info.get("sparse"):      # float32 values + int32 column indices, 3x
        nnz = info.get("nnz") or info["d"] * info["n"]
        per_row = 3 * 8 * nnz / max(info["n"], 1) + 256
    else:
        per_row = 2 * 4 * info["d"] + 256
    rows, why = n, ""
    avail = B.mem_available()
    if avail is not None:
        fit = int(max(0.0, avail - SKLEARNEX_CACHE - SKLEARNEX_SPARE) // per_row)
        if fit < rows:
            rows, why = fit, (f"memory: ~{per_row:.0f} B a row, {avail / 1e9:.1f} GB "
                              f"available")
    if cap and cap < rows:
        rows, why = cap, "--sklearnex-max-rows"
    return rows, why


def references(a, n, train, test, gamma, info):
    """The reference runs due for a training store of ``n`` rows, in order."""
    specs = []
    if not a.no_svc:
        if n <= a.svc_max_rows:
            specs.append(("svc", f"SVC, all {human_rows(n)} rows", n, {}))
        if a.svc_subsample < n:
            specs.append(("svc", f"SVC, {human_rows(a.svc_subsample)} subsample",
                          a.svc_subsample, {}))
    timed_out = getattr(a, "sklearnex_timed_out", None)
    if a.with_sklearnex and timed_out is not None and n > timed_out:
        why = f"not run: sklearnex SVC timed out on {human_rows(timed_out)} rows"
        log(f"  sklearnex SVC {why}")
        yield {"method": f"sklearnex SVC, all {human_rows(n)} rows", "fit_rows": n,
               "error": why}
    elif a.with_sklearnex:
        m, why = sklearnex_rows(n, info, a.sklearnex_max_rows)
        kw = {"threads": our_threads()}
        if m > 0:
            specs.append(("sklearnex", f"sklearnex SVC, all {human_rows(n)} rows" if m == n
                          else f"sklearnex SVC, {human_rows(m)} rows ({why})", m, kw))
        else:
            log(f"  sklearnex SVC skipped: no row fits ({why})")
        if 0 < a.svc_subsample < m:
            specs.append(("sklearnex", f"sklearnex SVC, {human_rows(a.svc_subsample)} "
                          f"subsample", a.svc_subsample, kw))
    if not a.no_nystroem:
        for K in a.nystroem_k:
            m = min(n, int(a.memory_gb * 1e9 // (K * 8)))
            specs.append(("nystroem", f"Nystroem K={K} + LinearSVC", m, {"K": K}))
    partial = os.path.join(a.workdir, f"partial-{os.getpid()}.json")
    for method, label, rows, kw in specs:
        need, avail = 3 * rows * kw.get("K", 0) * 8 + 1e9, B.mem_available()
        if method == "nystroem" and avail is not None and need > avail:
            why = (f"skipped: needs ~{need / 1e9:.0f} GB (liblinear copies the features), "
                   f"{avail / 1e9:.0f} GB available; lower --memory-gb")
            log(f"  {label} ({rows:,} fit rows) {why}")
            yield {"method": label, "fit_rows": rows, "error": why}
            continue
        log(f"  {label} ({rows:,} fit rows) ...")
        spec = dict(kind="reference", method=method, train=train, test=test, gamma=gamma,
                    fit_rows=rows, partial=partial, **kw)
        limit = {"svc": a.svc_timeout, "sklearnex": a.sklearnex_timeout}.get(method, a.timeout)
        r = B.run_reference(spec, limit)
        r.update(method=label, fit_rows=r.get("fit_rows", rows))
        if r.get("timeout") and r.get("train_s") is None:
            r["error"] = f"> {limit:g} s (timeout)"     # killed while fitting
        if method != "nystroem":      # known even when the child was killed
            t = kw.get("threads", 1)
            r.setdefault("train_threads", t)
            r.setdefault("predict_threads", t)
        if method == "sklearnex" and r.get("timeout") and rows == n:
            a.sklearnex_timed_out = n      # larger sets are not run: they would time out too
        if method == "sklearnex" and r.get("backend"):
            r["backend_note"] = B.backend_note(r)
        if "error" not in r:
            log(f"    fit {r['train_s']:.1f} s, predict {r['predict_s']:.1f} s, "
                f"accuracy {r['accuracy']:.4f}, peak RSS {r['peak_rss'] / 1e6:,.0f} MB"
                + (f"; {r['backend_note']}" if r.get("backend_note") else ""))
        else:
            log(f"    {r['error']}")
        yield r


def threads_cell(r):
    tt, pt = r.get("train_threads"), r.get("predict_threads")
    if tt is None and pt is None:
        return "-"
    return str(tt) if tt == pt else f"train {tt}, predict {pt}"


def table(runs):
    head = ["rows", "method", "fit rows", "threads", "train s", "fit s", "predict s",
            "test accuracy %", "core vectors / SVs", "steps", "peak RSS MB", "train ratio",
            "fit ratio", "predict ratio", "notes"]
    lines = []
    ours, base = {}, {}
    for r in runs:
        is_ours = r["method"].startswith("streamcvm")
        is_base = is_ours and (r.get("baseline") or r["method"].endswith(BASELINE_TAG))
        if is_base:
            base.setdefault(r["rows"], r)       # ratios against the first baseline
        elif is_ours:
            ours[r["rows"]] = r
        me = ours.get(r["rows"], {})
        ok = "error" not in r
        # a ratio only between equal thread counts (train s: train_threads)
        same = lambda x, y, k: (x.get(k.replace("_s", "_threads")) ==
                                y.get(k.replace("_s", "_threads")))
        if is_ours:     # this tree against the baseline: this / baseline
            b = base.get(r["rows"], {}) if not is_base else {}
            ratio = lambda k, kr=None: r[k] / b[kr or k] if b.get(kr or k) and r.get(k) \
                and same(r, b, "train_s" if k == "fit_s" else k) else None
        else:           # streamcvm against a reference: streamcvm / reference
            # fit s over the reference's train s: the same span (its fit alone)
            ratio = lambda k, kr=None: me[k] / r[kr or k] if me.get(k) and r.get(kr or k) \
                and same(me, r, "train_s" if k == "fit_s" else k) else None
        core = (f"{r['core_size']:,} / {r['n_sv']:,}" if is_ours and ok else
                fmt(r.get("n_sv"), ",") if ok else "-")
        fitted = r.get("train_s") is not None
        notes = [] if ok or (r.get("timeout") and not fitted) else [r["error"]]
        train_s = fmt(r.get("train_s"), ".1f") if fitted else \
            r["error"] if r.get("timeout") else "-"
        if r.get("backend_note"):
            notes.append(r["backend_note"])
        if r.get("warnings"):
            notes.append("; ".join(w.split(":")[0] for w in r["warnings"]))
        if r.get("compact_B"):
            notes.append(f"predicts with a compact expansion of B = {r['compact_B']:,}; the "
                         f"full one (--exact): predict {fmt(r.get('predict_exact_s'), '.1f')} s, "
                         f"accuracy {fmt(r.get('accuracy_exact') and 100 * r['accuracy_exact'], '.2f')}%")
        lines.append([
            f"{r['rows']:,}", r["method"], fmt(r.get("fit_rows"), ","), threads_cell(r),
            train_s, fmt(r.get("fit_s"), ".1f") if is_ours else "-",
            fmt(r.get("predict_s"), ".1f") if ok else "-",
            fmt(r.get("accuracy") and 100 * r["accuracy"], ".2f") if ok else "-",
            core, fmt(r.get("n_iter"), ",") if is_ours else "-",
            fmt(r.get("peak_rss") and r["peak_rss"] / 1e6, ",.0f"),
            fmt(ratio("train_s"), ".3g"),
            fmt(ratio("fit_s", None if is_ours else "train_s"), ".3g"),
            fmt(ratio("predict_s"), ".3g"),
            "; ".join(n for n in notes if n)])
    return B.table(head, lines, left=("method", "notes"))


def main(argv=None):
    ap = B.parser(__doc__)
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
    ap.add_argument("--baseline", metavar="REV", nargs="+",
                    help="also run streamcvm of git revision REV (a worktree under WORKDIR), "
                         "before this tree's at each size, on stores written without chunk "
                         "checksums (as versions before them wrote)")
    ap.add_argument("--same-stores", action="store_true",
                    help="the baselines train on this tree's stores (with chunk checksums: "
                         "for revisions that read them), not on copies without checksums")
    ap.add_argument("--no-svc", action="store_true", help="skip the SVC references")
    ap.add_argument("--svc-max-rows", type=parse_rows, default=200_000,
                    help="SVC on all rows only up to this many (default 200K)")
    ap.add_argument("--svc-subsample", type=parse_rows, default=50_000,
                    help="SVC on a random subsample of this many rows (default 50K)")
    ap.add_argument("--svc-timeout", type=float, default=7200,
                    help="seconds per SVC run (default 7200)")
    ap.add_argument("--no-sklearnex", action="store_true",
                    help="skip the scikit-learn-intelex SVC (oneDAL) references")
    ap.add_argument("--sklearnex-max-rows", type=parse_rows, metavar="ROWS",
                    help="sklearnex SVC on at most this many rows (default: as many as fit "
                         "in memory)")
    ap.add_argument("--sklearnex-timeout", type=float, default=3600,
                    help="seconds per sklearnex SVC run (default 3600)")
    ap.add_argument("--no-nystroem", action="store_true",
                    help="skip the Nystroem + LinearSVC references")
    ap.add_argument("--nystroem-k", type=int, nargs="+", default=list(NYSTROEM_K),
                    metavar="K", help="Nystroem sizes (default 1000 4000)")
    ap.add_argument("--memory-gb", type=float, default=5.0,
                    help="GB of Nystroem features (K * 8 bytes a row; default 5); the peak "
                         "RSS is about 3x: liblinear copies them")
    ap.add_argument("--json", metavar="OUT", help="all results (default WORKDIR/results.json; "
                                                  "rewritten after each run)")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    a.json = a.json or os.path.join(a.workdir, "results.json")
    os.makedirs(os.path.join(a.workdir, "models"), exist_ok=True)
    extra = shlex.split(a.streamcvm_args)
    skx_missing = None if a.no_sklearnex else B.sklearnex_missing()
    a.with_sklearnex = not a.no_sklearnex and skx_missing is None
    bench_run = B.BenchRun(("streamcvm", "scikit-learn", "numpy"), more=[
        f"threads: streamcvm uses every core ({our_threads()}: numba, BLAS); sklearnex SVC "
        f"(oneDAL) n_jobs={our_threads()}; the other references run under "
        f"threadpool_limits({THREADS}), SVC (libsvm) and LinearSVC (liblinear) are "
        f"single-threaded, Nystroem's BLAS products use {THREADS}; ratios only between "
        f"equal thread counts"]
        + ([f"{B.SKLEARNEX} {B.sklearnex_version()}"] if a.with_sklearnex else [])
        + ([skx_missing] if skx_missing else []))
    result = bench_run.record(args=vars(a), datasets={})
    bases = []
    if a.baseline:
        from compare_models import worktree
        for rev in a.baseline:
            label, key, tree = worktree(rev, a.workdir)
            bases.append({"label": label, "key": key, "exe": B.baseline_exe(tree)})
        result["baseline"] = [{"revision": b["label"], "tree": b["exe"][1]} for b in bases]
    old = {} if a.same_stores else dict(suffix="-nochecksums", checksums=False)
    for ds in a.datasets:
        test_rows = a.test_rows or TEST_ROWS[ds]
        test, test_info = B.ensure_store(a.workdir, ds, test_rows, TEST_FIRST_BLOCK, SEED)
        warm, _ = B.ensure_store(a.workdir, ds, WARMUP_ROWS, 0, SEED)
        log(f"{ds}: warm-up train + evaluate on {WARMUP_ROWS:,} rows (untimed) ...")
        run_streamcvm(warm, warm, os.path.join(a.workdir, "models", f"{ds}-warmup"), extra,
                      a.timeout)
        for base in bases:
            base["test"], _ = B.ensure_store(a.workdir, ds, test_rows, TEST_FIRST_BLOCK, SEED,
                                             **old)
            bwarm, _ = B.ensure_store(a.workdir, ds, WARMUP_ROWS, 0, SEED, **old)
            log(f"{ds}: baseline {base['label']} warm-up on {WARMUP_ROWS:,} rows (untimed) ...")
            run_streamcvm(bwarm, bwarm, os.path.join(a.workdir, "models",
                                                     f"{ds}-warmup-{base['key']}"),
                          extra, a.timeout, base["exe"])
        res = result["datasets"][ds] = {"test": test, "test_rows": test_info["n"],
                                        "d": test_info["d"], "stores": {}, "runs": []}
        for n in a.sizes or SIZES[ds]:
            train, info = B.ensure_store(a.workdir, ds, n, 0, SEED)
            res["stores"][n] = dict(info, path=train)
            tag = ("-" + re.sub(r"[^\w.=-]+", "_", a.streamcvm_args.strip())
                   if a.streamcvm_args.strip() else "")
            model = os.path.join(a.workdir, "models", f"{ds}-{n}{tag}")
            for base in bases:
                btrain, _ = B.ensure_store(a.workdir, ds, n, 0, SEED, **old)
                log(f"{ds} {n:,} rows: streamcvm {base['label']} train"
                    + ("" if a.same_stores else " (stores without checksums)") + " ...")
                r = run_streamcvm(btrain, base["test"], f"{model}-{base['key']}", extra,
                                  a.timeout, base["exe"])
                r.update(rows=n, method=f"streamcvm {base['label']}"
                         + ("" if a.same_stores else BASELINE_TAG), baseline=True,
                         fit_rows=n, train_threads=our_threads(),
                         predict_threads=our_threads())
                res["runs"].append(r)
                if "error" not in r:
                    log(f"  train {r['train_s']:.1f} s, peak RSS {r['peak_rss'] / 1e6:,.0f} "
                        f"MB, accuracy {r['accuracy']:.4f}")
            log(f"{ds} {n:,} rows: streamcvm train ...")
            r = run_streamcvm(train, test, model, extra, a.timeout)
            r.update(rows=n, method="streamcvm" + (f" {a.streamcvm_args.strip()}"
                                                   if extra else ""), fit_rows=n,
                     train_threads=our_threads(), predict_threads=our_threads())
            res["runs"].append(r)
            if "error" in r:
                log(f"  streamcvm failed: {r['error']}; no references (they need its gamma)")
                save_json(a.json, result)
                continue
            log(f"  train {r['train_s']:.1f} s, peak RSS {r['peak_rss'] / 1e6:,.0f} MB, "
                f"accuracy {r['accuracy']:.4f}, core {r['core_size']:,}, "
                f"steps {r['n_iter']:,}, gamma {r['gamma']:.6g}")
            for ref in references(a, n, train, test, r["gamma"], info):
                ref["rows"] = n
                res["runs"].append(ref)
                save_json(a.json, result)
            save_json(a.json, result)
    print("\n".join(bench_run.header))
    for ds, res in result["datasets"].items():
        runs = res["runs"]
        B.print_sizes(f"{ds}: {res['d']:,} features, held-out {res['test_rows']:,} rows "
                      f"(first_block={TEST_FIRST_BLOCK})", runs, table(runs),
                      [r for r in runs if r["method"].startswith("streamcvm") and "error" not in r
                       and not r.get("baseline") and not r["method"].endswith(BASELINE_TAG)])
    log(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
