"""The center-constrained MEB (docs/design.md section 2) against an exact QP.

For each problem with a linear term or per-point C (L2-SVR, per-class and
per-sample C, kernels without a constant diagonal, ranking pairs) on a few
hundred points, a reference solver (accelerated projected gradient, its
optimum certified by its duality gap; SLSQP took 40-100 s on 240 variables)
solves ``max a'q - a'K~a`` on the simplex, and the solvers' result must be dual feasible (``R^2 = a'q - a'K~a <= R*^2``) and within the
(1 + eps)^2 ratio (``R*^2 <= (1 + eps)^2 R^2``, cvr paper Property 3), with
every point inside the (1 + eps) ball after the final full pass.
"""
import numpy as np
import pytest

import streamcvm
from streamcvm.solvers.kernels import Kernel, estimate_beta
from streamcvm.problems.classification import class_points, train_machine
from streamcvm.problems.driver import Solve, run_solver
from streamcvm.problems.regression import regression_points, train_regressor


def _simplex_projection(v):
    """Euclidean projection onto {a >= 0, sum a = 1} (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.flatnonzero(u - css / np.arange(1, len(v) + 1) > 0)[-1]
    return np.maximum(v - css[k] / (k + 1), 0.0)


def _qp_max(Q, q, gap_tol=1e-10):
    """max a'q - a'Qa over the simplex: (value, a), by accelerated projected
    gradient (FISTA with restarts; an algorithm none of the solvers use),
    run until its Frank-Wolfe duality gap ``g'a - min g`` (g the gradient of
    a'Qa - a'q, a bound on the distance to the optimum's value) is below
    ``gap_tol``: the optimum is certified, not assumed."""
    n = len(q)
    L = 2.0 * np.linalg.eigvalsh(Q)[-1]
    a = np.ones(n) / n
    z, tk = a.copy(), 1.0
    for it in range(200000):
        a_new = _simplex_projection(z - (2.0 * Q @ z - q) / L)
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * tk * tk))
        z = a_new + (tk - 1.0) / t_new * (a_new - a)
        if (a_new - a) @ (2.0 * Q @ a_new - q) > 0:     # objective went up: restart
            z, t_new = a_new.copy(), 1.0
        a, tk = a_new, t_new
        if it % 50 == 0:
            g = 2.0 * Q @ a - q
            if g @ a - g.min() < gap_tol:
                return a @ q - a @ Q @ a, a
    raise AssertionError("reference QP did not converge")


def _friedman(m, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(m, 5)).astype(np.float32)
    t = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] \
        + 5 * X[:, 4] + rng.standard_normal(m)
    return X, (t - t.mean()) / t.std()


def _point_alpha(solver, n_points):
    a = np.zeros(n_points)
    cs = solver.ball.core
    a[cs.ids[:cs.n]] = cs.alpha[:cs.n]
    return a


def _check_ratio(a, Q, q, R2_opt, eps):
    assert a.min() >= 0 and a.sum() == pytest.approx(1.0, abs=1e-9)
    R2 = a @ q - a @ Q @ a
    d2 = a @ Q @ a - 2 * Q @ a + q
    assert d2.max() <= (1 + eps) ** 2 * R2 * (1 + 1e-6)       # all inside the (1+eps) ball
    assert R2 <= R2_opt * (1 + 1e-9)                          # dual feasible
    assert R2_opt <= (1 + eps) ** 2 * R2 * (1 + 1e-9)         # (1+eps)^2-approximation


@pytest.fixture(scope="module")
def svr_problem():
    m, C, mu = 120, 10.0, 0.05
    X, t = _friedman(m)
    k = Kernel("rbf", gamma=1.0 / estimate_beta(X))
    store = streamcvm.as_store(X, t, chunk_rows=40)
    pts = regression_points(store, k, C, mu)
    # the 2m points in id order 2i (s = +1), 2i + 1 (s = -1)
    s = np.tile([1.0, -1.0], m)
    row = np.repeat(np.arange(m), 2)
    K = k.block(X, X).astype(np.float64)[np.ix_(row, row)]
    Q = np.outer(s, s) * (K + 1) + np.eye(2 * m) * mu * m / C
    # the fit is centred on the targets' mean (cvr eq. 15 with t - mean t)
    assert pts.offset == pytest.approx(t.mean(), rel=1e-12)
    q = pts.eta + 2.0 / C * s * (t[row] - pts.offset)
    val, a_opt = _qp_max(Q, q)
    return X, t, k, store, C, mu, pts, Q, q, val, a_opt


@pytest.mark.parametrize("method,eps", [("cvm", 1e-2), ("cvm", 1e-3), ("fvm", 1e-2),
                                        ("fvm", 1e-3)])
def test_svr_dual_against_exact_qp(svr_problem, method, eps):
    X, t, k, store, C, mu, pts, Q, q, R2_opt, _ = svr_problem
    s = run_solver(store, k, pts, Solve(method=method, eps=eps), b=1.0, C=C, full_pass=True)
    a = _point_alpha(s, len(q))
    _check_ratio(a, Q, q, R2_opt, eps)
    assert s.ball.c2 == pytest.approx(a @ Q @ a, rel=1e-6)
    assert s.radius2 == pytest.approx(a @ q - a @ Q @ a, rel=1e-6)


def test_svr_model_matches_the_exact_solution(svr_problem):
    """f(x) = C sum a_p s_p (k + 1) and epsbar (cvr eq. 10) of the solver's
    machine against those of the exact dual solution."""
    X, t, k, store, C, mu, pts, Q, q, _, a_opt = svr_problem
    m = train_regressor(store, k, Solve(method="cvm", eps=1e-4), C=C, mu=mu, full_pass=True,
                        train_size="all")
    s = np.tile([1.0, -1.0], len(t))
    beta = C * (a_opt[0::2] - a_opt[1::2])
    f_opt = (k.block(X, X) + 1) @ beta + pts.offset
    f = m.decision(k, X)
    assert np.abs(f - f_opt).max() < 0.02 * t.std()
    eb_opt = a_opt @ (s * np.repeat(t - pts.offset, 2)) - C * a_opt @ Q @ a_opt
    assert m.epsilon_bar == pytest.approx(eb_opt, abs=0.02)
    # mu is the mean slack (docs/solvers.md "Regression defaults"): at the
    # optimum sum (xi + xi*) = mu m, with the slacks the fit leaves outside
    # its tube, xi = max(0, |t - f(x)| - epsbar)
    slack = np.maximum(np.abs(t - f_opt) - eb_opt, 0.0)
    assert slack.mean() == pytest.approx(mu, rel=1e-3)
    assert np.maximum(np.abs(t - f) - m.epsilon_bar, 0.0).mean() == pytest.approx(mu, rel=0.05)
    assert len(m.coef) < len(t) and np.all(np.diff(m.sv_ids) > 0)


def _two_class(n=150, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.4 * rng.standard_normal(n) > 1.0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("method", ["cvm", "fvm"])
@pytest.mark.parametrize("case", ["class_weight", "sample_weight", "linear", "poly"])
def test_center_constrained_classifiers_against_exact_qp(method, case):
    X, y = _two_class()
    n, C, eps = len(y), 2.0, 1e-3
    w = np.random.default_rng(3).uniform(0.5, 2.0, n) if case == "sample_weight" else None
    store = streamcvm.as_store(X, y, weight=w, chunk_rows=50)
    name = {"linear": "linear", "poly": "poly"}.get(case, "rbf")
    k = Kernel(name, gamma=1.0 / estimate_beta(X) if name == "rbf" else 0.2, coef0=1.0,
               degree=2)
    cw = (1.0, 4.0) if case == "class_weight" else None
    pts = class_points(store, k, (-1.0, 1.0), C, class_weight=cw,
                       sample_weight=case == "sample_weight")
    assert not pts.plain
    Ci = C * np.where(y > 0, *(cw[::-1] if cw else (1.0, 1.0)))
    if w is not None:
        Ci = Ci * w
    K = k.block(X, X).astype(np.float64)
    Q = np.outer(y, y) * (K + 1) + np.diag(1.0 / Ci)
    q = np.full(n, pts.eta)
    assert pts.eta >= np.diag(Q).max() - 1e-9     # Delta >= 0
    R2_opt, _ = _qp_max(Q, q)
    s = run_solver(store, k, pts, Solve(method=method, eps=eps), classes=(-1.0, 1.0),
                   target="binary", b=1.0, C=C, full_pass=True)
    _check_ratio(_point_alpha(s, n), Q, q, R2_opt, eps)


def test_weights_change_the_model():
    """Class weights move the boundary towards the lighter class."""
    X, y = _two_class(n=400, seed=2)
    store = streamcvm.as_store(X, y, chunk_rows=100)
    k = Kernel("rbf", gamma=1.0 / estimate_beta(X))
    kw = dict(classes=(-1.0, 1.0), C=1.0, train_size="all", stop="slack")
    plain = train_machine(store, k, Solve(method="cvm", eps=1e-3), **kw)
    heavy = train_machine(store, k, Solve(method="cvm", eps=1e-3), class_weight=(1.0, 10.0), **kw)
    pos = y > 0
    f0, f1 = plain.decision(k, X), heavy.decision(k, X)
    assert (f1[pos] > 0).mean() > (f0[pos] > 0).mean()        # more positives recalled
    assert f1.mean() > f0.mean()


def test_bvm_refuses_center_constrained_problems():
    X, y = _two_class()
    store = streamcvm.as_store(X, y, chunk_rows=50)
    k = Kernel("rbf", gamma=0.5)
    kw = dict(C=1.0, train_size="all", stop="slack")
    with pytest.raises(ValueError, match="bvm. solves the plain MEB only"):
        train_machine(store, k, Solve(method="bvm", eps=1e-3), classes=(-1.0, 1.0),
                      class_weight=(1.0, 2.0), **kw)
    with pytest.raises(ValueError, match="not the kernel .linear. .k.x, x. not constant"):
        train_machine(store, Kernel("linear"), Solve(method="bvm", eps=1e-3),
                      classes=(-1.0, 1.0), **kw)
    with pytest.raises(ValueError, match="use method=.cvm. or .fvm."):
        train_regressor(store, k, Solve(method="bvm", eps=1e-3), C=1.0, mu=0.1,
                        train_size="all")
    with pytest.raises(ValueError, match="weights must be positive"):
        train_machine(store, k, Solve(method="cvm", eps=1e-3), classes=(-1.0, 1.0),
                      class_weight=(0.0, 1.0), **kw)


@pytest.mark.parametrize("toward", ["new", "core"])
def test_fvm_line_search_is_exact_with_a_linear_term(svr_problem, toward):
    """One Frank-Wolfe step (and one away step) of FVM on the SVR dual lands
    on the maximum of the dual along its segment: lambda* = (u'q - 2a'Qu) /
    (2 u'Qu) for u = e_z - a (docs/design.md: (d^2 - R^2) / (2 (d^2 - Delta_z)))."""
    from streamcvm.solvers import MEBSolver
    X, t, k, store, C, mu, pts, Q, q, _, _ = svr_problem
    s = MEBSolver(k, X.shape[1], False, C=C, b=1.0, method="fvm", eps=1e-3, points=pts)
    ids = np.arange(0, 40, 4)
    s.init(ids, X[ids], t[ids])
    allP = pts.from_rows(np.arange(len(t)), t)
    d2, _ = s.ball.dist2(X, allP, check_core=True)
    if toward == "core":        # the furthest core point: a step that is not a first entry
        core = np.isin(allP[0], s.ball.core.ids[:s.ball.core.n])
        d2 = np.where(core, d2, -np.inf)
    j = int(np.argmax(d2))
    a = _point_alpha(s, len(q))
    u = -a.copy()
    u[allP[0][j]] += 1.0
    lam_opt = float(np.clip((u @ q - 2 * a @ Q @ u) / (2 * u @ Q @ u), 0.0, 1.0))
    pid, ridx, sg, qq, ic = allP
    r = ridx[j]
    _, w = s.step(int(pid[j]), X[r:r + 1], sg[j], qq[j], ic[j], float(d2[j]), 1e-3)
    lam = 1.0 - w
    assert 0 < lam_opt < 1 and lam == pytest.approx(lam_opt, rel=1e-6)
    a1 = _point_alpha(s, len(q))
    np.testing.assert_allclose(a1, a + lam * u, atol=1e-12)
    assert s.ball.c2 == pytest.approx(a1 @ Q @ a1, rel=1e-6)
    # the away step: a <- (1 + mu) a - mu e_j, mu the maximum along that line
    n = s.ball.core.n
    dd = s.ball.c2 - 2.0 * s.ball.Ka + s.ball.core.q[:n]
    jj = int(np.argmin(np.where(s.ball.core.alpha[:n] > 0, dd, np.inf)))
    v = a1.copy()
    v[s.ball.core.ids[jj]] -= 1.0            # a + mu v, v = a - e_j
    mu_opt = (v @ q - 2 * a1 @ Q @ v) / (2 * v @ Q @ v)
    got = s.away()
    assert got is not None and got[1] == pytest.approx(min(mu_opt, a1[s.ball.core.ids[jj]]
                                                          / (1 - a1[s.ball.core.ids[jj]])), rel=1e-6)
    a2 = _point_alpha(s, len(q))
    assert s.ball.c2 == pytest.approx(a2 @ Q @ a2, rel=1e-6)


def test_weight_two_is_a_duplicated_row():
    """Per-sample C: a row of weight 2 is the same L2-SVM as the row twice
    (the two copies share one slack: C xi^2 + C xi^2 = 2C xi^2). At a small
    eps with a final full pass the two models' decision values agree to a
    few 1e-3 of their spread."""
    from streamcvm import CVMClassifier
    X, y = _two_class(n=300, seed=4)
    w = np.ones(len(y))
    w[::3] = 2.0
    Xd = np.concatenate([X, X[::3]])
    yd = np.concatenate([y, y[::3]])
    kw = dict(method="cvm", eps=1e-5, full_pass=True, gamma=0.3, C=1.0)
    a = CVMClassifier(**kw).fit(X, y, sample_weight=w).decision_function(X)
    b = CVMClassifier(**kw).fit(Xd, yd).decision_function(X)
    c = CVMClassifier(**kw).fit(X, y).decision_function(X)
    assert np.abs(a - b).max() < 5e-3 * np.ptp(b)
    assert np.abs(c - b).max() > 10 * np.abs(a - b).max()   # the weights matter


def test_ranking_dual_against_exact_qp():
    """Ranking SVM (generalized-cvm eq. 24): pairs (q; i above j) drawn within
    query groups, the pair kernel k_ii' - k_ij' - k_ji' + k_jj' + [p = p']/C,
    eta = 2 + 1/C (RBF). After the final pass over every pair, the solution
    is within the (1 + eps)^2 ratio of the exact QP over all pairs."""
    from streamcvm.problems.ranking import PairKernel, PairPool, all_pairs
    from streamcvm.solvers.points import RowPoints
    from streamcvm.data.sampling import ChunkPool
    rng = np.random.default_rng(5)
    nq, per = 4, 10
    X = rng.standard_normal((nq * per, 3)).astype(np.float32)
    rel = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.standard_normal(len(X)) + 1),
                  0, 3)
    qid = np.repeat(np.arange(nq), per)
    store = streamcvm.as_store(X, rel, qid=qid, chunk_rows=per * 2)
    C, eps = 1.0, 1e-3
    k = Kernel("rbf", gamma=0.5)
    pk = PairKernel(k)
    chunks = list(all_pairs(store)())
    pid = np.concatenate([c[0] for c in chunks])
    P = np.concatenate([c[1] for c in chunks])
    assert len(pid) == sum(int((rel[qid == g][:, None] > rel[qid == g][None, :]).sum())
                           for g in range(nq))
    i, j = np.divmod(pid, len(X))                   # pair id: i n + j, i above j
    assert np.all(rel[i] > rel[j]) and np.all(qid[i] == qid[j])
    np.testing.assert_array_equal(P, np.hstack([X[i], X[j]]))
    K = k.block(X, X).astype(np.float64)
    Q = K[np.ix_(i, i)] - K[np.ix_(i, j)] - K[np.ix_(j, i)] + K[np.ix_(j, j)] \
        + np.eye(len(pid)) / C
    np.testing.assert_allclose(pk.block(P, P), Q - np.eye(len(pid)) / C, atol=1e-5)
    pts = RowPoints(C, 0.0, kmax=2.0, constant_diagonal=False, skip_core=False)
    q = np.full(len(pid), pts.eta)
    assert pts.eta >= np.diag(Q).max()
    R2_opt, _ = _qp_max(Q, q)
    s = run_solver(store, pk, pts, Solve(method="cvm", eps=eps), b=0.0, C=C,
                   full_pass=all_pairs(store), dim=2 * X.shape[1], sparse=False,
                   make_pool=lambda rng, st: PairPool(ChunkPool(store, rng)))
    a = np.zeros(len(pid))
    where = {int(p): r for r, p in enumerate(pid)}
    cs = s.ball.core
    for slot in range(cs.n):
        a[where[int(cs.ids[slot])]] = cs.alpha[slot]
    _check_ratio(a, Q, q, R2_opt, eps)


