"""MMDA features from stores: fit and transform a store as arrays, write a
feature store, save and load, resume a killed fit (in process and the
``streamcvm features`` command under SIGKILL), and the command's refusals."""
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from streamcvm import MMDATransformer, load_model, save_model
from streamcvm.data.store import open_store

from conftest import cli_cmd, cli_env, inproc, one_line_error

KW = dict(eps=1e-2)


def _blobs(n=600, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0, 0, 0], [3, 0, 1], [0, 3, -1]], np.float32)
    y = rng.integers(0, 3, n)
    X = (centers[y] + rng.standard_normal((n, 3))).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("mmda")
    X, y = _blobs()
    from streamcvm.data.writer import StoreWriter
    with StoreWriter(str(d / "train.zarr"), 3) as w:     # one chunk, as arrays get
        w.append(X, y.astype(np.float64))
        w.close()
    Xt, yt = _blobs(200, seed=1)
    with StoreWriter(str(d / "test.zarr"), 3, chunk_rows=64) as w:
        w.append(Xt, yt.astype(np.float64))
        w.close()
    return d, (X, y), (Xt, yt)


def test_a_store_gives_the_arrays_features(stores, tmp_path):
    """Fit on the store = fit on its arrays (one chunk of the same rows: the
    same samples); transform of a store (chunks of 64 rows) = transform of its
    rows; transform_store writes them with the labels; a model saved and
    loaded transforms the same."""
    d, (X, y), (Xt, yt) = stores
    arr = MMDATransformer(n_components=2, **KW).fit(X, y)
    sto = MMDATransformer(n_components=2, **KW).fit(str(d / "train.zarr"))
    assert sto.n_features_in_ == 3 and list(sto.classes_) == [0.0, 1.0, 2.0]
    Ft = sto.transform(Xt)
    assert Ft.shape == (200, 6)
    np.testing.assert_array_equal(sto.transform(str(d / "test.zarr")), Ft)
    np.testing.assert_array_equal(arr.transform(Xt), Ft)
    assert list(sto.feature_class_) == [0, 0, 1, 1, 2, 2]
    assert list(sto.feature_rank_) == [0, 1] * 3
    assert sto.expansion_rows_ <= min(600, sto.kernel_evaluations_.sum())
    n = sto.transform_store(str(d / "test.zarr"), str(tmp_path / "f.zarr"))
    out = open_store(str(tmp_path / "f.zarr"))
    assert n == 200 and out.d == 6 and out.attrs["features"]["transformer"] == "MMDATransformer"
    got = out.rows(0, out.n)
    np.testing.assert_array_equal(np.asarray(got.X), Ft.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(got.y), yt)
    save_model(sto, tmp_path / "m")
    back = load_model(tmp_path / "m")
    np.testing.assert_array_equal(back.transform(Xt), Ft)
    np.testing.assert_array_equal(back.kernel_evaluations_, sto.kernel_evaluations_)
    np.testing.assert_array_equal(back.feature_seconds_, sto.feature_seconds_)


def test_feature_store_output_rules(stores, tmp_path):
    """A feature store is replaced; the input store, a training store and a
    folder of other files are not."""
    from streamcvm.data.outputs import OutputError
    d, (X, y), _ = stores
    m = MMDATransformer(**KW).fit(X, y)
    out = str(tmp_path / "f.zarr")
    m.transform_store(str(d / "test.zarr"), out)
    m.transform_store(str(d / "test.zarr"), out)                      # its own kind
    with pytest.raises(OutputError, match="is the input"):
        m.transform_store(str(d / "test.zarr"), str(d / "test.zarr"), overwrite=True)
    with pytest.raises(OutputError, match="already exists"):
        m.transform_store(str(d / "test.zarr"), str(d / "train.zarr"))
    os.makedirs(tmp_path / "mine.zarr")
    (tmp_path / "mine.zarr" / "notes.txt").write_text("keep")
    with pytest.raises(OutputError, match="never replaced"):
        m.transform_store(str(d / "test.zarr"), str(tmp_path / "mine.zarr"), overwrite=True)
    assert (tmp_path / "mine.zarr" / "notes.txt").read_text() == "keep"
    assert open_store(str(d / "train.zarr")).n == 600


