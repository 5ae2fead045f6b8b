"""Damaged data is never trained on, one run never deletes another's
checkpoints, every refusal is one line. Each test fails with its
guard removed: the test names the guard it covers."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from streamcvm import CVMClassifier
from streamcvm.data import synthetic
from streamcvm.data.atomic import OutputRaced, publish
from streamcvm.data.writer import StoreWriter
from streamcvm.data.store import StoreError, open_store

from conftest import REPO, cli_env, inproc, one_line_error, tree


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A small classification store (3 chunks of X, y) and a model of it."""
    d = tmp_path_factory.mktemp("integrity")
    synthetic.write_store(d / "train.zarr", "gaussian", 600, seed=0, chunk_rows=200)
    synthetic.write_store(d / "train.h5", "gaussian", 600, seed=0, chunk_rows=200)
    r = inproc("train", d / "train.zarr", "-o", d / "model", "-e", "1e-2", "-q")
    assert r.returncode == 0, r.stderr
    return d


def _snaps(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("ckpt-"))


# 1. checkpoint folders belong to one run ------------------------------------

def _checkpointed_train(work, ck, *extra):
    return inproc("train", work / "train.zarr", "-o", ck.parent / "m", "-e", "1e-3", "-q",
                  "--overwrite", "--checkpoint-dir", ck, "--checkpoint-iters", "1",
                  "--checkpoint-keep", "4", *extra)


def test_a_foreign_checkpoint_folder_is_refused_then_replaced_on_request(work, tmp_path):
    ck = tmp_path / "ck"
    r = _checkpointed_train(work, ck)
    assert r.returncode == 0, r.stderr
    assert len(_snaps(ck)) >= 1
    before = tree(ck)
    for argv in (("train", work / "train.zarr", "-o", tmp_path / "m2", "-c", "2", "-q",
                  "--checkpoint-dir", ck),
                 ("features", work / "train.zarr", "-o", tmp_path / "f.zarr", "-q",
                  "--checkpoint-dir", ck)):
        r = inproc(*argv)
        one_line_error(r, argv[0], r"holds \d+ snapshot\(s\) of a different run .*"
                                   r"--checkpoint-replace")
        assert tree(ck) == before               # nothing pruned, nothing added
    assert not (tmp_path / "m2").exists()
    r = inproc("train", work / "train.zarr", "-o", tmp_path / "m2", "-c", "2", "-q",
               "--checkpoint-dir", ck, "--checkpoint-replace")
    assert r.returncode == 0, r.stderr
    mans = [json.loads((ck / s / "manifest.json").read_text()) for s in _snaps(ck)]
    assert mans and all(m["run"]["params"]["C"] == 2 for m in mans)


def test_surface_refuses_a_classifiers_checkpoint_folder(work, tmp_path):
    ck = tmp_path / "ck"
    assert _checkpointed_train(work, ck).returncode == 0
    before = tree(ck)
    pts = tmp_path / "ball.xyz"
    rng = np.random.default_rng(0)
    P = rng.normal(size=(400, 3))
    np.savetxt(pts, P / np.linalg.norm(P, axis=1, keepdims=True))
    r = inproc("surface", pts, "-o", tmp_path / "s.ply", "-q", "--checkpoint-dir", ck)
    one_line_error(r, "surface", "of a different run")
    assert tree(ck) == before and not (tmp_path / "s.ply").exists()


def test_pruning_only_removes_the_runs_own_snapshots(tmp_path):
    from streamcvm.data import snapshots
    a, b = {"estimator": "A", "store": "x"}, {"estimator": "B", "store": "x"}
    for _ in range(3):
        snapshots.write(tmp_path, {"run": a}, {"v": np.zeros(2)}, keep=0)
    theirs = _snaps(tmp_path)
    for _ in range(3):
        snapshots.write(tmp_path, {"run": b}, {"v": np.ones(2)}, keep=1)
    left = _snaps(tmp_path)
    assert left[:3] == theirs and len(left) == 4


