"""Synthetic generators, the store writer's chunking, and text written then ingested."""
import os

import numpy as np
import pytest
import scipy.sparse as sp

import streamcvm
from streamcvm.ingest import StoreWriter, ingest
from streamcvm.data import synthetic


def _read_all(store):
    chunks = list(store)
    y = np.concatenate([c.y for c in chunks])
    if store.sparse:
        X = sp.vstack([c.X for c in chunks]).tocsr()
    else:
        X = np.concatenate([c.X for c in chunks])
    return X, y


def test_blocks_are_reproducible_and_independent():
    a = list(synthetic.blocks("gaussian", 10_000, block_rows=3000, seed=7))
    b = list(synthetic.blocks("gaussian", 10_000, block_rows=3000, seed=7, n_jobs=1))
    assert [len(y) for _, y in a] == [3000, 3000, 3000, 1000]
    for (X1, y1), (X2, y2) in zip(a, b):
        np.testing.assert_array_equal(X1, X2)
        np.testing.assert_array_equal(y1, y2)
    # block i depends on (seed, i) only
    X2, _ = synthetic.gaussian_block(2, 3000, seed=7)
    np.testing.assert_array_equal(X2, a[2][0])
    c = list(synthetic.blocks("gaussian", 3000, block_rows=3000, seed=8))
    assert not np.array_equal(c[0][0], a[0][0])


def test_friedman1_follows_its_formula():
    X, y = synthetic.friedman1_block(0, 20_000, d=10, seed=3, noise=0.0)
    x = X.astype(np.float64)
    f = (10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2
         + 10 * x[:, 3] + 5 * x[:, 4])
    np.testing.assert_allclose(y, f, rtol=0, atol=1e-9)
    assert X.min() >= 0 and X.max() < 1
    _, yn = synthetic.friedman1_block(0, 20_000, d=10, seed=3, noise=1.0)
    assert abs(np.std(yn - f) - 1.0) < 0.03
    with pytest.raises(ValueError):
        synthetic.friedman1_block(0, 10, d=4)


def test_text_rows_are_unit_length_sorted_and_labelled():
    (ip, ind, dat), y = synthetic.text_block(0, 2000, d=5000, seed=1)
    X = sp.csr_matrix((dat, ind, ip), shape=(2000, 5000))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-5)
    assert X.has_sorted_indices
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert 0.3 < np.mean(y > 0) < 0.7
    assert 30 < X.nnz / 2000 < 80


@pytest.mark.parametrize("fmt", ["zarr", "hdf5"])
@pytest.mark.parametrize("kind", ["gaussian", "text"])
def test_write_store_equals_blocks(tmp_path, fmt, kind):
    path = str(tmp_path / ("s.zarr" if fmt == "zarr" else "s.h5"))
    d = 22 if kind == "gaussian" else 3000
    synthetic.write_store(path, kind, 5000, d=d, seed=2, chunk_rows=1500, fmt=fmt)
    s = streamcvm.open_store(path)
    assert (s.n, s.d, s.n_chunks, s.chunk_rows) == (5000, d, 4, 1500)
    assert s.chunk_bounds(3) == (4500, 5000)
    X, y = _read_all(s)
    blocks = list(synthetic.blocks(kind, 5000, d=d, seed=2))
    yr = np.concatenate([b[1] for b in blocks])
    np.testing.assert_array_equal(y, yr)
    if kind == "text":
        Xr = sp.vstack([sp.csr_matrix((b[0][2], b[0][1], b[0][0]), shape=(len(b[1]), d))
                        for b in blocks]).tocsr()
        assert (X != Xr).nnz == 0
    else:
        np.testing.assert_array_equal(X, np.concatenate([b[0] for b in blocks]))
    # per-chunk class counts add up
    cc = s.class_counts
    assert cc.shape == (4, 2)
    assert cc.sum(axis=0).tolist() == [int((yr == -1).sum()), int((yr == 1).sum())]
    # the fingerprint is the content's: an in-memory store of the same data agrees
    mem = streamcvm.as_store(X, y, chunk_rows=1500)
    assert mem.fingerprint == s.fingerprint
    s.close()


@pytest.mark.parametrize("text_format", ["svmlight", "csv"])
def test_text_written_then_ingested_roundtrips(tmp_path, text_format):
    src = str(tmp_path / ("g.svm.gz" if text_format == "svmlight" else "g.csv.bz2"))
    synthetic.write_text(src, "gaussian", 3000, text_format=text_format, seed=4, decimals=6)
    out = str(tmp_path / "g.zarr")
    ingest([src], out, label_col=0, block_size=4096)
    s = streamcvm.open_store(out)
    X, y = _read_all(s)
    Xr, yr = next(iter(synthetic.blocks("gaussian", 3000, block_rows=3000, seed=4)))
    np.testing.assert_array_equal(y, yr)
    # six decimals written: the stored value is the float32 of the rounded value
    np.testing.assert_array_equal(X, np.round(Xr.astype(np.float64), 6).astype(np.float32))
    assert s.attrs["sources"][0]["compression"] == ("gzip" if text_format == "svmlight" else "bz2")


def test_writer_chunks_whole_and_aborts_cleanly(tmp_path):
    path = str(tmp_path / "w.zarr")
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((m, 5)).astype(np.float32) for m in (7, 300, 1, 250, 42)]
    with StoreWriter(path, 5, chunk_rows=100) as w:
        for X in parts:
            w.append(X, np.arange(len(X), dtype=np.float64))
        w.close()
    s = streamcvm.open_store(path)
    X, _ = _read_all(s)
    np.testing.assert_array_equal(X, np.concatenate(parts))
    assert s.n_chunks == 6 and s.chunk(5).X.shape == (0 + 600 - 500, 5)
    # an exception inside the writer leaves neither the store nor debris
    path2 = str(tmp_path / "w2.zarr")
    with pytest.raises(RuntimeError):
        with StoreWriter(path2, 5, chunk_rows=100) as w:
            w.append(parts[1], np.zeros(300))
            raise RuntimeError("boom")
    assert not os.path.exists(path2)
    assert [p for p in os.listdir(tmp_path) if ".partial-" in p] == []


def test_writer_refuses_existing_and_overwrites(tmp_path):
    path = str(tmp_path / "w.zarr")
    synthetic.write_store(path, "gaussian", 100, seed=0)
    with pytest.raises(FileExistsError):
        StoreWriter(path, 22)
    synthetic.write_store(path, "gaussian", 50, seed=1, overwrite=True)
    assert streamcvm.open_store(path).n == 50


def test_sparse_array_store_chunks_are_views():
    X = sp.random(1000, 50, density=0.1, format="csr", dtype=np.float32, random_state=0)
    s = streamcvm.as_store(X, np.ones(1000), chunk_rows=300)
    c = s.chunk(1)
    assert np.shares_memory(c.X.data, X.data)
    np.testing.assert_array_equal(c.X.toarray(), X[300:600].toarray())
