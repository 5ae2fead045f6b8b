"""scikit-learn habits the estimators keep: a store's labels are its own,
float64 features keep their variation through the float32 kernels, float32
arrays are not copied."""
import warnings

import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier, CVMRanker, CVMRegressor, MMDATransformer
from streamcvm.data import synthetic


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("s") / "g.zarr")
    synthetic.write_store(path, "gaussian", 600, seed=1, chunk_rows=300)
    return path


@pytest.mark.parametrize("make", [lambda: CVMClassifier(C=1.0, gamma=1.0),
                                  lambda: CVMRegressor(),
                                  lambda: MMDATransformer()])
def test_labels_given_with_a_store_are_refused(store_path, make):
    """fit(store, y) would train on the store's own labels and drop y: refused."""
    y_other = np.ones(600)
    for X in (store_path, streamcvm.open_store(store_path)):
        with pytest.raises(ValueError, match="y passed with a store"):
            make().fit(X, y_other)


def test_ranker_refuses_labels_or_qid_with_a_store(store_path):
    with pytest.raises(ValueError, match="qid passed with a store"):
        CVMRanker().fit(store_path, qid=np.zeros(600))


def test_ranker_without_qid_ranks_all_rows_as_one_query():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    rel = (X[:, 0] > 0).astype(float) + (X[:, 0] > 1)
    r = CVMRanker().fit(X, rel)
    one = CVMRanker().fit(X, rel, qid=np.zeros(120))
    np.testing.assert_array_equal(r.predict(X), one.predict(X))
    assert r.score(X, rel) == one.score(X, rel, np.zeros(120)) > 0.9
    with pytest.raises(ValueError, match="nothing to rank"):
        CVMRanker().fit(X, np.ones(120))


def _timestamps(n=2000, seed=0):
    """A Unix-timestamp feature (~1.7e9, float32 step 128 s) that decides the
    class, and a noise feature."""
    rng = np.random.default_rng(seed)
    t = 1.7e9 + rng.integers(0, 400, n).astype(np.float64)
    X = np.c_[t, rng.normal(size=n)]
    return X, (t - 1.7e9 > 200).astype(int)


def test_float32_keeps_a_timestamp_feature():
    """Cast to float32, 400 distinct seconds become a handful of values and
    the class is lost (accuracy about 0.5); the column is centred in float64
    first, and predict centres raw rows the same way."""
    X, y = _timestamps()
    assert len(np.unique(X[:, 0].astype(np.float32))) < 10
    m = CVMClassifier(C=1.0, gamma="auto").fit(X[:1500], y[:1500])
    assert m.score(X[1500:], y[1500:]) > 0.95
    # the same model as on rows centred by hand
    c = (X[:1500, 0].min() + X[:1500, 0].max()) / 2
    ref = CVMClassifier(C=1.0, gamma="auto").fit(X[:1500] - [c, 0], y[:1500])
    np.testing.assert_allclose(m.decision_function(X[1500:]),
                               ref.decision_function(X[1500:] - [c, 0]), rtol=1e-5,
                               atol=1e-6)


def test_float32_loss_is_named_where_a_shift_changes_the_kernel():
    X, y = _timestamps(600)
    with pytest.warns(UserWarning, match=r"float32 .* loses the variation of 1 feature"):
        CVMClassifier(kernel="linear", method="cvm", C=1.0, gamma=1.0).fit(X, y)


def test_ordinary_float64_rows_fit_as_before():
    """No column loses anything: no warning, no centring, the float32 model."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = CVMClassifier(C=1.0, gamma=1.0).fit(X, y)
    b = CVMClassifier(C=1.0, gamma=1.0).fit(X.astype(np.float32), y)
    assert a.scaler_ is None
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


def test_as_store_does_not_copy_float32():
    X = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    assert np.shares_memory(streamcvm.as_store(X, np.zeros(50)).X, X)
    assert not np.shares_memory(streamcvm.as_store(X.astype(np.float64)).X, X)


def test_predict_on_a_store_of_fewer_features_reads_the_rest_as_zero(tmp_path):
    """svm-predict's rule in the Python API too: a test store whose largest
    feature index is below the model's is read with zeros past it."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    X[:, 4] = 0.0
    y = (X[:, 0] > 0).astype(int)
    m = CVMClassifier(C=1.0, gamma=1.0).fit(X, y)
    narrow = streamcvm.as_store(X[:, :4], y.astype(float))
    np.testing.assert_array_equal(m.predict(narrow), m.predict(X))


def test_info_counts_a_shared_support_row_once(tmp_path):
    from sklearn.datasets import make_blobs
    from streamcvm.cli.info import describe_model
    from streamcvm.estimators.model import save_model
    X, y = make_blobs(n_samples=300, centers=3, cluster_std=3.0, random_state=0)
    m = CVMClassifier(C=1.0, gamma=1.0).fit(X, y)
    save_model(m, tmp_path / "m")
    text = describe_model(str(tmp_path / "m"))
    assert m.n_support_.sum() < m.machine_n_support_.sum()
    assert (f"{m.n_support_.sum():,} support vectors ({m.machine_n_support_.sum():,} over "
            f"the machines)") in text


def test_info_says_when_no_search_ran(tmp_path):
    """Too few rows to hold any out: the default point, and info says so."""
    from streamcvm.cli.info import describe_model
    from streamcvm.estimators.model import save_model
    X = np.r_[np.zeros((5, 2)), np.ones((4, 2))] + np.arange(9)[:, None] * 0.01
    y = np.r_[np.zeros(5), np.ones(4)]
    m = CVMClassifier().fit(X, y)
    save_model(m, tmp_path / "m")
    assert "search     none (too few rows" in describe_model(str(tmp_path / "m"))


def test_info_options_lists_every_setting_and_a_models_changed_ones(tmp_path, capsys):
    """``streamcvm info --options``: every field of Options and SurfaceOptions
    with its default; with a MODEL, the value it was trained with beside the
    default, and ``info MODEL`` names the changed options; a path that is no
    model folder is one line and a non-zero exit."""
    import dataclasses
    from streamcvm.cli import main
    from streamcvm.estimators.model import save_model
    from streamcvm.options import Options, SurfaceOptions
    assert main(["info", "--options"]) == 0
    text = capsys.readouterr().out
    for k in (Options, SurfaceOptions):
        for f in dataclasses.fields(k):
            assert f"    {f.name} = " in text, f.name
    assert "   (default " not in text        # the defaults: nothing differs
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    m = CVMClassifier(C=1.0, gamma=1.0, options={"svc_tol": 1e-3}).fit(X, y)
    save_model(m, tmp_path / "m")
    assert main(["info", "--options", str(tmp_path / "m")]) == 0
    text = capsys.readouterr().out
    assert "    svc_tol = 0.001   (default 0.002)" in text
    assert "pool_chunks = 8  [" in text     # an option it did not change: the default
    assert main(["info", str(tmp_path / "m")]) == 0
    assert "options    svc_tol=0.001 (the rest the defaults)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--options takes a model folder"):
        main(["info", "--options", str(tmp_path)])
