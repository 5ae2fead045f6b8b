"""ingest(): text files in, one store out, with memory bounded by the block size.

Flow, per input file::

    reader thread:  read + decompress + hash  ->  blocks of whole lines
    worker threads: numba parse of each block (in parallel, GIL released)
    this thread:    in-order results -> checks -> StoreWriter (whole chunks)

At most ``2 * n_jobs + 2`` blocks are in flight, so peak memory is a few
blocks plus one chunk, whatever the size of the input. Parse tasks go to
a ``concurrent.futures``-style executor: local threads by default, or a
``dask.distributed`` Client passed as ``executor`` (same ``submit`` API).
"""
from __future__ import annotations

import glob
import os
import queue
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcvm.data.writer import StoreWriter

from . import _parse as P
from .errors import IngestError, describe
from .sniff import SPARSE_DENSITY, CsvLayout, is_number, sniff_format
from .sources import Source

if TYPE_CHECKING:
    from collections.abc import Sequence
    from concurrent.futures import Executor
    from typing import Literal, TypeAlias

    from distributed import Client

    _Path: TypeAlias = str | os.PathLike[str]


def _parse_svmlight_task(block, zero_based, limit, allow_nan, qid_mode):
    buf = np.frombuffer(block, dtype=np.uint8)
    out = P.parse_svmlight(buf, zero_based, limit, allow_nan, qid_mode,
                           *P.svmlight_bounds(len(buf)))
    if out[9] == P.E_FULL:
        out = P.parse_svmlight(buf, zero_based, limit, allow_nan, qid_mode,
                               *P.svmlight_bounds(len(buf), exact=True))
    (n, labels, qids, indptr, indices, data, max_col, n_lines, qid_rows,
     err, err_line, err_pos) = out
    nnz = indptr[n] if err == P.OK else 0
    # exact-size copies: the capacity guesses are freed here, not held by
    # views while the block waits for the writer
    return dict(n=n, y=labels[:n].copy(), qid=qids[:n].copy(), indptr=indptr[:n + 1].copy(),
                indices=indices[:nnz].copy(), data=data[:nnz].copy(), max_col=max_col,
                n_lines=n_lines, qid_rows=qid_rows,
                err=err, err_line=err_line, err_pos=err_pos, err_field=None)


def _parse_csv_task(block, delim, roles, d, label_text, allow_nan, decimal=46):
    buf = np.frombuffer(block, dtype=np.uint8)
    out = P.parse_csv(buf, delim, roles, d, label_text, allow_nan,
                      P.csv_bound(len(buf), len(roles)), decimal)
    if out[9] == P.E_FULL:
        out = P.parse_csv(buf, delim, roles, d, label_text, allow_nan,
                          P.csv_bound(len(buf), len(roles), exact=True), decimal)
    (n, X, labels, lhash, lspan, qids, weights, nz, n_lines, err, err_line, err_pos,
     err_field) = out
    return dict(n=n, X=X[:n, :d].copy(), y=labels[:n].copy(), label_hash=lhash[:n].copy(),
                label_span=lspan[:n].copy(), qid=qids[:n].copy(), weight=weights[:n].copy(),
                nnz=int(nz), n_lines=n_lines,
                err=err, err_line=err_line, err_pos=err_pos, err_field=err_field)


# the parse kernels each input format needs
_KERNELS = {"svmlight": ("parse_svmlight", "csr_to_dense"), "csv": ("parse_csv",)}
_warm: set[str] = set()


def warm_up(fmt=None):
    """Compile (or load from numba's cache) the parse kernels of ``fmt``
    ("svmlight", "csv"; None: both) for exactly the argument types ingest()
    passes."""
    if fmt in (None, "svmlight"):
        res = _parse_svmlight_task(b"1 1:1 2:0.5\n", False, -1, False, -1)
        P.csr_to_dense(res["indptr"], res["indices"], res["data"], 2)
    if fmt in (None, "csv"):
        _parse_csv_task(b"1,2\n", 44, np.array([P.ROLE_LABEL, 0], np.int64), 1, False, False,
                        46)


