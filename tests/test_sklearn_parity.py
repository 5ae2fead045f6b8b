"""CVMClassifier's attributes and outputs that share sklearn.svm.SVC's names
mean what SVC's mean: the one-vs-one decision's sign, the support-vector
attributes' layout, Platt's sigmoid; and sample weights as SVC takes them
(a weight of 0 drops the row)."""
import gzip

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC
from sklearn.utils import shuffle

from streamcvm import CVMClassifier
from streamcvm.data.store import as_store
from streamcvm.estimators.model import load_model, save_model

from conftest import raw_file


def svc_ovo_values(K, dual_coef, intercept, n_support):
    """One-vs-one decision values from SVC's attributes, as LIBSVM computes
    them: machine (i, j), i < j, sums the class-i support rows' coefficients
    in row j - 1 of ``dual_coef`` and the class-j rows' in row i; ``K``: the
    kernel between the rows and the support vectors."""
    start = np.r_[0, np.cumsum(n_support)]
    k = len(n_support)
    cols, p = [], 0
    for i in range(k):
        for j in range(i + 1, k):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            cols.append(K[:, si] @ dual_coef[j - 1, si] + K[:, sj] @ dual_coef[i, sj]
                        + intercept[p])
            p += 1
    return np.column_stack(cols)


def sign_agreement(D, S, y, k):
    """(share of all entries, share of the entries of rows of the machine's
    own two classes) on which the one-vs-one values D and S have one sign."""
    i, j = np.triu_indices(k, 1)
    own = (y[:, None] == i[None]) | (y[:, None] == j[None])
    same = np.sign(D) == np.sign(S)
    return same.mean(), same[own].mean()


# -- 1. the one-vs-one decision's sign -----------------------------------------

def test_ovo_columns_have_svcs_sign_on_digits():
    """Machine (i, j)'s column is positive for class i, as SVC's (same C and
    gamma): the signs agree on >= 97% of the entries (99.3% measured), and
    on all but a few of the rows of the machine's own classes."""
    X, y = load_digits(return_X_y=True)
    clf = CVMClassifier(C=10.0, gamma=1e-3, decision_function_shape="ovo").fit(X, y)
    svc = SVC(C=clf.C_, gamma=clf.gamma_, decision_function_shape="ovo").fit(X, y)
    D, S = clf.decision_function(X), svc.decision_function(X)
    assert D.shape == S.shape == (len(y), 45)
    every, own = sign_agreement(D, S, y, 10)
    assert every >= 0.97 and own >= 0.999, (every, own)
    # the votes are counted as before: the default shape's argmax is predict
    V = clf.set_params(decision_function_shape="ovr").decision_function(X)
    np.testing.assert_array_equal(clf.classes_[V.argmax(axis=1)], clf.predict(X))
    # ... and as SVC counts them from the ovo columns: positive votes for i
    i, j = np.triu_indices(10, 1)
    votes = np.zeros((len(y), 10))
    np.add.at(votes.T, i, (D > 0).T)
    np.add.at(votes.T, j, (D <= 0).T)
    np.testing.assert_array_equal(votes, np.floor(V + 0.5))


def test_ovo_columns_have_svcs_sign_on_usps(raw):
    """The real USPS digits (first 2,000 training rows, defaults: C and
    gamma chosen on held-out rows): the same agreement with SVC."""
    def load(name):
        a = np.loadtxt(gzip.open(raw_file(raw, f"usps/{name}")), max_rows=2000)
        return a[:, 1:], a[:, 0].astype(int)
    X, y = load("zip.train.gz")
    Xt, yt = load("zip.test.gz")
    clf = CVMClassifier(decision_function_shape="ovo").fit(X, y)
    svc = SVC(C=clf.C_, gamma=clf.gamma_, decision_function_shape="ovo").fit(X, y)
    every, own = sign_agreement(clf.decision_function(Xt), svc.decision_function(Xt), yt, 10)
    assert every >= 0.97 and own >= 0.99, (every, own)


