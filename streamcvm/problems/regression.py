"""L2-SVR as a center-constrained MEB: Core Vector Regression (cvr paper sec. 3).

The primal (cvr eq. 6), with the bias penalised and squared slacks,

    min ||w||^2 + b^2 + C/(mu m) sum(xi_i^2 + xi*_i^2) + 2 C epsbar
    s.t. t_i - f(x_i) <= epsbar + xi_i,  f(x_i) - t_i <= epsbar + xi*_i,

has the dual (eqs. 7-8) over the 2m points ``(x_i, s)``, ``s = +-1``:
``max a'q - a'K~a`` on the simplex with ``K~ = s s' (K + 1) + (mu m / C) I``
and ``q = eta + (2/C) s t`` (eq. 15), i.e. a center-constrained MEB
(:class:`~streamcvm.solvers.points.SignedPoints`). The tube width ``epsbar``
is not a parameter: ``mu`` (the mean slack, like nu-SVR's nu) sets it, and
it is recovered from the solution (eq. 10). The regression function is
``f(x) = C sum_p a_p s_p (k(x_p, x) + 1)`` (eq. 9), fitted to the
standardised targets ``(y - mean) / sd`` (the mean of the rows the solve
trains on, the sd of the fit's training set) and returned in the targets'
units (coefficients, intercept and tube width times sd, the mean added to
the intercept): the bias is penalised, and in the targets' own units
``||w||^2`` would weigh against the slacks differently at every scale of y,
so y, 1000 y and y + 1e6 would give different models.

The furthest point of a row is the sign of its residual: ``d^2 = ||c||^2 +
eta + 2 s (t - f(x)) / C`` away from the core set, so the violator search
looks for the rows furthest outside the tube.
"""
import numpy as np

from ..solvers.methods import method_class
from .driver import kernel_bound, row_stats, run_solver
from .machine import Machine
from ..solvers.points import SignedPoints


def regression_points(store, kernel, C, mu, stats=None, runner=None, centred=True,
                      scale=None):
    """The SVR points of ``store`` (``stats``: :func:`row_stats`, computed
    here when not given: the targets' mean and standard deviation
    (:func:`target_moments`) and range and, for kernels without a constant
    diagonal, the row norms, fix eta). The problem's targets are ``(y -
    mean) / scale``: ``scale`` is the fit's unit, the same for all its
    solves (:func:`prepare_fit`), or None: these rows' sd. ``mu`` is in the
    targets' units. ``centred=False``: the raw targets are fitted (offset
    0, scale 1 unless given), as surface fitting needs: f = 1 on every
    point is not the bias's."""
    stats = row_stats(store, runner=runner) if stats is None else stats
    offset, sd = target_moments(stats) if centred else (0.0, 1.0)
    scale = (sd if centred else 1.0) if scale is None else float(scale)
    scale = scale if scale > TINY_SD * max(abs(offset), 1.0) else 1.0
    tmax = max(stats["max_y"] - offset, offset - stats["min_y"], 0.0)
    return SignedPoints(C, mu, store.n, tmax, kmax=kernel_bound(kernel, stats), offset=offset,
                        scale=scale)


# a target whose standard deviation is below this share of its size (or of
# 1) is constant: it is only centred, not divided by its sd
TINY_SD = 1e-12


def in_target_units(points, coef, epsbar, **fields):
    """A regression :class:`Machine` in the targets' units from the solution
    of ``points``' problem (its coefficients ``coef`` and tube half width
    ``epsbar`` on the targets as the points see them): ``f(x) = scale sum
    coef (k(x_p, x) + 1) + offset``, the tube half width times the scale."""
    coef = np.asarray(coef, np.float64) * points.scale
    return Machine(coef=coef, intercept=float(coef.sum() + points.offset),
                   epsilon_bar=float(epsbar) * points.scale, classes=None, regression=True,
                   target=(points.offset, points.scale), **fields)


