"""The core set: the only state that grows during training, O(1/eps^2).

Holds the core vectors' rows (dense or CSR), their signs ``y`` (labels, or
SVR's +-1 copies), point ids (row ids, or ids the problem maps to rows),
weights ``alpha``, per point ``ic`` (1/C_i), ``q`` (the linear term
diag(K~) + Delta of the center-constrained MEB) and ``kx`` (k(x, x)), and a
float32 cache of the base kernel among them. The
cache only grows: adding a vector computes one new row of it.
"""
import numpy as np
import scipy.sparse as sp

from ..data.store import csr_view
from ..options import default



def lazy_zeros(shape):
    """A float32 array of zeros on an anonymous memory map: a page takes RAM
    only once written. (numpy asks for transparent huge pages on large
    arrays, and a 2 MB page is resident whole, so a [cap, cap] cache whose
    rows are filled only up to |S| would cost |S| x cap, not |S|^2.)"""
    import mmap
    count = int(np.prod(shape))
    return np.frombuffer(mmap.mmap(-1, max(count * 4, 1)), np.float32,
                         count=count).reshape(shape)


class CoreSet:
    def __init__(self, d, sparse, cap=64, cache=True, transposed=False, max_cap=None,
                 reserve=None):
        self.d = d
        self.max_cap = max_cap      # capacity never grows past this (the solver's max_core)
        # growth by doublings up to this (the option core_reserve)
        self.reserve = default("core_reserve") if reserve is None else reserve
        self.sparse = sparse
        self.cache = cache          # keep the kernel among core vectors (SMO, FVM)
        self.n = 0
        self.ids = np.empty(cap, np.int64)
        self.y = np.empty(cap, np.float64)
        self.ic = np.empty(cap, np.float64)
        self.q = np.empty(cap, np.float64)
        self.kx = np.empty(cap, np.float64)
        self.alpha = np.zeros(cap, np.float64)
        self.K = np.zeros((cap, cap) if cache else (0, 0), np.float32)
        self.sq = np.empty(cap, np.float64)
        if sparse:
            self._ip = np.zeros(cap + 1, np.int64)
            self._ind = np.empty(cap * 16, np.int32)
            self._dat = np.empty(cap * 16, np.float32)
        else:
            self._X = np.empty((cap, d), np.float32)
        # dense rows also kept transposed ([d, cap]) for sparse candidates
        self._XT = np.empty((d, cap), np.float32) if transposed and not sparse else None
        self._slot = {}             # row id -> slot

    def __contains__(self, row_id):
        return int(row_id) in self._slot

    def slot_of(self, row_id):
        """The slot of a core row, or -1."""
        return self._slot.get(int(row_id), -1)

    def rows_t(self):
        """The core rows transposed, [d, >= n] (None unless kept)."""
        return self._XT

    @property
    def cap(self):
        return len(self.ids)

    def rows(self):
        """The core rows (a view: do not keep across add())."""
        n = self.n
        if self.sparse:
            e = self._ip[n]
            return csr_view(self._dat[:e], self._ind[:e], self._ip[:n + 1], (n, self.d))
        return self._X[:n]

    def _grow(self, need):
        cap = self.cap
        if need <= cap:
            return
        new = max(need, 2 * cap)
        if self.max_cap is not None:    # a cap of 20,000 must not allocate a 32,768^2 cache
            # past the reserve, a capped cache is allocated whole (lazy_zeros: its
            # pages take RAM only once written), so RSS follows |S|^2 with no
            # more growth copies (old + new cache at once: 2x the final cache
            # when |S| ends just past a doubling)
            new = max(need, self.max_cap if new >= self.reserve else min(new, self.max_cap))
        n = self.n
        for name in ("ids", "y", "sq", "ic", "q", "kx"):
            a = getattr(self, name)
            b = np.empty(new, a.dtype)
            b[:n] = a[:n]
            setattr(self, name, b)
        al = np.zeros(new)
        al[:n] = self.alpha[:n]
        self.alpha = al
        if self.cache:
            K = lazy_zeros((new, new)) if new >= self.reserve and new == self.max_cap else \
                np.zeros((new, new), np.float32)
            K[:n, :n] = self.K[:n, :n]
            self.K = K
        if self.sparse:
            ip = np.zeros(new + 1, np.int64)
            ip[:n + 1] = self._ip[:n + 1]
            self._ip = ip
        else:
            X = np.empty((new, self.d), np.float32)
            X[:n] = self._X[:n]
            self._X = X
            if self._XT is not None:
                XT = np.empty((self.d, new), np.float32)
                XT[:, :n] = self._XT[:, :n]
                self._XT = XT

    def arrays(self):
        """The core set as plain arrays (a checkpoint's part)."""
        n = self.n
        out = {"ids": self.ids[:n], "y": self.y[:n], "alpha": self.alpha[:n], "sq": self.sq[:n],
               "ic": self.ic[:n], "q": self.q[:n], "kx": self.kx[:n]}
        if self.sparse:
            e = self._ip[n]
            out.update(ip=self._ip[:n + 1], ind=self._ind[:e], dat=self._dat[:e])
        else:
            out["X"] = self._X[:n]
        return out

    def load_arrays(self, a, kernel=None):
        """Refill an empty core set from :meth:`arrays`' output, bit for bit.
        The kernel cache is not saved (|S|^2 floats, 1.2 GB for cvm on a9a):
        it is recomputed here row by row with the very calls :meth:`add` made,
        so the values are the same to the last bit (``kernel`` needed)."""
        n = len(a["ids"])
        self._grow(max(n, 1))
        self.ids[:n] = a["ids"]
        self.y[:n] = a["y"]
        self.alpha[:n] = a["alpha"]
        self.sq[:n] = a["sq"]
        for name in ("ic", "q", "kx"):
            getattr(self, name)[:n] = a[name]
        if self.sparse:
            self._ip[:n + 1] = a["ip"]
            e = int(a["ip"][n])
            self._ind = np.empty(max(e, 16), np.int32)
            self._dat = np.empty(max(e, 16), np.float32)
            self._ind[:e] = a["ind"]
            self._dat[:e] = a["dat"]
        else:
            self._X[:n] = a["X"]
            if self._XT is not None:
                self._XT[:, :n] = a["X"].T
        self._slot = {int(i): k for k, i in enumerate(a["ids"])}
        self.n = n
        if self.cache:
            rows = self.rows()
            for k in range(n):
                krow = kernel.block(rows[k:k + 1], rows[:k + 1], self.sq[k:k + 1],
                                    self.sq[:k + 1])[0]
                self.K[k, :k + 1] = krow
                self.K[:k + 1, k] = krow

    def clear(self):
        """Empty the core set (its buffers are kept)."""
        self.n = 0
        self._slot = {}
        self.alpha[:] = 0.0
        if self.sparse:
            self._ip[0] = 0

    def add_many(self, ids, X, y, alpha, kernel, ic, q):
        """Append dense rows with their weights at once (e.g. bvm_exact's
        result; ``ic``, ``q``: scalars, the same for all); one by one when a
        kernel cache or sparse rows need it."""
        if self.cache or self.sparse:
            for k in range(len(ids)):
                slot = self.add(int(ids[k]), X[k:k + 1], float(y[k]), kernel, ic, q)
                self.alpha[slot] = alpha[k]
            return
        n, m = self.n, len(ids)
        self._grow(n + m)
        self._X[n:n + m] = X
        if self._XT is not None:
            self._XT[:, n:n + m] = X.T
        self.ids[n:n + m] = ids
        self.y[n:n + m] = y
        self.alpha[n:n + m] = alpha
        self.sq[n:n + m] = np.einsum("ij,ij->i", X, X, dtype=np.float64)
        self.ic[n:n + m] = ic
        self.q[n:n + m] = q
        self.kx[n:n + m] = kernel.diag(X, self.sq[n:n + m])
        self._slot.update((int(i), n + k) for k, i in enumerate(ids))
        self.n = n + m

    def add(self, row_id, x, y, kernel, ic, q):
        """Append one point (row x: [1, d] dense or CSR; sign y; 1/C_i ``ic``;
        linear term ``q``) with alpha 0; returns its slot."""
        n = self.n
        self._grow(n + 1)
        if self.sparse:
            x = sp.csr_matrix(x)
            nnz = x.nnz
            e = self._ip[n]
            if e + nnz > len(self._dat):
                size = max(2 * len(self._dat), e + nnz)
                ind = np.empty(size, np.int32)
                dat = np.empty(size, np.float32)
                ind[:e] = self._ind[:e]
                dat[:e] = self._dat[:e]
                self._ind, self._dat = ind, dat
            order = np.argsort(x.indices)
            self._ind[e:e + nnz] = x.indices[order]
            self._dat[e:e + nnz] = x.data[order]
            self._ip[n + 1] = e + nnz
        else:
            self._X[n] = x.toarray().reshape(-1) if sp.issparse(x) else \
                np.asarray(x, np.float32).reshape(-1)
            if self._XT is not None:
                self._XT[:, n] = self._X[n]
        self.ids[n] = row_id
        self.y[n] = y
        self.alpha[n] = 0.0
        self.n = n + 1
        rows = self.rows()
        xr = rows[n:n + 1]
        self.sq[n] = float(xr.multiply(xr).sum()) if self.sparse else float(xr[0] @ xr[0])
        self.ic[n] = ic
        self.q[n] = q
        self.kx[n] = kernel.diag(xr, self.sq[n:n + 1])[0]
        if self.cache:
            krow = kernel.block(xr, rows, self.sq[n:n + 1], self.sq[:n + 1])[0]
            self.K[n, :n + 1] = krow
            self.K[:n + 1, n] = krow
        self._slot[int(row_id)] = n
        return n
