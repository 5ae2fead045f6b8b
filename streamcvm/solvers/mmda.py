"""MMDA's constrained MEB on a core set (mmda paper, sec. IV): the QP of one
large-margin direction orthogonal to the directions found before, solved by
SOR (Algorithm 3).

Directions are kernel expansions: ``u_q = sum_j c_qj phi(x_j)`` over rows
``X_q`` (unit norm, mutually orthogonal). For the core set's rows ``x_i``
with labels ``y_i``, the dual of eq. (2) is eq. (3):

    min_{a >= 0, g}  1/2 [a; g]' G [a; g] - 1'a,
    G = [[K^, B], [B', U'U]],  K^ = Y (K + 11' + I / C) Y,  B_iq = y_i u_q'phi(x_i)

(halved; ``U'U = I``). Its solution normalised by ``1'a`` is the
constrained MEB's (eq. 35), whose center's distance to a point is the one
formula of :func:`streamcvm.solvers.ball.distance2`. The new direction is
``w = sum_i a_i y_i phi(x_i) + sum_q g_q u_q`` (eq. 8).
"""
import numpy as np
from numba import njit

from ..data.sampling import SAMPLE_SIZE
from .kernels import RowKernels, column_cached

SOR_OMEGA = 1.0         # the extrapolation factor omega of Algorithm 3 (Gauss-Seidel: 1)


@njit(cache=True, nogil=True)
def _sor(G, x, grad, invd, s, n, omega, tol, max_iter):
    """Algorithm 3's loop on the leading ``n`` coordinates of ``x`` and their
    gradient, in place; the first ``s`` are free, the others ``>= 0``;
    ``invd`` = 1 / diag(G) (a vector: the diagonal is one page apart per
    entry in G). Each step moves the coordinate whose projected move is
    largest (the first of equals). Returns the steps.

    The moves are written to a buffer and their largest found by eight
    running maxima, then its first index by a scan, rather than in one loop
    that keeps the index: that loop waited on each compare before the next
    (optdigits' 50 features, 710K steps on up to ~300 coordinates: the whole
    fit took ~1.3x as long). The same arithmetic, so the same steps to the bit."""
    mv = np.empty(n)
    best = _moves(x, grad, invd, s, n, omega, mv)
    for step in range(1, max_iter + 1):
        if not best > tol:          # (no move at all: best = 0)
            return step
        bi = _first_equal(mv, best, n)
        x[bi] += mv[bi]
        _axpy(G[bi], grad, mv[bi], n)      # G is symmetric: its row, contiguous
        best = _moves(x, grad, invd, s, n, omega, mv)
    return max_iter


@njit(cache=True, nogil=True)
def _moves(x, grad, invd, s, n, omega, mv):
    """Every coordinate's projected move into ``mv``; returns the largest |move|."""
    for j in range(s):
        mv[j] = -omega * grad[j] * invd[j]
    _clipped_moves(x[s:n], grad[s:n], invd[s:n], omega, mv[s:n])
    return _abs_max(mv[:n])


@njit(cache=True, nogil=True)
def _clipped_moves(x, grad, invd, omega, mv):
    """The moves of coordinates ``>= 0``: to the clipped Gauss-Seidel value.
    (Indexed from 0 on slices: numba then knows the index is not negative and
    loads contiguous lanes; indexed by ``range(s, n)`` it compiled to gathers.)"""
    for k in range(len(x)):
        xj = x[k]
        v = xj - omega * grad[k] * invd[k]
        mv[k] = (v if v > 0.0 else 0.0) - xj


@njit(cache=True, nogil=True)
def _abs_max(v):
    """The largest |v_i| (0 for an empty v), by eight running maxima."""
    n = len(v)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    k = n - n % 8
    for i in range(0, k, 8):
        a0 = max(a0, abs(v[i]))
        a1 = max(a1, abs(v[i + 1]))
        a2 = max(a2, abs(v[i + 2]))
        a3 = max(a3, abs(v[i + 3]))
        a4 = max(a4, abs(v[i + 4]))
        a5 = max(a5, abs(v[i + 5]))
        a6 = max(a6, abs(v[i + 6]))
        a7 = max(a7, abs(v[i + 7]))
    m = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
    for i in range(k, n):
        m = max(m, abs(v[i]))
    return m


@njit(cache=True, nogil=True)
def _first_equal(v, m, n):
    """The first index ``i < n`` with ``|v_i| == m``."""
    for i in range(n):
        if abs(v[i]) == m:
            return i
    return n - 1