HOLD = textwrap.dedent("""
    import sys, time
    from streamcvm.data.snapshots import FolderLock
    lock = FolderLock(sys.argv[1])
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_second_writer_is_refused_and_a_dead_writers_lock_is_stale(work, tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(ck)], env=cli_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = _checkpointed_train(work, ck)
        one_line_error(r, "train", rf"in use by another streamcvm run \(pid {holder.pid} ")
        assert _snaps(ck) == []
    finally:
        holder.send_signal(signal.SIGKILL)
        assert holder.wait(30) == -signal.SIGKILL           # the kill landed
    r = _checkpointed_train(work, ck)                     # the dead run's lock is stale
    assert r.returncode == 0, r.stderr
    assert _snaps(ck) and not (ck / ".lock").exists()


# 2. outputs are created, never raced -----------------------------------------

def test_publish_never_replaces_a_path_that_appeared(tmp_path):
    tmp, dest = tmp_path / "work", tmp_path / "out"
    tmp.mkdir()
    (tmp / "mine").write_text("mine")
    dest.mkdir()
    (dest / "theirs").write_text("theirs")
    with pytest.raises(OutputRaced, match=r"kept at .*out\.unpublished-\d+"):
        publish(str(tmp), str(dest), replace=False)
    assert (dest / "theirs").read_text() == "theirs" and not (dest / "mine").exists()
    kept = list(tmp_path.glob("out.unpublished-*"))
    assert len(kept) == 1 and (kept[0] / "mine").read_text() == "mine"


def test_publish_replaces_only_the_path_it_was_allowed_to(tmp_path):
    from streamcvm.data.atomic import identity
    dest = tmp_path / "out"
    dest.write_text("old")
    seen = identity(str(dest))
    for n, text in enumerate(("new", "newer")):
        tmp = tmp_path / f"t{n}"
        tmp.write_text(text)
        if n == 0:
            publish(str(tmp), str(dest), replace=seen)       # the one it saw: replaced
            assert dest.read_text() == "new"
        else:                                                # it changed since: kept
            with pytest.raises(OutputRaced):
                publish(str(tmp), str(dest), replace=seen)
            assert dest.read_text() == "new"


def test_train_loses_a_race_in_one_line_and_keeps_its_model(work, tmp_path, monkeypatch):
    import streamcvm.data.atomic as atomic
    real = atomic.publish
    out = tmp_path / "m"

    def rival_first(tmp, path, replace=True):
        if os.fspath(path) == str(out):
            os.mkdir(path)
            Path(path, "model.json").write_text("the other run's")
        return real(tmp, path, replace)

    monkeypatch.setattr(atomic, "publish", rival_first)
    r = inproc("train", work / "train.zarr", "-o", out, "-e", "1e-2", "-q")
    one_line_error(r, "train", r"appeared or changed while this run was writing it.*"
                               r"m\.unpublished-\d+")
    assert (out / "model.json").read_text() == "the other run's"
    kept = list(tmp_path.glob("m.unpublished-*"))
    assert len(kept) == 1 and (kept[0] / "model.json").is_file()


def test_two_concurrent_trains_to_one_path_have_one_winner(tmp_path):
    """Two runs started together, each training for seconds (far longer than
    the start-up skew): both check M before either writes it."""
    store = synthetic.write_store(tmp_path / "big.zarr", "gaussian", 5000, seed=0)
    out = tmp_path / "m"
    cmd = [sys.executable, "-m", "streamcvm.cli", "train", str(store), "-o", str(out),
           "-e", "1e-4", "-q"]
    ps = [subprocess.Popen(cmd + ["--seed", str(s)], env=cli_env(), stderr=subprocess.PIPE,
                           text=True) for s in (1, 2)]
    res = [(p.wait(120), p.stderr.read()) for p in ps]
    assert sorted(rc for rc, _ in res) == [0, 1], res
    err = [e for rc, e in res if rc == 1][0].strip().splitlines()
    assert len(err) == 1 and ("unpublished" in err[0] or "already exists" in err[0]), err
    assert (out / "model.json").is_file()


# 3. store integrity ----------------------------------------------------------

def _chunk_files(store):
    return sorted(p for p in Path(store).rglob("c/*") if p.is_file()) + \
        sorted(p for p in Path(store).rglob("c/*/*") if p.is_file())


def _damage(path, how):
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        b = path.read_bytes()
        path.write_bytes(b[: len(b) // 2])
    else:
        b = bytearray(path.read_bytes())
        b[len(b) // 2] ^= 0x10
        path.write_bytes(bytes(b))


@pytest.mark.parametrize("how", ["delete", "truncate", "flip"])
def test_fuzz_every_zarr_chunk(work, tmp_path, how):
    """Every chunk file of the store in turn, damaged: evaluate (reads every
    row of X and y) or train (class_counts is read by training) ends in one
    line naming the damage; the model is untouched, no model is written."""
    files = _chunk_files(work / "train.zarr")
    assert len(files) == 7, files              # X and y, 3 chunks each; class_counts
    model = tree(work / "model")
    for f in files:
        s = tmp_path / f"{how}.zarr"
        shutil.copytree(work / "train.zarr", s)
        rel = f.relative_to(work / "train.zarr")
        _damage(s / rel, how)
        argv = ("train", s, "-o", tmp_path / "m", "-q") if rel.parts[0] == "class_counts" \
            else ("evaluate", s, work / "model")
        r = inproc(*argv)
        one_line_error(r, argv[0], rf"{how}\.zarr: damaged store.*"
                                   rf"(missing|checksum|cannot be read)")
        assert not (tmp_path / "m").exists()
        shutil.rmtree(s)
    assert tree(work / "model") == model


def test_train_refuses_a_damaged_zarr_chunk(work, tmp_path):
    s = tmp_path / "s.zarr"
    shutil.copytree(work / "train.zarr", s)
    _damage(sorted((s / "X" / "c").rglob("*"))[-1], "flip")
    r = inproc("train", s, "-o", tmp_path / "m", "-e", "1e-2", "-q")
    one_line_error(r, "train", "damaged store")
    assert not (tmp_path / "m").exists()


def _hdf5_chunks(path):
    import h5py
    out = []
    with h5py.File(path, "r") as f:
        for name in ("X", "y"):
            ds = f[name]
            for i in range(ds.id.get_num_chunks()):
                c = ds.id.get_chunk_info(i)
                out.append((name, c.byte_offset, c.size))
    return out


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_fuzz_every_hdf5_chunk(work, tmp_path, how):
    src = work / "train.h5"
    chunks = _hdf5_chunks(src)
    assert len(chunks) >= 6
    for name, off, size in chunks:
        s = tmp_path / "s.h5"
        shutil.copy(src, s)
        b = bytearray(s.read_bytes())
        if how == "flip":
            b[off + size // 2] ^= 0x10
        else:
            b = b[: off + size // 2]
        s.write_bytes(bytes(b))
        r = inproc("evaluate", s, work / "model")
        one_line_error(r, "evaluate", "s.h5: ")
        s.unlink()


def test_a_widened_store_has_every_chunk_file(tmp_path):
    """A dense store widened while written (an svmlight feature seen only
    after the first block) writes the earlier rows' new column chunks, so
    none is missing (the reader refuses a missing one)."""
    with StoreWriter(str(tmp_path / "w.zarr"), 3, chunk_rows=100) as w:
        w.append(np.ones((250, 3), np.float32), np.ones(250))
        w.grow_features(8)
        w.append(2 * np.ones((250, 8), np.float32), -np.ones(250))
        w.close()
    s = open_store(tmp_path / "w.zarr")
    X = s.rows(0, 500).X
    assert X.shape == (500, 8) and X[0, 7] == 0 and X[499, 7] == 2 and X[0, 0] == 1
    assert len(list((tmp_path / "w.zarr" / "X" / "c").glob("*/2"))) == 5


def test_store_attributes_are_checked(work, tmp_path):
    s = tmp_path / "s.zarr"
    shutil.copytree(work / "train.zarr", s)
    meta = json.loads((s / "zarr.json").read_text())
    meta["attributes"]["class_totals"] = [1, 599]
    (s / "zarr.json").write_text(json.dumps(meta))
    r = inproc("info", s)
    one_line_error(r, "info", "attributes do not match their checksum")


def test_a_store_cannot_lose_its_checksums_in_silence(work, tmp_path):
    """The attributes (under their digest) say which checksum the chunks
    carry: metadata edited to drop the crc32c codec is damage, not an old
    store."""
    s = tmp_path / "s.zarr"
    shutil.copytree(work / "train.zarr", s)
    meta = json.loads((s / "zarr.json").read_text())
    arrays = meta["consolidated_metadata"]["metadata"]
    arrays["X"]["codecs"] = [c for c in arrays["X"]["codecs"] if c["name"] != "crc32c"]
    (s / "zarr.json").write_text(json.dumps(meta))
    r = inproc("info", s)
    one_line_error(r, "info", "written with crc32c chunk checksums, its arrays now have none")


def _old_store(path, X, y):
    with StoreWriter(str(path), X.shape[1], chunk_rows=100, checksums=False) as w:
        w.append(X, y)
        w.close()


def test_stores_without_checksums_are_read_and_say_what_they_lack(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    _old_store(tmp_path / "old.zarr", X, y)
    s = open_store(tmp_path / "old.zarr")
    assert s.checksums is None
    assert np.array_equal(s.rows(0, 300).X, X)
    r = inproc("info", tmp_path / "old.zarr")
    assert r.returncode == 0, r.stderr
    assert "integrity  none: written before stores carried checksums" in r.stdout
    new = inproc("info", Path(__file__).parent / "nothing")      # sanity: refusal path
    assert new.returncode == 1
    r = inproc("train", tmp_path / "old.zarr", "-o", tmp_path / "m", "-q")
    assert r.returncode == 0, r.stderr


def test_nan_in_a_store_without_allow_nan_is_damage(tmp_path, work):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 22)).astype(np.float32)
    X[123, 4] = np.nan
    _old_store(tmp_path / "nan.zarr", X, np.where(X[:, 0] > 0, 1.0, -1.0))
    for argv in (("train", tmp_path / "nan.zarr", "-o", tmp_path / "m", "-q", "--full-pass"),
                 ("evaluate", tmp_path / "nan.zarr", work / "model"),
                 ("predict", tmp_path / "nan.zarr", work / "model", "-o", tmp_path / "p.txt")):
        r = inproc(*argv)
        one_line_error(r, argv[0], r"row 123 \(0-based\), feature 4 is nan, in a store "
                                   r"ingested without --allow-nan")
    assert not (tmp_path / "m").exists() and not (tmp_path / "p.txt").exists()


def test_nan_in_an_allow_nan_store_is_refused_in_one_line(tmp_path, work):
    csv = tmp_path / "d.csv"
    rows = [f"{1 if i % 2 else -1}," + ",".join(["0.5"] * 22) for i in range(300)]
    rows[7] = "1," + ",".join(["0.5"] * 3 + [""] + ["0.5"] * 18)
    csv.write_text("\n".join(rows) + "\n")
    r = inproc("ingest", csv, "-o", tmp_path / "n.zarr", "--allow-nan", "--no-header",
               "--label-col", "0")
    assert r.returncode == 0, r.stderr
    for argv in (("train", tmp_path / "n.zarr", "-o", tmp_path / "m", "-q"),
                 ("evaluate", tmp_path / "n.zarr", work / "model"),
                 ("predict", tmp_path / "n.zarr", work / "model", "-o", tmp_path / "p.zarr")):
        r = inproc(*argv)
        one_line_error(r, argv[0], r"row 7 \(0-based\), feature 3 is nan: the store was "
                                   r"ingested with --allow-nan")
    s = open_store(tmp_path / "n.zarr", check_finite=False)     # the data is all there
    assert np.isnan(s.rows(0, 300).X[7, 3])
    with pytest.raises(StoreError):
        open_store(tmp_path / "n.zarr").rows(0, 300)


# 4. every numeric parameter validated ----------------------------------------

BAD_NUMBERS = [
    ("train", "-g", "nan"), ("train", "-g", "inf"), ("train", "-g", "-1"),
    ("train", "-c", "nan"), ("train", "-c", "inf"), ("train", "-e", "nan"),
    ("train", "-e", "1.5"), ("train", "--mu", "nan"), ("train", "--checkpoint-every", "nan"),
    ("features", "-g", "nan"), ("features", "-c", "inf"), ("features", "-e", "nan"),
    ("features", "--checkpoint-every", "inf"),
]


@pytest.mark.parametrize("command,opt,value", BAD_NUMBERS)
def test_non_finite_numbers_are_refused(work, tmp_path, command, opt, value):
    r = inproc(command, work / "train.zarr", "-o", tmp_path / "out.zarr", opt, value, "-q")
    one_line_error(r, command, rf"{opt.lstrip('-')}.*{value}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("scales", ["nan", "0.2,nan", "0.2,inf", "0.2,0"])
def test_surface_scales_are_checked(tmp_path, scales):
    r = inproc("surface", tmp_path / "none.xyz", "-o", tmp_path / "s.ply", "--scales", scales)
    one_line_error(r, "surface", "widths must be positive finite")


@pytest.mark.parametrize("kw", [{"gamma": float("nan")}, {"gamma": float("inf")},
                                {"C": float("nan")}, {"C": float("inf")},
                                {"eps": float("nan")}])
def test_estimators_refuse_non_finite_parameters(kw):
    X = np.random.default_rng(0).normal(size=(100, 3))
    with pytest.raises(ValueError):
        CVMClassifier(**kw).fit(X, np.where(X[:, 0] > 0, 1, -1))


def test_kernels_refuse_non_finite_parameters():
    from streamcvm.solvers.kernels import Kernel
    for kw in ({"gamma": float("nan")}, {"gamma": float("inf")}):
        with pytest.raises(ValueError):
            Kernel("rbf", **kw)
    with pytest.raises(ValueError):
        Kernel("poly", gamma=1.0, coef0=float("nan"), degree=3)


# 5. models checked whole -------------------------------------------------------

def _model_copy(work, tmp_path):
    m = tmp_path / "m"
    shutil.copytree(work / "model", m)
    return m


def _edit(m, change, resign=False):
    from streamcvm.estimators.model import DIGEST_KEY, manifest_digest
    meta = json.loads((m / "model.json").read_text())
    change(meta)
    if resign:
        meta.pop(DIGEST_KEY, None)
        meta[DIGEST_KEY] = manifest_digest(meta)
    (m / "model.json").write_text(json.dumps(meta))


def _refused_everywhere(work, m, phrase):
    from streamcvm.estimators.model import ModelError, load_model
    for argv in (("info", m), ("predict", work / "train.zarr", m, "-o", m.parent / "p.txt"),
                 ("evaluate", work / "train.zarr", m)):
        one_line_error(inproc(*argv), argv[0], phrase)
    with pytest.raises(ModelError, match=phrase):
        load_model(m)
    assert not (m.parent / "p.txt").exists()


def test_a_truncated_model_json_is_refused(work, tmp_path):
    m = _model_copy(work, tmp_path)
    b = (m / "model.json").read_bytes()
    (m / "model.json").write_bytes(b[: len(b) // 2])
    _refused_everywhere(work, m, "model.json")


def test_an_edited_model_json_is_refused(work, tmp_path):
    m = _model_copy(work, tmp_path)
    _edit(m, lambda meta: meta["kernel"].__setitem__("gamma", 2.0))
    _refused_everywhere(work, m, "checksum does not match")


@pytest.mark.parametrize("change,phrase", [
    (lambda meta: meta.pop("kernel"), "kernel"),
    (lambda meta: meta["kernel"].__setitem__("gamma", -1.0), "gamma"),
    (lambda meta: meta.__setitem__("n_features_in", "22"), "n_features_in"),
])
def test_a_well_signed_but_invalid_model_is_refused(work, tmp_path, change, phrase):
    """The fields are checked too (a model of an older version has no
    checksum, or one written by hand)."""
    m = _model_copy(work, tmp_path)
    _edit(m, change, resign=True)
    _refused_everywhere(work, m, phrase)


def test_a_damaged_model_array_is_refused(work, tmp_path):
    m = _model_copy(work, tmp_path)
    npy = sorted(m.rglob("*.npy"))[0]
    b = bytearray(npy.read_bytes())
    b[-3] ^= 0x01
    npy.write_bytes(bytes(b))
    _refused_everywhere(work, m, npy.name)


def test_a_model_without_a_checksum_still_loads(work, tmp_path):
    from streamcvm.estimators.model import DIGEST_KEY, load_model
    m = _model_copy(work, tmp_path)
    _edit(m, lambda meta: meta.pop(DIGEST_KEY))
    assert load_model(m) is not None
    r = inproc("evaluate", work / "train.zarr", m, "--json")
    assert r.returncode == 0, r.stderr


# 6. URLs -------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ("ingest", "{csv}", "-o", "{url}x.zarr"),
    ("train", "{store}", "-o", "{url}m.model", "-q"),
    ("features", "{store}", "-o", "{url}f.zarr", "-q"),
    ("predict", "{store}", "{model}", "-o", "{url}p.zarr"),
])
@pytest.mark.parametrize("url", ["memory://", "s3://bucket/"])
def test_url_outputs_are_refused_not_written_as_local_folders(work, tmp_path, monkeypatch,
                                                              argv, url):
    if url == "s3://bucket/" and argv[0] == "train":
        pytest.skip("a model folder is written to any fsspec URL it can reach")
    csv = tmp_path / "in.csv"
    csv.write_text("1,0.5\n-1,0.25\n")
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    args = [a.format(csv=csv, url=url, store=work / "train.zarr", model=work / "model")
            for a in argv]
    r = inproc(*args)
    one_line_error(r, argv[0], "memory://|URL")
    assert sorted(os.listdir(tmp_path)) == before


# 7. surfaces ------------------------------------------------------------------------

def _points(tmp_path, P):
    f = tmp_path / "p.xyz"
    np.savetxt(f, P)
    return f


@pytest.mark.parametrize("case,phrase", [
    ("ten", "at least 32 points"),
    ("coplanar", "plane or a line"),
    ("outlier", "plane or a line, or a few far outliers"),
])
def test_surface_refuses_degenerate_points(tmp_path, case, phrase):
    rng = np.random.default_rng(0)
    P = rng.normal(size=(400, 3))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    if case == "ten":
        P = P[:10]
    elif case == "coplanar":
        P[:, 2] = 0.0
    else:
        P[0, 1] = 1e30
    r = inproc("surface", _points(tmp_path, P), "-o", tmp_path / "s.ply")   # not -q
    one_line_error(r, "surface", phrase)
    assert not (tmp_path / "s.ply").exists()


def test_an_empty_mesh_is_an_error():
    from streamcvm.apps.surface import SurfaceModel, mesh
    model = SurfaceModel(np.zeros(3), 1.0, [], {})       # f = 0: no level set f = 1
    P = np.random.default_rng(0).normal(size=(100, 3))
    with pytest.raises(ValueError, match="does not cross"):
        mesh(model, P, grid=16)


# 8. start-up without a writable cache -------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run as a user without a writable cache")
def test_cli_starts_without_a_writable_package_folder_or_home():
    """As 'nobody' (cannot write the checkout's __pycache__, HOME is not a
    folder): --version, and an ingest, which loads cached numba kernels."""
    import tempfile
    tmp_path = Path(tempfile.mkdtemp(prefix="streamcvm-nobody-"))
    tmp_path.chmod(0o777)
    try:
        _as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _as_nobody(tmp_path):
    (tmp_path / "d.csv").write_text("".join(f"{i % 2},{i}.5\n" for i in range(50)))
    (tmp_path / "d.csv").chmod(0o644)
    env = {k: v for k, v in cli_env().items() if not k.startswith("NUMBA_CACHE")}
    env["HOME"] = "/nonexistent"
    env.pop("XDG_CACHE_HOME", None)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    readable = subprocess.run(nobody + [sys.executable, "-c", "import numba, zarr"], env=env,
                              cwd=tmp_path, capture_output=True)
    if readable.returncode != 0:
        pytest.skip("'nobody' cannot run this Python or read its packages here")
    probe = subprocess.run(nobody + ["sh", "-c", f"test -w {REPO}/streamcvm/__pycache__"],
                           env=env)
    assert probe.returncode != 0                  # the package folder is not writable there
    for argv in (["--version"], ["ingest", "d.csv", "-o", "d.zarr"]):
        r = subprocess.run(nobody + [sys.executable, "-m", "streamcvm.cli", *argv], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
    assert (tmp_path / "d.zarr" / "zarr.json").is_file()


# 9. ingest ---------------------------------------------------------------------------

@pytest.mark.parametrize("first", ["text", "number"])
def test_mixed_text_and_number_labels_are_refused(tmp_path, first):
    text = ["cat,1.0", "dog,2.0"] * 3
    nums = ["1,1.0", "2,2.0"] * 3
    rows = text + nums if first == "text" else nums + text
    f = tmp_path / "d.csv"
    f.write_text("\n".join(rows) + "\n")
    r = inproc("ingest", f, "-o", tmp_path / "d.zarr", "--no-header", "--label-col", "0")
    one_line_error(r, "ingest", r"d\.csv:\d+: .*label")
    assert not (tmp_path / "d.zarr").exists()


def test_the_same_input_twice_is_refused(tmp_path):
    f = tmp_path / "d.svm"
    f.write_text("1 1:0.5\n-1 1:0.25\n")
    os.link(f, tmp_path / "alias.svm")
    for second in (f, tmp_path / "alias.svm"):
        r = inproc("ingest", f, second, "-o", tmp_path / "d.zarr")
        one_line_error(r, "ingest", "given twice")
        assert not (tmp_path / "d.zarr").exists()
