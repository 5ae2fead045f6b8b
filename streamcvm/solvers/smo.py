"""SMO for the MEB dual restricted to the core set (pure numba), and over
every point of a small L2-SVR (:func:`svr_exact`).

Minimises ``f(a) = a' Q a - a' q`` over the simplex ``{a >= 0, sum a = 1}`` where
``Q_ij = y_i y_j (K_ij + b) + [i == j] ic_i`` is the transformed kernel of the core vectors
(``K``: float32 kernel cache, ``y``: signs, ``ic``: the points' 1/C_i) and
``q = diag(Q) + Delta`` the linear term (maximising the center-constrained MEB dual
``a' (diag(Q) + Delta) - a'Qa``, docs/design.md section 2; the plain MEB when ``q`` is
constant). Pairs are chosen with LIBSVM's second-order rule: ``i = argmin grad`` (the
variable to grow), then the ``j`` with ``a_j > 0`` that maximises the guaranteed decrease
``(g_j - g_i)^2 / (Q_ii + Q_jj - 2 Q_ij)``; the step is exact, clipped at ``a_j``.
Warm-started from the given ``a`` (new variables enter at 0).

``svr_exact``: exact SMO for the L2-SVR dual (cvr paper eqs. 7-8) over every row of a
problem held in memory: the 2m signed points ``(x_i, s)`` of
:class:`~streamcvm.solvers.points.SignedPoints`, over a cache of the rows' kernel rows
(float32; RBF rows computed when needed and not held, at most ``CACHE_MB`` of them, least
recently used evicted: :func:`kernel_rows`).

The dual is ``min f(a) = a'Q a - a'q`` on the simplex over the 2m points,
``Q = s s' (K + 1) + r I`` (``r = mu m / C``) and ``q = eta + (2/C) s t``. Both points of a
row share its kernel row: with ``u = (K + 1) beta``, ``beta_i = a_i+ - a_i-``, the gradient
of a point is ``g = 2 s u_i + 2 r a_p - q_p``, and a step changes both points' gradients of
every row by the same amount, opposite signs. Pairs and steps as :func:`smo_simplex`'s.
Each step reads two kernel rows (contiguous) and makes two passes over the m rows on float32
gradients, written so that they vectorise (the argmin / argmax as block-and-lane reductions,
then a search for the value in the winning block); one thread. No shrinking: at the settings
that matter most rows carry weight (measured: LIBSVM's rule set aside 7% of cpu_act's rows),
so SMO's rows are most rows, and a cache smaller than them recomputes rows.

The squared distance of a point from the center is ``||c||^2 - g_p`` and the squared radius
``||c||^2 - a'g``, so ``max_{a_j > 0} g_j - min g`` bounds how far the furthest point lies
outside the ball: the stopping rule.
"""
import numba
import numpy as np
from numba import njit

from .kernels import rbf_rows, rbf_rows_on


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


# -- the exact L2-SVR over every row (svr_exact) ------------------------------
INIT_SHARE = 0.5       # rows weighted at the start (svr_exact)
CHECK_EVERY = 1000     # SMO steps between two scans of ||c||^2 (the relative stopping rule)
FAST = {"nnan", "ninf", "nsz"}      # max / min reductions vectorise; arithmetic as written
RBF_BATCH = 64     # kernel rows computed together (kernels.rbf_rows): X read once per batch

