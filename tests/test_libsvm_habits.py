"""The command line as a LIBSVM or scikit-learn user meets it: text files
where a store is expected, svm-train's option letters, svm-scale's range,
svm-predict's zero padding, a summary line for every task, messages that
say what a path is, and a help line for every option."""
import argparse
import bz2
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

import streamcvm
from streamcvm.data import synthetic
from streamcvm.estimators.model import load_model

from conftest import REPO, inproc, one_line_error, raw_file, run_cli


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Stores ingested on the fly go to this test's own folder."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("STREAMCVM_CACHE_DIR", str(folder))
    return folder


def _rows(n, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] + X[:, 1] ** 2 > 0.8, 1, -1)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """svmlight training and test files (the test file's largest index is
    5, the training file's 6), a classification store, a regression store
    and a ranking store."""
    d = tmp_path_factory.mktemp("libsvm")
    X, y = _rows(600)
    dump_svmlight_file(X, y, str(d / "train.svm"), zero_based=False)
    Xt, yt = _rows(300, seed=1)
    dump_svmlight_file(Xt[:, :5], yt, str(d / "test.svm"), zero_based=False)
    synthetic.write_store(d / "g.zarr", "gaussian", 2000, seed=0, chunk_rows=500)
    synthetic.write_store(d / "f.zarr", "friedman1", 1500, seed=0, chunk_rows=500)
    rng = np.random.default_rng(0)
    Xr = rng.standard_normal((600, 5))
    rel = np.digitize(np.sin(Xr[:, 0]) + Xr[:, 1] ** 2 / 2 + 0.3 * rng.standard_normal(600),
                      [0.0, 0.8, 1.6])
    dump_svmlight_file(Xr, rel, str(d / "rank.svm"), query_id=np.repeat(np.arange(40), 15),
                       zero_based=False)
    assert inproc("ingest", d / "rank.svm", "-o", d / "rank.zarr", "-q").returncode == 0
    return d, (X, y), (Xt, yt)


# 1. a summary line for every task, without -q ------------------------------------

@pytest.mark.parametrize("task,store,extra", [
    ("classification", "g.zarr", ["-e", "1e-2"]),
    ("one-class", "g.zarr", ["-e", "1e-2"]),
    ("regression", "f.zarr", ["-e", "1e-2", "--mu", "0.1"]),
    ("ranking", "rank.zarr", ["-e", "1e-3"])])
def test_train_prints_its_summary_for_every_task(files, tmp_path, task, store, extra):
    """Not quiet, as users run it: the summary line names the estimator and
    its support vectors for every task (a ranker's used to raise after the
    model was written)."""
    d = files[0]
    r = inproc("train", d / store, "-o", tmp_path / "m", "--task", task, *extra)
    assert r.returncode == 0, r.stderr
    cls = {"classification": "CVMClassifier", "one-class": "CVMOneClass",
           "regression": "CVMRegressor", "ranking": "CVMRanker"}[task]
    assert re.search(rf"trained {cls} \(\w+\) on [\d,]+ rows .* [\d,]+ support vectors", r.stdout)
    assert load_model(tmp_path / "m").task == task


def test_the_summary_names_only_what_was_chosen(files, tmp_path):
    """An explicit -c is not 'chosen on held-out rows'; gamma, searched, is."""
    r = inproc("train", files[0] / "g.zarr", "-o", tmp_path / "m", "-c", "1", "-e", "1e-2")
    assert r.returncode == 0, r.stderr
    assert "C 1 (gamma chosen on held-out rows" in r.stdout, r.stdout


def test_train_ranking_without_quiet_in_a_subprocess(files, tmp_path):
    d = files[0]
    r = run_cli("train", d / "rank.zarr", "-o", tmp_path / "rk", "--task", "ranking")
    assert r.returncode == 0, r.stderr
    assert "trained CVMRanker" in r.stdout and "Traceback" not in r.stderr


# 2. an MMDA model given to predict or evaluate ----------------------------------