def test_regressor_warns_when_its_core_set_reaches_the_cap():
    from streamcvm import CVMRegressor
    X, t = _friedman(2000)
    with pytest.warns(RuntimeWarning, match="reached max_core=50"):
        r = CVMRegressor(max_core=50, eps=1e-5).fit(X, t)
    assert r.core_set_size_ == 50


def _skewed(n, seed=0):
    """A target with long-tailed, skewed noise (standardised): where a small
    mu's tube covers nearly every row and a few extreme rows set the fit."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 5)).astype(np.float32)
    t = 2 * np.sin(3 * X[:, 0]) + X[:, 1] + rng.exponential(1.0, size=n) ** 2
    return X, (t - t.mean()) / t.std()


def test_regressor_auto_mu_fixes_the_biased_small_mu_fit_and_small_mu_warns():
    """A skewed target: mu=0.02 on a long-tailed target is biased and worse
    than predicting the mean; mu="auto" (the default) picks mu and gamma on
    held-out rows and beats scikit-learn's SVR() defaults."""
    from sklearn.svm import SVR
    from streamcvm import CVMRegressor
    X, t = _skewed(5000)
    Xtr, ttr, Xte, tte = X[:3000], t[:3000], X[3000:], t[3000:]

    def rmse(p):
        return float(np.sqrt(np.mean((p - tte) ** 2)))
    with pytest.warns(RuntimeWarning, match="biased"):
        small = CVMRegressor(mu=0.02).fit(Xtr, ttr)
    assert rmse(small.predict(Xte)) > 1.2 * tte.std()
    auto = CVMRegressor().fit(Xtr, ttr)
    assert len(auto.selection_) == 5                    # 2 gammas, then 3 more mus
    assert auto.mu_ in {tr["mu"] for tr in auto.selection_}
    assert auto.gamma_ in {tr["gamma"] for tr in auto.selection_}
    ref = SVR().fit(Xtr, ttr)
    assert rmse(auto.predict(Xte)) < rmse(ref.predict(Xte))
    assert abs(np.mean(auto.predict(Xte)) - tte.mean()) < 0.2


