"""Models saved without pickle and reloaded; train / predict / evaluate from the CLI."""
import json
import os

import numpy as np
import pytest
import scipy.sparse as sp

import streamcvm
from streamcvm import CVMClassifier, CVMOneClass
from streamcvm.data import synthetic
from streamcvm.estimators.model import ModelError, load_model, save_model
from streamcvm.data.outputs import OutputError


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("stores")
    train, test = str(d / "train.zarr"), str(d / "test.zarr")
    synthetic.write_store(train, "gaussian", 4000, seed=0, chunk_rows=1000)
    synthetic.write_store(test, "gaussian", 2000, seed=0, chunk_rows=1000, first_block=10**6)
    return train, test


@pytest.mark.parametrize("sparse", [False, True])
def test_saved_and_reloaded_model_predicts_identically(tmp_path, sparse):
    X, y = synthetic.gaussian_block(0, 1500, d=8, n_classes=3)
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 0.3, X, 0))
    est = CVMClassifier(eps=1e-3).fit(X, y)
    path = save_model(est, tmp_path / "m")
    assert not any(n.startswith(".m.writing") for n in os.listdir(tmp_path))
    back = load_model(path)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
    np.testing.assert_array_equal(back.classes_, est.classes_)
    # no pickle anywhere: every array loads with allow_pickle=False
    for name in os.listdir(path):
        if name.endswith(".npy"):
            np.load(os.path.join(path, name), allow_pickle=False)


def test_a_model_saved_to_an_fsspec_url_loads_back(tmp_path):
    """save_model / load_model on URLs (memory://, file://): the same arrays
    and predictions; a corrupted array is refused by its checksum."""
    fsspec = pytest.importorskip("fsspec")
    X, y = synthetic.gaussian_block(0, 800, d=5, n_classes=2)
    est = CVMClassifier(eps=1e-2).fit(X, y)
    ref = est.decision_function(X)
    for url in ("memory://streamcvm-test/m", (tmp_path / "u").as_uri()):
        assert save_model(est, url) == url
        back = load_model(url)
        np.testing.assert_array_equal(back.decision_function(X), ref)
    fs, root = fsspec.core.url_to_fs("memory://streamcvm-test/m")
    assert fs.exists(root + "/model.json")
    fs.pipe_file("memory://streamcvm-test/data.bin", b"user data")
    with pytest.raises(OutputError, match="already exists"):
        save_model(est, "memory://streamcvm-test/data.bin")
    assert fs.cat_file("memory://streamcvm-test/data.bin") == b"user data"
    fs.pipe_file(root + "/m0_coef.npy", b"garbage")
    with pytest.raises(ModelError, match="checksum"):
        load_model("memory://streamcvm-test/m")
    fs.rm(root, recursive=True)


def test_one_class_model_roundtrip(tmp_path):
    X, _ = synthetic.gaussian_block(0, 1000, d=5)
    est = CVMOneClass(eps=1e-3, C=0.1).fit(X)
    back = load_model(save_model(est, tmp_path / "oc"))
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
    assert back.offset_ == est.offset_


def test_corrupt_or_newer_models_are_refused(tmp_path):
    X, y = synthetic.gaussian_block(0, 500, d=4)
    path = save_model(CVMClassifier(eps=1e-2).fit(X, y), tmp_path / "m")
    with open(os.path.join(path, "m0_coef.npy"), "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x01\x02\x03")
    with pytest.raises(ModelError, match="checksum"):
        load_model(path)
    path2 = save_model(CVMClassifier(eps=1e-2).fit(X, y), tmp_path / "m2")
    man = json.load(open(os.path.join(path2, "model.json")))
    man["streamcvm_model_format"] = 99
    json.dump(man, open(os.path.join(path2, "model.json"), "w"))
    with pytest.raises(ModelError, match="format 99"):
        load_model(path2)
    with pytest.raises(ModelError, match="not a streamcvm model"):
        load_model(tmp_path)


