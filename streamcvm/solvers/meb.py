"""The annealing driver of CVM, BVM and Frank-Wolfe on the MEB dual of the
L2-SVMs (docs/design.md, sections 2-3).

:class:`MEBSolver` owns the schedule; what it moves is a :class:`~.ball.Ball`
(the center: core set, weights, ``||c||^2``, the one distance formula) and
how it moves it is a method object (:mod:`.methods`: CVM, BVM, FVM, picked
by name from :data:`~.methods.METHODS`). The driver never asks which method
it drives: it draws random samples, finds the furthest violator, asks the
method for a step, and asks whether the method wants a follow-up (BVM's core
violators), an away step (FVM) or a final averaging (BVM).

eps is annealed from 0.1, halved down to the target; a level ends after
``patience`` consecutive samples without a violator and, since the samples
skip the core set, a check of the core points themselves
(:meth:`~.methods.Method.settle_core`: CVM re-solves, FVM steps over them;
the level samples on if the center moved). ``eps="auto"`` halves
until eps is small against the margin ``||c||^2`` rather than the radius
(:meth:`MEBSolver.margin_slack` at most ``MARGIN_TOL``), which on the
benchmark sets lands between 2e-4 and 1e-5. Full passes over every point
(:meth:`MEBSolver.confirm`, :meth:`MEBSolver.certify`) run as chunk tasks
(:mod:`.passes`). Small problems held whole by the sampler run BVM over
every row instead (:mod:`.exact.bvm`).
"""
import time

import numpy as np

