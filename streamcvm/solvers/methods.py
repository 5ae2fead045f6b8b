"""How the center moves: one class per method (docs/design.md, section 3).

All three grow a core set from the violators that the annealing driver
(:class:`streamcvm.solvers.meb.MEBSolver`) finds; they differ in the step
they take on one:

- :class:`CVM`: add the furthest violator, re-solve the core QP by SMO
  (warm start).
- :class:`BVM`: fixed radius ``r^2 = kt``; move the center just enough to
  touch the violator, ``a <- beta a + (1 - beta) e_z``, ``beta = r / d_z``
  (bvm eqs. 5-6), in the augmented space of the smaller-ball procedure (sec.
  3.3: center ``[c; ce]``, ``ce`` starting at ``r``, so distances are
  ``||c - phi||^2 + ce^2``; one round of Alg. 4, as the paper's own
  experiments). Core vectors may be violators again: their ``(K~a)`` is
  tracked (one kernel column per step), and after each search up to 20
  steps go to the furthest core violator (:meth:`BVM.after_search`). The
  result is the mean of the last two centers (:meth:`BVM.half_last_step`).
  Small problems held whole run the exact variant over every row
  (:mod:`.exact.bvm`).
- :class:`FVM`: Frank-Wolfe step towards the furthest point with exact line
  search ``lambda = (d^2 - R^2) / (2 d^2)``, plus Yildirim's away steps.

A method object is bound to the solver's :class:`~.ball.Ball` and holds what
is its own (CVM's SMO gradient, BVM's last step); :data:`METHODS` maps the
names users give to the classes, and :func:`method_class` checks that a
method can solve a problem, with one message for every caller.
"""
import numpy as np
from numba import njit

from .bvm_average import half_last_step, half_step_eps
from .smo import _q, smo_simplex


@njit(cache=True, nogil=True)
def gradient(K, y, b, ic, q, alpha, n):
    """2 Q a - q over the first n core vectors (O(n^2))."""
    g = np.empty(n)
    for i in range(n):
        s = 0.0
        for j in range(n):
            if alpha[j] != 0.0:
                s += _q(K, y, b, ic, i, j) * alpha[j]
        g[i] = 2.0 * s - q[i]
    return g


class Method:
    """The interface; the defaults are those of a method that tracks the
    core vectors' (K~a) and takes no away steps."""

    name = None
    plain_only = False      # solves only the plain MEB (constant k(x, x), one C, no q)
    kernel_cache = True     # needs k among the core vectors (the |S|^2 cache)
    away_steps = False      # takes away steps (away_gap, away)
    fixed_radius = False    # the radius is r^2, not a'q - ||c||^2
    exact = False           # has the exact variant over every row (.exact.bvm)

    def __init__(self, ball, options):
        self.ball = ball
        self.options = options      # streamcvm.options.Options

    def start(self, eps):
        """After the first core vectors enter at equal weights."""
        self.ball.Ka = self.ball.core_Ka()

    def radius2(self):
        ball = self.ball
        return ball.aq() - ball.c2

    def enter(self, pid, x, s, q, ic, d2):
        """Add a violating point to the core set; returns its slot."""
        return self.ball.add(pid, x, s, ic, q, d2)

    def move(self, slot, d2, eps, kx=None):
        """Move the center towards core point ``slot`` (at squared distance
        ``d2``). Returns the step's weight ``w`` (``a <- w a + (1 - w)
        e_slot``), or None when the step re-solves (CVM)."""
        raise NotImplementedError

    def after_search(self, solver, eps):
        """After a search that took a step (BVM: core violators)."""

    def settle_core(self, solver, eps):
        """At the end of an eps level: steps on the core points that violate
        at ``eps``. The draws skip the core set, so without this a level that
        finds no violator outside it leaves the center as the last step left
        it, coarser than ``eps`` (every level, when the core set holds every
        point). Returns the number of steps (0: none violates). The default
        takes none: BVM steps on its core violators after every search
        (:meth:`BVM.after_search`), and small problems run its exact pass."""
        return 0

    def away_gap(self):
        """Delta- of the nearest weighted core vector (away steps only)."""
        return 0.0

    def half_last_step(self, level_eps):
        """The certified eps after replacing the result by the mean of the
        last two centers, or None when the method does not average."""
        return None

    def state(self):
        """(meta, arrays) of the method's own state."""
        return {}, {}

    def restore(self, meta, arrays):
        pass

    def forget_last(self):
        """The center has just been certified as it is: nothing to average."""