def test_an_mmda_model_is_refused_by_predict_and_evaluate(files, tmp_path):
    d = files[0]
    r = inproc("features", d / "g.zarr", "-o", tmp_path / "f.zarr", "-k", "1",
               "--save-model", tmp_path / "mmda", "-q")
    assert r.returncode == 0, r.stderr
    one_line_error(run_cli("predict", d / "g.zarr", tmp_path / "mmda", "-o", tmp_path / "p.txt"),
                   "predict", r"MMDA feature model.*streamcvm features .*--model")
    one_line_error(inproc("evaluate", d / "g.zarr", tmp_path / "mmda"), "evaluate",
                   r"MMDA feature model.*streamcvm features")
    assert not (tmp_path / "p.txt").exists()


# 3. text files where a store is expected ------------------------------------------

def _compressed(src, dst, how):
    data = Path(src).read_bytes()
    Path(dst).write_bytes(gzip.compress(data) if how == "gz" else bz2.compress(data))
    return dst


@pytest.mark.parametrize("how", ["plain", "gz", "bz2", "csv"])
def test_train_and_predict_read_a_text_file(files, tmp_path, cache, how):
    d, (X, y), (Xt, yt) = files
    src = d / "train.svm"
    if how in ("gz", "bz2"):
        src = _compressed(src, tmp_path / f"train.svm.{how}", how)
    elif how == "csv":
        src = tmp_path / "train.csv"
        np.savetxt(src, np.column_stack([y, X]), delimiter=",", fmt="%.6f")
    model = tmp_path / "m"
    r = run_cli("train", src, "-o", model, "-c", "10", "-g", "0.5")
    assert r.returncode == 0, r.stderr
    assert re.search(r"is a text file \((svmlight|csv)\): ingested it \(600 rows x 6 features",
                     r.stderr), r.stderr
    stores = list(cache.glob("*.zarr"))
    assert len(stores) == 1 and str(stores[0]) in r.stderr
    # the same model as from the store ingest makes
    ref = tmp_path / "ref"
    assert inproc("ingest", src, "-o", tmp_path / "s.zarr", "-q").returncode == 0
    assert inproc("train", tmp_path / "s.zarr", "-o", ref, "-c", "10", "-g", "0.5",
                  "-q").returncode == 0
    Xc = np.column_stack([Xt[:, :5], np.zeros(len(Xt))]).astype(np.float32)
    np.testing.assert_array_equal(load_model(model).predict(Xc), load_model(ref).predict(Xc))
    # a second run reuses the store; -q keeps it quiet
    r = inproc("train", src, "-o", model, "-c", "10", "-g", "0.5")
    assert r.returncode == 0 and "reading the store ingested from it earlier" in r.stderr
    assert "ingested it" not in r.stderr and list(cache.glob("*.zarr")) == stores
    r = inproc("train", src, "-o", model, "-c", "10", "-g", "0.5", "-q")
    assert r.returncode == 0 and "text file" not in r.stderr and r.stdout == ""


def test_a_changed_text_file_is_ingested_again(files, tmp_path, cache):
    d, (X, y), _ = files
    src = tmp_path / "t.svm"
    dump_svmlight_file(X[:300], y[:300], str(src), zero_based=False)
    assert inproc("train", src, "-o", tmp_path / "m", "-e", "1e-2", "-q").returncode == 0
    dump_svmlight_file(X[:400], y[:400], str(src), zero_based=False)
    r = inproc("train", src, "-o", tmp_path / "m", "-e", "1e-2")
    assert r.returncode == 0 and "ingested it (400 rows" in r.stderr
    assert load_model(tmp_path / "m").training_["rows"] == 400