def test_cli_train_predict_evaluate(stores, tmp_path, cli):
    train, test = stores
    model = str(tmp_path / "model")
    r = cli("train", train, "-o", model, "--method", "bvm", "-e", "1e-3", "-q")
    assert r.returncode == 0, r.stderr
    out = str(tmp_path / "pred.txt")
    r = cli("predict", test, model, "-o", out)
    assert r.returncode == 0, r.stderr
    pred = np.loadtxt(out)
    est = load_model(model)
    X = np.concatenate([c.X for c in streamcvm.open_store(test)])
    y = np.concatenate([c.y for c in streamcvm.open_store(test)])
    np.testing.assert_array_equal(pred, est.predict(X))
    # predictions into a store: y = predict, X = decision values
    r = cli("predict", test, model, "-o", str(tmp_path / "pred.zarr"))
    assert r.returncode == 0, r.stderr
    ps = streamcvm.open_store(tmp_path / "pred.zarr")
    np.testing.assert_array_equal(np.concatenate([c.y for c in ps]), pred)
    np.testing.assert_allclose(np.concatenate([c.X for c in ps])[:, 0],
                               est.decision_function(X), rtol=1e-6, atol=1e-7)
    r = cli("evaluate", test, model)
    assert r.returncode == 0, r.stderr
    acc = float(r.stdout.split("accuracy")[1].split()[0])
    assert acc == pytest.approx(np.mean(pred == y), abs=1e-4)
    assert "AUC" in r.stdout and "confusion" in r.stdout
    # a model that does not fit the store is one clear line
    r = cli("evaluate", train, str(tmp_path))
    assert r.returncode == 1 and "not a streamcvm model" in r.stderr


@pytest.fixture(scope="module")
def friedman_stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("fstores")
    train, test = str(d / "train.zarr"), str(d / "test.zarr")
    synthetic.write_store(train, "friedman1", 3000, seed=0, chunk_rows=1000)
    synthetic.write_store(test, "friedman1", 1000, seed=0, chunk_rows=500, first_block=10**6)
    return train, test


def test_regressor_model_roundtrip(tmp_path):
    from streamcvm import CVMRegressor
    X, y = synthetic.friedman1_block(0, 1500)
    est = CVMRegressor(eps=1e-3).fit(X, y)
    back = load_model(save_model(est, tmp_path / "r"))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    # (C = 2 x rows: the exact path, problems.regression.exact_fit)
    assert back.epsilon_bar_ == est.epsilon_bar_ and back.C_ == est.C_ == 2.0 * 1500 and back.mu_ == est.mu_


