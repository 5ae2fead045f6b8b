"""C and gamma chosen on held-out rows: the successive halving search
(problems/selection.py), the classifier's use of it (estimators/search.py),
and the exact solver of small two-class machines (solvers/exact/svc.py)."""
import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier
from streamcvm.problems import selection as sel
from streamcvm.solvers.kernels import Kernel


# -- the search on a known landscape --------------------------------------------

def _landscape(best_c, best_g, n=4000, seed=0, cost_of=lambda p: p["C"]):
    """evaluate(params, rows): 0/1 losses on n validation rows whose error
    rate falls with the distance of (log C, log gamma) from (best_c, best_g)
    and with the rows; deterministic for a point and rows."""
    calls = []

    def evaluate(p, rows):
        calls.append((p["C"], p["gamma"], rows))
        d = (np.log10(p["C"]) - np.log10(best_c)) ** 2 + \
            (np.log2(p["gamma"]) - np.log2(best_g)) ** 2
        err = 0.02 + 0.01 * d + 2.0 / rows
        rng = np.random.default_rng([seed, rows])
        u = rng.random(n)               # the same rows for every candidate: paired
        return {"losses": (u < err).astype(float), "n_iter": int(1000 * cost_of(p))}
    return evaluate, calls


from streamcvm.options import default  # noqa: E402

AXES = (sel.Axis("C", (1.0, 10.0, 100.0), 10.0, 1e-3, 1e5),
        sel.Axis("gamma", (0.5, 1.0, 2.0, 4.0, 8.0), 2.0, 1 / 64, 64.0))


def test_rung_sizes():
    assert sel.rung_sizes(16384, 400) == [1821, 5462, 16384]
    assert sel.rung_sizes(3000, 400) == [1000, 3000]
    assert sel.rung_sizes(500, 400) == [500]


def test_halving_finds_an_inner_optimum_and_keeps_a_third_per_rung():
    ev, calls = _landscape(10.0, 2.0)
    chosen, trials = sel.halving(AXES, [400, 1200, 3600], ev)
    assert (chosen["C"], chosen["gamma"]) == (10.0, 2.0)
    per_rung = [sum(t["rung"] == r for t in trials) for r in range(3)]
    assert per_rung == [15, 5, 2]                       # 15 -> ceil(15/3) -> ceil(5/3)
    assert [t["rows"] for t in trials if t["rung"] == 2] == [3600, 3600]


def test_the_grid_grows_past_an_edge_the_data_asks_for():
    ev, calls = _landscape(1000.0, 32.0)
    chosen, trials = sel.halving(AXES, [400, 1200, 3600], ev)
    assert chosen["C"] >= 1000.0 and chosen["gamma"] >= 32.0
    assert max(t["C"] for t in trials) > 100.0 and max(t["gamma"] for t in trials) > 8.0
    # never past the axes' limits
    ev, _ = _landscape(1e9, 1e4)
    chosen, trials = sel.halving(AXES, [400], ev)
    assert max(t["C"] for t in trials) <= 1e5 and max(t["gamma"] for t in trials) <= 64.0


def test_ties_go_to_the_anchor_then_to_a_point_twice_as_cheap():
    flat = lambda p, rows: {"losses": np.zeros(1000), "n_iter": int(100 * p["C"])}
    # every candidate ties: the anchor wins
    chosen, trials = sel.halving(AXES, [400, 1200], flat, cost="n_iter",
                                 anchor={"C": 1.0, "gamma": 1.0})
    assert (chosen["C"], chosen["gamma"]) == (1.0, 1.0)
    assert any(t["rung"] == 1 and (t["C"], t["gamma"]) == (1.0, 1.0) for t in trials)
    # without an anchor: the smaller C (the grid's order), which is also the cheapest
    chosen, _ = sel.halving(AXES, [400], flat, cost="n_iter")
    assert chosen["C"] == 1.0 or chosen["C"] < 1.0


def test_a_costly_candidate_that_ranks_lower_does_not_go_on():
    """After the first rung, a candidate that ranks below a survivor at
    least the option halving_cost_ratio times cheaper is dropped for the next one in rank."""
    ev, calls = _landscape(10.0, 2.0, cost_of=lambda p: p["C"] ** 2)
    chosen, trials = sel.halving(AXES, [400, 1200, 3600], ev, cost="n_iter")
    last = [t for t in trials if t["rung"] == 2]
    r1 = sorted((t for t in trials if t["rung"] == 1), key=lambda t: t["val_loss"])
    for t in last:
        better = [u for u in r1 if u["val_loss"] < t["val_loss"]]
        assert all(t["n_iter"] < default("halving_cost_ratio") * u["n_iter"] for u in better)


def test_tied_is_one_standard_error_of_the_paired_difference():
    a, b = np.zeros(400), np.zeros(400)
    b[:10] = 1.0                                  # 10 more errors: sqrt(10) = 3.2 < 10
    t_a, t_b = {"id": "a"}, {"id": "b"}
    assert sel.tied([t_a, t_b], t_a, {id(t_a): a, id(t_b): b}) == [t_a]
    b[:10], b[10:12] = 0.0, 1.0                   # 2 more: sqrt(2) = 1.4 < 2, not tied
    assert sel.tied([t_a, t_b], t_a, {id(t_a): a, id(t_b): b}) == [t_a]
    b[10:12], b[10] = 0.0, 1.0                    # 1 more: within sqrt(1)
    assert sel.tied([t_a, t_b], t_a, {id(t_a): a, id(t_b): b}) == [t_a, t_b]


