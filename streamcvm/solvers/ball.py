"""The ball: the MEB's center and what every method computes from it
(docs/design.md, sections 2-3).

Points are rows ``z_i = (x_i, y_i)`` with the transformed kernel
``k~_ij = s_i s_j (k_ij + b) + [i == j] / C_i`` and linear terms ``q_i``
(:mod:`streamcvm.solvers.points`). The center is ``c = sum_i a_i phi~(z_i)``
over the core set, so

    ||c||^2 = a'K~a,   d_l^2 = ||c||^2 - 2 (K~a)_l + q_l (+ ce^2),

with ``ce`` the extra coordinate of BVM's smaller ball (0 for the other
methods). :func:`distance2` is that formula, the only place it is written:
the solver's searches, its steps, the methods' own updates and the frozen
:class:`Center` of a full pass all call it.

A :class:`Ball` holds the core set and its weights, ``||c||^2``, ``ce^2``,
BVM's fixed ``r^2``, and, for the methods that track it, ``(K~a)`` of every
core vector. It knows nothing of how the center moves (:mod:`.methods`) or
of the eps schedule (:mod:`.meb`).
"""
import numpy as np
from numba import njit
import scipy.sparse as sp

from .coreset import CoreSet
from .kernels import sq_norms, weighted_sum
from .smo import _q


@njit(cache=True, nogil=True)
def center_sq_norm(K, y, b, ic, alpha, n):
    """||c||^2 = a' Q a over the first n core vectors."""
    s = 0.0
    for i in range(n):
        if alpha[i] == 0.0:
            continue
        for j in range(n):
            if alpha[j] != 0.0:
                s += alpha[i] * alpha[j] * _q(K, y, b, ic, i, j)
    return s


def distance2(c2, Ka, q, ce2=0.0):
    """Squared distances to the center of points with ``(K~a)_l = Ka`` and
    linear terms ``q``: ``||c||^2 - 2 (K~a)_l + q_l + ce^2``."""
    return c2 - 2.0 * Ka + q + ce2


def inner(c2, d2, q, ce2=0.0):
    """``(K~a)_l`` back from a squared distance (:func:`distance2` solved)."""
    return 0.5 * (c2 + q + ce2 - d2)


