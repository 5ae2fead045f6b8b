#!/usr/bin/env python
"""Integrity benchmark: what the per-chunk checksums and the read checks
cost, as ratios against the same code writing stores without checksums, in
the same run.

Input (generated once by ``streamcvm.data.synthetic.write_text(path, "gaussian",
ROWS, seed=0)`` and cached in ``--workdir``): a plain (not gzipped)
svmlight file of the dense Gaussian mixture, 22 float32 features, 88 bytes
of X a row; the default 12,200,000 rows are ~1 GiB of raw X (the
"1 GB store"), ``--quick`` 300,000.

Measured, each run in its own fresh Python process (this script with a
hidden ``--child``), strictly one after the other, every pair alternating
which of on / off runs first, the whole sequence ``--repeat`` times:

====================  ============================================================
row                   timed call in the child
====================  ============================================================
ingest                ``ingest([svm], out, overwrite=True, store_format=F,
                      checksums=on|off)`` (the output removed by the parent
                      before each run; ingest fsyncs the store, that is timed)
pass                  ``s = open_store(store)``, then ``s.chunk(i)`` for every
                      chunk in order, on the store ingested with checksums
                      (each read verifies the crc / fletcher32) and on the one
                      without (no verification); the finiteness check
                      (``np.isfinite(X).all()``) runs on both
pass, no finite chk   the same on the checksummed store opened with
                      ``open_store(store, check_finite=False)`` (Zarr only):
                      with "pass on" it shows the finiteness check's own cost
parallel pass         the chunks read as training reads them: ``Runner(threads=T)
                      .map(task, s.n_chunks, s)``, the task ``s.chunk(i)``
                      (dask's threaded scheduler; ``--no-parallel`` skips it)
scoring pass          ``est.predict(store)`` streamed over every row, ``est`` the
                      default CVMClassifier of the 2,000 warm-up rows (saved
                      once): each chunk read, checked, and its kernel block
                      against the support vectors computed, the work of a
                      training violator pass or of predict (``--no-score``
                      skips it)
====================  ============================================================

F is Zarr (the ``crc32c`` codec after Zstd) and HDF5 (the fletcher32
filter), ``--formats``. The ingest rows write the stores that the pass rows
read (the last repeat's are kept).

What each figure is:

- median s: median wall seconds of the timed call over the repeats (imports
  and an untimed warm-up excluded: each child first ingests, or reads, a
  2,000-row warm-up file / store of the same format and checksum setting:
  numba cache load, zarr / h5py set-up).
- ratio vs off: median s of the row / median s of the same measurement
  without checksums (for "pass, no finite chk": against "pass off", which
  does check finiteness). The target: at most 1.10x for ingest and
  for a full pass. "CPU ratio" is the same for CPU seconds (user + system,
  all threads), less sensitive to other load on a shared machine.
- peak RSS: the child's ``ru_maxrss`` (MB = 1e6 bytes; imports included),
  median over the repeats.
- bg cores: cores the rest of the machine used while the child ran (median;
  0 = quiet machine). ``--wait-quiet`` waits for a quiet machine first.

Page cache: the parent reads the input file (before an ingest) or every
file of the store (before a pass) once, so every run starts warm; after an
ingest it calls ``sync``. This parent imports only the standard library
(benchlib's rule: a child's ``ru_maxrss`` starts at its parent's peak).

Usage::

    python tools/bench_integrity.py --quick                  # smoke run, 300K rows
    python tools/bench_integrity.py --json /tmp/bench/integrity.json   # 12.2M rows, ~1 GiB X
    python tools/bench_integrity.py --repeat 5 --wait-quiet 300 --formats zarr \\
        --json /tmp/bench/integrity.json                     # on a shared machine
"""
import os
import shutil
import statistics
import sys
import time

import benchlib as B                # standard library only
# the quiet-machine helpers live in bench_ingest (standard library only too)
from bench_ingest import _busy_seconds, _children_cpu, wait_quiet, warm_cache