def test_cli_regression_train_predict_evaluate(friedman_stores, tmp_path, cli):
    train, test = friedman_stores
    model = str(tmp_path / "reg")
    r = cli("train", train, "-o", model, "--task", "regression", "--mu", "0.05")
    assert r.returncode == 0, r.stderr
    assert "CVMRegressor (cvm)" in r.stdout and "tube half width" in r.stdout
    est = load_model(model)
    assert est.C_ == 2.0 * 3000 and est.mu == 0.05      # the exact path's C="auto"
    out = str(tmp_path / "pred.txt")
    assert cli("predict", test, model, "-o", out).returncode == 0
    pred = np.loadtxt(out)
    X = np.concatenate([c.X for c in streamcvm.open_store(test)])
    y = np.concatenate([c.y for c in streamcvm.open_store(test)]).astype(np.float64)
    # the CLI's chunk tasks run BLAS on one thread, est.predict here on two:
    # float32 kernel blocks summed in another order agree to ~1e-5 of the
    # predictions' range (C = 2 x rows: coefficients of ~1e2-1e3 that cancel), not bit
    # for bit
    ref = est.predict(X)
    np.testing.assert_allclose(pred, ref, rtol=0, atol=1e-4 * np.abs(ref).max())
    r = cli("evaluate", test, model)
    assert r.returncode == 0, r.stderr
    got = {ln.split()[0]: float(ln.split()[1]) for ln in r.stdout.splitlines()[1:]}
    rmse = np.sqrt(np.mean((est.predict(X) - y) ** 2))
    assert got["RMSE"] == pytest.approx(rmse, rel=1e-5)
    assert got["nRMSE"] == pytest.approx(rmse / y.max(), rel=1e-5)
    assert got["MRE"] == pytest.approx(np.mean(np.abs((est.predict(X) - y) / y)), rel=1e-5)
    assert got["R^2"] == pytest.approx(1 - rmse ** 2 / y.var(), rel=1e-5)
    assert got["R^2"] > 0.8                    # Friedman #1 with unit noise: a real fit
    # options that belong to another task, and bvm for regression, are one line
    r = cli("train", train, "-o", model, "--task", "regression", "--class-weight", "balanced")
    assert r.returncode != 0 and "--class-weight is for classification" in r.stderr
    r = cli("train", train, "-o", model, "--task", "regression", "--method", "bvm")
    assert r.returncode == 1 and "use method='cvm' or 'fvm'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_class_weight(stores, tmp_path, cli):
    train, test = stores
    model = str(tmp_path / "cw")
    r = cli("train", train, "-o", model, "--method", "cvm", "--class-weight=-1:1,1:5", "-q")
    assert r.returncode == 0, r.stderr
    assert load_model(model).class_weight == {-1: 1.0, 1: 5.0}
    r = cli("train", train, "-o", model, "--class-weight", "balanced", "-q", "--overwrite")
    assert r.returncode == 0, r.stderr          # method auto: weighted machines by CVM
    r = cli("train", train, "-o", model, "--class-weight", "balanced", "--method", "bvm", "-q",
            "--overwrite")
    assert r.returncode == 1 and "bvm' solves the plain MEB only" in r.stderr
    r = cli("train", train, "-o", model, "--method", "cvm", "--class-weight", "7:2", "-q")
    assert r.returncode == 1 and "label 7 is not among the classes" in r.stderr


class _Built(Exception):
    pass


@pytest.mark.parametrize("task,cls", [("classification", "CVMClassifier"),
                                      ("regression", "CVMRegressor"),
                                      ("ranking", "CVMRanker"),
                                      ("one-class", "CVMOneClass")])
def test_cli_train_takes_the_estimators_defaults(stores, tmp_path, monkeypatch, task, cls):
    """Options not given on the command line are the estimator's own
    defaults (not a second copy in the CLI); a given one, e.g. -e auto for
    ranking, is passed as given."""
    from streamcvm import estimators
    from streamcvm.cli import main
    built = {}

    def fit(self, *a, **k):
        built["params"] = self.get_params()
        raise _Built
    monkeypatch.setattr(getattr(estimators, cls), "fit", fit)
    train, _ = stores
    with pytest.raises(_Built):
        main(["train", train, "-o", str(tmp_path / "m"), "--task", task, "-q"])
    ref = getattr(estimators, cls)().get_params()
    got = {k: v for k, v in built["params"].items() if k != "verbose"}
    assert got == {k: v for k, v in ref.items() if k != "verbose"}
    with pytest.raises(_Built):
        main(["train", train, "-o", str(tmp_path / "m"), "--task", task, "-q", "-e", "auto",
              "-f", "1234"])
    assert built["params"]["eps"] == "auto" and built["params"]["max_core"] == 1234


# the command line's own settings, not a library parameter's default: (command, dest)
CLI_OWN = {("train", "task"), ("demo", "dir"), ("demo", "rows"), ("demo", "seed"),
           ("surface", "up"), ("predict", "probability")}


def test_no_command_option_carries_a_library_default():
    """Every option of every command either has no default of its own (None:
    not given, not passed, the library's default holds) or is a flag, or is
    one of the command line's own settings (CLI_OWN)."""
    import argparse

    from streamcvm.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {"ingest", "info", "train", "predict", "features", "surface",
                                "evaluate", "demo"}
    wrong = []
    for name, p in sub.choices.items():
        for a in p._actions:
            if not a.option_strings or isinstance(a, argparse._HelpAction):
                continue
            flag = a.nargs == 0 and a.default in (None, False)
            if a.default is not None and not flag and (name, a.dest) not in CLI_OWN:
                wrong.append(f"{name} {a.option_strings[-1]}: default {a.default!r}")
    assert not wrong, wrong
    # the help names the library's defaults, read from it
    from streamcvm import CVMRanker
    text = " ".join(sub.choices["train"].format_help().split())
    assert f"ranking: {CVMRanker().eps:g}" in text and "(default 59)" in text


