"""CVMRegressor's defaults chosen by the data: mu and gamma by the RMSE of
trial fits on held-out rows (:func:`select_params`, :func:`prepare_fit`),
and the warnings about a fitted regression (:func:`fit_warnings`). The
L2-SVR problem itself is :mod:`.regression`.
"""
import numpy as np

from .driver import Solve, row_stats
from .regression import _fit_exact, exact_applies, regression_points, target_moments, \
    train_regressor

# mu="auto" / gamma="auto" (CVMRegressor): the candidates tried on held-out rows.
# mu is the mean slack outside the tube (at the optimum, sum_i (xi_i + xi*_i) =
# mu m, whatever C), in the target's units: a mu far below the residuals' size
# makes the tube cover nearly every row and a few extreme rows set the fit (a
# Chebyshev fit: biased on a long-tailed target); one above it is a kernel
# ridge regression (epsbar < 0) regularised by mu / (C / m). So mu is tried in
# units of the target's standard deviation, and gamma as multiples of 1 / the
# mean squared distance (x 2 is scikit-learn's gamma="scale" on standardised
# features), on select_fit_rows rows, validated on select_val_rows others (the
# options: RegressionOptions). Trial rows before an exact final fit (exact_fit: at most
# svr_exact_rows rows) on at least select_exact_min_rows rows are select_fit_exact:
# each trial is an O(rows^2) exact SMO (0.3-0.4 s for the five at 2,000 rows, a third
# of cpu_act's fit), and on the six protocol sets 1,000 rows chose a (mu, gamma) about
# as good as 2,000 did (docs/solvers.md). Fewer rows choose less surely (tests'
# 3,000-row long-tailed set: 1,000 chose worse than its 1,500), and below a few
# thousand rows the trials cost little in seconds, so smaller stores keep
# select_fit_rows.