class Ball:
    """The center of an MEB problem (see the module docstring).

    Parameters
    ----------
    kernel : streamcvm.solvers.kernels.Kernel
    points : the problem's points (:mod:`streamcvm.solvers.points`)
    C, b : the base C, and 1 (two-class) or 0 (one-class)
    d, sparse : the rows' features and layout
    cache : keep k among core vectors (the O(|S|^2) cache; BVM needs none)
    max_core : the core set's cap (None: none)
    dense_max_features, core_reserve : the options of that name
        (:class:`streamcvm.options.Options`)
    """

    def __init__(self, kernel, points, C, b, d, sparse, *, cache=True, max_core=None,
                 dense_max_features, core_reserve):
        self.kernel = kernel
        self.points = points
        self.plain = points.plain
        self.C = float(C)
        self.b = float(b)
        # the plain MEB's constant diagonal (kappa = 1); otherwise points carry q
        self.kt = 1.0 + self.b + 1.0 / self.C if self.plain else None
        # Sparse data of up to dense_max_features features keeps dense core rows
        # (and their transpose): a CSR candidate's kernel row then costs nnz x |S|.
        self.densify = sparse and d <= dense_max_features
        self.core = CoreSet(d, sparse and not self.densify, cache=cache,
                            transposed=self.densify, max_cap=max_core, reserve=core_reserve)
        self.c2 = 0.0                               # ||c||^2
        self.ce2 = 0.0                              # BVM's extra coordinate, squared
        self.r2 = self.kt if self.plain else 0.0    # BVM's fixed radius (plain problems)
        self.Ka = None                              # (K~a) of the core vectors, if tracked
        self._buf = np.empty(0, np.float32)         # scratch for kernel blocks

    # -- geometry -------------------------------------------------------------
    def aq(self):
        """a'q: kt for the plain MEB (sum a = 1), else over the core set."""
        if self.plain:
            return self.kt
        n = self.core.n
        return float(self.core.alpha[:n] @ self.core.q[:n])

    def kd(self, slot):
        """K~_ll of a core point: k(x, x) + b + 1/C_l (signs are +-1)."""
        cs = self.core
        return cs.kx[slot] + self.b + cs.ic[slot]

    def distances(self, Ka, q):
        """:func:`distance2` at this center."""
        return distance2(self.c2, Ka, q, self.ce2)

    def core_distances(self):
        """Squared distances of the core vectors, from the tracked (K~a)."""
        return self.distances(self.Ka, self.core.q[:self.core.n])

    def dist2(self, X, P, sq=None, check_core=False):
        """Squared distances from the center to the points ``P = (pid, ridx,
        s, q, ic)`` over rows ``X`` (see :mod:`streamcvm.solvers.points`), and
        the kernel block ``k(X, core)`` they came from. With ``check_core``,
        points that are core vectors get their ``a_l ic_l`` term of (K~a)_l;
        without, the points are taken to be outside the core set."""
        cs = self.core
        n = cs.n
        if self._buf.size < X.shape[0] * n:
            self._buf = np.empty(max(2 * self._buf.size, X.shape[0] * n), np.float32)
        Kc = self.kernel.block(X, cs.rows(), sq, cs.sq[:n], BT=cs.rows_t(), out=self._buf)
        ay = cs.alpha[:n] * cs.y[:n]
        pid, ridx, s, q, _ = P
        Ka = s * (weighted_sum(Kc, ay) + self.b * ay.sum())[ridx]
        if check_core:
            for k, i in enumerate(pid):
                slot = cs.slot_of(i)
                if slot >= 0:
                    Ka[k] += cs.alpha[slot] * cs.ic[slot]
        return self.distances(Ka, q), Kc

    def refresh_c2(self):
        """||c||^2 recomputed from the weights (O(|S|^2))."""
        cs = self.core
        if cs.cache:
            self.c2 = center_sq_norm(cs.K, cs.y, self.b, cs.ic, cs.alpha, cs.n)
        else:
            rows = cs.rows()
            n = cs.n
            ay = cs.alpha[:n] * cs.y[:n]
            K = self.kernel.block(rows, rows, cs.sq[:n], cs.sq[:n])
            self.c2 = float(ay @ K @ ay + self.b * ay.sum() ** 2
                            + (cs.alpha[:n] ** 2 * cs.ic[:n]).sum())

    def column(self, slot, kx=None):
        """k~(core_i, core_slot) for every core vector i: from the kernel
        cache, from ``kx`` (base kernel values against the core, e.g. a row
        of a search block) or computed (one kernel column)."""
        cs = self.core
        n = cs.n
        if cs.cache:
            k = cs.K[:n, slot].astype(np.float64)
        elif kx is not None:                  # kx: against the core before z entered
            k = np.empty(n)
            k[:len(kx)] = kx
            k[slot] = cs.kx[slot]
        elif cs.rows_t() is not None:         # a sparse row: only its nonzeros
            x = cs.rows()[slot]
            nz = np.flatnonzero(x)
            xs = sp.csr_matrix((x[nz], nz, [0, len(nz)]), shape=(1, cs.d))
            k = self.kernel.block(xs, cs.rows(), cs.sq[slot:slot + 1], cs.sq[:n],
                                  BT=cs.rows_t())[0]
        else:
            k = self.kernel.block(cs.rows(), cs.rows()[slot:slot + 1],
                                  cs.sq[:n], cs.sq[slot:slot + 1])[:, 0]
        col = cs.y[:n] * cs.y[slot] * (k + self.b)
        col[slot] += cs.ic[slot]
        return col

    def points_column(self, X, sq, P, slot):
        """k~(p, z) for the points ``P`` over rows ``X`` and the core point in
        ``slot``: s_p s_z (k(x_p, x_z) + b), plus ic_z where p is z."""
        cs = self.core
        pid, ridx, s, _, _ = P
        kz = self.kernel.block(X, cs.rows()[slot:slot + 1], sq, cs.sq[slot:slot + 1])[:, 0]
        col = s * cs.y[slot] * (kz[ridx] + self.b)
        col[pid == cs.ids[slot]] += cs.ic[slot]
        return col

    def core_Ka(self):
        """(K~a)_i for every core vector i, recomputed (O(|S|^2))."""
        cs = self.core
        n = cs.n
        ay = cs.alpha[:n] * cs.y[:n]
        if cs.cache:
            K = cs.K[:n, :n].astype(np.float64)
        else:
            K = self.kernel.block(cs.rows(), cs.rows(), cs.sq[:n], cs.sq[:n])
        return cs.y[:n] * (K @ ay + self.b * ay.sum()) + cs.alpha[:n] * cs.ic[:n]

    # -- moves ----------------------------------------------------------------
    def add(self, pid, x, s, ic, q, d2):
        """A new core vector at weight 0 (point ``pid``, row ``x``, at squared
        distance ``d2``): its (K~a) is :func:`inner` of that distance. Returns its slot."""
        p = inner(self.c2, d2, q, self.ce2)
        slot = self.core.add(pid, x, s, self.kernel, ic, q)
        if self.Ka is not None:
            self.Ka = np.append(self.Ka, p)
        return slot

    def support(self, tol=1e-12):
        """(slots, alpha) of the core vectors with weight, renormalised."""
        cs = self.core
        a = cs.alpha[:cs.n].copy()
        a[a < tol * a.max()] = 0.0
        a /= a.sum()
        keep = np.flatnonzero(a > 0)
        return keep, a[keep]

    # -- snapshots ------------------------------------------------------------
    def state(self):
        """(meta, arrays) of the ball (JSON-able values, plain arrays)."""
        arrays = {"core_" + k: v for k, v in self.core.arrays().items()}
        if self.Ka is not None:
            arrays["Ka"] = self.Ka
        return {"c2": float(self.c2), "ce2": float(self.ce2), "r2": float(self.r2)}, arrays

    def restore(self, meta, arrays):
        core = {k[5:]: v for k, v in arrays.items() if k.startswith("core_")}
        if "ic" not in core:    # a snapshot from before per-point terms: the plain MEB
            n = len(core["ids"])
            core.update(ic=np.full(n, 1.0 / self.C), q=np.full(n, self.kt), kx=np.ones(n))
        self.core.load_arrays(core, self.kernel)
        self.Ka = arrays.get("Ka")
        self.c2, self.ce2, self.r2 = meta["c2"], meta["ce2"], meta["r2"]

    def freeze(self, radius2, eps):
        """A :class:`Center` of this ball: what a full pass's chunk tasks need."""
        return Center(self, radius2, eps)