# -- the exact solver of a two-class machine ------------------------------------------

def test_svc_exact_solves_the_meb_dual_to_its_optimum():
    """svc_exact against an exact QP solve (scipy, SLSQP on the simplex):
    the same objective a'Qa; BVM's fixed-radius ball stops above it."""
    from scipy.optimize import minimize
    from sklearn.metrics.pairwise import rbf_kernel
    from streamcvm.solvers.exact.svc import svc_exact
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 3)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.standard_normal(120) > 0, 1.0, -1.0)
    C, g = 10.0, 0.5
    Q = np.outer(y, y) * (rbf_kernel(X, X, gamma=g) + 1.0) + np.eye(len(y)) / C
    ref = minimize(lambda a: a @ Q @ a, np.full(len(y), 1 / len(y)), jac=lambda a: 2 * Q @ a,
                   bounds=[(0, 1)] * len(y), method="SLSQP", options={"ftol": 1e-14,
                                                                       "maxiter": 2000},
                   constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1,
                                 "jac": lambda a: np.ones_like(a)}])
    res = svc_exact(X, y, Kernel("rbf", gamma=g), C, tol=1e-5)
    a = res["a"]
    assert a.min() >= 0 and a.sum() == pytest.approx(1.0)
    assert a @ Q @ a == pytest.approx(ref.fun, rel=1e-4)
    assert res["c2"] == pytest.approx(a @ Q @ a, rel=1e-6)
    m = CVMClassifier(C=C, gamma=g, method="bvm", eps=1e-6, compact=False).fit(X, y)
    ab = np.zeros(len(y))
    ab[m.machines_[0].sv_ids] = np.abs(m.machines_[0].coef)
    ab /= ab.sum()
    assert ab @ Q @ ab > a @ Q @ a * (1 + 1e-3)      # BVM: feasible, not optimal


def test_method_auto_is_exact_where_small_and_bvm_above():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1500, 4)).astype(np.float32)
    y = np.where(X[:, 0] + X[:, 1] ** 2 > 0.5, 1.0, -1.0)
    m = CVMClassifier(C=10.0, gamma=0.5, compact=False).fit(X, y)
    assert m.machines_[0].history[-1]["exact"] == "smo"
    m2 = CVMClassifier(C=10.0, gamma=0.5, compact=False,
                       options={"svc_exact_rows": 1000}).fit(X, y)
    assert "exact" not in m2.machines_[0].history[-1] or \
        m2.machines_[0].history[-1]["exact"] != "smo"
    assert np.mean(m.predict(X) == m2.predict(X)) > 0.97


# -- the classifier's search --------------------------------------------------------

def _rings(n, seed=0):
    """Two classes on concentric noisy rings: a narrow kernel wins."""
    rng = np.random.default_rng(seed)
    r = np.where(rng.random(n) < 0.5, 1.0, 1.6)
    t = rng.random(n) * 2 * np.pi
    X = np.c_[r * np.cos(t), r * np.sin(t)] + 0.12 * rng.standard_normal((n, 2))
    return X.astype(np.float32), np.where(r > 1.3, 1, 0)


def test_auto_chooses_c_and_gamma_records_them_and_saves_them(tmp_path):
    from streamcvm.cli.info import describe_model
    X, y = _rings(3000)
    Xt, yt = _rings(2000, seed=5)
    clf = CVMClassifier().fit(X, y)
    s = clf.selection_
    assert s["searched"] == ["C", "gamma"]
    assert clf.C_ == s["chosen"]["C"] and clf.gamma_ == pytest.approx(s["chosen"]["gamma"])
    assert clf.kernel_.gamma == pytest.approx(clf.gamma_)
    assert len({t["rows"] for t in s["trials"]}) == len(s["rungs"]) >= 2
    assert all(0 <= t["val_loss"] <= 1 for t in s["trials"])
    fixed = CVMClassifier(C=1.0, gamma=clf.selection_["gamma_unit"]).fit(X, y)
    assert fixed.selection_ is None
    assert clf.score(Xt, yt) >= fixed.score(Xt, yt) - 0.005
    streamcvm.save_model(clf, tmp_path / "m")
    back = streamcvm.load_model(tmp_path / "m")
    assert back.selection_["chosen"] == s["chosen"] and back.C_ == clf.C_
    np.testing.assert_array_equal(back.predict(Xt), clf.predict(Xt))
    text = describe_model(str(tmp_path / "m"))
    assert "search     chose C" in text and "last rung:" in text


def test_an_explicit_c_or_gamma_turns_its_search_off():
    X, y = _rings(2000)
    c = CVMClassifier(C=5.0).fit(X, y)
    assert c.selection_["searched"] == ["gamma"] and c.C_ == 5.0
    assert {t["C"] for t in c.selection_["trials"]} == {5.0}
    g = CVMClassifier(gamma=0.7).fit(X, y)
    assert g.selection_["searched"] == ["C"] and g.gamma_ == pytest.approx(0.7)
    assert all(t["gamma"] == pytest.approx(0.7) for t in g.selection_["trials"])


def test_multiclass_search_holds_out_every_class_and_is_deterministic():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2400, 3)).astype(np.float32)
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1] * X[:, 2], [-0.8, 0.0, 0.8])   # 4 classes
    a = CVMClassifier().fit(X, y)
    b = CVMClassifier(n_jobs=1).fit(X, y)
    assert a.selection_["chosen"] == b.selection_["chosen"]
    np.testing.assert_array_equal(a.predict(X), b.predict(X))     # threads change nothing
    assert len(a.machines_) == 6
