"""The scikit-learn estimators: sklearn's own checks, stores vs arrays, accuracy."""
import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import roc_auc_score
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

import streamcvm
from streamcvm import CVMClassifier, CVMOneClass, CVMRanker, CVMRegressor, MMDATransformer
from streamcvm.data import synthetic


def _expected_failures(est):
    """The weight-equivalence checks compare a fit with weight-2 rows against
    one with those rows repeated, to rtol 1e-7. Each instance misses them for
    the reason given (each shown true in test_sklearn_parity)."""
    if not isinstance(est, CVMClassifier):
        return {}
    eq = ("check_sample_weight_equivalence_on_dense_data",
          "check_sample_weight_equivalence_on_sparse_data")
    why = ("C and gamma are chosen from the rows, which count rows, not weights: the "
           "weighted and the repeated data get another gamma unit (1/beta) and other "
           "held-out rows, so they train at another (C_, gamma_); at a fixed C and gamma "
           "the exact route agrees to SMO's tolerance (3e-4 relative), not rtol 1e-7")
    if est.method == "cvm":
        why += ", and CVM's (1 + eps)-approximate solutions at eps=1e-2 by about 1e-2"
    return {c: why for c in eq}


@parametrize_with_checks([CVMClassifier(eps=1e-2), CVMClassifier(method="cvm", eps=1e-2),
                          CVMOneClass(), CVMRegressor(eps=1e-4), CVMRanker(),
                          MMDATransformer()],
                         expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("method", ["bvm", "cvm", "fvm"])
def test_close_to_svc_on_moons(method):
    X, y = make_moons(n_samples=1500, noise=0.25, random_state=0)
    Xt, yt = make_moons(n_samples=3000, noise=0.25, random_state=1)
    clf = CVMClassifier(method=method, eps=1e-4).fit(X, y)
    svc = SVC(C=1.0, gamma=clf.gamma_).fit(X, y)
    assert clf.score(Xt, yt) >= svc.score(Xt, yt) - 0.01
    assert clf.n_iter_ > 0 and clf.core_set_size_ >= clf.n_support_.sum()
    assert [h["eps"] for h in clf.history_][-1] == 1e-4


def test_multiclass_one_vs_one_votes():
    X, y = make_blobs(n_samples=600, centers=4, cluster_std=1.5, random_state=0)
    clf = CVMClassifier(eps=1e-3).fit(X, y)
    assert clf.score(X, y) >= SVC(gamma=clf.gamma_).fit(X, y).score(X, y) - 0.02
    assert len(clf.machines_) == 6
    D = clf.decision_function(X)
    assert D.shape == (600, 4)
    np.testing.assert_array_equal(clf.classes_[D.argmax(axis=1)], clf.predict(X))
    assert clf.set_params(decision_function_shape="ovo").decision_function(X).shape == (600, 6)


def test_store_and_arrays_give_the_same_model(tmp_path):
    path = str(tmp_path / "g.zarr")
    synthetic.write_store(path, "gaussian", 6000, seed=5, chunk_rows=1000)
    store = streamcvm.open_store(path)
    X = np.concatenate([c.X for c in store])
    y = np.concatenate([c.y for c in store])
    a = CVMClassifier(eps=1e-3, random_state=2).fit(store)
    b = CVMClassifier(eps=1e-3, random_state=2).fit(streamcvm.as_store(X, y, chunk_rows=1000))
    np.testing.assert_array_equal(a.machines_[0].sv_ids, b.machines_[0].sv_ids)
    np.testing.assert_allclose(a.dual_coef_[0], b.dual_coef_[0], rtol=1e-12)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.classes_, [-1.0, 1.0])