def test_ovo_sign_streams_to_stores(tmp_path):
    """A store's predictions (the command line's predict to a store) carry
    the same one-vs-one values as arrays."""
    X, y = make_blobs(n_samples=600, centers=4, cluster_std=2.0, random_state=3)
    clf = CVMClassifier(C=1.0, gamma=0.2, decision_function_shape="ovo").fit(X, y)
    store = as_store(X.astype(np.float32), y.astype(np.float64), chunk_rows=200)
    np.testing.assert_allclose(clf.decision_function(store), clf.decision_function(X),
                               rtol=1e-12)
    svc = SVC(C=1.0, gamma=0.2, decision_function_shape="ovo").fit(X, y)
    assert sign_agreement(clf.decision_function(X), svc.decision_function(X), y, 4)[1] > 0.99


# -- 2. the support-vector attributes in SVC's layout ------------------------------

def _check_layout(clf, X, y):
    """support_, n_support_, support_vectors_ as SVC's: distinct rows of the
    training data sorted by class then index, counted per class."""
    sup = clf.support_
    cls = np.searchsorted(clf.classes_, y[sup])
    assert len(np.unique(sup)) == len(sup) == clf.n_support_.sum()
    np.testing.assert_array_equal(clf.n_support_, np.bincount(cls, minlength=len(clf.classes_)))
    assert np.all(np.diff(cls) >= 0)                            # by class
    assert all(np.all(np.diff(sup[cls == c]) > 0) for c in np.unique(cls))   # then by index
    sv = clf.support_vectors_       # (streamcvm's rows are float32, SVC's float64)
    np.testing.assert_array_equal(sv, X[sup].astype(sv.dtype))
    if not hasattr(clf, "machines_"):
        return
    every = np.unique(np.concatenate([m.sv_ids for m in clf.machines_]))
    np.testing.assert_array_equal(np.sort(sup), every)


def test_two_classes_layout_and_sign_as_svc():
    """Two classes: dual_coef_ (1, n_SV), positive for classes_[1]'s rows,
    and K(x, SV) dual_coef_[0] + intercept_[0] is decision_function, as for
    SVC itself."""
    X, y = make_blobs(n_samples=300, centers=2, cluster_std=3.0, random_state=0)
    y = np.where(y == 1, "yes", "no")
    clf = CVMClassifier(C=1.0, gamma=0.3).fit(X, y)
    svc = SVC(C=1.0, gamma=0.3).fit(X, y)
    for est in (svc, clf):
        _check_layout(est, X, y)
        assert est.dual_coef_.shape == (1, len(est.support_)) and est.intercept_.shape == (1,)
        pos = y[est.support_] == est.classes_[1]
        assert np.all(est.dual_coef_[0][pos] > 0) and np.all(est.dual_coef_[0][~pos] < 0)
        K = rbf_kernel(X, est.support_vectors_, gamma=0.3)
        np.testing.assert_allclose(K @ est.dual_coef_[0] + est.intercept_[0],
                                   est.decision_function(X), rtol=1e-5, atol=1e-7)
    assert clf.machine_n_support_.tolist() == [len(clf.support_)]


def test_one_vs_one_layout_as_svc():
    """Several classes: support vectors shared by machines once, dual_coef_
    (n_classes - 1, n_SV) and intercept_ in LIBSVM's layout and sign, from
    which SVC's formula gives decision_function's ovo columns."""
    X, y = make_blobs(n_samples=800, centers=4, cluster_std=2.5, random_state=1)
    perm = np.array([2, 0, 3, 1])           # labels not in the order the rows meet them
    y = perm[y] * 10
    svc = SVC(C=1.0, gamma=0.2, decision_function_shape="ovo").fit(X, y)
    clf = CVMClassifier(C=1.0, gamma=0.2, decision_function_shape="ovo").fit(X, y)
    for est in (svc, clf):      # the formula is SVC's own
        _check_layout(est, X, y)
        assert est.dual_coef_.shape == (3, len(est.support_))
        assert est.intercept_.shape == (6,)
        K = rbf_kernel(X, est.support_vectors_, gamma=0.2)
        np.testing.assert_allclose(svc_ovo_values(K, est.dual_coef_, est.intercept_,
                                                  est.n_support_),
                                   est.decision_function(X), rtol=1e-5, atol=1e-6)
    # the per-machine view: each machine's own rows, shared rows in each
    assert clf.machine_n_support_.sum() > clf.n_support_.sum()
    assert clf.machine_n_support_.tolist() == [len(m.coef) for m in clf.machines_]


