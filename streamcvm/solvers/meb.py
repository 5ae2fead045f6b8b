"""CVM, BVM and Frank-Wolfe on the MEB dual of the L2-SVMs (docs/design.md, sections 2-3).

Points are rows ``z_i = (x_i, y_i)`` with the transformed kernel
``k~_ij = y_i y_j (k_ij + b) + [i == j] / C``: ``b = 1`` for the two-class
L2-SVM, ``b = 0`` and ``y = 1`` for the one-class L2-SVM (SVDD). With a
constant ``k(x, x) = kappa`` the diagonal is ``kt = kappa + b + 1/C`` and,
for the center ``c = sum_i a_i phi~(z_i)``:

    ||c||^2 = a'K~a,   d_l^2 = ||c||^2 - 2 (K~a)_l + kt,   R^2 = kt - ||c||^2.

Methods (all grow a core set from violators found in random samples):

- ``cvm``: add the furthest violator, re-solve the core QP by SMO (warm start).
- ``bvm``: fixed radius ``r^2 = kt``; move the center just enough to touch the
  violator: ``a <- beta a + (1 - beta) e_z``, ``beta = r / d_z`` (bvm eqs. 5-6),
  in the augmented space of the smaller-ball procedure (sec. 3.3: center
  ``[c; ce]``, ``ce`` starting at ``r``, so distances are ``||c - phi||^2 + ce^2``;
  one round of Alg. 4, as the paper's own experiments). Core vectors may be
  violators again: their ``(K~a)`` is tracked (one kernel column per step), and
  after each step up to 20 steps go to the furthest core violator (``refine``).
- ``fvm``: Frank-Wolfe step towards the furthest point with exact line search
  ``lambda = (d^2 - R^2) / (2 d^2)``, plus Yildirim's away steps.

eps is annealed from 0.1, halved down to the target; a level ends after
``patience`` consecutive samples without a violator. ``eps="auto"`` halves
until eps is small against the margin ``||c||^2`` rather than the radius
(:meth:`MEBSolver.margin_slack` at most ``MARGIN_TOL``), which on the
benchmark sets lands between 2e-4 and 1e-5. BVM returns the mean of its last
two centers (:func:`half_last_step`). Small problems held whole by the
sampler run :func:`bvm_exact` (every row checked each step) instead.
"""
import time

import numpy as np
import scipy.sparse as sp

from ..coreset import CoreSet
from ..kernels import RBF, kernel_sums, sq_norms, weighted_sum
from .exact import EXACT_HIST, EXACT_STATE, bvm_exact, half_last_step, half_step_eps
from .smo import center_sq_norm, gradient, smo_simplex

PATIENCE = {"cvm": 7, "bvm": 10, "fvm": 7}
DENSE_MAX_D = 2048
MARGIN_TOL = 0.3  # eps="auto" stops at the first level whose margin slack is at most this
EXACT_MAX_CELLS = 64_000_000  # rows x features (or nnz) the exact pass may hold (256 MB float32)


class _Threads:
    """How many tasks :func:`bvm_exact`'s passes run as, piece by piece of
    the run: the faster of one and ``most`` by the seconds per pass measured
    on recent pieces (each count retried every ``RETRY`` pieces), so a
    machine busy with other work falls back to one thread rather than wait
    at every step for a descheduled one. The model is the same either way:
    each row's arithmetic does not depend on the count."""

    RETRY = 16
    MIN_ROWS = 8192         # fewer rows: one thread (a pass is too short to share)

    def __init__(self, most, n_rows):
        self.most = most if n_rows >= self.MIN_ROWS else 1
        self.cost = {}
        self.pieces = 0

    def pick(self):
        self.pieces += 1
        if self.most == 1:
            return 1
        for k in (self.most, 1):
            if k not in self.cost:
                return k
        best = min(self.cost, key=self.cost.get)
        if self.pieces % self.RETRY == 0:
            return self.most if best == 1 else 1
        return best

    def took(self, tasks, seconds_per_pass):
        old = self.cost.get(tasks)
        self.cost[tasks] = seconds_per_pass if old is None else 0.5 * (old + seconds_per_pass)


def eps_levels(eps, start=0.1):
    """[start, start/2, ..., eps] (at least [eps])."""
    out = []
    e = start
    while e > eps * (1 + 1e-9):
        out.append(e)
        e /= 2
    out.append(eps)
    return out


