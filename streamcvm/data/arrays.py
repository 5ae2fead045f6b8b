"""The in-memory stores: :class:`ArrayStore` over numpy arrays and scipy
CSR matrices (chunks are views), :class:`DaskStore` over dask arrays (a
block computed per chunk). Both give the interface of
:class:`~streamcvm.data.store.BaseStore`, so every solver runs on them as on
a store on disk."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .store import (MAX_CLASSES, BaseStore, Chunk, ContentHash, count_classes, csr_view,
                    default_chunk_rows)

if TYPE_CHECKING:
    import dask.array
    from numpy.typing import ArrayLike
    from scipy.sparse import spmatrix


def _query_ids(qid):
    """``qid`` as int64, refusing what would not cast to the same ids (NaN,
    infinities, fractions) instead of casting it to garbage."""
    q = np.asarray(qid)
    if q.dtype.kind in "fc" or q.dtype == object:
        f = np.asarray(q, np.float64)
        bad = np.flatnonzero(~np.isfinite(f) | (f != np.round(f)))
        if len(bad):
            raise ValueError(f"qid must hold integer query ids: row {bad[0]:,} (0-based) is "
                             f"{float(f[bad[0]])!r} ({len(bad):,} such rows)")
        q = f
    return q.astype(np.int64)


class ArrayStore(BaseStore):
    """The store interface over in-memory arrays.

    Chunks are views, not copies (of ``X`` as float32: other dtypes are
    converted once, a copy), so every solver runs on arrays as on a store on
    disk. Iterating over it yields its chunks (:class:`Chunk`), in order.

    Parameters
    ----------
    X : array_like of shape (n, d) or sparse matrix
        The rows (a sparse matrix is converted to CSR).
    y : array_like of shape (n,), optional
        Labels or targets (float64). None: unlabelled rows.
    qid : array_like of shape (n,), optional
        Integer query ids (ranking); NaN, infinities and fractions are a
        ValueError.
    weight : array_like of shape (n,), optional
        Sample weights (float32).
    chunk_rows : int, optional
        Rows per chunk. None: about 4 MB of X per chunk.

    Attributes
    ----------
    X : ndarray or scipy.sparse.csr_matrix
        The rows, float32.
    y, qid, weight : ndarray or None
        As given, converted.
    n, d : int
        Rows and features.
    sparse : bool
        Whether X is a CSR matrix.
    chunk_rows : int
        Rows per chunk.
    has_qid, has_weight : bool
        Whether ``qid`` and ``weight`` were given.
    """

    def __init__(self, X: ArrayLike | spmatrix, y: ArrayLike | None = None,
                 qid: ArrayLike | None = None, weight: ArrayLike | None = None,
                 chunk_rows: int | None = None) -> None:
        import scipy.sparse as sp
        self.sparse = sp.issparse(X)
        if self.sparse:
            X = sp.csr_matrix(X)
            if X.dtype != np.float32:
                X = X.astype(np.float32)
            self.nnz: int | None = int(X.nnz)
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
        self.qid = None if qid is None else _query_ids(qid)
        self.weight = None if weight is None else np.asarray(weight, dtype=np.float32)
        self.has_qid = self.qid is not None
        self.has_weight = self.weight is not None
        if chunk_rows is None:
            nnz_row = (self.nnz / max(self.n, 1)) if self.sparse else None  # type: ignore[operator]  # (sparse: nnz is set)
            chunk_rows = default_chunk_rows(self.d, self.sparse, nnz_row)
        self.chunk_rows = int(chunk_rows)
        self.label_names = None
        self.feature_names = None
        self._classes = None
        if self.y is not None:
            u = np.unique(self.y)
            self._classes = u if len(u) <= MAX_CLASSES else None
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        """The XXH3-128 digest of the contents, as a store on disk of the same rows has it."""
        if self._fingerprint is None:
            h = ContentHash()
            if self.sparse:
                # (self.sparse: X is a csr_matrix)
                h.update("indptr", self.X.indptr.astype(np.int64))  # type: ignore[union-attr]
                h.update("indices", self.X.indices.astype(np.int32))  # type: ignore[union-attr]
                h.update("data", self.X.data)
            else:
                h.update("X", self.X)
            for name, a in (("y", self.y), ("qid", self.qid), ("weight", self.weight)):
                if a is not None:
                    h.update(name, a)
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def class_counts(self) -> np.ndarray | None:
        """Per-chunk class counts ``[n_chunks, len(classes)]`` (read-only; None without classes)."""
        if self._classes is None:
            return None
        if getattr(self, "_counts", None) is None:      # one count, not one per machine
            # (classes: y is set, they are its values)
            self._counts = count_classes(self._classes, (self.y[slice(*self.chunk_bounds(i))]  # type: ignore[index]
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

    def __init__(self, X: dask.array.Array, y: ArrayLike | dask.array.Array | None = None,
                 chunk_rows: int | None = None) -> None:
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
        self._y: Any = y                # a dask array, or None
        self.label_names = None
        self.feature_names = None
        self._classes, self._counts = None, None
        if y is not None:               # one streamed pass: the labels and their counts
            found: set[float] = set()
            for i in range(self.n_chunks):
                found.update(np.unique(np.asarray(self._y.blocks[i].compute(), np.float64)))  # type: ignore[union-attr]  # (y: a dask array)
                if len(found) > MAX_CLASSES:
                    break
            if len(found) <= MAX_CLASSES:
                self._classes = np.array(sorted(found), np.float64)
        import dask.base
        self.fingerprint = "dask-" + dask.base.tokenize(self._X, self._y)

    @property
    def class_counts(self) -> np.ndarray | None:
        if self._classes is None:
            return None
        if self._counts is None:
            self._counts = count_classes(self._classes, (self._y.blocks[i].compute()
                                                         for i in range(self.n_chunks)))
        return self._counts

    def _read(self, a, b):
        X = np.asarray(self._X[a:b].compute(), np.float32)
        ok = np.isfinite(X)
        if not ok.all():
            k = int(np.flatnonzero(~ok.ravel())[0])
            raise ValueError(f"X: row {a + k // self.d:,}, feature {k % self.d:,} is "
                             f"{X.ravel()[k]}: training and prediction need finite features")
        y = None if self._y is None else np.asarray(self._y[a:b].compute(), np.float64)
        return Chunk(X, y, None, None)