def train_regressor(store, kernel, solve, *, C, mu, full_pass=False, stats=None,
                    warn=True, train_size, c_per_row=None, stage_core=None,
                    centred=True, exact=False, scale=None):
    """Train an L2-SVR on ``store`` (targets in its ``y``); returns a
    :class:`Machine` with ``regression=True`` whose support rows are the
    distinct rows with weight (a row's two signs merged into one
    coefficient) and whose ``epsilon_bar`` is the tube's half width.
    ``solve``: the solver's options and the run's plumbing
    (:class:`~streamcvm.problems.driver.Solve`; default: CVM, eps 1e-3).

    ``train_size``: "all" rows, or "auto" / a number of rows: progressive
    subsampling (:mod:`.progressive`, stages judged by held-out squared
    errors) on more than the option ``progressive_min_rows`` rows, each
    stage with ``C = c_per_row`` x its rows (``C`` when ``c_per_row`` is
    None), the stages ending before one whose core set, extrapolated from
    the last (core vectors grow like the rows), would pass ``stage_core``
    (None: the option ``regression_stage_core``: its |S|^2 float32 kernel
    cache, 0.48 GB at 11,000, is most of the fit's memory) and ``max_core``;
    ``stats`` is then unused (each stage's are its sample's).
    Every solve (the fit on every row, each stage) standardises the targets:
    centred on the mean of the rows it trains on, divided by ``scale`` (the
    fit's unit, the sd of its training set; None: each solve's rows' sd),
    and returns its machine in the targets' units (:func:`regression_points`,
    :func:`in_target_units`); ``mu`` is in the targets' units.
    ``centred=False`` (every row, no stages): the raw targets are fitted,
    neither centred nor scaled.
    ``exact``: a fit on every row of a small store may be solved exactly
    (:func:`exact_applies`; ``max_core`` then does not apply)."""
    from .progressive import SquaredVerdict, plan, train_progressive
    callback, max_core = solve.callback, solve.max_core
    method_class(solve.method, plain=False, problem="regression (a linear term)")
    if not C > 0 or not mu > 0:
        raise ValueError(f"C and mu must be positive, got C={C!r}, mu={mu!r}")
    opts = solve.options
    stage_core = opts.regression_stage_core if stage_core is None else stage_core
    sizes = None if full_pass else plan(store, None, train_size, opts)
    if sizes is not None and not centred:
        raise ValueError("centred=False fits every row: use train_size='all'")
    if sizes is None:
        machine, solver = _fit(store, kernel, solve, C=C, mu=mu, full_pass=full_pass,
                               stats=stats, centred=centred, exact=exact, scale=scale)
    else:
        budget = stage_core if max_core is None else min(stage_core, max_core)

        def stage(sub, val, make_pool, stage_resume, warm):
            def shown(solver):      # the progress bar says which stage runs
                solver.note = f"{sub.n:,} sampled rows"
                callback(solver)
            # (no full-pass progress: a stage's rows are in memory)
            return _fit(sub, kernel, solve.but(resume=stage_resume, pass_progress=None,
                                               callback=None if callback is None else shown),
                        C=C if c_per_row is None else c_per_row * sub.n, mu=mu,
                        make_pool=make_pool, scale=scale)

        def admit(rows, machine, m):
            return machine.core_size * rows / m <= budget
        from .compress import compactor
        machine = train_progressive(store, kernel, None, sizes, options=opts,
                                    tol=opts.regression_stage_tol,
                                    seed=solve.seed, runner=solve.runner,
                                    resume=solve.resume, train=stage,
                                    verdict=SquaredVerdict(),
                                    admit=admit, compact=compactor(kernel, solve, True))
        solver = None
    solved_exactly = sizes is None and solver is None    # max_core does not apply
    if warn and max_core is not None and not solved_exactly and machine.core_size >= max_core:
        import warnings
        cert = None if solver is None else solver.cert_eps
        got = "" if cert is None else \
            f" (its center satisfies eps {cert:.2g}: dual gap at most {(1 + cert) ** 2 - 1:.2g})"
        what = "the last stage's eps" if solver is None else f"eps {solver.eps:.2g}"
        warnings.warn(f"streamcvm: the core set reached max_core={max_core:,} before {what} "
                      f"was met{got}; the fit may be looser than asked (raise max_core, or "
                      "lower C or mu)", RuntimeWarning, stacklevel=3)
    return machine


