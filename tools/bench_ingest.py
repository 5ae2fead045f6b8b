#!/usr/bin/env python
"""Ingest benchmark: streamcvm vs load_svmlight_file and pandas.read_csv.

Generates (once, cached in ``--workdir``) a dense Gaussian-mixture svmlight
file and a CSV file of at least ``--size-gb`` GiB each (22 features; CSV has
the label first, comma separated, no header), then measures, one after the
other and each in its own fresh Python process:

==================  ==========  =================================================
name                file        call
==================  ==========  =================================================
streamcvm           svmlight    ``ingest.ingest([svm], out.zarr, overwrite=True)``
load_svmlight_file  svmlight    ``sklearn.datasets.load_svmlight_file(svm, dtype=np.float32)``
streamcvm           csv         ``ingest.ingest([csv], out.zarr, label_col=0, header=False)``
streamcvm (hdf5)    csv         same, ``store_format="hdf5"``
pandas.read_csv     csv         ``pandas.read_csv(csv, header=None)`` (defaults: float64)
pandas f32          csv         ``pandas.read_csv(csv, header=None, dtype=np.float32)``
==================  ==========  =================================================

The references are load_svmlight_file (svmlight) and the plain default
``pandas.read_csv(csv, header=None)`` (CSV). Each child reports wall seconds,
CPU seconds and its own peak RSS (``ru_maxrss``), so memory is per tool.

- Imports are not timed for any tool. For streamcvm the child first ingests
  a tiny file of the same format (numba cache load, zarr/h5py set-up); that
  warm-up is reported apart and not counted in the timing.
- Before the measurements a throw-away child primes numba's on-disk cache
  (the first use of a fresh install compiles the parsers: seconds, and
  ~70 MB of RSS that stays in the process); its time and RSS are printed.
- This parent imports only the standard library and generates the data in
  children too: Linux carries a parent's peak RSS into a child's
  ``ru_maxrss`` across fork/exec, so a big parent would inflate every
  child's figure. Children also report ``VmHWM`` as a cross-check.
- Input files are read once by the parent before each measurement, so
  every tool starts from a warm page cache.
- On a shared machine other processes distort the figures; each run
  records the cores the rest of the machine used meanwhile ("bg cores"),
  ``--wait-quiet`` waits for a quiet machine and ``--max-bg`` reruns
  disturbed measurements. ``--repeat`` reports the median (or ``--stat
  best``) of several runs. ``--src DIR`` measures another tree (e.g. a
  ``git archive`` snapshot) while the checkout is being edited.

Usage::

    python tools/bench_ingest.py --quick                 # ~0.1 GiB files, smoke run
    python tools/bench_ingest.py --json /tmp/bench/ingest.json   # >= 2 GiB files
    python tools/bench_ingest.py --repeat 3 --max-bg 0.15 --wait-quiet 300 \
        --json /tmp/bench/ingest.json                    # on a shared machine
"""
import argparse
import datetime
import json
import os
import platform
import resource
import sys
import time

import benchlib as B     # standard library only
from benchlib import peak_rss_bytes

# the code under test: this checkout, or the tree given by --src (children
# get it through the environment); first on sys.path, so it wins over an
# editable install of another tree
B.use_source_tree(os.environ.get("BENCH_INGEST_SRC"))

D = 22
KIND = "gaussian"
GiB = 1 << 30
SVM_TARGET_RSS = 400e6             # the peak-RSS target on the svmlight file (400 MB)


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


# ---------------------------------------------------------------------------
# child: one measurement in a fresh process
# ---------------------------------------------------------------------------