def _cache_folder():
    """Where numba keeps the parse kernels' compiled code: beside the sources,
    or NUMBA_CACHE_DIR, or the folder streamcvm moved it to."""
    try:
        return P.parse_csv._cache.cache_path
    except AttributeError:      # a numba without this attribute: beside the sources
        return os.path.join(os.path.dirname(os.path.abspath(P.__file__)), "__pycache__")


def _ensure_compiled(fmt):
    """On a cold numba cache, compile ``fmt``'s parse kernels in a child
    process: LLVM keeps what it used for compiling, which would add ~70 MB to
    this ingest's peak RSS. Only the kernels the format needs (a first ingest
    waits for those alone)."""
    if fmt in _warm:
        return
    _warm.add(fmt)
    cache = _cache_folder()
    if all(glob.glob(os.path.join(cache, f"_parse.{k}-*.nbi")) for k in _KERNELS[fmt]):
        return
    os.makedirs(cache, exist_ok=True)
    if not os.access(cache, os.W_OK):
        return      # nowhere to cache: compile here, as numba would anyway
    import streamcvm        # the child imports this same streamcvm: its folder first
    here = os.path.dirname(os.path.dirname(os.path.abspath(streamcvm.__file__)))
    try:
        subprocess.run([sys.executable, "-c",
                        f"import streamcvm.ingest.pipeline as p; p.warm_up({fmt!r})"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           [here] + [p for p in os.environ.get("PYTHONPATH", "").split(
                               os.pathsep) if p])})
    except OSError:     # no child process here (a sandbox): compile in this one
        pass


def _produce(src, skip_lines, submit, out_q, stop):
    """Reader thread: read blocks, submit parse tasks, queue (future, block)."""
    try:
        for block in src.blocks():
            while skip_lines and block:
                # drop the header (and blank lines before it)
                cut = block.find(b"\n")
                block = block[cut + 1:]
                skip_lines -= 1
            if not block:
                continue
            fut = submit(block)
            while True:
                if stop.is_set():
                    return
                try:
                    out_q.put((fut, block, src.raw_bytes_read), timeout=0.1)
                    break
                except queue.Full:
                    continue
        out_q.put(None)
    except BaseException as e:  # noqa: BLE001 - handed to the consumer
        out_q.put(e)


# ---------------------------------------------------------------------------

class _Progress:
    def __init__(self, total_bytes, enabled):
        self.bar = None
        self.rows = 0
        self.t0 = time.perf_counter()
        if enabled:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024,
                            desc="ingest", dynamic_ncols=True, smoothing=0.1)
        self.done_bytes = 0

    def update(self, abs_bytes, rows):
        self.rows += rows
        if self.bar is None:
            return
        delta = abs_bytes - self.done_bytes
        if delta > 0:
            self.bar.update(delta)
            self.done_bytes = abs_bytes
        dt = max(time.perf_counter() - self.t0, 1e-9)
        self.bar.set_postfix_str(f"{self.rows:,} rows, {self.rows / dt:,.0f} rows/s", refresh=False)

    def set_file(self, name):
        if self.bar is not None:
            self.bar.set_description(f"ingest {os.path.basename(name)}")

    def close(self):
        if self.bar is not None:
            self.bar.close()