B.use_source_tree()

KIND, D = "gaussian", 22
DEFAULT_ROWS, QUICK_ROWS, WARMUP_ROWS = 12_200_000, 300_000, 2000
EXT = {"zarr": "zarr", "hdf5": "h5"}
TARGET = 1.10                       # the target: at most 10% on either
SWITCH = {True: "on", False: "off"}


# ---------------------------------------------------------------------------
# children
# ---------------------------------------------------------------------------

def cpu_seconds():
    import resource
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _meta_path(path):
    return path + ".meta.json"


def ensure_text(path, n, seed):
    """Generate (or reuse, when its side-car matches) the svmlight file of
    ``n`` rows; returns its metadata."""
    from streamcvm.data import synthetic
    want = {"kind": KIND, "rows": n, "seed": seed, "d": D}
    meta = B.load_json(_meta_path(path), {})
    if all(meta.get(k) == v for k, v in want.items()) and os.path.isfile(path) \
            and os.path.getsize(path) == meta.get("bytes"):
        B.log(f"reusing {path}: {n:,} rows, {meta['bytes'] / 2**30:.3f} GiB")
        return dict(meta, reused=True)
    B.log(f"generating {path}: {n:,} rows x {D} (svmlight) ...")
    t = time.perf_counter()
    synthetic.write_text(path, KIND, n, d=D, seed=seed, progress=sys.stderr.isatty())
    meta = dict(want, bytes=os.path.getsize(path), generate_s=round(time.perf_counter() - t, 2),
                created=B.now())
    B.save_json(_meta_path(path), meta)
    B.log(f"  {meta['bytes']:,} bytes in {meta['generate_s']:.1f} s")
    return dict(meta, reused=False)


def job_prepare(spec):
    """The input file, the warm-up file and the warm-up stores (one per
    format and checksum setting; writing them primes numba's cache too)."""
    out = {"input": ensure_text(spec["src"], spec["rows"], spec["seed"]),
           "warmup": ensure_text(spec["warmup_src"], WARMUP_ROWS, spec["seed"] + 1)}
    from streamcvm.ingest import ingest
    t = time.perf_counter()
    for fmt, on, path in spec["warmup_stores"]:
        ingest([spec["warmup_src"]], path, overwrite=True, store_format=fmt, checksums=on)
    out["prime_s"] = time.perf_counter() - t
    # the scoring pass's model: the default classifier of the warm-up rows
    from streamcvm import CVMClassifier
    from streamcvm.estimators.model import save_model
    t = time.perf_counter()
    est = CVMClassifier().fit(spec["model_rows"])
    save_model(est, spec["model"], overwrite=True)
    out["model"] = {"path": spec["model"], "fit_s": time.perf_counter() - t,
                    "support_vectors": int(sum(len(m.coef) for m in est.machines_))
                    if hasattr(est, "machines_") else None}
    return out


def job_env(spec):
    import google_crc32c
    import numpy
    import zarr
    import h5py
    info = {"numpy": numpy.__version__, "zarr": zarr.__version__, "h5py": h5py.__version__,
            "hdf5": h5py.version.hdf5_version,
            "google_crc32c": getattr(google_crc32c, "implementation", "?")}
    try:
        info["zarr_config"] = {k: zarr.config.get(k) for k in
                               ("async.concurrency", "threading.max_workers")}
    except Exception:           # noqa: BLE001 - informative only
        pass
    return info


def job_ingest(spec):
    from streamcvm.ingest import ingest
    from streamcvm.data.store import open_store
    kw = dict(overwrite=True, store_format=spec["format"], checksums=spec["checksums"],
              n_jobs=spec.get("jobs"))
    t = time.perf_counter()
    ingest([spec["warmup_src"]], spec["warmup_out"], **kw)       # untimed warm-up
    warm_s = time.perf_counter() - t
    rm(spec["warmup_out"])
    rss_before = B.peak_rss_bytes()
    c0, t0 = cpu_seconds(), time.perf_counter()
    res = ingest([spec["src"]], spec["out"], **kw)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    peak = B.peak_rss_bytes()
    s = open_store(spec["out"])
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss": peak, "vm_hwm": B.vm_hwm_bytes(),
            "rss_before": rss_before, "warmup_s": warm_s, "rows": int(res["n"]),
            "d": int(res["d"]), "chunk_rows": int(res["chunk_rows"]),
            "n_chunks": s.n_chunks, "checksums": s.checksums,
            "disk_bytes": B.path_bytes(spec["out"])}


