"""A store's metadata and chunk files are checked against what streamcvm
wrote: an array retyped in the metadata, a chunk file copied over another,
a damaged HDF5 object header are one-line refusals, never data; a
percent-encoded ``file://`` URL opens the store it names."""
import json
import shutil
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from conftest import inproc, one_line_error

from streamcvm.data import synthetic
from streamcvm.data.store import ATTRS_DIGEST, StoreError, attrs_digest, open_store
from streamcvm.data.writer import StoreWriter


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A classification store (3 chunks of X and y) in both formats, and a model."""
    d = tmp_path_factory.mktemp("store_integrity")
    synthetic.write_store(d / "train.zarr", "gaussian", 600, seed=0, chunk_rows=200)
    synthetic.write_store(d / "train.h5", "gaussian", 600, seed=0, chunk_rows=200)
    r = inproc("train", d / "train.zarr", "-o", d / "model", "-e", "1e-2", "-q")
    assert r.returncode == 0, r.stderr
    return d


def _copy(work, tmp_path, name="s.zarr"):
    s = tmp_path / name
    shutil.copytree(work / "train.zarr", s)
    return s


def _edit_array_meta(store, name, change):
    """Apply ``change`` to array ``name``'s metadata, in its own zarr.json and
    in the consolidated metadata, as a hand edit would."""
    own = store / name / "zarr.json"
    meta = json.loads(own.read_text())
    change(meta)
    own.write_text(json.dumps(meta))
    root = json.loads((store / "zarr.json").read_text())
    change(root["consolidated_metadata"]["metadata"][name])
    (store / "zarr.json").write_text(json.dumps(root))


def _retype(dtype):
    def change(meta):
        meta["data_type"] = dtype
    return change


def _big_endian(meta):
    for c in meta["codecs"]:
        if c["name"] == "bytes":
            c["configuration"]["endian"] = "big"


def _edit_attrs(store, change):
    """Edit the store's attributes and sign them again (what a store written
    before some attribute existed looks like)."""
    root = json.loads((store / "zarr.json").read_text())
    attrs = root["attributes"]
    change(attrs)
    attrs[ATTRS_DIGEST] = attrs_digest(attrs)
    (store / "zarr.json").write_text(json.dumps(root))


def _as_written_before_manifests(store):
    _edit_attrs(store, lambda a: [a.pop(k, None) for k in ("arrays", "chunk_manifest")])


# 1. the arrays' metadata ------------------------------------------------------

@pytest.mark.parametrize("command", ["train", "evaluate", "info"])
@pytest.mark.parametrize("name, change, phrase", [
    ("X", _retype("int32"), "array X has dtype <i4, streamcvm writes float32"),
    ("y", _retype("int64"), "array y has dtype <i8, streamcvm writes float64"),
    ("X", _big_endian, "array X has dtype >f4|array X has codecs"),
])
def test_array_metadata_edits_are_refused(work, tmp_path, command, name, change, phrase):
    s = _copy(work, tmp_path)
    _edit_array_meta(s, name, change)
    argv = {"train": ("train", s, "-o", tmp_path / "m", "-q"),
            "evaluate": ("evaluate", s, work / "model"),
            "info": ("info", s)}[command]
    r = inproc(*argv)
    one_line_error(r, command, rf"s\.zarr: damaged store \(({phrase})")
    assert not (tmp_path / "m").exists()


def test_a_retyped_array_is_refused_in_a_store_without_a_layout_record(work, tmp_path):
    """Stores written before the layout was recorded are checked against
    the dtypes streamcvm always writes."""
    s = _copy(work, tmp_path)
    _as_written_before_manifests(s)
    assert open_store(s).rows(0, 600).X.shape == (600, 22)
    _edit_array_meta(s, "X", _retype("int32"))
    with pytest.raises(StoreError, match=r"s\.zarr: damaged store \(array X has dtype <i4"):
        open_store(s)


def test_an_edited_chunk_grid_is_refused(work, tmp_path):
    s = _copy(work, tmp_path)

    def change(meta):
        meta["chunk_grid"]["configuration"]["chunk_shape"] = [200, 11]
    _edit_array_meta(s, "X", change)
    with pytest.raises(StoreError, match=r"s\.zarr: damaged store \(array X has chunks "
                                         r"\[200, 11\], it was written with \[200, 22\]"):
        open_store(s)


# 2. a chunk reads only at its own place ---------------------------------------

@pytest.mark.parametrize("command", ["train", "evaluate"])
@pytest.mark.parametrize("src, dst", [("X/c/0/0", "X/c/1/0"), ("y/c/2", "y/c/0")])
def test_a_chunk_copied_over_another_is_refused(work, tmp_path, command, src, dst):
    s = _copy(work, tmp_path)
    shutil.copy(s / src, s / dst)
    argv = ("train", s, "-o", tmp_path / "m", "-q") if command == "train" else \
        ("evaluate", s, work / "model")
    r = inproc(*argv)
    one_line_error(r, command, rf"s\.zarr: damaged store: {dst.split('/')[0]} rows .* "
                               rf"\(the chunk file {dst} is not the chunk written there")
    assert not (tmp_path / "m").exists()


def test_swapped_chunks_are_refused_and_the_others_still_read(work, tmp_path):
    s = _copy(work, tmp_path)
    a, b = (s / "y/c/0").read_bytes(), (s / "y/c/1").read_bytes()
    (s / "y/c/0").write_bytes(b)
    (s / "y/c/1").write_bytes(a)
    st = open_store(s)
    for i in (0, 1):
        with pytest.raises(StoreError, match=rf"y rows .*the chunk file y/c/{i} is not"):
            st.chunk(i)
    good = open_store(work / "train.zarr").chunk(2)
    assert np.array_equal(st.chunk(2).y, good.y)


def test_the_manifest_is_under_the_attributes_checksum(work, tmp_path):
    s = _copy(work, tmp_path)
    root = json.loads((s / "zarr.json").read_text())
    m = root["attributes"]["chunk_manifest"]["chunks"]
    m["y/c/0"], m["y/c/1"] = m["y/c/1"], m["y/c/0"]
    (s / "zarr.json").write_text(json.dumps(root))
    with pytest.raises(StoreError, match="attributes do not match their checksum"):
        open_store(s)


def test_a_store_written_before_chunk_manifests_still_opens(work, tmp_path):
    s = _copy(work, tmp_path)
    _as_written_before_manifests(s)
    st = open_store(s)
    assert np.array_equal(st.rows(0, 600).y, open_store(work / "train.zarr").rows(0, 600).y)
    r = inproc("evaluate", s, work / "model")
    assert r.returncode == 0, r.stderr


def test_every_written_chunk_is_in_the_manifest(tmp_path):
    """Dense widened, sparse and qid/weight stores: the manifest names every
    chunk file there is (none trimmed away is left in it) and all read."""
    with StoreWriter(str(tmp_path / "w.zarr"), 3, chunk_rows=100, has_qid=True,
                     has_weight=True) as w:
        w.append(np.ones((250, 3), np.float32), np.ones(250), np.arange(250),
                 np.ones(250, np.float32))
        w.grow_features(8)
        w.append(2 * np.ones((250, 8), np.float32), -np.ones(250), np.arange(250),
                 np.ones(250, np.float32))
        w.close()
    rng = np.random.default_rng(0)
    import scipy.sparse as sp
    M = sp.random(300, 50, density=0.1, format="csr", dtype=np.float32, random_state=0)
    with StoreWriter(str(tmp_path / "sp.zarr"), 50, sparse=True, chunk_rows=64) as w:
        w.append((M.indptr, M.indices, M.data), rng.choice([-1.0, 1.0], 300))
        w.close()
    for name in ("w.zarr", "sp.zarr"):
        root = tmp_path / name
        st = open_store(root)
        files = {p.relative_to(root).as_posix() for p in root.rglob("*")
                 if p.is_file() and "/c/" in "/" + p.relative_to(root).as_posix()}
        assert set(st.attrs["chunk_manifest"]["chunks"]) == files
        for i in range(st.n_chunks):
            st.chunk(i)
        assert st.class_counts is not None
    assert (open_store(tmp_path / "sp.zarr").rows(0, 300).X != M).nnz == 0


def _h5_copy_chunk(path, name, src, dst):
    """Write chunk ``src`` of HDF5 array ``name`` over chunk ``dst`` (row
    chunk indices), its stored bytes as they are: a chunk at another place."""
    import h5py
    with h5py.File(path, "r+") as f:
        ds = f[name]
        off = tuple([0] * (ds.ndim - 1))
        mask, raw = ds.id.read_direct_chunk((src * ds.chunks[0],) + off)
        ds.id.write_direct_chunk((dst * ds.chunks[0],) + off, raw, mask)


@pytest.mark.parametrize("command", ["train", "evaluate"])
@pytest.mark.parametrize("name, src, dst", [("X", 0, 1), ("y", 2, 0)])
def test_an_hdf5_chunk_copied_over_another_is_refused(work, tmp_path, command, name, src,
                                                      dst):
    s = tmp_path / "s.h5"
    shutil.copy(work / "train.h5", s)
    _h5_copy_chunk(s, name, src, dst)
    argv = ("train", s, "-o", tmp_path / "m", "-q") if command == "train" else \
        ("evaluate", s, work / "model")
    r = inproc(*argv)
    key = f"{name}/c/{dst}" + ("/0" if name == "X" else "")
    one_line_error(r, command, rf"s\.h5: damaged store: {name} rows .* "
                               rf"\(the chunk file {key} is not the chunk written there")
    assert not (tmp_path / "m").exists()


def test_an_hdf5_store_written_before_chunk_manifests_still_opens(work, tmp_path):
    import h5py
    s = tmp_path / "s.h5"
    shutil.copy(work / "train.h5", s)
    with h5py.File(s, "r+") as f:
        attrs = {k: json.loads(v) for k, v in f.attrs.items()}
        for k in ("arrays", "chunk_manifest"):
            del f.attrs[k]
            attrs.pop(k)
        f.attrs[ATTRS_DIGEST] = json.dumps(attrs_digest(attrs))
    _h5_copy_chunk(s, "y", 2, 0)          # not detected: the old level of checking
    st = open_store(s)
    assert "chunk_manifest" not in st.attrs
    assert np.array_equal(st.chunk(0).y, open_store(work / "train.h5").chunk(2).y)


# 3. a damaged HDF5 object header -----------------------------------------------

@pytest.mark.parametrize("name", ["X", "y"])
def test_a_damaged_hdf5_object_header_is_one_line(work, tmp_path, name):
    import h5py
    s = tmp_path / "s.h5"
    shutil.copy(work / "train.h5", s)
    with h5py.File(s, "r") as f:
        addr = h5py.h5o.get_info(f[name].id).addr
    b = bytearray(s.read_bytes())
    for k in range(8):
        b[addr + k] ^= 0xFF
    s.write_bytes(bytes(b))
    for argv in (("info", s), ("evaluate", s, work / "model")):
        r = inproc(*argv)
        one_line_error(r, argv[0], rf"s\.h5: damaged store: its object {name} cannot be "
                                   rf"opened")


# 4. percent-encoded file:// URLs ---------------------------------------------------

@pytest.mark.parametrize("name", ["my store.zarr", "my store.h5", "100%.zarr"])
def test_a_percent_encoded_file_url_opens_the_store(work, tmp_path, name):
    src = work / ("train.h5" if name.endswith(".h5") else "train.zarr")
    dst = tmp_path / name
    (shutil.copy if src.is_file() else shutil.copytree)(src, dst)
    url = "file://" + quote(str(dst))
    assert "%" in url
    st = open_store(url)
    assert st.path == url and st.n == 600
    assert np.array_equal(st.rows(0, 600).y, open_store(src).rows(0, 600).y)
    r = inproc("evaluate", url, work / "model")
    assert r.returncode == 0, r.stderr
    import pickle
    assert pickle.loads(pickle.dumps(st)).n == 600


def test_a_file_url_of_nothing_is_one_line(tmp_path):
    url = "file://" + quote(str(tmp_path / "no store.zarr"))
    r = inproc("info", url)
    one_line_error(r, "info", "no such store")
    assert Path(tmp_path).exists()