def test_regressor_fits_an_offset_target_as_well_as_a_centred_one():
    """The bias is penalised, so a target far from 0 is centred before the fit
    (and the mean added back): shifting y by 1,000 shifts the predictions."""
    from streamcvm import CVMRegressor
    X, t = _friedman(600)
    t = (t - t.mean()) / t.std()
    a = CVMRegressor(mu=0.1, gamma=1.0, eps=1e-4).fit(X, t)
    b = CVMRegressor(mu=0.1, gamma=1.0, eps=1e-4).fit(X, t + 1000.0)
    assert np.abs(b.predict(X) - 1000.0 - a.predict(X)).max() < 0.05


def test_capped_fit_reports_the_eps_its_center_certifies(svr_problem):
    """A fit stopped by max_core gets one pass that measures its furthest
    point: the certified eps bounds the dual gap against the exact optimum,
    and is tight (the furthest point is at exactly that distance)."""
    X, t, k, store, C, mu, pts, Q, q, R2_opt, _ = svr_problem
    s = run_solver(store, k, pts, Solve(method="cvm", eps=1e-4, max_core=25), b=1.0, C=C)
    assert s.ball.core.n == 25
    rec = s.history[-1]
    assert rec["capped"] and rec["certified_eps"] == s.certified_eps > 1e-4
    a = _point_alpha(s, len(q))
    R2 = a @ q - a @ Q @ a
    d2 = a @ Q @ a - 2 * Q @ a + q
    assert np.sqrt(d2.max() / R2) - 1.0 == pytest.approx(rec["certified_eps"], rel=1e-5)
    assert R2_opt <= (1.0 + rec["dual_gap"]) * R2 * (1 + 1e-9)


