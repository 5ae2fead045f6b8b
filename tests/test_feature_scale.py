"""Features at any scale (streamcvm.estimators.feature_range): rows of norm
~1e20 or ~1e-20, whose float32 kernel values would overflow or vanish, give
the model of the unscaled rows; a gamma no model can come from is refused in
one line before any work; a model whose decision values are not finite is
never saved. Without the range handling the scaled fits below predict NaN
or one class, gamma=1e300 trains (NaN on the kernel's diagonal) and such a
model is written with exit status 0."""
import os

import numpy as np
import pytest

from streamcvm import CVMClassifier, CVMOneClass, CVMRegressor, load_model, save_model
from streamcvm.data import synthetic
from streamcvm.data.scaling import SAFE_SQ_NORM, Scaler, range_scale
from streamcvm.data.writer import StoreWriter
from streamcvm.solvers.kernels import estimate_beta

from conftest import inproc, one_line_error


def _gauss(n_train=1500, n_test=500, d=6):
    Xtr, ytr = synthetic.gaussian_block(0, n_train, d=d)
    Xte, yte = synthetic.gaussian_block(1, n_test, d=d)
    return Xtr.astype(np.float64), ytr, Xte.astype(np.float64), yte


def _f32(X, s):
    """Rows times s as a user's data would be: in float64, then float32."""
    return (X * s).astype(np.float32)


def _store(path, X, y):
    w = StoreWriter(str(path), X.shape[1], chunk_rows=400)
    w.append(X, y)
    w.close()
    return str(path)


@pytest.fixture(scope="module")
def data():
    Xtr, ytr, Xte, yte = _gauss()
    G = 1.0 / estimate_beta(Xtr.astype(np.float32))
    ref = CVMClassifier(C=1.0, gamma=G, method="bvm").fit(_f32(Xtr, 1), ytr)
    return Xtr, ytr, Xte, yte, G, ref.predict(_f32(Xte, 1)), ref


def test_range_scale_is_one_for_ordinary_rows_and_a_power_of_two_beyond():
    lo, hi = SAFE_SQ_NORM
    for v in (0.0, lo, 1e-12, 1.0, 7e8 ** 2, hi):
        assert range_scale(v) == 1.0
    for v in (1e41, 1e-39, 3.4e38, 1e-44):
        s = range_scale(v)
        assert s != 1.0 and np.frexp(s)[0] == 0.5       # a power of two
        assert 0.5 <= v * s * s <= 2.0


def test_the_uniform_scaler_is_exact():
    x = np.array([[1e20, -3.3e19, 1.5e-20, 7e-30, 0.0, 1.2345678e10]], np.float32)
    sc = Scaler.uniform(x.shape[1], range_scale(1e40))
    s = 1.0 / sc.scale[0]
    np.testing.assert_array_equal(sc.transform(x), np.multiply(x, np.float32(s)))
    normal = np.abs(x * s) >= np.finfo(np.float32).tiny        # 1.5e-20 x 2^-66 is not
    np.testing.assert_array_equal((sc.transform(x).astype(np.float64) / s)[normal],
                                  x.astype(np.float64)[normal])


def test_ordinary_rows_are_not_rescaled(data):
    """The same fit as ever: no scaler_, gamma as given."""
    ref = data[-1]
    assert ref.scaler_ is None and ref.gamma_ == data[4]


@pytest.mark.parametrize("s", [1e20, 1e-20])
def test_scaled_rows_give_the_unscaled_labels_in_memory(data, s):
    Xtr, ytr, Xte, yte, G, labels, _ = data
    clf = CVMClassifier(C=1.0, gamma=G / s ** 2, method="bvm").fit(_f32(Xtr, s), ytr)
    p, dec = clf.predict_with_decision(_f32(Xte, s))
    assert np.all(np.isfinite(dec))
    np.testing.assert_array_equal(p, labels)
    f = clf.scaler_.scale                               # one power of two for every feature
    assert clf.scaler_.offset is None and np.all(f == f[0]) and np.frexp(f[0])[0] == 0.5


@pytest.mark.parametrize("s", [1e20, 1e-20])
def test_scaled_rows_with_the_default_classifier(data, s):
    """Whatever C and gamma the classifier's defaults choose."""
    Xtr, ytr, Xte = data[0][:600], data[1][:600], data[2]
    want = CVMClassifier().fit(_f32(Xtr, 1), ytr).predict(_f32(Xte, 1))
    clf = CVMClassifier().fit(_f32(Xtr, s), ytr)
    p, dec = clf.predict_with_decision(_f32(Xte, s))
    assert np.all(np.isfinite(dec))
    assert np.mean(p == want) >= 0.99