def held_out(store, n_fit, n_val, seed, runner=None):
    """A uniform sample of the store's rows in one pass: (fit rows, validation
    rows), each (X, y), disjoint (by a hash of seed and row id)."""
    from .progressive import draw_sample
    n_val = min(n_val, store.n // 2)        # a small store: half and half
    n_fit = min(n_fit, store.n - n_val)
    val, fit = draw_sample(store, None, n_val, n_fit, seed, runner)
    return (fit[1], fit[2]), (val[1], val[2])


def rmse(f, y):
    return float(np.sqrt(np.mean((np.asarray(f, np.float64) - y) ** 2)))


def select_params(store, make_kernel, *, c, mu, gamma, base_gamma, sd, method,
                  eps, options, seed=0, runner=None, sample=None, full_grid=False,
                  scale=None):
    """mu and gamma for :func:`train_regressor` by validation RMSE: each
    ``"auto"`` one over its grid (the options' ``mu_grid`` x ``sd``,
    ``regression_gamma_grid`` x ``base_gamma``; gamma first, at
    ``mu_grid[mu_first]``, then mu at the best gamma; ``full_grid``: every
    pair), the others as given, fitting on ``select_fit_rows`` rows with ``C
    = c`` x rows and scoring on ``select_val_rows`` others; among the trials
    within ``select_slack`` of the best RMSE, the
    one with the fewest support vectors. Returns
    (mu, gamma, trials: a list of dicts; mu and val_rmse in the targets'
    units). ``make_kernel(gamma)``: the kernel. ``sample``: (fit, val) rows
    from :func:`held_out`, else drawn. ``scale``: the fit's unit, which the
    trials' targets are divided by as the final fit's are
    (:func:`regression_points`; None: each trial's rows' sd)."""
    from ..data.store import ArrayStore
    o = options
    mus = [m * sd for m in o.mu_grid] if mu == "auto" else [float(mu)]
    gammas = [g * base_gamma for g in o.regression_gamma_grid] if gamma == "auto" else \
        [float(gamma)]
    if len(mus) * len(gammas) == 1:
        return mus[0], gammas[0], []
    (Xf, yf), (Xv, yv) = sample if sample is not None else \
        held_out(store, o.select_fit_rows, o.select_val_rows, seed, runner)
    if len(yf) < o.select_min_rows or len(yv) < o.select_min_rows // 2:
        return (0.1 * sd if mu == "auto" else mus[0]), gammas[0], []
    sub = ArrayStore(Xf, yf)
    trials = []
    solve = Solve(method=method, eps=eps, seed=seed, runner=runner, options=o)
    # the exact path: each gamma's kernel matrices (fit x fit, validation x
    # fit) once for all its trials
    exact = exact_applies(sub, solve)
    kcache = {}

    def trial(m, g):
        kern = make_kernel(g)
        if exact:
            from ..solvers.exact.rowcache import kernel_rows
            if g not in kcache:
                kcache[g] = (kernel_rows(kern, Xf, cache_mb=o.kernel_cache_mb),
                             kern.block(Xv, Xf))
            Kff, Kvf = kcache[g]
            mach = _fit_exact(sub, kern, solve, regression_points(sub, kern, c * len(yf), m,
                                                                  scale=scale),
                              c * len(yf), m, K=Kff)
            # f(x) = sum coef (k + 1) + offset = K_vf coef + intercept
            f = np.asarray(Kvf[:, mach.sv_ids], np.float64) @ mach.coef + mach.intercept
        else:
            mach = train_regressor(sub, kern, solve, C=c * len(yf), mu=m, warn=False,
                                   train_size="all", scale=scale)
            f = mach.decision(kern, Xv)
        trials.append({"mu": m, "gamma": g, "val_rmse": rmse(f, yv),
                       "n_support": int(len(mach.coef))})
    # gamma at the middle mu first, then the other mus at the best gamma
    mid = mus[min(o.mu_first, len(mus) - 1)]
    for g in gammas:
        trial(mid, g)
    g_best = min(trials, key=lambda t: t["val_rmse"])["gamma"]
    for m in mus:
        for g in (gammas if full_grid else [g_best]):
            if m != mid:
                trial(m, g)
    # the simplest model (fewest support vectors) the validation rows cannot
    # tell from the best: within select_slack of its RMSE
    top = min(t["val_rmse"] for t in trials)
    best = min((t for t in trials if t["val_rmse"] <= (1.0 + o.select_slack) * top),
               key=lambda t: t["n_support"])
    return best["mu"], best["gamma"], trials


def fit_warnings(f, y, epsilon_bar, sd, options):
    """Warnings (strings) about a fitted regression from its predictions
    ``f`` on rows ``y``: a tube that holds nearly every row (a few extreme
    rows then set the fit), or residuals whose mean is far from 0."""
    r = np.asarray(y, np.float64) - np.asarray(f, np.float64)
    out = []
    if len(r) == 0:
        return out
    inside = float(np.mean(np.abs(r) <= epsilon_bar))
    if inside > options.tube_warn:
        out.append(f"the fitted tube (half width {epsilon_bar:.3g}) holds {inside:.0%} of the "
                   "rows, so a few extreme rows set the fit: raise mu (the mean slack) or "
                   "use mu='auto'")
    if np.sqrt(np.mean(r * r)) > sd:
        out.append(f"the fit is worse than predicting the mean (RMSE {np.sqrt(np.mean(r * r)):.3g}"
                   f", target sd {sd:.3g}): a fixed eps may be too coarse for this C (use "
                   "eps='auto'), or mu too small")
    se = r.std() / np.sqrt(len(r))
    if abs(r.mean()) > max(options.bias_warn * sd, 4.0 * se):
        out.append(f"the residuals' mean is {r.mean():+.3g} (target sd {sd:.3g}): the fit is "
                   "biased; raise mu or use mu='auto'")
    return out


def prepare_fit(store, make_kernel, *, c, mu, gamma, base_gamma, method, eps, options,
                seed=0, runner=None, log=None, progressive=False, exact=False):
    """What :class:`~streamcvm.estimators.CVMRegressor` needs before its fit:
    one pass for the targets' statistics (``stats``, for
    :func:`train_regressor`; None for a ``progressive`` fit, whose stages
    take their samples' own), one for a held-out sample (the options'
    ``select_fit_rows`` rows to fit, ``select_fit_exact`` when the final fit
    is ``exact`` on at least ``select_exact_min_rows`` rows, and
    ``select_val_rows`` to score), and mu and gamma
    (:func:`select_params`, over the full grid when ``progressive``;
    ``log(message)`` first says what is chosen).
    Returns a dict: mu, gamma, trials, stats, sd, scale, check (the
    validation rows (X, y), for :func:`fit_warnings`). ``scale`` is the
    fit's unit, the targets' sd (float64, from their deviations): from
    ``stats`` (every row), or for a progressive fit, which reads no row
    statistics, the held-out sample's; every solve of the fit, the trials
    and each stage included, divides its centred targets by it
    (:func:`train_regressor`), so the fit is the same at any scale of y."""
    stats = None if progressive else row_stats(store, runner=runner)
    o = options
    few = exact and store.n >= o.select_exact_min_rows
    sample = held_out(store, o.select_fit_exact if few else o.select_fit_rows, o.select_val_rows,
                      seed, runner)
    # the spread from the sample (centred in float64: no cancellation on a target
    # far from 0), the store's moments when it is too small (never progressive:
    # those stores have more than MIN_ROWS rows)
    ys = np.concatenate([sample[0][1], sample[1][1]]).astype(np.float64)
    sd = float(ys.std()) if len(ys) >= o.select_min_rows or stats is None else \
        target_moments(stats)[1]
    sd = sd if sd > 0 else 1.0
    scale = sd if stats is None else target_moments(stats)[1]
    chosen = [name for name, v in (("mu", mu), ("gamma", gamma)) if v == "auto"]
    if log is not None and chosen:
        log(f"choosing {' and '.join(chosen)} on {len(sample[0][1]):,} + "
            f"{len(sample[1][1]):,} held-out rows")
    mu_, gamma_, trials = select_params(store, make_kernel, c=c, mu=mu, gamma=gamma,
                                        base_gamma=base_gamma, sd=sd, method=method, eps=eps,
                                        options=o, seed=seed, runner=runner, sample=sample,
                                        full_grid=progressive, scale=scale)
    return {"mu": mu_, "gamma": gamma_, "trials": trials, "stats": stats, "sd": sd,
            "scale": scale, "check": sample[1]}