class MEBSolver:
    """Solver state: one plain object (core set, scalars, counters, history).

    Parameters
    ----------
    kernel : streamcvm.kernels.Kernel (constant diagonal unless ``points``
        says otherwise)
    C : regularisation; b : 1 (two-class) or 0 (one-class)
    method : "cvm", "bvm" or "fvm"; eps : target tolerance, or "auto"
    sample_size : rows per violator search (59: a top-5% point with 95% odds)
    points : which MEB points the rows stand for, with their signs, 1/C_i and
        linear terms (:mod:`streamcvm.problems.points`); default: the rows,
        one C, the plain MEB. Only the plain MEB runs BVM.
    n_jobs : threads of the exact BVM pass (None or -1: all numba's); the
        model does not depend on it
    """

    def __init__(self, kernel, d, sparse, *, C=1.0, b=1.0, method="cvm", eps=1e-3,
                 sample_size=59, patience=None, max_core=None, init_size=20,
                 smo_max_iter=100000, points=None, n_jobs=None):
        if method not in PATIENCE:
            raise ValueError(f"unknown method {method!r}: cvm, bvm or fvm")
        if points is None:
            from ..problems.points import RowPoints
            if not kernel.constant_diagonal:
                raise ValueError(f"a kernel without constant k(x, x) ({kernel.name!r}) "
                                 "needs points with an eta bounding the diagonal")
            points = RowPoints(C, b)
        if method == "bvm" and not kernel.constant_diagonal:
            raise ValueError(f"bvm needs a kernel with constant k(x, x) (rbf, laplacian, "
                             f"npoly), not {kernel.name!r}: use method='cvm' or 'fvm'")
        if method == "bvm" and not points.plain:
            raise ValueError("bvm solves the plain MEB only (one C, no linear term): "
                             "use method='cvm' or 'fvm' for weights or regression")
        self.points = points
        self.plain = points.plain
        self.kernel = kernel
        self.C = float(C)
        self.b = float(b)
        self.method = method
        # eps="auto": anneal until the tolerance, measured against the margin
        # rather than the radius, is at most margin_tol (see margin_slack)
        self.auto_eps = eps == "auto"
        self.eps_floor = 1e-7
        self.margin_tol = MARGIN_TOL
        self.eps = self.eps_floor if self.auto_eps else float(eps)
        self.sample_size = int(sample_size)
        self.patience = patience or PATIENCE[method]
        self.max_core = max_core
        self.init_size = init_size
        self.smo_max_iter = smo_max_iter
        # the core QP is solved until its gradient gap (the spread of the
        # weighted core vectors' d^2) is smo_tol * eps * R^2: the scale of the
        # violation test itself (0.1 before: same accuracy, slower; BENCHMARKS.md,
        # "cvm after the issue 5 SMO changes"); the (1 + eps) guarantee comes
        # from the outer loop.
        self.smo_tol = 1.0
        # the plain MEB's constant diagonal (kappa = 1); otherwise points carry q
        self.kt = 1.0 + self.b + 1.0 / self.C if self.plain else None
        # Sparse data of up to DENSE_MAX_D features keeps dense core rows (and
        # their transpose): a CSR candidate's kernel row then costs nnz x |S|.
        self.densify = sparse and d <= DENSE_MAX_D
        # BVM needs no kernel among core vectors: no O(|S|^2) cache for it
        self.core = CoreSet(d, sparse and not self.densify, cache=method != "bvm",
                            transposed=self.densify, max_cap=max_core)
        self.c2 = 0.0                               # ||c||^2
        # BVM's smaller ball (bvm paper sec. 3.3, Alg. 4): the ball lives in
        # the space [phi~; 0] with center [c; ce]; r2 shrinks from kt
        self.r2 = self.kt if self.plain else 0.0    # BVM only (plain problems)
        self.ce2 = self.kt if method == "bvm" else 0.0
        self._buf = np.empty(0, np.float32)        # scratch for kernel blocks
        self.n_iter = 0
        self.history = []
        self.t0 = None
        self.level_eps = None                       # the eps level being solved
        # BVM returns the mean of its last two centers (half_last_step)
        self.average = method == "bvm"
        self._last = None                           # the last BVM step, to halve
        self.cert_eps = None                        # eps certified for the result
        self._exact = None                          # fit_exact's state while it runs
        self._exact_Ka = None                       # (ids, (K~a)) where fit_exact ended
        self.n_jobs = n_jobs                        # threads of the exact pass (None: all)
        # held-out rows (set_validation): their error is recorded per level;
        # with val_rule it also ends the annealing
        self.val = None
        self.val_rule = False
        self._val_best, self._val_stale = 2.0, 0.0
        self.switched = False                       # fit() handed over to fit_exact
        self.note = None                            # what the progress display adds

    def set_validation(self, X, y, rule=False):
        """Held-out rows ``X`` with labels ``y`` (+-1, as the machine sees
        them), never trained on. Every eps level records their error rate
        (``validation_error`` in the history); with ``rule`` the annealing
        stops once it has not improved on its best by more than that best's
        standard error for two levels, instead of by the margin slack."""
        self.val = (X, np.asarray(y, np.float64))
        self._val_sq = sq_norms(X)          # once, not at every level
        self.val_rule = bool(rule)
        self._val_best, self._val_stale = 2.0, 0.0

    def validation_error(self):
        """The error rate of the current center on the held-out rows."""
        Xv, yv = self.val
        cs = self.core
        n = cs.n
        ay = cs.alpha[:n] * cs.y[:n]
        f = kernel_sums(self.kernel, Xv, cs.rows(), ay, self._val_sq, cs.sq[:n],
                        BT=cs.rows_t(), n_jobs=self.n_tasks())
        wrong = int(np.sum(yv * (f + self.b * ay.sum()) <= 0))
        return wrong / max(len(yv), 1)

    def _stop_level(self, eps):
        """Whether the annealing ends after the level at ``eps``: by the
        validation rule when it is on, else (eps="auto") by the margin slack."""
        if self.val_rule and self.val is not None:
            return self._val_stale >= 2
        return self.auto_eps and self.margin_slack(eps) <= self.margin_tol

    def n_tasks(self):
        """Threads for the passes over every row: ``n_jobs`` (None or -1:
        all of numba's), at most numba's."""
        import numba
        most = numba.get_num_threads()
        return most if self.n_jobs in (None, -1) else max(1, min(int(self.n_jobs), most))

    @property
    def core_size(self):
        """Core vectors so far (while :meth:`fit_exact` runs, its count)."""
        if self._exact is not None:
            return int(self._exact["state"][2])
        return self.core.n

    @property
    def certified_eps(self):
        """The eps the returned center satisfies: the last level's, or the
        bound of :func:`half_step_eps` when the last BVM step was halved."""
        return self.eps if self.cert_eps is None else self.cert_eps

    # -- geometry -----------------------------------------------------------
    def _aq(self):
        """a'q: kt for the plain MEB (sum a = 1), else over the core set."""
        if self.plain:
            return self.kt
        n = self.core.n
        return float(self.core.alpha[:n] @ self.core.q[:n])

    @property
    def radius2(self):
        return self.r2 if self.method == "bvm" else self._aq() - self.c2

    def _kd(self, slot):
        """K~_ll of a core point: k(x, x) + b + 1/C_l (signs are +-1)."""
        cs = self.core
        return cs.kx[slot] + self.b + cs.ic[slot]

    def dist2(self, X, P, sq=None, check_core=False):
        """Squared distances from the center to the points ``P = (pid, ridx,
        s, q, ic)`` over rows ``X`` (see :mod:`streamcvm.problems.points`), and
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
        return self.c2 - 2.0 * Ka + q + self.ce2, Kc

    def _refresh_c2(self):
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

    def _column(self, slot, kx=None):
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

    def _core_Ka(self):
        """(K~a)_i for every core vector i, recomputed (O(|S|^2))."""
        cs = self.core
        n = cs.n
        ay = cs.alpha[:n] * cs.y[:n]
        if cs.cache:
            K = cs.K[:n, :n].astype(np.float64)
        else:
            K = self.kernel.block(cs.rows(), cs.rows(), cs.sq[:n], cs.sq[:n])
        return cs.y[:n] * (K @ ay + self.b * ay.sum()) + cs.alpha[:n] * cs.ic[:n]

    def _smo(self, eps):
        cs = self.core
        tol = self.smo_tol * eps * max(self.radius2, 1e-12)
        if len(self.g) < cs.n:      # a vector entered since: extend the gradient
            self.g = gradient(cs.K, cs.y, self.b, cs.ic, cs.q, cs.alpha, cs.n) \
                if len(self.g) < cs.n - 1 else np.append(self.g, self._g_new)
        smo_simplex(cs.K, cs.y, self.b, cs.ic, cs.alpha, self.g, cs.n, tol, self.smo_max_iter)
        # g = 2 Q a - q, so ||c||^2 = a'Qa = (a'g + a'q) / 2: O(|S|), not O(|S|^2)
        n = cs.n
        self.c2 = 0.5 * (float(cs.alpha[:n] @ self.g[:n]) + self._aq())

    # -- steps --------------------------------------------------------------
    def init(self, ids, X, y, w=None):
        """Start from the points of the given rows (the problem's
        ``init_points``) with equal weights."""
        self.t0 = time.perf_counter()
        pid, ridx, s, q, ic = self.points.init_points(ids, y, w)
        for k in range(len(pid)):
            if pid[k] not in self.core:
                r = ridx[k]
                self.core.add(int(pid[k]), X[r:r + 1], float(s[k]), self.kernel, ic[k], q[k])
        n = self.core.n
        self.core.alpha[:n] = 1.0 / n
        self._refresh_c2()
        self.g = np.empty(0)
        if self.method == "cvm":
            cs = self.core
            self.g = gradient(cs.K, cs.y, self.b, cs.ic, cs.q, cs.alpha, n)
            self._smo(self.eps)
        self.Ka = self._core_Ka() if self.method in ("bvm", "fvm") else None

    def step(self, pid, x, s, q, ic, d2, eps, kx=None):
        """Take the violating point ``pid`` (row ``x``, sign ``s``, linear
        term ``q``, 1/C ``ic``) at squared distance ``d2``; ``kx``: its row's
        base kernel values against the current core vectors, if known."""
        cs = self.core
        slot = cs.slot_of(pid)
        if slot < 0:
            # a new vector enters at alpha 0 with (K~a)_z = p, gradient c2 - d2
            p = 0.5 * (self.c2 + q + self.ce2 - d2)
            self._g_new = self.c2 + self.ce2 - d2
            slot = cs.add(pid, x, s, self.kernel, ic, q)
            if self.Ka is not None:
                self.Ka = np.append(self.Ka, p)
        if self.method == "fvm":
            # exact line search: lambda = (d^2 - R^2) / (2 (d^2 - Delta_z))
            # (docs/design.md section 3; Delta_z = q_z - K~_zz, 0 for the plain MEB)
            kd = self._kd(slot)
            R2 = self.radius2
            lam = min(max((d2 - R2) / (2.0 * (d2 - (cs.q[slot] - kd))), 0.0), 1.0)
        if self.method == "cvm":
            self._smo(eps)
        elif self.method == "bvm":
            # c <- phi(z) + beta (c - phi(z)) in the space [phi~; ce]
            beta = np.sqrt(self.r2 / d2)
            self._step_w = beta
            n = cs.n
            cs.alpha[:n] *= beta
            cs.alpha[slot] += 1.0 - beta
            if self.average:
                self._last = (slot, beta, self.c2, self.ce2, d2)
            df2 = d2 - self.ce2                       # distance in phi~ alone
            self.c2 = beta * self.c2 + (1.0 - beta) * self.kt + (beta * beta - beta) * df2
            self.ce2 *= beta * beta
            self.Ka = beta * self.Ka + (1.0 - beta) * self._column(slot, kx)
        else:  # fvm
            p = self.Ka[slot]
            n = cs.n
            self._step_w = 1.0 - lam
            cs.alpha[:n] *= 1.0 - lam
            cs.alpha[slot] += lam
            self.c2 = (1 - lam) ** 2 * self.c2 + 2 * lam * (1 - lam) * p + lam * lam * kd
            self.Ka = (1.0 - lam) * self.Ka + lam * self._column(slot)
        self.n_iter += 1
        return slot

    def half_last_step(self):
        """BVM: replace the center by the mean of the last two (the last step
        taken at half its length; see :func:`half_last_step`), updating the
        weights, ``||c||^2``, ``ce^2``, the tracked ``(K~a)`` and the certified
        eps. A no-op for the other methods or before any step."""
        if not self.average or self._last is None:
            return
        slot, beta, c2p, ce2p, d2 = self._last
        self._last = None
        cs = self.core
        n = cs.n
        a = cs.alpha[:n]
        a[slot] -= 1.0 - beta
        a /= beta
        a[slot] = max(a[slot], 0.0)
        bp, self.c2, self.ce2 = half_last_step(beta, c2p, ce2p, d2, self.kt)
        a *= bp
        a[slot] += 1.0 - bp
        col = self._column(slot)
        Kap = (self.Ka - (1.0 - beta) * col) / beta      # (K~a) before the last step
        self.Ka = bp * Kap + (1.0 - bp) * col
        self.cert_eps = float(half_step_eps((1.0 + self.level_eps) ** 2 * self.r2, d2, self.r2))
        if self.history:        # the level's record keeps the c2 its stop was decided on
            self.history[-1]["certified_eps"] = self.cert_eps

    def refine(self, eps, max_steps=20):
        """BVM: steps towards core vectors that lie outside the ball (their
        (K~a) is tracked, so finding them costs O(|S|)); returns the count."""
        cs = self.core
        thr = (1.0 + eps) ** 2 * self.r2
        for t in range(max_steps):
            d2 = self.c2 - 2.0 * self.Ka + self.kt + self.ce2
            j = int(np.argmax(d2))
            if d2[j] <= thr:
                return t
            self.step(int(cs.ids[j]), None, cs.y[j], cs.q[j], cs.ic[j], float(d2[j]), eps)
        return max_steps

    def away(self):
        """FVM's away step (Yildirim): when the core vector nearest to the
        center is further inside the ball than the furthest point is outside,
        shrink its weight: a <- (1 + mu) a - mu e_j. Returns (slot, mu) or None."""
        cs = self.core
        n = cs.n
        R2 = self.radius2
        d2 = self.c2 - 2.0 * self.Ka + cs.q[:n]
        d2 = np.where(cs.alpha[:n] > 0, d2, np.inf)
        j = int(np.argmin(d2))
        dm = 1.0 - d2[j] / R2                     # Delta-
        a = cs.alpha[j]
        if dm <= 0 or a >= 1.0:
            return None
        # the line search of step() towards -e_j: mu = (R^2 - d^2) / (2 (d^2 - Delta_j))
        kd = self._kd(j)
        mu = min((R2 - d2[j]) / (2.0 * (d2[j] - (cs.q[j] - kd))), a / (1.0 - a))
        p = self.Ka[j]
        cs.alpha[:n] *= 1.0 + mu
        cs.alpha[j] -= mu
        if cs.alpha[j] < 1e-15:
            cs.alpha[j] = 0.0
        self.c2 = (1 + mu) ** 2 * self.c2 - 2 * mu * (1 + mu) * p + mu * mu * kd
        self.Ka = (1.0 + mu) * self.Ka - mu * self._column(j)
        self.n_iter += 1
        return j, mu, dm

    def _away_gap(self):
        """Delta- of the nearest weighted core vector (FVM), else 0."""
        if self.method != "fvm":
            return 0.0
        n = self.core.n
        d2 = self.c2 - 2.0 * self.Ka + self.core.q[:n]
        d2 = np.where(self.core.alpha[:n] > 0, d2, np.inf)
        return 1.0 - d2.min() / self.radius2

    def search(self, ids, X, y, eps, w=None):
        """One violator search over the points of candidate rows (labels or
        targets ``y``, sample weights ``w``); True if it took a step."""
        if len(ids) == 0:
            return False
        P = self.points.from_rows(ids, y, w)
        d2, Kc = self.dist2(X, P, check_core=self.points.check_core)
        k = int(np.argmax(d2))
        R2 = self.radius2
        if self.method == "fvm":
            up = d2[k] / R2 - 1.0                 # Delta+
            if self._away_gap() > max(up, (1.0 + eps) ** 2 - 1.0):
                self.away()
                return True
        if d2[k] <= (1.0 + eps) ** 2 * R2:
            return False
        if self.max_core is not None and self.core.n >= self.max_core:
            return False
        pid, ridx, s, q, ic = P
        r = ridx[k]
        self.step(int(pid[k]), X[r:r + 1], float(s[k]), q[k], ic[k], float(d2[k]), eps, kx=Kc[r])
        if self.method == "bvm":
            self.refine(eps)
        return True

    def record(self, eps):
        rec = {"iteration": self.n_iter, "core_size": self.core.n,
               "radius": float(np.sqrt(max(self.radius2, 0.0))),
               "eps": eps, "elapsed": time.perf_counter() - self.t0,
               "c2": float(self.c2), "ce2": float(self.ce2),
               "margin_slack": float(self.margin_slack(eps))}
        if self.val is not None:
            err = self.validation_error()
            rec["validation_error"] = err
            nv = len(self.val[1])
            best = self._val_best
            if best > 1.0 or err < best - np.sqrt(best * (1.0 - best) / nv):
                self._val_best, self._val_stale = err, 0.0
            else:
                self._val_best, self._val_stale = min(best, err), self._val_stale + 1.0
        self.history.append(rec)

    # -- checkpoints ------------------------------------------------------------
    def state(self):
        """(meta, arrays): everything the sampled fit loop (or a paused
        :meth:`fit_exact`) needs to continue exactly where it is (JSON-able
        values, plain arrays)."""
        if self._exact is not None:
            st = self._exact["state"]
            levels = eps_levels(self.eps_floor if self.auto_eps else self.eps)
            return ({"exact": True, "elapsed": time.perf_counter() - self.t0,
                     "n_iter": int(st[1]), "core_size": int(st[2]),
                     "level_eps": levels[min(int(st[0]), len(levels) - 1)],
                     "history": self.history, "warm": self._exact.get("warm", False)},
                    {"ex_" + k: v for k, v in self._exact.items() if k != "warm"})
        arrays = {"core_" + k: v for k, v in self.core.arrays().items()}
        if self.Ka is not None:
            arrays["Ka"] = self.Ka
        arrays["g"] = self.g
        last = None
        if self._last is not None:
            slot, beta, c2p, ce2p, d2 = self._last
            last = [int(slot), float(beta), float(c2p), float(ce2p), float(d2)]
        meta = {"c2": float(self.c2), "ce2": float(self.ce2), "r2": float(self.r2),
                "n_iter": int(self.n_iter), "eps": float(self.eps),
                "level_eps": self.level_eps, "cert_eps": self.cert_eps, "last": last,
                "history": self.history, "elapsed": time.perf_counter() - self.t0,
                "val": [self._val_best, self._val_stale]}
        return meta, arrays

    def restore(self, meta, arrays):
        """Set a freshly constructed solver (same parameters) to a saved state."""
        if meta.get("exact"):
            self._exact = {k[3:]: np.array(v) for k, v in arrays.items() if k.startswith("ex_")}
            self._exact["elapsed"] = meta["elapsed"]
            self._exact["warm"] = meta.get("warm", False)
            self.history = meta.get("history", [])
            return self
        core = {k[5:]: v for k, v in arrays.items() if k.startswith("core_")}
        if "ic" not in core:    # a snapshot from before per-point terms: the plain MEB
            n = len(core["ids"])
            core.update(ic=np.full(n, 1.0 / self.C), q=np.full(n, self.kt), kx=np.ones(n))
        self.core.load_arrays(core, self.kernel)
        self.Ka = arrays.get("Ka")
        self.g = arrays["g"]
        for k in ("c2", "ce2", "r2", "n_iter", "eps", "level_eps", "cert_eps"):
            setattr(self, k, meta[k])
        self._last = None if meta["last"] is None else tuple(meta["last"])
        self.history = meta["history"]
        self._val_best, self._val_stale = meta.get("val", [2.0, 0.0])
        self.t0 = time.perf_counter() - meta["elapsed"]
        return self

    # -- the driver -----------------------------------------------------------
    def fit(self, pool, classes=None, full_pass=None, callback=None, target="raw",
            checkpoint=None, resume=None, runner=None, pass_progress=None, switch=None):
        """Anneal eps down to the target, sampling violators from ``pool``
        (a ChunkPool). ``full_pass``: a point source or a factory of
        (ids, X, y) chunks (:meth:`confirm`); if given, passes over all
        points continue until one finds no violator. ``callback(solver)``:
        called after each eps level and at most 4 times a second in between
        (progress display).
        ``checkpoint(solver, position)``: called before every draw, with
        ``position = (level index, violator-free draws so far)``; a state saved
        there (:meth:`state`, the pool's) continues with ``resume=position``
        after :meth:`restore`. ``runner``, ``pass_progress``: where the full
        passes' chunk tasks run, and their progress (:meth:`confirm`).
        ``switch(solver)``: checked after every step; when it says True the
        fit returns at once with ``switched`` set (the caller continues with
        :meth:`fit_exact` ``warm=True``). Returns self."""
        auto = self.auto_eps
        self._exact_Ka = None       # sampled steps move the center
        weighted = self.points.weighted
        if resume is None:
            self.init(*pool.draw(self.init_size, classes=classes, target=target,
                                 with_weight=weighted))
            self.level_eps = None
            li0, calm0 = 0, 0
        else:
            li0, calm0 = resume
        shown = time.perf_counter()
        for li, eps in enumerate(eps_levels(self.eps_floor if auto else self.eps)):
            if li < li0:
                continue
            self.level_eps = eps
            calm = calm0 if li == li0 else 0
            while calm < self.patience:
                if checkpoint is not None:
                    checkpoint(self, (li, calm))
                drawn = pool.draw(self.sample_size, classes=classes,
                                  exclude=self.points.exclude(self.core), target=target,
                                  with_weight=weighted)
                if callback is not None and time.perf_counter() - shown > 0.25:
                    callback(self)          # progress: at most 4 times a second
                    shown = time.perf_counter()
                if self.search(*drawn[:3], eps, w=drawn[3] if weighted else None):
                    calm = 0
                    if switch is not None and switch(self):
                        self.switched = True
                        return self
                else:
                    calm += 1
                    if self.max_core is not None and self.core.n >= self.max_core:
                        break
            self.record(eps)
            if callback is not None:
                callback(self)
            if self._stop_level(eps):
                self.eps = eps
                break
        self.half_last_step()
        self.full_pass_violators = None
        if full_pass is not None:
            self.full_pass_violators = self.confirm(full_pass, runner=runner,
                                                    progress=pass_progress)
        return self

    def fit_exact(self, ids, X, y, checkpoint=None, warm=False, callback=None):
        """BVM on every row of a small in-memory problem (:func:`bvm_exact`):
        ``ids``, dense ``X`` and labels ``y`` of all its rows. Same schedule,
        same stopping rule; no sampling, so no violator is missed. The
        held-out rows of :meth:`set_validation` ride along: their margins are
        kept each step, so every level records its validation error.
        ``warm``: continue from this solver's current center (a sampled
        :meth:`fit` that stopped because the exact pass became cheaper; its
        core vectors are among ``ids``).
        ``checkpoint(solver, position)``: as in :meth:`fit`; the compiled loop
        then runs in pieces of about 0.1 s, and a state :meth:`restore` d from
        such a snapshot continues where it was. ``callback(solver)``: after
        each piece of about 0.1 s (progress). Returns self."""
        resumed = self._exact
        n_cand = len(ids)
        if self.val is not None:            # validation rows after the candidates
            Xv, yv = self.val
            X = sp.vstack([sp.csr_matrix(X), sp.csr_matrix(Xv)]).tocsr() if sp.issparse(X) \
                else np.concatenate([np.asarray(X, np.float32), np.asarray(Xv, np.float32)])
            y = np.concatenate([np.asarray(y, np.float64), np.asarray(yv, np.float64)])
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float32)
            X.sum_duplicates()
            XT = np.zeros((X.shape[1], 0), np.float32)
            ip, ind, dat = X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data
            Xc = X.tocsc()
            cp, ri, cv = Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64), Xc.data
        else:
            X = np.ascontiguousarray(X, np.float32)
            XT = np.ascontiguousarray(X.T)
            ip = ind = cp = ri = np.zeros(0, np.int64)
            dat = cv = np.zeros(0, np.float32)
        levels = np.array(eps_levels(self.eps_floor if self.auto_eps else self.eps))
        n = X.shape[0]
        sq, yv = sq_norms(X), np.asarray(y, np.float64)
        if resumed:
            st, Ka, alpha, hist = (resumed[k] for k in ("state", "Ka", "alpha", "hist"))
            self.t0 = time.perf_counter() - resumed["elapsed"]
        elif warm:
            st, Ka, alpha, hist = self._warm_state(np.asarray(ids), X, sq, yv, levels)
        else:
            self.t0 = time.perf_counter()
            st, Ka, alpha = np.zeros(EXACT_STATE), np.zeros(n), np.zeros(n)
            hist = np.full((len(levels), EXACT_HIST), np.nan)
        self._exact = {"state": st, "Ka": Ka, "alpha": alpha, "hist": hist,
                       "warm": bool(warm or (resumed and resumed.get("warm")))}
        max_steps = 200 * n_cand + 10000       # (a warm start's sampled steps count too)
        per_call = max(16, int(2e7 // max(n, 1)))       # ~5 ns a row a step: ~0.1 s
        threads = _Threads(self.n_tasks(), n)
        while True:
            if checkpoint is not None:
                checkpoint(self, (int(st[0]), 0))
            t, passes0 = time.perf_counter(), st[15]
            tasks = threads.pick()
            last = bvm_exact(XT, ip, ind, dat, cp, ri, cv, sq, yv, self.kernel.gamma, self.b,
                             1.0 / self.C, levels, self.margin_tol if self.auto_eps else 0.0,
                             max_steps, alpha, hist, True, st, Ka, int(st[1]) + per_call,
                             tasks, n_cand, self.val_rule)
            if last >= 0:
                break
            threads.took(tasks, (time.perf_counter() - t) / max(st[15] - passes0, 1.0))
            if callback is not None:
                self.n_iter, self.level_eps = int(st[1]), float(levels[int(st[0])])
                callback(self)
        self._exact = None
        Ka = self._averaged_Ka(X, sq, yv, st, Ka, hist[last, 1])[:n_cand]
        self._exact_Ka = (np.array(ids), Ka)
        alpha = alpha[:n_cand]
        keep = np.flatnonzero(alpha > 0)
        # the sampled path may go on from here (a progressive fit's next stage):
        # (K~a) of the core vectors, and no step of its own to halve
        self.Ka = Ka[keep].copy() if self.method in ("bvm", "fvm") else None
        self._last = None
        Xk = X[keep]
        if sp.issparse(Xk) and not self.core.sparse:
            Xk = Xk.toarray()   # the core set keeps sparse rows dense up to DENSE_MAX_D
        self.core.clear()
        self.core.add_many(np.asarray(ids)[keep], Xk, yv[keep], alpha[keep], self.kernel,
                           1.0 / self.C, self.kt)
        self.eps = self.level_eps = float(levels[last])
        self.n_iter = int(hist[last, 1])
        for e, it, c2, ce2, core, _, _, _, verr in hist[:last + 1]:
            if np.isnan(e):
                continue        # a level the sampled run before a warm start recorded
            self.c2, self.ce2 = float(c2), float(ce2)
            rec = {"iteration": int(it), "core_size": int(core),
                   "radius": float(np.sqrt(self.r2)), "eps": float(e),
                   "elapsed": time.perf_counter() - self.t0, "c2": float(c2),
                   "ce2": float(ce2), "margin_slack": float(self.margin_slack(e)),
                   "exact": True}
            if self.val is not None:
                rec["validation_error"] = float(verr)
            self.history.append(rec)
        self.cert_eps = float(hist[last, 5])
        self.c2, self.ce2 = float(hist[last, 6]), float(hist[last, 7])
        self.history[-1]["certified_eps"] = self.cert_eps
        # every row was checked at the last level, unless the step cap cut it short
        capped = hist[last, 1] >= max_steps
        self.full_pass_violators = None if capped else 0
        if capped:
            self.history[-1]["stopped"] = "max_steps"
        return self

    def _averaged_Ka(self, X, sq, y, st, Ka, steps):
        """:func:`bvm_exact` keeps ``(K~a)`` of its last center ``c_T``; it
        returns the mean of the last two (:func:`half_last_step`). ``(K~a)``
        of that mean, from one kernel column (the last step's row ``z``):
        ``Ka_{T-1} = (Ka_T - (1 - beta) col_z) / beta``, then the step at
        ``beta'``. Kept for a warm start on a superset of these rows."""
        if steps <= 1:
            return Ka.copy()
        z, beta = int(st[11]), float(st[12])
        bp = half_last_step(beta, st[8], st[9], st[10], self.kt)[0]
        k = self.kernel.block(X, X[z:z + 1], sq, sq[z:z + 1])[:, 0]
        col = y * y[z] * (k + self.b)
        col[z] += 1.0 / self.C
        return bp * (Ka - (1.0 - beta) * col) / beta + (1.0 - bp) * col

    def _warm_state(self, ids, X, sq, y, levels):
        """:func:`bvm_exact`'s state continuing from this solver's sampled
        run: its weights placed on the rows ``ids`` (the candidates, first in
        ``X``), ``(K~a)`` of every row (one kernel block against the core),
        the level it was on and its last step (for the final averaging)."""
        cs = self.core
        nc = cs.n
        n = X.shape[0]
        order = np.argsort(ids, kind="stable")
        pos = order[np.searchsorted(ids, cs.ids[:nc], sorter=order)]
        alpha = np.zeros(n)
        alpha[pos] = cs.alpha[:nc]
        ay = cs.alpha[:nc] * cs.y[:nc]
        # rows where the last exact run ended keep its (K~a) (the first rows
        # of a progressive fit's next stage): only the others need kernel values
        prev, r = self._exact_Ka, 0
        if prev is not None and len(prev[0]) <= len(ids) \
                and np.array_equal(prev[0], ids[:len(prev[0])]):
            r = len(prev[0])
        Ka = np.empty(n)
        Ka[:r] = prev[1] if r else 0.0
        Ka[r:] = y[r:] * (kernel_sums(self.kernel, X[r:], cs.rows(), ay, sq[r:], cs.sq[:nc],
                                      BT=cs.rows_t(), n_jobs=self.n_tasks()) + self.b * ay.sum())
        new = pos >= r
        Ka[pos[new]] += cs.alpha[:nc][new] * cs.ic[:nc][new]
        kt = self.kt
        cand = Ka[:len(ids)]
        best = int(np.argmin(cand))
        st = np.zeros(EXACT_STATE)
        li = int(np.flatnonzero(levels <= self.level_eps * (1 + 1e-9))[0])
        st[0], st[1], st[2] = li, max(self.n_iter, 1), nc
        st[3], st[4], st[5] = self.c2, self.ce2, 1.0
        st[6], st[7] = best, self.c2 - 2.0 * cand[best] + kt + self.ce2
        if self._last is not None:
            slot, beta, c2p, ce2p, d2 = self._last
            st[8], st[9], st[10], st[11], st[12] = c2p, ce2p, d2, pos[slot], beta
        else:       # no step to halve: the averaging step is then the identity
            st[8], st[9], st[10], st[11], st[12] = self.c2, self.ce2, st[7], pos[0], 1.0
        st[13], st[14] = self._val_best, self._val_stale
        hist = np.full((len(levels), EXACT_HIST), np.nan)
        return st, Ka, alpha, hist

    def exact_ok(self, X):
        """Whether :meth:`fit_exact` applies to the rows ``X`` (dense or CSR):
        BVM, the RBF kernel, no core cap, and rows that fit the exact pass's
        memory (stored values, rows x features or nnz, at most
        EXACT_MAX_CELLS). Whether it is cheaper than sampling is
        :func:`~streamcvm.problems.driver.run_solver`'s call."""
        cells = X.nnz if sp.issparse(X) else X.shape[0] * X.shape[1]
        return (self.method == "bvm" and self.plain and self.kernel.code == RBF
                and self.max_core is None and cells <= EXACT_MAX_CELLS)

    def margin_slack(self, eps):
        """How loose eps is against the margin: a point is a violator when
        d^2 > (1 + eps)^2 R^2, i.e. when its (K~a) falls short of the margin
        ||c||^2 by more than eps (2 + eps) R^2 / 2; this returns that shortfall
        relative to ||c||^2. The radius R^2 ~ kappa + 1 + 1/C is set by the
        feature space, while ||c||^2 (the squared margin) is often 1e-4 of it,
        so a fixed eps means very different things on different data; eps="auto"
        anneals until this ratio is at most ``margin_tol``."""
        return eps * (2.0 + eps) * self.radius2 / (2.0 * max(self.c2, 1e-300))

    def confirm(self, full_pass, max_passes=50, max_steps_per_block=100000, runner=None,
                progress=None):
        """Passes over every point, core vectors included, until a pass finds
        no violator at the target eps (:mod:`.passes`). ``full_pass``: a point
        source (``n_chunks``, ``points(i)``), whose chunks run as tasks on
        ``runner`` (a :class:`streamcvm.parallel.Runner`; default: the active
        dask client, else threads), or a factory of ``(ids, X, y[, w])``
        blocks, scanned here. Each pass takes its steps on the furthest
        violators it found, furthest first: BVM and FVM update their
        distances in place (one new kernel column per step), CVM recomputes
        them after SMO. ``progress(done, total, pass number)``: after each
        chunk task.
        Returns the number of violators the first pass found."""
        from ..parallel import as_runner
        from .passes import (BLOCK_ROWS, PER_CHUNK, Center, TopRows, pass_rows, scan,
                             sub_blocks, violator_task)
        tasks = hasattr(full_pass, "points") and hasattr(full_pass, "n_chunks")
        run = as_runner(runner) if tasks else None
        first = None
        for k in range(max_passes):
            center = Center(self)
            if tasks:
                out = run.map(violator_task, full_pass.n_chunks, full_pass, center, PER_CHUNK,
                              progress=None if progress is None else
                              lambda d, t, k=k: progress(d, t, k + 1))
            else:
                out = (scan([blk], center) for blk in full_pass())
            top = TopRows(pass_rows(self.core.d, self.core.sparse or self.densify))
            found = 0
            for f, c in out:                # as the chunks come: bounded memory
                found += f
                top.add(c)
            cand = top.result()
            if cand is not None and found:  # none found: this center is the certified one
                ids, X, y, w, _ = cand
                for blk in sub_blocks([(ids, X, y, w)], BLOCK_ROWS):
                    self._settle(*blk, max_steps=max_steps_per_block)
            if first is None:
                first = found
            self.record(self.eps)
            self.history[-1]["full_pass_violators"] = found
            if found == 0:
                self.cert_eps = None        # this center passed the full check at eps
                self._last = None
                break
        return first

    def certify(self, source, runner=None, progress=None):
        """One pass over every point of ``source`` (a point source, as
        :meth:`confirm`'s) without steps: the furthest point's distance d
        from the center gives the eps this center satisfies, d / R - 1, and
        so a bound on the dual gap, (R*^2 - R^2) / R^2 <= (1 + eps)^2 - 1
        (the MEB's (1 + eps) guarantee). For a fit that stopped at
        ``max_core`` before its eps: recorded in the history as
        ``certified_eps`` and ``dual_gap`` with ``capped: True``, and kept
        as :attr:`certified_eps`. Returns that eps."""
        from ..parallel import as_runner
        from .passes import Center, TopRows, violator_task
        center = Center(self)
        top = TopRows(1)
        found = 0
        for f, c in as_runner(runner).map(violator_task, source.n_chunks, source, center, 1,
                                          progress=None if progress is None else
                                          lambda d, t: progress(d, t, 1)):
            found += f
            top.add(c)
        cand = top.result()
        R2 = self.radius2
        d2 = R2 if cand is None else max(float(cand[4][0]), R2)
        self.cert_eps = float(np.sqrt(d2 / R2) - 1.0)
        self.record(self.eps)
        self.history[-1].update(capped=True, certified_eps=self.cert_eps,
                                dual_gap=(1.0 + self.cert_eps) ** 2 - 1.0,
                                violators=int(found))
        return self.cert_eps

    def _settle(self, ids, X, y, w=None, max_steps=100000):
        """Steps on the violators among the points of rows ``X``, furthest
        first, until none is left (or the core set is full)."""
        P = self.points.from_rows(ids, y, w)
        pid, ridx, s, q, ic = P
        sq = sq_norms(X)
        d2, _ = self.dist2(X, P, sq, check_core=True)
        for _ in range(max_steps):
            k = int(np.argmax(d2))
            R2 = self.radius2
            thr = (1.0 + self.eps) ** 2 * R2
            if self.method == "fvm" and \
                    self._away_gap() > max(d2[k] / R2 - 1.0, thr / R2 - 1.0):
                old_c2 = self.c2
                j, mu, _ = self.away()
                # a <- (1 + mu) a - mu e_j: (K~a) <- (1 + mu) (K~a) - mu k~(., j)
                Ka = 0.5 * (old_c2 + q - d2)
                Ka = (1.0 + mu) * Ka - mu * self._points_column(X, sq, P, j)
                d2 = self.c2 - 2.0 * Ka + q
                continue
            if d2[k] <= thr:
                break
            if self.max_core is not None and self.core.n >= self.max_core \
                    and pid[k] not in self.core:
                break
            old_c2, old_ce2 = self.c2, self.ce2
            r = ridx[k]
            slot0 = self.core.slot_of(pid[k])
            kx = None if self.core.cache or slot0 >= 0 else \
                self.kernel.block(self.core.rows(), X[r:r + 1], self.core.sq[:self.core.n],
                                  sq[r:r + 1])[:, 0]
            slot = self.step(int(pid[k]), X[r:r + 1], float(s[k]), q[k], ic[k],
                             float(d2[k]), self.eps, kx=kx)
            self.cert_eps = None    # a new center: only a clean pass certifies it
            if self.method == "cvm":
                d2, _ = self.dist2(X, P, sq, check_core=True)
                continue
            # a <- w a + (1 - w) e_z: (K~a) <- w (K~a) + (1 - w) k~(., z)
            wt = self._step_w
            Ka = 0.5 * (old_c2 + q + old_ce2 - d2)
            Ka = wt * Ka + (1.0 - wt) * self._points_column(X, sq, P, slot)
            d2 = self.c2 - 2.0 * Ka + q + self.ce2

    def _points_column(self, X, sq, P, slot):
        """k~(p, z) for the points ``P`` over rows ``X`` and the core point in
        ``slot``: s_p s_z (k(x_p, x_z) + b), plus ic_z where p is z."""
        cs = self.core
        pid, ridx, s, _, _ = P
        kz = self.kernel.block(X, cs.rows()[slot:slot + 1], sq, cs.sq[slot:slot + 1])[:, 0]
        col = s * cs.y[slot] * (kz[ridx] + self.b)
        col[pid == cs.ids[slot]] += cs.ic[slot]
        return col

    # -- results --------------------------------------------------------------
    def support(self, tol=1e-12):
        """(slots, alpha) of the core vectors with weight, renormalised."""
        cs = self.core
        a = cs.alpha[:cs.n].copy()
        a[a < tol * a.max()] = 0.0
        a /= a.sum()
        keep = np.flatnonzero(a > 0)
        return keep, a[keep]