def child_job(spec):
    """The job of a child (``benchlib.child_main``): its result record."""
    tool = spec["tool"]
    if tool == "generate":
        path, meta = ensure_file(spec["workdir"], spec["format"], spec["size_gb"],
                                 spec["seed"], B.log)
        warm = ensure_warmup(spec["workdir"], spec["format"], spec["seed"])
        return {"path": path, "meta": meta, "warmup": warm}
    if tool == "env":
        return environment()
    if tool == "prime":
        # first use: numba compiles the parsers (or loads them from its cache)
        t = time.perf_counter()
        ing = _ingest_module()
        t1 = time.perf_counter()
        for src, out, kw in spec["jobs_list"]:
            ing.ingest([src], out, overwrite=True, **kw)
        return {"import_s": t1 - t, "seconds": time.perf_counter() - t1,
                "peak_rss": peak_rss_bytes()}
    t = time.perf_counter()
    import numpy as np
    out = {"tool": tool}
    if tool == "streamcvm":
        ing = _ingest_module()
        kw = dict(store_format=spec.get("store_format", "zarr"), overwrite=True,
                  n_jobs=spec.get("jobs"))
        if spec["format"] == "csv":
            kw.update(label_col=0, header=False)
        out["import_s"] = time.perf_counter() - t
        # warm-up: numba compile / cache load and store set-up on a tiny file
        t = time.perf_counter()
        ing.ingest([spec["warmup"]], spec["warmup_out"], **kw)
        out["warmup_s"] = time.perf_counter() - t
        out["rss_before"] = peak_rss_bytes()
        c0, t0 = cpu_seconds(), time.perf_counter()
        res = ing.ingest([spec["src"]], spec["out"], **kw)
        out["seconds"] = time.perf_counter() - t0
        out["cpu_s"] = cpu_seconds() - c0
        out["rows"] = int(res["n"])
        out["d"] = int(res["d"])
        out["sparse"] = bool(res["sparse"])
        out["out_bytes"] = B.path_bytes(res["path"])
    elif tool == "load_svmlight_file":
        from sklearn.datasets import load_svmlight_file
        out["import_s"] = time.perf_counter() - t
        out["rss_before"] = peak_rss_bytes()
        c0, t0 = cpu_seconds(), time.perf_counter()
        X, y = load_svmlight_file(spec["src"], dtype=np.float32)
        out["seconds"] = time.perf_counter() - t0
        out["cpu_s"] = cpu_seconds() - c0
        out["rows"] = int(X.shape[0])
        out["d"] = int(X.shape[1])
        out["sparse"] = True
    elif tool == "pandas.read_csv":
        import pandas as pd
        kw = {"header": None}
        if spec.get("dtype"):
            kw["dtype"] = getattr(np, spec["dtype"])
        out["import_s"] = time.perf_counter() - t
        out["rss_before"] = peak_rss_bytes()
        c0, t0 = cpu_seconds(), time.perf_counter()
        df = pd.read_csv(spec["src"], **kw)
        out["seconds"] = time.perf_counter() - t0
        out["cpu_s"] = cpu_seconds() - c0
        out["rows"] = int(df.shape[0])
        out["d"] = int(df.shape[1]) - 1
        out["sparse"] = False
        out["dtypes"] = sorted({str(t) for t in df.dtypes})
    else:
        raise SystemExit(f"unknown tool {tool!r}")
    out["peak_rss"] = peak_rss_bytes()
    out["vm_hwm"] = B.vm_hwm_bytes()
    return out


# ---------------------------------------------------------------------------
# parent: data files
# ---------------------------------------------------------------------------

def _meta_path(path):
    return path + ".meta.json"


