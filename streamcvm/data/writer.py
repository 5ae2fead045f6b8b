"""Write a store (format v1, see docs/store-format.md) chunk by chunk.

The store is built under a hidden temporary name next to its destination
(``.NAME.partial-PID``) and renamed into place by :meth:`StoreWriter.close`,
so an interrupted ingest leaves no store. Partial stores of dead processes
are removed by the next writer of the same destination; a killed run never
blocks a rerun.

Memory: at most one chunk of rows (plus one block being appended) is held.
"""
import datetime
import json
import os

import numpy as np

from .atomic import finish, remove, remove_stale, temporary_name, translate_write_errors
from .formats import FORMATS, MANIFEST_KEY
from .store import (ARRAYS_KEY, ATTRS_DIGEST, CHECKSUMS_KEY, CHUNK_CHECKSUM, FORMAT_VERSION,
    MAX_CLASSES, ContentHash, attrs_digest, default_chunk_rows)

NNZ_CHUNK = 1 << 20         # entries per chunk of sparse indices/data


def partial_name(path, pid=None):
    """``.NAME.partial-PID``: where a store is written before it is published."""
    name = temporary_name(path, "partial")
    return name if pid is None else name.rsplit("-", 1)[0] + f"-{pid}"


# ---------------------------------------------------------------------------

