"""Weighted sums of kernel blocks: ``sum_j w_j k(X_i, B_j)`` for many rows at
bounded memory (:func:`kernel_sums`), by the cheaper of a float64 sum over
the float32 block in place and a GEMM (:func:`block_times`), on threads
(:func:`for_blocks`). What predict, the compaction and the solvers' full
evaluations share.
"""
import threading

import numpy as np
import scipy.sparse as sp
from numba import njit

from ...options import default


def sq_norms(X):
    """Squared row norms (float64) of a dense array or CSR matrix."""
    if sp.issparse(X):
        X = X.tocsr()
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        return np.bincount(rows, weights=np.square(X.data, dtype=np.float64),
                           minlength=X.shape[0])
    X = np.asarray(X)
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


# Weights of at most few_machines columns (machines; the option of that name) are
# summed from a float32 kernel block in place (weighted_sum), more by a float64 GEMM
# (block_times, which copies the block to float64 first). A 256 x 4,000 block: 0.15
# against 0.32 ms for one machine, 0.52 against 0.59 at 4, about even at 6-9, 3.5
# against 1.5 ms at 25.
_FEW = default("few_machines")


def summed_in_place(W, few_machines=_FEW):
    """Whether :func:`block_times` sums the weights ``W`` over the float32
    block in place (a vector, or at most ``few_machines`` columns) rather
    than by a GEMM from a float64 copy."""
    return W.ndim == 1 or W.shape[1] <= few_machines


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


def block_times(G, W, cols=None, buf=None, few_machines=_FEW):
    """``G[:, lo:hi] @ W`` (``cols=(lo, hi)``, default every column) for a
    kernel block ``G`` and weights ``W`` [columns, machines], in float64, by
    the cheaper way: :func:`weighted_sum` over the block in place for at
    most ``few_machines`` machines, else a float64 copy of the columns (into
    ``buf``, a float64 scratch of at least that shape, if given: a fresh one
    per block costs page faults) and a GEMM."""
    W = np.asarray(W, np.float64)
    if summed_in_place(W, few_machines):
        return weighted_sum(G, W, cols)
    lo, hi = (0, G.shape[1]) if cols is None else cols
    Gd = np.empty((G.shape[0], hi - lo)) if buf is None else buf[:G.shape[0], :hi - lo]
    np.copyto(Gd, G[:, lo:hi])
    return Gd @ W


def block_rows_for(n_cols, values=1 << 22):
    """Rows per kernel block against ``n_cols`` columns: about ``values``
    kernel values (16 MB of float32), between 16 and 4096 rows."""
    return int(min(4096, max(16, values // max(n_cols, 1))))


def kernel_sums(kernel, X, B, w, sq=None, sqb=None, BT=None, n_jobs=1, few_machines=_FEW):
    """``sum_j w_j k(X_i, B_j)`` for every row ``X_i`` (``w``: a vector, or a
    matrix with a column per machine, summed by :func:`block_times` with
    ``few_machines``), from kernel blocks of
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
    wide = not summed_in_place(w, few_machines)   # many machines (MMDA's features): float64

    def one(a):
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = np.empty(step * B.shape[0], np.float32)
            local.wide = np.empty((step, B.shape[0])) if wide else None
        e = min(a + step, n)
        out[a:e] = block_times(kernel.block(X[a:e], B, sq[a:e], sqb, BT=BT, out=buf), w,
                               buf=local.wide, few_machines=few_machines)

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

    from ...data.parallel import thread_limits
    ex = ThreadPoolExecutor(jobs)
    try:
        with thread_limits(1, "blas"):
            for _ in ex.map(one, starts):
                pass
    finally:        # on an interrupt: the blocks not started are dropped
        ex.shutdown(wait=True, cancel_futures=True)