def _interleave(ap, am):
    """Point weights in id order 2i (s = +1), 2i + 1 (s = -1)."""
    a = np.empty(2 * len(ap))
    a[0::2], a[1::2] = ap, am
    return a


@pytest.mark.parametrize("eps", [1e-2, 1e-4])
def test_exact_svr_smo_against_exact_qp(svr_problem, eps):
    """The exact SMO over all 2m points (solvers.exact.svr), stopped by CVM's
    eps rule, is a (1 + eps)^2 approximation of the reference optimum, and
    its c2 / radius are those of its weights."""
    from streamcvm.solvers.exact.svr import svr_exact
    X, t, k, store, C, mu, pts, Q, q, R2_opt, _ = svr_problem
    res = svr_exact(X, t - pts.offset, k, C, mu, pts.eta, 0.0, eps * (2 + eps))
    a = _interleave(res["ap"], res["am"])
    _check_ratio(a, Q, q, R2_opt, eps)
    assert res["c2"] == pytest.approx(a @ Q @ a, rel=1e-6)
    assert res["radius2"] == pytest.approx(a @ q - a @ Q @ a, rel=1e-6)


def test_exact_svr_model_matches_the_exact_solution_and_cvm(svr_problem):
    """CVMRegressor's exact path (train_regressor(exact=True)) gives the model
    of the reference optimum, f and epsbar, as CVM does at a tight eps; the
    default stopping rule (eps="auto": every point's KKT violation within
    EXACT_TOL sd) stays close to it."""
    X, t, k, store, C, mu, pts, Q, q, _, a_opt = svr_problem
    s = np.tile([1.0, -1.0], len(t))
    f_opt = (k.block(X, X) + 1) @ (C * (a_opt[0::2] - a_opt[1::2])) + pts.offset
    eb_opt = a_opt @ (s * np.repeat(t - pts.offset, 2)) - C * a_opt @ Q @ a_opt
    tight = train_regressor(store, k, Solve(method="cvm", eps=1e-6), C=C, mu=mu,
                            train_size="all", exact=True)
    assert tight.history[-1]["exact"]
    assert np.abs(tight.decision(k, X) - f_opt).max() < 1e-3 * t.std()
    assert tight.epsilon_bar == pytest.approx(eb_opt, abs=1e-3)
    cvm = train_regressor(store, k, Solve(method="cvm", eps=1e-4), C=C, mu=mu,
                          full_pass=True, train_size="all", exact=True)    # full pass: CVM
    assert "exact" not in cvm.history[-1]
    assert np.abs(tight.decision(k, X) - cvm.decision(k, X)).max() < 0.02 * t.std()
    auto = train_regressor(store, k, Solve(method="cvm", eps="auto"), C=C, mu=mu,
                           train_size="all", exact=True)
    assert np.abs(auto.decision(k, X) - f_opt).max() < 0.1 * t.std()
    # the machine keeps the rows with weight, in id order
    assert np.all(np.diff(tight.sv_ids) > 0) and len(tight.coef) == len(tight.sv_ids)


