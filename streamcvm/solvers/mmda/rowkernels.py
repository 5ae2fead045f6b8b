"""Kernel columns of rows held in memory, for MMDA's in-memory route: the
compiled column of one row (:func:`column_cached`, over a ring of cached
columns) and :class:`RowKernels`, the rows and their columns shared by the
directions of a fit."""
from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels.compiled import L1_CODE, L2_CODE


@njit(cache=True, nogil=True, fastmath=True)
def _kcol(X, j, code, gamma, out):
    """``out[i] = k(X_i, X_j)`` (float32 differences: no cancellation, and
    ``k(x, x) = 1`` exactly)."""
    n, d = X.shape
    g = np.float32(gamma)
    xj = X[j]
    for i in range(n):
        acc = np.float32(0.0)
        if code == L1_CODE:
            for c in range(d):
                acc += abs(X[i, c] - xj[c])
        else:
            for c in range(d):
                v = X[i, c] - xj[c]
                acc += v * v
            if code == L2_CODE:
                acc = np.sqrt(acc)
        out[i] = np.exp(-g * acc)


class ColumnCache(NamedTuple):
    """A ring of cached kernel columns of the bound rows (arrays changed in
    place by :func:`column_cached`; numba takes the tuple as one argument)."""
    GC: np.ndarray          # [slots, rows] float32: the cached columns
    slot_of: np.ndarray     # [rows] int64: the slot holding a row's column, -1: none
    id_of: np.ndarray       # [slots] int64: the row whose column a slot holds, -1: none
    ring: np.ndarray        # [1] int64: the next slot to fill (the oldest column)


@njit(cache=True, nogil=True)
def column_cached(X, j, code, gamma, cols):
    """The kernel column of row ``j`` from the cache ``cols`` (a
    :class:`ColumnCache`, a ring: the oldest column makes room), computed
    and stored if absent."""
    GC, slot_of, id_of, ring = cols.GC, cols.slot_of, cols.id_of, cols.ring
    k = slot_of[j]
    if k < 0:
        k = ring[0]
        ring[0] = (k + 1) % GC.shape[0]
        if id_of[k] >= 0:
            slot_of[id_of[k]] = -1
        _kcol(X, j, code, gamma, GC[k])
        slot_of[j], id_of[k] = k, j
    return GC[k]


@njit(cache=True, nogil=True)
def _project(X, rows, coef, code, gamma, cols):
    """``sum_r coef_r k(X_i, X_rows_r)`` for every row i (row by row of the
    expansion, in its order: the same sums whether cached or not), the
    columns from ``cols`` (a :class:`ColumnCache`)."""
    out = np.zeros(X.shape[0])
    for r in range(len(rows)):
        col = column_cached(X, rows[r], code, gamma, cols)
        c = coef[r]
        for i in range(X.shape[0]):
            out[i] += c * col[i]
    return out


class RowKernels:
    """Kernel columns of in-memory rows, shared by the directions of a fit:
    the rows in store-id order (``bind``), a ring of at most ``budget``
    bytes of float32 columns (``columns``, a :class:`ColumnCache`: a row's
    column is computed once while it stays)
    and the projections of every row onto finished directions (by their
    expansion, so a resumed fit gets the same values)."""

    def __init__(self, kernel, budget):
        if not kernel.has("mmda_columns"):
            raise ValueError(f"MMDA's in-memory route does not know the kernel {kernel.name!r}")
        self.kernel = kernel
        self.code = kernel.code
        self.budget = int(budget)       # bytes (the option mmda_row_cache_mb)
        self.ids = None
        self._proj = {}

    def bind(self, ids, X):
        """Use rows ``X`` with store ids ``ids`` (the same rows again: kept)."""
        ids = np.asarray(ids, np.int64)
        if self.ids is not None and len(ids) == len(self.ids):
            order = np.argsort(ids, kind="stable")
            if np.array_equal(ids[order], self.ids):
                return self
        order = np.argsort(ids, kind="stable")
        X = X[order]
        X = X.toarray() if hasattr(X, "toarray") else X
        self.X = np.ascontiguousarray(X, np.float32)
        self.ids = ids[order]
        n = len(self.ids)
        slots = int(max(1, min(n, self.budget // max(4 * n, 1))))
        self.columns = ColumnCache(GC=np.empty((slots, n), np.float32),
                                   slot_of=np.full(n, -1, np.int64),
                                   id_of=np.full(slots, -1, np.int64),
                                   ring=np.zeros(1, np.int64))
        self._proj = {}
        # the solver's buffers: kernel columns of the core set [rows, 512 + 16]
        # (rows 2^k bytes apart would thrash the cache) and its matrix G
        self.Kf = np.empty((n, 512 + 16), np.float32)
        self.G = np.empty((0, 0))
        return self

    def positions(self, ids):
        return np.searchsorted(self.ids, np.asarray(ids, np.int64))

    def projections(self, basis):
        """[rows, s]: ``u_q'phi(x)`` of every bound row and direction of
        ``basis`` (a :class:`Basis`), each direction's column kept."""
        P = np.zeros((len(self.ids), basis.s))
        for q in range(basis.s):
            nz = np.flatnonzero(basis.W[:, q])
            rows, coef = self.positions(basis.ids[nz]), np.ascontiguousarray(basis.W[nz, q])
            key = (rows.tobytes(), coef.tobytes())
            col = self._proj.get(key)
            if col is None:
                col = self._proj[key] = _project(self.X, rows, coef, self.code,
                                                 self.kernel.gamma, self.columns)
            P[:, q] = col
        return P
