"""The kernel-row cache of the exact SMO solvers (pure numba, LIBSVM's): a
cache of ``cap`` rows of the m x m kernel matrix of rows held in memory,
RBF rows computed when needed (:func:`~streamcvm.solvers.kernels.rows.rbf_rows`)
and the least recently used evicted, or the whole matrix computed first
(:func:`kernel_rows`).

``K`` (cap x m float32); ``slot[i]``: the row of K holding kernel row i (-1: not held),
``owner[s]``: the kernel row in K's row s (-1: free), ``last[s]``: when it was last used;
``st``: [clock, rows held, rows computed]. A miss takes a free row of K, else the least
recently used one (never one used since ``since``: the rows of the step or batch at
hand). With cap = m (the whole matrix) nothing is ever evicted. Smaller caches cost
recomputed rows: SMO without shrinking sweeps over most rows between two uses of one
(house_16H, 79% of the rows held: 1.6x the rows computed; 32%: 16x).
"""
import numpy as np
from numba import njit

from ...options import default
from ..kernels.rows import rbf_rows

RBF_BATCH = 64     # kernel rows computed together (kernels.rbf_rows): X read once per batch

@njit(cache=True, nogil=True)
def _claim(i, since, slot, owner, last, st):
    """A row of K for kernel row i (free, else the least recently used one,
    last used before ``since``, whose kernel row is then no longer held);
    marks it used now."""
    cap = len(owner)
    if st[1] < cap:
        s = st[1]
        st[1] += 1
    else:
        s = -1
        for k in range(cap):
            if last[k] < since and (s < 0 or last[k] < last[s]):
                s = k
        slot[owner[s]] = -1
    owner[s] = i
    slot[i] = s
    st[0] += 1
    last[s] = st[0]
    return s


@njit(cache=True, nogil=True)
def _claim_all(miss, n, since, slot, owner, last, st):
    """A row of K for each of ``miss[:n]`` (:func:`_claim`), counted as computed."""
    dst = np.empty(n, np.int64)
    for a in range(n):
        dst[a] = _claim(miss[a], since, slot, owner, last, st)
    st[2] += n
    return dst


@njit(cache=True, nogil=True)
def _compute(miss, n, since, K, slot, owner, last, st, X, XT, sq, gamma, kbuf):
    """Kernel rows ``miss[:n]`` (not held) into the cache, ``RBF_BATCH`` at a
    time (:func:`~streamcvm.solvers.kernels.rows.rbf_rows`); none evicts a row used since ``since`` (the
    caller keeps fewer such rows than the cache holds)."""
    dst = _claim_all(miss, n, since, slot, owner, last, st)
    for a in range(0, n, RBF_BATCH):
        b = min(a + RBF_BATCH, n)
        rbf_rows(miss[a:b], dst[a:b], K, X, XT, sq, gamma, kbuf)


@njit(cache=True, nogil=True)
def _fill(idx, K, slot, owner, last, st, X, XT, sq, gamma, kbuf):
    """Kernel rows ``idx`` (fewer than the cache's rows) held: the held ones
    marked used, the others computed (:func:`_compute`)."""
    since = st[0] + 1
    miss = np.empty(len(idx), np.int64)
    n = np.int64(0)         # (not the literal 0: numba would compile _compute twice)
    for i in idx:
        if slot[i] < 0:
            miss[n] = i
            n += 1
        else:
            st[0] += 1
            last[slot[i]] = st[0]
    _compute(miss, n, since, K, slot, owner, last, st, X, XT, sq, gamma, kbuf)


@njit(cache=True, nogil=True)
def _ensure(i, K, slot, owner, last, st, X, XT, sq, gamma, kbuf):
    """Kernel row i (a view of K's row), computed if not held, evicting
    neither the row used last (the step's other row) nor itself; marked used."""
    if slot[i] < 0:
        # one row: an int64, not the literal 1 (which numba would compile
        # _compute and _claim_all for once more)
        _compute(np.array([i], np.int64), np.int64(1), st[0], K, slot, owner, last, st, X, XT,
                 sq, gamma, kbuf)
    else:
        st[0] += 1
        last[slot[i]] = st[0]
    return K[slot[i]]


