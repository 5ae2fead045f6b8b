"""Feature scaling (``scale=True`` or ``"standard"``, ``scale="range"``;
``streamcvm train --scale [standard|range]``): without it a raw column such
as kddcup99's byte counts (up to ~7e8) dominates every squared distance.

One streamed pass (a task per chunk, on the runner) gathers per-feature
statistics; the training store is then read through :class:`ScaledStore`,
which transforms each chunk as it is read, so nothing is copied and RAM
stays at a chunk. The same transform is applied to X at predict time and
saved with the model (an offset and a scale per feature, whichever kind).

- "standard", dense stores: ``(x - mean) / sd`` (sd 0: left at 1);
- "range", dense stores: LIBSVM's svm-scale with its defaults, each feature
  mapped to [-1, 1] from its min and max over the training rows
  (``(x - (max + min) / 2) / ((max - min) / 2)``; a constant feature
  becomes 0, as svm-scale leaves it out);
- sparse stores, either kind: divided by the column's largest |x|, which
  maps it into [-1, 1] with no centring (centring would fill every zero;
  for non-negative data this is svm-scale's ``-l 0``).

The same :class:`Scaler` also holds a fit's uniform scale (:meth:`Scaler.uniform`):
rows whose squared norms are outside ``SAFE_SQ_NORM`` are multiplied by a
power of two (:func:`range_scale`) so that float32 kernel values neither
overflow nor vanish (``streamcvm.estimators.feature_range``).

:class:`PaddedStore` is the other view of a store read chunk by chunk: rows
with zeros past their last feature, for a model of more features (as
svm-predict reads a test file whose largest index is below the model's).
"""
import numpy as np
import scipy.sparse as sp

import xxhash

from .store import BaseStore, Chunk, csr_view

# the largest squared row norm of a fit's sampled rows that float32 kernel
# blocks take as they are: norms ~1e-15 to ~1e15, i.e. squared norms and dot
# products from 2^-100 to 2^100, 2^28 inside float32's range at either end
# (3.4e38 = 2^128, normal numbers from 2^-126), for rows the sample missed
SAFE_SQ_NORM = (2.0 ** -100, 2.0 ** 100)


def range_scale(sq_max):
    """The power of two ``s`` that rows whose largest squared norm is
    ``sq_max`` are multiplied by: 1 inside ``SAFE_SQ_NORM`` (and for rows of
    zeros), else the one that brings ``sq_max s^2`` within [1/2, 2]. A
    power of two, so ``s x`` is exact (unless it is below float32's normal
    range, where it rounds as any float32 result does)."""
    lo, hi = SAFE_SQ_NORM
    if not sq_max > 0 or lo <= sq_max <= hi:
        return 1.0
    return float(np.ldexp(1.0, -int(np.round(np.log2(sq_max) / 2))))


KINDS = ("standard", "range")


def _range_task(i, store):
    """Chunk ``i`` of a dense store: (rows, min, max per column)."""
    x = np.asarray(store.chunk(i).X)
    if len(x) == 0:
        return 0, None, None
    return len(x), x.min(axis=0).astype(np.float64), x.max(axis=0).astype(np.float64)


def _moments_task(i, store):
    """Chunk ``i``: (rows, mean, sum of squared deviations from it, None),
    or for sparse rows (rows, None, None, max |x| per column)."""
    X = store.chunk(i).X
    if sp.issparse(X):
        mx = np.zeros(store.d)
        if X.nnz:
            mx = np.asarray(abs(X).max(axis=0).todense(), np.float64).ravel()
        return X.shape[0], None, None, mx
    x = np.asarray(X, np.float64)
    if len(x) == 0:
        return 0, np.zeros(store.d), np.zeros(store.d), None
    mean = x.mean(axis=0)
    return len(x), mean, ((x - mean) ** 2).sum(axis=0), None