def whole_matrix(rows):
    """The m x m matrix of a kernel-row cache holding every row, in row order."""
    assert (rows[1] >= 0).all()
    return rows[0][rows[1]]


def test_exact_kernel_rows_are_the_kernel_blocks():
    """The exact path's kernel matrix, whole or row by row on first use (RBF),
    is the kernel blocks' (float32), exactly symmetric."""
    from streamcvm.solvers.exact.rowcache import _ensure, kernel_rows
    X, _ = _friedman(300)
    for k in (Kernel("rbf", gamma=0.7), Kernel("laplacian", gamma=0.3)):
        K = whole_matrix(kernel_rows(k, X, lazy=False))
        assert K.dtype == np.float32 and np.array_equal(K, K.T)
        assert np.abs(K - k.block(X, X)).max() < 1e-6
    rows = kernel_rows(Kernel("rbf", gamma=0.7), X)
    assert (rows[1] < 0).all()
    r5 = _ensure(5, *rows).copy()
    assert (rows[1] >= 0).sum() == 1 and np.array_equal(r5, K_rbf := whole_matrix(kernel_rows(
        Kernel("rbf", gamma=0.7), X, lazy=False))[5])
    assert np.abs(K_rbf - Kernel("rbf", gamma=0.7).block(X, X)[5]).max() < 1e-6