def _rows_task(i, store):
    """A parallel pass's chunk task: read chunk ``i`` (checks included)."""
    return len(store.chunk(i).y)


def _read_all(path, check_finite, parallel, threads):
    """Open ``path`` and read every chunk: (rows, chunks, the store, open s)."""
    from streamcvm.data.store import open_store
    t = time.perf_counter()
    s = open_store(path, check_finite=check_finite)
    open_s = time.perf_counter() - t
    if parallel:
        from streamcvm.data.parallel import Runner
        with Runner(threads=threads, use_active=False) as run:
            rows = sum(run.map(_rows_task, s.n_chunks, s))
    else:
        rows = 0
        for i in range(s.n_chunks):
            c = s.chunk(i)
            rows += len(c.y)
    return rows, s, open_s


def job_pass(spec):
    import numpy  # noqa: F401 - imported before the timing, as the store's code does
    import streamcvm.data.store  # noqa: F401
    args = (spec["check_finite"], spec["parallel"], spec.get("threads"))
    t = time.perf_counter()
    _read_all(spec["warmup_path"], *args)                      # untimed warm-up
    warm_s = time.perf_counter() - t
    rss_before = B.peak_rss_bytes()
    c0, t0 = cpu_seconds(), time.perf_counter()
    rows, s, open_s = _read_all(spec["path"], *args)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    if s.sparse:
        raise SystemExit(f"{spec['path']}: a sparse store (dense expected)")
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss": B.peak_rss_bytes(),
            "vm_hwm": B.vm_hwm_bytes(), "rss_before": rss_before, "warmup_s": warm_s,
            "open_s": open_s, "rows": rows, "n_chunks": s.n_chunks,
            "chunk_rows": s.chunk_rows, "checksums": s.checksums,
            "check_finite": s.check_finite}


def job_score(spec):
    """A scoring pass: ``predict`` streamed over the whole store (every
    chunk read, checked, and its kernel block against the model's support
    vectors computed: the work of a violator pass, or of predict)."""
    from streamcvm.estimators.model import load_model
    from streamcvm.data.store import open_store
    est = load_model(spec["model"])
    t = time.perf_counter()
    est.predict(spec["warmup_path"])                           # untimed warm-up
    warm_s = time.perf_counter() - t
    rss_before = B.peak_rss_bytes()
    c0, t0 = cpu_seconds(), time.perf_counter()
    rows = len(est.predict(spec["path"]))
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    s = open_store(spec["path"])
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss": B.peak_rss_bytes(),
            "vm_hwm": B.vm_hwm_bytes(), "rss_before": rss_before, "warmup_s": warm_s,
            "rows": rows, "n_chunks": s.n_chunks, "chunk_rows": s.chunk_rows,
            "checksums": s.checksums}


JOBS = {"prepare": job_prepare, "env": job_env, "ingest": job_ingest, "pass": job_pass,
        "score": job_score}


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------

def rm(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def warm_tree(path):
    """Read a file, or every file under a folder, once (page cache)."""
    if os.path.isdir(path):
        for dp, _, fn in os.walk(path):
            for f in fn:
                warm_cache(os.path.join(dp, f))
    elif os.path.exists(path):
        warm_cache(path)


def chunk_files(path):
    """Zarr: the number of chunk files (``ARRAY/c/...``); None for a file."""
    if not os.path.isdir(path):
        return None
    return sum(len(fn) for dp, _, fn in os.walk(path)
               if "c" in os.path.relpath(dp, path).split(os.sep))


def metadata_bytes(path):
    """Zarr: the bytes of its metadata (``zarr.json`` files); None for a file."""
    if not os.path.isdir(path):
        return None
    return sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fn in os.walk(path)
               for f in fn if f == "zarr.json")


