"""Kernel functions: pure numba element kernels plus BLAS-backed blocks.

Kernels are chosen by a small integer code (not by passing functions into
cached numba code):

=========  ==================================================  =========
code       k(x, z)                                             k(x, x)
=========  ==================================================  =========
RBF        exp(-gamma ||x - z||^2)                             1
LAPLACIAN  exp(-gamma ||x - z||_1)   (as sklearn)              1
EXPONENTIAL exp(-gamma ||x - z||_2)  (the Euclidean Laplacian)  1
NPOLY      (gamma x'z + coef0)^p / sqrt((..x'x..)^p (..z'z..)^p)  1
POLY       (gamma x'z + coef0)^p                               varies
LINEAR     x'z                                                 varies
=========  ==================================================  =========

A block ``K[i, j] = k(A_i, B_j)`` is computed from the Gram matrix ``A B'``
(float32 BLAS for dense data, scipy for CSR) and the squared norms, then
transformed elementwise in numba; the L1 distances of the Laplacian kernel
and the L2 distances of the exponential kernel are numba loops over the
differences (dense and CSR).
"""
import threading

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

RBF, LAPLACIAN, NPOLY, POLY, LINEAR, EXPONENTIAL = 0, 1, 2, 3, 4, 5
CODES = {"rbf": RBF, "gaussian": RBF, "laplacian": LAPLACIAN, "npoly": NPOLY,
         "normalized_poly": NPOLY, "poly": POLY, "polynomial": POLY, "linear": LINEAR,
         "exponential": EXPONENTIAL}
NAMES = {RBF: "rbf", LAPLACIAN: "laplacian", NPOLY: "npoly", POLY: "poly", LINEAR: "linear",
         EXPONENTIAL: "exponential"}


def kernel_code(name):
    try:
        return CODES[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; choose from "
                         f"{', '.join(sorted(set(NAMES.values())))}") from None


def constant_diagonal(code):
    """True when k(x, x) is the same for every x (needed by BVM)."""
    return code in (RBF, LAPLACIAN, NPOLY, EXPONENTIAL)


@njit(cache=True, nogil=True, parallel=True, fastmath=True)
def _transform(G, sqa, sqb, code, gamma, coef0, degree):
    """In place: Gram matrix A B' -> kernel block (codes RBF, NPOLY, POLY)."""
    m, n = G.shape
    for i in prange(m):
        for j in range(n):
            g = G[i, j]
            if code == RBF:
                d = sqa[i] + sqb[j] - 2.0 * g
                G[i, j] = np.exp(-gamma * max(d, 0.0))

            elif code == POLY:
                G[i, j] = (gamma * g + coef0) ** degree
            elif code == NPOLY:
                num = (gamma * g + coef0) ** degree
                den = np.sqrt(((gamma * sqa[i] + coef0) ** degree) * ((gamma * sqb[j] + coef0) ** degree))
                G[i, j] = num / den if den > 0 else 0.0
    return G


@njit(cache=True, nogil=True, parallel=True, fastmath=True)
def _laplacian_dense(A, B, gamma, out, euclid=False):
    """exp(-gamma ||a - b||_1), or with ``euclid`` exp(-gamma ||a - b||_2)
    (the exponential kernel: from the differences, in float64, so k(x, x) is
    exactly 1, where a Gram-based distance would leave float32 cancellation,
    magnified by the square root)."""
    m, d = A.shape
    n = B.shape[0]
    for i in prange(m):
        for j in range(n):
            s = 0.0
            for k in range(d):
                t = np.float64(A[i, k]) - np.float64(B[j, k])
                s += t * t if euclid else abs(t)
            out[i, j] = np.exp(-gamma * (np.sqrt(s) if euclid else s))
    return out