class CVM(Method):
    name = "cvm"

    def __init__(self, ball, options):
        super().__init__(ball, options)
        self.smo_max_iter = options.smo_max_iter
        # the core QP is solved until its gradient gap (the spread of the
        # weighted core vectors' d^2) is smo_tol * eps * R^2: the scale of the
        # violation test itself (0.1: the same accuracy, slower); the (1 + eps)
        # guarantee comes from the outer loop.
        self.smo_tol = options.smo_tol
        self.g = np.empty(0)        # the SMO gradient, g = 2 Q a - q
        self.g_new = 0.0            # its entry for the vector entering

    def start(self, eps):
        cs = self.ball.core
        self.g = gradient(cs.K, cs.y, self.ball.b, cs.ic, cs.q, cs.alpha, cs.n)
        self.solve(eps)

    def enter(self, pid, x, s, q, ic, d2):
        ball = self.ball
        self.g_new = ball.c2 + ball.ce2 - d2     # a new vector's gradient at alpha 0
        return ball.add(pid, x, s, ic, q, d2)

    def solve(self, eps):
        ball = self.ball
        cs = ball.core
        tol = self.smo_tol * eps * max(self.radius2(), 1e-12)
        if len(self.g) < cs.n:      # a vector entered since: extend the gradient
            self.g = gradient(cs.K, cs.y, ball.b, cs.ic, cs.q, cs.alpha, cs.n) \
                if len(self.g) < cs.n - 1 else np.append(self.g, self.g_new)
        smo_simplex(cs.K, cs.y, ball.b, cs.ic, cs.alpha, self.g, cs.n, tol, self.smo_max_iter)
        # g = 2 Q a - q, so ||c||^2 = a'Qa = (a'g + a'q) / 2: O(|S|), not O(|S|^2)
        n = cs.n
        ball.c2 = 0.5 * (float(cs.alpha[:n] @ self.g[:n]) + ball.aq())

    def move(self, slot, d2, eps, kx=None):
        self.solve(eps)
        return None

    def settle_core(self, solver, eps):
        """Re-solve the core QP at ``eps`` when a core point violates there:
        SMO was last run at the tolerance of the level a point last entered
        at. A core point's squared distance is ``||c||^2 - g_i`` (O(|S|)
        from the gradient); after the solve none exceeds ``R^2 (1 + eps)``."""
        ball = self.ball
        n = ball.core.n
        if n == 0 or len(self.g) < n:
            return 0
        d2 = ball.c2 + ball.ce2 - self.g[:n]
        if float(d2.max()) <= (1.0 + eps) ** 2 * self.radius2():
            return 0
        self.solve(eps)
        solver.n_iter += 1
        return 1

    def state(self):
        return {}, {"g": self.g}

    def restore(self, meta, arrays):
        self.g = arrays["g"]


class BVM(Method):
    name = "bvm"
    plain_only = True
    kernel_cache = False    # no kernel among core vectors: no O(|S|^2) cache
    fixed_radius = True
    exact = True

    def __init__(self, ball, options):
        super().__init__(ball, options)
        # the smaller ball (bvm paper sec. 3.3, Alg. 4): the ball lives in the
        # space [phi~; 0] with center [c; ce]; r2 shrinks from kt
        ball.ce2 = ball.kt
        self.last = None        # the last step, to halve: (slot, beta, c2, ce2, d2)

    def radius2(self):
        return self.ball.r2

    def move(self, slot, d2, eps, kx=None):
        # c <- phi(z) + beta (c - phi(z)) in the space [phi~; ce]
        ball = self.ball
        cs = ball.core
        beta = np.sqrt(ball.r2 / d2)
        n = cs.n
        cs.alpha[:n] *= beta
        cs.alpha[slot] += 1.0 - beta
        self.last = (slot, beta, ball.c2, ball.ce2, d2)
        df2 = d2 - ball.ce2                       # distance in phi~ alone
        ball.c2 = beta * ball.c2 + (1.0 - beta) * ball.kt + (beta * beta - beta) * df2
        ball.ce2 *= beta * beta
        ball.Ka = beta * ball.Ka + (1.0 - beta) * ball.column(slot, kx)
        return beta

    def after_search(self, solver, eps):
        """Steps towards core vectors that lie outside the ball (their (K~a)
        is tracked, so finding them costs O(|S|)); returns the count."""
        ball = self.ball
        cs = ball.core
        thr = (1.0 + eps) ** 2 * ball.r2
        steps = self.options.bvm_refine_steps
        for t in range(steps):
            d2 = ball.distances(ball.Ka, ball.kt)
            j = int(np.argmax(d2))
            if d2[j] <= thr:
                return t
            solver.step(int(cs.ids[j]), None, cs.y[j], cs.q[j], cs.ic[j], float(d2[j]), eps)
        return steps

    def half_last_step(self, level_eps):
        """Replace the center by the mean of the last two (the last step taken
        at half its length; see :func:`~.bvm_average.half_last_step`), updating the
        weights, ``||c||^2``, ``ce^2`` and the tracked ``(K~a)``; returns the
        certified eps (None before any step)."""
        if self.last is None:
            return None
        ball = self.ball
        slot, beta, c2p, ce2p, d2 = self.last
        self.last = None
        cs = ball.core
        n = cs.n
        a = cs.alpha[:n]
        a[slot] -= 1.0 - beta
        a /= beta
        a[slot] = max(a[slot], 0.0)
        bp, ball.c2, ball.ce2 = half_last_step(beta, c2p, ce2p, d2, ball.kt)
        a *= bp
        a[slot] += 1.0 - bp
        col = ball.column(slot)
        Kap = (ball.Ka - (1.0 - beta) * col) / beta      # (K~a) before the last step
        ball.Ka = bp * Kap + (1.0 - bp) * col
        return float(half_step_eps((1.0 + level_eps) ** 2 * ball.r2, d2, ball.r2))

    def forget_last(self):
        self.last = None

    def state(self):
        last = None
        if self.last is not None:
            slot, beta, c2p, ce2p, d2 = self.last
            last = [int(slot), float(beta), float(c2p), float(ce2p), float(d2)]
        return {"last": last}, {}

    def restore(self, meta, arrays):
        self.last = None if meta.get("last") is None else tuple(meta["last"])