def test_a_power_of_two_scale_gives_the_same_model_bit_for_bit(data):
    Xtr, ytr, Xte, yte, G, _, ref = data
    s = 2.0 ** 70
    clf = CVMClassifier(C=1.0, gamma=G / s ** 2, method="bvm").fit(_f32(Xtr, s), ytr)
    np.testing.assert_array_equal(clf.decision_function(_f32(Xte, s)),
                                  ref.decision_function(_f32(Xte, 1)))


@pytest.mark.parametrize("s", [1e20, 1e-20])
def test_scaled_rows_through_a_store_and_a_saved_model(data, s, tmp_path):
    Xtr, ytr, Xte, yte, G, labels, _ = data
    tr = _store(tmp_path / "train.zarr", _f32(Xtr, s), ytr)
    te = _store(tmp_path / "test.zarr", _f32(Xte, s), yte)
    clf = CVMClassifier(C=1.0, gamma=G / s ** 2, method="bvm").fit(tr)
    np.testing.assert_array_equal(clf.predict(te), labels)
    save_model(clf, tmp_path / "m")
    back = load_model(tmp_path / "m")
    np.testing.assert_array_equal(back.predict(_f32(Xte, s)), labels)
    np.testing.assert_array_equal(back.predict(te), labels)


@pytest.mark.parametrize("s", [1e20, 1e-20])
def test_one_class_and_regression_at_extreme_scales(s):
    Xtr, _, Xte, _ = _gauss(1000, 400)
    want = CVMOneClass().fit(_f32(Xtr, 1)).predict(_f32(Xte, 1))
    got = CVMOneClass().fit(_f32(Xtr, s)).predict(_f32(Xte, s))
    assert np.mean(got == want) >= 0.99
    X, y = synthetic.friedman1_block(0, 1000)
    Xt, yt = synthetic.friedman1_block(1, 300)
    X, Xt = X.astype(np.float64), Xt.astype(np.float64)
    f1 = CVMRegressor().fit(_f32(X, 1), y).predict(_f32(Xt, 1))
    fs = CVMRegressor().fit(_f32(X, s), y).predict(_f32(Xt, s))
    assert np.all(np.isfinite(fs))
    rmse = lambda f: np.sqrt(np.mean((f - yt) ** 2))
    assert rmse(fs) <= 1.1 * rmse(f1)
    exact = CVMRegressor().fit(_f32(X, 2.0 ** -70), y).predict(_f32(Xt, 2.0 ** -70))
    np.testing.assert_array_equal(exact, f1)


@pytest.mark.parametrize("make", [
    lambda g: CVMClassifier(C=1.0, gamma=g, method="bvm"),
    lambda g: CVMOneClass(gamma=g),
    lambda g: CVMRegressor(gamma=g),
    lambda g: CVMClassifier(C=1.0, gamma=g, kernel="laplacian", method="cvm"),
])
@pytest.mark.parametrize("gamma, why", [(1e300, "too large"), (1e-300, "too small")])
def test_a_gamma_no_model_comes_from_is_refused_in_one_line(make, gamma, why):
    X, y, _, _ = _gauss(800, 10)
    with pytest.raises(ValueError) as e:
        make(gamma).fit(_f32(X, 1), y)
    msg = str(e.value)
    assert "\n" not in msg and f"gamma={gamma:g} is {why} for these features" in msg


def test_a_gamma_in_the_raw_units_keeps_its_meaning():
    """gamma=0.5 is meaningful on unit rows, not on the same rows times 1e20."""
    X, y, _, _ = _gauss(800, 10)
    CVMClassifier(C=1.0, gamma=0.5, method="bvm").fit(_f32(X, 1), y)
    with pytest.raises(ValueError, match="gamma=0.5 is too large"):
        CVMClassifier(C=1.0, gamma=0.5, method="bvm").fit(_f32(X, 1e20), y)


def test_the_linear_kernel_refuses_rows_it_cannot_rescale():
    X, y, _, _ = _gauss(800, 10)
    with pytest.raises(ValueError, match="linear model changes with the features' scale"):
        CVMClassifier(C=1.0, kernel="linear", method="cvm").fit(_f32(X, 1e20), y)
    CVMClassifier(C=1.0, kernel="linear", method="cvm", scale=True).fit(_f32(X, 1e20), y)