@njit(cache=True, nogil=True, parallel=True)
def _laplacian_csr(ap, ai, ax, bp, bi, bx, gamma, out, euclid=False):
    """:func:`_laplacian_dense` for CSR rows with sorted indices (a merge)."""
    m = len(ap) - 1
    n = len(bp) - 1
    for r in prange(m):
        for c in range(n):
            p, pe = ap[r], ap[r + 1]
            q, qe = bp[c], bp[c + 1]
            s = 0.0
            while p < pe or q < qe:
                if q >= qe or (p < pe and ai[p] < bi[q]):
                    t = np.float64(ax[p])
                    p += 1
                elif p >= pe or bi[q] < ai[p]:
                    t = np.float64(bx[q])
                    q += 1
                else:
                    t = np.float64(ax[p]) - np.float64(bx[q])
                    p += 1
                    q += 1
                s += t * t if euclid else abs(t)
            out[r, c] = np.exp(-gamma * (np.sqrt(s) if euclid else s))
    return out


@njit(cache=True, nogil=True, fastmath=True)
def _rbf_arg(G, sqa, sqb, gamma):
    """In place: Gram matrix -> -gamma max(||a||^2 + ||b||^2 - 2 a.b, 0), in
    one pass (numpy's vectorised exp then finishes the RBF block)."""
    m, n = G.shape
    zero = G.dtype.type(0.0)
    for i in range(m):
        a = sqa[i]
        for j in range(n):
            G[i, j] = -gamma * max(a + sqb[j] - 2.0 * G[i, j], zero)
    return G


@njit(cache=True, nogil=True, fastmath=True)
def _csr_gram(ip, ind, dat, BT, n, out):
    """out[i, :n] = A_i . BT[:, :n] for CSR rows A: one row of BT per
    nonzero, so the cost follows nnz(A) x n, not d x n. Serial on purpose:
    numba's parallel workers and OpenBLAS's threads fight over the cores
    (3.4x slower BVM training on a9a when this used prange)."""
    m = len(ip) - 1
    for i in range(m):
        for j in range(n):
            out[i, j] = 0.0
        for p in range(ip[i], ip[i + 1]):
            k = ind[p]
            v = dat[p]
            for j in range(n):
                out[i, j] += v * BT[k, j]
    return out


# exp(x) for the RBF kernel inside compiled loops, in float32 like the kernel
# blocks. numba's scalar np.exp costs ~4.3 ns here (float64, hand-timed) against
# ~0.5 ns for this vectorisable form: Cephes' expf (Cody-Waite reduction, degree-6
# polynomial), within 1e-7 relative of the exact value on [-87, 0]
# (measured). No fastmath: the rounding trick must not be reassociated.
_LOG2E = np.float32(1.44269504088896341)
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_ROUND = np.float32(12582912.0)  # 1.5 * 2**23: t = x + _ROUND holds round(x) in its low bits
_EP = [np.float32(v) for v in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                               4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)]
_EP0, _EP1, _EP2, _EP3, _EP4, _EP5 = _EP
EXP_MIN = np.float32(-87.0)  # exp(x) below this (< 1.7e-38) is returned as 0
_ONE = np.float32(1.0)
_ZERO = np.float32(0.0)


@njit(cache=True, nogil=True, error_model="numpy")
def exp_nonpos(a, out, kbuf):
    """out[:n] = exp(a[:n]) for float32 a <= 0 (n = len(a)); ``kbuf``: int32
    scratch of at least n. Three vectorised passes: the reduced argument's
    polynomial, the exponent bits of 2^k, their product."""
    n = a.shape[0]
    kf = kbuf.view(np.float32)
    for i in range(n):
        x = max(a[i], EXP_MIN)
        t = _LOG2E * x + _ROUND
        kf[i] = t
        k = t - _ROUND
        r = x - k * _LN2_HI
        r = r - k * _LN2_LO
        p = (((((_EP0 * r + _EP1) * r + _EP2) * r + _EP3) * r + _EP4) * r + _EP5) * (r * r)
        out[i] = p + r + _ONE
    for i in range(n):
        kbuf[i] = (kbuf[i] + 127) << 23  # round(x log2 e) + bias, as an exponent field
    for i in range(n):
        out[i] = out[i] * kf[i] if a[i] >= EXP_MIN else _ZERO


# weights of at most this many columns (machines) are summed from a float32 kernel
# block in place (weighted_sum), more by a float64 GEMM (block_times, which copies
# the block to float64 first). A 256 x 4,000 block: 0.15 against 0.32 ms for one
# machine, 0.52 against 0.59 at 4, about even at 6-9, 3.5 against 1.5 ms at 25
FEW_MACHINES = 4