class FVM(Method):
    name = "fvm"
    away_steps = True

    def move(self, slot, d2, eps, kx=None):
        # exact line search: lambda = (d^2 - R^2) / (2 (d^2 - Delta_z))
        # (docs/design.md section 3; Delta_z = q_z - K~_zz, 0 for the plain MEB)
        ball = self.ball
        cs = ball.core
        kd = ball.kd(slot)
        R2 = self.radius2()
        lam = min(max((d2 - R2) / (2.0 * (d2 - (cs.q[slot] - kd))), 0.0), 1.0)
        p = ball.Ka[slot]
        n = cs.n
        cs.alpha[:n] *= 1.0 - lam
        cs.alpha[slot] += lam
        ball.c2 = (1 - lam) ** 2 * ball.c2 + 2 * lam * (1 - lam) * p + lam * lam * kd
        ball.Ka = (1.0 - lam) * ball.Ka + lam * ball.column(slot)
        return 1.0 - lam

    def settle_core(self, solver, eps):
        """Frank-Wolfe and away steps over the core points alone (their (K~a)
        is tracked: O(|S|) a search, one cached kernel column a step), with
        :meth:`MEBSolver.search`'s rule, until none violates at ``eps`` (at
        most the option ``settle_max_steps`` steps)."""
        ball = self.ball
        cs = ball.core
        for t in range(self.options.settle_max_steps):
            d2 = ball.core_distances()
            k = int(np.argmax(d2))
            R2 = self.radius2()
            if self.away_gap() > max(d2[k] / R2 - 1.0, (1.0 + eps) ** 2 - 1.0) \
                    and solver.away() is not None:
                continue
            if d2[k] <= (1.0 + eps) ** 2 * R2:
                return t
            solver.step(int(cs.ids[k]), None, float(cs.y[k]), cs.q[k], cs.ic[k],
                        float(d2[k]), eps)
        return self.options.settle_max_steps

    def _nearest(self):
        """(slot, d^2) of the weighted core vector nearest to the center."""
        ball = self.ball
        d2 = np.where(ball.core.alpha[:ball.core.n] > 0, ball.core_distances(), np.inf)
        j = int(np.argmin(d2))
        return j, d2[j]

    def away_gap(self):
        return 1.0 - self._nearest()[1] / self.radius2()

    def away(self):
        """Yildirim's away step: when the core vector nearest to the center is
        further inside the ball than the furthest point is outside, shrink its
        weight: a <- (1 + lam) a - lam e_j. Returns (slot, lam, Delta-) or None."""
        ball = self.ball
        cs = ball.core
        n = cs.n
        R2 = self.radius2()
        j, d2j = self._nearest()
        dm = 1.0 - d2j / R2                       # Delta-
        a = cs.alpha[j]
        if dm <= 0 or a >= 1.0:
            return None
        # the line search of move() towards -e_j: lam = (R^2 - d^2) / (2 (d^2 - Delta_j))
        kd = ball.kd(j)
        lam = min((R2 - d2j) / (2.0 * (d2j - (cs.q[j] - kd))), a / (1.0 - a))
        p = ball.Ka[j]
        cs.alpha[:n] *= 1.0 + lam
        cs.alpha[j] -= lam
        if cs.alpha[j] < 1e-15:
            cs.alpha[j] = 0.0
        ball.c2 = (1 + lam) ** 2 * ball.c2 - 2 * lam * (1 + lam) * p + lam * lam * kd
        ball.Ka = (1.0 + lam) * ball.Ka - lam * ball.column(j)
        return j, lam, dm


METHODS = {cls.name: cls for cls in (CVM, BVM, FVM)}


def method_class(name, *, plain=True, constant_diagonal=True, problem=None):
    """The class of method ``name``, checked against the problem: ``plain``
    (one C, no linear term) and ``constant_diagonal`` (k(x, x) constant).
    ``problem`` names what is not plain in the message (e.g. "regression")."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}: {', '.join(METHODS)}")
    cls = METHODS[name]
    if cls.plain_only and not (plain and constant_diagonal):
        what = problem or ("a kernel without constant k(x, x)" if not constant_diagonal
                           else "a problem with weights or a linear term")
        ok = " or ".join(repr(k) for k, c in METHODS.items() if not c.plain_only)
        raise ValueError(f"method={name!r} solves the plain MEB only (constant k(x, x), "
                         f"one C, no linear term), not {what}: use method={ok}")
    return cls