def test_predict_and_evaluate_read_a_text_test_file_of_fewer_features(files, tmp_path):
    """svm-predict's habit: a test file whose largest index is below the
    model's reads the missing features as 0."""
    d, _, (Xt, yt) = files
    model = tmp_path / "m"
    assert inproc("train", d / "train.svm", "-o", model, "-c", "10", "-g", "0.5",
                  "-q").returncode == 0
    r = run_cli("predict", d / "test.svm", model, "-o", tmp_path / "out.txt")
    assert r.returncode == 0, r.stderr
    assert "test.svm has 5 features, the model 6: feature 6 is read as 0" in r.stderr
    got = np.loadtxt(tmp_path / "out.txt")
    Xp = np.column_stack([Xt[:, :5], np.zeros(len(Xt))]).astype(np.float32)
    np.testing.assert_array_equal(got, load_model(model).predict(Xp))
    r = inproc("evaluate", d / "test.svm", model, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["accuracy"] == pytest.approx(np.mean(got == yt))


def test_padding_a_store_and_refusing_more_features(files, tmp_path):
    d, _, (Xt, yt) = files
    model = tmp_path / "m"
    assert inproc("train", d / "train.svm", "-o", model, "-e", "1e-2", "-q").returncode == 0
    # a dense store of fewer features, made by ingest
    dump_svmlight_file(Xt[:, :4], yt, str(tmp_path / "t4.svm"), zero_based=False)
    assert inproc("ingest", tmp_path / "t4.svm", "-o", tmp_path / "t4.zarr", "--dense",
                  "-q").returncode == 0
    r = inproc("predict", tmp_path / "t4.zarr", model, "-o", tmp_path / "p.txt")
    assert r.returncode == 0, r.stderr
    Xp = np.column_stack([Xt[:, :4], np.zeros((len(Xt), 2))]).astype(np.float32)
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "p.txt"), load_model(model).predict(Xp))
    # more features than the model's: one line pointing at ingest --n-features
    assert inproc("ingest", d / "train.svm", "-o", tmp_path / "wide.zarr", "--n-features", "9",
                  "-q").returncode == 0
    for cmd in ("predict", "evaluate"):
        out = ["-o", tmp_path / "w.txt"] if cmd == "predict" else []
        one_line_error(inproc(cmd, tmp_path / "wide.zarr", model, *out), cmd,
                       r"9 features, the model expects 6.*streamcvm ingest FILE --n-features 6")
    # CSV columns are matched by position: fewer of them is refused
    np.savetxt(tmp_path / "t.csv", np.column_stack([yt, Xt[:, :4]]), delimiter=",", fmt="%.6f")
    assert inproc("ingest", tmp_path / "t.csv", "-o", tmp_path / "csv.zarr",
                  "-q").returncode == 0
    one_line_error(inproc("evaluate", tmp_path / "csv.zarr", model), "evaluate",
                   "CSV columns, matched by position")


def test_info_on_a_text_file_and_anything_else(files, tmp_path):
    d = files[0]
    r = inproc("info", d / "train.svm")
    assert r.returncode == 0, r.stderr
    assert "text file" in r.stdout and f"streamcvm ingest {d / 'train.svm'} -o" in r.stdout
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    model = tmp_path / "m"
    assert inproc("train", d / "g.zarr", "-o", model, "-e", "1e-2", "-q").returncode == 0
    for cmd, args in (("info", [junk]), ("train", [junk, "-o", tmp_path / "m2"]),
                      ("predict", [junk, model, "-o", tmp_path / "p.txt"]),
                      ("evaluate", [junk, model])):
        one_line_error(inproc(cmd, *args), cmd,
                       r"junk.bin: neither a store .* nor a text file.*`streamcvm ingest`")


def test_a_file_ingest_refuses_names_the_way_out(tmp_path):
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:x\n-1 1:0.2\n")
    one_line_error(inproc("train", bad, "-o", tmp_path / "m"), "train",
                   r"bad.svm:1: .*streamcvm ingest .*bad.svm -o STORE.zarr")


# 4. svm-train's letters ---------------------------------------------------------