def run_one(m, a, rep):
    """One run of measurement ``m`` in a fresh child; the child's record
    with bg_cores (other load, in cores) and the rep."""
    spec = m["spec"]
    if spec["kind"] == "ingest":
        rm(spec["out"])
        os.sync()
        warm_tree(spec["src"])
    else:
        warm_tree(spec["path"])
    pre = wait_quiet(a.wait_quiet, B.log) if a.wait_quiet > 0 else None
    B.log(f"{m['label']} (run {rep + 1}/{a.repeat}) ...")
    busy0, kid0, t0 = _busy_seconds(), _children_cpu(), time.perf_counter()
    r = B.run_child(spec, a.timeout)
    wall = time.perf_counter() - t0
    busy1, kid1 = _busy_seconds(), _children_cpu()
    if spec["kind"] == "ingest":
        os.sync()               # the next run does not pay for this one's writeback
    r["rep"] = rep
    if pre is not None:
        r["load_before"] = pre
    if busy0 is not None and wall > 0:
        r["bg_cores"] = max(0.0, ((busy1 - busy0) - (kid1 - kid0)) / wall)
    if "error" not in r:
        B.log(f"  {r['seconds']:.3f} s, CPU {r['cpu_s']:.2f} s, peak RSS "
              f"{r['peak_rss'] / 1e6:,.0f} MB, checksums {r['checksums']}, "
              f"bg {r.get('bg_cores', 0):.2f} cores")
    return r


def measurements(a, src, warmup_src, stores, warm_stores):
    """The measurements, in pairs (off, on) [+ the no-finite-check run]."""
    pairs = []
    for fmt in a.formats:
        pairs.append([dict(what="ingest", fmt=fmt, on=on, spec=dict(
            kind="ingest", format=fmt, checksums=on, src=src, out=stores[fmt, on],
            warmup_src=warmup_src, jobs=a.jobs,
            warmup_out=os.path.join(a.workdir, f"warmup-ingest-{fmt}-{SWITCH[on]}.{EXT[fmt]}")))
            for on in (False, True)])
    for parallel in (False, True) if a.parallel else (False,):
        what = f"parallel pass ({a.threads} threads)" if parallel else "pass"
        for fmt in a.formats:
            group = [dict(what=what, fmt=fmt, on=on, spec=dict(
                kind="pass", path=stores[fmt, on], warmup_path=warm_stores[fmt, on],
                check_finite=True, parallel=parallel, threads=a.threads))
                for on in (False, True)]
            if fmt == "zarr" and not parallel:
                group.append(dict(what="pass, no finite chk", fmt=fmt, on=True, spec=dict(
                    kind="pass", path=stores[fmt, True], warmup_path=warm_stores[fmt, True],
                    check_finite=False, parallel=False, threads=a.threads)))
            pairs.append(group)
    if a.score:
        for fmt in a.formats:
            pairs.append([dict(what="scoring pass", fmt=fmt, on=on, spec=dict(
                kind="score", path=stores[fmt, on], warmup_path=warm_stores[fmt, on],
                model=a.model)) for on in (False, True)])
    for g in pairs:
        for m in g:
            m["label"] = f"{m['what']} {m['fmt']} checksums {SWITCH[m['on']]}"
            m["key"] = f"{m['what']}|{m['fmt']}|{SWITCH[m['on']]}"
    return pairs


