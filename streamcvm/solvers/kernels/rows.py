"""Rows of the RBF kernel matrix of rows held in memory, for the exact SMO
solvers' kernel-row cache (pure numba, and a threaded driver): each value
bit for bit the same in any batch, so the matrix is exactly symmetric and a
row recomputed after an eviction equals the one evicted.
"""
import numpy as np
from numba import njit

from .expf import exp_nonpos
from .sums import for_blocks

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