def test_exact_kernel_rows_in_batches_are_the_single_rows_and_the_same_solve(svr_problem):
    """Kernel rows computed a batch at a time (_rbf_rows: the initial weights'
    rows, SMO's misses with the next rows it may grow) are bit for bit the
    rows _ensure makes one at a time, in any order and batch size; a solve
    on rows computed on demand in batches gives the very solution of one on
    the whole matrix, with the rows of its weighted points computed."""
    from streamcvm.solvers.exact.rowcache import _ensure, _fill, kernel_rows
    from streamcvm.solvers.exact.svr import svr_exact
    X, _ = _friedman(300)
    k = Kernel("rbf", gamma=0.7)
    one = kernel_rows(k, X)
    for i in range(300):
        _ensure(i, *one)
    batched = kernel_rows(k, X)
    idx = np.random.default_rng(3).permutation(300)
    for a, b in ((0, 1), (1, 70), (70, 133), (133, 300)):
        _fill(idx[a:b], *batched)
    assert (batched[1] >= 0).all() and np.array_equal(whole_matrix(batched), whole_matrix(one))
    X, t, k, store, C, mu, pts, *_ = svr_problem
    lazy = kernel_rows(k, X)
    got = svr_exact(X, t - pts.offset, k, C, mu, pts.eta, 0.0, 1e-4, K=lazy)
    ref = svr_exact(X, t - pts.offset, k, C, mu, pts.eta, 0.0, 1e-4,
                    K=kernel_rows(k, X, lazy=False))
    assert np.array_equal(got["ap"], ref["ap"]) and np.array_equal(got["am"], ref["am"])
    assert got["n_iter"] == ref["n_iter"] and got["c2"] == ref["c2"]
    w = (got["ap"] > 0) | (got["am"] > 0)
    assert (lazy[1][w] >= 0).all()


