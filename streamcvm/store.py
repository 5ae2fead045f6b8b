"""Stores: one interface over on-disk stores (Zarr, HDF5) and in-memory arrays.

A store is a sequence of row chunks. ``chunk(i)`` returns a :class:`Chunk`
``(X, y, qid, weight)`` with ``X`` a float32 ndarray or a scipy CSR matrix;
nothing ever reads more than one chunk at a time unless asked to. The same
interface wraps numpy/scipy arrays (:class:`ArrayStore`) without copying, so
every solver runs on either. The on-disk layout is docs/store-format.md.
"""
import os
from typing import NamedTuple, Optional

import numpy as np
import xxhash

FORMAT_VERSION = 1
MAX_CLASSES = 1000          # more distinct labels than this: a regression target
TARGET_CHUNK_BYTES = 4 << 20


def default_chunk_rows(n_features, sparse=False, nnz_per_row=None):
    """Rows per chunk so that a chunk of X is about 4 MB uncompressed."""
    if sparse:
        per_row = 8.0 * max(nnz_per_row or 1.0, 1.0) + 8
    else:
        per_row = 4.0 * max(n_features, 1)
    rows = int(TARGET_CHUNK_BYTES // per_row)
    return int(min(max(rows, 16), 1 << 22))


class ContentHash:
    """The store fingerprint: XXH3-128 over per-array XXH3-128 digests.

    Each array is hashed as one stream of its row-major bytes, in row order,
    so the fingerprint depends on the contents only, not on the chunking or
    on the format of the files the store was made from.
    """

    ORDER = ("X", "indptr", "indices", "data", "y", "qid", "weight")

    def __init__(self):
        self._h = {}

    def update(self, name, arr):
        h = self._h.get(name)
        if h is None:
            h = self._h[name] = xxhash.xxh3_128()
        h.update(np.ascontiguousarray(arr).data)

    def hexdigest(self):
        top = xxhash.xxh3_128()
        for name in self.ORDER:
            if name in self._h:
                top.update(name.encode() + b":" + self._h[name].digest())
        return top.hexdigest()


class StoreError(Exception):
    """A path that is not a readable streamcvm store (one-line message)."""


def count_classes(classes, ys):
    """Per-chunk class counts ``[chunks, len(classes)]`` (read-only) of the
    label arrays ``ys`` (one per chunk; NaN labels, no class, not counted)."""
    rows = []
    for y in ys:
        y = np.asarray(y, np.float64)
        y = y[~np.isnan(y)]
        rows.append(np.bincount(np.searchsorted(classes, y), minlength=len(classes)))
    out = np.array(rows, np.int64).reshape(len(rows), len(classes))
    out.flags.writeable = False
    return out


class Chunk(NamedTuple):
    X: object                      # ndarray [m, d] float32 or scipy.sparse.csr_matrix
    y: Optional[np.ndarray]        # float64 [m]
    qid: Optional[np.ndarray] = None     # int64 [m]
    weight: Optional[np.ndarray] = None  # float32 [m]


def csr_view(data, indices, indptr, shape):
    """A scipy CSR matrix over the given arrays, without copying them.

    (scipy's constructor prunes, i.e. copies, views of larger arrays.)
    """
    import scipy.sparse as sp
    M = sp.csr_matrix(shape, dtype=data.dtype)
    M.data, M.indices, M.indptr = data, indices, indptr
    return M


class BaseStore:
    """What every store offers. Subclasses set the attributes in __init__
    and implement ``_read(a, b)``."""

    n: int
    d: int
    sparse: bool
    chunk_rows: int
    has_qid: bool = False
    has_weight: bool = False

    @property
    def n_chunks(self):
        return -(-self.n // self.chunk_rows) if self.n else 0

    def __len__(self):
        return self.n

    def chunk_bounds(self, i):
        if not 0 <= i < self.n_chunks:
            raise IndexError(f"chunk {i} out of range (store has {self.n_chunks})")
        a = i * self.chunk_rows
        return a, min(a + self.chunk_rows, self.n)

    def chunk(self, i):
        """Rows of chunk ``i`` as a :class:`Chunk`."""
        return self._read(*self.chunk_bounds(i))

    def rows(self, a, b):
        """Rows ``a:b`` (may span chunks; memory is O(b - a))."""
        a, b = max(0, a), min(b, self.n)
        return self._read(a, b)

    def __iter__(self):
        for i in range(self.n_chunks):
            yield self.chunk(i)

    # label helpers -----------------------------------------------------
    @property
    def classes(self):
        """Sorted distinct values of ``y`` (None for a regression target)."""
        return self._classes

    def decode_labels(self, y):
        """Original labels for stored ``y`` values (text labels decoded)."""
        if self.label_names is None:
            return y
        names = np.asarray(self.label_names, dtype=object)
        return names[np.asarray(y, dtype=np.int64)]

    def to_dask(self):
        """``(X, y)`` as dask arrays, one dask chunk per store chunk."""
        import dask
        import dask.array as da
        import scipy.sparse as sp
        xs, ys = [], []
        for i in range(self.n_chunks):
            a, b = self.chunk_bounds(i)
            c = dask.delayed(self.chunk, pure=True)(i)
            meta = sp.csr_matrix((0, self.d), dtype=np.float32) if self.sparse else \
                np.empty((0, self.d), np.float32)
            xs.append(da.from_delayed(c.X, shape=(b - a, self.d), dtype=np.float32, meta=meta))
            ys.append(da.from_delayed(c.y, shape=(b - a,), dtype=np.float64))
        if not xs:
            return da.zeros((0, self.d), np.float32), da.zeros((0,), np.float64)
        return da.concatenate(xs), da.concatenate(ys)

    def __repr__(self):
        kind = "sparse" if self.sparse else "dense"
        return (f"<{type(self).__name__} n={self.n:,} d={self.d:,} {kind} "
                f"chunks={self.n_chunks} x {self.chunk_rows:,} rows>")


# ---------------------------------------------------------------------------

class DiskStore(BaseStore):
    """A store on disk: a Zarr v3 group (a directory, or any fsspec URL zarr
    reads: ``file://``, ``s3://``, ``gs://`` ... with their fsspec package
    installed) or an HDF5 file (a local path). It pickles as its path, so a
    dask worker reopens it where it runs."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._open()

    def _open(self):
        path = self.path
        url = "://" in path                 # an fsspec URL: file://, s3://, gs://, ...
        if url and path.rsplit(".", 1)[-1] in ("h5", "hdf5"):
            raise StoreError(f"{path}: HDF5 stores are opened by local path only "
                             "(use a Zarr store for object storage)")
        if not url and not os.path.exists(path):
            raise StoreError(f"{path}: no such store")
        from .formats import FORMATS, StoreOpenError
        self.backend = "zarr" if url or os.path.isdir(path) else "hdf5"
        try:
            self._src = FORMATS[self.backend](path, "r")
        except StoreOpenError as e:
            raise StoreError(f"{path}: {e}") from None
        attrs = self._src.attrs
        self._arr, self._has = self._src.array, self._src.has
        ver = attrs.get("streamcvm_format")
        if ver is None:
            raise StoreError(f"{path}: not a streamcvm store (no streamcvm_format attribute)")
        if ver > FORMAT_VERSION:
            raise StoreError(f"{path}: store format {ver} is newer than this streamcvm "
                             f"reads ({FORMAT_VERSION}); upgrade streamcvm")
        self.attrs = attrs
        self.n = int(attrs["n"])
        self.d = int(attrs["d"])
        self.sparse = bool(attrs["sparse"])
        self.nnz = int(attrs["nnz"])
        self.chunk_rows = int(attrs["chunk_rows"])
        self.has_qid = bool(attrs.get("has_qid"))
        self.has_weight = bool(attrs.get("has_weight"))
        self.fingerprint = attrs.get("fingerprint")
        self.label_names = attrs.get("label_names")
        self.feature_names = attrs.get("feature_names")
        c = attrs.get("classes")
        self._classes = None if c is None else np.asarray(c, dtype=np.float64)
        if self.sparse:
            self._indptr = self._arr("indptr")
            self._indices = self._arr("indices")
            self._data = self._arr("data")
        else:
            self._X = self._arr("X")
        self._y = self._arr("y")
        self._qid = self._arr("qid") if self.has_qid else None
        self._w = self._arr("weight") if self.has_weight else None

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, state):
        self.path = state["path"]
        self._open()

    def close(self):
        if getattr(self, "_src", None) is not None:
            self._src.close()

    @property
    def class_counts(self):
        """Per-chunk class counts ``[n_chunks, len(classes)]`` (None if no classes)."""
        if self._classes is None or not self._has("class_counts"):
            return None
        if getattr(self, "_counts", None) is None:      # read once, not once per machine
            self._counts = np.asarray(self._arr("class_counts")[...])
            self._counts.flags.writeable = False
        return self._counts

    def _read(self, a, b):
        y = np.asarray(self._y[a:b])
        if self.sparse:
            import scipy.sparse as sp
            ip = np.asarray(self._indptr[a:b + 1])
            s, e = int(ip[0]), int(ip[-1])
            X = sp.csr_matrix((np.asarray(self._data[s:e]), np.asarray(self._indices[s:e]),
                               ip - s), shape=(b - a, self.d))
        else:
            X = np.asarray(self._X[a:b])
        qid = np.asarray(self._qid[a:b]) if self._qid is not None else None
        w = np.asarray(self._w[a:b]) if self._w is not None else None
        return Chunk(X, y, qid, w)

    def sizes(self):
        """(stored bytes on disk, raw bytes uncompressed) of the arrays."""
        names = ["indptr", "indices", "data"] if self.sparse else ["X"]
        names += ["y"] + (["qid"] if self.has_qid else []) + (["weight"] if self.has_weight else [])
        raw = 0
        for nm in names:
            a = self._arr(nm)
            raw += int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize
        if self.backend == "zarr":
            stored = 0
            for dp, _, fn in os.walk(self.path):
                stored += sum(os.path.getsize(os.path.join(dp, f)) for f in fn)
        else:
            stored = os.path.getsize(self.path)
        return stored, raw


class ArrayStore(BaseStore):
    """The store interface over in-memory arrays; chunks are views, not copies."""

    def __init__(self, X, y=None, qid=None, weight=None, chunk_rows=None):
        import scipy.sparse as sp
        self.sparse = sp.issparse(X)
        if self.sparse:
            X = sp.csr_matrix(X)
            if X.dtype != np.float32:
                X = X.astype(np.float32)
            self.nnz = int(X.nnz)
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D, got shape {X.shape}")
            if X.dtype != np.float32:
                X = X.astype(np.float32)
            self.nnz = None
        self.X = X
        self.n, self.d = X.shape
        self.y = None if y is None else np.asarray(y, dtype=np.float64)
        if self.y is not None and len(self.y) != self.n:
            raise ValueError(f"y has {len(self.y)} rows, X has {self.n}")
        self.qid = None if qid is None else np.asarray(qid, dtype=np.int64)
        self.weight = None if weight is None else np.asarray(weight, dtype=np.float32)
        self.has_qid = self.qid is not None
        self.has_weight = self.weight is not None
        if chunk_rows is None:
            nnz_row = (self.nnz / max(self.n, 1)) if self.sparse else None
            chunk_rows = default_chunk_rows(self.d, self.sparse, nnz_row)
        self.chunk_rows = int(chunk_rows)
        self.label_names = None
        self.feature_names = None
        self._classes = None
        if self.y is not None:
            u = np.unique(self.y)
            self._classes = u if len(u) <= MAX_CLASSES else None
        self._fingerprint = None

    @property
    def fingerprint(self):
        if self._fingerprint is None:
            h = ContentHash()
            if self.sparse:
                h.update("indptr", self.X.indptr.astype(np.int64))
                h.update("indices", self.X.indices.astype(np.int32))
                h.update("data", self.X.data)
            else:
                h.update("X", self.X)
            for name, a in (("y", self.y), ("qid", self.qid), ("weight", self.weight)):
                if a is not None:
                    h.update(name, a)
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def class_counts(self):
        if self._classes is None:
            return None
        if getattr(self, "_counts", None) is None:      # one count, not one per machine
            self._counts = count_classes(self._classes, (self.y[slice(*self.chunk_bounds(i))]
                                                         for i in range(self.n_chunks)))
        return self._counts

    def _read(self, a, b):
        if self.sparse:
            ip = self.X.indptr[a:b + 1]
            s, e = ip[0], ip[-1]
            X = csr_view(self.X.data[s:e], self.X.indices[s:e], ip - s, (b - a, self.d))
        else:
            X = self.X[a:b]
        sl = slice(a, b)
        return Chunk(X, None if self.y is None else self.y[sl],
                     None if self.qid is None else self.qid[sl],
                     None if self.weight is None else self.weight[sl])


class DaskStore(BaseStore):
    """The store interface over dask arrays ``X`` [n, d] and ``y`` [n] (dask
    or numpy): chunk ``i`` computes its rows' block only, so a fit streams
    the array as it does a store on disk. The rows are rechunked (lazily) to
    equal chunks of the first block's height, at least 1,000 rows."""

    def __init__(self, X, y=None, chunk_rows=None):
        import dask.array as da
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if any(np.isnan(v) for v in X.shape):
            raise ValueError("X has unknown chunk sizes: call X.compute_chunk_sizes() first")
        self.n, self.d = (int(v) for v in X.shape)
        self.sparse = False
        self.nnz = None
        rows = chunk_rows or max(int(X.chunks[0][0]) if X.chunks[0] else 1, 1000)
        self.chunk_rows = int(min(rows, max(self.n, 1)))
        self._X = X.rechunk((self.chunk_rows, self.d))
        if y is not None:
            y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y))
            if y.shape[0] != self.n:
                raise ValueError(f"y has {y.shape[0]} rows, X has {self.n}")
            y = y.rechunk((self.chunk_rows,))
        self._y = y
        self.label_names = None
        self.feature_names = None
        self._classes, self._counts = None, None
        if y is not None:               # one streamed pass: the labels and their counts
            found = set()
            for i in range(self.n_chunks):
                found.update(np.unique(np.asarray(self._y.blocks[i].compute(), np.float64)))
                if len(found) > MAX_CLASSES:
                    break
            if len(found) <= MAX_CLASSES:
                self._classes = np.array(sorted(found), np.float64)
        import dask.base
        self.fingerprint = "dask-" + dask.base.tokenize(self._X, self._y)

    @property
    def class_counts(self):
        if self._classes is None:
            return None
        if self._counts is None:
            self._counts = count_classes(self._classes, (self._y.blocks[i].compute()
                                                         for i in range(self.n_chunks)))
        return self._counts

    def _read(self, a, b):
        X = np.asarray(self._X[a:b].compute(), np.float32)
        y = None if self._y is None else np.asarray(self._y[a:b].compute(), np.float64)
        return Chunk(X, y, None, None)


def is_dask_array(X):
    return type(X).__module__.startswith("dask.") and hasattr(X, "chunks") and \
        hasattr(X, "compute")


def is_store_like(X):
    """A store, a path or a URL (what :func:`open_store` opens)."""
    return isinstance(X, (BaseStore, str, os.PathLike))


def open_store(path):
    """Open a store written by ``streamcvm ingest`` (Zarr directory or URL, or
    HDF5 file)."""
    if isinstance(path, BaseStore):
        return path
    return DiskStore(path)


def as_store(X, y=None, **kw):
    """A store for ``X``: a path or store is opened, arrays are wrapped."""
    if isinstance(X, BaseStore):
        return X
    if isinstance(X, (str, os.PathLike)):
        return DiskStore(X)
    if is_dask_array(X):
        return DaskStore(X, y, **kw)
    return ArrayStore(X, y, **kw)