class _Kill(Exception):
    pass


@pytest.fixture
def one_thread():
    """numba at one thread: classes one after the other (the features in order)."""
    import numba
    was = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(was)


def test_an_interrupted_fit_resumes_to_the_same_features(stores, tmp_path, monkeypatch,
                                                         one_thread):
    """Killed while fitting its 4th feature, the fit resumes from the snapshot
    of the first 3 and gives the features of a run never interrupted, bit for
    bit."""
    from streamcvm.solvers import mmda
    d, (X, y), (Xt, _) = stores
    ref = MMDATransformer(n_components=2, **KW).fit(X, y)
    fit, calls = mmda.MMDASolver.fit, []

    def killing(self, pool, classes):
        calls.append(1)
        if len(calls) == 4:
            raise _Kill
        return fit(self, pool, classes)
    monkeypatch.setattr(mmda.MMDASolver, "fit", killing)
    with pytest.raises(_Kill):
        MMDATransformer(n_components=2, **KW).fit(X, y, checkpoint_dir=tmp_path,
                                                  checkpoint_every=0.0)
    calls.clear()

    def counting(self, pool, classes):
        calls.append(1)
        return fit(self, pool, classes)
    monkeypatch.setattr(mmda.MMDASolver, "fit", counting)
    res = MMDATransformer(n_components=2, **KW).fit(X, y, checkpoint_dir=tmp_path,
                                                    resume=True)
    monkeypatch.setattr(mmda.MMDASolver, "fit", fit)
    assert res.resumed_from_["machines_done"] == 3
    # the work continued: only the features after the snapshot were fitted
    assert len(calls) == len(ref.machines_) - 3 > 0
    np.testing.assert_array_equal(res.transform(Xt), ref.transform(Xt))
    from streamcvm.data.snapshots import CheckpointError
    with pytest.raises(CheckpointError, match="params"):
        MMDATransformer(n_components=2, C=2.0, **KW).fit(X, y, checkpoint_dir=tmp_path,
                                                         resume=True)


def _solver_threads(monkeypatch, kill_at=None):
    """(a list, growing by the thread id of every MMDA feature fitted; with
    ``kill_at``, the kill_at-th fit raises _Kill instead)."""
    import threading
    from streamcvm.solvers import mmda
    fit, seen = getattr(mmda.MMDASolver.fit, "original", mmda.MMDASolver.fit), []

    def recording(self, pool, classes):
        seen.append(threading.get_ident())
        if len(seen) == kill_at:
            raise _Kill
        return fit(self, pool, classes)
    recording.original = fit        # a later call wraps the solver's own fit, not this
    monkeypatch.setattr(mmda.MMDASolver, "fit", recording)
    return seen


@pytest.mark.skipif(os.cpu_count() < 2, reason="needs two cores")
@pytest.mark.filterwarnings("ignore:streamcvm. no checkpoint")     # the kill hit class 0
def test_classes_side_by_side_give_the_one_thread_features(stores, tmp_path, monkeypatch):
    """The classes' features found side by side on two threads (a class's
    features depend only on its own earlier ones) are those of one thread,
    bit for bit, and a fit killed there resumes to them as well."""
    import threading

    import numba
    d, (X, y), (Xt, _) = stores
    was = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _solver_threads(monkeypatch)
        ref = MMDATransformer(n_components=2, **KW).fit(X, y)
        numba.set_num_threads(2)
        two = _solver_threads(monkeypatch)
        res = MMDATransformer(n_components=2, **KW).fit(X, y)
        # the routes taken, not how the OS scheduled them: one thread fits in the
        # caller's thread; two hand the classes to a pool of (at most) two threads,
        # which a loaded machine may let one of them run all
        main = threading.get_ident()
        assert set(one) == {main} and main not in set(two) and len(set(two)) <= 2
        assert len(two) == len(ref.machines_) == 6
        np.testing.assert_array_equal(res.transform(Xt), ref.transform(Xt))
        for a, b in zip(res.machines_, ref.machines_):
            np.testing.assert_array_equal(a.sv_ids, b.sv_ids)
            np.testing.assert_array_equal(a.coef, b.coef)
        killed = _solver_threads(monkeypatch, kill_at=4)
        with pytest.raises(_Kill):
            MMDATransformer(n_components=2, **KW).fit(X, y, checkpoint_dir=tmp_path,
                                                      checkpoint_every=0.0)
        assert len(killed) >= 4
        again = _solver_threads(monkeypatch)
        res = MMDATransformer(n_components=2, **KW).fit(X, y, checkpoint_dir=tmp_path,
                                                        resume=True)
        done = (res.resumed_from_ or {}).get("machines_done", 0)   # none if class 0 was hit
        assert 0 <= done < 6 and len(again) == 6 - done
        np.testing.assert_array_equal(res.transform(Xt), ref.transform(Xt))
    finally:
        numba.set_num_threads(was)


