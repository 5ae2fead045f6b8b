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

SOR_OMEGA = 1.0         # the extrapolation factor omega of Algorithm 3 (Gauss-Seidel: 1)


@njit(cache=True, nogil=True)
def _sor(G, x, grad, t, omega, tol, max_iter):
    """Algorithm 3's loop on ``x`` and its gradient, in place; returns the steps."""
    n = len(x)
    for step in range(1, max_iter + 1):
        best, bi = 0.0, -1
        for j in range(n):
            mv = -omega * grad[j] / G[j, j]
            if j < t:
                mv = max(x[j] + mv, 0.0) - x[j]       # a >= 0: clip
            if abs(mv) > best:
                best, bi = abs(mv), j
        if bi < 0 or best <= tol:
            return step
        mv = -omega * grad[bi] / G[bi, bi]
        if bi < t:
            mv = max(x[bi] + mv, 0.0) - x[bi]
        x[bi] += mv
        for j in range(n):
            grad[j] += G[bi, j] * mv       # G is symmetric: its row, contiguous
    return max_iter


def sor(G, a0, g0, omega=SOR_OMEGA, tol=1e-8, max_iter=10_000_000):
    """Algorithm 3: coordinate steps on ``min 1/2 x'Gx - [1; 0]'x``, ``x = [a;
    g]``, ``a >= 0`` (the first ``len(a0)`` coordinates), each time on the
    coordinate whose projected step is largest, until no step exceeds
    ``tol``. Warm start from ``(a0, g0)``. Returns ``(a, g, steps)``."""
    t = len(a0)
    G = np.ascontiguousarray(G, np.float64)
    x = np.concatenate([np.asarray(a0, np.float64), np.asarray(g0, np.float64)])
    lin = np.concatenate([np.ones(t), np.zeros(len(x) - t)])
    grad = G @ x - lin
    steps = _sor(G, x, grad, t, float(omega), float(tol), int(max_iter))
    return x[:t], x[t:], steps


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
        rows = np.concatenate([np.asarray(d.rows) for d in directions])
        W = np.zeros((len(ids), self.s))
        a = 0
        for q, d in enumerate(directions):
            W[a:a + len(d.ids), q] = d.coef
            a += len(d.ids)
        self.ids, self.rows, self.W = merge_rows(ids, rows, W)
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
    :class:`~.meb.MEBSolver`), its core QP solved by :func:`sor`, warm started
    (to steps below ``tol`` times ``1'a``).

    ``fit(pool, classes)`` draws from a :class:`streamcvm.data.sampling.ChunkPool`
    (``classes = (neg, pos)``: the sides; target +-1). Afterwards
    :meth:`unit_direction` is the new unit direction."""

    PATIENCE = 7

    def __init__(self, kernel, *, C, eps, basis=None, sample_size=SAMPLE_SIZE, init_size=20,
                 max_core=None, tol=1e-8):
        if not kernel.constant_diagonal:
            raise ValueError(f"MMDA needs a kernel with constant k(x, x), not {kernel.name!r}")
        self.kernel, self.C, self.eps = kernel, float(C), float(eps)
        self.basis = Basis() if basis is None else basis
        self.sample_size, self.init_size, self.max_core = sample_size, init_size, max_core
        self.tol = tol
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
    def fit(self, pool, classes):
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