def ingest(sources: _Path | Sequence[_Path], out: _Path, *,
           store_format: Literal["zarr", "hdf5"] | None = None,
           sparse: Literal["auto"] | bool = "auto", zero_based: bool = False,
           n_features: int | None = None, chunk_rows: int | None = None,
           input_format: Literal["auto", "svmlight", "csv"] = "auto",
           delimiter: str | None = None, header: Literal["auto"] | bool = "auto",
           label_col: Literal["auto"] | int | str | None = "auto",
           qid_col: int | str | None = None, weight_col: int | str | None = None,
           skip_cols: Sequence[int | str] | None = None, allow_nan: bool = False,
           decimal: Literal[".", ","] = ".", overwrite: bool = False, progress: bool = False,
           n_jobs: int | None = None, block_size: int = 4 << 20, clevel: int = 1,
           executor: Executor | Client | None = None, checksums: bool = True
           ) -> dict[str, Any]:
    """Ingest svmlight/LIBSVM or delimited text files into one store.

    The parameters mirror ``streamcvm ingest`` (see its ``--help``). The
    files (plain, .gz or .bz2) are read in blocks of whole lines, parsed on
    ``n_jobs`` threads and written in whole chunks, so memory stays at a few
    blocks plus one chunk whatever the size of the input. On bad input no
    store is left behind.

    Parameters
    ----------
    sources : str or os.PathLike, or a sequence of them
        The input files, appended in order.
    out : str or os.PathLike
        The store to create: a Zarr directory, or an HDF5 file.
    store_format : {"zarr", "hdf5"}, optional
        None (default): "hdf5" for an ``out`` ending in .h5 or .hdf5, else
        "zarr".
    sparse : "auto" or bool, default "auto"
        Store X as CSR (True) or dense (False). "auto": dense for CSV; for
        svmlight, dense if the first block is at least 25% nonzero.
    zero_based : bool, default False
        svmlight feature indices start at 0 (default: at 1, as LIBSVM).
    n_features : int, optional
        The number of features; a larger svmlight index is an error. None:
        the largest index found.
    chunk_rows : int, optional
        Rows per chunk. None: about 4 MB of X per chunk.
    input_format : {"auto", "svmlight", "csv"}, default "auto"
        "auto": detected from the first lines of each file.
    delimiter : str, optional
        CSV delimiter: one character, "tab", or "space" (runs of blanks).
        None: detected.
    header : "auto" or bool, default "auto"
        Whether the first CSV line is a header. "auto": detected.
    label_col : "auto", int, str or None, default "auto"
        The CSV label column: an index (negative counts from the end), a
        header name, or None (unlabelled rows). "auto": the column a header
        names label, class, target or y, else column 0.
    qid_col : int or str, optional
        The CSV query-id column (index or header name). None: no query ids.
    weight_col : int or str, optional
        The CSV sample-weight column (index or header name). None: no
        weights.
    skip_cols : sequence of int or str, optional
        CSV columns to ignore (indices or header names).
    allow_nan : bool, default False
        Accept NaN and inf values, and empty CSV fields as NaN, into the
        store; training and prediction refuse a store while it holds any.
    decimal : {".", ","}, default "."
        The decimal mark of CSV numbers ("," needs a delimiter other than
        ",").
    overwrite : bool, default False
        Replace an existing store or other output at ``out`` (an input
        file, or a folder of other files, is never replaced).
    progress : bool, default False
        Show a progress bar.
    n_jobs : int, optional
        Parser threads. None: every core.
    block_size : int, default 4 MiB
        Bytes of text per parse task (whole lines).
    clevel : int, default 1
        Zstd compression level of the chunks.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Where the parse tasks run (anything with ``submit``). None: a pool of
        ``n_jobs`` local threads.
    checksums : bool, default True
        False writes chunks without their checksums, as stores of earlier
        versions were (for benchmarks of their cost).

    Returns
    -------
    dict
        A summary: ``path`` (the store), ``n``, ``d``, ``sparse``, ``nnz``,
        ``chunk_rows``, ``seconds``, ``label`` (the label column found and
        its header) and ``warnings`` (the messages also issued as
        :class:`IngestWarning`).

    Raises
    ------
    IngestError
        Bad input or an output that may not be written, in one line
        (``file:line: what``).
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    if not sources:
        raise IngestError(out, "no input files")
    if sparse not in ("auto", True, False):
        raise ValueError("sparse must be 'auto', True or False")
    if store_format is None:
        store_format = "hdf5" if os.fspath(out).lower().endswith((".h5", ".hdf5")) else "zarr"
    _refuse_repeats(sources)
    srcs = [Source(p, block_size=block_size) for p in sources]
    from streamcvm.data.outputs import OutputError, check_output
    try:        # before any work: never over an input, a folder of other files ...
        overwrite = check_output(out, what="store", inputs=sources,
                                 overwrite=overwrite).replace
    except OutputError as e:
        raise IngestError(out, _output_reason(out, e.reason)) from None
    n_jobs = n_jobs or os.cpu_count() or 1
    own_pool = executor is None
    pool = ThreadPoolExecutor(max_workers=n_jobs, thread_name_prefix="parse") if own_pool else executor
    prog = _Progress(sum(s.size for s in srcs), progress)
    st = _State(out, store_format, sparse, zero_based, n_features, chunk_rows,
                allow_nan, overwrite, clevel)
    st.checksums = checksums
    try:
        for src in srcs:
            _ingest_one(src, st, pool, n_jobs, prog, input_format, delimiter, header,
                        label_col, qid_col, weight_col, skip_cols, decimal)
        if st.writer is None or st.writer.rows_appended == 0:
            raise IngestError(srcs[0].path if len(srcs) == 1 else out,
                              "empty input (no data rows)")
        attrs = {
            "label_kind": "none" if st.unlabeled else "text" if st.label_text else "numeric",
            "label_names": st.label_names if st.label_text else None,
            "feature_names": st.feature_names,
            "sources": st.source_meta,
            "ingest_options": {"zero_based": bool(zero_based), "allow_nan": bool(allow_nan),
                               "decimal": decimal,
                               "label_col": label_col, "label": st.label_info,
                               "qid_col": qid_col,
                               "weight_col": weight_col},
        }
        from streamcvm import __version__
        attrs["created_by"] = f"streamcvm {__version__}"
        path = st.writer.close(attrs)       # (counts the last chunk's labels)
        if label_col == "auto" and st.label_info["column"] not in (None, "svmlight") \
                and not st.label_text:
            st.warnings += _label_doubt(st.writer.label_values, describe_label(st.label_info))
    except BaseException:
        if st.writer is not None:
            st.writer.abort()
        raise
    finally:
        prog.close()
        if own_pool:        # (pool: the ThreadPoolExecutor made above, not ``executor``)
            pool.shutdown(wait=True, cancel_futures=True)  # type: ignore[union-attr, call-arg]
    w = st.writer
    for msg in st.warnings:
        warnings.warn(msg, IngestWarning, stacklevel=2)
    return {"path": path, "n": w.n, "d": w.d, "sparse": w.sparse, "nnz": w.nnz,
            "chunk_rows": w.chunk_rows, "seconds": time.perf_counter() - prog.t0,
            "label": st.label_info, "warnings": list(st.warnings)}


def _output_reason(out, reason):
    """Why ``out`` is refused, in ingest's words: an existing streamcvm store
    is a store, and ``--overwrite`` replaces it."""
    if reason.startswith("already exists"):
        from streamcvm.data.outputs import streamcvm_kind
        kind = streamcvm_kind(out)
        held = f"a streamcvm {kind}" if kind else "a file"
        return f"already exists (pass --overwrite to replace it): {held}"
    return reason


def _refuse_repeats(sources):
    """The same input file twice would store every row of it twice: refused
    (one file named by two paths, a link, too)."""
    seen = {}
    for p in sources:
        p = os.fspath(p)
        try:
            st = os.stat(p)
        except OSError:
            continue            # Source reports a missing file, with its name
        key = (st.st_dev, st.st_ino)
        if key in seen:
            same = "" if seen[key] == p else f" (as {seen[key]})"
            raise IngestError(p, f"given twice{same}: its rows would be stored twice")
        seen[key] = p


class IngestWarning(UserWarning):
    """A guess of ingest's that may be wrong (the label column, the header)."""


