"""Machines and searches on a handful of rows: the sampled CVM and FVM
honour the eps their history reports when the core set holds (nearly)
every row, and C/gamma are not searched on too few held-out rows."""
import numpy as np
import pytest
from scipy.optimize import minimize

from streamcvm import CVMClassifier
from streamcvm.problems import selection as sel


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, 0)
    y[:2] = [0, 1]                     # both classes, whatever the draw
    return X, y, rng.uniform(0.5, 2.0, n)


def _optimum(K, s, C):
    """The MEB dual of the L2-SVM, exactly (SLSQP): min a'K~a over the
    simplex, K~ = s s' (K + 1) + diag(1 / C_i)."""
    Kt = np.outer(s, s) * (K + 1.0) + np.diag(1.0 / C)
    m = len(s)
    res = minimize(lambda a: a @ Kt @ a, np.full(m, 1.0 / m), jac=lambda a: 2.0 * Kt @ a,
                   constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1.0,
                                 "jac": lambda a: np.ones(m)}],
                   bounds=[(0.0, None)] * m, method="SLSQP",
                   options={"ftol": 1e-16, "maxiter": 2000})
    return res.x


@pytest.mark.parametrize("n", [8, 16, 40])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("method", ["cvm", "fvm"])
def test_sampled_methods_reach_their_eps_on_a_few_rows(method, weighted, n):
    # 8 rows: all in the first core set; 16: most of them; 40: some left outside
    X, y, w = _rows(n)
    w = w if weighted else None
    eps = 1e-5
    clf = CVMClassifier(method=method, C=1.0, gamma=1.0, eps=eps).fit(X, y, sample_weight=w)
    assert clf.history_[-1]["eps"] == eps
    s = np.where(y == clf.classes_[1], 1.0, -1.0)
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    Ci = np.ones(n) if w is None else w
    a = np.zeros(n)
    a[clf.support_] = np.abs(clf.dual_coef_[0])
    # the (1 + eps) test over every row: d^2 <= (1 + eps)^2 R^2, with q = eta
    # for every point (kt unweighted, 1 + b + 1 / (C min w) weighted)
    Kta = s * (K @ (a * s) + (a * s).sum()) + a / Ci
    c2 = a @ Kta
    eta = 2.0 + 1.0 / Ci.min()
    d2, R2 = c2 - 2.0 * Kta + eta, eta - c2
    assert np.sqrt(d2.max() / R2) - 1.0 <= 1.5 * eps
    # and so the decision values are those of the exact optimum
    opt = _optimum(K, s, Ci)
    f_opt = K @ (opt * s) + (opt * s).sum()
    f = clf.decision_function(X)
    assert np.abs(f - f_opt).max() <= 1e-3 * np.abs(f_opt).max()


def test_no_search_on_too_few_held_out_rows():
    # 9 rows: a class holds rows out from 5 rows on, so one row is held out, every
    # candidate ties on it, and ties ran to the grid's far corner (C = 1e-3)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(9, 2))
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    X[y == 1] += 2.0
    clf = CVMClassifier().fit(X, y)
    s = clf.selection_
    assert clf.C_ == 1.0
    assert clf.gamma_ == pytest.approx(s["gamma_unit"])
    assert s["reason"].startswith("too few rows to hold any out")
    assert s["trials"] == [] and s["searched"] == [] and s["not_searched"] == ["C", "gamma"]
    assert s["chosen"] == {"C": 1.0, "gamma": clf.gamma_, "gamma_x": 1.0}
    # a C given is kept
    assert CVMClassifier(C=5.0).fit(X, y).C_ == 5.0


def test_halving_refuses_to_rank_without_validation_rows():
    axes = (sel.Axis("C", (1.0, 10.0), 10.0, 1e-3, 1e3),)
    with pytest.raises(ValueError, match="validation rows"):
        sel.halving(axes, [10], lambda p, rows: {"losses": np.empty(0)})