def test_one_vs_rest_layout():
    """multi_class="ovr": dual_coef_ (n_classes, n_SV), row k machine k's
    coefficients; every support row's class is right even where the machines
    only hold it on "the rest" side."""
    X, y = make_blobs(n_samples=600, centers=3, cluster_std=2.5, random_state=4)
    clf = CVMClassifier(C=1.0, gamma=0.2, multi_class="ovr").fit(X, y)
    _check_layout(clf, X, y)
    assert clf.dual_coef_.shape == (3, len(clf.support_)) and clf.intercept_.shape == (3,)
    K = rbf_kernel(X, clf.support_vectors_, gamma=0.2)
    np.testing.assert_allclose(K @ clf.dual_coef_.T + clf.intercept_,
                               clf.decision_function(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(method="bvm"), dict(method="cvm"),
                                dict(train_size=2000), dict(train_size=2000, method="cvm")])
def test_support_indexes_the_training_rows_on_every_route(kw):
    """Sampled (bvm, cvm) and progressive fits (stages on a sample of the
    rows): support_ indexes the rows given, with rows of weight 0 among them."""
    X, y = make_blobs(n_samples=6000, centers=3, cluster_std=3.0, random_state=0)
    w = np.random.default_rng(0).integers(0, 3, 6000).astype(float)
    for sw in (None, w) if kw.get("method") != "bvm" else (None,):
        clf = CVMClassifier(C=1.0, gamma=0.1, eps=1e-2, **kw).fit(X, y, sample_weight=sw)
        _check_layout(clf, X, y)
        assert sw is None or (sw[clf.support_] > 0).all()
    if "train_size" in kw:
        assert clf.history_[-1]["stage_rows"] == 2000


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_layout_survives_save_and_load(tmp_path, multi_class):
    X, y = make_blobs(n_samples=600, centers=3, cluster_std=2.5, random_state=4)
    clf = CVMClassifier(C=1.0, gamma=0.2, multi_class=multi_class, probability=True,
                        decision_function_shape="ovo").fit(X, y)
    back = load_model(save_model(clf, tmp_path / "m"))
    for name in ("support_", "n_support_", "support_vectors_", "dual_coef_", "intercept_",
                 "probA_", "probB_", "machine_n_support_"):
        np.testing.assert_array_equal(getattr(back, name), getattr(clf, name), err_msg=name)
    np.testing.assert_array_equal(back.decision_function(X), clf.decision_function(X))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    import json
    man = json.load(open(tmp_path / "m" / "model.json"))
    assert man["n_support"] == clf.n_support_.tolist()      # what `streamcvm info` can show


def test_platt_sigmoid_in_svcs_sign():
    """probA_, probB_ as SVC's: P(classes_[0]) = 1 / (1 + exp(A f + B)) for
    f = -decision_function (LIBSVM's sign of the two-class machine)."""
    X, y = make_blobs(n_samples=300, centers=2, cluster_std=3.0, random_state=0)
    clf = CVMClassifier(probability=True).fit(X, y)
    f = -clf.decision_function(X)
    p0 = 1.0 / (1.0 + np.exp(clf.probA_[0] * f + clf.probB_[0]))
    np.testing.assert_allclose(p0, clf.predict_proba(X)[:, 0], rtol=1e-9, atol=1e-12)


# -- 3. sample weights -------------------------------------------------------------

def _weighted_data(seed=0, n=400):
    X, y = make_blobs(n_samples=n, centers=3, cluster_std=2.5, random_state=seed)
    w = np.random.default_rng(seed).integers(0, 4, n)       # zeros too
    return X, y, w


