"""Exact BVM (:func:`bvm_exact`): the ball vector machine over every row of
a problem held in memory, ``(K~a)`` kept for every row so no violator is
missed, in one compiled loop (on numba's threads), resumable from its state
(pure numba, and the buffers' allocation). Kept apart from its driver
(:mod:`.bvm`) so that editing one does not invalidate numba's cache of the
other (this loop's compile is most of what a first fit on a fresh install
waits for: ``tools/bench_compile.py``)."""
from collections import namedtuple

import numpy as np
from numba import njit, prange

from ..bvm_average import half_last_step, half_step_eps
from ..kernels.expf import exp_nonpos


@njit(cache=True, nogil=True)
def _min(v):
    """Smallest value of a non-empty float array. Eight running minima: one
    would chain every compare on the last (5x slower here); min is exact in
    any order."""
    n = len(v)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = v[0]
    k = n - n % 8
    for i in range(0, k, 8):
        a0 = min(a0, v[i])
        a1 = min(a1, v[i + 1])
        a2 = min(a2, v[i + 2])
        a3 = min(a3, v[i + 3])
        a4 = min(a4, v[i + 4])
        a5 = min(a5, v[i + 5])
        a6 = min(a6, v[i + 6])
        a7 = min(a7, v[i + 7])
    m = min(min(min(a0, a1), min(a2, a3)), min(min(a4, a5), min(a6, a7)))
    for i in range(k, n):
        m = min(m, v[i])
    return m


# The loop's resumable state: one record of float64 fields (``np.zeros(1,
# STATE)``; viewed as float64 it is the vector a snapshot stores, ``ex_state``)
STATE = np.dtype([
    ("level", "f8"),        # index of the eps level it is on
    ("steps", "f8"),        # steps taken
    ("core", "f8"),         # rows of nonzero weight
    ("c2", "f8"),           # ||c||^2
    ("ce2", "f8"),          # ce^2
    ("scale", "f8"),        # alpha = scale * (stored weights)
    ("best", "f8"),         # the furthest row
    ("bd", "f8"),           # its distance^2 to the center
    ("last_c2", "f8"),      # the last step: ||c||^2 and ce^2 before it,
    ("last_ce2", "f8"),
    ("last_bd", "f8"),      # its row's distance^2, its row, its beta
    ("last_z", "f8"),
    ("last_beta", "f8"),
    ("val_best", "f8"),     # the validation rule: the best error so far,
    ("val_stale", "f8"),    # levels since it improved
    ("passes", "f8"),       # passes over the rows
    ("active", "f8"),       # the shrinking: rows in the passes (0: all),
    ("active_cand", "f8"),  # candidates among them (the first positions),
    ("shrink_mark", "f8"),  # 1 + the steps at the last check for rows to leave (0: none),
    ("returned", "f8"),     # rows that came back violating, in all
])
# What each level ends with: one record a level (``hist[l]``; viewed as float64,
# levels x 9, what a snapshot stores, ``ex_hist``)
HIST = np.dtype([
    ("eps", "f8"),          # the level's eps
    ("steps", "f8"),        # steps at its end
    ("c2", "f8"),           # ||c||^2, ce^2 and core rows at its end
    ("ce2", "f8"),
    ("core", "f8"),
    ("cert_eps", "f8"),     # certified eps, ||c||^2 and ce^2 of the center returned
    ("c2_out", "f8"),       # (the averaged one on the last level, with ``average``)
    ("ce2_out", "f8"),
    ("val_error", "f8"),    # error rate of the held-out rows
])


def new_state():
    """A fresh state (zeros): :func:`bvm_exact` starts from the first row."""
    return np.zeros(1, STATE)


def new_hist(levels):
    """The per-level record of ``levels`` levels, NaN until solved."""
    return np.full(levels, np.nan, HIST)


def state_to_floats(state):
    """``state`` as the float64 vector a snapshot stores (a view)."""
    return np.ascontiguousarray(state).view(np.float64)


def state_from_floats(v):
    """A state from the vector of :func:`state_to_floats` (a copy; a shorter
    vector, from a snapshot of before the shrinking fields, gets zeros)."""
    out = np.zeros(len(STATE.names))
    v = np.asarray(v, np.float64).ravel()
    out[:len(v)] = v
    return out.view(STATE)


def hist_to_floats(hist):
    """``hist`` as the float64 matrix (levels x fields) a snapshot stores (a view)."""
    return np.ascontiguousarray(hist).view(np.float64).reshape(len(hist), len(HIST.names))


def hist_from_floats(m):
    """A per-level record from the matrix of :func:`hist_to_floats` (a copy)."""
    m = np.array(m, np.float64).reshape(-1, len(HIST.names))
    return m.view(HIST).reshape(len(m))


