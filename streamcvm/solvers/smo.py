"""SMO for the MEB dual restricted to the core set (pure numba): CVM's core
QP (generalized-cvm Alg. 1), and the transformed kernel ``_q`` the ball and
the methods share.

Minimises ``f(a) = a' Q a - a' q`` over the simplex ``{a >= 0, sum a = 1}`` where
``Q_ij = y_i y_j (K_ij + b) + [i == j] ic_i`` is the transformed kernel of the core vectors
(``K``: float32 kernel cache, ``y``: signs, ``ic``: the points' 1/C_i) and
``q = diag(Q) + Delta`` the linear term (maximising the center-constrained MEB dual
``a' (diag(Q) + Delta) - a'Qa``, docs/design.md section 2; the plain MEB when ``q`` is
constant). Pairs are chosen with LIBSVM's second-order rule: ``i = argmin grad`` (the
variable to grow), then the ``j`` with ``a_j > 0`` that maximises the guaranteed decrease
``(g_j - g_i)^2 / (Q_ii + Q_jj - 2 Q_ij)``; the step is exact, clipped at ``a_j``.
Warm-started from the given ``a`` (new variables enter at 0). The solvers over every
row of a problem held in memory are in :mod:`.exact`.
"""
import numpy as np
from numba import njit

@njit(cache=True, nogil=True, inline="always")
def _q(K, y, b, ic, i, j):
    v = y[i] * y[j] * (np.float64(K[i, j]) + b)
    if i == j:
        v += ic[i]
    return v


@njit(cache=True, nogil=True)
def smo_simplex(K, y, b, ic, alpha, g, n, tol, max_iter):
    """Solve in place over the first ``n`` core vectors; returns iterations.

    ``g[:n]`` is the gradient ``2 Q a - q`` on entry (kept up to date
    by the caller between calls: O(n) per new vector instead of O(n^2)) and
    is updated in place.

    Stops when ``max_{a_j > 0} g_j - min_i g_i <= tol`` (g = grad f), i.e.
    every core vector with weight is within ``tol`` (in squared distance)
    of the furthest core vector from the center.

    Per iteration it reads rows ``i`` and ``j`` of ``K`` (contiguous) and a
    precomputed diagonal of Q: reading ``K[k, k]`` for every k, a row's
    length apart, costs a cache line per element. The gradient update also finds
    the next ``argmin g``. Values are those of :func:`_q`, bit for bit.
    """
    qd = np.empty(n)
    for k in range(n):
        qd[k] = _q(K, y, b, ic, k, k)
    i = 0
    for k in range(1, n):
        if g[k] < g[i]:
            i = k
    it = 0
    while it < max_iter:
        gi = g[i]
        yi = y[i]
        Ki = K[i]
        gmax = -np.inf
        j = -1
        best = 0.0
        qii = qd[i]
        for k in range(n):
            if alpha[k] > 0.0:
                diff = g[k] - gi
                if diff > gmax:
                    gmax = diff
                if diff > 0.0 and k != i:
                    eta = qii + qd[k] - 2.0 * (yi * y[k] * (np.float64(Ki[k]) + b))
                    if eta <= 1e-12:
                        eta = 1e-12
                    score = diff * diff / eta
                    if score > best:
                        best = score
                        j = k
        if gmax <= tol or j < 0:
            break
        yj = y[j]
        Kj = K[j]
        eta = qii + qd[j] - 2.0 * (yi * yj * (np.float64(Ki[j]) + b))
        if eta <= 1e-12:
            eta = 1e-12
        step = (g[j] - gi) / (2.0 * eta)
        if step > alpha[j]:
            step = alpha[j]
        alpha[i] += step
        alpha[j] -= step
        if alpha[j] < 1e-15:
            alpha[j] = 0.0
        nxt = 0
        for k in range(n):      # rows i and j (K is symmetric): contiguous reads
            qi = yi * y[k] * (np.float64(Ki[k]) + b)
            if k == i:
                qi += ic[i]
            qj = yj * y[k] * (np.float64(Kj[k]) + b)
            if k == j:
                qj += ic[j]
            g[k] += 2.0 * step * (qi - qj)
            if g[k] < g[nxt]:
                nxt = k
        i = nxt
        it += 1
    return it
