"""Two-class, one-class and multi-class L2-SVMs as MEB problems over a store.

Each binary machine is trained by :class:`streamcvm.solvers.MEBSolver` on
the rows of two classes, sampled from the store through a
:class:`~streamcvm.data.sampling.ChunkPool` (class-balanced, using the store's
labels; no O(n) index). Multi-class is one-vs-one (as LIBSVM, the default) or
one-vs-rest. A trained machine is plain arrays: support rows, coefficients
``alpha_i y_i`` and an intercept, with ``f(x) = sum_i coef_i k(x_i, x) + b``.

Per-class and per-sample C (``class_weight``, sample weights; generalized-cvm
sec. IV-A) and kernels without a constant diagonal make the problem a
center-constrained MEB (:class:`~streamcvm.solvers.points.RowPoints`),
which CVM and FVM solve and BVM refuses.
"""
import numpy as np
import scipy.sparse as sp

from .driver import kernel_bound, row_stats, run_solver
from .machine import Machine
from ..solvers.points import RowPoints
from .progressive import machine_rows, plan, train_progressive

# method="auto": a two-class machine (weighted or not; no cap, full pass or validation
# stop) of at most svc_exact_rows rows (the options svc_exact_*) is solved exactly over
# every row (solvers.exact.svc.svc_exact), its rows dense in at most svc_exact_dense_mb (a
# sparse store's too) and, for kernels other than the RBF (whose kernel rows SMO computes
# as it needs them: the fast path "kernel_rows"), its whole kernel matrix in at most
# svc_exact_matrix_mb (class and sample weights: a per-row C, its diagonal); other
# machines by BVM (CVM when weighted: BVM needs one C).


def resolve_method(method, weighted, kernel):
    """The sampled method of ``method="auto"`` (others as they are)."""
    if method != "auto":
        return method
    return "cvm" if weighted or not kernel.constant_diagonal else "bvm"


def exact_route(store, kernel, classes, solve, *, class_weight, sample_weight, full_pass,
                make_pool, stop):
    """Whether :func:`_fit` solves this machine by :func:`_fit_exact`."""
    if solve.method != "auto" or classes is None or full_pass or make_pool is not None \
            or stop != "slack" or solve.max_core is not None or solve.resume is not None:
        return False
    opts = solve.options
    m = machine_rows(store, classes)
    if m > opts.svc_exact_rows or 4.0 * m * store.d > opts.svc_exact_dense_mb * 2 ** 20:
        return False
    return kernel.has("kernel_rows") or 4.0 * m * m <= opts.svc_exact_matrix_mb * 2 ** 20


def side_by_side(store, kernel, subs, solve, *, class_weight=None, sample_weight=False,
                 full_pass=False, stop="slack", **_):
    """Threads for the machines ``subs`` (pairs of sides): the fit's
    (``solve.n_jobs``) when every one is solved exactly (:func:`exact_route`:
    the solver holds no lock, and one machine's model does not depend on
    another's), else 1 (the others' solvers use the threads themselves)."""
    from ..data.parallel import n_threads
    n = n_threads(solve.n_jobs)
    if n == 1 or len(subs) == 1:
        return 1
    ok = all(exact_route(store, kernel, pair, solve, class_weight=class_weight,
                         sample_weight=sample_weight, full_pass=full_pass, make_pool=None,
                         stop=stop) for pair in subs)
    return n if ok else 1


def _machine_rows(store, classes, weighted=False):
    """(store row ids, rows, labels +-1, sample weights or None) of one
    machine's rows, in memory."""
    from .driver import RowSource
    src = RowSource(store, classes, "binary", weighted=weighted)
    parts = [p for i in range(store.n_chunks) for p in src.points(i)]
    ids = np.concatenate([p[0] for p in parts])
    X = sp.vstack([p[1] for p in parts], format="csr") if store.sparse else \
        np.concatenate([np.asarray(p[1]) for p in parts])
    w = np.concatenate([np.asarray(p[3], np.float64) for p in parts]) if weighted else None
    return ids, X, np.concatenate([np.asarray(p[2], np.float64) for p in parts]), w


