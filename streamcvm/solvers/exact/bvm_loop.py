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
    """A state from the vector of :func:`state_to_floats` (a copy)."""
    return np.array(v, np.float64).view(STATE)


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
Settings = namedtuple("Settings", ["gam", "b", "invC", "margin_tol", "max_steps", "average",
                                   "stop_at", "n_tasks", "n_cand", "val_rule"])
# The loop's buffers (:func:`_work`)
Work = namedtuple("Work", ["g", "gbuf", "arg", "col", "acc", "kbuf", "hv", "hi", "cand_v",
                           "cand_i", "msv", "msi", "XB", "nzk", "nzn", "skb", "ybk", "coef",
                           "bestk", "betas", "ws"])


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
    _sift_down(hv, hi, 0, len(hv))


@njit(cache=True, nogil=True, error_model="numpy")
def _exact_task(t, XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, ncol, P, b,
                invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi):
    """Task ``t`` of one :func:`bvm_exact` pass over its contiguous row
    blocks: apply the batch of ``ncol`` steps (rows ``bestk``, ``XB``),
    ``(K~a) <- P (K~a) + sum_j coef_j k~(., best_j)``, reading each row once
    for all of them, and keep the ``len(hv[t])`` smallest ``(K~a)`` among the
    first ``n_cand`` rows of each class (the furthest rows: the next batch's
    candidates) in ``hv[t, class], hi[t, class]``. Each row's arithmetic is
    the same whatever the number of tasks. Dense rows: a batch row's dot
    products run over its nonzero features only (``nzk[j, :nzn[j]]``), in
    feature order: the same sums as over all of them."""
    n = len(Ka)
    T, B = gbuf.shape
    nblocks = (n + B - 1) // B
    zero = np.float32(0.0)
    two = np.float32(2.0)
    lo = t * nblocks // T
    up = (t + 1) * nblocks // T
    hvt = hv[t]
    hit = hi[t]
    for blk in range(lo, up):
        s0 = blk * B
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
                    invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi):
    for t in prange(len(hv)):
        _exact_task(np.int64(t), XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk,
                    ncol, P, b, invC, y, Ka, n_cand, gbuf, arg, col, acc, kbuf, hv, hi)


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
            _sift_down(sv, si, 0, end)
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
def _bvm_exact(rows, sq32, y, cfg, levels, alpha, hist, state, Ka, work):
    """The loop of :func:`bvm_exact` (see there): the rows ``rows``
    (:data:`Rows`), the numbers ``cfg`` (:data:`Settings`), its state
    ``state[0]`` (:data:`STATE`) and per-level record ``hist``
    (:data:`HIST`), its buffers ``work`` allocated by the caller
    (:func:`_work`: numba would compile an allocation for each of their
    shapes and types, in every fresh install's first fit)."""
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
     bestk, betas, ws) = work
    KB = XB.shape[0]
    zero = np.float32(0.0)
    two = np.float32(2.0)
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
    n_val = n - nc
    last = len(levels) - 1
    for li in range(li0, len(levels)):
        eps = levels[li]
        thr = (1.0 + eps) ** 2 * r2
        while steps < max_steps:
            if ncand < 0:       # a selection pass: no step, only the furthest rows
                hv[:] = np.inf
                hi[:] = n
                # no columns: an int64, not the literal 0 (which numba would
                # compile the pass and the task for once more)
                if T > 1:
                    _exact_pass_par(XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef,
                                    bestk, np.int64(0), 1.0, b, invC, y, Ka, nc, gbuf, arg, col,
                                    acc, kbuf, hv, hi)
                else:
                    _exact_task(np.int64(0), XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk,
                                coef, bestk, np.int64(0), 1.0, b, invC, y, Ka, nc, gbuf, arg,
                                col, acc, kbuf, hv, hi)
                ncand = _merge_candidates(hv, hi, cand_v, cand_i, msv, msi)
                best = cand_i[0]
                bd = c2 - 2.0 * cand_v[0] + kt + ce2
            if steps > 0 and bd <= thr:
                break   # no row violates at this level
            if stop_at >= 0 and steps >= stop_at:   # pause: what continues goes to state
                st.level, st.steps, st.core = li, steps, ncore
                st.c2, st.ce2, st.scale, st.best, st.bd = c2, ce2, scale, best, bd
                st.last_c2, st.last_ce2, st.last_bd = last_c2, last_ce2, last_bd
                st.last_z, st.last_beta = last_z, last_beta
                st.val_best, st.val_stale = val_best, val_stale
                return -1
            # a batch: the furthest row, then the furthest candidates while they violate
            nk = 0
            z = best
            dz = bd
            while True:
                last_c2, last_ce2, last_bd, last_z = c2, ce2, dz, z
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
                if sparse:      # this step's dot products with every row
                    gz = g[nk]
                    gz[:] = 0.0
                    for p in range(ip[z], ip[z + 1]):
                        v = dat[p]
                        k = ind[p]
                        for q in range(cp[k], cp[k + 1]):
                            gz[ri[q]] += cv[q] * v
                else:       # the row, and where it is not zero
                    q = 0
                    for k in range(d):
                        v = XT[k, z]
                        XB[nk, k] = v
                        if v != zero:
                            nzk[nk, q] = k
                            q += 1
                    nzn[nk] = q
                # alpha = scale * (stored weights): one multiply per step, not n
                scale *= beta if steps > 0 else 1.0
                if scale < 1e-200:
                    for l in range(n):
                        alpha[l] *= scale
                    scale = 1.0
                if alpha[z] == 0.0:
                    ncore += 1
                alpha[z] += w / scale
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
                        dot = zero
                        for q in range(nzn[nk - 1]):
                            k = nzk[nk - 1, q]
                            dot += XT[k, i] * XB[nk - 1, k]
                    a_ = -gam * max(sq32[i] + skb[nk - 1] - two * dot, zero)
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
            hv[:] = np.inf
            hi[:] = n
            if T > 1:
                _exact_pass_par(XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef, bestk, nk,
                                P, b, invC, y, Ka, nc, gbuf, arg, col, acc, kbuf, hv, hi)
            else:
                _exact_task(np.int64(0), XT, sparse, g, sq32, gam, XB, nzk, nzn, skb, ybk, coef,
                            bestk, nk, P, b, invC, y, Ka, nc, gbuf, arg, col, acc, kbuf, hv, hi)
            ncand = _merge_candidates(hv, hi, cand_v, cand_i, msv, msi)
            best = cand_i[0]
            bd = c2 - 2.0 * cand_v[0] + kt + ce2
            st.passes += 1.0        # passes (what a pass costs is what threads change)
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


