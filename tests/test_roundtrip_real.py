"""Real files in, store out, compared value for value with scikit-learn / pandas.

X is compared as float32 (the reference cast with ``.astype(np.float32)``),
y as float64. The store is read back by concatenating ``store.chunk(i)``.
Skipped when ../shared/data/raw is absent.
"""
import pickle
import re

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import RAW, raw_file, read_all, run_cli
from streamcvm.ingest import ingest
from streamcvm import ArrayStore, open_store

if not RAW.is_dir():
    pytest.skip(f"real data folder {RAW} is absent", allow_module_level=True)

pd = pytest.importorskip("pandas")
sklearn_datasets = pytest.importorskip("sklearn.datasets")
load_svmlight_file = sklearn_datasets.load_svmlight_file


# ---------------------------------------------------------------------------
# helpers

def assert_X_equal(X_store, X_ref):
    """Exact equality of the stored X (float32) with a reference matrix."""
    X_ref32 = X_ref.astype(np.float32)
    assert X_store.shape == X_ref32.shape
    if sp.issparse(X_store):
        assert X_store.dtype == np.float32
        a = sp.csr_matrix(X_store, copy=True)
        b = sp.csr_matrix(X_ref32, copy=True)
        a.eliminate_zeros()
        b.eliminate_zeros()
        a.sort_indices()
        b.sort_indices()
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.data, b.data)
    else:
        assert X_store.dtype == np.float32
        ref = X_ref32.toarray() if sp.issparse(X_ref32) else np.asarray(X_ref32)
        np.testing.assert_array_equal(X_store, ref)


def assert_y_equal(y_store, y_ref):
    assert y_store.dtype == np.float64
    np.testing.assert_array_equal(y_store, np.asarray(y_ref, dtype=np.float64))