@njit(cache=True, nogil=True, fastmath=True)
def _axpy(row, y, a, n):
    for j in range(n):
        y[j] += row[j] * a


def sor(G, a0, g0, omega=SOR_OMEGA, tol=1e-8, max_iter=10_000_000):
    """Algorithm 3: coordinate steps on ``min 1/2 x'Gx - [1; 0]'x``, ``x = [a;
    g]``, ``a >= 0`` (the first ``len(a0)`` coordinates), each time on the
    coordinate whose projected step is largest, until no step exceeds
    ``tol``. Warm start from ``(a0, g0)``. Returns ``(a, g, steps)``.
    (:class:`MMDASolver` keeps ``[g; a]`` and its gradient in place instead.)"""
    t = len(a0)
    G = np.asarray(G, np.float64)
    perm = np.r_[np.arange(t, len(G)), np.arange(t)]        # [g; a]: the free ones first
    Gp = np.ascontiguousarray(G[np.ix_(perm, perm)])
    x = np.concatenate([np.asarray(g0, np.float64), np.asarray(a0, np.float64)])
    lin = np.concatenate([np.zeros(len(x) - t), np.ones(t)])
    grad = Gp @ x - lin
    s = len(x) - t
    invd = 1.0 / np.diagonal(Gp)
    steps = _sor(Gp, x, grad, invd, s, len(x), float(omega), float(tol), int(max_iter))
    return x[s:], x[:s], steps


# -- the in-memory route: one compiled loop per direction ---------------------
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
    b[:len(a)] = a
    return b