def summarize(m, runs):
    ok = [r for r in runs if "error" not in r]
    s = {"key": m["key"], "what": m["what"], "format": m["fmt"], "checksums_on": m["on"],
         "check_finite": m["spec"].get("check_finite"), "runs": runs, "failed": len(runs) - len(ok)}
    if ok:
        med = lambda k: statistics.median(r[k] for r in ok)
        s.update(seconds=med("seconds"), cpu_s=med("cpu_s"), peak_rss=med("peak_rss"),
                 peak_rss_max=max(r["peak_rss"] for r in ok),
                 bg_cores=med("bg_cores") if all("bg_cores" in r for r in ok) else None,
                 rows=ok[0]["rows"], n_chunks=ok[0]["n_chunks"],
                 checksums=ok[0]["checksums"],
                 runs_seconds=[round(r["seconds"], 4) for r in ok])
    return s


def add_ratios(results):
    by = {r["key"]: r for r in results}
    for r in results:
        off = by.get(f"{r['what'].replace(', no finite chk', '')}|{r['format']}|off")
        if off is None or "seconds" not in r or "seconds" not in off:
            continue
        r["ref"] = off["key"]
        r["ratio"] = r["seconds"] / off["seconds"]
        r["cpu_ratio"] = r["cpu_s"] / off["cpu_s"] if off["cpu_s"] > 0 else None
        # the same ratio repeat by repeat (each on run against its repeat's off run)
        offs = {x["rep"]: x["seconds"] for x in off["runs"] if "error" not in x}
        r["paired_ratios"] = [round(x["seconds"] / offs[x["rep"]], 4) for x in r["runs"]
                              if "error" not in x and x["rep"] in offs]


def report_table(results):
    head = ["what", "format", "checksums", "median s", "ratio vs off", "CPU s", "CPU ratio",
            "peak RSS MB", "runs s", "bg cores"]
    rows = []
    for r in results:
        ck = "off" if not r["checksums_on"] else f"on ({r.get('checksums') or '?'})"
        if "seconds" not in r:
            rows.append([r["what"], r["format"], ck, "FAILED"] + [""] * (len(head) - 4))
            continue
        is_ref = not r["checksums_on"]
        rows.append([r["what"], r["format"], ck, f"{r['seconds']:.3f}",
                     "(ref)" if is_ref else B.fmt(r.get("ratio"), ".3f") + "x",
                     f"{r['cpu_s']:.2f}",
                     "(ref)" if is_ref else B.fmt(r.get("cpu_ratio"), ".3f") + "x",
                     f"{r['peak_rss'] / 1e6:,.0f}",
                     " ".join(f"{x:.3f}" for x in r["runs_seconds"]),
                     B.fmt(r.get("bg_cores"), ".2f")])
    return B.table(head, rows, left=("what", "format", "checksums", "runs s"), pad=True)


def sizes_table(a, stores, results):
    """The stores' sizes on disk, on vs off."""
    chunks = {(r["format"], r["checksums_on"]): r.get("n_chunks") for r in results
              if r["what"] == "pass" or r["what"] == "ingest"}
    head = ["store", "checksums", "bytes on disk", "extra bytes", "of which metadata",
            "row chunks", "chunk files"]
    rows, info = [], {}
    for fmt in a.formats:
        sz = {on: B.path_bytes(stores[fmt, on]) if os.path.exists(stores[fmt, on]) else None
              for on in (False, True)}
        md = {on: metadata_bytes(stores[fmt, on]) for on in (False, True)}
        for on in (False, True):
            if sz[on] is None:
                continue
            cf = chunk_files(stores[fmt, on])
            extra = sz[on] - sz[False] if on and sz[False] is not None else None
            md_extra = md[on] - md[False] if extra is not None and md[on] is not None else None
            info[f"{fmt}|{SWITCH[on]}"] = {"path": stores[fmt, on], "bytes": sz[on],
                                           "chunk_files": cf, "extra_bytes": extra,
                                           "metadata_bytes": md[on]}
            rows.append([os.path.basename(stores[fmt, on]), SWITCH[on], f"{sz[on]:,}",
                         "-" if extra is None else f"{extra:+,}",
                         "-" if md_extra is None else f"{md_extra:+,}",
                         B.fmt(chunks.get((fmt, on)), ","), B.fmt(cf, ",")])
    return B.table(head, rows, left=("store", "checksums"), pad=True), info