# The rows: dense, XT (d x n float32; the CSR and CSC arrays empty), or sparse,
# CSR ip, ind, dat and CSC cp, ri, cv (XT of shape (d, 0))
Rows = namedtuple("Rows", ["XT", "ip", "ind", "dat", "cp", "ri", "cv"])
# The run's numbers: the kernel's gamma (float32), the machine's bias b and 1/C,
# the stopping rules (margin_tol, max_steps, val_rule), the final averaging, where
# to pause (stop_at, -1: not), the tasks a pass, candidate rows (the rest held out)
# and the shrinking (whether, the margin, the least share of the rows that leaves)
Settings = namedtuple("Settings", ["gam", "b", "invC", "margin_tol", "max_steps", "average",
                                   "stop_at", "n_tasks", "n_cand", "val_rule", "shrink",
                                   "shrink_margin", "shrink_share"])
# The loop's buffers (:func:`_work`)
Work = namedtuple("Work", ["g", "gbuf", "arg", "col", "acc", "kbuf", "hv", "hi", "cand_v",
                           "cand_i", "msv", "msi", "XB", "nzk", "nzn", "skb", "ybk", "coef",
                           "bestk", "betas", "ws", "s32", "s64", "si", "order"])


@njit(cache=True, nogil=True)
def _above(hv, hi, a, b):
    """Entry ``a`` comes after entry ``b`` in (value, index) order."""
    return hv[a] > hv[b] or (hv[a] == hv[b] and hi[a] > hi[b])


@njit(cache=True, nogil=True)
def _sift_down(hv, hi, p, L):
    """Restore the max-heap ``hv[:L], hi[:L]`` below ``p``."""
    while True:
        c = 2 * p + 1
        if c >= L:
            break
        if c + 1 < L and _above(hv, hi, c + 1, c):
            c += 1
        if not _above(hv, hi, c, p):
            break
        hv[c], hv[p] = hv[p], hv[c]
        hi[c], hi[p] = hi[p], hi[c]
        p = c


@njit(cache=True, nogil=True)
def _heap_push(hv, hi, v, i):
    """Keep in ``(hv, hi)`` the ``len(hv)`` smallest (value, index) pairs
    offered: a max-heap on (value, index) with its root at 0, which ``(v,
    i)`` replaces when smaller."""
    if v > hv[0] or (v == hv[0] and i > hi[0]):
        return
    hv[0] = v
    hi[0] = i
    _sift_down(hv, hi, np.int64(0), len(hv))


@njit(cache=True, nogil=True, error_model="numpy")
def _exact_task(t, XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, ncol, P, b,
                invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi, r0, n):
    """Task ``t`` of one :func:`bvm_exact` pass over its contiguous blocks of
    the rows ``r0`` to ``n`` (those in the passes, ``[0, active)``, or those
    the shrinking set aside, ``[active, rows)``, when they come back): apply
    the batch of ``ncol`` steps (rows ``bestk``, ``XB``),
    ``(K~a) <- P (K~a) + sum_j coef_j k~(., best_j)``, reading each row once
    for all of them, and keep the ``len(hv[t])`` smallest ``(K~a)`` among the
    first ``n_cand`` rows of each class (the furthest rows: the next batch's
    candidates) in ``hv[t, class], hi[t, class]``. Each row's arithmetic is
    the same whatever the number of tasks. Dense rows: a batch row's dot
    products run over its nonzero features only (``nzk[j, :nzn[j]]``), in
    feature order: the same sums as over all of them."""
    T, B = gbuf.shape
    nblocks = (n - r0 + B - 1) // B
    zero = np.float32(0.0)
    two = np.float32(2.0)
    lo = t * nblocks // T
    up = (t + 1) * nblocks // T
    hvt = hv[t]
    hit = hi[t]
    for blk in range(lo, up):
        s0 = r0 + blk * B
        m = min(B, n - s0)
        if ncol > 0:
            ab = acc[t, :m]
            ab[:] = 0.0
            for j in range(ncol):
                # slices, not offset indices: loops over them vectorise
                if sparse:
                    gb = g[j, s0:s0 + m]
                else:
                    gb = gbuf[t, :m]
                    if nzn[j] == 0:
                        gb[:] = zero
                    else:
                        k = nzk[j, 0]
                        xj = XB[j, k]
                        xr = XT[k, s0:s0 + m]
                        for l in range(m):
                            gb[l] = xr[l] * xj
                        for q in range(1, nzn[j]):
                            k = nzk[j, q]
                            xj = XB[j, k]
                            xr = XT[k, s0:s0 + m]
                            for l in range(m):
                                gb[l] += xr[l] * xj
                sqb = sq32[s0:s0 + m]
                ar = arg[t, :m]
                cb = col[t, :m]
                sk = skb[j]
                for l in range(m):   # float32, as the kernel blocks
                    ar[l] = -gam * max(sqb[l] + sk - two * gb[l], zero)
                exp_nonpos(ar, cb, kbuf[t, :m])
                cj = coef[j] * ybk[j]
                for l in range(m):
                    ab[l] += cj * (cb[l] + b)
            yy = y[s0:s0 + m]
            kb = Ka[s0:s0 + m]
            for l in range(m):
                kb[l] = P * kb[l] + yy[l] * ab[l]
            for j in range(ncol):
                if s0 <= bestk[j] < s0 + m:
                    kb[bestk[j] - s0] += coef[j] * invC
        kb = Ka[s0:s0 + m]
        yy = y[s0:s0 + m]
        lim = min(m, n_cand - s0)
        if hvt.shape[1] == 1:
            # one candidate (one step per pass): the furthest row of all, from a
            # vectorised minimum; the first row holding it, as the heap would
            if lim > 0:
                mk = _min(kb[:lim])
                if mk < hvt[0, 0]:
                    for l in range(lim):
                        if kb[l] == mk:
                            hvt[0, 0] = mk
                            hit[0, 0] = s0 + l
                            break
            continue
        if lim <= 0 or _min(kb[:lim]) > max(hvt[0, 0], hvt[1, 0]):
            continue        # no row of this block beats either heap's worst
        for l in range(lim):
            v = kb[l]
            c = 1 if yy[l] > 0 else 0       # a heap per class: a step moves a class as one
            if v < hvt[c, 0] or (v == hvt[c, 0] and s0 + l < hit[c, 0]):
                _heap_push(hvt[c], hit[c], v, s0 + l)