def _fits():
    """(a list, a context): inside the context the list grows by one per
    MMDA feature fitted (:meth:`MMDASolver.fit` counted)."""
    from unittest import mock
    from streamcvm.solvers import mmda
    fit, calls = mmda.MMDASolver.fit, []

    def counting(self, pool, classes):
        calls.append(1)
        return fit(self, pool, classes)
    return calls, mock.patch.object(mmda.MMDASolver, "fit", counting)


def test_sigkill_then_resume_gives_the_same_feature_store(tmp_path):
    """``streamcvm features`` killed by SIGKILL after a snapshot of two
    features leaves no feature store; --resume continues from the snapshot
    (only the features after it are fitted) and writes the store an
    uninterrupted run writes."""
    from streamcvm.data import snapshots
    store = tmp_path / "g.zarr"
    from streamcvm.data import synthetic
    synthetic.write_store(str(store), "gaussian", 10_000, d=8, n_classes=3, seed=0)
    opts = ["-k", "2", "-e", "1e-3", "-q"]
    fresh, counting = _fits()
    with counting:
        assert inproc("features", store, "-o", tmp_path / "ref.zarr", *opts).returncode == 0
    ck = tmp_path / "ck"

    def done():
        got = snapshots.latest(str(ck)) if snapshots.is_checkpoint_dir(str(ck)) else None
        return got is not None and len(got[0]["machines_done"]) >= 2
    import shutil
    for _ in range(5):      # a loaded machine may let the run finish before the kill: again
        shutil.rmtree(ck, ignore_errors=True)
        shutil.rmtree(tmp_path / "f.zarr", ignore_errors=True)
        p = subprocess.Popen(cli_cmd("features", store, "-o", tmp_path / "f.zarr",
                                     "--checkpoint-dir", ck, "--checkpoint-every", "0", *opts),
                             env=cli_env())
        t0 = time.time()
        while not done() and p.poll() is None and time.time() - t0 < 120:
            time.sleep(0.01)
        if p.poll() is None:
            break
    assert p.poll() is None, "the run ended before the kill, five times"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL            # the kill landed
    assert not (tmp_path / "f.zarr").exists()
    at = len(snapshots.latest(str(ck))[0]["machines_done"])   # what the resume starts from
    resumed, counting = _fits()
    with counting:
        r = inproc("features", store, "-o", tmp_path / "f.zarr", "--resume", ck, "--save-model",
                   tmp_path / "m", *opts)
    assert r.returncode == 0, r.stderr
    assert load_model(tmp_path / "m").training_["resumed_from"]["machines_done"] == at >= 2
    # the work continued: only the features after the snapshot were fitted
    assert len(resumed) == len(fresh) - at, (len(resumed), len(fresh), at)
    a, b = open_store(str(tmp_path / "ref.zarr")), open_store(str(tmp_path / "f.zarr"))
    np.testing.assert_array_equal(np.asarray(a.rows(0, a.n).X), np.asarray(b.rows(0, b.n).X))
    np.testing.assert_array_equal(np.asarray(a.rows(0, a.n).y), np.asarray(b.rows(0, b.n).y))