class StoreWriter:
    """Append rows to a new store; whole chunks only; atomic on close.

    Parameters
    ----------
    path : destination (a ``.zarr`` directory or an HDF5 file)
    n_features : columns of X (dense stores may grow it, see grow_features)
    sparse : CSR (``indptr``/``indices``/``data``) instead of dense ``X``
    chunk_rows : rows per chunk (default: ~4 MB of X)
    has_qid, has_weight : write ``qid`` / ``weight`` arrays
    fmt : "zarr" (default) or "hdf5"
    overwrite : what the finished store may replace (:func:`streamcvm.data.atomic.publish`):
        False (nothing: a store that appeared meanwhile is not replaced), True
        (anything), or the identity :func:`streamcvm.data.outputs.check_output` saw
        (``Target.replace``: exactly that)
    checksums : a checksum per chunk (Zarr crc32c, HDF5 fletcher32; default);
        False writes the stores of earlier versions (benchmarks, tests)
    """

    def __init__(self, path, n_features, *, sparse=False, chunk_rows=None,
                 has_qid=False, has_weight=False, fmt="zarr", clevel=1,
                 overwrite=False, nnz_per_row=None, checksums=True):
        if fmt not in ("zarr", "hdf5"):
            raise ValueError(f"unknown store format {fmt!r} (zarr or hdf5)")
        if "://" in os.fspath(path):
            raise ValueError(f"{path}: a store is written to a local path, not a URL")
        self.path = os.path.abspath(os.fspath(path))
        if os.path.lexists(self.path) and overwrite is False:
            raise FileExistsError(f"{path}: already exists (pass --overwrite to replace it)")
        remove_stale(self.path, "partial")
        self.tmp = partial_name(self.path)
        remove(self.tmp)
        self.fmt = fmt
        self.overwrite = overwrite
        self.d = int(n_features)
        self.sparse = bool(sparse)
        self.chunk_rows = int(chunk_rows or default_chunk_rows(self.d, sparse, nnz_per_row))
        self.has_qid = has_qid
        self.has_weight = has_weight
        self.checksums = bool(checksums)
        try:
            self._create_arrays(clevel)
        except BaseException:
            self.abort()
            raise
        self.n = 0              # rows written
        self.nnz = 0            # stored entries (sparse) / nonzeros (dense), appended
        self._ip_off = 0        # sparse: entries written so far (indptr offset)
        self._pend = []         # pending row blocks, fewer than chunk_rows rows in all
        self._pend_rows = 0
        self._nnz_pend = []     # sparse: pending (indices, data), < NNZ_CHUNK entries
        self._nnz_pend_n = 0
        self._nnz_written = 0
        self._hash = ContentHash()
        self._classes = {}      # label value -> total count (None once > MAX_CLASSES)
        self._chunk_counts = []
        self._y_min = np.inf
        self._y_max = -np.inf
        self._closed = False

    @translate_write_errors     # a full disk: one line naming the store
    def _create_arrays(self, clevel):
        self._closed = False
        self.be = FORMATS[self.fmt](self.tmp, "w", clevel, checksums=self.checksums)
        cr = self.chunk_rows
        if self.sparse:
            self.a_indptr = self.be.create("indptr", (1,), "int64", (cr,))
            self.a_indptr[0:1] = np.zeros(1, np.int64)
            self.a_indices = self.be.create("indices", (0,), "int32", (NNZ_CHUNK,))
            self.a_data = self.be.create("data", (0,), "float32", (NNZ_CHUNK,))
        else:
            self.a_X = self.be.create("X", (0, self.d), "float32", (cr, max(self.d, 1)))
        self.a_y = self.be.create("y", (0,), "float64", (cr,))
        self.a_qid = self.be.create("qid", (0,), "int64", (cr,)) if self.has_qid else None
        self.a_w = self.be.create("weight", (0,), "float32", (cr,)) if self.has_weight else None

    @property
    def rows_appended(self):
        """Rows appended so far (written or still pending)."""
        return self.n + self._pend_rows

    # -- appending ----------------------------------------------------------
    @translate_write_errors     # a full disk: one line naming the store
    def grow_features(self, d_new):
        """Widen X to ``d_new`` columns (earlier rows read zero there)."""
        if d_new <= self.d:
            return
        if not self.sparse:
            d_old = self.a_X.shape[1]
            self.be.resize(self.a_X, (self.a_X.shape[0], d_new))
            if self.fmt == "zarr" and self.n:
                # write the written rows' new column chunks: a checksummed
                # store has every chunk file (a missing one is damage)
                self.a_X[0:self.n, d_old:d_new] = np.zeros((self.n, d_new - d_old), np.float32)
            self._pend = [(np.pad(b[0], ((0, 0), (0, d_new - b[0].shape[1]))),) + tuple(b[1:])
                          for b in self._pend]
        self.d = int(d_new)

    @translate_write_errors     # a full disk: one line naming the store
    def append(self, X, y, qid=None, weight=None, nnz=None):
        """Append rows. ``X``: float32 [m, d] array, or a CSR triple
        ``(indptr, indices, data)`` with local indptr starting at 0.
        ``nnz``: the nonzeros of a dense block, if the caller knows them."""
        y = np.asarray(y, dtype=np.float64)
        m = len(y)
        if m == 0:
            return
        if self.sparse:
            indptr, indices, data = X
            assert len(indptr) == m + 1
            block = ((np.asarray(indptr, np.int64), np.asarray(indices, np.int32),
                      np.asarray(data, np.float32)), y, qid, weight)
            self.nnz += len(data)
        else:
            X = np.asarray(X, dtype=np.float32)
            if X.shape[1] != self.d:
                if X.shape[1] < self.d:
                    X = np.pad(X, ((0, 0), (0, self.d - X.shape[1])))
                else:
                    raise ValueError("block is wider than the store; call grow_features first")
            block = (X, y, qid, weight)
            self.nnz += int(np.count_nonzero(X)) if nnz is None else int(nnz)
        self._pend.append(block)
        self._pend_rows += m
        if self._pend_rows >= self.chunk_rows:
            self._drain(final=False)

    def _concat_pending(self):
        blocks = self._pend
        y = np.concatenate([b[1] for b in blocks])
        qid = np.concatenate([np.asarray(b[2], np.int64) for b in blocks]) if self.has_qid else None
        w = np.concatenate([np.asarray(b[3], np.float32) for b in blocks]) if self.has_weight else None
        if self.sparse:
            offs = 0
            ips = []
            for (ip, _, _), *_ in blocks:
                ips.append(ip[1:] + offs if ips else ip + offs)
                offs += ip[-1]
            X = (np.concatenate(ips), np.concatenate([b[0][1] for b in blocks]),
                 np.concatenate([b[0][2] for b in blocks]))
        else:
            X = np.concatenate([b[0] for b in blocks]) if len(blocks) > 1 else blocks[0][0]
        return X, y, qid, w

    def _drain(self, final):
        if not self._pend:
            return
        X, y, qid, w = self._concat_pending()
        rows = len(y)
        cr = self.chunk_rows
        take = rows if final else (rows // cr) * cr
        for s in range(0, take, cr):
            e = min(s + cr, take)
            if self.sparse:
                ip = X[0][s:e + 1]
                self._write_chunk(ip, X[1][ip[0]:ip[-1]], X[2][ip[0]:ip[-1]], y[s:e],
                                  None if qid is None else qid[s:e],
                                  None if w is None else w[s:e])
            else:
                self._write_chunk(X[s:e], None, None, y[s:e],
                                  None if qid is None else qid[s:e],
                                  None if w is None else w[s:e])
        if take < rows:
            if self.sparse:
                ip = X[0][take:]
                rest = ((ip - ip[0]), X[1][ip[0]:ip[-1]], X[2][ip[0]:ip[-1]])
            else:
                rest = X[take:]
            self._pend = [(rest, y[take:], None if qid is None else qid[take:],
                           None if w is None else w[take:])]
        else:
            self._pend = []
        self._pend_rows = rows - take

    def _write_chunk(self, X, indices, data, y, qid, w):
        m = len(y)
        a, b = self.n, self.n + m
        h = self._hash
        if self.sparse:
            ip = X - X[0] + self._ip_off
            self._reserve(self.a_indptr, b + 1)
            self.a_indptr[a + 1:b + 1] = ip[1:]
            self._append_nnz(indices, data)
            if self.n == 0:
                h.update("indptr", np.zeros(1, np.int64))
            h.update("indptr", ip[1:])
            h.update("indices", indices)
            h.update("data", data)
            self._ip_off = int(ip[-1])
        else:
            self._reserve(self.a_X, b)
            self.a_X[a:b] = X
            h.update("X", X)
        self._reserve(self.a_y, b)
        self.a_y[a:b] = y
        h.update("y", y)
        if self.a_qid is not None:
            self._reserve(self.a_qid, b)
            self.a_qid[a:b] = qid
            h.update("qid", qid)
        if self.a_w is not None:
            self._reserve(self.a_w, b)
            self.a_w[a:b] = w
            h.update("weight", w)
        self._count_labels(y)
        self.n = b

    def _reserve(self, arr, rows):
        """Make ``arr`` at least ``rows`` long, growing geometrically (each
        resize rewrites metadata); close() trims to the exact size."""
        cap = arr.shape[0]
        if cap >= rows:
            return
        step = arr.chunks[0]
        new = max(rows, 2 * cap)
        new = -(-new // step) * step
        self.be.resize(arr, (new,) + tuple(arr.shape[1:]))

    def _trim(self):
        exact = [(self.a_y, self.n), (self.a_qid, self.n), (self.a_w, self.n)]
        if self.sparse:
            exact += [(self.a_indptr, self.n + 1), (self.a_indices, self._nnz_written),
                      (self.a_data, self._nnz_written)]
        else:
            exact.append((self.a_X, self.n))
        for arr, rows in exact:
            if arr is not None and arr.shape[0] != rows:
                self.be.resize(arr, (rows,) + tuple(arr.shape[1:]))

    def _append_nnz(self, indices, data):
        self._nnz_pend.append((indices, data))
        self._nnz_pend_n += len(data)
        if self._nnz_pend_n >= NNZ_CHUNK:
            self._drain_nnz(final=False)

    def _drain_nnz(self, final):
        if not self._nnz_pend:
            return
        ind = np.concatenate([p[0] for p in self._nnz_pend])
        dat = np.concatenate([p[1] for p in self._nnz_pend])
        take = len(dat) if final else (len(dat) // NNZ_CHUNK) * NNZ_CHUNK
        if take:
            a, b = self._nnz_written, self._nnz_written + take
            self._reserve(self.a_indices, b)
            self._reserve(self.a_data, b)
            self.a_indices[a:b] = ind[:take]
            self.a_data[a:b] = dat[:take]
            self._nnz_written = b
        self._nnz_pend = [(ind[take:], dat[take:])] if take < len(dat) else []
        self._nnz_pend_n = len(dat) - take

    def _count_labels(self, y):
        finite = y[np.isfinite(y)]
        if len(finite):
            self._y_min = min(self._y_min, float(finite.min()))
            self._y_max = max(self._y_max, float(finite.max()))
        if self._classes is None:
            return
        vals, counts = np.unique(finite, return_counts=True)
        cc = {}
        for v, c in zip(vals.tolist(), counts.tolist()):
            cc[v] = c
            self._classes[v] = self._classes.get(v, 0) + c
        if len(self._classes) > MAX_CLASSES:
            self._classes = None
            self._chunk_counts = None
            return
        self._chunk_counts.append(cc)

    # -- finishing ----------------------------------------------------------
    @property
    def label_values(self):
        """The distinct finite label values so far, sorted (None beyond
        MAX_CLASSES of them)."""
        return None if self._classes is None else sorted(self._classes)

    @translate_write_errors     # a full disk: one line naming the store
    def close(self, attrs=None):
        """Flush, write attributes, rename into place; returns the path."""
        self._drain(final=True)
        if self.sparse:
            self._drain_nnz(final=True)
        self._trim()
        n_chunks = -(-self.n // self.chunk_rows)
        meta = {
            "streamcvm_format": FORMAT_VERSION,
            "n": int(self.n),
            "d": int(self.d),
            "sparse": self.sparse,
            "nnz": int(self.nnz),
            "chunk_rows": int(self.chunk_rows),
            "n_chunks": int(n_chunks),
            "has_qid": bool(self.has_qid),
            "has_weight": bool(self.has_weight),
            "y_min": None if self.n == 0 or not np.isfinite(self._y_min) else self._y_min,
            "y_max": None if self.n == 0 or not np.isfinite(self._y_max) else self._y_max,
            "classes": None,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        if self._classes:
            classes = sorted(self._classes)
            col = {v: k for k, v in enumerate(classes)}
            counts = np.zeros((n_chunks, len(classes)), np.int64)
            for i, cc in enumerate(self._chunk_counts):
                for v, c in cc.items():
                    counts[i, col[v]] = c
            meta["classes"] = [float(c) for c in classes]
            meta["class_totals"] = [int(self._classes[c]) for c in classes]
            cca = self.be.create("class_counts", counts.shape, "int64",
                                 (max(n_chunks, 1), max(len(classes), 1)))
            cca[...] = counts
        meta.update(attrs or {})
        meta.setdefault("fingerprint", self._hash.hexdigest())
        meta = json.loads(json.dumps(meta))         # as a reader will see them
        if self.checksums:      # bound to the arrays' codecs by the digest (DiskStore)
            meta[CHECKSUMS_KEY] = CHUNK_CHECKSUM[self.fmt]
            # what the arrays are (dtype, shape, chunks, codecs) and which chunk
            # is where, under the digest too: metadata edited to read the bytes
            # as another type, or a chunk copied over another, is damage
            names = [n for n, a in (("X", getattr(self, "a_X", None)),
                                    ("indptr", getattr(self, "a_indptr", None)),
                                    ("indices", getattr(self, "a_indices", None)),
                                    ("data", getattr(self, "a_data", None)),
                                    ("y", self.a_y), ("qid", self.a_qid),
                                    ("weight", self.a_w)) if a is not None]
            if self._classes:
                names.append("class_counts")
            meta[ARRAYS_KEY] = json.loads(json.dumps({n: self.be.layout(n) for n in names}))
            manifest = self.be.manifest()
            if manifest is not None:
                meta[MANIFEST_KEY] = manifest
        meta[ATTRS_DIGEST] = attrs_digest(meta)
        self.be.set_attrs(meta)
        self.be.finish()
        self._publish()
        self._closed = True
        return self.path

    def _publish(self):
        finish(self.tmp, self.path, self.overwrite)

    def abort(self):
        if self._closed:
            return
        self._closed = True
        try:
            f = getattr(getattr(self, "be", None), "file", None)
            if f is not None:
                f.close()
        except Exception:
            pass
        remove(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        return False