class Scaler:
    """``offset`` and ``scale`` per feature: ``x' = (x - offset) / scale``
    (``offset`` None: no centring, the sparse case)."""

    def __init__(self, offset, scale):
        self.offset = None if offset is None else np.asarray(offset, np.float64)
        self.scale = np.asarray(scale, np.float64)

    @classmethod
    def uniform(cls, d, s):
        """Every feature multiplied by ``s`` (a power of two: ``scale`` = 1/s,
        exact), no centring."""
        return cls(None, np.full(d, 1.0 / s))

    @classmethod
    def fit(cls, store, runner=None, kind="standard"):
        """From one pass over ``store``; ``kind``: "standard" or "range" (see
        the module)."""
        from .parallel import as_runner
        if kind not in KINDS:
            raise ValueError(f"scale must be one of {KINDS}, got {kind!r}")
        if kind == "range" and not store.sparse:
            return cls._fit_range(store, runner)
        n, mean, m2, mx = 0, 0.0, 0.0, None
        for k, mk, m2k, mxk in as_runner(runner).map(_moments_task, store.n_chunks, store):
            if mxk is not None:
                mx = mxk if mx is None else np.maximum(mx, mxk)
            elif k:     # chunks' moments merged by deviations (Chan et al.): no
                # cancellation on a column far from 0 (timestamps, byte counts)
                delta = mk - mean
                m2 = m2 + m2k + delta * delta * (n * k / (n + k))
                mean = mean + delta * (k / (n + k))
            n += k
        if n == 0:
            raise ValueError("scale: the store has no rows")
        if store.sparse:
            return cls(None, np.where(mx > 0, mx, 1.0))
        sd = np.sqrt(m2 / n)
        # a constant column (sd ~ 0 against its size): left unscaled
        sd = np.where(sd > 1e-12 * np.maximum(np.abs(mean), 1.0), sd, 1.0)
        return cls(mean, sd)

    @classmethod
    def _fit_range(cls, store, runner=None):
        """svm-scale's [-1, 1] from each dense feature's min and max."""
        from .parallel import as_runner
        n, lo, hi = 0, None, None
        for k, lk, hk in as_runner(runner).map(_range_task, store.n_chunks, store):
            if k:
                lo = lk if lo is None else np.minimum(lo, lk)
                hi = hk if hi is None else np.maximum(hi, hk)
                n += k
        if n == 0:
            raise ValueError("scale: the store has no rows")
        half = (hi - lo) / 2
        # a constant feature: 0 (svm-scale leaves it out of its output)
        return cls(lo + half, np.where(half > 0, half, 1.0))

    def transform(self, X):
        """X scaled, float32 (dense in, dense out; CSR in, CSR out)."""
        if sp.issparse(X):
            if self.offset is not None:     # centring would fill every zero
                X = X.toarray()
            else:
                X = sp.csr_matrix(X, dtype=np.float64)
                X.data = X.data / self.scale[X.indices]
                return X.astype(np.float32)
        x = np.asarray(X, np.float64)
        if self.offset is not None:
            x = x - self.offset
        return (x / self.scale).astype(np.float32)

    def state(self):
        return {"offset": None if self.offset is None else self.offset.tolist(),
                "scale": self.scale.tolist()}


class _StoreView(BaseStore):
    """A store read through another (``inner``): its labels and class
    counts are the inner store's."""

    @property
    def class_counts(self):
        return self.inner.class_counts

    def decode_labels(self, y):
        return self.inner.decode_labels(y)


class ScaledStore(_StoreView):
    """``store`` read through a :class:`Scaler`, chunk by chunk (it pickles
    with its store, which reopens where a worker runs)."""

    def __init__(self, store, scaler):
        self.inner, self.scaler = store, scaler
        for name in ("n", "d", "sparse", "chunk_rows", "has_qid", "has_weight", "nnz",
                     "label_names", "feature_names"):
            setattr(self, name, getattr(store, name, None))
        self._classes = store.classes
        self.path = getattr(store, "path", None)
        import xxhash
        h = xxhash.xxh3_128(str(store.fingerprint).encode())
        h.update(np.ascontiguousarray(scaler.scale).data)
        if scaler.offset is not None:
            h.update(np.ascontiguousarray(scaler.offset).data)
        self.fingerprint = h.hexdigest()

    def _read(self, a, b):
        c = self.inner.rows(a, b)
        return Chunk(self.scaler.transform(c.X), c.y, c.qid, c.weight)


class PaddedStore(_StoreView):
    """``store`` read with ``d`` features: each row gets zeros in the
    features past ``store.d`` (< ``d``), as LIBSVM's svm-predict reads a test
    file whose largest feature index is below the model's. Nothing is copied
    for sparse rows (the matrix is only widened); dense rows get zero columns
    chunk by chunk. It pickles with its store, which reopens where a worker
    runs."""

    def __init__(self, store, d):
        if d < store.d:
            raise ValueError(f"cannot pad {store.d} features down to {d}")
        self.inner = store
        for name in ("n", "sparse", "chunk_rows", "has_qid", "has_weight", "nnz",
                     "label_names", "path", "attrs", "backend"):
            if hasattr(store, name):
                setattr(self, name, getattr(store, name))
        self.d = int(d)
        names = getattr(store, "feature_names", None)
        self.feature_names = None if names is None else \
            list(names) + [None] * (self.d - store.d)
        self._classes = store.classes
        h = xxhash.xxh3_128(str(store.fingerprint).encode())
        h.update(f"padded to {self.d}".encode())
        self.fingerprint = h.hexdigest()

    def close(self):
        if hasattr(self.inner, "close"):
            self.inner.close()

    def _read(self, a, b):
        c = self.inner.rows(a, b)
        X = c.X
        extra = self.d - X.shape[1]
        if extra:
            if sp.issparse(X):
                X = csr_view(X.data, X.indices, X.indptr, (X.shape[0], self.d))
            else:
                X = np.concatenate([X, np.zeros((X.shape[0], extra), X.dtype)], axis=1)
        return Chunk(X, c.y, c.qid, c.weight)