# An L2-SVR on at most svr_exact_rows rows (its kernel-row cache, at most the option
# kernel_cache_mb, in at most half the memory available: exact_room) is
# solved exactly over all 2m points (solvers.exact.svr: SMO over a cache of kernel
# rows) rather than by CVM's core set, when its caller allows
# it (CVMRegressor without max_core, and its mu / gamma trials) and nothing
# asks for the core-set machinery: method "cvm", no full pass, no
# checkpoints or resume, not a progressive stage. At the accurate settings
# the defaults choose, most rows are support vectors, CVM's core set grows
# to most of the rows and its QP costs O(|S|^2) per added vector.
# The row limit is for time, not memory: SMO over every point costs O(m) per
# step and ~1-3 m steps, and a cache below the rows SMO uses recomputes rows.
# eps="auto" there: every point's KKT violation within svr_exact_tol x sd(y); C="auto":
# svr_exact_c_per_row x the rows.


def exact_room(n, options):
    """Whether the exact path fits: at most the option ``svr_exact_rows``
    rows and its kernel-row cache
    (:func:`~streamcvm.solvers.exact.rowcache.cache_rows` rows of n float32
    values, ``kernel_cache_mb``) in half the memory available now (psutil)."""
    import psutil
    from ..solvers.exact.rowcache import cache_rows
    return n <= options.svr_exact_rows and \
        4.0 * cache_rows(n, options.kernel_cache_mb) * n <= 0.5 * psutil.virtual_memory().available


def exact_fit(store, method, full_pass, checkpointed, progressive, options):
    """Whether CVMRegressor's fit on every row of ``store`` (``max_core``
    not given) is solved exactly: the one rule, also :func:`exact_applies`'."""
    return (exact_room(store.n, options) and method == "cvm" and not full_pass
            and not checkpointed and not progressive)


def exact_applies(store, solve, full_pass=False, make_pool=None):
    """Whether :func:`_fit` solves ``store`` with :func:`_fit_exact`
    (:func:`exact_fit`; a progressive stage comes with its ``make_pool``)."""
    return solve.resume is None and exact_fit(
        store, solve.method, full_pass, solve.checkpointer is not None,
        progressive=make_pool is not None, options=solve.options)


def _all_rows(store):
    """(X, y) of every row of a small store, in memory."""
    from ..data.store import ArrayStore
    if isinstance(store, ArrayStore):
        return store.X, store.y
    import scipy.sparse as sp
    parts = [store.chunk(i) for i in range(store.n_chunks)]
    X = sp.vstack([p.X for p in parts], format="csr") if store.sparse else \
        np.concatenate([np.asarray(p.X) for p in parts])
    return X, np.concatenate([np.asarray(p.y, np.float64) for p in parts])