def _work(n, d, cells, sparse, nc, T, opts):
    """:func:`_bvm_exact`'s buffers, for ``n`` rows (``nc`` candidates) of
    ``d`` features (``cells``: rows x features, or the nonzeros) and ``T``
    tasks a pass; ``opts``: the options of the exact pass (blocks of
    ``exact_block_rows`` rows, batches of ``exact_batch`` steps, ...)."""
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
        ws=np.zeros(KB))


def bvm_exact(XT, ip, ind, dat, cp, ri, cv, sq, y, gamma, b, invC, levels, margin_tol,
              max_steps, alpha, hist, average, state, Ka, stop_at, n_tasks, n_cand, val_rule,
              options=None):
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
    with the same result as one."""
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
    work = _work(n, d, len(dat) if sparse else n * d, sparse, nc, T, opts)
    sq32 = np.asarray(sq).astype(np.float32)
    gam = np.float32(gamma)
    cfg = Settings(gam=gam, b=float(b), invC=float(invC), margin_tol=float(margin_tol),
                   max_steps=int(max_steps), average=bool(average), stop_at=int(stop_at),
                   n_tasks=T, n_cand=int(n_cand), val_rule=bool(val_rule))
    return _bvm_exact(Rows(XT, ip, ind, dat, cp, ri, cv), sq32, y, cfg, levels, alpha, hist,
                      state, Ka, work)