@njit(cache=True, nogil=True)
def _fit_memory(X, ys, neg, pos, P, C, levels, patience, m, init_size, max_core, tol, loose,
                seed, code, gamma, GC, slot_of, id_of, ring, Kf, G):
    """Algorithm 1 on rows ``X`` in memory (labels ``ys`` +-1, 0: neither
    side; sides ``neg`` / ``pos``; ``P`` [rows, s] the projections onto the
    directions before): the core set grows one furthest violator at a time,
    the core matrix in place (``[g; a]``: the free coordinates first, so a
    row entering appends a row and a column), its gradient kept up to date
    and SOR warm started from the previous solution. A row's kernel column
    (``column_cached``) serves its distances to the center and its row of G.
    Returns (core rows, x = [g; a], G, K among the core rows (float32 columns
    [rows, t]), steps, solves, history [levels, 5] (core size, c2, R2, SOR
    steps, samples drawn))."""
    np.random.seed(seed)
    n = X.shape[0]
    s = P.shape[1]
    kt = 2.0 + 1.0 / C
    cap = Kf.shape[1] - 16      # Kf [rows, cap + 16], G: buffers kept from direction to direction
    if G.shape[0] < s + cap:
        G = np.empty((s + cap, s + cap))
    core = np.empty(cap, np.int64)
    G[:s, :s] = 0.0
    x = np.zeros(s + cap)
    grad = np.zeros(s + cap)
    invd = np.ones(s + cap)
    for q in range(s):
        G[q, q] = 1.0
    incore = np.zeros(n, np.bool_)
    sample = np.empty(max(m, init_size), np.int64)
    ay = np.zeros(cap)
    hist = np.zeros((len(levels), 5))
    draws = 0
    t = 0
    steps = 0
    solves = 0
    # the first rows: init_size random rows, half of each side
    k = _draw(neg, init_size - init_size // 2, incore, sample, 0)
    for i in range(k):
        incore[sample[i]] = True
    k2 = _draw(pos, init_size // 2, incore, sample, k)
    for i in range(k, k2):
        incore[sample[i]] = True
    first = sample[:k2].copy()
    c2 = 0.0
    R2 = 0.0
    for e in range(len(levels) + 1):
        calm = 0
        while calm < patience:
            if e == 0:              # the first rows enter, then one solve
                new = first
                calm = patience
            else:
                draws += 1
                cnt = _draw(neg, m - m // 2, incore, sample, 0)
                cnt = _draw(pos, m // 2, incore, sample, cnt)
                if cnt == 0:
                    break
                # the furthest sampled row: d2 = c2 - 2 y (K~a)_l + kt
                inv = 1.0 / x[s:s + t].sum()
                ay1 = 0.0
                for j in range(t):
                    ay[j] = x[s + j] * ys[core[j]]
                    ay1 += ay[j]
                best, bk = -np.inf, -1
                for i in range(cnt):
                    r = sample[i]
                    ka = ay1 + _dot(Kf[r], ay, t)
                    for q in range(s):
                        ka += x[q] * P[r, q]
                    d2 = c2 - 2.0 * ys[r] * ka * inv + kt
                    if d2 > best:
                        best, bk = d2, i
                full = max_core >= 0 and t >= max_core
                eps = levels[e - 1]
                if best <= (1.0 + eps) ** 2 * R2 or full:
                    calm += 1
                    continue
                calm = 0
                new = sample[bk:bk + 1].copy()
            for r in new:
                if t == cap:
                    cap *= 2
                    core = _grow(core, cap)
                    ay = _grow(ay, cap)
                    Kf2 = np.empty((n, cap + 16), np.float32)
                    Kf2[:, :t] = Kf[:, :t]
                    Kf = Kf2
                    G2 = np.empty((s + cap, s + cap))
                    G2[:s + t, :s + t] = G[:s + t, :s + t]
                    G = G2
                    x = _grow(x, s + cap)
                    grad = _grow(grad, s + cap)
                    invd = _grow(invd, s + cap)
                col = column_cached(X, r, code, gamma, GC, slot_of, id_of, ring)
                for i in range(n):
                    Kf[i, t] = col[i]
                incore[r] = True
                core[t] = r
                kk = s + t
                yr = ys[r]
                g = -1.0
                for j in range(t):
                    v = yr * ys[core[j]] * (np.float64(Kf[r, j]) + 1.0)
                    G[kk, s + j] = v
                    G[s + j, kk] = v
                    g += v * x[s + j]
                for q in range(s):
                    v = yr * P[r, q]
                    G[kk, q] = v
                    G[q, kk] = v
                    g += v * x[q]
                G[kk, kk] = np.float64(Kf[r, t]) + 1.0 + 1.0 / C
                invd[kk] = 1.0 / G[kk, kk]
                x[kk] = 0.0
                grad[kk] = g + G[kk, kk] * x[kk]
                t += 1
            if e == 0:               # alpha = 1/t, then the full gradient once
                for j in range(t):
                    x[s + j] = 1.0 / t
                for j in range(s + t):
                    acc = -1.0 if j >= s else 0.0
                    for i in range(s + t):
                        acc += G[j, i] * x[i]
                    grad[j] = acc
            sa = x[s:s + t].sum()
            rel = max(tol, loose * levels[max(e - 1, 0)])
            steps += _sor(G, x, grad, invd, s, s + t, 1.0, rel * max(sa, 1.0), 10_000_000)
            solves += 1
            # ||c||^2 = x'Gx / (1'a)^2 = (x'grad + 1'a) / (1'a)^2 (eqs. 23, 35)
            sa = x[s:s + t].sum()
            xg = 0.0
            for j in range(s + t):
                xg += x[j] * grad[j]
            c2 = (xg + sa) / (sa * sa)
            R2 = kt - c2
        if e > 0:
            hist[e - 1, 0] = t
            hist[e - 1, 1] = c2
            hist[e - 1, 2] = R2
            hist[e - 1, 3] = steps
            hist[e - 1, 4] = draws
    if loose > 0.0:             # the last core set's QP to the tolerance asked
        sa = x[s:s + t].sum()
        steps += _sor(G, x, grad, invd, s, s + t, 1.0, tol * max(sa, 1.0), 10_000_000)
        hist[len(levels) - 1, 3] = steps
    K = np.empty((t, t), np.float32)
    for i in range(t):
        for j in range(t):
            K[i, j] = Kf[core[i], j]
    return (core[:t].copy(), x[:s + t].copy(), G[:s + t, :s + t].copy(), K, steps, solves, hist,
            Kf, G)


def core_matrix(K, y, C, B):
    """``G`` of the core set: ``K`` the base kernel among its rows, ``y``
    their labels, ``B`` [rows, directions] = ``y_i u_q'phi(x_i)``."""
    y = np.asarray(y, np.float64)
    Kh = np.outer(y, y) * (np.asarray(K, np.float64) + 1.0) + np.eye(len(y)) / C
    s = B.shape[1]
    return np.block([[Kh, B], [B.T, np.eye(s)]])


def direction(alpha, gamma, y, dirs):
    """The new direction's expansion ``w = sum_i a_i y_i phi(x_i) + sum_q
    g_q u_q`` as coefficients over (core rows, then each direction's rows):
    a list of coefficient vectors, the core rows' first."""
    return [np.asarray(alpha) * np.asarray(y)] + [gq * c for gq, (_, c) in zip(gamma, dirs)]


def merge_rows(ids, rows, coef):
    """Distinct rows by id: ``(ids, rows, coef)`` with the coefficient
    columns of a row that occurs several times summed. ``coef``: a vector or
    a matrix [rows, columns]."""
    uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    coef = np.asarray(coef, np.float64)
    out = np.zeros((len(uniq),) + coef.shape[1:])
    np.add.at(out, inv, coef)
    return uniq, rows[first], out


class Direction:
    """A unit direction ``u = sum_j coef_j phi(rows_j)`` over distinct rows
    (their store ids ``ids``), the full expansion (its own support rows and
    those of the directions it was made orthogonal to). ``own``: how many of
    the rows are its own support rows (the kernel evaluations it adds).
    Directions are evaluated together, through a :class:`Basis`."""

    def __init__(self, rows, coef, ids, own=None):
        self.rows = rows
        self.coef = np.asarray(coef, np.float64)
        self.ids = np.asarray(ids, np.int64)
        self.own = len(self.ids) if own is None else int(own)


class Basis:
    """Unit directions found so far (one class's), as one kernel expansion:
    distinct rows ``rows`` (ids ``ids``) and a coefficient column per
    direction ``W`` [rows, directions]. A row shared by directions is one
    kernel evaluation; ``project`` evaluates every direction at once."""

    def __init__(self, directions=()):
        directions = list(directions)
        self.s = len(directions)
        if not directions:
            self.ids, self.rows, self.W = np.empty(0, np.int64), None, np.zeros((0, 0))
            return
        ids = np.concatenate([d.ids for d in directions])
        self.ids, first = np.unique(ids, return_index=True)
        self.rows = np.concatenate([np.asarray(d.rows) for d in directions])[first]
        # each direction's coefficients into its column (summed where its ids
        # repeat): merge_rows on [ids, directions] summed every zero as well
        # (0.02 s for optdigits' 50 features, twice a fit)
        self.W = np.zeros((len(self.ids), self.s))
        for q, d in enumerate(directions):
            np.add.at(self.W[:, q], np.searchsorted(self.ids, d.ids), d.coef)
        from .kernels import sq_norms
        self.sq = sq_norms(self.rows)

    def project(self, kernel, X, sq=None):
        """[len(X), s]: ``u_q'phi(x)`` of every row and direction."""
        if self.s == 0:
            return np.zeros((X.shape[0], 0))
        from .kernels import kernel_sums
        return np.asarray(kernel_sums(kernel, X, self.rows, self.W, sq, self.sq),
                          np.float64).reshape(X.shape[0], self.s)


class MMDASolver:
    """One MMDA direction by the core vector method (mmda paper, Algorithm 1):
    the constrained MEB of the points ``phi~(z) = [y phi(x); y; y e / sqrt(C)]``
    (kernel ``k~ = y y' (k + 1) + I / C``, constant diagonal ``kt = kappa + 1
    + 1/C`` for the RBF kernel, so Delta = 0) with its center orthogonal to
    the directions of ``basis`` (a :class:`Basis`), grown from the furthest
    violator of random samples while eps is annealed (as
    :class:`~.meb.MEBSolver`), its core QP solved by SOR, warm started
    (to steps below ``tol`` times ``1'a``).

    ``fit(pool, classes)`` draws from a :class:`streamcvm.data.sampling.ChunkPool`
    (``classes = (neg, pos)``: the sides; target +-1). Afterwards
    :meth:`unit_direction` is the new unit direction. ``cache``: a
    :class:`RowKernels` shared by the directions of a fit (the in-memory
    route's kernel columns and projections); ``memory=False``: always the
    sample-by-sample route."""

    PATIENCE = 7
    MEMORY_BYTES = 1 << 30  # the in-memory route for pooled stores of at most this many dense bytes
    MEMORY_ROWS = 1 << 16   # ... and rows (memory_route)
    LOOSE = 0.1             # in-memory route: solves while growing stop at steps <= LOOSE eps 1'a

    def __init__(self, kernel, *, C, eps, basis=None, sample_size=SAMPLE_SIZE, init_size=20,
                 max_core=None, tol=1e-8, cache=None, memory=True):
        if not kernel.constant_diagonal:
            raise ValueError(f"MMDA needs a kernel with constant k(x, x), not {kernel.name!r}")
        self.kernel, self.C, self.eps = kernel, float(C), float(eps)
        self.basis = Basis() if basis is None else basis
        self.sample_size, self.init_size, self.max_core = sample_size, init_size, max_core
        self.tol = tol
        self.cache, self.memory = cache, memory
        self.kt = 1.0 + 1.0 + 1.0 / self.C          # kappa = 1 (rbf, laplacian, exponential)
        self.ids = np.empty(0, np.int64)
        self.rows = None
        self.y = np.empty(0)
        self.K = np.empty((0, 0))                    # base kernel among core rows
        self.B = np.empty((0, self.basis.s))         # y_i u_q'phi(x_i)
        self.alpha = np.empty(0)
        self.gamma = np.zeros(self.basis.s)
        self.n_iter = 0
        self.sor_steps = 0
        self.history = []

    # -- the core set ---------------------------------------------------------
    def _add(self, ids, X, y):
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X, np.float32)
        kx = self.kernel.block(X, X).astype(np.float64)
        if self.rows is None:
            self.rows, K = X, kx
        else:
            kc = self.kernel.block(X, self.rows).astype(np.float64)
            K = np.block([[self.K, kc.T], [kc, kx]])
            self.rows = np.concatenate([self.rows, X])
        b = np.asarray(y, np.float64)[:, None] * self.basis.project(self.kernel, X)
        self.K, self.B = K, np.concatenate([self.B, b])
        self.ids = np.concatenate([self.ids, np.asarray(ids, np.int64)])
        self.y = np.concatenate([self.y, np.asarray(y, np.float64)])
        self.alpha = np.concatenate([self.alpha, np.zeros(len(y))])

    def _solve(self):
        G = core_matrix(self.K, self.y, self.C, self.B)
        tol = self.tol * max(self.alpha.sum(), 1.0)
        self.alpha, self.gamma, steps = sor(G, self.alpha, self.gamma, tol=tol)
        self.n_iter += 1
        self.sor_steps += steps
        # the constrained MEB's center and radius (eqs. 22, 23, 35)
        s = self.alpha.sum()
        at, gt = self.alpha / s, self.gamma / s
        Kt = G[:len(at), :len(at)]
        self._ay = at * self.y
        self._gt = gt
        self.c2 = float(at @ Kt @ at + 2 * at @ self.B @ gt + gt @ gt)
        self.R2 = self.kt - self.c2

    def dist2(self, X, y):
        """Squared distances of rows ``X`` with labels ``y`` (outside the core
        set) to the center: ``||c||^2 - 2 c'phi~(z) + kt``."""
        from .ball import distance2
        from .kernels import sq_norms
        sq = sq_norms(X)
        Kc = self.kernel.block(X, self.rows, sq).astype(np.float64)
        Ka = Kc @ self._ay + self._ay.sum()
        if self.basis.s:
            Ka += self.basis.project(self.kernel, X, sq) @ self._gt
        return distance2(self.c2, np.asarray(y) * Ka, self.kt)

    # -- the loop -------------------------------------------------------------
    @classmethod
    def memory_route(cls, kernel, rows, d):
        """Whether ``rows`` x ``d`` held in memory take the compiled route: an
        exp(-gamma d) kernel (rbf, laplacian, exponential: ``_kcol``'s), at
        most ``MEMORY_BYTES`` of dense rows and ``MEMORY_ROWS`` rows. A row
        entering its core set costs a kernel column over every row (and its
        copy into the core set's columns), so its time grows with the rows,
        where a sampled draw's does not: 5 features of the 22-feature mixture
        took 1.8 / 3.7 / 11.8 / 27.2 s on 20K / 50K / 100K / 200K rows in
        memory against 5.0-7.2 s sampled, 0.5-1.1 GB against 0.4
        (``tools/bench_mmda_scale.py --routes memory sampled``)."""
        return (kernel.name in ("rbf", "laplacian", "exponential") and rows <= cls.MEMORY_ROWS
                and 4.0 * rows * d <= cls.MEMORY_BYTES)

    def fit(self, pool, classes):
        """Algorithm 1 on ``pool``'s rows: in one compiled loop
        (:func:`_fit_memory`, its own draws seeded from ``pool.rng``) when the
        pool holds the whole store and :meth:`memory_route` says so, else
        sample by sample through the pool. (The route is asked first: the
        pool's rows come as a copy.)"""
        store = pool.store
        got = pool.all_rows() if self.memory and self.memory_route(
            self.kernel, store.n, store.d) else None
        if got is not None:
            return self._fit_memory(pool, classes, *got)
        return self._fit_samples(pool, classes)

    def _fit_memory(self, pool, classes, ids, X, y):
        from .meb import eps_levels
        cache = self.cache if self.cache is not None else RowKernels(self.kernel)
        cache.bind(ids, X)
        y = np.asarray(y)[np.argsort(np.asarray(ids, np.int64), kind="stable")]
        ys = np.where(np.isin(y, classes[1]), 1.0, np.where(np.isin(y, classes[0]), -1.0, 0.0))
        P = cache.projections(self.basis)
        levels = np.asarray(eps_levels(self.eps), np.float64)
        seed = int(pool.rng.integers(2 ** 31 - 1))
        core, x, G, K, steps, solves, hist, cache.Kf, cache.G = _fit_memory(
            cache.X, ys, np.flatnonzero(ys < 0), np.flatnonzero(ys > 0), P, self.C, levels,
            self.PATIENCE, int(self.sample_size), int(self.init_size),
            -1 if self.max_core is None else int(self.max_core), float(self.tol),
            float(self.LOOSE), seed,
            cache.code, float(self.kernel.gamma), cache.GC, cache.slot_of, cache.id_of,
            cache.ring, cache.Kf, cache.G)
        s = self.basis.s
        self.ids, self.rows, self.y = cache.ids[core], cache.X[core], ys[core]
        self.K = K.astype(np.float64)
        self.B = G[s:, :s].copy() if s else np.empty((len(core), 0))
        self.gamma, self.alpha = x[:s].copy(), x[s:].copy()
        self.n_iter, self.sor_steps = int(solves), int(steps)
        sa = self.alpha.sum()
        self.c2 = float((x @ G @ x) / sa ** 2)
        self.R2 = self.kt - self.c2
        self.history = [{"eps": float(e), "core_size": int(h[0]), "c2": float(h[1]),
                         "radius2": float(h[2]), "sor_steps": int(h[3]), "samples": int(h[4])}
                        for e, h in zip(levels, hist)]
        return self

    def _fit_samples(self, pool, classes):
        from .meb import eps_levels
        ids, X, y = pool.draw(self.init_size, classes=classes, target="binary")[:3]
        self._add(ids, X, y)
        self.alpha[:] = 1.0 / len(self.alpha)
        self._solve()
        for eps in eps_levels(self.eps):
            calm = 0
            while calm < self.PATIENCE:
                ids, X, y = pool.draw(self.sample_size, classes=classes, target="binary",
                                      exclude=self.ids)[:3]
                if len(ids) == 0:
                    break
                d2 = self.dist2(X, y)
                k = int(np.argmax(d2))
                full = self.max_core is not None and len(self.ids) >= self.max_core
                if d2[k] <= (1.0 + eps) ** 2 * self.R2 or full:
                    calm += 1
                    continue
                calm = 0
                self._add(ids[k:k + 1], X[k:k + 1], y[k:k + 1])
                self._solve()
            self.history.append({"eps": eps, "core_size": len(self.ids), "c2": self.c2,
                                 "radius2": self.R2, "sor_steps": int(self.sor_steps)})
        return self

    def unit_direction(self):
        """The new direction ``w`` (eq. 8) over its own support rows (alpha >
        0) and the basis rows, normalised: a :class:`Direction`. ``||w||^2 =
        (ay)'K(ay) + 2 a'Bg + g'g`` needs no kernel evaluation."""
        keep = self.alpha > 0
        ay = self.alpha * self.y
        norm2 = ay @ self.K @ ay + 2 * self.alpha @ self.B @ self.gamma + self.gamma @ self.gamma
        own = (self.ids[keep], self.rows[keep], ay[keep])
        if self.basis.s:
            ids = np.concatenate([own[0], self.basis.ids])
            rows = np.concatenate([own[1], self.basis.rows])
            coef = np.concatenate([own[2], self.basis.W @ self.gamma])
            ids, rows, coef = merge_rows(ids, rows, coef)
        else:
            ids, rows, coef = merge_rows(*own)
        return Direction(rows, coef / np.sqrt(norm2), ids, own=int(keep.sum()))