def summed_in_place(W):
    """Whether :func:`block_times` sums the weights ``W`` over the float32
    block in place (a vector, or at most ``FEW_MACHINES`` columns) rather
    than by a GEMM from a float64 copy."""
    return W.ndim == 1 or W.shape[1] <= FEW_MACHINES


@njit(cache=True, nogil=True, fastmath=True)
def _weighted_rows(G, lo, hi, WT, out):
    """out[i, c] = sum_j G[i, lo + j] WT[c, j] over the columns ``lo:hi``,
    the products and sums in float64."""
    m = G.shape[0]
    for i in range(m):
        g = G[i, lo:hi]
        for c in range(WT.shape[0]):
            wc = WT[c]
            s = 0.0
            for j in range(hi - lo):
                s += np.float64(g[j]) * wc[j]
            out[i, c] = s
    return out


def weighted_sum(G, w, cols=None):
    """``G @ w`` for a kernel block ``G`` (float32 or float64) and weights
    ``w`` (a vector, or a matrix with a column per machine), summed in
    float64; ``cols=(lo, hi)``: ``G[:, lo:hi] @ w``, without copying the
    columns out. numpy would first copy a float32 ``G`` to float64, which
    costs more than computing the block (3-17 ns a value against ~0.5 here);
    each row's sum does not depend on the rows it came with."""
    w = np.asarray(w, np.float64)
    WT = np.ascontiguousarray(w.reshape(len(w), -1).T)
    G = np.ascontiguousarray(G)
    lo, hi = (0, G.shape[1]) if cols is None else cols
    if not 0 <= lo <= hi <= G.shape[1] or hi - lo != WT.shape[1]:
        raise ValueError(f"columns {lo}:{hi} of a {G.shape[1]}-column block against "
                         f"{WT.shape[1]} weights")
    out = _weighted_rows(G, lo, hi, WT, np.empty((G.shape[0], WT.shape[0])))
    return out[:, 0] if w.ndim == 1 else out


def block_times(G, W, cols=None, buf=None):
    """``G[:, lo:hi] @ W`` (``cols=(lo, hi)``, default every column) for a
    kernel block ``G`` and weights ``W`` [columns, machines], in float64, by
    the cheaper way: :func:`weighted_sum` over the block in place for at
    most ``FEW_MACHINES`` machines, else a float64 copy of the columns (into
    ``buf``, a float64 scratch of at least that shape, if given: a fresh one
    per block costs page faults) and a GEMM."""
    W = np.asarray(W, np.float64)
    if summed_in_place(W):
        return weighted_sum(G, W, cols)
    lo, hi = (0, G.shape[1]) if cols is None else cols
    Gd = np.empty((G.shape[0], hi - lo)) if buf is None else buf[:G.shape[0], :hi - lo]
    np.copyto(Gd, G[:, lo:hi])
    return Gd @ W