class Center:
    """A frozen copy of a ball's center: enough to compute any point's
    squared distance to it (:meth:`Ball.dist2`'s) away from the solver,
    small and picklable (sent to a pass's workers once). ``floor``: the
    squared radius; ``thr``: the squared radius of the (1 + eps) ball."""

    def __init__(self, ball, radius2, eps):
        cs = ball.core
        n = cs.n
        self.kernel, self.points, self.b = ball.kernel, ball.points, ball.b
        self.rows = cs.rows().copy()
        rt = cs.rows_t()
        self.rows_t = None if rt is None else rt.copy()
        self.sq = cs.sq[:n].copy()
        self.ay = cs.alpha[:n] * cs.y[:n]
        self.ay_sum = float(self.ay.sum())
        order = np.argsort(cs.ids[:n], kind="stable")
        self.ids = cs.ids[:n][order]                    # sorted, for core lookups
        self.aic = (cs.alpha[:n] * cs.ic[:n])[order]    # a_l / C_l of those
        self.c2, self.ce2 = float(ball.c2), float(ball.ce2)
        self.floor = float(radius2)                     # candidates lie beyond R
        self.thr = (1.0 + eps) ** 2 * self.floor        # violators beyond (1 + eps) R

    def dist2(self, X, P, sq=None):
        """Squared distances of the points ``P = (pid, ridx, s, q, ic)`` over
        rows ``X``; a point that is a core vector gets its a_l / C_l term."""
        if sq is None:
            sq = sq_norms(X)
        pid, ridx, s, q, _ = P
        Kc = self.kernel.block(X, self.rows, sq, self.sq, BT=self.rows_t)
        Ka = s * (weighted_sum(Kc, self.ay) + self.b * self.ay_sum)[ridx]
        if len(self.ids):
            at = np.minimum(np.searchsorted(self.ids, pid), len(self.ids) - 1)
            hit = self.ids[at] == pid
            Ka[hit] += self.aic[at[hit]]
        return distance2(self.c2, Ka, q, self.ce2)
