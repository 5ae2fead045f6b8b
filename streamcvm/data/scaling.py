"""Feature scaling (``scale=True``, ``streamcvm train --scale``), as LIBSVM's
svm-scale does for the RBF kernel: without it a raw column such as
kddcup99's byte counts (up to ~7e8) dominates every squared distance.

One streamed pass (a task per chunk, on the runner) gathers per-feature
statistics; the training store is then read through :class:`ScaledStore`,
which transforms each chunk as it is read, so nothing is copied and RAM
stays at a chunk. The same transform is applied to X at predict time and
saved with the model.

- dense stores: standardised, ``(x - mean) / sd`` (sd 0: left at 1);
- sparse stores: divided by the column's largest |x| (no centring, which
  would fill every zero: LIBSVM's ``svm-scale -l 0`` for non-negative
  data).
"""
import numpy as np
import scipy.sparse as sp

from .store import BaseStore, Chunk


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
    def fit(cls, store, runner=None):
        """From one pass over ``store``."""
        from .parallel import as_runner
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


class ScaledStore(BaseStore):
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

    @property
    def class_counts(self):
        return self.inner.class_counts

    def decode_labels(self, y):
        return self.inner.decode_labels(y)

    def _read(self, a, b):
        c = self.inner.rows(a, b)
        return Chunk(self.scaler.transform(c.X), c.y, c.qid, c.weight)