def verdict(results, expected_rows):
    lines = []
    by = {r["key"]: r for r in results}
    for r in results:
        if "ratio" not in r or not r["checksums_on"]:
            continue
        cost = (r["ratio"] - 1) * 100
        if r["what"] == "pass, no finite chk":
            on = by.get(f"pass|{r['format']}|on")
            if on and "seconds" in on:
                f = on["seconds"] / r["seconds"]
                lines.append(f"finiteness check ({r['format']}, checksummed store): pass with "
                             f"it / without it = {f:.3f}x ({(f - 1) * 100:+.1f}%)")
            continue
        target = r["what"] in ("ingest", "pass")
        lines.append(f"{r['what']} {r['format']}: checksums cost {cost:+.1f}% wall "
                     f"({r['ratio']:.3f}x; CPU {B.fmt(r.get('cpu_ratio'), '.3f')}x; per "
                     f"repeat {', '.join(f'{x:.3f}' for x in r['paired_ratios'])})"
                     + (f" -- target <= {(TARGET - 1) * 100:.0f}%: "
                        f"{'yes' if r['ratio'] <= TARGET else 'NO'}" if target else ""))
    want = {"zarr": "crc32c", "hdf5": "fletcher32"}
    for r in results:
        if "seconds" not in r:
            lines.append(f"FAILED: {r['what']} {r['format']} checksums "
                         f"{SWITCH[r['checksums_on']]} ({r['failed']} of {len(r['runs'])} runs)")
            continue
        if r["rows"] != expected_rows:
            lines.append(f"ROW COUNT MISMATCH: {r['key']} read {r['rows']:,} rows, the input "
                         f"has {expected_rows:,}")
        exp = want[r["format"]] if r["checksums_on"] else None
        if r["checksums"] != exp:
            lines.append(f"UNEXPECTED: {r['key']}: the store says checksums={r['checksums']!r}, "
                         f"expected {exp!r}")
    return lines


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--rows", type=B.parse_rows, default=None,
                    help=f"rows of the generated input (default {DEFAULT_ROWS:,}: ~1 GiB of "
                         f"raw X at 88 bytes a row)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: {QUICK_ROWS:,} rows (unless --rows)")
    ap.add_argument("--repeat", type=int, default=3, metavar="R",
                    help="runs of each measurement; the median is reported (default 3)")
    ap.add_argument("--formats", default="zarr,hdf5",
                    help="store formats, comma separated (default zarr,hdf5)")
    ap.add_argument("--no-parallel", dest="parallel", action="store_false",
                    help="skip the parallel pass (Runner, dask threads)")
    ap.add_argument("--no-score", dest="score", action="store_false",
                    help="skip the scoring pass (predict over the whole store)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads of the parallel pass (default: all cores)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="ingest's parser threads (n_jobs; default: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=os.path.join(B.cache_dir(), "integrity"),
                    help="the generated input (kept for reruns) and the stores "
                         "(default %(default)s)")
    ap.add_argument("--keep-stores", action="store_true",
                    help="keep the measured stores (default: removed at the end; the input "
                         "file is always kept)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="before each run, wait up to SECONDS for the rest of the machine to "
                         "use < 0.2 cores (default 0: don't wait; the load is reported anyway)")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds per child (default 3600)")
    ap.add_argument("--json", metavar="PATH", help="also write the raw record here")
    a = ap.parse_args(argv)
    if a.child is not None:
        return B.child_main(a.child, JOBS)

    a.rows = a.rows or (QUICK_ROWS if a.quick else DEFAULT_ROWS)
    a.formats = [f.strip() for f in a.formats.split(",") if f.strip()]
    bad = [f for f in a.formats if f not in EXT]
    if bad or not a.formats:
        ap.error(f"--formats: zarr and/or hdf5, not {','.join(bad) or 'nothing'}")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    a.workdir = os.path.abspath(a.workdir)
    os.makedirs(a.workdir, exist_ok=True)

    env = B.run_child({"kind": "env"}, 300)
    bench_run = B.BenchRun(("numpy", "zarr", "h5py", "hdf5plugin", "google-crc32c"),
                        details=f", HDF5 {env.get('hdf5', '?')}, google_crc32c "
                                f"implementation {env.get('google_crc32c', '?')}",
                        more=[f"rows {a.rows:,} x {D} float32 ({a.rows * D * 4 / 2**30:.3f} GiB "
                              f"raw X), repeat {a.repeat}, formats {','.join(a.formats)}, "
                              f"ingest n_jobs {a.jobs or 'all cores'}, workdir {a.workdir}"])

    src = os.path.join(a.workdir, f"{KIND}-{a.rows}-s{a.seed}.svm")
    warmup_src = os.path.join(a.workdir, f"{KIND}-{WARMUP_ROWS}-s{a.seed + 1}.svm")
    stores = {(f, on): os.path.join(a.workdir, f"store-{f}-{SWITCH[on]}.{EXT[f]}")
              for f in a.formats for on in (False, True)}
    warm_stores = {(f, on): os.path.join(a.workdir, f"warmup-{f}-{SWITCH[on]}.{EXT[f]}")
                   for f in a.formats for on in (False, True)}
    a.model = os.path.join(a.workdir, "score.model")
    prep = B.run_child({"kind": "prepare", "src": src, "rows": a.rows, "seed": a.seed,
                        "warmup_src": warmup_src, "model": a.model,
                        "model_rows": warm_stores[a.formats[0], True],
                        "warmup_stores": [[f, on, p] for (f, on), p in warm_stores.items()]})
    if "error" in prep:
        B.log(f"preparing the data failed: {prep['error']}")
        return 2
    inp = prep["input"]
    B.log(f"input {src}: {inp['bytes']:,} bytes; warm-up stores (numba prime) "
          f"{prep['prime_s']:.2f} s; scoring model {prep['model']['support_vectors']} "
          f"support vectors")

    pairs = measurements(a, src, warmup_src, stores, warm_stores)
    runs = {m["key"]: [] for g in pairs for m in g}
    n_ingest = sum(1 for g in pairs if g[0]["what"] == "ingest")
    # ingest first (its last repeat writes the stores the passes read), then the passes
    for phase in (pairs[:n_ingest], pairs[n_ingest:]):
        for rep in range(a.repeat):
            for g in phase:
                for m in (g if rep % 2 == 0 else g[::-1]):     # alternate which goes first
                    runs[m["key"]].append(run_one(m, a, rep))
    results = [summarize(m, runs[m["key"]]) for g in pairs for m in g]
    add_ratios(results)
    sizes, size_info = sizes_table(a, stores, results)

    print("\n".join(bench_run.header))
    print(f"input: {src} ({inp['rows']:,} rows, {inp['bytes']:,} bytes of svmlight text, "
          f"{a.rows * D * 4:,} bytes of raw X)\n")
    print(report_table(results))
    print()
    print(sizes)
    print()
    for line in verdict(results, a.rows):
        print(line)
    print("\nmedian s: median wall seconds of the timed call in a fresh child (imports and a "
          "warm-up excluded); ratio vs off: against the same measurement without checksums "
          "('pass, no finite chk' against 'pass off'); CPU s: user + system, all threads; "
          "peak RSS: the child's ru_maxrss (MB = 1e6 bytes), median; runs s: every run; "
          "bg cores: other load on the machine during the run (median).")
    if a.json:
        bench_run.write(a.json, args=vars(a), env=env, input=inp, prepare=prep,
                      sizes=size_info, results=results)
    if not a.keep_stores:
        for p in list(stores.values()):
            rm(p)
    B.log(f"parent peak RSS {B.peak_rss_bytes() / 2**20:,.0f} MiB")
    return 1 if any("seconds" not in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