def _fit_exact(store, kernel, classes, C, options, callback=None, class_weight=None,
               sample_weight=False):
    """One two-class machine solved exactly (:func:`~streamcvm.solvers.exact.svc.svc_exact`);
    ``class_weight`` (w_neg, w_pos) and the store's sample weights
    (``sample_weight``) multiply each row's C. Rows of weight 0 are left out
    (as SVC leaves them out: their C is 0); negative weights are refused."""
    import time
    from ..solvers.exact.svc import svc_exact
    t0 = time.perf_counter()
    ids, X, y, w = _machine_rows(store, classes, sample_weight)
    mult = None
    if class_weight is not None or sample_weight:
        mult = _row_multipliers(y, w, class_weight)
        keep = np.flatnonzero(mult > 0)
        if len(keep) < len(y):
            ids, X, y, mult = ids[keep], X[keep], y[keep], mult[keep]
        if (y > 0).all() or (y < 0).all():
            raise ValueError("every row of one side of the machine "
                             f"{tuple(_side(c) for c in classes)} has weight 0")
    Xd = X.toarray() if sp.issparse(X) else X
    res = svc_exact(np.asarray(Xd, np.float32), y, kernel, C, weight=mult, tol=options.svc_tol,
                    cache_mb=options.kernel_cache_mb, start=options.svc_start,
                    blas_rows=options.kernel_rows_blas)
    a = res["a"]
    keep = np.flatnonzero(a > 0)
    coef = a[keep] * y[keep]
    rows = X[keep]
    R2 = res["radius2"]
    cert = float(np.sqrt(max(R2 + res["gap"], 0.0) / R2) - 1.0) if R2 > 0 else None
    hist = [{"iteration": res["n_iter"], "core_size": int(len(keep)),
             "radius": float(np.sqrt(max(R2, 0.0))), "c2": res["c2"], "eps": cert,
             "certified_eps": cert, "exact": "smo", "gap": res["gap"],
             "rows_computed": res["rows_computed"], "elapsed": time.perf_counter() - t0,
             "dispatch": {"path": "exact smo", "rows": int(len(y))}}]
    m = Machine(sv=rows.tocsr(copy=True) if sp.issparse(rows) else rows.copy(), coef=coef,
                intercept=float(coef.sum()), sv_ids=ids[keep].astype(np.int64),
                classes=tuple(_side(c) for c in classes), n_iter=res["n_iter"],
                core_size=int(len(keep)), full_pass_violators=None, history=hist)
    if callback is not None:
        callback(_Done(m))
    return m


def _row_multipliers(y, w, class_weight):
    """Each row's multiplier of C: its class's weight (``class_weight``:
    (w_neg, w_pos), or None) times its sample weight (``w``, or None).
    Negative weights are refused."""
    wn, wp = (1.0, 1.0) if class_weight is None else (float(class_weight[0]),
                                                       float(class_weight[1]))
    mult = np.where(np.asarray(y) > 0, wp, wn)
    if w is not None:
        mult = mult * np.asarray(w, np.float64)
    if min(wn, wp) <= 0 or (mult < 0).any():
        raise ValueError(f"class weights must be positive and sample weights >= 0 "
                         f"(smallest: class {min(wn, wp):g}, sample "
                         f"{np.min(w) if w is not None and len(w) else 1.0:g})")
    return mult


def class_points(store, kernel, classes, C, class_weight=None, sample_weight=False,
                 runner=None, exact_rows=None):
    """The points of one machine: rows, sign = label (+-1, or 1 for one
    class). ``class_weight``: (w_neg, w_pos) multipliers of C; ``sample_weight``:
    multiply by the store's per-row weights too. Weights or a kernel without
    a constant diagonal need eta, from one pass of :func:`row_stats` over the
    machine's rows."""
    b = 0.0 if classes is None else 1.0
    if class_weight is None and not sample_weight and kernel.constant_diagonal:
        return RowPoints(C, b)
    stats = row_stats(store, classes, runner)
    wn, wp = (1.0, 1.0) if class_weight is None else (float(class_weight[0]),
                                                       float(class_weight[1]))
    if min(wn, wp) <= 0:
        raise ValueError(f"class weights must be positive (smallest: {min(wn, wp):g})")
    if sample_weight and stats["min_w"] < 0:
        raise ValueError(f"sample weights must be >= 0 (smallest: {stats['min_w']:g})")
    if sample_weight and stats["min_w"] == 0:
        # (arrays never get here: the estimator drops their rows of weight 0)
        raise ValueError(
            "a sample weight of 0 in the store's weight column: the sampled solvers "
            "(bvm, cvm, fvm) need a positive weight on every row; method='auto' leaves "
            f"rows of weight 0 out of machines of at most {exact_rows:,} rows "
            "(svc_exact_rows), else drop them when ingesting")
    min_mult = min(wn, wp) * (stats["min_w"] if sample_weight else 1.0)

    def mult(y, w):
        m = np.where(np.asarray(y) > 0, wp, wn)
        return m * w if sample_weight and w is not None else m
    weighted = class_weight is not None or sample_weight
    return RowPoints(C, b, mult=mult if weighted else None, min_mult=min_mult,
                     kmax=kernel_bound(kernel, stats),
                     constant_diagonal=kernel.constant_diagonal, weighted=sample_weight)


