"""The exact two-class L2-SVM (``method="auto"``'s small machines): SMO for
its MEB dual over every row of a machine held in memory, the same dual as
BVM, CVM and Frank-Wolfe solved to its optimum. One point per row, its
label's sign, a constant linear term. The kernel-row cache (:mod:`.rowcache`),
the block and lane reductions (:mod:`.reduce`) and the update pattern are the
exact L2-SVR's (:mod:`.svr`): a classification machine is that dual with one
sign per row and ``r = 1 / C``, without the second point's work."""
import numpy as np
from numba import njit

from .reduce import BLOCK, F0, F1, FAST, NEG, TINY, _lowest, _max_block
from ...options import default
from .rowcache import _ensure, _ensure_ahead, _rebuild, kernel_rows


@njit(cache=True, nogil=True, fastmath=FAST)
def _svc_scores(Ki, yi2, hi, qii, qd, y, h, w, s, g):
    """s[k]: the second-order score of row k against the row ``i`` to grow
    (0 without weight or with a gradient not above ``hi``); g[k]: its
    gradient (-inf without weight). ``yi2``: twice row i's label; float32,
    branch-free: the loop vectorises."""
    for k in range(len(h)):
        wk = np.float32(w[k])
        dk = h[k] - hi
        dk = dk * wk if dk > F0 else F0
        ek = qii + qd[k] - yi2 * y[k] * (Ki[k] + F1)
        ek = ek if ek > TINY else TINY
        s[k] = dk * dk / ek
        g[k] = h[k] if wk > F0 else NEG


@njit(cache=True, nogil=True, fastmath=FAST)
def _svc_update(Ki, Kj, ai, aj, y, h):
    """h += y (ai (K_i + 1) - aj (K_j + 1)) (float32); returns argmin h."""
    for k in range(len(h)):
        h[k] += y[k] * (ai * (Ki[k] + F1) - aj * (Kj[k] + F1))
    return _lowest(h, h)[0]


@njit(cache=True, nogil=True)
def svc_smo(K, slot, owner, last, st, X, XT, sq, gamma, kbuf, kd, r, a, y, u, tol, max_iter):
    """:func:`~.svr.svr_smo` for a two-class L2-SVM: one point per row, its label's
    sign ``y`` (float32 +-1), a constant linear term: minimise ``a'Qa`` on
    the simplex, ``Q = y y' (K + 1) + diag(r)``, in place (``r``: each row's
    1 / C, float64). ``u = (K + 1)(a y)`` on entry (not kept); the gradients
    ``h = 2 y u + 2 r a`` in float32.
    Stops when ``max_{a_j > 0} h_j - min h <= tol`` or after ``max_iter``
    steps. Returns (steps, the final gap)."""
    m = len(u)
    h = (2.0 * y * u + 2.0 * r * a).astype(np.float32)
    qd = (kd + 1.0 + r).astype(np.float32)
    w = np.zeros(m, np.uint8)
    for k in range(m):
        w[k] = 1 if a[k] > 0.0 else 0
    sc = np.empty(m, np.float32)
    gc = np.empty(m, np.float32)
    it = 0
    gap = np.inf
    i = _lowest(h, h)[0]
    while True:
        hi = h[i]
        Ki = _ensure_ahead(i, K, slot, owner, last, st, X, XT, sq, gamma, kbuf, h, h)
        qii = qd[i]
        yi = y[i]
        _svc_scores(Ki, np.float32(2.0) * yi, hi, qii, qd, y, h, w, sc, gc)
        best, bb, gmax = _max_block(sc, gc)
        gap = np.float64(gmax) - np.float64(hi)
        if gap <= tol or best <= F0 or it >= max_iter:
            break
        j = -1
        for k in range(bb, min(bb + BLOCK, m)):
            if sc[k] == best:
                j = k
                break
        Kj = _ensure(j, K, slot, owner, last, st, X, XT, sq, gamma, kbuf)  # Ki stays held
        e = max(np.float64(qii) + np.float64(qd[j])
                - 2.0 * np.float64(yi) * np.float64(y[j]) * (np.float64(Ki[j]) + 1.0), 1e-12)
        step = (np.float64(h[j]) - np.float64(hi)) / (2.0 * e)
        if step >= a[j]:
            step = a[j]
        a[i] += step
        h[i] += np.float32(2.0 * r[i] * step)
        w[i] = 1
        a[j] = 0.0 if step == a[j] else a[j] - step
        h[j] -= np.float32(2.0 * r[j] * step)
        if a[j] == 0.0:
            w[j] = 0
        i = _svc_update(Ki, Kj, np.float32(2.0 * step) * yi, np.float32(2.0 * step) * y[j],
                        y, h)
        it += 1
    return it, gap