def describe_label(info):
    """'column 2 ('label', by its header name)' and the like, for summaries."""
    if info is None:
        return "none"
    col = info["column"]
    if col == "svmlight":
        return "the first field (svmlight)"
    if col is None:
        return "none (--label-col none)"
    name = f"{info['name']!r}" if info.get("name") else ""
    how = ", by its header name" if info.get("by_name") else ""
    return f"column {col}" + (f" ({name}{how})" if name else "")


def _label_doubt(values, desc):
    """A warning when a guessed label column looks like a continuous target."""
    hint = ("a regression target? (train it with --task regression; another column "
            "is --label-col)")
    if values is None:
        return [f"label {desc}: more than 1,000 distinct values: {hint}"]
    v = np.asarray(values, np.float64)
    if len(v) > 10 and np.any(v != np.round(v)):
        return [f"label {desc}: {len(v):,} distinct values, not all integers: {hint}"]
    return []


class _State:
    """What carries over between input files of one ingest."""

    def __init__(self, out, store_format, sparse, zero_based, n_features, chunk_rows,
                 allow_nan, overwrite, clevel):
        self.out = out
        self.store_format = store_format
        self.sparse = sparse
        self.zero_based = bool(zero_based)
        self.n_features = n_features
        self.chunk_rows = chunk_rows
        self.allow_nan = bool(allow_nan)
        self.overwrite = overwrite
        self.clevel = clevel
        self.writer = None
        self.d_fixed = n_features      # set by --n-features or by a CSV input
        self.d_fixed_by = "--n-features" if n_features is not None else None
        self.has_qid = None
        self.has_weight = None
        self.label_text = None
        self.unlabeled = False         # a CSV read with --label-col none
        self.label_codes = {}          # text labels: hash -> code
        self.label_names = []
        self.feature_names = None
        self.source_meta = []
        self.label_info = None         # the first input's label column and header
        self.warnings = []
        self.checksums = True

    def open_writer(self, d, sparse, has_qid, has_weight, nnz_per_row):
        self.has_qid, self.has_weight = has_qid, has_weight
        self.writer = StoreWriter(self.out, d, sparse=sparse, chunk_rows=self.chunk_rows,
                                  has_qid=has_qid, has_weight=has_weight,
                                  fmt=self.store_format, clevel=self.clevel,
                                  overwrite=self.overwrite, nnz_per_row=nnz_per_row,
                                  checksums=self.checksums)


