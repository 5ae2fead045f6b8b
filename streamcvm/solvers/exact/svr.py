"""The exact L2-SVR (``CVMRegressor`` on at most ``svr_exact_rows`` in-memory
rows): SMO for the L2-SVR dual (cvr paper eqs. 7-8) over every row of a
problem held in memory: the 2m signed points ``(x_i, s)`` of
:class:`~streamcvm.solvers.points.SignedPoints`, over the kernel-row cache of
:mod:`.rowcache`.

The dual is ``min f(a) = a'Q a - a'q`` on the simplex over the 2m points,
``Q = s s' (K + 1) + r I`` (``r = mu m / C``) and ``q = eta + (2/C) s t``. Both points of a
row share its kernel row: with ``u = (K + 1) beta``, ``beta_i = a_i+ - a_i-``, the gradient
of a point is ``g = 2 s u_i + 2 r a_p - q_p``, and a step changes both points' gradients of
every row by the same amount, opposite signs. Pairs and steps as
:func:`~streamcvm.solvers.smo.smo_simplex`'s.
Each step reads two kernel rows (contiguous) and makes two passes over the m rows on float32
gradients, written so that they vectorise (the argmin / argmax as block-and-lane reductions,
:mod:`.reduce`, then a search for the value in the winning block); one thread. No shrinking:
at the settings that matter most rows carry weight (measured: LIBSVM's rule set aside 7% of
cpu_act's rows), so SMO's rows are most rows, and a cache smaller than them recomputes rows.

The squared distance of a point from the center is ``||c||^2 - g_p`` and the squared radius
``||c||^2 - a'g``, so ``max_{a_j > 0} g_j - min g`` bounds how far the furthest point lies
outside the ball: the stopping rule.
"""
import numba
import numpy as np
from numba import njit

from ..kernels.rows import rbf_rows_on
from .reduce import BLOCK, F0, F1, FAST, NEG, TINY, _lowest, _max_block
from ...options import default
from .rowcache import RBF_BATCH, _claim_all, _ensure, _ensure_ahead, _rebuild, kernel_rows


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _scores(k, Ki, si2, hi, qii, qd, hp, hm, w):
    """Second-order scores of row k's two points against the point to grow
    (0 for a point without weight or with a gradient not above ``hi``), and
    their gradients (-inf without weight); float32 and branch-free, so that
    a loop over the rows vectorises."""
    kik = si2 * (Ki[k] + F1)
    base = qii + qd[k]
    wk = w[k]
    wp = np.float32(wk & 1)
    wm = np.float32(wk >> 1)
    # (selects, not max(): numba's max() has NaN branches that stop vectorising)
    dp = hp[k] - hi
    dp = dp * wp if dp > F0 else F0
    dm = hm[k] - hi
    dm = dm * wm if dm > F0 else F0
    ep = base - kik
    ep = ep if ep > TINY else TINY
    em = base + kik
    em = em if em > TINY else TINY
    sp = dp * dp / ep
    sm = dm * dm / em
    gp = hp[k] if wp > F0 else NEG
    gm = hm[k] if wm > F0 else NEG
    return sp, sm, gp, gm


@njit(cache=True, nogil=True, fastmath=FAST)
def _score_all(Ki, si2, hi, qii, qd, hp, hm, w, s, g):
    """s[k], g[k]: the larger of row k's two points' scores and gradients
    (:func:`_scores`); a plain loop over the rows, which numba vectorises."""
    for k in range(len(hp)):
        sp, sm, gp, gm = _scores(k, Ki, si2, hi, qii, qd, hp, hm, w)
        s[k] = sp if sp > sm else sm
        g[k] = gp if gp > gm else gm


@njit(cache=True, nogil=True, fastmath=FAST)
def _pick_j(Ki, si2, hi, qii, qd, hp, hm, w, s, g):
    """The weighted point ``j`` with the best second-order score against the
    point ``i`` to grow (``si2`` twice its sign, ``hi`` its gradient, ``Q_ii
    = qii``, its row's kernel values ``Ki``): returns (j, its sign, the
    largest gradient of a weighted point); ``s``, ``g``: float32 scratch of
    the rows' length. The same row's other point has ``Q_ii + Q_jj - 2 Q_ij
    = 4 (k_ii + 1) + 2 r``, which the general formula gives too; the point i
    itself scores 0. Every row's scores in one vectorised pass
    (:func:`_score_all`), then the best block (:func:`_max_block`), then the
    first point within it with the best score."""
    m = len(hp)
    _score_all(Ki, si2, hi, qii, qd, hp, hm, w, s, g)
    best, bb, gmax = _max_block(s, g)
    if best > F0:
        for k in range(bb, min(bb + BLOCK, m)):
            if s[k] == best:
                sp, sm, gp, gm = _scores(k, Ki, si2, hi, qii, qd, hp, hm, w)
                return k, (1.0 if sp == best else -1.0), gmax
    return -1, 0.0, gmax


