"""L2-SVR as a center-constrained MEB: Core Vector Regression (cvr paper sec. 3).

The primal (cvr eq. 6), with the bias penalised and squared slacks,

    min ||w||^2 + b^2 + C/(mu m) sum(xi_i^2 + xi*_i^2) + 2 C epsbar
    s.t. t_i - f(x_i) <= epsbar + xi_i,  f(x_i) - t_i <= epsbar + xi*_i,

has the dual (eqs. 7-8) over the 2m points ``(x_i, s)``, ``s = +-1``:
``max a'q - a'K~a`` on the simplex with ``K~ = s s' (K + 1) + (mu m / C) I``
and ``q = eta + (2/C) s t`` (eq. 15), i.e. a center-constrained MEB
(:class:`~streamcvm.problems.points.SignedPoints`). The tube width ``epsbar``
is not a parameter: ``mu`` (the mean slack, like nu-SVR's nu) sets it, and
it is recovered from the solution (eq. 10). The regression function is
``f(x) = C sum_p a_p s_p (k(x_p, x) + 1)`` (eq. 9).

The furthest point of a row is the sign of its residual: ``d^2 = ||c||^2 +
eta + 2 s (t - f(x)) / C`` away from the core set, so the violator search
looks for the rows furthest outside the tube.
"""
import numpy as np

from .driver import kernel_bound, row_stats, run_solver
from .machine import Machine
from .points import SignedPoints


def regression_points(store, kernel, C, mu, stats=None, runner=None):
    """The SVR points of ``store`` (``stats``: :func:`row_stats`, computed
    here when not given: max |t| and, for kernels without a constant
    diagonal, the row norms, fix eta)."""
    stats = row_stats(store, runner=runner) if stats is None else stats
    return SignedPoints(C, mu, store.n, stats["max_abs_y"], kmax=kernel_bound(kernel, stats))


def train_regressor(store, kernel, *, C=1.0, mu=0.02, method="cvm", eps=1e-3,
                    sample_size=59, max_core=None, seed=0, full_pass=False, callback=None,
                    checkpointer=None, resume=None, stats=None, runner=None,
                    pass_progress=None):
    """Train an L2-SVR on ``store`` (targets in its ``y``); returns a
    :class:`Machine` with ``regression=True`` whose support rows are the
    distinct rows with weight (a row's two signs merged into one
    coefficient) and whose ``epsilon_bar`` is the tube's half width."""
    if method == "bvm":
        raise ValueError("regression is a center-constrained MEB (a linear term): "
                         "method must be 'cvm' or 'fvm', not 'bvm'")
    if not C > 0 or not mu > 0:
        raise ValueError(f"C and mu must be positive, got C={C!r}, mu={mu!r}")
    points = regression_points(store, kernel, C, mu, stats, runner)
    solver = run_solver(store, kernel, points, classes=None, target="raw", b=1.0, C=C,
                        method=method, eps=eps, sample_size=sample_size, max_core=max_core,
                        seed=seed, full_pass=full_pass, callback=callback,
                        checkpointer=checkpointer, resume=resume, runner=runner,
                        pass_progress=pass_progress)
    slots, alpha = solver.support()
    cs = solver.core
    if max_core is not None and cs.n >= max_core:
        import warnings
        warnings.warn(f"streamcvm: the core set reached max_core={max_core:,} before eps "
                      f"{solver.eps:.2g} was met; the fit may be looser than asked (raise "
                      f"max_core, or lower C or mu)", RuntimeWarning, stacklevel=3)
    s = cs.y[slots]
    rows_of = cs.ids[slots] // 2
    # a row with both signs in the core set: one support row, coefficients summed
    uniq, first, inv = np.unique(rows_of, return_index=True, return_inverse=True)
    coef = np.zeros(len(uniq))
    np.add.at(coef, inv, C * alpha * s)
    rows = cs.rows()[slots[first]]
    # eq. 10: epsbar = sum_p a_p s_p t_p - C a'K~a, with s_p t_p = C (q_p - eta) / 2
    st = 0.5 * C * (cs.q[slots] - points.eta)
    epsbar = float(alpha @ st - C * solver.c2)
    return Machine(sv=rows.copy() if not hasattr(rows, "tocsr") else rows.tocsr(copy=True),
                   coef=coef, intercept=float(coef.sum()), sv_ids=uniq.astype(np.int64),
                   classes=None, regression=True, epsilon_bar=epsbar, n_iter=solver.n_iter,
                   core_size=cs.n,
                   full_pass_violators=getattr(solver, "full_pass_violators", None),
                   history=solver.history)