def test_w_as_svm_train_writes_it_combined_with_class_weight(files, tmp_path):
    d = files[0]
    r = inproc("train", d / "train.svm", "-o", tmp_path / "m", "-c", "10", "-g", "0.5",
               "-w1", "5", "-w-1", "2", "-q")
    assert r.returncode == 0, r.stderr
    assert load_model(tmp_path / "m").class_weight == {1: 5.0, -1: 2.0}
    r = inproc("train", d / "train.svm", "-o", tmp_path / "m", "-e", "1e-2",
               "--class-weight=-1:3,1:4", "-w1", "0.5", "-q")
    assert r.returncode == 0, r.stderr
    assert load_model(tmp_path / "m").class_weight == {-1: 3.0, 1: 0.5}
    one_line_error(inproc("train", d / "train.svm", "-o", tmp_path / "m", "--class-weight",
                          "balanced", "-w1", "2"), "train", "balanced")
    one_line_error(inproc("train", d / "f.zarr", "-o", tmp_path / "m", "--task", "regression",
                          "-w1", "2"), "train", "-w is for classification")


def test_kernel_numbers_degree_and_coef0(files, tmp_path):
    d = files[0]
    r = inproc("train", d / "train.svm", "-o", tmp_path / "p", "-t", "1", "-d", "2", "-r", "1",
               "-q")
    assert r.returncode == 0, r.stderr
    est = load_model(tmp_path / "p")
    assert (est.kernel_.name, est.kernel_.degree, est.kernel_.coef0) == ("poly", 2, 1)
    r = inproc("train", d / "train.svm", "-o", tmp_path / "l", "-t", "0", "-q")
    assert r.returncode == 0 and load_model(tmp_path / "l").kernel_.name == "linear"
    one_line_error(inproc("train", d / "train.svm", "-o", tmp_path / "s", "-t", "3"), "train",
                   r"-t 3 \(sigmoid\) is not a kernel.*rbf")
    one_line_error(inproc("train", d / "train.svm", "-o", tmp_path / "s", "-d", "2"), "train",
                   "-d/--degree is for the poly")
    assert not (tmp_path / "s").exists()


def test_cross_validation_prints_as_svm_train_and_writes_nothing(files, tmp_path):
    d, (X, y), _ = files
    r = run_cli("train", "-v", "4", d / "train.svm", "-c", "10", "-g", "0.5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"Cross Validation Accuracy = ([\d.]+)%\n", r.stdout)
    assert m and 70 < float(m.group(1)) <= 100, r.stdout
    assert r.stderr.count("fold ") == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]     # no model anywhere
    # the same folds by hand give the same accuracy
    from sklearn.model_selection import StratifiedKFold

    from streamcvm import CVMClassifier
    s = streamcvm.open_store(next((tmp_path / "cache").glob("*.zarr")))
    Xs = np.vstack([c.X for c in s])
    ys = np.concatenate([c.y for c in s])
    pred = np.empty(len(ys))
    for tr, te in StratifiedKFold(4, shuffle=True, random_state=0).split(Xs, ys):
        clf = CVMClassifier(C=10.0, gamma=0.5).fit(streamcvm.as_store(Xs[tr], ys[tr]))
        pred[te] = clf.predict(Xs[te])
    assert float(m.group(1)) == pytest.approx(100 * np.mean(pred == ys), abs=1e-3)
    r = inproc("train", d / "f.zarr", "--task", "regression", "-v", "3", "-e", "1e-2", "-q")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Cross Validation Mean squared error = ")
    assert lines[1].startswith("Cross Validation Squared correlation coefficient = ")
    one_line_error(inproc("train", d / "train.svm", "-v", "3", "-o", tmp_path / "m"), "train",
                   "writes no model")
    one_line_error(inproc("train", d / "rank.zarr", "--task", "ranking", "-v", "3"), "train",
                   "-v is for classification and regression")
    one_line_error(inproc("train", d / "train.svm"), "train", "-o MODEL is needed")


def test_cross_validation_refuses_a_store_beyond_its_row_limit(files):
    one_line_error(inproc("train", files[0] / "g.zarr", "-v", "3", "--option",
                          "cv_max_rows=100"), "train", r"2,000 rows, more than 100")
    one_line_error(inproc("train", files[0] / "g.zarr", "-v", "3", "--option",
                          "cv_max_row=100"), "train", r"unknown option 'cv_max_row' \(did you "
                   r"mean cv_max_rows")


