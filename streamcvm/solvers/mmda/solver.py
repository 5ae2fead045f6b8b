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

from ...options import SAMPLE_SIZE, Options
from .basis import Basis, Direction, core_matrix, merge_rows
from .memory import _fit_memory, settings
from .rowkernels import RowKernels
from .sor import sor


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
    sample-by-sample route. ``options``: the :class:`streamcvm.options.Options`
    (``mmda_*``: patience, SOR's tolerance and omega, the in-memory route's
    limits; ``init_size``, ``eps_start``)."""

    def __init__(self, kernel, *, C, eps, basis=None, sample_size=SAMPLE_SIZE, max_core=None,
                 cache=None, memory=True, options=None):
        if not kernel.constant_diagonal:
            raise ValueError(f"MMDA needs a kernel with constant k(x, x), not {kernel.name!r}")
        opts = self.options = Options() if options is None else options
        self.kernel, self.C, self.eps = kernel, float(C), float(eps)
        self.basis = Basis() if basis is None else basis
        self.sample_size, self.init_size, self.max_core = sample_size, opts.init_size, max_core
        self.tol, self.omega = opts.mmda_sor_tol, opts.mmda_sor_omega
        self.patience, self.loose = opts.mmda_patience, opts.mmda_loose
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
        self.alpha, self.gamma, steps = sor(G, self.alpha, self.gamma, omega=self.omega,
                                            tol=tol)
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
        from ..ball import distance2
        from ..kernels import sq_norms
        sq = sq_norms(X)
        Kc = self.kernel.block(X, self.rows, sq).astype(np.float64)
        Ka = Kc @ self._ay + self._ay.sum()
        if self.basis.s:
            Ka += self.basis.project(self.kernel, X, sq,
                                     few_machines=self.options.few_machines) @ self._gt
        return distance2(self.c2, np.asarray(y) * Ka, self.kt)

    # -- the loop -------------------------------------------------------------
    @staticmethod
    def memory_route(kernel, rows, d, options):
        """Whether ``rows`` x ``d`` held in memory take the compiled route: a
        kernel whose columns it computes (``kernel.has("mmda_columns")``), at
        most the options' ``mmda_memory_mb`` of dense rows and
        ``mmda_memory_rows`` rows. A row
        entering its core set costs a kernel column over every row (and its
        copy into the core set's columns), so its time grows with the rows,
        where a sampled draw's does not: 5 features of the 22-feature mixture
        took 1.8 / 3.7 / 11.8 / 27.2 s on 20K / 50K / 100K / 200K rows in
        memory against 5.0-7.2 s sampled, 0.5-1.1 GB against 0.4
        (``tools/bench_mmda_scale.py --routes memory sampled``)."""
        return (kernel.has("mmda_columns") and rows <= options.mmda_memory_rows
                and 4.0 * rows * d <= options.mmda_memory_mb << 20)

    def fit(self, pool, classes):
        """Algorithm 1 on ``pool``'s rows: in one compiled loop
        (:func:`_fit_memory`, its own draws seeded from ``pool.rng``) when the
        pool holds the whole store and :meth:`memory_route` says so, else
        sample by sample through the pool. (The route is asked first: the
        pool's rows come as a copy.)"""
        store = pool.store
        got = pool.all_rows() if self.memory and self.memory_route(
            self.kernel, store.n, store.d, self.options) else None
        if got is not None:
            return self._fit_memory(pool, classes, *got)
        return self._fit_samples(pool, classes)

    def _fit_memory(self, pool, classes, ids, X, y):
        from ..meb import eps_levels
        cache = self.cache if self.cache is not None else \
            RowKernels(self.kernel, budget=self.options.mmda_row_cache_mb << 20)
        cache.bind(ids, X)
        y = np.asarray(y)[np.argsort(np.asarray(ids, np.int64), kind="stable")]
        ys = np.where(np.isin(y, classes[1]), 1.0, np.where(np.isin(y, classes[0]), -1.0, 0.0))
        P = cache.projections(self.basis)
        levels = np.asarray(eps_levels(self.eps, self.options.eps_start), np.float64)
        st = settings(C=self.C, patience=self.patience, sample_size=self.sample_size,
                      init_size=self.init_size,
                      max_core=-1 if self.max_core is None else self.max_core, tol=self.tol,
                      loose=self.loose, omega=self.omega,
                      seed=int(pool.rng.integers(2 ** 31 - 1)), code=cache.code,
                      gamma=self.kernel.gamma)
        core, x, G, K, steps, solves, hist, cache.Kf, cache.G = _fit_memory(
            cache.X, ys, np.flatnonzero(ys < 0), np.flatnonzero(ys > 0), P, levels, st,
            cache.columns, cache.Kf, cache.G)
        s = self.basis.s
        self.ids, self.rows, self.y = cache.ids[core], cache.X[core], ys[core]
        self.K = K.astype(np.float64)
        self.B = G[s:, :s].copy() if s else np.empty((len(core), 0))
        self.gamma, self.alpha = x[:s].copy(), x[s:].copy()
        self.n_iter, self.sor_steps = int(solves), int(steps)
        sa = self.alpha.sum()
        self.c2 = float((x @ G @ x) / sa ** 2)
        self.R2 = self.kt - self.c2
        self.history = [{"eps": float(e), "core_size": int(h["core_size"]),
                         "c2": float(h["c2"]), "radius2": float(h["radius2"]),
                         "sor_steps": int(h["sor_steps"]), "samples": int(h["samples"])}
                        for e, h in zip(levels, hist)]
        return self

    def _fit_samples(self, pool, classes):
        from ..meb import eps_levels
        ids, X, y = pool.draw(self.init_size, classes=classes, target="binary")[:3]
        self._add(ids, X, y)
        self.alpha[:] = 1.0 / len(self.alpha)
        self._solve()
        for eps in eps_levels(self.eps, self.options.eps_start):
            calm = 0
            while calm < self.patience:
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