def block_rows_for(n_cols, values=1 << 22):
    """Rows per kernel block against ``n_cols`` columns: about ``values``
    kernel values (16 MB of float32), between 16 and 4096 rows."""
    return int(min(4096, max(16, values // max(n_cols, 1))))


def kernel_sums(kernel, X, B, w, sq=None, sqb=None, BT=None, n_jobs=1):
    """``sum_j w_j k(X_i, B_j)`` for every row ``X_i`` (``w``: a vector, or a
    matrix with a column per machine), from kernel blocks of
    :func:`block_rows_for` rows, so memory stays at a few blocks however many
    rows. ``n_jobs`` threads (one BLAS thread each) take whole blocks: a
    row's value does not depend on ``n_jobs``. Not for code that already runs
    on every core (chunk tasks): the default is one thread."""
    n = X.shape[0]
    sq = sq_norms(X) if sq is None else sq
    sqb = sq_norms(B) if sqb is None else sqb
    w = np.asarray(w, np.float64)
    out = np.empty((n,) + w.shape[1:])
    step = min(block_rows_for(B.shape[0]), max(n, 1))   # a 59-row sample: a 59-row buffer
    starts = range(0, n, step)
    local = threading.local()       # a scratch block per thread
    wide = not summed_in_place(w)   # many machines (MMDA's features): also a float64 one

    def one(a):
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = np.empty(step * B.shape[0], np.float32)
            local.wide = np.empty((step, B.shape[0])) if wide else None
        e = min(a + step, n)
        out[a:e] = block_times(kernel.block(X[a:e], B, sq[a:e], sqb, BT=BT, out=buf), w,
                               buf=local.wide)

    for_blocks(one, starts, n_jobs)
    return out


def for_blocks(one, starts, n_jobs=1):
    """``one(s)`` for every block start ``s``, on ``n_jobs`` threads of one
    BLAS thread each (one: in order, here); each call writes its own rows, so
    the result does not depend on ``n_jobs``. Scratch buffers per thread:
    ``threading.local``."""
    starts = list(starts)
    jobs = max(1, min(int(n_jobs), len(starts)))
    if jobs == 1:
        for s in starts:
            one(s)
        return
    from concurrent.futures import ThreadPoolExecutor

    from ..data.parallel import thread_limits
    ex = ThreadPoolExecutor(jobs)
    try:
        with thread_limits(1, "blas"):
            for _ in ex.map(one, starts):
                pass
    finally:        # on an interrupt: the blocks not started are dropped
        ex.shutdown(wait=True, cancel_futures=True)


def _scratch(out, m, n):
    """An [m, n] float32 view of the scratch buffer ``out`` (or a new array)."""
    if out is None or out.size < m * n:
        return np.empty((m, n), np.float32)
    return out[:m * n].reshape(m, n)


def sq_norms(X):
    """Squared row norms (float64) of a dense array or CSR matrix."""
    if sp.issparse(X):
        X = X.tocsr()
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        return np.bincount(rows, weights=np.square(X.data, dtype=np.float64),
                           minlength=X.shape[0])
    X = np.asarray(X)
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


class Kernel:
    """A kernel with its parameters; ``block(A, B)`` returns float64 K(A, B)."""

    def __init__(self, name="rbf", gamma=1.0, coef0=0.0, degree=3):
        self.code = kernel_code(name)
        self.name = NAMES[self.code]
        self.gamma = float(gamma)
        self.coef0 = float(coef0)
        self.degree = float(degree)
        for what, v in (("gamma", self.gamma), ("coef0", self.coef0), ("degree", self.degree)):
            if not np.isfinite(v):
                raise ValueError(f"{what} must be a finite number, got {v}")
        if self.gamma <= 0 and self.code in (RBF, LAPLACIAN, EXPONENTIAL):
            raise ValueError(f"gamma must be positive, got {gamma}")

    @property
    def constant_diagonal(self):
        return constant_diagonal(self.code)

    def diag(self, X, sq=None):
        """k(x, x) for every row."""
        if self.constant_diagonal:
            return np.ones(X.shape[0])
        sq = sq_norms(X) if sq is None else sq
        if self.code == LINEAR:
            return sq
        return (self.gamma * sq + self.coef0) ** self.degree

    def block(self, A, B, sqa=None, sqb=None, BT=None, out=None):
        """K[i, j] = k(A_i, B_j) (A, B: dense or CSR): float32 for dense
        float32 rows with the RBF or linear kernel, float64 otherwise.

        ``BT``: optionally B transposed (float32, C-contiguous, at least
        ``len(B)`` columns); with CSR ``A`` and dense ``B`` the Gram matrix is
        then computed from A's nonzeros only (:func:`_csr_gram`).
        ``out``: a float32 scratch buffer of at least ``len(A) * len(B)``
        elements for the float32 paths (a fresh multi-MB array per call costs
        more in page faults than the arithmetic)."""
        m, n = A.shape[0], B.shape[0]
        if m == 0 or n == 0:
            return np.zeros((m, n))
        if self.code in (LAPLACIAN, EXPONENTIAL):
            out = np.empty((m, n))
            euclid = self.code == EXPONENTIAL
            if sp.issparse(A) or sp.issparse(B):
                A = sp.csr_matrix(A)
                B = sp.csr_matrix(B)
                A.sort_indices()
                B.sort_indices()
                return _laplacian_csr(A.indptr, A.indices, A.data, B.indptr, B.indices,
                                      B.data, self.gamma, out, euclid)
            return _laplacian_dense(np.ascontiguousarray(A), np.ascontiguousarray(B),
                                    self.gamma, out, euclid)
        if BT is not None and sp.issparse(A) and not sp.issparse(B):
            A = A.tocsr()
            G = _csr_gram(A.indptr, A.indices, A.data.astype(np.float32, copy=False), BT, n,
                          _scratch(out, m, n))
            if self.code not in (RBF, LINEAR):
                G = G.astype(np.float64)
        elif sp.issparse(A) or sp.issparse(B):
            G = A @ B.T
            G = G.toarray() if sp.issparse(G) else np.asarray(G)
            G = np.ascontiguousarray(G, dtype=np.float64)
        else:
            # float32 rows (the stores' dtype) give a float32 block: half the
            # memory traffic and twice the exp throughput of float64
            f32 = A.dtype == np.float32 and B.dtype == np.float32
            if m == 1:
                # one row would go to BLAS's gemv, whose sums round differently
                # from gemm's: a row's value would depend on the batch it came in
                G = np.dot(np.repeat(A, 2, axis=0), B.T)[:1]
            else:
                G = np.dot(A, B.T, out=_scratch(out, m, n)) if f32 and out is not None \
                    else np.dot(A, B.T)
            if G.dtype != np.float32 or self.code not in (RBF, LINEAR):
                G = G.astype(np.float64)
        if self.code == LINEAR:
            return G
        if sqa is None:
            sqa = sq_norms(A)
        if sqb is None:
            sqb = sq_norms(B)
        if self.code == RBF:
            # numpy's vectorised exp beats numba's scalar one by ~10x here
            t = G.dtype.type
            _rbf_arg(G, sqa.astype(t, copy=False), sqb.astype(t, copy=False), t(self.gamma))
            return np.exp(G, out=G)
        return _transform(G, sqa, sqb, self.code, self.gamma, self.coef0, self.degree)


def estimate_beta(X, n_sample=5000, seed=0):
    """Mean squared distance between two distinct rows, estimated on a sample.

    ``1 / beta`` is the papers' default Gaussian width (``gamma="auto"``).
    Uses mean_{i != j} ||x_i - x_j||^2 = 2 m/(m-1) (mean ||x||^2 - ||mean x||^2).
    """
    n = X.shape[0]
    if n < 2:
        return 1.0
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=min(n, n_sample), replace=False))
    S = X[idx]
    m = S.shape[0]
    sq = sq_norms(S)
    mean = np.asarray(S.mean(axis=0), dtype=np.float64).ravel()
    beta = 2.0 * m / (m - 1) * (sq.mean() - mean @ mean)
    if not np.isfinite(beta):       # never a fallback width for rows of NaN or inf
        raise ValueError("the rows hold NaN or infinite values (or values too large to "
                         "square): no kernel width can be estimated")
    return float(beta) if beta > 0 else 1.0


# -- kernel columns of rows in memory (MMDA's in-memory route) ------------------

@njit(cache=True, nogil=True, fastmath=True)
def _kcol(X, j, code, gamma, out):
    """``out[i] = k(X_i, X_j)`` (float32 differences: no cancellation, and
    ``k(x, x) = 1`` exactly)."""
    n, d = X.shape
    g = np.float32(gamma)
    xj = X[j]
    for i in range(n):
        acc = np.float32(0.0)
        if code == LAPLACIAN:
            for c in range(d):
                acc += abs(X[i, c] - xj[c])
        else:
            for c in range(d):
                v = X[i, c] - xj[c]
                acc += v * v
            if code == EXPONENTIAL:
                acc = np.sqrt(acc)
        out[i] = np.exp(-g * acc)


@njit(cache=True, nogil=True)
def column_cached(X, j, code, gamma, GC, slot_of, id_of, ring):
    """The kernel column of row ``j`` from the cache ``GC`` [slots, rows] (a
    ring: the oldest column makes room), computed and stored if absent."""
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
def _project(X, rows, coef, code, gamma, GC, slot_of, id_of, ring):
    """``sum_r coef_r k(X_i, X_rows_r)`` for every row i (row by row of the
    expansion, in its order: the same sums whether cached or not)."""
    out = np.zeros(X.shape[0])
    for r in range(len(rows)):
        col = column_cached(X, rows[r], code, gamma, GC, slot_of, id_of, ring)
        c = coef[r]
        for i in range(X.shape[0]):
            out[i] += c * col[i]
    return out


class RowKernels:
    """Kernel columns of in-memory rows, shared by the directions of a fit:
    the rows in store-id order (``bind``), a ring of at most ``budget``
    bytes of float32 columns (a row's column is computed once while it stays)
    and the projections of every row onto finished directions (by their
    expansion, so a resumed fit gets the same values)."""

    BUDGET = 256 << 20

    def __init__(self, kernel, budget=None):
        self.kernel = kernel
        self.code = kernel_code(kernel.name)
        self.budget = self.BUDGET if budget is None else int(budget)
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
        self.GC = np.empty((slots, n), np.float32)
        self.slot_of = np.full(n, -1, np.int64)
        self.id_of = np.full(slots, -1, np.int64)
        self.ring = np.zeros(1, np.int64)
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
                                                 self.kernel.gamma, self.GC, self.slot_of,
                                                 self.id_of, self.ring)
            P[:, q] = col
        return P


