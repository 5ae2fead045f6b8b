"""Never lose data, never answer wrong in silence: the command line as a
careful user meets it. Each test failed on the code
before the fix it guards."""
import json
import os
import re
import stat
import subprocess

import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier
from streamcvm.data import synthetic
from streamcvm.estimators.model import load_model, save_model

from conftest import cli_cmd, cli_env, inproc, one_line_error, run_cli, tree


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Two classification stores, a regression store and a trained model."""
    d = tmp_path_factory.mktemp("safety")
    synthetic.write_store(d / "train.zarr", "gaussian", 3000, seed=0, chunk_rows=1000)
    synthetic.write_store(d / "other.zarr", "gaussian", 1000, seed=1, chunk_rows=500,
                          first_block=10**6)
    synthetic.write_store(d / "friedman.zarr", "friedman1", 1500, seed=0, chunk_rows=500,
                          d=22)
    r = inproc("train", d / "train.zarr", "-o", d / "model", "-e", "1e-2", "-q")
    assert r.returncode == 0, r.stderr
    return d


# 1. outputs never replace inputs or data the command did not write --------

def test_train_refuses_to_replace_a_store_before_training(work, tmp_path):
    other = work / "other.zarr"
    before = tree(other)
    ck = tmp_path / "ck"
    r = run_cli("train", work / "train.zarr", "-o", other, "-e", "1e-3", "-q",
                "--checkpoint-dir", ck, "--checkpoint-iters", "1")
    one_line_error(r, "train", r"other.zarr: already exists \(pass --overwrite")
    assert tree(other) == before
    assert not ck.exists()          # refused before the first iteration, not after training


@pytest.mark.parametrize("flags", [[], ["--overwrite"]])
def test_train_never_replaces_its_input(work, flags):
    store = work / "train.zarr"
    before = tree(store)
    r = run_cli("train", store, "-o", store, "-q", *flags)
    one_line_error(r, "train", "is the input")
    assert tree(store) == before


@pytest.mark.parametrize("flags", [[], ["--overwrite"]])
def test_predict_never_replaces_its_inputs(work, flags):
    store, model = work / "other.zarr", work / "model"
    before, mbefore = tree(store), tree(model)
    one_line_error(run_cli("predict", store, model, "-o", store, *flags), "predict",
                   "is the input")
    one_line_error(inproc("predict", store, model, "-o", model, *flags), "predict",
                   "is the input")
    # nor a folder holding an input, nor a path inside one
    one_line_error(inproc("predict", store, model, "-o", work, *flags), "predict",
                   "contains the input")
    one_line_error(inproc("predict", store, model, "-o", store / "p.txt", *flags),
                   "predict", "is inside the input")
    assert tree(store) == before and tree(model) == mbefore


def test_predict_replaces_its_own_outputs_and_others_only_with_overwrite(work, tmp_path):
    store, model = work / "other.zarr", work / "model"
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    one_line_error(run_cli("predict", store, model, "-o", notes), "predict",
                   r"already exists \(pass --overwrite")
    assert notes.read_text() == "precious\n"
    r = inproc("predict", store, model, "-o", notes, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert len(notes.read_text().split()) == 1000
    # a prediction store is predict's own: replaced without --overwrite
    p = tmp_path / "p.zarr"
    assert inproc("predict", store, model, "-o", p).returncode == 0
    r = run_cli("predict", store, model, "-o", p)
    assert r.returncode == 0, r.stderr
    # a training store is not
    one_line_error(run_cli("predict", store, model, "-o", work / "friedman.zarr"), "predict",
                   "a streamcvm store, not a prediction store")


def test_train_replaces_a_model_but_never_a_folder_of_other_files(work, tmp_path):
    model = tmp_path / "m"
    assert inproc("train", work / "train.zarr", "-o", model, "-e", "1e-2", "-q").returncode == 0
    first = json.loads((model / "model.json").read_text())
    r = inproc("train", work / "train.zarr", "-o", model, "-e", "1e-2", "-q", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert json.loads((model / "model.json").read_text())["params"]["random_state"] == 3
    assert first["params"]["random_state"] == 0
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    for flags in ([], ["--overwrite"]):
        one_line_error(inproc("train", work / "train.zarr", "-o", folder, "-q", *flags),
                       "train", "folder of other files")
    assert (folder / "cat.jpg").read_bytes() == b"\xff\xd8"


def test_output_folder_errors_are_one_line(work, tmp_path):
    r = run_cli("train", work / "train.zarr", "-o", tmp_path / "missing" / "m", "-q")
    one_line_error(r, "train", "does not exist")
    (tmp_path / "file").write_text("x")
    r = inproc("predict", work / "other.zarr", work / "model", "-o", tmp_path / "file" / "p.txt")
    one_line_error(r, "predict", "does not exist")


def test_save_model_keeps_what_is_not_a_model(work, tmp_path):
    from streamcvm.data.outputs import OutputError
    est = load_model(work / "model")
    f = tmp_path / "data.csv"
    f.write_text("1,2,3\n")
    with pytest.raises(OutputError, match="already exists"):
        save_model(est, f)
    assert f.read_text() == "1,2,3\n"
    save_model(est, f, overwrite=True)
    assert load_model(f).n_features_in_ == est.n_features_in_


# 2, 3. text labels: classes_ sorted, predictions into a store decode right --

@pytest.fixture(scope="module")
def text_store(tmp_path_factory):
    """A learnable two-class CSV whose labels appear as 'yes' first, then 'no'."""
    d = tmp_path_factory.mktemp("text")
    X, y = synthetic.gaussian_block(0, 1200, d=5, blobs=1, noise=0.5)
    names = np.where(y > 0, "yes", "no")
    first = int(np.flatnonzero(names == "yes")[0])
    order = np.r_[first, np.delete(np.arange(len(y)), first)]
    with open(d / "yn.csv", "w") as f:
        f.write("a,b,c,d,e,answer\n")
        for i in order:
            f.write(",".join(f"{v:.6f}" for v in X[i]) + f",{names[i]}\n")
    r = inproc("ingest", d / "yn.csv", "-o", d / "yn.zarr", "--label-col", "answer", "-q")
    assert r.returncode == 0, r.stderr
    s = streamcvm.open_store(d / "yn.zarr")
    assert s.label_names == ["yes", "no"]         # ingest's order of appearance
    return d, X[order], names[order]


def test_text_classes_are_sorted_and_decision_positive_means_the_second(text_store):
    from sklearn.metrics import roc_auc_score
    d, X, names = text_store
    clf = CVMClassifier(eps=1e-3).fit(streamcvm.open_store(d / "yn.zarr"))
    assert clf.classes_.tolist() == ["no", "yes"]
    dec = clf.decision_function(X)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(dec > 0).astype(int)])
    auc = roc_auc_score(names == clf.classes_[1], dec)
    assert auc > 0.9
    assert np.mean(clf.predict(X) == names) > 0.85
    # the CLI's evaluate reports the same AUC
    save_model(clf, d / "yn.model")
    r = run_cli("evaluate", d / "yn.zarr", d / "yn.model")
    assert r.returncode == 0, r.stderr
    got = float(r.stdout.split("AUC")[1].split()[0])
    assert got == pytest.approx(auc, abs=1e-4)


def test_text_predictions_into_a_store_decode_to_the_predicted_labels(text_store, tmp_path):
    d, X, names = text_store
    model = tmp_path / "m"
    assert inproc("train", d / "yn.zarr", "-o", model, "-e", "1e-3", "-q").returncode == 0
    r = run_cli("predict", d / "yn.zarr", model, "-o", tmp_path / "p.txt")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p.txt").read_text().split()
    r = run_cli("predict", d / "yn.zarr", model, "-o", tmp_path / "p.zarr")
    assert r.returncode == 0, r.stderr
    ps = streamcvm.open_store(tmp_path / "p.zarr")
    decoded = ps.decode_labels(np.concatenate([c.y for c in ps])).tolist()
    assert decoded == text
    assert np.mean(np.array(text) == names) > 0.85
    r = inproc("info", tmp_path / "p.zarr")
    assert r.returncode == 0, r.stderr
    assert re.search(r"classes\s+2\s+\((no|yes): ", r.stdout)


# 4. evaluate on the wrong kind of store -------------------------------------

def test_evaluate_refuses_a_store_of_another_task(work, tmp_path):
    reg = tmp_path / "reg"
    r = inproc("train", work / "friedman.zarr", "-o", reg, "--task", "regression",
                "-e", "1e-2", "-q")
    assert r.returncode == 0, r.stderr
    one_line_error(run_cli("evaluate", work / "other.zarr", reg), "evaluate",
                   "integer classes, but the model is a regressor")
    one_line_error(inproc("evaluate", work / "friedman.zarr", work / "model"), "evaluate",
                   "regression target.*CVMClassifier")
    # a classification store whose labels the model does not have
    X, y = synthetic.gaussian_block(0, 600, d=22)
    streamcvm_store = tmp_path / "codes.zarr"
    from streamcvm.data.writer import StoreWriter
    with StoreWriter(str(streamcvm_store), 22) as w:
        w.append(X, np.where(y > 0, 7.0, 5.0))
        w.close()
    one_line_error(inproc("evaluate", streamcvm_store, work / "model"), "evaluate",
                   r"none of its labels \(5, 7\) is a class of the model")


# 5. a continuous target trained as classes ----------------------------------

def test_train_refuses_a_continuous_target_as_classes(work, tmp_path):
    r = run_cli("train", work / "friedman.zarr", "-o", tmp_path / "m", "-q")
    one_line_error(r, "train", "--task regression")
    assert not (tmp_path / "m").exists()
    # integer targets with many classes: the limit, then raising it
    X, _ = synthetic.gaussian_block(0, 2000, d=4)
    y = (np.arange(2000) % 150).astype(np.float64)
    from streamcvm.data.writer import StoreWriter
    with StoreWriter(str(tmp_path / "many.zarr"), 4) as w:
        w.append(X, y)
        w.close()
    r = inproc("train", tmp_path / "many.zarr", "-o", tmp_path / "m", "-q")
    one_line_error(r, "train", "150 classes, more than --max-classes 100")
    # the Python API refuses non-integer classes from a store too
    with pytest.raises(ValueError, match="continuous target"):
        CVMClassifier(eps=1e-2).fit(streamcvm.open_store(work / "friedman.zarr"))


# 6. ingest says what it guessed ---------------------------------------------

def test_ingest_reports_the_label_column_and_header(tmp_path):
    rng = np.random.default_rng(0)
    with open(tmp_path / "people.csv", "w") as f:
        f.write("age,income,label\n")
        for _ in range(300):
            f.write(f"{rng.integers(18, 80)},{rng.uniform(0, 1e5):.2f},"
                    f"{rng.choice(['yes', 'no'])}\n")
    r = run_cli("ingest", tmp_path / "people.csv", "-o", tmp_path / "p.zarr")
    assert r.returncode == 0, r.stderr
    assert "label: column 2 ('label', by its header name); header: found" in r.stdout
    s = streamcvm.open_store(tmp_path / "p.zarr")
    assert s.d == 2 and sorted(s.label_names) == ["no", "yes"]
    assert s.feature_names == ["age", "income"]


def test_ingest_reads_column_numbers_as_a_header_and_says_so(tmp_path):
    rng = np.random.default_rng(1)
    with open(tmp_path / "g.csv", "w") as f:
        f.write("0,1,2,3,4\n")
        for _ in range(100):
            f.write(f"{rng.integers(0, 2)}," + ",".join(f"{v:.5e}" for v in
                                                        rng.normal(50, 20, 4)) + "\n")
    r = run_cli("ingest", tmp_path / "g.csv", "-o", tmp_path / "g.zarr")
    assert r.returncode == 0, r.stderr
    assert "looks like column numbers: read as a header" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert streamcvm.open_store(tmp_path / "g.zarr").n == 100
    r = inproc("ingest", tmp_path / "g.csv", "-o", tmp_path / "g2.zarr", "--no-header", "-q")
    assert r.returncode == 0 and r.stderr == ""
    assert streamcvm.open_store(tmp_path / "g2.zarr").n == 101


def test_ingest_warns_about_a_doubtful_guess(tmp_path):
    rng = np.random.default_rng(2)
    # a continuous first column taken as the label
    with open(tmp_path / "c.csv", "w") as f:
        for _ in range(200):
            f.write(",".join(f"{v:.4f}" for v in rng.normal(size=3)) + "\n")
    r = run_cli("ingest", tmp_path / "c.csv", "-o", tmp_path / "c.zarr", "-q")
    assert r.returncode == 0, r.stderr
    assert re.search(r"label column 0: 1\d\d distinct values, not all integers", r.stderr)
    # a numeric first line of integers over rows of decimals
    with open(tmp_path / "h.csv", "w") as f:
        f.write("1,7,3,9\n")
        for _ in range(50):
            f.write(f"{rng.integers(0, 2)}," + ",".join(f"{v:.4f}" for v in
                                                        rng.normal(size=3)) + "\n")
    r = inproc("ingest", tmp_path / "h.csv", "-o", tmp_path / "h.zarr", "-q")
    assert r.returncode == 0, r.stderr
    assert "differs from the rows after it" in r.stderr and "--header" in r.stderr


# 7. special output paths ----------------------------------------------------

def test_predict_to_standard_output(work, tmp_path):
    r = subprocess.run(cli_cmd("predict", work / "other.zarr", work / "model", "-o", "-"),
                       cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == 1000 and set(r.stdout.split()) <= {"-1", "1"}
    assert not (tmp_path / "-").exists()


def test_predict_into_a_special_file_writes_through_it(work, tmp_path):
    if os.path.islink("/dev/stdout"):       # (as on Linux; the run may be root's)
        r = run_cli("predict", work / "other.zarr", work / "model", "-o", "/dev/stdout")
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.split()) == 1000
        assert os.path.islink("/dev/stdout")        # still the link, not a regular file
    # a link to the stdout of whoever runs it, as /dev/stdout is
    link = tmp_path / "out"
    os.symlink("/proc/self/fd/1", link)
    r = run_cli("predict", work / "other.zarr", work / "model", "-o", link)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == 1000 and os.path.islink(link)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    r = inproc("predict", work / "other.zarr", work / "model", "-o", fifo)
    out = reader.communicate(timeout=60)[0]
    assert r.returncode == 0, r.stderr
    assert len(out.split()) == 1000
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    # a store cannot go to a special file
    os.mkfifo(tmp_path / "pipe.zarr")
    one_line_error(inproc("predict", work / "other.zarr", work / "model", "-o",
                           tmp_path / "pipe.zarr"), "predict", "not a regular file or folder")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "pipe.zarr").st_mode)


# 8. --resume names a folder with a snapshot ---------------------------------

def test_resume_from_a_folder_without_a_snapshot_is_an_error(work, tmp_path):
    r = run_cli("train", work / "train.zarr", "-o", tmp_path / "m", "--resume",
                tmp_path / "nothing", "-q")
    one_line_error(r, "train", "no checkpoint there")
    assert not (tmp_path / "m").exists()
    # naming the same folder with --checkpoint-dir starts a fresh run there
    ck = tmp_path / "ck"
    r = inproc("train", work / "train.zarr", "-o", tmp_path / "m", "-e", "1e-2",
                "--resume", ck, "--checkpoint-dir", ck)
    assert r.returncode == 0, r.stderr
    assert "starting a fresh run" in r.stderr
    assert any(p.name.startswith("ckpt-") for p in ck.iterdir())


def test_demo_refuses_files_of_an_earlier_run_without_overwrite(tmp_path):
    """`streamcvm demo` writes mixture.* in --dir: an existing one is refused
    in one line before any work (left as it was); --overwrite replaces it."""
    from conftest import inproc, one_line_error
    d = tmp_path / "demo"
    d.mkdir()
    (d / "mixture.svm.gz").write_bytes(b"mine")
    r = inproc("demo", "--dir", d, "--rows", "2000", "-q")
    one_line_error(r, "demo", "mixture.svm.gz exists: pass --overwrite")
    assert (d / "mixture.svm.gz").read_bytes() == b"mine"
    assert sorted(p.name for p in d.iterdir()) == ["mixture.svm.gz"]
    r = inproc("demo", "--dir", d, "--rows", "2000", "-q", "--overwrite")
    assert r.returncode == 0, r.stderr
    assert (d / "mixture.svm.gz").read_bytes() != b"mine" and (d / "mixture.model").is_dir()


def test_ingest_refuses_to_write_over_its_own_input(tmp_path):
    """`ingest X -o X --overwrite`: one line, and X is left byte for byte."""
    from conftest import inproc, one_line_error
    from streamcvm.data import synthetic
    src = tmp_path / "a.svm"
    synthetic.write_text(src, "gaussian", 300, seed=0)
    before = src.read_bytes()
    r = inproc("ingest", src, "-o", src, "--overwrite")
    one_line_error(r, "ingest", "is the input .*write the store elsewhere")
    assert src.is_file() and src.read_bytes() == before


def test_a_checkpoint_folder_inside_the_input_store_is_refused(tmp_path):
    """train --checkpoint-dir STORE/ck: refused before any work, the store
    unchanged (no folder made inside it, every file as it was)."""
    from conftest import inproc, one_line_error
    from streamcvm.data import synthetic
    s = tmp_path / "s.zarr"
    synthetic.write_store(s, "gaussian", 500, seed=0)
    files = {p: p.read_bytes() for p in s.rglob("*") if p.is_file()}
    r = inproc("train", s, "-o", tmp_path / "m", "--checkpoint-dir", s / "ck", "-q")
    one_line_error(r, "train", "checkpoint folder may not be, contain or lie inside")
    assert not (s / "ck").exists() and not (tmp_path / "m").exists()
    assert {p: p.read_bytes() for p in s.rglob("*") if p.is_file()} == files