from ..options import SAMPLE_SIZE, Options
from .kernels import kernel_sums, sq_norms
from .ball import Ball, inner
from .exact.bvm import ExactBVM
from .methods import method_class


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
    """The eps annealing over a ball and a method.

    Parameters
    ----------
    kernel : streamcvm.solvers.kernels.Kernel (constant diagonal unless ``points``
        says otherwise)
    C : regularisation; b : 1 (two-class) or 0 (one-class)
    method : "cvm", "bvm" or "fvm" (:data:`~.methods.METHODS`); eps : target
        tolerance, or "auto"
    sample_size : rows per violator search (59: a top-5% point with 95% odds)
    points : which MEB points the rows stand for, with their signs, 1/C_i and
        linear terms (:mod:`streamcvm.solvers.points`); default: the rows,
        one C, the plain MEB. Only the plain MEB runs BVM.
    n_jobs : threads of the exact BVM pass (None or -1: all numba's); the
        model does not depend on it
    options : every other setting (:class:`streamcvm.options.Options`: the
        annealing's, the passes', the exact pass's; default the defaults)

    Attributes: ``ball`` (:class:`~.ball.Ball`), ``method`` (the method
    object; ``method.name``), ``exact`` (:class:`~.exact.bvm.ExactBVM`, or
    None for methods without it), ``history`` (a record per eps level and
    full pass), ``n_iter``, ``eps``, ``level_eps``, ``cert_eps``,
    ``full_pass_violators`` (None: no full pass checked the result).
    """

    def __init__(self, kernel, d, sparse, *, C, b=1.0, method, eps,
                 sample_size=SAMPLE_SIZE, patience=None, max_core=None, points=None,
                 n_jobs=None, options=None):
        opts = self.options = Options() if options is None else options
        if points is None:
            from .points import RowPoints
            if not kernel.constant_diagonal:
                raise ValueError(f"a kernel without constant k(x, x) ({kernel.name!r}) "
                                 "needs points with an eta bounding the diagonal")
            points = RowPoints(C, b)
        cls = method_class(method, plain=points.plain,
                           constant_diagonal=kernel.constant_diagonal,
                           problem=None if kernel.constant_diagonal else
                           f"the kernel {kernel.name!r} (k(x, x) not constant)")
        self.points = points
        self.kernel = kernel
        self.ball = Ball(kernel, points, C, b, d, sparse, cache=cls.kernel_cache,
                         max_core=max_core, dense_max_features=opts.dense_max_features,
                         core_reserve=opts.core_reserve)
        self.method = cls(self.ball, opts)
        self.exact = ExactBVM(self) if cls.exact else None
        # eps="auto": anneal until the tolerance, measured against the margin
        # rather than the radius, is at most margin_tol (see margin_slack)
        self.auto_eps = eps == "auto"
        self.eps_floor = opts.eps_floor
        self.margin_tol = opts.margin_tol
        self.eps = self.eps_floor if self.auto_eps else float(eps)
        self.sample_size = int(sample_size)
        self.patience = patience or opts.patience(cls.name)
        self.max_core = max_core
        self.init_size = opts.init_size
        self.n_iter = 0
        self.history = []
        self.t0 = None
        self.level_eps = None                       # the eps level being solved
        self.cert_eps = None                        # eps certified for the result
        self.full_pass_violators = None             # violators the first full pass found
        self.n_jobs = n_jobs                        # threads of the exact pass (None: all)
        # held-out rows (set_validation): their error is recorded per level;
        # with val_rule it also ends the annealing
        self.val = None
        self.val_rule = False
        self._val_best, self._val_stale = 2.0, 0.0
        self.switched = False                       # fit() handed over to fit_exact
        self.dispatch = None                        # the exact / sampled choice (run_solver's)
        self.note = None                            # what the progress display adds

    def levels(self):
        """The eps levels of the annealing, largest first."""
        return eps_levels(self.eps_floor if self.auto_eps else self.eps,
                          self.options.eps_start)

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
        cs = self.ball.core
        n = cs.n
        ay = cs.alpha[:n] * cs.y[:n]
        f = kernel_sums(self.kernel, Xv, cs.rows(), ay, self._val_sq, cs.sq[:n],
                        BT=cs.rows_t(), n_jobs=self.n_tasks())
        wrong = int(np.sum(yv * (f + self.ball.b * ay.sum()) <= 0))
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
        """Core vectors so far (while the exact pass runs, its count)."""
        if self.exact is not None and self.exact.running:
            return self.exact.core_size()
        return self.ball.core.n

    @property
    def certified_eps(self):
        """The eps the returned center satisfies: the last level's, or the
        bound of :func:`~.bvm_average.half_step_eps` when the last BVM step was halved."""
        return self.eps if self.cert_eps is None else self.cert_eps

    @property
    def radius2(self):
        return self.method.radius2()

    def margin_slack(self, eps):
        """How loose eps is against the margin: a point is a violator when
        d^2 > (1 + eps)^2 R^2, i.e. when its (K~a) falls short of the margin
        ||c||^2 by more than eps (2 + eps) R^2 / 2; this returns that shortfall
        relative to ||c||^2. The radius R^2 ~ kappa + 1 + 1/C is set by the
        feature space, while ||c||^2 (the squared margin) is often 1e-4 of it,
        so a fixed eps means very different things on different data; eps="auto"
        anneals until this ratio is at most ``margin_tol``."""
        return eps * (2.0 + eps) * self.radius2 / (2.0 * max(self.ball.c2, 1e-300))

    # -- steps --------------------------------------------------------------
    def init(self, ids, X, y, w=None):
        """Start from the points of the given rows (the problem's
        ``init_points``) with equal weights."""
        self.t0 = time.perf_counter()
        core, kernel = self.ball.core, self.kernel
        pid, ridx, s, q, ic = self.points.init_points(ids, y, w)
        if not len(pid):
            raise ValueError(f"no training points: {self.options.init_draws} samples drew "
                             f"none (no rows, "
                             f"or, for ranking, no pair of rows of different relevance "
                             f"within a query)")
        for k in range(len(pid)):
            if pid[k] not in core:
                r = ridx[k]
                core.add(int(pid[k]), X[r:r + 1], float(s[k]), kernel, ic[k], q[k])
        core.alpha[:core.n] = 1.0 / core.n
        self.ball.refresh_c2()
        self.method.start(self.eps)

    def step(self, pid, x, s, q, ic, d2, eps, kx=None):
        """Take the violating point ``pid`` (row ``x``, sign ``s``, linear
        term ``q``, 1/C ``ic``) at squared distance ``d2``; ``kx``: its row's
        base kernel values against the current core vectors, if known.
        Returns (its slot, the step's weight ``w``: ``a <- w a + (1 - w)
        e_slot``, or None when the method re-solved the core QP)."""
        slot = self.ball.core.slot_of(pid)
        if slot < 0:        # a new vector enters at alpha 0
            slot = self.method.enter(pid, x, s, q, ic, d2)
        w = self.method.move(slot, d2, eps, kx)
        self.n_iter += 1
        return slot, w

    def away(self):
        """The method's away step (FVM); returns (slot, lam, Delta-) or None."""
        out = self.method.away()
        if out is not None:
            self.n_iter += 1
        return out

    def half_last_step(self):
        """Average the result where the method does (BVM's mean of its last
        two centers) and record the eps that center is certified for."""
        cert = self.method.half_last_step(self.level_eps)
        if cert is None:
            return
        self.cert_eps = cert
        if self.history:        # the level's record keeps the c2 its stop was decided on
            self.history[-1]["certified_eps"] = self.cert_eps

    def search(self, ids, X, y, eps, w=None):
        """One violator search over the points of candidate rows (labels or
        targets ``y``, sample weights ``w``); True if it took a step."""
        if len(ids) == 0:
            return False
        P = self.points.from_rows(ids, y, w)
        d2, Kc = self.ball.dist2(X, P, check_core=self.points.check_core)
        k = int(np.argmax(d2))
        R2 = self.radius2
        if self.method.away_steps:
            up = d2[k] / R2 - 1.0                 # Delta+
            if self.method.away_gap() > max(up, (1.0 + eps) ** 2 - 1.0):
                self.away()
                return True
        if d2[k] <= (1.0 + eps) ** 2 * R2:
            return False
        if self.max_core is not None and self.ball.core.n >= self.max_core:
            return False
        pid, ridx, s, q, ic = P
        r = ridx[k]
        self.step(int(pid[k]), X[r:r + 1], float(s[k]), q[k], ic[k], float(d2[k]), eps, kx=Kc[r])
        self.method.after_search(self, eps)
        return True

    def record(self, eps):
        rec = {"iteration": self.n_iter, "core_size": self.ball.core.n,
               "radius": float(np.sqrt(max(self.radius2, 0.0))),
               "eps": eps, "elapsed": time.perf_counter() - self.t0,
               "c2": float(self.ball.c2), "ce2": float(self.ball.ce2),
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
        """(meta, arrays): everything the sampled fit loop (or a paused exact
        pass) needs to continue exactly where it is (JSON-able values, plain
        arrays)."""
        if self.exact is not None and self.exact.running:
            return self.exact.state(self.levels())
        meta, arrays = self.ball.state()
        m_meta, m_arrays = self.method.state()
        meta.update(m_meta)
        arrays.update(m_arrays)
        meta.update({"n_iter": int(self.n_iter), "eps": float(self.eps),
                     "level_eps": self.level_eps, "cert_eps": self.cert_eps,
                     "history": self.history, "elapsed": time.perf_counter() - self.t0,
                     "val": [self._val_best, self._val_stale], "dispatch": self.dispatch})
        return meta, arrays

    def restore(self, meta, arrays):
        """Set a freshly constructed solver (same parameters) to a saved state."""
        if meta.get("exact"):
            self.exact.restore(meta, arrays)
            return self
        self.ball.restore(meta, arrays)
        self.method.restore(meta, arrays)
        for k in ("n_iter", "eps", "level_eps", "cert_eps"):
            setattr(self, k, meta[k])
        self.history = meta["history"]
        self.dispatch = meta.get("dispatch")
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
        if self.exact is not None:
            self.exact.ended_Ka = None      # sampled steps move the center
        weighted = self.points.weighted
        if resume is None:
            for _ in range(self.options.init_draws):     # pooled chunks holding no point
                first = pool.draw(self.init_size, classes=classes, target=target,
                                  with_weight=weighted)
                if len(first[0]):
                    break
            self.init(*first)
            self.level_eps = None
            li0, calm0 = 0, 0
        else:
            li0, calm0 = resume
        shown = time.perf_counter()
        for li, eps in enumerate(self.levels()):
            if li < li0:
                continue
            self.level_eps = eps
            calm = calm0 if li == li0 else 0
            capped = False
            while True:
                while calm < self.patience:
                    if checkpoint is not None:
                        checkpoint(self, (li, calm))
                    drawn = pool.draw(self.sample_size, classes=classes,
                                      exclude=self.points.exclude(self.ball.core),
                                      target=target, with_weight=weighted)
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
                        capped = self.max_core is not None and \
                            self.ball.core.n >= self.max_core
                        if capped:
                            break
                # the draws skip the core set: its points are checked here (the
                # only points left when it holds every row); a step on one moves
                # the center, and the level samples on
                if capped or not self.method.settle_core(self, eps):
                    break
                calm = 0
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

    def exact_ok(self, X):
        """Whether :meth:`fit_exact` applies to the rows ``X``
        (:meth:`.exact.bvm.ExactBVM.ok`; False for methods without it)."""
        return self.exact is not None and self.exact.ok(X)

    def fit_exact(self, ids, X, y, checkpoint=None, warm=False, callback=None):
        """The method's exact pass over every row ``ids``, ``X``, ``y`` of a
        small in-memory problem (:meth:`.exact.bvm.ExactBVM.fit`). Returns self."""
        self.exact.fit(ids, X, y, checkpoint=checkpoint, warm=warm, callback=callback)
        return self

    @property
    def exact_pending(self):
        """A paused exact pass restored from a snapshot waits to continue."""
        return self.exact is not None and self.exact.running

    def confirm(self, full_pass, runner=None, progress=None):
        """Passes over every point, core vectors included, until a pass finds
        no violator at the target eps (:mod:`.passes`). ``full_pass``: a point
        source (``n_chunks``, ``points(i)``), whose chunks run as tasks on
        ``runner`` (a :class:`streamcvm.data.parallel.Runner`; default: the active
        dask client, else threads), or a factory of ``(ids, X, y[, w])``
        blocks, scanned here. Each pass takes its steps on the furthest
        violators it found, furthest first: BVM and FVM update their
        distances in place (one new kernel column per step), CVM recomputes
        them after SMO. ``progress(done, total, pass number)``: after each
        chunk task.
        Returns the number of violators the first pass found."""
        from ..data.parallel import as_runner
        from .passes import TopRows, pass_rows, scan, sub_blocks, violator_task
        opts = self.options
        block, per_chunk = opts.pass_block_rows, opts.pass_per_chunk
        tasks = hasattr(full_pass, "points") and hasattr(full_pass, "n_chunks")
        run = as_runner(runner) if tasks else None
        first = None
        for k in range(opts.pass_max_passes):
            center = self.ball.freeze(self.radius2, self.eps)
            if tasks:
                out = run.map(violator_task, full_pass.n_chunks, full_pass, center, per_chunk,
                              block,
                              progress=None if progress is None else
                              lambda d, t, k=k: progress(d, t, k + 1))
            else:
                out = (scan([blk], center, per_chunk, block) for blk in full_pass())
            top = TopRows(pass_rows(self.ball.core.d, self.ball.core.sparse or self.ball.densify,
                                    opts))
            found = 0
            for f, c in out:                # as the chunks come: bounded memory
                found += f
                top.add(c)
            cand = top.result()
            if cand is not None and found:  # none found: this center is the certified one
                ids, X, y, w, _ = cand
                for blk in sub_blocks([(ids, X, y, w)], block):
                    self._settle(*blk, max_steps=opts.settle_max_steps)
            if first is None:
                first = found
            self.record(self.eps)
            self.history[-1]["full_pass_violators"] = found
            if found == 0:
                self.cert_eps = None        # this center passed the full check at eps
                self.method.forget_last()
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
        from ..data.parallel import as_runner
        from .passes import TopRows, violator_task
        center = self.ball.freeze(self.radius2, self.eps)
        top = TopRows(1)
        found = 0
        for f, c in as_runner(runner).map(violator_task, source.n_chunks, source, center, 1,
                                          self.options.pass_block_rows,
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
        first, until none is left (or the core set is full). After each step
        the points' (K~a) follow the step's weight (one kernel column), or are
        recomputed when the method re-solved."""
        ball, method = self.ball, self.method
        core = ball.core
        P = self.points.from_rows(ids, y, w)
        pid, ridx, s, q, ic = P
        sq = sq_norms(X)
        d2, _ = ball.dist2(X, P, sq, check_core=True)
        for _ in range(max_steps):
            k = int(np.argmax(d2))
            R2 = self.radius2
            thr = (1.0 + self.eps) ** 2 * R2
            if method.away_steps and \
                    method.away_gap() > max(d2[k] / R2 - 1.0, thr / R2 - 1.0):
                old_c2 = ball.c2
                j, lam, _ = self.away()
                # a <- (1 + lam) a - lam e_j: (K~a) <- (1 + lam) (K~a) - lam k~(., j)
                Ka = inner(old_c2, d2, q)
                Ka = (1.0 + lam) * Ka - lam * ball.points_column(X, sq, P, j)
                d2 = ball.distances(Ka, q)
                continue
            if d2[k] <= thr:
                break
            if self.max_core is not None and core.n >= self.max_core \
                    and pid[k] not in core:
                break
            old_c2, old_ce2 = ball.c2, ball.ce2
            r = ridx[k]
            slot0 = core.slot_of(pid[k])
            kx = None if core.cache or slot0 >= 0 else \
                self.kernel.block(core.rows(), X[r:r + 1], core.sq[:core.n], sq[r:r + 1])[:, 0]
            slot, wt = self.step(int(pid[k]), X[r:r + 1], float(s[k]), q[k], ic[k],
                                 float(d2[k]), self.eps, kx=kx)
            self.cert_eps = None    # a new center: only a clean pass certifies it
            if wt is None:
                d2, _ = ball.dist2(X, P, sq, check_core=True)
                continue
            # a <- w a + (1 - w) e_z: (K~a) <- w (K~a) + (1 - w) k~(., z)
            Ka = inner(old_c2, d2, q, old_ce2)
            Ka = wt * Ka + (1.0 - wt) * ball.points_column(X, sq, P, slot)
            d2 = ball.distances(Ka, q)

    # -- results --------------------------------------------------------------
    def support(self, tol=1e-12):
        """(slots, alpha) of the core vectors with weight, renormalised."""
        return self.ball.support(tol)