def _ingest_one(src, st, pool, n_jobs, prog, input_format, delimiter, header, label_col,
                qid_col, weight_col, skip_cols, decimal="."):
    path = src.path
    prog.set_file(path)
    if input_format not in ("auto", "svmlight", "csv"):
        raise IngestError(path, f"unknown input format {input_format!r} (svmlight or csv)")
    head = None
    if input_format != "svmlight":
        # only what is not given is sniffed: the format from whole lines, and
        # a CSV's delimiter, header and columns from its first two or three
        head = src.head(lines=2 if input_format == "csv" and header != "auto" else 3)
        if not head.strip():
            raise IngestError(path, "empty input (no data rows)")
    fmt = sniff_format(head) if input_format == "auto" else input_format
    _ensure_compiled(fmt)
    layout = None
    if fmt == "csv":
        layout = CsvLayout(src, head, delimiter=delimiter, header=header,
                            label_col=label_col, qid_col=qid_col, weight_col=weight_col,
                            skip_cols=skip_cols, decimal=decimal)
        if st.d_fixed is not None and layout.d != st.d_fixed:
            raise IngestError(path, f"{layout.d} feature columns, but {st.d_fixed_by} "
                              f"gives {st.d_fixed} (inconsistent feature counts)")
        if st.writer is not None and layout.d != st.writer.d:
            raise IngestError(path, f"{layout.d} feature columns, but the inputs before it "
                              f"have {st.writer.d} features (inconsistent feature counts)")
        if st.d_fixed is None:
            st.d_fixed, st.d_fixed_by = layout.d, os.path.basename(path)
        if st.feature_names is None:
            st.feature_names = layout.feature_names
        text = layout.label_text
        st.warnings += layout.warnings
        if st.label_info is None:
            lc = layout.label_col
            st.label_info = {"column": lc, "header": layout.header,
                             "name": layout.names[lc] if layout.names and lc is not None
                             else None, "by_name": layout.label_by_name}
    else:
        text = False
        if st.label_info is None:
            st.label_info = {"column": "svmlight", "header": None, "name": None,
                             "by_name": False}
    if st.label_text is None:
        st.label_text = text
    elif st.label_text != text:
        raise IngestError(path, "labels are " + ("text" if text else "numeric") +
                          " here but " + ("text" if st.label_text else "numeric") +
                          " in the inputs before")

    # Tasks are module-level functions of plain arguments, so an executor may
    # ship them to other processes (a dask.distributed Client).
    if fmt == "svmlight":
        limit = -1 if st.d_fixed is None else int(st.d_fixed)
        svm_args = (st.zero_based, limit, st.allow_nan)
    else:
        csv_args = (layout.delim_byte, layout.roles, layout.d, layout.label_text, st.allow_nan,
                    layout.decimal_byte)

    # The first svmlight block is parsed alone: its first row fixes whether
    # every row carries a qid, which the parallel blocks then enforce.
    stop = threading.Event()
    out_q = queue.Queue(maxsize=n_jobs + 2)
    qmode = [-1 if st.has_qid is None else int(st.has_qid), st.has_qid is not None]

    def submit(block):
        if fmt == "csv":
            return pool.submit(_parse_csv_task, block, *csv_args)
        if not qmode[1]:
            res = _parse_svmlight_task(block, *svm_args, qmode[0])
            if res["n"]:
                qmode[0], qmode[1] = (1 if res["qid_rows"] else 0), True
            return _Done(res)
        return pool.submit(_parse_svmlight_task, block, *svm_args, qmode[0])

    reader = threading.Thread(target=_produce, daemon=True,
                              args=(src, layout.header_lines if layout is not None else 0,
                                    submit, out_q, stop))
    reader.start()
    line0 = 1 + (layout.header_lines if layout is not None else 0)
    rows_here = 0
    try:
        while True:
            item = out_q.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                if isinstance(item, IngestError) and item.line is None and rows_here:
                    raise IngestError(path, f"{item.message} (after line {line0 - 1})")
                raise item
            fut, block, nbytes = item
            res = fut.result()
            if res["err"] != P.OK:
                buf = np.frombuffer(block, dtype=np.uint8)
                msg = describe(res["err"], buf, res["err_pos"], res["err_field"], fmt,
                               st.d_fixed)
                hint = _decimal_hint(buf, res["err_pos"], layout) if fmt == "csv" and \
                    res["err"] == P.E_NUMBER else ""
                msg += hint
                if fmt == "csv" and res["err"] == P.E_NUMBER and not hint and \
                        res["err_field"] == layout.label_col and not layout.label_text:
                    msg = (f"the label {msg.split(': ', 1)[-1].split(' is not')[0]} is "
                           f"text, but the labels before it are numbers: {MIXED_LABELS}")
                raise IngestError(path, msg, line=line0 + res["err_line"])
            n = res["n"]
            if n:
                _append(res, fmt, layout, st, path, line0, block)
            rows_here += n
            line0 += res["n_lines"]
            prog.update(nbytes, n)
    finally:
        stop.set()
        # unblock and join the reader so no thread outlives the ingest
        while reader.is_alive():
            try:
                out_q.get(timeout=0.05)
            except queue.Empty:
                pass
        reader.join()
    if rows_here == 0:
        raise IngestError(path, "empty input (no data rows)")
    st.source_meta.append({"path": path, "bytes": src.size, "compression": src.compression,
                           "format": fmt, "rows": rows_here, "xxh3_128": src.digest()})


