"""The Python API with stores all the way: predict,
decision_function and score on a store, its path or a dask array, streamed;
fit on a dask array block by block; the top-level helpers."""
import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier, CVMOneClass, CVMRegressor
from streamcvm.data import synthetic
from streamcvm.data.store import DaskStore, DiskStore


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    train, test = str(d / "train.zarr"), str(d / "test.zarr")
    synthetic.write_store(train, "gaussian", 3000, seed=0, chunk_rows=700)
    synthetic.write_store(test, "gaussian", 2500, seed=0, chunk_rows=600, first_block=10**6)
    reg = str(d / "reg.zarr")
    synthetic.write_store(reg, "friedman1", 2500, seed=0, chunk_rows=600, first_block=10**6)
    return train, test, reg


def _arrays(path):
    s = DiskStore(path)
    c = s.rows(0, s.n)
    return c.X, c.y


def test_top_level_helpers_and_dir(tmp_path):
    names = dir(streamcvm)
    for n in ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker",
              "load_model", "save_model", "ingest", "open_store"):
        assert n in names
        assert getattr(streamcvm, n) is not None
    src = tmp_path / "d.csv"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = (X[:, 0] > 0).astype(int)
    np.savetxt(src, np.column_stack([y, X]), delimiter=",", fmt="%.6f")
    res = streamcvm.ingest([str(src)], str(tmp_path / "d.zarr"), label_col=0, header=False)
    assert res["n"] == 400 and res["d"] == 3
    clf = streamcvm.CVMClassifier(eps=1e-2).fit(str(tmp_path / "d.zarr"))
    back = streamcvm.load_model(streamcvm.save_model(clf, tmp_path / "m"))
    np.testing.assert_array_equal(back.predict(X.astype(np.float32)),
                                  clf.predict(X.astype(np.float32)))


USER_MODULES = ("ingest", "data", "models", "estimators", "solvers", "problems", "predict",
                "apps", "cli", "store", "surface")