def test_cli_scaled_store_train_predict_evaluate(data, tmp_path):
    Xtr, ytr, Xte, yte, G, labels, _ = data
    tr = _store(tmp_path / "train.zarr", _f32(Xtr, 1e20), ytr)
    te = _store(tmp_path / "test.zarr", _f32(Xte, 1e20), yte)
    r = inproc("train", tr, "-o", tmp_path / "m", "-q", "--method", "bvm", "-c", "1",
               "-g", repr(G / 1e40))
    assert r.returncode == 0, r.stderr
    r = inproc("predict", te, tmp_path / "m", "-o", tmp_path / "p.txt")
    assert r.returncode == 0, r.stderr
    got = np.loadtxt(tmp_path / "p.txt")
    np.testing.assert_array_equal(got, labels)
    r = inproc("evaluate", te, tmp_path / "m")
    assert r.returncode == 0 and "nan" not in r.stdout.lower(), r.stdout + r.stderr


def test_cli_refuses_gamma_1e300_and_writes_no_model(data, tmp_path):
    Xtr, ytr = data[0], data[1]
    tr = _store(tmp_path / "train.zarr", _f32(Xtr, 1), ytr)
    r = inproc("train", tr, "-o", tmp_path / "m", "-q", "--method", "bvm", "-c", "1",
               "-g", "1e300")
    one_line_error(r, "train", r"gamma=1e\+300 is too large for these features")
    assert not os.path.exists(tmp_path / "m")


def _nan_model():
    X, y, _, _ = _gauss(600, 10)
    clf = CVMClassifier(C=1.0, gamma=0.5, method="bvm").fit(_f32(X, 1), y)
    clf.machines_[0].coef[0] = np.nan
    return clf


def test_a_model_with_nan_decision_values_is_not_saved(tmp_path):
    with pytest.raises(ValueError, match="decision values are not finite|coefficients are "
                                         "not finite") as e:
        save_model(_nan_model(), tmp_path / "m")
    assert "\n" not in str(e.value) and "not saved" in str(e.value)
    assert not os.path.exists(tmp_path / "m")


def test_cli_train_never_writes_a_model_that_predicts_nan(tmp_path, monkeypatch):
    """Whatever made the fit's values NaN: exit 1, one line, no model folder."""
    X, y, _, _ = _gauss(600, 10)
    tr = _store(tmp_path / "train.zarr", _f32(X, 1), y)
    fit = CVMOneClass.fit

    def nan_fit(self, *a, **k):
        fit(self, *a, **k)
        self.machine_.intercept = np.nan
        return self
    monkeypatch.setattr(CVMOneClass, "fit", nan_fit)
    r = inproc("train", tr, "-o", tmp_path / "m", "--task", "one-class", "-q")
    one_line_error(r, "train", "not usable: .*not saved")
    assert not os.path.exists(tmp_path / "m")


def test_scale_true_and_a_range_scale_make_one_transform(data, monkeypatch):
    """scale=True's standardisation and a power of two, composed in one
    scaler_: the same model as the standardisation alone."""
    from streamcvm.estimators import feature_range
    Xtr, ytr, Xte = data[0], data[1], data[2]
    ref = CVMClassifier(C=1.0, gamma=0.3, method="bvm", scale=True).fit(_f32(Xtr, 1), ytr)
    monkeypatch.setattr(feature_range, "range_scale", lambda v: 2.0 ** -3)
    clf = CVMClassifier(C=1.0, gamma=0.3, method="bvm", scale=True).fit(_f32(Xtr, 1), ytr)
    assert clf.scaler_.offset is not None
    np.testing.assert_array_equal(clf.scaler_.scale, ref.scaler_.scale * 8)
    assert clf.gamma_ == 0.3 * 64
    np.testing.assert_array_equal(clf.predict(_f32(Xte, 1)), ref.predict(_f32(Xte, 1)))


def test_fit_refuses_a_model_with_non_finite_decision_values(monkeypatch):
    """The fit's last step checks the model: machines whose coefficients
    came out NaN give a one-line ValueError, not a model that predicts NaN."""
    import streamcvm.problems.classification as cl
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    real = cl._fit_exact

    def broken(*a, **k):
        m = real(*a, **k)
        m.coef = m.coef * np.nan
        return m
    monkeypatch.setattr(cl, "_fit_exact", broken)
    with pytest.raises(ValueError, match="not usable") as e:
        CVMClassifier(C=1.0, gamma=0.5, compact=False).fit(X, y)
    assert "\n" not in str(e.value)
