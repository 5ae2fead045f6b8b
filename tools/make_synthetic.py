#!/usr/bin/env python
"""Generate synthetic data into a store or a text file, with bounded memory.

A thin command line over :mod:`streamcvm.data.synthetic`::

    python tools/make_synthetic.py gaussian -n 20000000 -o /tmp/bench/g20m.zarr
    python tools/make_synthetic.py gaussian -n 1000000 -o /tmp/bench/g1m.svm.gz
    python tools/make_synthetic.py gaussian --classes 10 --d 20 -n 1000000 -o /tmp/bench/g10.zarr
    python tools/make_synthetic.py friedman1 -n 1000000 -o /tmp/bench/f1m.csv
    python tools/make_synthetic.py text -n 100000 -o /tmp/bench/t.h5

A text file (svmlight or CSV) is written when ``--text`` is given or when
OUT ends with .svm / .libsvm / .csv / .txt (optionally followed by .gz or
.bz2); otherwise a store (Zarr directory, or HDF5 with ``--format hdf5`` or
an .h5 / .hdf5 name). Rows are generated block by block, so memory stays a
few blocks whatever ``-n`` is. At the end it prints rows, bytes written,
seconds, rows/s and the peak resident memory of the process.
"""
import argparse
import os
import sys
import time

import benchlib as B
from benchlib import path_bytes, peak_rss_bytes

B.use_source_tree()     # run from a checkout without installing

TEXT_EXTS = (".svm", ".libsvm", ".csv", ".txt")
COMP_EXTS = {".gz": "gzip", ".bz2": "bz2"}


def _split_compression(path):
    """(name without .gz/.bz2, compression or None)."""
    low = path.lower()
    for ext, comp in COMP_EXTS.items():
        if low.endswith(ext):
            return path[: -len(ext)], comp
    return path, None


def text_target(path, text=None, compress=None):
    """Decide (is_text, text_format, compression) from the options and the name."""
    base, comp_from_name = _split_compression(path)
    low = base.lower()
    by_name = low.endswith(TEXT_EXTS)
    if text is None and not by_name and compress is None:
        return False, None, None
    fmt = text or ("csv" if low.endswith(".csv") else "svmlight")
    return True, fmt, compress or comp_from_name


def human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.0f} B" if unit == "B" else f"{nbytes:.2f} {unit}"
        nbytes /= 1024.0