# The pass as tasks on numba's threads (``t`` an int64, as in _bvm_exact's own
# loop over the tasks on one thread: one specialisation of the task)
@njit(cache=True, nogil=True, parallel=True)
def _exact_pass_par(XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, ncol, P, b,
                    invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi, r0, n):
    for t in prange(len(hv)):
        _exact_task(np.int64(t), XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk,
                    ncol, P, b, invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi, r0, n)


@njit(cache=True, nogil=True)
def _pass(T, XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, ncol, P, b, invC, y,
          Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi, r0, n):
    """One pass over the rows ``r0`` to ``n``: as ``T`` tasks on numba's
    threads, or on this one (the same arithmetic)."""
    hv[:] = np.inf
    hi[:] = len(Ka)
    if T > 1:
        _exact_pass_par(XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, ncol, P,
                        b, invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi, r0, n)
    else:
        _exact_task(np.int64(0), XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk,
                    ncol, P, b, invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi, r0, n)


@njit(cache=True, nogil=True)
def _load_row(XT, sparse, ip, ind, dat, cp, ri, cv, d, z, k, XB, nzk, nzn, g):
    """Row ``z`` as the batch's ``k``-th: its dense values and where they
    are not zero, or (sparse rows) its dot products with every row."""
    zero = np.float32(0.0)
    if sparse:
        gz = g[k]
        gz[:] = 0.0
        for p in range(ip[z], ip[z + 1]):
            v = dat[p]
            f = ind[p]
            for q in range(cp[f], cp[f + 1]):
                gz[ri[q]] += cv[q] * v
    else:
        q = 0
        for f in range(d):
            v = XT[f, z]
            XB[k, f] = v
            if v != zero:
                nzk[k, q] = f
                q += 1
        nzn[k] = q


@njit(cache=True, nogil=True)
def _reorder(order, m, XT, sq32, y, Ka, perm, s32, s64, si):
    """Rows ``order[:m]`` (positions) into positions ``0..m-1``, in place:
    the transposed rows, their norms, labels, ``(K~a)`` and original index."""
    for f in range(XT.shape[0]):
        xr = XT[f]
        for q in range(m):
            s32[q] = xr[order[q]]
        for q in range(m):
            xr[q] = s32[q]
    for q in range(m):
        s32[q] = sq32[order[q]]
    for q in range(m):
        sq32[q] = s32[q]
    for q in range(m):
        s64[q] = y[order[q]]
    for q in range(m):
        y[q] = s64[q]
    for q in range(m):
        s64[q] = Ka[order[q]]
    for q in range(m):
        Ka[q] = s64[q]
    for q in range(m):
        si[q] = perm[order[q]]
    for q in range(m):
        perm[q] = si[q]