# The kernel rows (kernel_rows): a cache of ``cap`` rows of the m x m matrix, ``K`` (cap x m
# float32), LIBSVM's: ``slot[i]``: the row of K holding kernel row i (-1: not held),
# ``owner[s]``: the kernel row in K's row s (-1: free), ``last[s]``: when it was last used;
# ``st``: [clock, rows held, rows computed]. A miss takes a free row of K, else the least
# recently used one (never one used since ``since``: the rows of the step or batch at
# hand). With cap = m (the whole matrix) nothing is ever evicted. Smaller caches cost
# recomputed rows: SMO without shrinking sweeps over most rows between two uses of one
# (house_16H, 79% of the rows held: 1.6x the rows computed; 32%: 16x).

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
    time (:func:`~.kernels.rbf_rows`); none evicts a row used since ``since`` (the
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
    n = 0
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
        _compute(np.array([i], np.int64), 1, st[0], K, slot, owner, last, st, X, XT, sq,
                 gamma, kbuf)
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


BLOCK = 256     # rows per block of the argmin / argmax passes
LANES = 16      # running minima / maxima per block
F0 = np.float32(0.0)
F1 = np.float32(1.0)
TINY = np.float32(1e-12)
NEG = np.float32(-np.inf)


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
def _max_block(s, g):
    """(max s, the first block of ``BLOCK`` rows holding it, max g): each
    block reduced in ``LANES`` running maxima (a loop numba vectorises; one
    running maximum would not be)."""
    m = len(s)
    best = NEG
    gmax = NEG
    bb = -1
    accs = np.empty(LANES, np.float32)
    accg = np.empty(LANES, np.float32)
    for b0 in range(0, m, BLOCK):
        b1 = min(b0 + BLOCK, m)
        n = b0 + (b1 - b0) // LANES * LANES
        accs[:] = NEG
        accg[:] = NEG
        for k0 in range(b0, n, LANES):
            for l in range(LANES):
                v = s[k0 + l]
                accs[l] = v if v > accs[l] else accs[l]
                v = g[k0 + l]
                accg[l] = v if v > accg[l] else accg[l]
        bs = NEG
        for k in range(n, b1):
            bs = max(bs, s[k])
            gmax = max(gmax, g[k])
        for l in range(LANES):
            bs = max(bs, accs[l])
            gmax = max(gmax, accg[l])
        if bs > best:
            best = bs
            bb = b0
    return best, bb, gmax


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


@njit(cache=True, nogil=True, fastmath=FAST)
def _lowest(hp, hm):
    """The smallest h: (row, sign). Blocks and lanes as :func:`_max_block`."""
    m = len(hp)
    lo = np.float32(np.inf)
    bb = 0
    acc = np.empty(LANES, np.float32)
    for b0 in range(0, m, BLOCK):
        b1 = min(b0 + BLOCK, m)
        n = b0 + (b1 - b0) // LANES * LANES
        acc[:] = np.float32(np.inf)
        for k0 in range(b0, n, LANES):
            for l in range(LANES):
                p = hp[k0 + l]
                q = hm[k0 + l]
                v = p if p < q else q
                acc[l] = v if v < acc[l] else acc[l]
        bl = np.float32(np.inf)
        for k in range(n, b1):
            bl = min(bl, min(hp[k], hm[k]))
        for l in range(LANES):
            bl = min(bl, acc[l])
        if bl < lo:
            lo = bl
            bb = b0
    return _argmin_in(hp, hm, bb, lo)


@njit(cache=True, nogil=True)
def _argmin_in(hp, hm, b0, lo):
    """The first row from ``b0`` holding the value ``lo``: (row, sign)."""
    for k in range(b0, len(hp)):
        if hp[k] == lo:
            return k, 1.0
        if hm[k] == lo:
            return k, -1.0
    return -1, 0.0


@njit(cache=True, nogil=True)
def svr_smo(K, slot, owner, last, st, X, XT, sq, gamma, kbuf, kd, ct, eta, r, ap, am, u,
            tol, rel_tol, max_iter):
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
    a'q) / 2``, computed every ``CHECK_EVERY`` steps) or after ``max_iter``
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
        if rel_tol > 0.0 and it % CHECK_EVERY == 0:
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


CACHE_MB = 2000     # kernel_rows: the default cache of rows (MB): the bench's SVR(cache_size=2000)
CACHE_MIN_ROWS, BLAS_ROWS = 2, 4096  # a step's rows i, j; kernel_rows(blas=True) by BLAS up to


def cache_rows(m, cache_mb=CACHE_MB):
    """Kernel rows of m values a cache of ``cache_mb`` MB holds (float32): at
    most m, at least ``CACHE_MIN_ROWS``; None: every row (the whole matrix)."""
    if cache_mb is None:
        return m
    return int(min(m, max(CACHE_MIN_ROWS, cache_mb * 2 ** 20 // (4 * max(m, 1)))))


def kernel_rows(kernel, X, sq=None, lazy=True, block=2048, cache_mb=CACHE_MB, blas=False):
    """The rows' kernel rows for :func:`svr_smo`, as a tuple ``(K, slot,
    owner, last, st, X, XT, sq, gamma, kbuf)`` (the cache above). Dense rows
    with the RBF kernel and ``lazy``: a cache of :func:`cache_rows` rows
    (``cache_mb``; None: every row), each computed when SMO needs it and does
    not hold it (:func:`~.kernels.rbf_rows`; memory never used is never paged in).
    Others, and ``blas`` up to ``BLAS_ROWS`` rows: the whole m x m matrix,
    computed first (:meth:`Kernel.block`; RBF by rbf_rows if not ``lazy``)."""
    import scipy.sparse as sp
    from .kernels import RBF, sq_norms
    m = X.shape[0]
    sq = sq_norms(X) if sq is None else sq
    kbuf = np.empty(max(m, 1), np.int32)
    rbf = kernel.code == RBF and not sp.issparse(X)
    rbf, lazy = (False, False) if rbf and blas and m <= BLAS_ROWS else (rbf, lazy)
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


def svr_exact(X, t, kernel, C, mu, eta, tol, rel_tol=0.0, max_iter=None, K=None,
              cache_mb=CACHE_MB):
    """Solve the L2-SVR dual over every row of ``X`` (targets ``t``, already centred as the points
    see them), ``C``, ``mu`` and ``eta`` as :class:`~streamcvm.solvers.points.SignedPoints` has
    them, to the stopping rule of :func:`svr_smo` (``tol``: on the gradients, whose differences
    times C / 2 are in the target's units). Starts from equal weights on the point of each of
    the ``INIT_SHARE`` rows of largest |t|, with its target's sign (measured on cpu_act: every
    row, 1.15x the steps and every kernel row computed, 2x the time; one point, 1.7x the steps;
    a start from the residuals of a fit on a quarter of the rows took 1.3-3x the steps). Returns
    a dict: ``ap``, ``am`` (the weights of the + and - points), ``c2`` (``a'Qa``), ``radius2``,
    ``n_iter``, ``gap`` (``max_{a_j > 0} g_j - min g`` at the end), ``rows_computed`` (kernel
    rows computed, evictions' recomputations included). ``K``: the rows' kernel rows
    (:func:`kernel_rows`), if already made (the rows it holds are kept for the next fit), else a
    cache of ``cache_mb`` MB (None: the whole matrix)."""
    from .kernels import sq_norms
    m = X.shape[0]
    t = np.asarray(t, np.float64)
    sq = sq_norms(X)
    rows = kernel_rows(kernel, X, sq, cache_mb=cache_mb) if K is None else K
    done = int(rows[4][2])
    kd = np.asarray(kernel.diag(X, sq), np.float64)
    r = float(mu) * m / float(C)
    ct = (2.0 / float(C)) * t
    # start: equal weights on the rows of the largest |t| (INIT_SHARE of them),
    # each on its target's sign: the rows furthest out, most of them support
    # vectors at the end (the others' kernel rows may never be needed)
    on = np.abs(t) >= np.quantile(np.abs(t), 1.0 - INIT_SHARE) if INIT_SHARE < 1 else \
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
                           float(rel_tol), cap - it)
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