def _fit_exact(store, kernel, solve, points, C, mu, K=None):
    """:func:`_fit` by the exact SMO over every row (:func:`exact_applies`);
    ``K``: the rows' kernel rows (:func:`~streamcvm.solvers.exact.rowcache.kernel_rows`),
    if already made."""
    import time
    from ..solvers.exact.svr import svr_exact
    t0 = time.perf_counter()
    X, y = _all_rows(store)
    t = points.targets(y)
    if solve.eps == "auto":
        # every point's KKT violation (C / 2 x its gradient's distance from
        # the weighted points') within svr_exact_tol x the targets' sd
        sd = float(np.std(t)) if len(t) else 1.0
        tol, rel_tol = 2.0 * solve.options.svr_exact_tol * (sd if sd > 0 else 1.0) / C, 0.0
    else:       # as CVM's eps: no point further than (1 + eps) R from the center
        e = float(solve.eps)
        tol, rel_tol = 0.0, e * (2.0 + e)
    o = solve.options
    res = svr_exact(X, t, kernel, C, points.mu, points.eta, tol, rel_tol, K=K,
                    cache_mb=o.kernel_cache_mb, init_share=o.svr_init_share,
                    check_every=o.svr_check_every)
    ap, am = res["ap"], res["am"]
    keep = np.flatnonzero((ap > 0) | (am > 0))
    coef = C * (ap[keep] - am[keep])
    rows = X[keep]
    # eq. 10: epsbar = sum_p a_p s_p t_p - C a'K~a
    epsbar = float((ap - am) @ t - C * res["c2"])
    R2 = res["radius2"]
    cert = float(np.sqrt(max(R2 + res["gap"], 0.0) / R2) - 1.0) if R2 > 0 else None
    hist = [{"iteration": res["n_iter"], "core_size": int(np.sum(ap > 0) + np.sum(am > 0)),
             "radius": float(np.sqrt(max(R2, 0.0))), "c2": res["c2"],
             "eps": solve.eps if solve.eps != "auto" else cert, "certified_eps": cert,
             "exact": True, "gap": res["gap"], "elapsed": time.perf_counter() - t0}]
    return in_target_units(
        points, coef, epsbar,
        sv=rows.copy() if not hasattr(rows, "tocsr") else rows.tocsr(copy=True),
        sv_ids=keep.astype(np.int64), n_iter=res["n_iter"], core_size=hist[0]["core_size"],
        full_pass_violators=None, history=hist)


def _fit(store, kernel, solve, *, C, mu, full_pass=False, stats=None, make_pool=None,
         centred=True, exact=False, scale=None):
    """One L2-SVR on every row of ``store``: (Machine, the solver; None when
    solved exactly: ``exact`` and :func:`exact_applies`)."""
    points = regression_points(store, kernel, C, mu, stats, solve.runner, centred, scale)
    if exact and exact_applies(store, solve, full_pass, make_pool):
        return _fit_exact(store, kernel, solve, points, C, mu), None
    solver = run_solver(store, kernel, points, solve, classes=None, target="raw", b=1.0, C=C,
                        full_pass=full_pass, make_pool=make_pool)
    slots, alpha = solver.support()
    cs = solver.ball.core
    s = cs.y[slots]
    rows_of = cs.ids[slots] // 2
    # a row with both signs in the core set: one support row, coefficients summed
    uniq, first, inv = np.unique(rows_of, return_index=True, return_inverse=True)
    coef = np.zeros(len(uniq))
    np.add.at(coef, inv, C * alpha * s)
    rows = cs.rows()[slots[first]]
    # eq. 10: epsbar = sum_p a_p s_p t_p - C a'K~a, with s_p t_p = C (q_p - eta) / 2
    # (t_p as the points see the targets)
    st = 0.5 * C * (cs.q[slots] - points.eta)
    epsbar = float(alpha @ st - C * solver.ball.c2)
    return in_target_units(
        points, coef, epsbar,
        sv=rows.copy() if not hasattr(rows, "tocsr") else rows.tocsr(copy=True),
        sv_ids=uniq.astype(np.int64), n_iter=solver.n_iter, core_size=cs.n,
        full_pass_violators=solver.full_pass_violators, history=solver.history), solver


def target_moments(stats):
    """(mean, standard deviation) of the targets from :func:`row_stats`
    (from their deviations: exact for a target far from 0)."""
    n = max(stats["n"], 1)
    if "m2_y" in stats:
        return float(stats["mean_y"]), float(np.sqrt(max(stats["m2_y"], 0.0) / n))
    mean = stats["sum_y"] / n
    return mean, float(np.sqrt(max(stats["sum_y2"] / n - mean * mean, 0.0)))