def test_exact_svr_rows_and_solve_do_not_depend_on_threads(svr_problem):
    """The start's kernel rows, a batch per thread (kernels.rbf_rows_on), give
    the one-thread run's kernel rows and solve, bit for bit."""
    import numba
    from streamcvm.solvers.kernels.rows import rbf_rows_on
    from streamcvm.solvers.exact.rowcache import _claim_all, kernel_rows
    from streamcvm.solvers.exact.svr import svr_exact
    X, t, k, store, C, mu, pts, *_ = svr_problem
    before = numba.get_num_threads()
    got = {}
    try:
        for n in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(n)
            rows = kernel_rows(k, X)
            idx = np.arange(len(t))
            rbf_rows_on(idx, _claim_all(idx, len(t), 1, *rows[1:5]), rows[0], *rows[5:9], n,
                        64)
            got[n] = (whole_matrix(rows).copy(),
                      svr_exact(X, t - pts.offset, k, C, mu, pts.eta, 0.0, 1e-4))
    finally:
        numba.set_num_threads(before)
    (K1, s1), (Kn, sn) = got[1], got[max(got)]
    assert np.abs(K1 - k.block(X, X)).max() < 1e-6 and np.array_equal(K1, Kn)
    assert np.array_equal(s1["ap"], sn["ap"]) and np.array_equal(s1["am"], sn["am"])
    assert s1["n_iter"] == sn["n_iter"] and s1["c2"] == sn["c2"]