@njit(cache=True, nogil=True)
def _shrink(na, nca, cut, alpha, Ka, XT, sq32, y, perm, order, s32, s64, si, least):
    """Rows of no weight whose ``(K~a)`` exceeds ``cut`` leave the passes
    (to positions ``[na', na)``, in order): the candidates that stay first,
    then the held-out rows that stay, each in their order. Returns ``(na',
    nca')``; nothing moves when fewer than ``least`` rows would leave."""
    k = 0
    for p in range(nca):
        if alpha[perm[p]] > 0.0 or Ka[p] <= cut:
            order[k] = p
            k += 1
    nca2 = k
    for p in range(nca, na):
        if Ka[p] <= cut:        # (held-out rows have no weight)
            order[k] = p
            k += 1
    na2 = k
    if na - na2 < max(least, 1):
        return na, nca
    for p in range(nca):
        if not (alpha[perm[p]] > 0.0 or Ka[p] <= cut):
            order[k] = p
            k += 1
    for p in range(nca, na):
        if not Ka[p] <= cut:
            order[k] = p
            k += 1
    _reorder(order, na, XT, sq32, y, Ka, perm, s32, s64, si)
    return na2, nca2


@njit(cache=True, nogil=True)
def _unshrink(XT, sparse, ip, ind, dat, cp, ri, cv, d, g, sq32, gam, b, invC, y, Ka, alpha, scale,
              perm, na, work, T):
    """The rows set aside (``[na, rows)``) back: their ``(K~a)`` from the
    weights (they have none of their own: one kernel value per core vector),
    in batches of the pass, then every row to its original position."""
    (_, gbuf, arg, col, acc, kbuf, hv, hi, _, _, _, _, XB, nzk, nzn, skb, ybk, coef, bestk, _, _,
     s32, s64, si, order) = work
    n = len(Ka)
    KB = XB.shape[0]
    first = True
    nk = np.int64(0)    # (an int64 from the start: numba compiles a literal 0 apart)
    for p in range(na + 1):
        if p < na:
            a = alpha[perm[p]]
            if not a > 0.0:
                continue
            _load_row(XT, sparse, ip, ind, dat, cp, ri, cv, d, p, nk, XB, nzk, nzn, g)
            skb[nk] = sq32[p]
            ybk[nk] = y[p]
            coef[nk] = a * scale
            bestk[nk] = p       # (below na: no row of [na, rows) is its own column)
            nk += 1
        if nk == KB or (p == na and nk > 0):
            _pass(T, XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, np.int64(nk),
                  0.0 if first else 1.0, b, invC, y, Ka, np.int64(0), gbuf, arg, col, acc, kbuf,
                  hv, hi, np.int64(na), np.int64(n))
            first = False
            nk = 0
    for p in range(n):          # back in order: position = original index
        order[perm[p]] = p
    _reorder(order, n, XT, sq32, y, Ka, perm, s32, s64, si)


@njit(cache=True, nogil=True)
def _merge_candidates(hv, hi, cv, ci, sv, si):
    """Per class, the ``L = hv.shape[2]`` smallest (value, index) pairs of all
    tasks' heaps into ``cv, ci`` (ascending within a class, the classes one
    after the other); returns how many there are (finite values), the
    smallest of all first. ``sv, si``: scratch of length L (no allocation:
    this runs once per pass)."""
    T, nclass, L = hv.shape
    k = 0
    for c in range(nclass):
        sv[:] = np.inf
        si[:] = np.iinfo(np.int64).max
        for t in range(T):
            for j in range(L):
                if np.isfinite(hv[t, c, j]):
                    _heap_push(sv, si, hv[t, c, j], hi[t, c, j])
        for end in range(L - 1, 0, -1):     # heap sort: ascending
            sv[0], sv[end] = sv[end], sv[0]
            si[0], si[end] = si[end], si[0]
            _sift_down(sv, si, np.int64(0), end)
        for j in range(L):
            if not np.isfinite(sv[j]):
                break
            cv[k] = sv[j]
            ci[k] = si[j]
            k += 1
    if k > 0:       # the furthest of all (smallest (value, index)) to the front
        j = 0
        for c in range(1, k):
            if cv[c] < cv[j] or (cv[c] == cv[j] and ci[c] < ci[j]):
                j = c
        cv[0], cv[j] = cv[j], cv[0]
        ci[0], ci[j] = ci[j], ci[0]
    return k