def train_machine(store, kernel, solve, *, classes=None, C, full_pass=False,
                  class_weight=None, sample_weight=False, train_size, stop,
                  make_pool=None, validation=None, stage_tol=None):
    """Train one machine on ``store``; ``solve``: the solver's options and
    the run's plumbing (:class:`~streamcvm.problems.driver.Solve`).

    ``classes=(neg, pos)``: a two-class L2-SVM on the rows of those labels.
    ``classes=None``: a one-class L2-SVM (SVDD) on every row.
    ``class_weight``/``sample_weight``: see :func:`class_points`.
    ``train_size``: "all" rows, or "auto" / a number of rows for a two-class
    machine trained by progressive subsampling on a held-out validation
    set (:mod:`.progressive`; not with ``full_pass``). ``stop``: "slack" or
    "validation", what ends the eps annealing (:meth:`MEBSolver.set_validation`;
    "validation" needs held-out rows: a progressive fit, or ``validation``).
    ``stage_tol``: the progressive stages' stop rule's tolerance, in points
    of accuracy (:func:`~.progressive.gain_left`; the classifier's
    ``stage_tol``), needed when the machine trains progressively. The other arguments are
    :func:`~streamcvm.problems.driver.run_solver`'s.
    """
    callback, resume = solve.callback, solve.resume
    one_class = classes is None
    if one_class and (class_weight is not None or sample_weight
                      or not kernel.constant_diagonal):
        raise ValueError("the one-class machine needs one C and a kernel with constant "
                         f"k(x, x) (rbf, laplacian, npoly), not {kernel.name!r} or weights")
    kw = dict(C=C, class_weight=class_weight, sample_weight=sample_weight)
    sizes = None if one_class or full_pass else plan(store, classes, train_size, solve.options)
    if sizes is not None and train_size == "auto" and stop == "slack" and resume is None:
        # every row, sampled, while that is cheap: a core set that stays below
        # probe_core vectors (clean data) costs at most ~59 probe_core^2 / 2 kernel
        # values; one that reaches it grows with the rows, so the fit goes
        # progressive (not checkpointed: it is short and deterministic; a probe
        # that reaches the cap is thrown away, so no pass certifies its eps)
        probe = solve.options.probe_core
        cap = probe if solve.max_core is None else min(solve.max_core, probe)
        m, solver = _fit(store, kernel, classes, solve.but(resume=None, max_core=cap,
                                                           checkpointer=None, pass_progress=None),
                         make_pool=make_pool, stop="slack", certify=False, **kw)
        if solver.ball.core.n < cap:
            return m
    if sizes is not None:
        if stage_tol is None:
            raise ValueError("a progressive fit needs stage_tol (points of accuracy)")

        def stage(sub, val, stage_pool, stage_resume, warm):
            def shown(solver):      # the progress bar says which stage runs
                solver.note = f"{sub.n:,} sampled rows"
                callback(solver)
            # (a stage's rows are in memory: no runner, no full-pass progress)
            return _fit(sub, kernel, (-1.0, 1.0),
                        solve.but(resume=stage_resume, runner=None, pass_progress=None,
                                  callback=None if callback is None else shown),
                        make_pool=stage_pool, validation=val, warm=warm, exact_start=False,
                        stop=stop, **kw)
        from .compress import compactor
        m = train_progressive(store, kernel, classes, sizes, seed=solve.seed,
                              runner=solve.runner, weighted=sample_weight, resume=resume,
                              train=stage, compact=compactor(kernel, solve, tol=stage_tol),
                              tol=stage_tol, options=solve.options)
        m.classes = tuple(_side(c) for c in classes)
        return m
    return _fit(store, kernel, classes, solve, full_pass=full_pass, make_pool=make_pool,
                validation=validation, stop=stop, **kw)[0]