def test_auto_solves_weighted_machines_exactly():
    """method="auto" takes sample and class weights and solves small weighted
    machines exactly (SMO with a per-row C): integer weights give the model
    of the rows repeated, to SMO's tolerance."""
    X, y, w = _weighted_data()
    kw = dict(C=1.0, gamma=0.1, decision_function_shape="ovo")
    a = CVMClassifier(**kw).fit(X, y, sample_weight=w)
    assert {h["dispatch"]["path"] for h in a.history_} == {"exact smo"}
    b = CVMClassifier(**kw).fit(X.repeat(w, axis=0), y.repeat(w))
    Da, Db = a.decision_function(X), b.decision_function(X)
    assert np.abs(Da - Db).max() <= 1e-3 * np.abs(Db).max()
    # class weights are per-row C too: class 0 weighted 3 = its rows' sample weight 3
    c = CVMClassifier(**kw, class_weight={0: 3.0}).fit(X, y)
    d = CVMClassifier(**kw).fit(X, y, sample_weight=np.where(y == 0, 3.0, 1.0))
    np.testing.assert_allclose(c.decision_function(X), d.decision_function(X), rtol=1e-12)
    assert {h["dispatch"]["path"] for h in c.history_} == {"exact smo"}


def test_svc_exact_per_row_C_against_a_qp():
    """The exact solver's per-row C, against scipy's QP of the same dual
    (minimise a'Qa on the simplex, Q = yy'(K + 1) + diag(1 / (C w)))."""
    from scipy.optimize import minimize
    from streamcvm.solvers.kernels import Kernel
    from streamcvm.solvers.exact.svc import svc_exact
    X, y = make_blobs(n_samples=60, centers=2, cluster_std=2.5, random_state=5)
    X = X.astype(np.float32)
    t = np.where(y == 1, 1.0, -1.0)
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(t))
    C = 2.0
    Q = np.outer(t, t) * (rbf_kernel(X, X, gamma=0.3) + 1.0) + np.diag(1.0 / (C * w))
    m = len(t)
    ref = minimize(lambda a: a @ Q @ a, np.full(m, 1.0 / m), jac=lambda a: 2.0 * Q @ a,
                   bounds=[(0.0, None)] * m, method="SLSQP", options={"ftol": 1e-15,
                                                                       "maxiter": 1000},
                   constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1.0}]).x
    got = svc_exact(X, t, Kernel("rbf", gamma=0.3), C, tol=1e-6, weight=w)["a"]
    assert abs(got @ Q @ got - ref @ Q @ ref) <= 1e-6 * (ref @ Q @ ref)
    np.testing.assert_allclose(got, ref, atol=1e-4)


@pytest.mark.parametrize("method", ["auto", "cvm"])
def test_zero_weight_drops_the_row(method):
    """A weight of 0 drops the row, as SVC: the model of the other rows (the
    same fit, bit for bit), support_ indexing the rows given."""
    X, y, w = _weighted_data(seed=1)
    w = np.maximum(w, 1)
    w[::7] = 0
    kw = dict(method=method, C=1.0, gamma=0.1, eps=1e-3, decision_function_shape="ovo")
    a = CVMClassifier(**kw).fit(X, y, sample_weight=w)
    keep = w > 0
    b = CVMClassifier(**kw).fit(X[keep], y[keep], sample_weight=w[keep])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not np.isin(a.support_, np.flatnonzero(~keep)).any()
    np.testing.assert_array_equal(a.support_, np.flatnonzero(keep)[b.support_])
    np.testing.assert_array_equal(a.support_vectors_, X[a.support_].astype(np.float32))
    # weights 0 and 1 only: the unweighted fit of the rows kept (bvm takes it too)
    ones = keep.astype(float)
    for m in (method, "bvm"):
        c = CVMClassifier(**dict(kw, method=m)).fit(X, y, sample_weight=ones)
        d = CVMClassifier(**dict(kw, method=m)).fit(X[keep], y[keep])
        np.testing.assert_array_equal(c.decision_function(X), d.decision_function(X))
    with pytest.raises(ValueError, match="sample_weight must be >= 0"):
        CVMClassifier(**kw).fit(X, y, sample_weight=np.where(keep, 1.0, -1.0))
    with pytest.raises(ValueError, match="non-zero|every sample_weight is 0"):
        CVMClassifier(**kw).fit(X, y, sample_weight=np.zeros(len(y)))