def test_a_users_own_modules_do_not_shadow_streamcvms(tmp_path):
    """streamcvm installs one top-level package: a user's ingest.py, data.py,
    models.py ... in the working folder (first on sys.path) are not what
    streamcvm imports, through every entry point (ingest, the estimators, a
    fit, a model saved and loaded, the surface module, the command line)."""
    import subprocess
    import sys
    for name in USER_MODULES:
        (tmp_path / f"{name}.py").write_text(f"raise ImportError('the user {name}.py was "
                                             f"imported')\n")
    code = ("import numpy as np, streamcvm, streamcvm.ingest as m; "
            "from streamcvm.ingest import StoreWriter; "
            "assert callable(streamcvm.ingest) and m.ingest is streamcvm.ingest.ingest; "
            "from streamcvm import CVMClassifier, MMDATransformer, load_model, save_model, "
            "surface; import streamcvm.cli, streamcvm.ingest.pipeline; "
            "X = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32); "
            "y = (X[:, 0] > 0).astype(int); clf = CVMClassifier(eps=1e-2).fit(X, y); "
            "back = load_model(save_model(clf, 'm')); assert (back.predict(X) == "
            "clf.predict(X)).all(); assert callable(surface.reconstruct); "
            "assert 'train' in streamcvm.cli.build_parser().format_help(); "
            "print(m.__file__)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert str(tmp_path) not in r.stdout
    # the guard: those files are what a bare import of their names finds there
    r = subprocess.run([sys.executable, "-c", "import ingest"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert "the user ingest.py was imported" in r.stderr


@pytest.mark.parametrize("kind", ["store", "path", "dask"])
def test_classifier_predicts_and_scores_a_store_as_its_arrays(stores, kind):
    train, test, _ = stores
    clf = CVMClassifier(eps=1e-2).fit(train)
    X, y = _arrays(test)
    if kind == "dask":
        da = pytest.importorskip("dask.array")
        src = da.from_array(X, chunks=(500, X.shape[1]))
    else:
        src = DiskStore(test) if kind == "store" else test
    np.testing.assert_array_equal(clf.predict(src), clf.predict(X))
    ref = clf.decision_function(X)        # float32 kernel blocks of other shapes
    np.testing.assert_allclose(clf.decision_function(src), ref, rtol=1e-5,
                               atol=1e-5 * np.abs(ref).max())
    if kind != "dask":
        assert clf.score(src) == pytest.approx(clf.score(X, y), abs=1e-12)
        with pytest.raises(ValueError, match="from the store"):
            clf.score(src, y)


def test_score_on_a_store_without_the_models_classes_is_refused(stores, tmp_path):
    train, _, reg = stores
    clf = CVMClassifier(eps=1e-2).fit(train)
    X, y = _arrays(train)
    other = str(tmp_path / "other.zarr")
    from streamcvm.data.writer import StoreWriter
    w = StoreWriter(other, X.shape[1])
    w.append(X, y + 10.0)
    w.close()
    with pytest.raises(ValueError, match="none of its labels"):
        clf.score(other)
    cont = str(tmp_path / "cont.zarr")
    w = StoreWriter(cont, X.shape[1])
    w.append(X, np.random.default_rng(0).normal(size=len(y)))     # a continuous y
    w.close()
    with pytest.raises(ValueError, match="regression target"):
        clf.score(cont)


def test_regressor_one_class_and_ranker_on_stores(stores):
    _, test, reg = stores
    X, y = _arrays(reg)
    r = CVMRegressor(mu=0.5, gamma=0.5).fit(X[:1500], y[:1500])
    np.testing.assert_allclose(r.predict(reg), r.predict(X), rtol=1e-5)
    assert r.score(reg) == pytest.approx(r.score(X, y), abs=1e-6)
    oc = CVMOneClass(eps=1e-2).fit(test)
    Xt, _ = _arrays(test)
    ref = oc.decision_function(Xt)
    np.testing.assert_allclose(oc.decision_function(test), ref, rtol=1e-5,
                               atol=1e-5 * np.abs(ref).max())
    assert np.mean(oc.predict(test) == oc.predict(Xt)) > 0.999
    np.testing.assert_allclose(oc.score_samples(test), oc.score_samples(Xt), rtol=1e-5,
                               atol=1e-5 * np.abs(ref).max())


def test_fit_on_a_dask_array_streams_its_blocks(stores, monkeypatch):
    da = pytest.importorskip("dask.array")
    train, test, _ = stores
    X, y = _arrays(train)
    Xd = da.from_array(X, chunks=(700, X.shape[1]))
    yd = da.from_array(y, chunks=700)
    reads = []
    orig = DaskStore._read

    def read(self, a, b):
        reads.append(b - a)
        return orig(self, a, b)
    monkeypatch.setattr(DaskStore, "_read", read)
    a = CVMClassifier(eps=1e-2).fit(Xd, yd)
    assert reads and max(reads) <= 1000         # block by block, never the whole array
    b = CVMClassifier(eps=1e-2).fit(streamcvm.as_store(X, y, chunk_rows=a_rows(Xd)))
    Xt, _ = _arrays(test)
    np.testing.assert_array_equal(a.predict(Xt), b.predict(Xt))


def a_rows(Xd):
    return DaskStore(Xd).chunk_rows


# -- info, evaluate --json, AUC in bounded memory, scaling --

def test_auc_sketch_matches_the_exact_auc():
    from sklearn.metrics import roc_auc_score
    from streamcvm.predict.metrics import AUCSketch
    rng = np.random.default_rng(0)
    y = rng.random(200000) < 0.3
    s = rng.normal(0, 1, len(y)) + 1.2 * y - 0.5          # scores of both signs
    sk = AUCSketch()
    for a in range(0, len(y), 30000):                       # streamed, in pieces
        sk.add(s[a:a + 30000], y[a:a + 30000])
    assert sk.result() == pytest.approx(roc_auc_score(y, s), abs=2e-4)
    assert sk.pos.nbytes + sk.neg.nbytes < 20e6             # whatever the rows
    ties = AUCSketch()
    ties.add(np.array([1.0, 1.0, 2.0, 0.0]), np.array([True, False, True, False]))
    assert ties.result() == pytest.approx(roc_auc_score([1, 0, 1, 0], [1, 1, 2, 0]))


def _cli(args, capsys):
    from streamcvm.cli import main
    assert main(args) == 0
    return capsys.readouterr().out


def test_info_on_a_model_and_evaluate_json(stores, tmp_path, capsys):
    import json
    train, test, _ = stores
    model = str(tmp_path / "m")
    _cli(["train", train, "-o", model, "-q", "-e", "1e-2"], capsys)
    out = _cli(["info", model], capsys)
    for word in ("estimator  CVMClassifier", "kernel     rbf (gamma", "classes    2",
                 "machines   1:", "eps        reached", "training ", "fingerprint"):
        assert word in out, out
    with open(f"{model}/model.json") as f:
        man = json.load(f)
    assert man["training"]["rows"] == 3000 and man["training"]["store"].endswith("train.zarr")
    assert man["training"]["store_fingerprint"] == DiskStore(train).fingerprint
    got = json.loads(_cli(["evaluate", test, model, "--json"], capsys))
    text = _cli(["evaluate", test, model], capsys)
    assert got["rows"] == 2500 and f"accuracy    {got['accuracy']:.4f}" in text
    assert f"AUC         {got['auc']:.4f}" in text
    clf = streamcvm.load_model(model)
    X, y = _arrays(test)
    assert got["accuracy"] == pytest.approx(np.mean(clf.predict(X) == y), abs=1e-12)
    from sklearn.metrics import roc_auc_score
    assert got["auc"] == pytest.approx(roc_auc_score(y == clf.classes_[1],
                                                     clf.decision_function(X)), abs=1e-3)


def test_scale_standardises_from_one_pass_and_predict_applies_it(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0)
    raw = X * np.array([1e6, 1.0, 1e-3]) + np.array([5e6, 0.0, 3.0])   # wild ranges
    raw32 = raw.astype(np.float32)
    clf = CVMClassifier(eps=1e-2, scale=True).fit(streamcvm.as_store(raw32, y, chunk_rows=400))
    x64 = raw32.astype(np.float64)
    mean, sd = x64.mean(axis=0), x64.std(axis=0)
    np.testing.assert_allclose(clf.scaler_.offset, mean, rtol=1e-9)
    np.testing.assert_allclose(clf.scaler_.scale, sd, rtol=1e-6)
    # the model of the standardised data, by hand
    manual = CVMClassifier(eps=1e-2).fit(streamcvm.as_store(
        ((x64 - clf.scaler_.offset) / clf.scaler_.scale).astype(np.float32), y, chunk_rows=400))
    np.testing.assert_array_equal(clf.machines_[0].sv_ids, manual.machines_[0].sv_ids)
    np.testing.assert_allclose(clf.decision_function(raw32), manual.decision_function(
        ((x64 - clf.scaler_.offset) / clf.scaler_.scale).astype(np.float32)), rtol=1e-6)
    assert np.mean(clf.predict(raw32) == y) > 0.95
    unscaled = CVMClassifier(eps=1e-2).fit(raw32, y)        # sees only the 1e6 column
    assert np.mean(unscaled.predict(raw32) == y) < np.mean(clf.predict(raw32) == y) - 0.1
    back = streamcvm.load_model(streamcvm.save_model(clf, tmp_path / "m"))
    np.testing.assert_array_equal(back.predict(raw32), clf.predict(raw32))


def test_scale_on_sparse_rows_keeps_them_sparse():
    import scipy.sparse as sp
    from streamcvm.data.scaling import Scaler
    rng = np.random.default_rng(1)
    X = sp.random(800, 50, density=0.1, random_state=1, format="csr", dtype=np.float32)
    X = sp.csr_matrix(X.multiply(np.logspace(0, 4, 50)[None, :]), dtype=np.float32)
    s = Scaler.fit(streamcvm.as_store(X, np.ones(800), chunk_rows=300))
    assert s.offset is None
    np.testing.assert_allclose(s.scale, np.asarray(abs(X).max(axis=0).todense()).ravel(),
                               rtol=1e-6)
    Z = s.transform(X)
    assert sp.issparse(Z) and Z.nnz == X.nnz and abs(Z).max() <= 1.0 + 1e-6
    y = np.where(rng.random(800) < 0.5, 1.0, -1.0)
    clf = CVMClassifier(eps=1e-2, scale=True, method="cvm").fit(X, y)
    assert clf.predict(X[:10]).shape == (10,)


def test_cli_scale_is_saved_and_applied_by_predict_and_evaluate(tmp_path, capsys):
    import json
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 3)).astype(np.float32)
    y = np.where(X[:, 0] - X[:, 1] > 0, 1, 0)
    Xr = X * np.array([1e5, 1.0, 1.0], np.float32)
    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([y, Xr]), delimiter=",", fmt="%.6g")
    st = str(tmp_path / "d.zarr")
    streamcvm.ingest([str(src)], st, label_col=0, header=False)
    _cli(["train", st, "-o", str(tmp_path / "s"), "-q", "-e", "1e-2", "--scale"], capsys)
    _cli(["train", st, "-o", str(tmp_path / "r"), "-q", "-e", "1e-2"], capsys)
    acc = {m: json.loads(_cli(["evaluate", st, str(tmp_path / m), "--json"], capsys))["accuracy"]
           for m in ("s", "r")}
    assert acc["s"] > 0.95 and acc["s"] > acc["r"] + 0.1
    assert "scaling    standardised" in _cli(["info", str(tmp_path / "s")], capsys)