def _cached(path, want):
    """True if ``path`` exists and its side-car metadata matches ``want``."""
    try:
        with open(_meta_path(path)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    if not os.path.isfile(path) or os.path.getsize(path) != meta.get("bytes"):
        return False
    return all(meta.get(k) == v for k, v in want.items())


def bytes_per_row(workdir, text_format, seed):
    """Measured size of a row of generated text (first 65,536-row block)."""
    from streamcvm.data import synthetic
    p = os.path.join(workdir, f".sample-{os.getpid()}.{text_format}")
    n = 65536
    try:
        synthetic.write_text(p, KIND, n, text_format=text_format, d=D, seed=seed)
        return os.path.getsize(p) / n
    finally:
        if os.path.exists(p):
            os.remove(p)


def ensure_file(workdir, text_format, size_gb, seed, log):
    """Generate (or reuse) a text file of at least ``size_gb`` GiB; returns (path, meta)."""
    from streamcvm.data import synthetic
    ext = "svm" if text_format == "svmlight" else "csv"
    path = os.path.join(workdir, f"{KIND}_d{D}_s{seed}_{size_gb:g}GiB.{ext}")
    target = int(size_gb * GiB)
    want = {"kind": KIND, "d": D, "seed": seed, "format": text_format, "target_bytes": target}
    if _cached(path, want):
        with open(_meta_path(path)) as f:
            meta = json.load(f)
        log(f"reusing {path}: {meta['rows']:,} rows, {meta['bytes'] / GiB:.3f} GiB")
        return path, meta
    bpr = bytes_per_row(workdir, text_format, seed)
    rows = int(target / bpr * 1.01) + 1
    while True:
        log(f"generating {path}: {rows:,} rows x {D} ({text_format}, "
            f"~{bpr:.1f} B/row measured) ...")
        t0 = time.perf_counter()
        synthetic.write_text(path, KIND, rows, text_format=text_format, d=D, seed=seed,
                             progress=sys.stderr.isatty())
        dt = time.perf_counter() - t0
        size = os.path.getsize(path)
        log(f"  wrote {size:,} bytes ({size / GiB:.3f} GiB) in {dt:.1f} s "
            f"({rows / dt:,.0f} rows/s, {size / 1e6 / dt:,.1f} MB/s)")
        if size >= target:
            break
        rows = int(rows * target / size * 1.01) + 1   # short: rare, grow and redo
    meta = dict(want, rows=rows, bytes=size, generate_s=round(dt, 2),
                created=datetime.datetime.now().isoformat(timespec="seconds"))
    with open(_meta_path(path), "w") as f:
        json.dump(meta, f, indent=1)
    return path, meta


def ensure_warmup(workdir, text_format, seed):
    from streamcvm.data import synthetic
    ext = "svm" if text_format == "svmlight" else "csv"
    path = os.path.join(workdir, f"warmup_s{seed}.{ext}")
    if not os.path.exists(path):
        synthetic.write_text(path, KIND, 2000, text_format=text_format, d=D, seed=seed + 1)
    return path


def warm_cache(path):
    """Read a file once so every tool starts from the page cache."""
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


# ---------------------------------------------------------------------------
# parent: the runs
# ---------------------------------------------------------------------------

def measurements(files, workdir, jobs):
    svm, csv = files["svmlight"], files["csv"]
    wsvm, wcsv = files["warmup_svmlight"], files["warmup_csv"]
    st = lambda name: os.path.join(workdir, name)
    return [
        dict(name="streamcvm", file="svmlight", ref="load_svmlight_file",
             spec=dict(tool="streamcvm", format="svmlight", src=svm, out=st("out_svm.zarr"),
                       warmup=wsvm, warmup_out=st("warmup_svm.zarr"), jobs=jobs)),
        dict(name="load_svmlight_file", file="svmlight", ref=None,
             spec=dict(tool="load_svmlight_file", src=svm)),
        dict(name="streamcvm", file="csv", ref="pandas.read_csv",
             spec=dict(tool="streamcvm", format="csv", src=csv, out=st("out_csv.zarr"),
                       warmup=wcsv, warmup_out=st("warmup_csv.zarr"), jobs=jobs)),
        dict(name="streamcvm (hdf5)", file="csv", ref="pandas.read_csv",
             spec=dict(tool="streamcvm", format="csv", src=csv, out=st("out_csv.h5"),
                       store_format="hdf5", warmup=wcsv, warmup_out=st("warmup_csv.h5"),
                       jobs=jobs)),
        dict(name="pandas.read_csv", file="csv", ref=None,
             spec=dict(tool="pandas.read_csv", src=csv)),
        dict(name="pandas.read_csv f32", file="csv", ref="pandas.read_csv",
             spec=dict(tool="pandas.read_csv", src=csv, dtype="float32")),
    ]


def child(spec, stderr_to_log=False):
    """Run ``spec`` in a fresh interpreter; returns (result dict, or None when
    it failed, exit code, stderr)."""
    res, rc, err, _ = B.spawn(spec, capture_stderr=not stderr_to_log)
    return (None if res is None or "error" in res else res), rc, err


def _busy_seconds():
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / \
        os.sysconf("SC_CLK_TCK")


def _children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def wait_quiet(max_wait, log, threshold=0.2, window=2.0):
    """Wait (up to ``max_wait`` s) until the machine's other load is below
    ``threshold`` cores over a ``window``-second sample; returns the last load."""
    t_end = time.perf_counter() + max_wait
    said = False
    while True:
        b0 = _busy_seconds()
        if b0 is None:
            return None
        time.sleep(window)
        load = (_busy_seconds() - b0) / window
        if load < threshold or time.perf_counter() >= t_end:
            if said or load >= threshold:
                log(f"  machine load {load:.2f} cores" +
                    ("" if load < threshold else f" (still busy after {max_wait:.0f} s; running anyway)"))
            return load
        if not said:
            log(f"  waiting for a quiet machine (load {load:.2f} cores) ...")
            said = True


def run_one(m, log, rep=None, quiet_wait=0.0):
    """One measurement in a fresh child. Also estimates the background load:
    CPU the rest of the machine used while the child ran (in cores)."""
    spec = m["spec"]
    warm_cache(spec["src"])
    pre_load = wait_quiet(quiet_wait, log) if quiet_wait > 0 else None
    log(f"running {m['name']} on {m['file']}" + (f" (run {rep})" if rep else "") + " ...")
    busy0, kid0, t0 = _busy_seconds(), _children_cpu(), time.perf_counter()
    res, rc, err = child(spec)
    wall = time.perf_counter() - t0
    busy1, kid1 = _busy_seconds(), _children_cpu()
    if rc != 0 or res is None:
        tail = "\n".join(err.strip().splitlines()[-15:])
        log(f"  FAILED (exit {rc}):\n{tail}")
        return dict(name=m["name"], file=m["file"], ref=m["ref"], error=tail or "no result")
    res.update(name=m["name"], file=m["file"], ref=m["ref"], process_s=wall)
    if pre_load is not None:
        res["load_before"] = pre_load
    if busy0 is not None:
        res["bg_cores"] = max(0.0, ((busy1 - busy0) - (kid1 - kid0)) / wall)
    extra = f", warm-up {res['warmup_s']:.2f} s" if "warmup_s" in res else ""
    bg = f", background load {res['bg_cores']:.2f} cores" if "bg_cores" in res else ""
    log(f"  {res['rows']:,} rows in {res['seconds']:.2f} s, peak RSS "
        f"{res['peak_rss'] / 1e6:,.0f} MB{extra}{bg}")
    hwm = res.get("vm_hwm")
    if hwm and abs(hwm - res["peak_rss"]) > 0.05 * res["peak_rss"]:
        log(f"  note: ru_maxrss {res['peak_rss'] / 2**20:,.0f} MiB but VmHWM "
            f"{hwm / 2**20:,.0f} MiB (ru_maxrss carries the parent's peak over exec)")
    return res


def combine(runs, stat="median", max_bg=None):
    """One figure per measurement from repeated runs, with the spread.

    Runs disturbed by other load (bg_cores > max_bg) are kept in the record
    but left out of the figure when at least one undisturbed run exists.
    ``stat``: "median" (the median run by seconds; the faster of the middle
    two for an even count) or "best" (the fastest run).
    """
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    clean = [r for r in ok if max_bg is None or r.get("bg_cores", 0.0) <= max_bg]
    pool = sorted(clean or ok, key=lambda r: r["seconds"])
    pick = dict(pool[0] if stat == "best" else pool[(len(pool) - 1) // 2])
    pick["stat"] = stat
    pick["runs_used"] = len(pool)
    pick["all_clean"] = bool(clean)
    pick["runs_seconds"] = [round(r["seconds"], 3) for r in ok]
    pick["runs_peak_rss"] = [r["peak_rss"] for r in ok]
    pick["runs_bg_cores"] = [round(r.get("bg_cores", 0.0), 3) for r in ok]
    pick["peak_rss_max"] = max(pick["runs_peak_rss"])
    pick["failed_runs"] = len(runs) - len(ok)
    return pick


def add_rates(results, files_meta):
    by = {(r["name"], r["file"]): r for r in results if "error" not in r}
    for r in by.values():
        nbytes = files_meta[r["file"]]["bytes"]
        r["input_bytes"] = nbytes
        r["rows_per_s"] = r["rows"] / r["seconds"]
        r["mb_per_s"] = nbytes / 1e6 / r["seconds"]
        r["expected_rows"] = files_meta[r["file"]]["rows"]
    for r in by.values():
        ref = by.get((r["ref"], r["file"])) if r["ref"] else None
        if ref is not None:
            r["speed_ratio"] = r["rows_per_s"] / ref["rows_per_s"]
            r["rss_ratio"] = r["peak_rss"] / ref["peak_rss"]
        elif r["ref"] is None:
            r["speed_ratio"] = r["rss_ratio"] = 1.0


def table(results):
    head = ["tool", "file", "rows", "seconds", "rows/s", "MB/s", "peak RSS MB",
            "speed vs ref", "RSS vs ref", "CPU s", "warm-up s", "RSS before MB", "bg cores"]
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["name"], r["file"], "FAILED"] + [""] * (len(head) - 3))
            continue
        ref = "(ref)" if r["ref"] is None else ""
        ratio = lambda k: f"{r[k]:.2f}x" if k in r else "-"
        rows.append([
            r["name"], r["file"], f"{r['rows']:,}", f"{r['seconds']:.1f}",
            f"{r['rows_per_s']:,.0f}", f"{r['mb_per_s']:,.1f}",
            f"{r['peak_rss'] / 1e6:,.0f}",
            ref or ratio("speed_ratio"), ref or ratio("rss_ratio"),
            f"{r['cpu_s']:.1f}", f"{r['warmup_s']:.2f}" if "warmup_s" in r else "-",
            f"{r['rss_before'] / 1e6:,.0f}",
            f"{r['bg_cores']:.2f}" if "bg_cores" in r else "-"])
    return B.table(head, rows, left=("tool", "file"), pad=True)


def verdict(results):
    by = {(r["name"], r["file"]): r for r in results if "error" not in r}
    lines = []
    s = by.get(("streamcvm", "svmlight"))
    if s:
        if "speed_ratio" in s:
            ok = s["speed_ratio"] >= 1.0
            lines.append(f"svmlight throughput >= load_svmlight_file: {'yes' if ok else 'NO'} "
                         f"({s['speed_ratio']:.2f}x)")
        ok = s["peak_rss"] < SVM_TARGET_RSS
        lines.append(f"svmlight peak RSS < 400 MB: {'yes' if ok else 'NO'} "
                     f"({s['peak_rss'] / 1e6:,.0f} MB = {s['peak_rss'] / 2**20:,.0f} MiB)")
    for name in ("streamcvm", "streamcvm (hdf5)"):
        c = by.get((name, "csv"))
        if c and "speed_ratio" in c:
            ok = c["speed_ratio"] >= 1.0
            lines.append(f"csv throughput of {name} >= pandas.read_csv: "
                         f"{'yes' if ok else 'NO'} ({c['speed_ratio']:.2f}x)")
    for r in results:
        if "error" not in r and r["rows"] != r["expected_rows"]:
            lines.append(f"ROW COUNT MISMATCH: {r['name']} on {r['file']} read {r['rows']:,} "
                         f"rows, the file has {r['expected_rows']:,}")
    return lines


def _rm(p):
    import shutil
    if os.path.isdir(p):
        shutil.rmtree(p, ignore_errors=True)
    elif os.path.exists(p):
        os.remove(p)


def environment():
    import numba
    import numpy
    import pandas
    import sklearn
    import zarr
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import psutil
        ram = f"{psutil.virtual_memory().total / GiB:.1f} GiB"
    except ImportError:
        ram = "?"
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "cpu": cpu, "ram": ram,
            "python": platform.python_version(), "numpy": numpy.__version__,
            "numba": numba.__version__, "zarr": zarr.__version__,
            "pandas": pandas.__version__, "sklearn": sklearn.__version__,
            "platform": platform.platform(), **source_info()}