def test_cli_features_model_and_refusals(stores, tmp_path):
    """--save-model then --model on another store gives that store's features;
    wrong uses end with one line and a non-zero exit, nothing written."""
    from streamcvm import CVMClassifier
    d, (X, y), (Xt, _) = stores
    train, test = d / "train.zarr", d / "test.zarr"
    r = inproc("features", train, "-o", tmp_path / "f.zarr", "-k", "1", "-e", "1e-2",
               "--save-model", tmp_path / "m", "-q")
    assert r.returncode == 0, r.stderr
    r = inproc("features", test, "-o", tmp_path / "ft.h5", "--model", tmp_path / "m", "-q")
    assert r.returncode == 0, r.stderr
    got = open_store(str(tmp_path / "ft.h5"))
    np.testing.assert_array_equal(np.asarray(got.rows(0, got.n).X),
                                  load_model(tmp_path / "m").transform(Xt).astype(np.float32))
    save_model(CVMClassifier(eps=1e-2).fit(X, y), tmp_path / "clf")
    for args, match in [(["--model", tmp_path / "m", "-k", "3"], "--n-components is for fitting"),
                        (["--model", tmp_path / "m", "-c", "2"], "--C is for fitting"),
                        (["--model", test], "not a streamcvm model"),
                        (["--model", tmp_path / "clf"], "CVMClassifier model, not MMDA"),
                        (["--resume", tmp_path], "no checkpoint there"),
                        (["--save-model", train], "already exists")]:
        one_line_error(inproc("features", test, "-o", tmp_path / "x.zarr", *args), "features",
                       match)
    one_line_error(inproc("features", test, "-o", test, "--model", tmp_path / "m"), "features",
                   "is the input")
    one_line_error(inproc("features", test, "-o", tmp_path / "x.txt", "--model", tmp_path / "m"),
                   "features", "must end in")
    assert not (tmp_path / "x.zarr").exists() and open_store(str(train)).n == 600


def test_sparse_rows_give_the_dense_rows_features():
    """CSR input: the same samples and directions; kernel values from the
    nonzeros differ from the dense BLAS block only by float32 rounding."""
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 30)).astype(np.float32)
    X[X < 0.8] = 0
    y = (X[:, 0] + X[:, 1] > 0.5).astype(int)
    dense = MMDATransformer(n_components=2, **KW).fit(X, y)
    csr = MMDATransformer(n_components=2, **KW).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(csr.transform(sp.csr_matrix(X)), dense.transform(X), atol=1e-5)
    np.testing.assert_array_equal(csr.kernel_evaluations_, dense.kernel_evaluations_)


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] > 0).astype(int)


def test_more_components_than_rows_is_refused_in_one_line(tmp_path):
    """Each feature is a new direction through the training rows: more than
    there are rows is refused at once, naming n_components and the limit
    (it was a ZeroDivisionError after fitting the first ones)."""
    X, y = _rows(60)
    with pytest.raises(ValueError, match=r"n_components=1000 .*at most 60\b") as e:
        MMDATransformer(n_components=1000).fit(X, y)
    assert "\n" not in str(e.value)
    from streamcvm.data.synthetic import write_store
    store = tmp_path / "s.zarr"
    write_store(str(store), "gaussian", 60, d=4, seed=0)
    r = inproc("features", store, "-o", tmp_path / "f.zarr", "-k", "1000", "-q")
    one_line_error(r, "features", r"n_components=1000 .*at most 60\b")
    assert not (tmp_path / "f.zarr").exists()


def test_components_the_rows_run_out_of_are_refused_in_one_line():
    """Fewer than the rows, but more than they separate (the earlier
    features span what these 60 rows tell apart): refused naming
    n_components and how many there were, not a ZeroDivisionError nor a
    'coefficients are not finite' blamed on the scale."""
    X, y = _rows(60)
    for k in (54, 59):
        with pytest.raises(ValueError, match=rf"n_components={k} .*at most \d+ here") as e:
            MMDATransformer(n_components=k).fit(X, y)
        assert "\n" not in str(e.value)