# svc_exact: SMO stops when max_{a_j > 0} g_j - min g <= tol ||c||^2 (the option
# svc_tol). At the optimum every support vector's gradient is 2 ||c||^2 (its margin,
# times 2), so this asks each row's margin to be right within tol / 2 of the margin:
# LIBSVM's eps = 1e-3 on its unscaled dual (where the margin is 1) is tol = 2e-3.
def svc_exact(X, y, kernel, C, tol=default("svc_tol"), max_iter=None, K=None,
              cache_mb=default("kernel_cache_mb"), weight=None, start=default("svc_start"),
              blas_rows=default("kernel_rows_blas")):
    """The two-class L2-SVM's MEB dual over every row of ``X`` (labels ``y``,
    +-1): minimise ``a'Qa`` on the simplex, ``Q = y y' (K + 1) + I / C``
    (generalized-cvm sec. II, b = 1), with ``r = 1 / C``, to ``max_{a_j > 0} g_j - min g <= tol ||c||^2``.
    ``weight``: per-row multipliers of C (> 0; class and sample weights):
    row i's ``r_i = 1 / (C weight_i)``, the diagonal of ``Q`` (the
    center-constrained MEB of generalized-cvm sec. IV-A, solved the same way).
    The same QP as BVM, CVM and Frank-Wolfe, solved to its optimum (BVM's
    fixed-radius ball stops at a feasible center instead), by
    :func:`svc_smo`. Starts from
    equal weights on ``start`` rows of each class. ``K``: the rows'
    kernel rows (:func:`kernel_rows`), else a cache of ``cache_mb`` MB (the
    whole matrix, by BLAS, up to ``blas_rows`` rows). The defaults are the
    options' (:class:`streamcvm.options.Options`: ``svc_tol``, ``svc_start``,
    ``kernel_cache_mb``, ``kernel_rows_blas``)
    Returns a dict: ``a`` (the weights, on the simplex), ``c2`` (``a'Qa``),
    ``radius2`` (``a' diag(Q) - c2``), ``n_iter``, ``gap``,
    ``rows_computed``."""
    from ..kernels import sq_norms
    m = X.shape[0]
    y = np.asarray(y, np.float64)
    sq = sq_norms(X)
    rows = kernel_rows(kernel, X, sq, cache_mb=cache_mb, blas_rows=blas_rows) if K is None \
        else K
    done = int(rows[4][2])
    kd = np.asarray(kernel.diag(X, sq), np.float64)
    r = np.full(m, 1.0 / float(C)) if weight is None else \
        1.0 / (float(C) * np.asarray(weight, np.float64))

    def ridge(a):       # a' diag(r) a (one C: r a'a, as it always was computed)
        return float(r[0] * (a @ a)) if weight is None else float((r * a) @ a)
    pos = y > 0
    y32 = y.astype(np.float32)
    start = np.concatenate([np.flatnonzero(pos)[:start], np.flatnonzero(~pos)[:start]])
    a = np.zeros(m)
    a[start] = 1.0 / len(start)
    u = np.empty(m)
    _rebuild(*rows, np.where(pos, a, 0.0), np.where(pos, 0.0, a), u)
    cap = int(100 * m + 100000 if max_iter is None else max_iter)
    it = 0
    c2 = float((a * y) @ u) + ridge(a)
    for _ in range(8):
        # SMO to the rule at the last ||c||^2 (it only falls), then the gap
        # and ||c||^2 again from u in float64
        steps, _ = svc_smo(*rows, kd, r, a, y32, u, float(tol) * c2, cap - it)
        it += steps
        _rebuild(*rows, np.where(pos, a, 0.0), np.where(pos, 0.0, a), u)
        c2 = float((a * y) @ u) + ridge(a)
        g = 2.0 * y * u + 2.0 * r * a
        gap = float(g[a > 0].max() - g.min())
        if gap <= tol * c2 or it >= cap:
            break
    return {"a": a, "c2": c2, "radius2": float(a @ (kd + 1.0 + r)) - c2, "n_iter": int(it),
            "gap": gap, "rows_computed": int(rows[4][2]) - done}
