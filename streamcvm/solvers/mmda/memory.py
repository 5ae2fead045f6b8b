"""MMDA's in-memory route (pure numba): Algorithm 1 of the mmda paper in one
compiled loop per direction, for rows held in memory, over the kernel
columns of :mod:`.rowkernels`.

:func:`_fit_memory` takes the loop's numbers as one :data:`SETTINGS` record
(:func:`settings`), the kernel-column cache as one
:class:`~.rowkernels.ColumnCache` and returns its per-level record as a
:data:`HISTORY` array; its core set lives in a :class:`CoreSet` of buffers,
grown (doubled) as rows enter and kept from direction to direction.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .rowkernels import column_cached
from .sor import _sor

# the numbers of one direction's loop (one record: one argument, one compiled signature)
SETTINGS = np.dtype([
    ("C", np.float64),              # the SVM's C (kt = 2 + 1/C, the diagonal's 1/C)
    ("patience", np.int64),         # violator-free samples that end an eps level
    ("sample_size", np.int64),      # rows drawn per sample (half of each side)
    ("init_size", np.int64),        # the first core rows (half of each side)
    ("max_core", np.int64),         # at most this many core rows (-1: no limit)
    ("tol", np.float64),            # SOR's last steps stop below this times 1'a
    ("loose", np.float64),          # ... while the core set grows: below this times eps 1'a
    ("omega", np.float64),          # SOR's extrapolation factor
    ("seed", np.int64),             # numba's draws
    ("code", np.int64),             # the kernel (its code in ..kernels.compiled)
    ("gamma", np.float64),          # the kernel's gamma
], align=True)

# what the loop records at the end of each eps level
HISTORY = np.dtype([
    ("core_size", np.int64),        # core rows
    ("c2", np.float64),             # the center's ||c||^2
    ("radius2", np.float64),        # R^2 = kt - c2
    ("sor_steps", np.int64),        # SOR steps so far
    ("samples", np.int64),          # samples drawn so far
], align=True)


def settings(**values):
    """One :data:`SETTINGS` record (a numpy scalar) of ``values``, every field given."""
    if set(values) != set(SETTINGS.names):
        raise TypeError(f"settings: missing {sorted(set(SETTINGS.names) - set(values))}, "
                        f"unknown {sorted(set(values) - set(SETTINGS.names))}")
    return np.array(tuple(values[k] for k in SETTINGS.names), SETTINGS)[()]


class CoreSet(NamedTuple):
    """The core set's buffers, ``cap`` = ``len(rows)`` entries of room
    (:func:`_grown` doubles it); the first ``t`` core rows and ``s`` earlier
    directions in use. The core matrix is ``[g; a]``-ordered: the ``s`` free
    coordinates first, so a row entering appends a row and a column."""
    rows: np.ndarray        # [cap] int64: the core rows (indices into X)
    ay: np.ndarray          # [cap]: a_j y_j of the core rows (the furthest row's scratch)
    Kf: np.ndarray          # [rows of X, cap + 16] float32: the core rows' kernel columns
    G: np.ndarray           # [>= s + cap, >= s + cap]: the core QP's matrix
    x: np.ndarray           # [s + cap]: the solution [g; a]
    grad: np.ndarray        # [s + cap]: its gradient G x - [0; 1]
    invd: np.ndarray        # [s + cap]: 1 / diag(G)


@njit(cache=True, nogil=True)
def _draw(cands, need, incore, out, m):
    """``need`` uniform random rows of ``cands`` not in the core set (with
    replacement, as ChunkPool.draw) appended to ``out[m:]``; returns the count."""
    if len(cands) == 0:
        return m
    for _ in range(need):
        for _try in range(64):
            r = cands[np.random.randint(0, len(cands))]
            if not incore[r]:
                out[m] = r
                m += 1
                break
    return m


@njit(cache=True, nogil=True, fastmath=True)
def _dot(k, w, t):
    """``sum_j k_j w_j`` over the first ``t`` entries (float32 ``k``)."""
    acc = 0.0
    for j in range(t):
        acc += np.float64(k[j]) * w[j]
    return acc


@njit(cache=True, nogil=True)
def _grow(a, n):
    """``a`` (a vector) in a longer buffer of ``n`` entries."""
    b = np.zeros(n, a.dtype)
    for i in range(len(a)):     # (a loop: a slice assignment compiles numba's shape error)
        b[i] = a[i]
    return b


@njit(cache=True, nogil=True)
def _buffers(Kf, G, s):
    """An empty :class:`CoreSet` for ``s`` earlier directions on the buffers
    ``Kf`` [rows, cap + 16] and ``G`` kept from the direction before (``G``
    anew when smaller than ``s + cap``): x = 0, G's block of the directions
    the identity (``U'U = I``)."""
    cap = Kf.shape[1] - 16
    if G.shape[0] < s + cap:
        G = np.empty((s + cap, s + cap))
    rows = np.empty(cap, np.int64)
    G[:s, :s] = 0.0
    x = np.zeros(s + cap)
    grad = np.zeros(s + cap)
    invd = np.ones(s + cap)
    for q in range(s):
        G[q, q] = 1.0
    return CoreSet(rows, np.zeros(cap), Kf, G, x, grad, invd)


@njit(cache=True, nogil=True)
def _grown(b, s, t):
    """``b`` (a :class:`CoreSet`, full: ``t`` = cap) in buffers of twice the
    room, its ``t`` rows' entries copied."""
    cap = 2 * len(b.rows)
    Kf = np.empty((b.Kf.shape[0], cap + 16), np.float32)
    for i in range(b.Kf.shape[0]):      # (loops, as in _grow)
        for j in range(t):
            Kf[i, j] = b.Kf[i, j]
    G = np.empty((s + cap, s + cap))
    for i in range(s + t):
        for j in range(s + t):
            G[i, j] = b.G[i, j]
    return CoreSet(_grow(b.rows, cap), _grow(b.ay, cap), Kf, G, _grow(b.x, s + cap),
                   _grow(b.grad, s + cap), _grow(b.invd, s + cap))


@njit(cache=True, nogil=True)
def _first_rows(neg, pos, init_size, incore, sample):
    """The first core rows: ``init_size`` random rows, the larger half of
    side ``neg`` then the other half of ``pos`` (:func:`_draw`), marked in
    ``incore``; a copy (``sample`` is the draws' buffer)."""
    k = _draw(neg, init_size - init_size // 2, incore, sample, np.int64(0))
    for i in range(k):
        incore[sample[i]] = True
    k2 = _draw(pos, init_size // 2, incore, sample, k)
    for i in range(k, k2):
        incore[sample[i]] = True
    return sample[:k2].copy()


@njit(cache=True, nogil=True)
def _furthest(b, sample, cnt, ys, P, s, t, c2, kt):
    """``(d2, i)``: the largest squared distance to the center among the
    sampled rows ``sample[:cnt]`` (not in the core set ``b``) and its index
    in ``sample`` (the first of equals): ``d2 = c2 - 2 y (K~a)_l / 1'a + kt``,
    ``(K~a)_l = sum_j a_j y_j (k_lj + 1) + sum_q g_q P_lq``."""
    x, ay = b.x, b.ay
    inv = 1.0 / x[s:s + t].sum()
    ay1 = 0.0
    for j in range(t):
        ay[j] = x[s + j] * ys[b.rows[j]]
        ay1 += ay[j]
    best, bk = -np.inf, -1
    for i in range(cnt):
        r = sample[i]
        ka = ay1 + _dot(b.Kf[r], ay, t)
        for q in range(s):
            ka += x[q] * P[r, q]
        d2 = c2 - 2.0 * ys[r] * ka * inv + kt
        if d2 > best:
            best, bk = d2, i
    return best, bk


@njit(cache=True, nogil=True)
def _enter(X, ys, P, r, st, cols, b, incore, s, t):
    """Row ``r`` enters the core set ``b`` at position ``t`` (``b`` has room):
    its kernel column (``column_cached`` over ``cols``) into ``Kf[:, t]``, its
    row and column of G (``y_r y_j (k_rj + 1)`` against the core rows,
    ``y_r P_rq`` against the directions, ``k_rr + 1 + 1/C`` on the diagonal),
    ``x_r = 0`` and its gradient ``(G x)_r - 1``."""
    Kf, G, x = b.Kf, b.G, b.x
    col = column_cached(X, r, st.code, st.gamma, cols)
    for i in range(X.shape[0]):
        Kf[i, t] = col[i]
    incore[r] = True
    b.rows[t] = r
    kk = s + t
    yr = ys[r]
    g = -1.0
    for j in range(t):
        v = yr * ys[b.rows[j]] * (np.float64(Kf[r, j]) + 1.0)
        G[kk, s + j] = v
        G[s + j, kk] = v
        g += v * x[s + j]
    for q in range(s):
        v = yr * P[r, q]
        G[kk, q] = v
        G[q, kk] = v
        g += v * x[q]
    G[kk, kk] = np.float64(Kf[r, t]) + 1.0 + 1.0 / st.C
    b.invd[kk] = 1.0 / G[kk, kk]
    x[kk] = 0.0
    b.grad[kk] = g + G[kk, kk] * x[kk]


@njit(cache=True, nogil=True)
def _start(b, s, t):
    """The first solve's start: alpha = 1/t on the ``t`` first rows, then the
    full gradient ``G x - [0; 1]`` once."""
    x, G = b.x, b.G
    for j in range(t):
        x[s + j] = 1.0 / t
    for j in range(s + t):
        acc = -1.0 if j >= s else 0.0
        for i in range(s + t):
            acc += G[j, i] * x[i]
        b.grad[j] = acc


@njit(cache=True, nogil=True)
def _solve(b, s, t, omega, rel):
    """SOR (:func:`.sor._sor`) on the core QP of ``b``, warm started from its
    ``x`` and ``grad`` (in place), to steps below ``rel * max(1'a, 1)``;
    returns the steps."""
    sa = b.x[s:s + t].sum()
    return _sor(b.G, b.x, b.grad, b.invd, s, s + t, omega, rel * max(sa, 1.0), 10_000_000)


@njit(cache=True, nogil=True)
def _center(b, s, t, kt):
    """``(c2, R2)`` of the core set ``b``'s solution: the center's ``||c||^2 =
    x'Gx / (1'a)^2 = (x'grad + 1'a) / (1'a)^2`` (eqs. 23, 35) and the radius
    ``R^2 = kt - c2``."""
    sa = b.x[s:s + t].sum()
    xg = 0.0
    for j in range(s + t):
        xg += b.x[j] * b.grad[j]
    c2 = (xg + sa) / (sa * sa)
    return c2, kt - c2


@njit(cache=True, nogil=True)
def _core_kernel(b, t):
    """K among the ``t`` core rows of ``b`` (float32, from their columns)."""
    K = np.empty((t, t), np.float32)
    for i in range(t):
        for j in range(t):
            K[i, j] = b.Kf[b.rows[i], j]
    return K


@njit(cache=True, nogil=True)
def _fit_memory(X, ys, neg, pos, P, levels, st, cols, Kf, G):
    """Algorithm 1 on rows ``X`` in memory (labels ``ys`` +-1, 0: neither
    side; sides ``neg`` / ``pos``; ``P`` [rows, s] the projections onto the
    directions before; ``levels`` the eps levels; ``st`` a :data:`SETTINGS`
    record; ``cols`` the :class:`~.rowkernels.ColumnCache`): the core set
    grows one furthest violator of a sample at a time (:func:`_furthest`,
    :func:`_enter`), the core matrix in place, its gradient kept up to date
    and SOR warm started from the previous solution (:func:`_solve`). A
    row's kernel column serves its distances to the center and its row of
    G. ``Kf`` [rows, cap + 16] and ``G``: the buffers of the direction
    before (:class:`CoreSet`).

    Returns (core rows, x = [g; a], G, K among the core rows (float32),
    steps, solves, history (a :data:`HISTORY` record per level), Kf, G (the
    buffers, grown, for the next direction))."""
    np.random.seed(st.seed)
    n = X.shape[0]
    s = P.shape[1]
    kt = 2.0 + 1.0 / st.C
    b = _buffers(Kf, G, s)
    incore = np.zeros(n, np.bool_)
    m = st.sample_size
    sample = np.empty(max(m, st.init_size), np.int64)
    hist = np.zeros(len(levels), HISTORY)
    draws = 0
    # an int64, not the literal 0: numba would compile every helper that takes t
    # once more for the literal (4 s of a fresh install's first MMDA fit)
    t = np.int64(0)
    steps = 0
    solves = 0
    first = _first_rows(neg, pos, st.init_size, incore, sample)
    c2 = 0.0
    R2 = 0.0
    for e in range(len(levels) + 1):
        calm = 0
        while calm < st.patience:
            if e == 0:              # the first rows enter, then one solve
                new = first
                calm = st.patience
            else:
                draws += 1
                cnt = _draw(neg, m - m // 2, incore, sample, np.int64(0))
                cnt = _draw(pos, m // 2, incore, sample, cnt)
                if cnt == 0:
                    break
                best, bk = _furthest(b, sample, cnt, ys, P, s, t, c2, kt)
                full = st.max_core >= 0 and t >= st.max_core
                eps = levels[e - 1]
                if best <= (1.0 + eps) ** 2 * R2 or full:
                    calm += 1
                    continue
                calm = 0
                new = sample[bk:bk + 1].copy()
            for r in new:
                if t == len(b.rows):
                    b = _grown(b, s, t)
                _enter(X, ys, P, r, st, cols, b, incore, s, t)
                t += 1
            if e == 0:               # alpha = 1/t, then the full gradient once
                _start(b, s, t)
            steps += _solve(b, s, t, st.omega, max(st.tol, st.loose * levels[max(e - 1, 0)]))
            solves += 1
            c2, R2 = _center(b, s, t, kt)
        if e > 0:
            h = hist[e - 1]
            h.core_size = t
            h.c2 = c2
            h.radius2 = R2
            h.sor_steps = steps
            h.samples = draws
    if st.loose > 0.0:             # the last core set's QP to the tolerance asked
        steps += _solve(b, s, t, st.omega, st.tol)
        hist[len(levels) - 1].sor_steps = steps
    return (b.rows[:t].copy(), b.x[:s + t].copy(), b.G[:s + t, :s + t].copy(),
            _core_kernel(b, t), steps, solves, hist, b.Kf, b.G)