def test_cli_features_surface_ingest_and_demo_take_the_librarys_defaults(stores, tmp_path,
                                                                         monkeypatch):
    """What features, surface, ingest and demo pass on without options: the
    library's defaults (MMDATransformer's parameters, surface.fit's and
    mesh's, ingest()'s), only the plumbing set (progress, paths, runner)."""
    import streamcvm.ingest as ing
    from streamcvm import MMDATransformer, estimators
    from streamcvm.apps import surface
    from streamcvm.cli import main
    got = {}

    def record(what, result=None):
        def f(*a, **k):
            got[what] = (a, k)
            if result is None:
                raise _Built
            return result
        return f

    def fit(self, *a, **k):
        got["mmda"] = (self.get_params(), k)
        raise _Built
    monkeypatch.setattr(MMDATransformer, "fit", fit)
    train, _ = stores
    with pytest.raises(_Built):
        main(["features", train, "-o", str(tmp_path / "f.zarr"), "-q"])
    params, fit_kw = got["mmda"]
    assert {k: v for k, v in params.items() if k != "verbose"} == \
        {k: v for k, v in MMDATransformer().get_params().items() if k != "verbose"}
    assert set(fit_kw) == {"checkpoint_dir", "resume", "checkpoint_replace"}

    pts = tmp_path / "p.xyz"
    rng = np.random.default_rng(0)
    P = rng.normal(size=(200, 3))
    np.savetxt(pts, P / np.linalg.norm(P, axis=1, keepdims=True))
    plumbing = {"n_jobs", "checkpoint_dir", "resume", "checkpoint_replace", "log", "progress"}
    monkeypatch.setattr(surface, "fit", record("fit", result=object()))
    monkeypatch.setattr(surface, "mesh", record("mesh"))
    with pytest.raises(_Built):
        main(["surface", str(pts), "-o", str(tmp_path / "m.ply"), "-q"])
    assert set(got["fit"][1]) == plumbing
    assert set(got["mesh"][1]) == {"runner", "progress"}
    with pytest.raises(_Built):
        main(["surface", str(pts), "-o", str(tmp_path / "m.ply"), "-q", "--grid", "40",
              "--seed", "3"])
    assert got["fit"][1]["seed"] == 3 and got["mesh"][1]["grid"] == 40

    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([rng.integers(0, 2, 50), rng.normal(size=(50, 3))]),
               delimiter=",")
    real_ingest = ing.ingest
    monkeypatch.setattr(ing, "ingest", record("ingest"))
    with pytest.raises(_Built):
        main(["ingest", str(src), "-o", str(tmp_path / "d.zarr"), "-q"])
    assert set(got["ingest"][1]) == {"overwrite", "progress", "executor"}
    with pytest.raises(_Built):
        main(["ingest", str(src), "-o", str(tmp_path / "d.zarr"), "-q", "--label-col", "none",
              "--clevel", "3"])
    assert got["ingest"][1]["label_col"] is None and got["ingest"][1]["clevel"] == 3

    def clf_fit(self, *a, **k):
        got["demo"] = self.get_params()
        raise _Built
    monkeypatch.setattr(ing, "ingest", real_ingest)
    monkeypatch.setattr(estimators.CVMClassifier, "fit", clf_fit)
    with pytest.raises(_Built):
        main(["demo", "--rows", "2000", "--dir", str(tmp_path / "demo"), "-q"])
    assert {k: v for k, v in got["demo"].items() if k != "verbose"} == \
        {k: v for k, v in estimators.CVMClassifier().get_params().items() if k != "verbose"}