RBF_TILE = 256     # rbf_rows: columns per tile of a batch's dot products


@njit(cache=True, nogil=True, error_model="numpy")
def rbf_rows(idx, dst, K, X, XT, sq, gamma, kbuf):
    """Rows ``idx`` of the kernel matrix into rows ``dst`` of ``K``:
    exp(-gamma max(sq_i + sq - 2 X X_i, 0)) (float32, as the kernel blocks;
    ``XT``: X transposed, C-contiguous; ``kbuf``: int32 scratch of m). Each
    tile of ``RBF_TILE`` columns of ``XT`` is read once for every row of the
    batch (one row at a time reads all of X for each row: memory-bound).
    Every dot product runs over the features in order, whatever the batch,
    so each value is bit for bit the same in any batch (and after any
    eviction) and the matrix of all rows exactly symmetric."""
    m, d = X.shape
    nb = len(idx)
    zero = np.float32(0.0)
    two = np.float32(2.0)
    G = np.empty((nb, RBF_TILE), np.float32)
    for j0 in range(0, m, RBF_TILE):
        w = min(j0 + RBF_TILE, m) - j0
        xr = XT[0, j0:j0 + w]
        for b in range(nb):
            xi = X[idx[b], 0]
            g = G[b]
            for j in range(w):
                g[j] = xi * xr[j]
        for k in range(1, d):
            xr = XT[k, j0:j0 + w]
            for b in range(nb):
                xi = X[idx[b], k]
                g = G[b]
                for j in range(w):
                    g[j] += xi * xr[j]
        for b in range(nb):
            si = sq[idx[b]]
            row = K[dst[b], j0:j0 + w]
            g = G[b]
            sr = sq[j0:j0 + w]
            for j in range(w):
                row[j] = -gamma * max(si + sr[j] - two * g[j], zero)
    for b in range(nb):
        exp_nonpos(K[dst[b]], K[dst[b]], kbuf)


def rbf_rows_on(idx, dst, K, X, XT, sq, gamma, n_jobs, batch):
    """:func:`rbf_rows` of ``idx`` into rows ``dst`` of ``K``, ``batch`` rows a
    task on ``n_jobs`` threads (:func:`for_blocks`; ``rbf_rows`` releases the
    GIL, and each value is the one any batch gives). A numba parallel loop
    would do the same for ~3 s more compile on a fresh install."""
    for_blocks(lambda a: rbf_rows(idx[a:a + batch], dst[a:a + batch], K, X, XT, sq, gamma,
                                  np.empty(X.shape[0], np.int32)),
               range(0, len(idx), batch), n_jobs)