@pytest.mark.parametrize("cap", [2, 5, 11])
def test_exact_svr_with_a_small_row_cache_is_the_whole_matrix_solve(svr_problem, cap):
    """A kernel-row cache far smaller than the rows (cap rows of m, least
    recently used evicted; recomputed rows are bit for bit the same) gives the
    whole-matrix solve's very weights, steps and model, after recomputing rows."""
    from streamcvm.solvers.exact.rowcache import kernel_rows
    from streamcvm.solvers.exact.svr import svr_exact
    X, t, k, store, C, mu, pts, *_ = svr_problem
    m = len(t)
    mb = (cap + 0.5) * 4 * m / 2 ** 20
    cached = kernel_rows(k, X, cache_mb=mb)
    assert cached[0].shape == (cap, m) and cap < m // 10
    got = svr_exact(X, t - pts.offset, k, C, mu, pts.eta, 0.0, 1e-4, K=cached)
    ref = svr_exact(X, t - pts.offset, k, C, mu, pts.eta, 0.0, 1e-4, cache_mb=None)
    assert got["rows_computed"] > m and ref["rows_computed"] <= m     # evictions happened
    np.testing.assert_allclose(got["ap"], ref["ap"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["am"], ref["am"], rtol=0, atol=1e-12)
    assert got["n_iter"] == ref["n_iter"] and got["c2"] == pytest.approx(ref["c2"], rel=1e-12)
    # the same predictions: f = (K + 1) C (ap - am) + offset
    Kf = k.block(X, X) + 1.0
    f_got = Kf @ (C * (got["ap"] - got["am"]))
    f_ref = Kf @ (C * (ref["ap"] - ref["am"]))
    assert np.abs(f_got - f_ref).max() <= 1e-9 * max(np.abs(f_ref).max(), 1.0)
    # every slot in use and the slot map consistent with its owners
    slot, owner = cached[1], cached[2]
    assert (owner >= 0).all() and np.array_equal(slot[owner], np.arange(cap))
    assert (slot >= 0).sum() == cap


def test_regressor_defaults_solve_small_data_exactly_and_max_core_keeps_cvm():
    """CVMRegressor() on in-memory rows takes the exact path (C = 2 x rows);
    a given max_core, or method="fvm", keeps the core-set solvers."""
    from streamcvm import CVMRegressor
    X, t = _friedman(1500)
    r = CVMRegressor(mu=0.1, gamma=1.0).fit(X, t)
    assert r.history_[-1]["exact"] and r.C_ == 2.0 * len(t)
    c = CVMRegressor(mu=0.1, gamma=1.0, max_core=5000).fit(X, t)
    assert "exact" not in c.history_[-1] and c.C_ == 5.0 * len(t)
    f = CVMRegressor(mu=0.1, gamma=1.0, method="fvm").fit(X[:300], t[:300])  # (FW: slow at
    assert "exact" not in f.history_[-1] and f.C_ == 5.0 * 300                # C = 5 x rows)


def test_regressor_trials_before_an_exact_fit_take_fewer_rows(monkeypatch):
    """mu / gamma trials before an exact final fit (on at least the option
    select_exact_min_rows rows: 2,000 here) are fitted on select_fit_exact
    held-out rows (600 here), before a CVM fit or a smaller exact one on
    select_fit_rows (here all the rows the validation ones leave)."""
    from streamcvm import CVMRegressor
    from streamcvm.problems import regression_defaults as R
    drawn = []
    real = R.held_out

    def spy(store, n_fit, n_val, seed, runner=None):
        fit, val = real(store, n_fit, n_val, seed, runner)
        drawn.append(len(fit[1]))
        return fit, val
    monkeypatch.setattr(R, "held_out", spy)
    opts = {"select_exact_min_rows": 2000, "select_fit_exact": 600}
    X, t = _friedman(2400)      # 1,200 validation rows; up to 1,200 left to fit
    CVMRegressor(mu=0.1, gamma=1.0, options=opts).fit(X, t)
    CVMRegressor(mu=0.1, gamma=1.0, max_core=300, options=opts).fit(X, t)
    CVMRegressor(mu=0.1, gamma=1.0, options=opts).fit(X[:1900], t[:1900])
    # (the hash-keyed draw takes about the share asked)
    assert 540 <= drawn[0] <= 600 and drawn[1] > 1100 and drawn[2] > 850
    from streamcvm.options import default
    assert default("select_fit_rows") >= 2000


def test_regressor_exact_path_needs_room_for_its_matrix(monkeypatch):
    """The exact path holds an m x m float32 matrix: with less than twice
    that available the fit keeps CVM (C = 5 x rows)."""
    import collections
    import psutil
    from streamcvm import CVMRegressor
    X, t = _friedman(1500)
    mem = collections.namedtuple("mem", "available")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: mem(8 * 1500 ** 2 - 1))
    r = CVMRegressor(mu=0.1, gamma=1.0).fit(X, t)
    assert "exact" not in r.history_[-1] and r.C_ == 5.0 * len(t)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: mem(8 * 1500 ** 2))
    r = CVMRegressor(mu=0.1, gamma=1.0).fit(X, t)
    assert r.history_[-1]["exact"] and r.C_ == 2.0 * len(t)