@njit(cache=True, nogil=True, error_model="numpy")
def _bvm_exact(rows, sq32, y, cfg, levels, alpha, hist, state, Ka, perm, work):
    """The loop of :func:`bvm_exact` (see there): the rows ``rows``
    (:data:`Rows`), the numbers ``cfg`` (:data:`Settings`), its state
    ``state[0]`` (:data:`STATE`) and per-level record ``hist``
    (:data:`HIST`), the rows' original index by position ``perm``, its
    buffers ``work`` allocated by the caller (:func:`_work`: numba would
    compile an allocation for each of their shapes and types, in every fresh
    install's first fit)."""
    XT, ip, ind, dat, cp, ri, cv = rows
    gam, b, invC, margin_tol, max_steps = cfg.gam, cfg.b, cfg.invC, cfg.margin_tol, cfg.max_steps
    average, stop_at, n_tasks, n_cand, val_rule = (cfg.average, cfg.stop_at, cfg.n_tasks,
                                                   cfg.n_cand, cfg.val_rule)
    st = state[0]
    d = XT.shape[0]
    sparse = XT.shape[1] == 0
    n = len(ip) - 1 if sparse else XT.shape[1]
    nc = n if n_cand < 0 else min(n_cand, n)
    kt = 1.0 + b + invC
    r2 = kt
    T = max(n_tasks, 1)
    (g, gbuf, arg, col, acc, kbuf, hv, hi, cand_v, cand_i, msv, msi, XB, nzk, nzn, skb, ybk, coef,
     bestk, betas, ws, s32, s64, si, order) = work
    KB = XB.shape[0]
    li0 = int(st.level)
    steps = int(st.steps)
    ncore = int(st.core)
    if steps == 0:          # a fresh start: the first step takes row 0
        c2, ce2, scale, best, bd = 0.0, r2, 1.0, 0, 0.0
        last_c2, last_ce2, last_bd, last_z, last_beta = 0.0, 0.0, 0.0, 0, 1.0
        val_best, val_stale = 2.0, 0.0
        ncand = 0
    else:
        c2, ce2, scale, best, bd = st.c2, st.ce2, st.scale, int(st.best), st.bd
        last_c2, last_ce2, last_bd = st.last_c2, st.last_ce2, st.last_bd
        last_z, last_beta = int(st.last_z), st.last_beta
        val_best, val_stale = st.val_best, st.val_stale
        ncand = -1          # choose the candidates again from Ka
    # the rows in the passes: positions [0, na), the candidates first ([0, nca));
    # those the shrinking set aside follow (see bvm_exact)
    na, nca = (int(st.active), int(st.active_cand)) if st.active > 0 else (n, nc)
    mark = st.shrink_mark - 1.0 if st.shrink_mark > 0 else float(steps)
    shrink = cfg.shrink and not sparse
    n_val = n - nc
    last = len(levels) - 1
    for li in range(li0, len(levels)):
        eps = levels[li]
        thr = (1.0 + eps) ** 2 * r2
        if li > li0:
            mark = float(steps)
        while True:
            if steps >= max_steps and na == n:
                break
            # a selection pass: no step, only the furthest rows
            if steps >= max_steps or ncand < 0:
                if na < n and steps >= max_steps:   # every row back, for the furthest
                    _unshrink(XT, sparse, ip, ind, dat, cp, ri, cv, d, g, sq32, gam, b, invC, y,
                              Ka, alpha, scale, perm, na, work, T)
                    na, nca = n, nc
                # no columns: an int64, not the literal 0 (which numba would
                # compile the pass and the task for once more)
                _pass(T, XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk,
                      np.int64(0), 1.0, b, invC, y, Ka, np.int64(nca), gbuf, arg, col, acc, kbuf,
                      hv, hi, np.int64(0), np.int64(na))
                ncand = _merge_candidates(hv, hi, cand_v, cand_i, msv, msi)
                best = cand_i[0]
                bd = c2 - 2.0 * cand_v[0] + kt + ce2
                if steps >= max_steps:
                    break
            if steps > 0 and bd <= thr:
                if na < n:      # none in the passes violates: the rows set aside too?
                    tau = 0.5 * (c2 + kt + ce2 - thr)
                    _unshrink(XT, sparse, ip, ind, dat, cp, ri, cv, d, g, sq32, gam, b, invC, y,
                              Ka, alpha, scale, perm, na, work, T)
                    for l in range(nc):
                        if Ka[l] < tau:
                            st.returned += 1.0
                    na, nca = n, nc
                    ncand = -1
                    mark = float(steps)
                    continue
                break   # no row violates at this level
            if stop_at >= 0 and steps >= stop_at:   # pause: what continues goes to state
                st.level, st.steps, st.core = li, steps, ncore
                st.c2, st.ce2, st.scale, st.best, st.bd = c2, ce2, scale, best, bd
                st.last_c2, st.last_ce2, st.last_bd = last_c2, last_ce2, last_bd
                st.last_z, st.last_beta = last_z, last_beta
                st.val_best, st.val_stale = val_best, val_stale
                st.active, st.active_cand, st.shrink_mark = na, nca, mark + 1.0
                return -1
            # a batch: the furthest row, then the furthest candidates while they violate
            # (nk an int64 from the start: numba compiles a literal 0 apart)
            nk = np.int64(0)
            z = best
            dz = bd
            while True:
                last_c2, last_ce2, last_bd, last_z = c2, ce2, dz, perm[z]
                if steps > 0:
                    beta = np.sqrt(r2 / dz)
                    c2 = beta * c2 + (1.0 - beta) * kt + (beta * beta - beta) * (dz - ce2)
                    ce2 *= beta * beta
                else:
                    beta = 0.0
                    c2 = kt
                w = 1.0 - beta
                last_beta = beta
                bestk[nk] = z
                betas[nk] = beta
                ws[nk] = w
                ybk[nk] = y[z]
                skb[nk] = sq32[z]
                _load_row(XT, sparse, ip, ind, dat, cp, ri, cv, d, z, nk, XB, nzk, nzn, g)
                # alpha = scale * (stored weights): one multiply per step, not n
                scale *= beta if steps > 0 else 1.0
                if scale < 1e-200:
                    for l in range(n):
                        alpha[l] *= scale
                    scale = 1.0
                oz = perm[z]
                if alpha[oz] == 0.0:
                    ncore += 1
                alpha[oz] += w / scale
                steps += 1
                nk += 1
                if nk == KB or ncand <= 0 or steps >= max_steps:
                    break
                # the candidates' (K~a) after this step; the next: the furthest
                # of them, if it still violates
                j = 0
                for c in range(ncand):
                    i = cand_i[c]
                    if sparse:
                        dot = g[nk - 1, i]
                    else:
                        dot = np.float32(0.0)
                        for q in range(nzn[nk - 1]):
                            k = nzk[nk - 1, q]
                            dot += XT[k, i] * XB[nk - 1, k]
                    a_ = -gam * max(sq32[i] + skb[nk - 1] - np.float32(2.0) * dot,
                                    np.float32(0.0))
                    kv = np.exp(np.float64(a_))
                    cand_v[c] = beta * cand_v[c] + w * (y[i] * ybk[nk - 1] * (kv + b))
                    if i == z:
                        cand_v[c] += w * invC
                    if cand_v[c] < cand_v[j]:
                        j = c
                z = cand_i[j]
                dz = c2 - 2.0 * cand_v[j] + kt + ce2
                if dz <= thr:
                    break
            # the pass: every row gets the batch's columns; the furthest rows
            # become the next candidates
            P = 1.0
            for j in range(nk - 1, -1, -1):
                coef[j] = ws[j] * P
                P *= betas[j]
            _pass(T, XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, nk, P, b,
                  invC, y, Ka, np.int64(nca), gbuf, arg, col, acc, kbuf, hv, hi, np.int64(0),
                  np.int64(na))
            ncand = _merge_candidates(hv, hi, cand_v, cand_i, msv, msi)
            best = cand_i[0]
            bd = c2 - 2.0 * cand_v[0] + kt + ce2
            st.passes += 1.0        # passes (what a pass costs is what threads change)
            if shrink and steps - mark >= max(ncore, 1):
                # rows far inside the ball (by shrink_margin times the boundary's
                # (K~a), (c2 + ce2) / 2) leave the passes until the level's end,
                # after as many steps as the core has vectors (what bringing
                # them back costs a row)
                mark = float(steps)
                cut = 0.5 * (c2 + kt + ce2 - thr) + cfg.shrink_margin * 0.5 * (c2 + ce2)
                na2, nca2 = _shrink(na, nca, cut, alpha, Ka, XT, sq32, y, perm, order, s32, s64,
                                    si, int(cfg.shrink_share * na))
                if na2 < na:
                    na, nca = na2, nca2
                    ncand = -1
        h = hist[li]
        h.eps = eps
        h.steps = steps
        h.c2 = c2
        h.ce2 = ce2
        h.core = ncore
        h.cert_eps = eps
        h.c2_out = c2
        h.ce2_out = ce2
        verr = np.nan
        if n_val > 0:       # (K~a) = y f(x) on a held-out row: wrong when not positive
            wrong = 0
            for l in range(nc, n):
                if Ka[l] <= 0.0:
                    wrong += 1
            verr = wrong / n_val
        h.val_error = verr
        if val_rule and n_val > 0:
            if verr < val_best - np.sqrt(val_best * (1.0 - val_best) / n_val) or val_best > 1.0:
                val_best = verr
                val_stale = 0.0
            else:
                val_stale += 1.0
                if verr < val_best:
                    val_best = verr
            if val_stale >= 2.0:
                last = li
                break
        elif margin_tol > 0 and eps * (2.0 + eps) * r2 / (2.0 * max(c2, 1e-300)) <= margin_tol:
            last = li
            break
    st.active, st.active_cand, st.shrink_mark = 0.0, 0.0, 0.0
    for l in range(n):
        alpha[l] *= scale
    # the last step, for a caller that moves Ka to the averaged center
    st.last_c2, st.last_ce2, st.last_bd = last_c2, last_ce2, last_bd
    st.last_z, st.last_beta = last_z, last_beta
    if average and steps > 1:
        # alpha before the last step, then that step at half its length
        w = 1.0 - last_beta
        alpha[last_z] -= w
        for l in range(n):
            alpha[l] /= last_beta
        alpha[last_z] = max(alpha[last_z], 0.0)
        bp, c2, ce2 = half_last_step(last_beta, last_c2, last_ce2, last_bd, kt)
        for l in range(n):
            alpha[l] *= bp
        alpha[last_z] += 1.0 - bp
        h = hist[last]
        h.cert_eps = half_step_eps(bd, last_bd, r2)   # bd: furthest row from c_T
        h.c2_out = c2
        h.ce2_out = ce2
    return last