@njit(cache=True, nogil=True, fastmath=FAST)
def _update(Ki, Kj, a1, a2, hp, hm):
    """h += +-(a1 (K_i + 1) - a2 (K_j + 1)) for both signs (float32);
    returns the smallest h's row and sign (:func:`_lowest`)."""
    for k in range(len(hp)):
        d = a1 * (Ki[k] + F1) - a2 * (Kj[k] + F1)
        hp[k] += d
        hm[k] -= d
    return _lowest(hp, hm)


@njit(cache=True, nogil=True)
def svr_smo(K, slot, owner, last, st, X, XT, sq, gamma, kbuf, kd, ct, eta, r, ap, am, u,
            tol, rel_tol, max_iter, check_every):
    """Minimise ``a'Qa - a'q`` over the simplex of the 2m points, in place.

    ``K, slot, owner, last, st, X, XT, sq, gamma, kbuf``: the kernel rows
    (:func:`kernel_rows`: float32, a cache of rows computed when needed and
    not held), ``kd`` the kernel's diagonal (float64),
    ``ct = (2/C) t`` (float64), ``eta`` and ``r`` as the module says;
    ``ap``, ``am``: the weights of the points ``(i, +1)`` and ``(i, -1)``
    (on the simplex on entry); ``u = (K + 1)(ap - am)`` on entry (not kept).
    The gradients are kept less eta, ``h = g + eta`` (of the size of the
    residuals over C: float32 holds them to ~1e-7 relative), and updated
    in float32. Stops when ``max_{a_j > 0} g_j - min g <= max(tol, rel_tol
    R^2)`` over every point (``R^2 = a'q - ||c||^2``, ``||c||^2 = (a'g +
    a'q) / 2``, computed every ``check_every`` steps) or after ``max_iter``
    steps. Returns (steps, the final gap)."""
    m = len(u)
    hp = (2.0 * u + 2.0 * r * ap - ct).astype(np.float32)
    hm = (-2.0 * u + 2.0 * r * am + ct).astype(np.float32)
    qd = (kd + 1.0 + r).astype(np.float32)
    w = np.zeros(m, np.uint8)
    for k in range(m):
        w[k] = (1 if ap[k] > 0.0 else 0) + (2 if am[k] > 0.0 else 0)
    sc = np.empty(m, np.float32)
    gc = np.empty(m, np.float32)
    it = 0
    gap = np.inf
    thr = tol
    i, si = _lowest(hp, hm)
    while True:
        if rel_tol > 0.0 and it % check_every == 0:
            ag = 0.0
            aq = 0.0
            for k in range(m):
                ag += ap[k] * (np.float64(hp[k]) - eta) + am[k] * (np.float64(hm[k]) - eta)
                aq += (ap[k] - am[k]) * ct[k] + (ap[k] + am[k]) * eta
            c2 = 0.5 * (ag + aq)
            thr = max(tol, rel_tol * (aq - c2))
        hi = hp[i] if si > 0 else hm[i]
        Ki = _ensure_ahead(i, K, slot, owner, last, st, X, XT, sq, gamma, kbuf, hp, hm)
        qii = qd[i]
        j, sj, gmax = _pick_j(Ki, np.float32(2.0 * si), hi, qii, qd, hp, hm, w, sc, gc)
        gap = np.float64(gmax) - np.float64(hi)
        if gap <= thr or j < 0 or it >= max_iter:
            break
        hj = hp[j] if sj > 0 else hm[j]
        Kj = _ensure(j, K, slot, owner, last, st, X, XT, sq, gamma, kbuf)  # Ki stays held
        e = max(np.float64(qii) + np.float64(qd[j])
                - 2.0 * si * sj * (np.float64(Ki[j]) + 1.0), 1e-12)
        step = (np.float64(hj) - np.float64(hi)) / (2.0 * e)
        aj = ap[j] if sj > 0 else am[j]
        if step >= aj:
            step = aj
        # the diagonal's share of the gradients first, then every row's
        rs = np.float32(2.0 * r * step)
        if si > 0:
            ap[i] += step
            hp[i] += rs
            w[i] |= 1
        else:
            am[i] += step
            hm[i] += rs
            w[i] |= 2
        if sj > 0:
            ap[j] = 0.0 if step == aj else ap[j] - step
            hp[j] -= rs
            if ap[j] == 0.0:
                w[j] &= 2
        else:
            am[j] = 0.0 if step == aj else am[j] - step
            hm[j] -= rs
            if am[j] == 0.0:
                w[j] &= 1
        i, si = _update(Ki, Kj, np.float32(2.0 * step * si), np.float32(2.0 * step * sj),
                        hp, hm)
        it += 1
    return it, gap