def _ingest_module():
    """streamcvm.ingest, or the top-level ``ingest`` package of a revision
    from before it moved under streamcvm (--src of an older tree). Told
    apart by the layout, not by trying the import: an editable install of
    this checkout would answer ``import streamcvm.ingest`` for any tree."""
    import streamcvm
    here = os.path.dirname(os.path.abspath(streamcvm.__file__))
    if len(streamcvm.__path__) > 1 or os.path.isdir(os.path.join(here, "ingest")):
        import streamcvm.ingest as ing          # installed, linked, or through __path__
    else:
        import ingest as ing
    return ing


def source_info():
    """Which code was measured: the imported package paths and its git commit."""
    import streamcvm
    ingest = _ingest_module()
    # the source tree: ingest/ beside streamcvm/ (installed: streamcvm/ingest/)
    root = os.path.dirname(os.path.dirname(os.path.abspath(ingest.__file__)))
    commit, dirty = B.git_state(root, ("streamcvm", "ingest"), short=False, untracked=True)
    info = {"src": root, "streamcvm_version": getattr(streamcvm, "__version__", "?"),
            "commit": commit, "dirty": dirty}
    if info["commit"] is None and os.path.exists(os.path.join(root, "COMMIT")):
        with open(os.path.join(root, "COMMIT")) as f:     # a snapshot made for --src
            info["commit"] = f.read().strip()
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="bench_ingest.py",
        description="Ingest benchmark: streamcvm vs sklearn load_svmlight_file and "
                    "pandas.read_csv on generated files of >= --size-gb GiB each; "
                    "every measurement in its own process.")
    ap.add_argument("--workdir", default="/tmp/bench",
                    help="where the generated files and output stores go (default /tmp/bench)")
    ap.add_argument("--size-gb", type=float, default=2.0,
                    help="minimum size of each input file in GiB (default 2.0)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run on ~0.1 GiB files (overrides --size-gb)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=None,
                    help="streamcvm parser threads (default: all cores)")
    ap.add_argument("--only", default=None,
                    help="comma-separated subset to run, e.g. 'streamcvm:svmlight,"
                         "load_svmlight_file:svmlight' (default: all)")
    ap.add_argument("--repeat", type=int, default=1, metavar="R",
                    help="run the whole sequence R times and report the median run of "
                         "each measurement (default 1)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="before each measurement, wait up to SECONDS for the rest of the "
                         "machine to use < 0.2 cores (for shared machines; default 0: "
                         "don't wait). The load seen during each run is reported anyway.")
    ap.add_argument("--stat", choices=["median", "best"], default="median",
                    help="figure reported from repeated runs (default median)")
    ap.add_argument("--max-bg", type=float, default=None, metavar="CORES",
                    help="a run during which other processes used more than CORES cores "
                         "counts as disturbed: it is run again (see --retries) and left out "
                         "of the figure if a clean run exists (default: accept every run)")
    ap.add_argument("--retries", type=int, default=2, metavar="K",
                    help="with --max-bg, run a disturbed measurement up to K more times "
                         "(default 2)")
    ap.add_argument("--src", default=None, metavar="DIR",
                    help="benchmark the streamcvm/ingest packages in DIR (e.g. a "
                         "'git archive' snapshot, with the commit id in DIR/COMMIT) instead "
                         "of this checkout; a tree being edited during a long run gives "
                         "mixed results")
    ap.add_argument("--keep-stores", action="store_true",
                    help="keep the output stores (default: removed at the end)")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write results here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child is not None:
        return B.child_main(a.child, child_job)

    size = 0.1 if a.quick else a.size_gb
    if size <= 0:
        ap.error("--size-gb must be positive")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if a.retries < 0:
        ap.error("--retries must be >= 0")
    os.makedirs(a.workdir, exist_ok=True)
    log = B.log
    if a.src:
        if not os.path.isdir(os.path.join(a.src, "ingest")):
            ap.error(f"--src {a.src}: no ingest/ package there")
        os.environ["BENCH_INGEST_SRC"] = os.path.abspath(a.src)
    # This process stays small (stdlib only): Linux carries a parent's peak RSS
    # into a child's ru_maxrss, so generation and version probing run in
    # children too.
    env, rc, err = child({"tool": "env"})
    if env is None:
        log(err)
        return 2
    log(f"# bench_ingest {env['date']}: {env['cpus']} CPUs ({env['cpu']}), RAM {env['ram']}, "
        f"python {env['python']}, numpy {env['numpy']}, numba {env['numba']}, "
        f"zarr {env['zarr']}, pandas {env['pandas']}, scikit-learn {env['sklearn']}")
    log(f"# code under test: {env['src']} (commit {env['commit'] or '?'}"
        f"{', with uncommitted changes' if env['dirty'] else ''})")

    files, meta = {}, {}
    for fmt in ("svmlight", "csv"):
        g, rc, _ = child({"tool": "generate", "workdir": a.workdir, "format": fmt,
                          "size_gb": size, "seed": a.seed}, stderr_to_log=True)
        if g is None:
            log(f"generating the {fmt} file failed (exit {rc})")
            return 2
        files[fmt], meta[fmt], files["warmup_" + fmt] = g["path"], g["meta"], g["warmup"]
    print(f"input files (each >= {size:g} GiB):")
    for fmt in ("svmlight", "csv"):
        m = meta[fmt]
        print(f"  {fmt:8s} {files[fmt]}: {m['bytes']:,} bytes ({m['bytes'] / GiB:.3f} GiB, "
              f"{m['bytes'] / 1e9:.3f} GB), {m['rows']:,} rows x {D} features")
    sys.stdout.flush()

    todo = measurements(files, a.workdir, a.jobs)
    if a.only:
        keep = {tuple(s.split(":", 1)) if ":" in s else (s, None) for s in a.only.split(",")}
        todo = [m for m in todo if (m["name"], m["file"]) in keep or (m["name"], None) in keep]
    # Prime numba's on-disk cache in a throw-away child, so every measured child
    # loads compiled parsers (the steady state after a package's first use)
    # instead of compiling them, which costs seconds and ~70 MB of RSS that
    # stays in the process. Reported apart.
    st = lambda name: os.path.join(a.workdir, name)
    prime, rc, err = child({"tool": "prime", "jobs_list": [
        [files["warmup_svmlight"], st("prime_svm.zarr"), {}],
        [files["warmup_csv"], st("prime_csv.zarr"), {"label_col": 0, "header": False}],
        [files["warmup_csv"], st("prime_csv.h5"),
         {"label_col": 0, "header": False, "store_format": "hdf5"}]]})
    if prime is None:
        log(f"priming failed (exit {rc}):\n{err}")
        return 2
    for name in ("prime_svm.zarr", "prime_csv.zarr", "prime_csv.h5"):
        _rm(st(name))
    print(f"first use of streamcvm (numba compile or cache load, 3 tiny ingests): "
          f"{prime['seconds']:.2f} s, peak RSS {prime['peak_rss'] / 1e6:,.0f} MB")
    sys.stdout.flush()

    runs = {i: [] for i in range(len(todo))}
    for rep in range(a.repeat):         # strictly one after the other, never concurrent
        for i, m in enumerate(todo):
            for attempt in range(a.retries + 1):
                r = run_one(m, log, rep + 1 if a.repeat > 1 else None, a.wait_quiet)
                runs[i].append(r)
                bg = r.get("bg_cores", 0.0)
                if a.max_bg is None or "error" in r or bg <= a.max_bg:
                    break
                log(f"  disturbed: other processes used {bg:.2f} cores during the run"
                    + (" ; again" if attempt < a.retries else " ; giving up on a clean run"))
    results = [combine(runs[i], a.stat, a.max_bg) for i in range(len(todo))]
    add_rates(results, meta)

    print()
    print(table(results))
    print()
    print("reference: load_svmlight_file(dtype=float32) for svmlight, plain "
          "pandas.read_csv(header=None) (float64) for CSV; 'pandas.read_csv f32' adds "
          "dtype=np.float32. MB/s = input bytes / 1e6 / seconds; peak RSS = the child's "
          "ru_maxrss (MB = 1e6 bytes), imports and streamcvm warm-up included; 'RSS before' "
          "= the child's peak just before the timed call (imports, warm-up). CPU s = "
          "user + system time of the timed call; bg cores = average cores used by other "
          "processes on the machine while the child ran (0 = quiet machine).")
    if any(len(r.get("runs_seconds", [])) > 1 for r in results):
        print(f"{a.stat} of repeated runs"
              + (f" with other load <= {a.max_bg:g} cores" if a.max_bg is not None else "")
              + "; seconds (other load in cores) of every run:")
        for r in results:
            if "runs_seconds" in r:
                print(f"  {r['name']} / {r['file']}: "
                      + ", ".join(f"{x:.2f} ({b:.2f})"
                                  for x, b in zip(r["runs_seconds"], r["runs_bg_cores"]))
                      + f"; peak RSS max {r['peak_rss_max'] / 1e6:,.0f} MB"
                      + ("" if r.get("all_clean", True) else "; NO CLEAN RUN"))
    for line in verdict(results):
        print(line)
    if not a.keep_stores:
        for m in todo:
            for k in ("out", "warmup_out"):
                if m["spec"].get(k):
                    _rm(m["spec"][k])
    log(f"parent peak RSS {peak_rss_bytes() / 2**20:,.0f} MiB (bounds what children inherit)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"env": env, "prime": prime, "size_gib": size, "seed": a.seed, "files": meta,
                       "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                       "results": results}, f, indent=1)
        log(f"results written to {a.json}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