def check_store_api(store, X_ref, y_ref):
    """n, d, chunking, class counts and chunk-by-chunk contents."""
    n = X_ref.shape[0]
    assert store.n == len(store) == n
    assert store.d == X_ref.shape[1]
    assert store.n_chunks == -(-n // store.chunk_rows)
    bounds = [store.chunk_bounds(i) for i in range(store.n_chunks)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
        assert b0 == a1
        assert b0 - a0 == store.chunk_rows
    with pytest.raises(IndexError):
        store.chunk_bounds(store.n_chunks)
    for i, (a, b) in enumerate(bounds):
        c = store.chunk(i)
        assert c.X.shape == (b - a, store.d)
        assert len(c.y) == b - a
    # per-chunk class counts
    cc = store.class_counts
    vals, counts = np.unique(y_ref, return_counts=True)
    np.testing.assert_array_equal(store.classes, vals)
    assert cc.shape == (store.n_chunks, len(vals))
    np.testing.assert_array_equal(cc.sum(axis=0), counts)
    for i, (a, b) in enumerate(bounds):
        v, c = np.unique(y_ref[a:b], return_counts=True)
        row = dict(zip(store.classes.tolist(), cc[i].tolist()))
        assert {k: x for k, x in row.items() if x} == dict(zip(v.tolist(), c.tolist()))


# ---------------------------------------------------------------------------
# svmlight

def test_ijcnn1_bz2_dense(raw, tmp_path):
    src = raw_file(raw, "ijcnn1/ijcnn1.trn.bz2")
    res = ingest(src, tmp_path / "ij.zarr", sparse="auto")
    store = open_store(tmp_path / "ij.zarr")
    assert res["n"] == store.n == 49_990
    assert not store.sparse, "ijcnn1 is ~60% nonzero: --auto must store it dense"
    assert store.d == 22
    X, y, qid = read_all(store)
    assert qid is None
    Xr, yr = load_svmlight_file(str(src), zero_based=False, n_features=store.d)
    assert_X_equal(X, Xr)
    assert_y_equal(y, yr)
    assert int((y == 1).sum()) == 4_853
    assert store.n_chunks >= 2
    check_store_api(store, Xr, yr)
    assert store.attrs["sources"][0]["compression"] == "bz2"
    # same contents, same fingerprint: in memory, or stored with other chunks
    assert ArrayStore(Xr.toarray().astype(np.float32), yr).fingerprint == store.fingerprint
    ingest(src, tmp_path / "ij2.zarr", chunk_rows=5_000, sparse=False)
    other = open_store(tmp_path / "ij2.zarr")
    assert other.n_chunks == 10 and other.fingerprint == store.fingerprint
    # dense to_dask: one dask block per store chunk
    Xd, yd = other.to_dask()
    assert Xd.numblocks == (10, 1)
    np.testing.assert_array_equal(Xd.compute(scheduler="sync"), X)
    np.testing.assert_array_equal(yd.compute(scheduler="sync"), y)


@pytest.fixture(scope="module")
def a9a_store(tmp_path_factory):
    """a9a + a9a.t appended into one store (two sources)."""
    if not (RAW / "adult_a9a" / "a9a").is_file() or not (RAW / "adult_a9a" / "a9a.t").is_file():
        pytest.skip("a9a files absent")
    out = tmp_path_factory.mktemp("a9a") / "a9a.zarr"
    ingest([RAW / "adult_a9a" / "a9a", RAW / "adult_a9a" / "a9a.t"], out, n_jobs=2)
    return out


@pytest.fixture(scope="module")
def a9a_ref():
    Xa, ya = load_svmlight_file(str(RAW / "adult_a9a" / "a9a"), zero_based=False, n_features=123)
    Xb, yb = load_svmlight_file(str(RAW / "adult_a9a" / "a9a.t"), zero_based=False,
                                n_features=123)
    return sp.vstack([Xa, Xb], format="csr"), np.concatenate([ya, yb])


def test_a9a_two_sources_sparse(a9a_store, a9a_ref):
    store = open_store(a9a_store)
    Xr, yr = a9a_ref
    assert store.sparse
    assert store.n == 32_561 + 16_281
    assert store.d == 123
    X, y, _ = read_all(store)
    assert sp.isspmatrix_csr(X) or sp.issparse(X)
    assert_X_equal(X, Xr)
    assert_y_equal(y, yr)
    # explicit zeros (a9a.t line 5 ends with '123:0') are not stored
    assert store.nnz == Xr.nnz - 1 == np.count_nonzero(Xr.data)
    srcs = store.attrs["sources"]
    assert [s["rows"] for s in srcs] == [32_561, 16_281]
    assert all(s["format"] == "svmlight" for s in srcs)
    check_store_api(store, Xr, yr)


def test_a9a_rows_across_chunks(a9a_store, a9a_ref):
    store = open_store(a9a_store)
    Xr, yr = a9a_ref
    a, b = store.chunk_rows - 7, store.chunk_rows + 11     # spans a chunk boundary
    c = store.rows(a, b)
    assert_X_equal(c.X, Xr[a:b])
    assert_y_equal(c.y, yr[a:b])


def test_a9a_to_dask(a9a_store, a9a_ref):
    store = open_store(a9a_store)
    Xr, yr = a9a_ref
    Xd, yd = store.to_dask()
    assert Xd.shape == (store.n, store.d)
    assert Xd.numblocks[0] == store.n_chunks
    X = Xd.compute(scheduler="sync")
    y = yd.compute(scheduler="sync")
    assert_X_equal(sp.csr_matrix(X), Xr)
    assert_y_equal(y, yr)


def test_a9a_pickle(a9a_store):
    store = open_store(a9a_store)
    clone = pickle.loads(pickle.dumps(store))
    assert (clone.n, clone.d, clone.sparse, clone.chunk_rows) == \
        (store.n, store.d, store.sparse, store.chunk_rows)
    for i in (0, store.n_chunks - 1):
        a, b = store.chunk(i), clone.chunk(i)
        assert_X_equal(b.X, a.X)
        assert_y_equal(b.y, a.y)


def test_array_store_matches_disk_store(a9a_store, a9a_ref):
    """ArrayStore over scipy.sparse and over numpy gives the disk store's chunks."""
    disk = open_store(a9a_store)
    Xr, yr = a9a_ref
    Xr32 = Xr.astype(np.float32)
    # the fingerprint depends on the contents only: an ArrayStore of the same
    # CSR arrays (no explicit zeros, as stored) has the disk store's fingerprint
    Xe = Xr32.copy()
    Xe.eliminate_zeros()
    assert ArrayStore(Xe, yr).fingerprint == disk.fingerprint
    assert ArrayStore(Xe, yr, chunk_rows=1000).fingerprint == disk.fingerprint
    assert ArrayStore(Xe, -yr).fingerprint != disk.fingerprint
    for X_in in (Xr32, Xr32.toarray()):
        mem = ArrayStore(X_in, yr, chunk_rows=disk.chunk_rows)
        assert (mem.n, mem.d, mem.n_chunks) == (disk.n, disk.d, disk.n_chunks)
        assert mem.sparse == sp.issparse(X_in)
        np.testing.assert_array_equal(mem.classes, disk.classes)
        np.testing.assert_array_equal(mem.class_counts, disk.class_counts)
        for i in range(disk.n_chunks):
            assert mem.chunk_bounds(i) == disk.chunk_bounds(i)
            cm, cd = mem.chunk(i), disk.chunk(i)
            Xm = cm.X.toarray() if sp.issparse(cm.X) else cm.X
            np.testing.assert_array_equal(Xm, cd.X.toarray())
            np.testing.assert_array_equal(cm.y, cd.y)


def test_a9a_hdf5(raw, tmp_path, a9a_ref):
    src = raw_file(raw, "adult_a9a/a9a")
    raw_file(raw, "adult_a9a/a9a.t")
    out = tmp_path / "a9a.h5"
    ingest([src, raw / "adult_a9a" / "a9a.t"], out, store_format="hdf5")
    assert out.is_file()
    store = open_store(out)
    try:
        assert store.backend == "hdf5"
        Xr, yr = a9a_ref
        X, y, _ = read_all(store)
        assert_X_equal(X, Xr)
        assert_y_equal(y, yr)
        check_store_api(store, Xr, yr)
        clone = pickle.loads(pickle.dumps(store))
        assert_X_equal(clone.chunk(0).X, store.chunk(0).X)
        clone.close()
    finally:
        store.close()


def test_w8a_sparse(raw, tmp_path):
    src = raw_file(raw, "w8a/w8a")
    ingest(src, tmp_path / "w8a.zarr")
    store = open_store(tmp_path / "w8a.zarr")
    assert store.sparse
    assert store.n == 49_749 and store.d == 300
    X, y, _ = read_all(store)
    Xr, yr = load_svmlight_file(str(src), zero_based=False, n_features=store.d)
    assert_X_equal(X, Xr)
    assert_y_equal(y, yr)
    # rows without any feature ("-1 ") are kept as empty rows
    assert (np.diff(X.indptr) == 0).sum() == (np.diff(Xr.indptr) == 0).sum() > 0
    check_store_api(store, Xr, yr)


def test_mq2008_qid_and_comments(raw, tmp_path):
    src = raw_file(raw, "mq2008_subset/val.txt")
    ingest(src, tmp_path / "mq.zarr")
    store = open_store(tmp_path / "mq.zarr")
    assert store.has_qid
    X, y, qid = read_all(store)
    Xr, yr, qr = load_svmlight_file(str(src), query_id=True, zero_based=False,
                                    n_features=store.d)
    assert store.n == 1_000 and store.d == 46
    assert_X_equal(X, Xr)
    assert_y_equal(y, yr)
    assert qid.dtype == np.int64
    np.testing.assert_array_equal(qid, qr)
    assert len(np.unique(qid)) == 69


# ---------------------------------------------------------------------------
# CSV-like

def test_usps_whitespace_gz(raw, tmp_path):
    src = raw_file(raw, "usps/zip.train.gz")
    ingest(src, tmp_path / "usps.zarr")
    store = open_store(tmp_path / "usps.zarr")
    df = pd.read_csv(src, sep=r"\s+", header=None)
    assert not store.sparse
    assert (store.n, store.d) == (7_291, 256) == (len(df), df.shape[1] - 1)
    X, y, _ = read_all(store)
    assert_X_equal(X, df.iloc[:, 1:].to_numpy())
    assert_y_equal(y, df.iloc[:, 0].to_numpy())
    assert len(store.classes) == 10
    check_store_api(store, df.iloc[:, 1:].to_numpy(), df.iloc[:, 0].to_numpy())


def test_svmguide1_numeric_header(raw, tmp_path):
    src = raw_file(raw, "svmguide1/svmguide1")
    ingest(src, tmp_path / "g.zarr", header=True)
    store = open_store(tmp_path / "g.zarr")
    df = pd.read_csv(src)
    assert list(df.columns) == ["0", "1", "2", "3", "4"]
    assert (store.n, store.d) == (3_089, 4)
    X, y, _ = read_all(store)
    assert_X_equal(X, df.iloc[:, 1:].to_numpy())
    assert_y_equal(y, df.iloc[:, 0].to_numpy())
    assert store.feature_names == ["1", "2", "3", "4"]


def test_phishing_named_header_label_last(raw, tmp_path):
    src = raw_file(raw, "phishing/phishing_websites.csv")
    ingest(src, tmp_path / "p.zarr", label_col=-1)
    store = open_store(tmp_path / "p.zarr")
    df = pd.read_csv(src)
    assert (store.n, store.d) == (11_055, 30)
    X, y, _ = read_all(store)
    assert_X_equal(X, df.iloc[:, :-1].to_numpy())
    assert_y_equal(y, df.iloc[:, -1].to_numpy())
    assert store.feature_names == list(df.columns[:-1])
    np.testing.assert_array_equal(store.classes, [-1.0, 1.0])
    check_store_api(store, df.iloc[:, :-1].to_numpy(), df.iloc[:, -1].to_numpy())


def test_kddcup_text_columns_and_labels(raw, tmp_path):
    src = raw_file(raw, "kddcup99/kddcup.data_10_percent.gz")
    ingest(src, tmp_path / "k.zarr", skip_cols=[1, 2, 3], label_col=-1)
    store = open_store(tmp_path / "k.zarr")
    assert store.n == 494_021
    assert store.d == 38
    assert "normal." in store.label_names
    assert store.attrs["label_kind"] == "text"
    df = pd.read_csv(src, header=None)
    X, y, _ = read_all(store)
    labels = store.decode_labels(y)
    np.testing.assert_array_equal(labels, df.iloc[:, -1].to_numpy(dtype=object))
    assert len(store.label_names) == df.iloc[:, -1].nunique() == 23
    Xr = df.drop(columns=[1, 2, 3, df.columns[-1]]).to_numpy()
    assert_X_equal(X, Xr)
    # classes are label codes; totals per code match pandas' value counts
    totals = dict(zip(store.classes.astype(int).tolist(), store.attrs["class_totals"]))
    vc = df.iloc[:, -1].value_counts()
    assert {store.label_names[k]: t for k, t in totals.items()} == vc.to_dict()
    assert store.class_counts.sum() == store.n


# ---------------------------------------------------------------------------
# CLI

def test_cli_ingest_and_info(raw, tmp_path):
    src = raw_file(raw, "adult_a9a/a9a")
    out = tmp_path / "a9a.zarr"
    # --one-based spelled out: the CLI default is wrong (see
    # test_cli_default_is_one_based)
    r = run_cli("ingest", src, "-o", out, "-q", "--one-based")
    assert r.returncode == 0, r.stderr
    assert out.is_dir()
    r = run_cli("info", out)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert re.search(r"^rows\s+32,561$", text, re.M), text
    assert re.search(r"^features\s+123$", text, re.M), text
    m = re.search(r"^classes\s+2\s+\((.*)\)$", text, re.M)
    assert m, text
    _, y = load_svmlight_file(str(src), zero_based=False, n_features=123)
    for v, c in zip(*np.unique(y, return_counts=True)):
        assert f"{v:g}: {c:,}" in m.group(1)
    assert "sparse" in text


def test_cli_info_text_labels(raw, tmp_path):
    src = raw_file(raw, "phishing/phishing_websites.csv")
    out = tmp_path / "p.h5"
    r = run_cli("ingest", src, "-o", out, "-q", "--label-col", "result")
    assert r.returncode == 0, r.stderr
    assert out.is_file()        # .h5 name -> HDF5 store
    r = run_cli("info", out)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^rows\s+11,055$", r.stdout, re.M), r.stdout
    assert re.search(r"^features\s+30$", r.stdout, re.M), r.stdout
    assert re.search(r"^classes\s+2\s", r.stdout, re.M), r.stdout



def test_cli_default_is_one_based(raw, tmp_path):
    """LIBSVM files are one-based, and --help says --one-based is the default:
    a9a must come out with its 123 features, not 124 shifted by one."""
    src = raw_file(raw, "adult_a9a/a9a")
    out = tmp_path / "a9a.zarr"
    r = run_cli("ingest", src, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    store = open_store(out)
    assert store.d == 123
    Xr, _ = load_svmlight_file(str(src), zero_based=False, n_features=123)
    X, _, _ = read_all(store)
    assert_X_equal(X, Xr)