@pytest.mark.parametrize("method", ["cvm", "bvm"])
def test_one_class_flags_outliers(method):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 3))
    out = rng.uniform(-6, 6, (200, 3))
    out = out[np.linalg.norm(out, axis=1) > 4]
    oc = CVMOneClass(method=method, eps=1e-3, C=0.05).fit(X)
    frac = np.mean(oc.predict(X) == -1)
    assert 0.0 < frac < 0.3          # C = 0.05: much slack, many training outliers
    assert np.mean(oc.predict(out) == -1) > 0.9
    s = np.concatenate([oc.decision_function(X), oc.decision_function(out)])
    truth = np.r_[np.ones(len(X)), np.zeros(len(out))]
    assert roc_auc_score(truth, s) > 0.95
    np.testing.assert_allclose(oc.score_samples(X), oc.decision_function(X) + oc.offset_)


def test_verbose_shows_progress(capsys):
    X, y = make_blobs(n_samples=600, centers=3, cluster_std=1.5, random_state=0)
    CVMClassifier(eps=1e-3, verbose=True).fit(X, y)
    err = capsys.readouterr().err
    assert "3/3" in err and "machine" in err and "core" in err and "eps" in err
    CVMClassifier(eps=1e-3).fit(X, y)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("centers", [2, 4])
def test_decision_matches_each_machine(centers):
    """The estimator combines machines over their shared support rows; each
    column must equal that machine's own f(x) = sum coef k(sv, x) + b (the
    machines' values are positive for class j of the pair i < j; the ovo
    columns, as SVC's, for class i)."""
    X, y = make_blobs(n_samples=800, centers=centers, cluster_std=2.5, random_state=1)
    clf = CVMClassifier(eps=1e-3, decision_function_shape="ovo").fit(X, y)
    F = clf.decision_function(X)
    sign = 1.0 if F.ndim == 1 else -1.0
    F = F[:, None] if F.ndim == 1 else F
    for k, m in enumerate(clf.machines_):
        np.testing.assert_allclose(sign * F[:, k], m.decision(clf.kernel_, X.astype(np.float32)),
                                   rtol=1e-5, atol=1e-9)


def test_one_vs_rest(tmp_path):
    from streamcvm.estimators.model import load_model, save_model
    Xa, ya = make_blobs(n_samples=2400, centers=4, cluster_std=2.0, random_state=2)
    X, y, Xt, yt = Xa[:1200], ya[:1200], Xa[1200:], ya[1200:]     # held out: other rows
    ovr = CVMClassifier(eps=1e-3, multi_class="ovr").fit(X, y)
    ovo = CVMClassifier(eps=1e-3).fit(X, y)
    assert len(ovr.machines_) == 4 and len(ovo.machines_) == 6
    # machine k: class k (+1) against the three others, all rows of the store
    assert ovr.machines_[2].classes == ((0.0, 1.0, 3.0), 2.0)
    F = ovr.decision_function(Xt)
    assert F.shape == (len(Xt), 4)
    np.testing.assert_array_equal(ovr.predict(Xt), ovr.classes_[np.argmax(F, axis=1)])
    assert ovr.score(Xt, yt) >= ovo.score(Xt, yt) - 0.02
    save_model(ovr, tmp_path / "m")
    np.testing.assert_array_equal(load_model(tmp_path / "m").decision_function(Xt), F)
    with pytest.raises(ValueError, match="ovo' or 'ovr"):
        CVMClassifier(multi_class="crammer").fit(X, y)


@pytest.mark.parametrize("est", [CVMClassifier(eps=1e-2), CVMOneClass(eps=1e-2),
                                 CVMRegressor(mu=0.5, gamma=0.5)])
def test_a_feature_count_mismatch_is_refused(est, tmp_path):
    """Arrays (scikit-learn's message) and a store of another width (one
    line naming the store) are refused at predict time."""
    X, y = make_blobs(n_samples=300, centers=2, n_features=4, random_state=0)
    est.fit(X, y.astype(float))
    with pytest.raises(ValueError, match="4 features"):
        est.predict(X[:, :3])
    path = str(tmp_path / "wide.zarr")
    synthetic.write_store(path, "gaussian", 500, d=6, seed=0)
    with pytest.raises(ValueError, match=r"wide.zarr: 6 features, the model expects 4"):
        est.predict(path)