@njit(cache=True, nogil=True)
def _ensure_ahead(i, K, slot, owner, last, st, X, XT, sq, gamma, kbuf, hp, hm):
    """Row i as :func:`_ensure`; when not held and the cache holds every row,
    computed in one batch with the ``RBF_BATCH - 1`` rows not held of the
    lowest gradients (the points SMO grows next; a smaller cache would evict
    rows for rows perhaps never used: 2.5x the rows computed on house_16H)."""
    if slot[i] < 0:
        idx = np.array([i], np.int64)
        if len(owner) == len(slot):
            miss = np.flatnonzero(slot < 0)
            miss = miss[miss != i]
            key = np.minimum(hp[miss], hm[miss])
            idx = np.concatenate((idx, miss[np.argsort(key)[:RBF_BATCH - 1]]))
        _compute(idx, len(idx), st[0] + 1, K, slot, owner, last, st, X, XT, sq, gamma, kbuf)
    return _ensure(i, K, slot, owner, last, st, X, XT, sq, gamma, kbuf)


@njit(cache=True, nogil=True)
def _rebuild(K, slot, owner, last, st, X, XT, sq, gamma, kbuf, ap, am, u):
    """u = (K + 1)(ap - am), from the rows with weight (K symmetric), in
    row order, as many at a time as the cache holds (their rows not held
    computed in batches first)."""
    m = len(u)
    w = np.flatnonzero((ap != 0.0) | (am != 0.0))
    step = max(len(owner) - 1, 1)
    u[:] = 0.0
    for a0 in range(0, len(w), step):
        part = w[a0:a0 + step]
        _fill(part, K, slot, owner, last, st, X, XT, sq, gamma, kbuf)
        for j in part:
            b = ap[j] - am[j]
            Kj = K[slot[j]]
            for k in range(m):
                u[k] += b * (np.float64(Kj[k]) + 1.0)


CACHE_MIN_ROWS = 2      # a step's rows i and j: the least a cache holds


def cache_rows(m, cache_mb=default("kernel_cache_mb")):
    """Kernel rows of m values a cache of ``cache_mb`` MB holds (float32): at
    most m, at least ``CACHE_MIN_ROWS``; None: every row (the whole matrix)."""
    if cache_mb is None:
        return m
    return int(min(m, max(CACHE_MIN_ROWS, cache_mb * 2 ** 20 // (4 * max(m, 1)))))


def kernel_rows(kernel, X, sq=None, lazy=True, block=2048, cache_mb=default("kernel_cache_mb"),
                blas_rows=0):
    """The rows' kernel rows for the exact SMO solvers (:func:`.svr.svr_smo`,
    :func:`.svc.svc_smo`), as a tuple ``(K, slot,
    owner, last, st, X, XT, sq, gamma, kbuf)`` (the cache above). Dense rows
    with the RBF kernel and ``lazy``: a cache of :func:`cache_rows` rows
    (``cache_mb``; None: every row), each computed when SMO needs it and does
    not hold it (:func:`~streamcvm.solvers.kernels.rows.rbf_rows`; memory never used is never paged in).
    Others, and up to ``blas_rows`` rows (the option ``kernel_rows_blas``
    for classification): the whole m x m matrix, computed first (:meth:`Kernel.block`; RBF by rbf_rows if not ``lazy``)."""
    import scipy.sparse as sp
    from ..kernels import sq_norms
    m = X.shape[0]
    sq = sq_norms(X) if sq is None else sq
    kbuf = np.empty(max(m, 1), np.int32)
    rbf = kernel.has("kernel_rows") and not sp.issparse(X)
    rbf, lazy = (False, False) if rbf and m <= blas_rows else (rbf, lazy)
    cap = cache_rows(m, cache_mb) if rbf and lazy else m
    K = np.empty((cap, m), np.float32)
    st = np.zeros(3, np.int64)
    slot = np.full(m, -1, np.int64)
    owner = np.full(cap, -1, np.int64)
    last = np.zeros(cap, np.int64)
    if rbf:
        X32 = np.ascontiguousarray(X, np.float32)
        rows = (K, slot, owner, last, st, X32, np.ascontiguousarray(X32.T),
                np.asarray(sq, np.float32), np.float32(kernel.gamma), kbuf)
        if not lazy:
            _fill(np.arange(m), *rows)
        return rows
    flat = K.reshape(-1)
    for a in range(0, m, block):
        b = min(a + block, m)
        blk = kernel.block(X[a:b], X, sq[a:b], sq, out=flat[a * m:b * m])
        if blk.dtype != np.float32 or not np.shares_memory(blk, K):
            K[a:b] = blk
    slot[:] = owner[:] = np.arange(m)
    st[:] = m
    return (K, slot, owner, last, st, np.zeros((1, 1), np.float32),
            np.zeros((1, 1), np.float32), np.zeros(1, np.float32), np.float32(0.0), kbuf)