def test_zero_weight_in_a_stores_weight_column():
    """A store's weight column: method="auto" leaves rows of weight 0 out of
    its exact machines (the arrays' model); the sampled solvers refuse them
    in one clear message."""
    X, y, w = _weighted_data(seed=2)
    store = as_store(X.astype(np.float32), y.astype(np.float64), weight=w.astype(np.float32))
    kw = dict(C=1.0, gamma=0.1, decision_function_shape="ovo")
    a = CVMClassifier(**kw).fit(store)
    b = CVMClassifier(**kw).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    np.testing.assert_array_equal(a.support_, b.support_)
    with pytest.raises(ValueError, match="sample weight of 0 in the store's weight column"):
        CVMClassifier(method="cvm", **kw).fit(store)


# -- why sklearn's sample-weight equivalence checks still fail -------------------

def _equivalence_data():
    """The data of sklearn's _check_sample_weight_equivalence: 15 rows, 30
    features, 3 classes, integer weights 0-4; the weighted rows shuffled."""
    rng = np.random.RandomState(42)
    X = rng.rand(15, 30)
    y = rng.randint(0, 3, size=15)
    sw = rng.randint(0, 5, size=15)
    Xr, yr = X.repeat(sw, axis=0), y.repeat(sw)
    Xw, yw, sw = shuffle(X, y, sw, random_state=0)
    return X, (Xr, yr), (Xw, yw, sw)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("method", ["auto", "cvm"])
def test_equivalence_check_fails_by_the_chosen_C_and_gamma(method):
    """With C and gamma "auto", the weighted and the repeated rows are
    different data to the search: it counts rows, not weights (gamma's unit
    1 / beta is the rows' mean squared distance; held-out rows are drawn per
    row, and the 9 weighted rows of classes under 5 rows give it none), so
    the two models train at a different (C_, gamma_)."""
    X, (Xr, yr), (Xw, yw, sw) = _equivalence_data()
    a = CVMClassifier(method=method, eps=1e-2).fit(Xr, yr)
    b = CVMClassifier(method=method, eps=1e-2).fit(Xw, yw, sample_weight=sw)
    assert a.selection_["gamma_unit"] != b.selection_["gamma_unit"]
    assert b.selection_["validation_rows"] == 0 < a.selection_["validation_rows"]
    assert (a.C_, a.gamma_) != (b.C_, b.gamma_)


def test_equivalence_at_fixed_C_and_gamma_is_the_solvers_tolerance():
    """At a fixed C and gamma the weighted and repeated problems have one
    optimum; the models differ only by the solvers' tolerance, above the
    check's rtol 1e-7: the exact SMO (method="auto") stops at a relative gap
    of 2e-3, CVM is (1 + eps)-approximate, and its difference shrinks as eps
    does."""
    X, (Xr, yr), (Xw, yw, sw) = _equivalence_data()
    kw = dict(C=1.0, gamma=0.2, decision_function_shape="ovo")

    def gap(**extra):
        a = CVMClassifier(**kw, **extra).fit(Xr, yr).decision_function(X)
        b = CVMClassifier(**kw, **extra).fit(Xw, yw, sample_weight=sw).decision_function(X)
        return np.abs(a - b).max() / np.abs(a).max()
    exact = gap()
    assert 1e-7 < exact < 2e-3, exact           # 3.2e-4 measured
    coarse = gap(method="cvm", eps=1e-2, full_pass=True)
    fine = gap(method="cvm", eps=1e-6, full_pass=True)
    assert coarse > 1e-3 and fine < 1e-5, (coarse, fine)    # 3.1e-2 and 3.9e-6 measured
