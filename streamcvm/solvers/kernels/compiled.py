"""The compiled element kernels behind :meth:`Kernel.block
<streamcvm.solvers.kernels.Kernel.block>` (pure numba): Gram matrices turned
into kernel blocks in place, and the L1 / L2 distance kernels from the
differences. Each kernel class (:mod:`.distance`, :mod:`.dot`) chooses which
of these it calls; nothing here knows a kernel's name.
"""
import numpy as np
from numba import njit, prange

from .expf import exp_nonpos


@njit(cache=True, nogil=True, parallel=True, fastmath=True)
def dot_transform(G, sqa, sqb, normalized, gamma, coef0, degree):
    """In place: Gram matrix A B' -> (gamma a'b + coef0)^degree, divided by
    sqrt(k(a, a) k(b, b)) when ``normalized`` (the normalised polynomial)."""
    m, n = G.shape
    for i in prange(m):
        for j in range(n):
            g = G[i, j]
            if not normalized:
                G[i, j] = (gamma * g + coef0) ** degree
            else:
                num = (gamma * g + coef0) ** degree
                den = np.sqrt(((gamma * sqa[i] + coef0) ** degree) * ((gamma * sqb[j] + coef0) ** degree))
                G[i, j] = num / den if den > 0 else 0.0
    return G


@njit(cache=True, nogil=True, parallel=True, fastmath=True)
def l1_l2_dense(A, B, gamma, out, euclid=False):
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
def l1_l2_csr(ap, ai, ax, bp, bi, bx, gamma, out, euclid=False):
    """:func:`l1_l2_dense` for CSR rows with sorted indices (a merge)."""
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
def rbf_arg(G, sqa, sqb, gamma):
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
def _rbf_arg_row(g, a, sqb, gamma, out):
    """out = -gamma max(a + sqb - 2 g, 0) (one row of :func:`rbf_arg`)."""
    zero = g.dtype.type(0.0)
    for j in range(g.shape[0]):
        out[j] = -gamma * max(a + sqb[j] - 2.0 * g[j], zero)


@njit(cache=True, nogil=True)
def rbf_exp(G, sqa, sqb, gamma):
    """In place, a float32 Gram matrix -> the RBF block exp(-gamma
    max(||a||^2 + ||b||^2 - 2 a.b, 0)), row by row: the argument into a
    scratch row, then :func:`~.expf.exp_nonpos` from it into the row (from
    another array: in place, its loop would not vectorise). Faster than
    :func:`rbf_arg` and NumPy's float32 exp here; within 1e-7 relative of the
    exact exp, the values of the exact BVM's kernel rows."""
    m, n = G.shape
    arg = np.empty(n, np.float32)
    kbuf = np.empty(n, np.int32)
    for i in range(m):
        _rbf_arg_row(G[i], sqa[i], sqb, gamma, arg)
        exp_nonpos(arg, G[i], kbuf)
    return G


@njit(cache=True, nogil=True, fastmath=True)
def csr_gram(ip, ind, dat, BT, n, out):
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


# The codes the compiled loops switch on (a kernel's ``code``): only the kernels
# whose values some loop computes itself have one
RBF_CODE, L1_CODE, L2_CODE = 0, 1, 5