def build_parser():
    from streamcvm.data.synthetic import DEFAULT_D, KINDS
    ap = argparse.ArgumentParser(
        prog="make_synthetic.py",
        description="Generate synthetic rows into a streamcvm store or an svmlight/CSV "
                    "text file, chunk by chunk (memory bounded by the block size).")
    ap.add_argument("kind", choices=KINDS, metavar="KIND",
                    help="generator: " + ", ".join(f"{k} (default d={DEFAULT_D[k]})"
                                                   for k in KINDS))
    ap.add_argument("-n", "--rows", type=int, required=True, metavar="ROWS",
                    help="number of rows to generate")
    ap.add_argument("-o", "--output", required=True, metavar="OUT",
                    help="output store (.zarr dir / .h5) or text file "
                         "(.svm/.libsvm/.csv/.txt, optionally .gz/.bz2)")
    ap.add_argument("--d", type=int, default=None, metavar="D",
                    help="number of features (default: the generator's)")
    ap.add_argument("--noise", type=float, default=None, metavar="S",
                    help="the gaussian generator's noise: each row's distance to its blob "
                         "centre has standard deviation about S (default 2: the classes "
                         "overlap; 1 separates them better)")
    ap.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    ap.add_argument("--classes", type=int, default=None, metavar="K",
                    help="number of classes of the gaussian generator (default 2; labels "
                         "0..K-1 when K > 2, -1/+1 when K = 2)")
    ap.add_argument("--flip", type=float, default=0.0, metavar="P",
                    help="flip each two-class label with probability P (label noise; "
                         "default 0): the same seed gives the same rows either way")
    ap.add_argument("--first-block", type=int, default=0, metavar="B",
                    help="start at generator block B (other rows of the same "
                         "distribution, e.g. a test set: 1000000; default 0)")
    ap.add_argument("--chunk-rows", type=int, default=None, metavar="N",
                    help="rows per store chunk (default: about 4 MB of X per chunk)")
    ap.add_argument("--format", dest="store_format", choices=["zarr", "hdf5"], default=None,
                    help="store format (default: hdf5 for .h5/.hdf5 names, else zarr)")
    ap.add_argument("--text", choices=["svmlight", "csv"], default=None,
                    help="write a text file in this format instead of a store "
                         "(default: from the name: .csv -> csv, .svm/.libsvm/.txt -> svmlight)")
    ap.add_argument("--compress", choices=["gzip", "bz2"], default=None,
                    help="compress the text file (default: from a .gz/.bz2 name)")
    ap.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv=None):
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.rows <= 0:
        ap.error("-n must be positive")
    if a.d is not None and a.d <= 0:
        ap.error("--d must be positive")
    if a.chunk_rows is not None and a.chunk_rows <= 0:
        ap.error("--chunk-rows must be positive")
    if not 0 <= a.flip < 0.5:
        ap.error("--flip must be in [0, 0.5)")
    if a.classes is not None and (a.kind != "gaussian" or a.classes < 2):
        ap.error("--classes needs the gaussian generator and K >= 2")
    if a.noise is not None and (a.kind != "gaussian" or not a.noise > 0):
        ap.error("--noise needs the gaussian generator and a positive S")
    if a.flip and a.classes not in (None, 2):
        ap.error("--flip needs two-class labels; --classes gives more")
    if a.flip and a.kind == "friedman1":
        ap.error("--flip needs two-class labels; friedman1 is a regression")
    is_text, text_fmt, comp = text_target(a.output, a.text, a.compress)
    if is_text and (a.store_format or a.chunk_rows):
        ap.error("--format / --chunk-rows apply to stores, not to text output")
    if is_text and text_fmt == "csv" and a.kind == "text":
        ap.error("the text generator is sparse and cannot be written as CSV (use svmlight)")
    if os.path.lexists(a.output) and not a.overwrite:
        print(f"make_synthetic.py: error: {a.output} already exists "
              "(pass --overwrite to replace it)", file=sys.stderr)
        return 1
    parent = os.path.dirname(os.path.abspath(a.output))
    os.makedirs(parent, exist_ok=True)

    from streamcvm.data import synthetic
    extra = {} if a.classes is None else {"n_classes": a.classes}
    if a.noise is not None:
        extra["noise"] = a.noise
    progress = not a.quiet and sys.stderr.isatty()
    t0 = time.perf_counter()
    if is_text:
        what = f"{text_fmt}{' + ' + comp if comp else ''}"
        synthetic.write_text(a.output, a.kind, a.rows, text_format=text_fmt, d=a.d,
                             seed=a.seed, compress=comp, progress=progress,
                             flip=a.flip, first_block=a.first_block, **extra)
    else:
        fmt = a.store_format or ("hdf5" if a.output.lower().endswith((".h5", ".hdf5"))
                                 else "zarr")
        what = f"{fmt} store"
        synthetic.write_store(a.output, a.kind, a.rows, d=a.d, seed=a.seed,
                              chunk_rows=a.chunk_rows, fmt=fmt, overwrite=a.overwrite,
                              progress=progress, flip=a.flip, first_block=a.first_block,
                              **extra)
    dt = time.perf_counter() - t0
    nbytes = path_bytes(a.output)
    rss = peak_rss_bytes()
    d = a.d if a.d is not None else synthetic.DEFAULT_D[a.kind]
    print(f"wrote {a.output} ({what}): {a.kind}, d={d}, seed={a.seed}"
          + (f", {a.classes} classes" if a.classes else ""))
    print(f"rows      {a.rows:,}")
    print(f"bytes     {nbytes:,} ({human(nbytes)}, {nbytes / a.rows:.1f} B/row)")
    print(f"seconds   {dt:.2f}")
    print(f"rows/s    {a.rows / max(dt, 1e-9):,.0f}")
    print(f"MB/s      {nbytes / 1e6 / max(dt, 1e-9):,.1f} (output bytes)")
    print(f"peak RSS  {rss / 2**20:,.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