def _work(n, d, cells, sparse, nc, T, opts, shrink=False):
    """:func:`_bvm_exact`'s buffers, for ``n`` rows (``nc`` candidates) of
    ``d`` features (``cells``: rows x features, or the nonzeros) and ``T``
    tasks a pass; ``opts``: the options of the exact pass (blocks of
    ``exact_block_rows`` rows, batches of ``exact_batch`` steps, ...);
    ``shrink``: the shrinking's scratch too (a row's worth per row)."""
    ns = n if shrink else 0
    B = max(min(n, opts.exact_block_rows), 1)
    # a problem that fits in cache takes one step per pass, on the furthest row:
    # batching saves memory traffic, and there is none to save (measured: 8 ns
    # a row and step at 16K x 22 features one at a time, 15 batched; 26 and 10
    # at 200K)
    KB = 1 if cells <= opts.exact_small_cells else opts.exact_batch
    # candidates per class (fewer on small problems, where keeping and sorting
    # them would cost more than the pass itself)
    L = 1 if KB == 1 else max(1, min(opts.exact_candidates, nc,
                                     max(opts.exact_min_candidates, nc // 32)))
    H = 1 if KB == 1 else 2     # one step per pass: one candidate, the furthest of all
    return Work(
        g=np.zeros((KB, n) if sparse else (0, 0), np.float32),  # sparse: a step's dots, scattered
        gbuf=np.empty((T, B), np.float32),          # per task scratch
        arg=np.empty((T, B), np.float32),
        col=np.empty((T, B), np.float32),
        acc=np.empty((T, B)),
        kbuf=np.empty((T, B), np.int32),
        hv=np.empty((T, H, L)),                     # each task's furthest rows per class
        hi=np.empty((T, H, L), np.int64),
        cand_v=np.empty(2 * L),                     # the merged candidates
        cand_i=np.zeros(2 * L, np.int64),
        msv=np.empty(L),                            # the merge's scratch
        msi=np.empty(L, np.int64),
        XB=np.zeros((KB, d), np.float32),           # the batch's rows, their nonzero
        nzk=np.zeros((KB if not sparse else 0, d), np.int64),   # features and how many,
        nzn=np.zeros(KB, np.int64),
        skb=np.zeros(KB, np.float32),               # norms, labels,
        ybk=np.zeros(KB),
        coef=np.zeros(KB),                          # their coefficients in the pass,
        bestk=np.zeros(KB, np.int64),               # rows, betas and weights
        betas=np.zeros(KB),
        ws=np.zeros(KB),
        s32=np.empty(ns, np.float32),               # the shrinking's scratch: the rows
        s64=np.empty(ns),                           # moved, their new order
        si=np.empty(ns, np.int64),
        order=np.empty(ns, np.int64))


def bvm_exact(XT, ip, ind, dat, cp, ri, cv, sq, y, gamma, b, invC, levels, margin_tol,
              max_steps, alpha, hist, average, state, Ka, stop_at, n_tasks, n_cand, val_rule,
              options=None, perm=None):
    """BVM over every row of a small problem, in one compiled loop.

    Algorithm 2/3 of the bvm paper in the smaller-ball space (sec. 3.3),
    stepping on the furthest rows: ``(K~a)`` is kept for every row, so the
    search is exact and a level ends when no row violates. Each pass over
    the rows applies a batch of up to ``exact_batch`` steps at once (their
    kernel columns computed from one read of each row: the pass is bound by
    memory traffic once the rows outgrow the caches) and keeps the
    ``exact_candidates`` furthest rows of each class (a step moves a whole
    class in or out by its bias term: the next violator is mostly of the
    other class): the batch's first step is the furthest row of all, the
    next ones the furthest candidate, whose distances are updated after
    every step, while it still violates (the
    O(1/eps) furthest-point variant of sec. 3.2, but for the rows the steps
    of one batch may push out, which the next pass sees). Dense rows come as
    ``XT``, the rows transposed (d x n, float32), so the dot products run
    along contiguous memory. Sparse rows come twice, CSR ``ip, ind, dat`` and
    CSC ``cp, ri, cv`` (with ``XT`` of shape (d, 0)): a step's dot products
    are scattered from the matrix columns of the chosen row's nonzeros,
    costing the nnz of those columns rather than of the matrix.

    Rows from ``n_cand`` on are held-out validation rows: their ``(K~a)`` is
    kept (it is ``y f(x)``, so it tells right from wrong) but they are never
    stepped on. ``hist[l]["val_error"]`` is their error rate at the end of level ``l``.
    ``levels``: the eps schedule. It stops at the first level whose margin
    slack is at most ``margin_tol`` (``margin_tol > 0``, ``eps="auto"``), or,
    with ``val_rule``, once the validation error has not improved on its best
    by more than that best's standard error for two levels.
    ``alpha`` (zeros, length n) receives the weights; ``hist`` (a :data:`HIST`
    array, one record a level: :func:`new_hist`) what each level ends with.
    With ``average`` the result is the mean of the last two centers
    (:func:`half_last_step`): its certified eps, ``||c||^2`` and ``ce^2`` are
    ``hist[last]``'s ``cert_eps``, ``c2_out`` and ``ce2_out``. Returns the
    index of the last level solved.

    Resumable: ``state`` (a :data:`STATE` array of one record, zeros to
    start: :func:`new_state`) and
    ``Ka`` (float64, n, zeros) carry the run; with ``stop_at >= 0`` it
    returns -1 at the first pass boundary at or after step ``stop_at``, with
    everything needed to continue in ``state``, ``Ka``, ``alpha`` (scaled
    weights until the end) and ``hist``; calling it again with them
    continues exactly where it was (the candidates are chosen again from
    ``Ka``). A run warm-started from another solver's center passes that
    state (:meth:`MEBSolver.fit_exact`). ``stop_at = -1``: run to the end.
    ``n_tasks > 1``: each pass runs as that many tasks on numba's threads,
    with the same result as one.

    Shrinking (dense rows, ``perm`` given, the option ``exact_shrink``): once
    a level has taken as many steps as the core has vectors, the rows of no
    weight whose ``(K~a)`` exceeds the violation threshold by
    ``exact_shrink_margin`` times the boundary's (``(||c||^2 + ce^2) / 2``)
    leave the passes, which then cost the rows that stay. When no row in
    the passes violates, the others come back, their ``(K~a)`` computed
    from the weights (one kernel value per core vector), and the level goes
    on if any of them violates: the level still ends only when no row does.
    The rows that stay are moved to the front, in place: ``XT``, ``sq``
    (then float32, the caller's array, which a paused run needs again),
    ``y`` and ``Ka`` are in the order of positions, ``perm`` (int64, the
    identity to start) holds each position's original row, and ``state``
    how many rows are in the passes. Every level ends with them all back in
    their order; a paused run continues from ``perm``, ``Ka`` and ``state``
    as from the rest (a snapshot stores ``perm``). ``alpha`` stays in the
    original order. ``perm=None``: no shrinking, and nothing of the
    caller's moves."""
    if state.dtype != STATE or state.shape != (1,) or hist.dtype != HIST or hist.ndim != 1:
        raise TypeError("bvm_exact: state is a STATE array of one record (new_state()), hist "
                        "a HIST array of one record a level (new_hist(levels))")
    sparse = XT.shape[1] == 0
    d = XT.shape[0]
    n = len(ip) - 1 if sparse else XT.shape[1]
    nc = n if n_cand < 0 else min(n_cand, n)
    T = max(int(n_tasks), 1)
    from ...options import Options
    opts = Options() if options is None else options
    shrink = perm is not None and opts.exact_shrink and not sparse
    if perm is None:
        perm = np.arange(n, dtype=np.int64)
        sq32 = np.asarray(sq).astype(np.float32)
    else:
        if not (isinstance(sq, np.ndarray) and sq.dtype == np.float32 and len(perm) == n
                and perm.dtype == np.int64):
            raise TypeError("bvm_exact: with perm, sq is the float32 norms (moved in place) "
                            "and perm an int64 array of one entry a row")
        sq32 = sq
    work = _work(n, d, len(dat) if sparse else n * d, sparse, nc, T, opts, shrink)
    gam = np.float32(gamma)
    cfg = Settings(gam=gam, b=float(b), invC=float(invC), margin_tol=float(margin_tol),
                   max_steps=int(max_steps), average=bool(average), stop_at=int(stop_at),
                   n_tasks=T, n_cand=int(n_cand), val_rule=bool(val_rule), shrink=shrink,
                   shrink_margin=float(opts.exact_shrink_margin),
                   shrink_share=float(opts.exact_shrink_share))
    return _bvm_exact(Rows(XT, ip, ind, dat, cp, ri, cv), sq32, y, cfg, levels, alpha, hist,
                      state, Ka, perm, work)