def _decimal_hint(buf, pos, layout):
    """' (decimal commas? pass --decimal ,)' when the bad field is digits, a
    comma and digits in a file whose delimiter is not a comma."""
    if layout.delim_byte == 44 or layout.decimal_byte == 44:
        return ""
    k = pos + (pos < len(buf) and buf[pos] in (43, 45))
    j = k
    while j < len(buf) and 48 <= buf[j] <= 57:
        j += 1
    if j > k and j + 1 < len(buf) and buf[j] == 44 and 48 <= buf[j + 1] <= 57:
        return " (decimal commas? pass --decimal ,)"
    return ""


class _Done:
    """A finished result with the Future interface."""

    def __init__(self, value):
        self._v = value

    def result(self):
        return self._v


def _append(res, fmt, layout, st, path, line0, block):
    n = res["n"]
    if fmt == "svmlight":
        has_qid = res["qid_rows"] > 0
        if st.writer is None:
            d = int(res["max_col"]) + 1 if st.d_fixed is None else int(st.d_fixed)
            sparse = st.sparse
            nnz = len(res["data"])
            if sparse == "auto":
                sparse = nnz / max(n * max(d, 1), 1) < SPARSE_DENSITY
            st.open_writer(max(d, 1) if not sparse else d, sparse, has_qid, False, nnz / n)
        elif has_qid != st.has_qid:
            raise IngestError(path, "qid on some rows but not on others "
                              "(every row needs one, or none)", line=line0)
        w = st.writer
        if res["max_col"] + 1 > w.d:
            w.grow_features(int(res["max_col"]) + 1)
        X = (res["indptr"], res["indices"], res["data"]) if w.sparse else \
            P.csr_to_dense(res["indptr"], res["indices"], res["data"], w.d)
        w.append(X, res["y"], res["qid"] if w.has_qid else None,
                 np.ones(n, np.float32) if w.has_weight else None, nnz=len(res["data"]))
        return
    # csv
    X = res["X"]
    if st.writer is None:
        sparse = st.sparse
        if sparse == "auto":
            sparse = False
        nnz_row = float(np.count_nonzero(X)) / n if sparse else None
        st.open_writer(layout.d, sparse, layout.has_qid, layout.has_weight, nnz_row)
    w = st.writer
    if layout.has_qid != w.has_qid or layout.has_weight != w.has_weight:
        raise IngestError(path, "qid/weight columns differ from the inputs before")
    if layout.label_col is None:
        st.unlabeled = True
        y = np.full(n, np.nan)
    elif layout.label_text:
        y = _encode_text_labels(res, st, block, path, line0)
    else:
        y = res["y"]
    if w.sparse:
        nz = X != 0
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(nz.sum(axis=1), out=indptr[1:])
        Xw = (indptr, np.nonzero(nz)[1].astype(np.int32), X[nz])
    else:
        Xw = X
    w.append(Xw, y, res["qid"] if w.has_qid else None, res["weight"] if w.has_weight else None,
             nnz=res["nnz"])


MIXED_LABELS = ("mixed text and number labels are refused (1 and 1.0 would be two "
                "classes as text, one as numbers); make the label column all text or all "
                "numbers")


def _encode_text_labels(res, st, block, path, line0):
    h = res["label_hash"]
    uniq, first, inv = np.unique(h, return_index=True, return_inverse=True)
    codes = np.empty(len(uniq), np.float64)
    for k, (hv, fi) in enumerate(zip(uniq.tolist(), first.tolist())):
        a, b = res["label_span"][fi]
        name = block[a:b].decode("utf-8", "replace")
        code = st.label_codes.get(hv)
        if code is None and is_number(name.strip().strip('"')):
            raise IngestError(path, f"the label {name!r} is a number, but the labels before "
                              f"it are text: {MIXED_LABELS}",
                              line=line0 + block.count(b"\n", 0, a))
        if code is None:
            code = len(st.label_names)
            st.label_codes[hv] = code
            st.label_names.append(name)
        elif st.label_names[code] != name:
            raise IngestError(path, f"label hash collision between {name!r} and "
                              f"{st.label_names[code]!r}")
        codes[k] = code
    return codes[inv.ravel()]