def _fit(store, kernel, classes, solve, *, C, class_weight, sample_weight, **run_kw):
    """One machine on every row of ``store``: (Machine, the solver; None when
    solved exactly: :func:`exact_route`)."""
    one_class = classes is None
    if exact_route(store, kernel, classes, solve, class_weight=class_weight,
                   sample_weight=sample_weight, full_pass=run_kw.get("full_pass", False),
                   make_pool=run_kw.get("make_pool"), stop=run_kw.get("stop", "slack")):
        return _fit_exact(store, kernel, classes, C, solve.options, solve.callback,
                          class_weight, sample_weight), None
    solve = solve.but(method=resolve_method(solve.method, class_weight is not None
                                            or sample_weight, kernel))
    points = class_points(store, kernel, classes, C, class_weight, sample_weight, solve.runner,
                          exact_rows=solve.options.svc_exact_rows)
    solver = run_solver(store, kernel, points, solve, classes=classes,
                        target="ones" if one_class else "binary", b=0.0 if one_class else 1.0,
                        C=C, **run_kw)
    slots, alpha = solver.support()
    cs = solver.ball.core
    rows = cs.rows()[slots]
    coef = alpha * cs.y[slots]
    b = 0.0 if one_class else 1.0
    m = Machine(sv=rows.copy() if not hasattr(rows, "tocsr") else rows.tocsr(copy=True),
                coef=coef, intercept=float(b * coef.sum()), sv_ids=cs.ids[slots].copy(),
                classes=None if one_class else tuple(_side(c) for c in classes),
                n_iter=solver.n_iter, core_size=cs.n,
                full_pass_violators=solver.full_pass_violators,
                history=solver.history)
    if one_class:
        # The MEB lives in the augmented space phi~ = [phi; e_i / sqrt(C)], with
        # center c~ = [c; a / sqrt(C)] and radius R~^2 = kappa + 1/C - a'K~a.
        # A new row x (no slack coordinate of its own in the center) is at
        # d~^2 = ||phi(x) - c||^2 + ||a||^2 / C + 1/C. The solver certifies
        # every training row within (1 + eps) R~, so a row is an outlier when
        # ||phi(x) - c||^2 > (1 + eps)^2 R~^2 - ||a||^2 / C - 1/C =: radius2.
        # (At eps = 0 and the optimum this is SVDD's primal radius
        # kappa - a'Ka - 2 ||a||^2 / C; with an approximate center and a
        # 1/C-dominated R~, the (1 + eps) tolerance is what keeps the inliers
        # of the training data inside.)
        K = kernel.block(rows, rows)
        m.c2 = float(alpha @ K @ alpha)
        a2 = float((alpha ** 2).sum())
        # the certified ball: R~^2 = kt - a'K~a (CVM, FVM), or BVM's fixed r^2
        # less its extra coordinate ce^2 (bvm paper sec. 3.3)
        R2t = solver.ball.r2 - solver.ball.ce2 if solver.method.fixed_radius else \
            1.0 + 1.0 / C - m.c2 - a2 / C
        m.radius2 = float((1.0 + solver.certified_eps) ** 2 * R2t - a2 / C - 1.0 / C)
    return m, solver


def _side(c):
    """A side of a sub-problem as stored: a float, or a tuple of floats."""
    return tuple(float(v) for v in c) if isinstance(c, (tuple, list)) else float(c)


def pairs(classes, strategy="ovo"):
    """The (neg, pos) sub-problems of a multi-class strategy: one-vs-one
    (``ovo``: every pair, as LIBSVM) or one-vs-rest (``ovr``: class k against
    the tuple of all others, one machine per class)."""
    classes = list(classes)
    if strategy not in ("ovo", "ovr"):
        raise ValueError(f"multi_class must be 'ovo' or 'ovr', got {strategy!r}")
    if len(classes) == 2:
        return [(classes[0], classes[1])]
    if strategy == "ovo":
        return [(classes[i], classes[j]) for i in range(len(classes))
                for j in range(i + 1, len(classes))]
    return [(tuple(c for c in classes if c != k), k) for k in classes]


class _Done:
    """What a progress callback reads of a solver, for a machine solved
    exactly (no eps levels: the final state)."""

    def __init__(self, m):
        h = m.history[-1]
        self.level_eps = self.eps = h["eps"] or 0.0
        self.core_size = m.core_size
        self.radius2 = h["radius"] ** 2
        self.n_iter = m.n_iter
        self.note = "exact"

        class _Ball:
            ce2 = 0.0
        self.ball = _Ball()