def test_argv_rewriting_touches_train_only():
    from streamcvm.cli.libsvm import rewrite_argv
    assert rewrite_argv(["train", "a9a", "-w1", "5", "-w-1", "2.5", "-o", "m"]) == \
        ["train", "a9a", "-w1:5", "-w-1:2.5", "-o", "m"]
    assert rewrite_argv(["train", "--scale", "s.zarr", "-o", "m"]) == \
        ["train", "--scale=standard", "s.zarr", "-o", "m"]
    assert rewrite_argv(["train", "s.zarr", "--scale", "range"]) == \
        ["train", "s.zarr", "--scale", "range"]
    assert rewrite_argv(["surface", "p.xyz", "--scales", "0.3", "-w1", "5"]) == \
        ["surface", "p.xyz", "--scales", "0.3", "-w1", "5"]


# 5. --scale standard | range ---------------------------------------------------

def test_scale_range_maps_each_feature_into_minus_one_one(files, tmp_path):
    d = files[0]
    store = streamcvm.open_store(d / "g.zarr")
    X = np.concatenate([c.X for c in store])
    r = inproc("train", d / "g.zarr", "-o", tmp_path / "r", "--scale", "range", "-e", "1e-2",
               "-q")
    assert r.returncode == 0, r.stderr
    est = load_model(tmp_path / "r")
    Z = est.scaler_.transform(X)
    np.testing.assert_allclose(Z.min(axis=0), -1, atol=1e-6)
    np.testing.assert_allclose(Z.max(axis=0), 1, atol=1e-6)
    assert est.scale == "range"
    assert "mapped to [-1, 1] from its min and max" in inproc("info", tmp_path / "r").stdout
    # a bare --scale, before or after the store, is standardisation, as it was
    for args in (["--scale", d / "g.zarr"], [d / "g.zarr", "--scale"]):
        r = inproc("train", *args, "-o", tmp_path / "s", "-e", "1e-2", "-q")
        assert r.returncode == 0, r.stderr
        Z = load_model(tmp_path / "s").scaler_.transform(X)
        np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-4)
        np.testing.assert_allclose(Z.std(axis=0), 1, atol=1e-4)


def test_scale_parameter_is_checked():
    from streamcvm import CVMClassifier
    X, y = _rows(200)
    with pytest.raises(ValueError, match="scale must be False, True"):
        CVMClassifier(scale="minmax").fit(X, y)
    clf = CVMClassifier(scale="range", C=1.0, gamma=1.0).fit(X, y)
    Z = clf.scaler_.transform(X.astype(np.float32))
    assert Z.min() == pytest.approx(-1, abs=1e-6) and Z.max() == pytest.approx(1, abs=1e-6)


def test_scale_range_of_sparse_rows_divides_by_max_abs():
    import scipy.sparse as sp

    from streamcvm.data.scaling import Scaler
    X = sp.random(300, 8, density=0.2, random_state=0, format="csr", dtype=np.float32)
    X.data -= 0.3
    sc = Scaler.fit(streamcvm.as_store(X, np.zeros(300), chunk_rows=100), kind="range")
    assert sc.offset is None
    np.testing.assert_allclose(sc.scale, np.abs(X.toarray()).max(axis=0))


# 8, 9. help and descriptions ------------------------------------------------------

def _subparsers():
    from streamcvm.cli import build_parser
    ap = build_parser()
    return ap, next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))


def test_every_command_has_a_description_and_every_option_a_help_line():
    ap, sub = _subparsers()
    missing = []
    for name, p in sub.choices.items():
        if not (p.description or "").strip():
            missing.append(f"{name}: no description")
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            if not (a.help or "").strip():
                missing.append(f"{name} {'/'.join(a.option_strings) or a.dest}")
        p.format_help()             # every %(...)s resolves
    assert not missing, missing
    listed = {a.dest: a.help for a in sub._choices_actions}
    assert "ranker" in listed["train"] and "ranking" in listed["evaluate"]