def svr_exact(X, t, kernel, C, mu, eta, tol, rel_tol=0.0, max_iter=None, K=None,
              cache_mb=default("kernel_cache_mb"), init_share=default("svr_init_share"),
              check_every=default("svr_check_every")):
    """Solve the L2-SVR dual over every row of ``X`` (targets ``t``, already centred as the points
    see them), ``C``, ``mu`` and ``eta`` as :class:`~streamcvm.solvers.points.SignedPoints` has
    them, to the stopping rule of :func:`svr_smo` (``tol``: on the gradients, whose differences
    times C / 2 are in the target's units). Starts from equal weights on the point of each of
    the ``init_share`` rows of largest |t|, with its target's sign (measured on cpu_act: every
    row, 1.15x the steps and every kernel row computed, 2x the time; one point, 1.7x the steps;
    a start from the residuals of a fit on a quarter of the rows took 1.3-3x the steps). Returns
    a dict: ``ap``, ``am`` (the weights of the + and - points), ``c2`` (``a'Qa``), ``radius2``,
    ``n_iter``, ``gap`` (``max_{a_j > 0} g_j - min g`` at the end), ``rows_computed`` (kernel
    rows computed, evictions' recomputations included). ``K``: the rows' kernel rows
    (:func:`kernel_rows`), if already made (the rows it holds are kept for the next fit), else a
    cache of ``cache_mb`` MB (None: the whole matrix). The defaults are the
    options' (:class:`streamcvm.options.Options`: ``kernel_cache_mb``,
    ``svr_init_share``, ``svr_check_every``)."""
    from ..kernels import sq_norms
    m = X.shape[0]
    t = np.asarray(t, np.float64)
    sq = sq_norms(X)
    rows = kernel_rows(kernel, X, sq, cache_mb=cache_mb) if K is None else K
    done = int(rows[4][2])
    kd = np.asarray(kernel.diag(X, sq), np.float64)
    r = float(mu) * m / float(C)
    ct = (2.0 / float(C)) * t
    # start: equal weights on the rows of the largest |t| (init_share of them),
    # each on its target's sign: the rows furthest out, most of them support
    # vectors at the end (the others' kernel rows may never be needed)
    on = np.abs(t) >= np.quantile(np.abs(t), 1.0 - init_share) if init_share < 1 else \
        np.ones(m, bool)
    ap = np.where(on & (t >= 0), 1.0, 0.0)
    am = np.where(on & (t < 0), 1.0, 0.0)
    z = ap.sum() + am.sum()
    ap /= z
    am /= z
    u = np.empty(m)
    miss = np.flatnonzero(on & (rows[1] < 0))   # the start's rows, on threads, if they fit
    if len(miss) <= len(rows[2]) - rows[4][1]:
        dst = _claim_all(miss, len(miss), rows[4][0] + 1, *rows[1:5])
        rbf_rows_on(miss, dst, rows[0], *rows[5:9], numba.get_num_threads(), RBF_BATCH)
    _rebuild(*rows, ap, am, u)
    cap = int(100 * m + 100000 if max_iter is None else max_iter)
    it = 0
    for _ in range(3):
        # SMO on float32 gradients, then the gap again from u in float64: more
        # steps in the rare case rounding left it above the stopping rule
        steps, _ = svr_smo(*rows, kd, ct, float(eta), r, ap, am, u, float(tol),
                           float(rel_tol), cap - it, int(check_every))
        it += steps
        _rebuild(*rows, ap, am, u)
        gap, thr = _exact_gap(u, ap, am, ct, r, float(eta), float(tol), float(rel_tol))
        if gap <= thr or it >= cap:
            break
    beta = ap - am
    c2 = float(beta @ u + r * (ap @ ap + am @ am))
    aq = float(eta + ct @ beta)
    return {"ap": ap, "am": am, "c2": c2, "radius2": aq - c2, "n_iter": int(it),
            "gap": float(gap), "rows_computed": int(rows[4][2]) - done}


def _exact_gap(u, ap, am, ct, r, eta, tol, rel_tol):
    """(max_{a_j > 0} g_j - min g, the stopping rule's threshold) in float64."""
    gp = 2.0 * u + 2.0 * r * ap - ct
    gm = -2.0 * u + 2.0 * r * am + ct
    w = np.concatenate([gp[ap > 0], gm[am > 0]])
    gap = float(w.max() - min(gp.min(), gm.min()))
    aq = float((ap - am) @ ct + eta)
    c2 = 0.5 * (float(ap @ (gp - eta) + am @ (gm - eta)) + aq)
    return gap, max(tol, rel_tol * (aq - c2))