def test_train_help_says_what_b_and_e_do():
    from streamcvm.options import Options
    _, sub = _subparsers()
    text = " ".join(sub.choices["train"].format_help().split("options:")[1].split())
    b = text[text.index("-b {0,1}, --probability {0,1}"):text.index("--scale [")]
    assert f"up to {Options().probability_cv_rows:,} rows" in b
    assert f"{Options().probability_folds}-fold cross-validation" in b
    assert "held out" in b and "%%" not in b
    e = text[text.index("-e EPS, --eps EPS"):text.index("-a SAMPLE_SIZE")]
    assert "not LIBSVM's -e" in e
    p = " ".join(sub.choices["predict"].format_help().split("options:")[1].split())
    assert "sorted" in p and "LIBSVM: in the order" in p


# 10, 11. what a path is -----------------------------------------------------------

def test_a_plain_zarr_array_or_group_is_named_as_such(tmp_path):
    import zarr
    zarr.save_array(str(tmp_path / "a.zarr"), np.zeros((3, 3)))
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("x", shape=(3,), dtype="f4")
    (tmp_path / "empty").mkdir()
    for path, what in (("a.zarr", "a Zarr array"), ("g.zarr", "a Zarr group"),
                       ("empty", "a folder without Zarr metadata")):
        one_line_error(inproc("info", tmp_path / path), "info",
                       rf"{path}: {what}, not a streamcvm store: make one with `streamcvm "
                       rf"ingest`.*streamcvm.as_store")
        with pytest.raises(streamcvm.StoreError, match=what):
            streamcvm.open_store(tmp_path / path)


def test_ingest_onto_a_store_says_it_is_a_store(files, tmp_path):
    d = files[0]
    assert inproc("ingest", d / "train.svm", "-o", tmp_path / "s.zarr", "-q").returncode == 0
    r = run_cli("ingest", d / "train.svm", "-o", tmp_path / "s.zarr", "-q")
    one_line_error(r, "ingest", r"s.zarr: already exists \(pass --overwrite to replace it\): "
                                r"a streamcvm store$")
    assert "not a store" not in r.stderr


# 12. the README's and the user guide's commands parse -------------------------------

def _readme_commands():
    text = "\n".join(p.read_text() for p in [REPO / "README.md",
                                              *sorted((REPO / "docs").rglob("*.md"))])
    out = []
    for kind, block in re.findall(r"```(bash|console)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if kind == "console":
                if not line.startswith("$ "):
                    continue            # output
                line = line[2:]
            line = line.split("  #")[0].split(" # ")[0].strip()
            if line.startswith("streamcvm "):
                out.append(line)
    return out


def test_the_readmes_commands_parse():
    import shlex

    from streamcvm.cli import build_parser
    from streamcvm.cli.libsvm import rewrite_argv
    cmds = _readme_commands()
    assert any(c.startswith("streamcvm train -c 10 -g 0.5 -w1 5 ") for c in cmds)
    assert len(cmds) >= 30, cmds
    ap = build_parser()
    for c in cmds:
        argv = rewrite_argv(shlex.split(c)[1:])
        try:
            ap.parse_args(argv)
        except SystemExit:
            pytest.fail(f"README: {c!r} does not parse")


def test_libsvm_commands_on_a_real_file(raw, tmp_path):
    """german.numer_scale as LIBSVM's tools take it: train -v, train,
    predict, all on the text file."""
    src = raw_file(raw, "german/german.numer_scale")
    r = run_cli("train", "-v", "5", src, "-c", "1", "-g", "0.05")
    assert r.returncode == 0, r.stderr
    assert 60 < float(re.search(r"Accuracy = ([\d.]+)%", r.stdout).group(1)) <= 100
    r = run_cli("train", "-c", "1", "-g", "0.05", "-w1", "2", src, "-o", tmp_path / "m")
    assert r.returncode == 0, r.stderr
    assert "reading the store ingested from it earlier" in r.stderr
    r = run_cli("predict", src, tmp_path / "m", "-o", tmp_path / "out.txt")
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "out.txt").read_text().split()) == 1000
