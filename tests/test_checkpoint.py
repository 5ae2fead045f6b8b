"""Checkpoints: crash-safe snapshots, and a resumed run gives the same model.

In-process interruptions raise from inside the solver after a given number of
violator searches; ``test_sigkill_*`` kill the ``streamcvm train`` process
with SIGKILL, including while it writes a snapshot.
"""
import contextlib
import json
import os
import signal
import subprocess
import time
from unittest import mock

import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier, CVMOneClass
from streamcvm.problems import checkpoint
from streamcvm.data import snapshots
from streamcvm.data.snapshots import CheckpointError
from streamcvm.solvers import meb
from streamcvm.solvers.exact import bvm as exact_bvm

from conftest import cli_cmd, cli_env, inproc

# the solvers' and snapshots' machinery at a fixed point (C and gamma not searched:
# the search runs before the fit's snapshots, tests/test_selection.py)
FIX = dict(C=1.0, gamma=0.25)


# -- the snapshot files --------------------------------------------------------
def test_write_keeps_the_last_k_and_reads_back(tmp_path):
    for k in range(4):
        snapshots.write(tmp_path, {"k": k}, {"a": np.arange(k + 1.0)}, keep=2)
    names = sorted(os.listdir(tmp_path))
    assert names == ["ckpt-00000003", "ckpt-00000004"]
    m, arrays, folder = snapshots.latest(tmp_path)
    assert m["k"] == 3 and folder.endswith("ckpt-00000004")
    np.testing.assert_array_equal(arrays["a"], [0.0, 1.0, 2.0, 3.0])
    assert m["format_version"] == snapshots.FORMAT_VERSION


def test_damaged_newest_falls_back_with_a_warning(tmp_path):
    snapshots.write(tmp_path, {"k": 1}, {"a": np.zeros(10)})
    newest = snapshots.write(tmp_path, {"k": 2}, {"a": np.ones(10)})
    with open(os.path.join(newest, "a.npy"), "r+b") as f:     # a torn write
        f.seek(-8, os.SEEK_END)
        f.write(b"\x00" * 8)
    with pytest.warns(RuntimeWarning, match="damaged checkpoint"):
        m, arrays, _ = snapshots.latest(tmp_path)
    assert m["k"] == 1 and arrays["a"].sum() == 0


def test_newer_format_is_refused(tmp_path):
    folder = snapshots.write(tmp_path, {}, {"a": np.zeros(2)})
    mf = os.path.join(folder, "manifest.json")
    with open(mf) as f:
        m = json.load(f)
    m["format_version"] = snapshots.FORMAT_VERSION + 1
    with open(mf, "w") as f:
        json.dump(m, f)
    with pytest.raises(CheckpointError, match="newer"):
        snapshots.latest(tmp_path)


def test_half_written_temporaries_are_ignored_and_cleaned(tmp_path):
    snapshots.write(tmp_path, {"k": 1}, {"a": np.zeros(3)})
    os.mkdir(tmp_path / ".tmp-ckpt-00000002-999")                # a killed writer
    assert snapshots.latest(tmp_path)[0]["k"] == 1
    snapshots.clean_temporaries(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["ckpt-00000001"]


def test_snapshots_at_an_fsspec_url(tmp_path):
    """A checkpoint folder at a URL (memory://): written with the manifest
    last, the last k kept, read back; a snapshot an upload left without its
    manifest is skipped with a warning; a fit resumes from there."""
    fsspec = pytest.importorskip("fsspec")
    url = "memory://streamcvm-ck/run"
    fs, root = fsspec.core.url_to_fs(url)
    for k in range(3):
        snapshots.write(url, {"k": k}, {"a": np.arange(k + 1.0)}, keep=2)
    assert sorted(n.rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)) == \
        ["ckpt-00000002", "ckpt-00000003"]
    m, arrays, folder = snapshots.latest(url)
    assert m["k"] == 2 and folder == url + "/ckpt-00000003"
    np.testing.assert_array_equal(arrays["a"], [0.0, 1.0, 2.0])
    fs.pipe_file(root + "/ckpt-00000004/a.npy", b"half an upload")     # no manifest
    with pytest.warns(RuntimeWarning, match="damaged checkpoint"):
        assert snapshots.latest(url)[0]["k"] == 2
    fs.rm(root, recursive=True)
    store = _data(n=3000)
    ref = CVMClassifier(method="cvm", eps=1e-3, **FIX).fit(store)
    CVMClassifier(method="cvm", eps=1e-3, **FIX).fit(store, checkpoint_dir=url, checkpoint_iters=5)
    assert len(checkpoint.Place(url).listdir()) == 2
    got = CVMClassifier(method="cvm", eps=1e-3, **FIX).fit(store, checkpoint_dir=url, resume=True)
    assert got.resumed_from_ is not None
    np.testing.assert_array_equal(got.machines_[0].coef, ref.machines_[0].coef)
    fs.rm(root, recursive=True)


# -- resumed fits --------------------------------------------------------------
def _data(n=12000, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5)).astype(np.float32)
    s = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.standard_normal(n)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, classes + 1)[1:-1])).astype(float)
    # small chunks: the sampler swaps chunks, so the sampled solver (and its
    # snapshots inside a machine) is what runs
    return streamcvm.as_store(X, y, chunk_rows=300)


class _Kill(Exception):
    pass


@pytest.fixture
def kill_after(monkeypatch):
    """kill_after(n): the n-th violator search from now raises _Kill."""
    orig = meb.MEBSolver.search

    def arm(n):
        count = {"n": 0}

        def search(self, *a, **k):
            count["n"] += 1
            if count["n"] == n:
                raise _Kill()
            return orig(self, *a, **k)
        monkeypatch.setattr(meb.MEBSolver, "search", search)
    yield arm
    monkeypatch.setattr(meb.MEBSolver, "search", orig)


@pytest.fixture
def searches(monkeypatch):
    """A list that grows by one per violator search from now on (asked for
    before kill_after, whose searches then count too)."""
    orig, seen = meb.MEBSolver.search, []

    def counted(self, *a, **k):
        seen.append(1)
        return orig(self, *a, **k)
    monkeypatch.setattr(meb.MEBSolver, "search", counted)
    yield seen
    monkeypatch.setattr(meb.MEBSolver, "search", orig)


def _continued(res, n_ref, n_res):
    """The resumed fit started from its snapshot: it did fewer violator
    searches than the uninterrupted one, and says where it resumed."""
    assert res.resumed_from_ is not None
    assert n_res < n_ref, f"the resumed run searched {n_res} times, a fresh one {n_ref}"


def _same(a, b):
    for ma, mb in zip(a.machines_ if hasattr(a, "machines_") else [a.machine_],
                      b.machines_ if hasattr(b, "machines_") else [b.machine_]):
        np.testing.assert_array_equal(ma.sv_ids, mb.sv_ids)
        np.testing.assert_array_equal(ma.coef, mb.coef)
        assert ma.intercept == mb.intercept and ma.radius2 == mb.radius2


@pytest.mark.parametrize("method", ["bvm", "cvm", "fvm"])
@pytest.mark.parametrize("at", [5, 300])
def test_two_class_resume_is_exact(tmp_path, searches, kill_after, method, at):
    store = _data()
    ref = CVMClassifier(method=method, eps=1e-3, **FIX).fit(store)
    n_ref = len(searches)
    kill_after(at)
    with pytest.raises(_Kill):
        CVMClassifier(method=method, eps=1e-3, **FIX).fit(store, checkpoint_dir=tmp_path,
                                                   checkpoint_every=0.0)
    kill_after(10 ** 9)                                   # no more kills
    man = snapshots.latest(tmp_path)[0]
    assert man["current"] is not None                    # stopped inside the machine
    n0 = len(searches)
    res = CVMClassifier(method=method, eps=1e-3, **FIX).fit(store, checkpoint_dir=tmp_path,
                                                     resume=True)
    _same(ref, res)
    assert res.n_iter_ == ref.n_iter_
    _continued(res, n_ref, len(searches) - n0)


def _recording(monkeypatch, fit, search):
    """Record the violator searches of each MEBSolver.fit from now on: a list
    with one count per fit."""
    per_fit = []

    def rec_fit(self, *a, **k):
        per_fit.append(0)
        return fit(self, *a, **k)

    def rec_search(self, *a, **k):
        per_fit[-1] += 1
        return search(self, *a, **k)
    monkeypatch.setattr(meb.MEBSolver, "fit", rec_fit)
    monkeypatch.setattr(meb.MEBSolver, "search", rec_search)
    return per_fit


def test_multi_class_resume_keeps_finished_machines(tmp_path, monkeypatch):
    store = _data(n=6000, classes=3)
    fit, search = meb.MEBSolver.fit, meb.MEBSolver.search
    fresh = _recording(monkeypatch, fit, search)
    ref = CVMClassifier(eps=1e-3, method="bvm", **FIX).fit(store)
    assert len(fresh) == 3
    state = {"fits": 0, "searches": 0}

    def counting_fit(self, *a, **k):
        state["fits"] += 1
        return fit(self, *a, **k)

    def killing_search(self, *a, **k):      # 30 searches into the second machine
        if state["fits"] == 2:
            state["searches"] += 1
            if state["searches"] == 30:
                raise _Kill()
        return search(self, *a, **k)
    monkeypatch.setattr(meb.MEBSolver, "fit", counting_fit)
    monkeypatch.setattr(meb.MEBSolver, "search", killing_search)
    with pytest.raises(_Kill):
        CVMClassifier(eps=1e-3, method="bvm", **FIX).fit(store, checkpoint_dir=tmp_path, checkpoint_every=0.0)
    man = snapshots.latest(tmp_path)[0]
    assert len(man["machines_done"]) == 1 and man["current"] is not None
    resumed = _recording(monkeypatch, fit, search)
    res = CVMClassifier(eps=1e-3, method="bvm", **FIX).fit(store, checkpoint_dir=tmp_path, resume=True)
    monkeypatch.setattr(meb.MEBSolver, "fit", fit)
    monkeypatch.setattr(meb.MEBSolver, "search", search)
    _same(ref, res)
    assert res.resumed_from_["machines_done"] == 1 and res.resumed_from_["n_iter"] > 0
    # the work continued: the first machine was not trained again, the second
    # went on from its snapshot (fewer searches than from scratch), the third ran whole
    assert len(resumed) == 2, resumed
    assert resumed[0] < fresh[1] and resumed[1] == fresh[2], (resumed, fresh)
    np.testing.assert_array_equal(ref.predict(store.X[:500]), res.predict(store.X[:500]))


def test_one_class_resume_is_exact(tmp_path, searches, kill_after):
    store = _data()
    ref = CVMOneClass(eps=1e-3, C=0.1).fit(store)
    n_ref = len(searches)
    kill_after(50)
    with pytest.raises(_Kill):
        CVMOneClass(eps=1e-3, C=0.1).fit(store, checkpoint_dir=tmp_path, checkpoint_every=0.0)
    kill_after(10 ** 9)
    n0 = len(searches)
    res = CVMOneClass(eps=1e-3, C=0.1).fit(store, checkpoint_dir=tmp_path, resume=True)
    _same(ref, res)
    _continued(res, n_ref, len(searches) - n0)
    assert ref.offset_ == res.offset_


def test_resume_refuses_another_store_or_other_parameters(tmp_path):
    store = _data(n=3000)
    CVMClassifier(eps=1e-2, **FIX).fit(store, checkpoint_dir=tmp_path)
    with pytest.raises(CheckpointError, match="params"):
        CVMClassifier(eps=1e-2, C=2.0, gamma=FIX["gamma"]).fit(store, checkpoint_dir=tmp_path,
                                                               resume=True)
    with pytest.raises(CheckpointError, match="store"):
        CVMClassifier(eps=1e-2, **FIX).fit(_data(n=3000, seed=1), checkpoint_dir=tmp_path,
                                           resume=True)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        CVMClassifier().fit(store, resume=True)


def test_resume_of_a_finished_run_returns_its_model(tmp_path):
    store = _data(n=3000)
    ref = CVMClassifier(eps=1e-2).fit(store, checkpoint_dir=tmp_path)
    res = CVMClassifier(eps=1e-2).fit(store, checkpoint_dir=tmp_path, resume=True)
    _same(ref, res)


# -- SIGKILL -------------------------------------------------------------------
def _train(store, out, *extra):
    """The arguments of ``streamcvm train`` (for :func:`cli_cmd`, :func:`inproc`)."""
    return ["train", store, "-o", out, "-e", "1e-4", "-q", *extra]


@contextlib.contextmanager
def _iterations():
    """A list that gets, for each MEBSolver.fit and fit_exact from now on,
    the solver iterations it ran: from the iteration it starts at (a
    restored solver's) to the one it ends at."""
    def counted(run):
        def counting(self, *a, **k):
            # (a restored exact pass continues from the iteration in its state)
            n0 = int(self.exact.run["state"]["steps"][0]) if self.exact_pending else self.n_iter
            try:
                return run(self, *a, **k)
            finally:
                ran.append(self.n_iter - n0)
        return counting
    ran = []
    with mock.patch.object(meb.MEBSolver, "fit", counted(meb.MEBSolver.fit)), \
            mock.patch.object(meb.MEBSolver, "fit_exact", counted(meb.MEBSolver.fit_exact)):
        yield ran


@pytest.fixture(scope="module")
def kill_store(tmp_path_factory):
    """The store, the model of an uninterrupted run and the iterations that
    run's solvers ran."""
    d = tmp_path_factory.mktemp("kill")
    path = d / "g.zarr"
    from streamcvm.data import synthetic
    synthetic.write_store(str(path), "gaussian", 200_000, seed=0)
    ref = d / "ref.model"
    with _iterations() as ran:
        r = inproc(*_train(path, ref))
    assert r.returncode == 0, r.stderr
    return path, ref, sum(ran)


def _kill_and_resume(kill_store, tmp_path, wait_for, mid_write=False, started=True):
    """Kill a training run with SIGKILL once ``wait_for(ck)``, then resume
    it (in this process, counting its solvers' iterations). ``mid_write``:
    the kill must find a half-written snapshot folder (tried again, up to 8
    times, when the write finished first). ``started``: the snapshot must
    be past the first iteration."""
    import shutil
    store, ref, fresh = kill_store
    ck = tmp_path / "ck"
    for _ in range(8):
        shutil.rmtree(ck, ignore_errors=True)
        p = subprocess.Popen(cli_cmd(*_train(store, tmp_path / "m", "--checkpoint-dir", ck,
                                             "--checkpoint-every", "0.02")), env=cli_env())
        t0 = time.time()
        while not wait_for(ck) and p.poll() is None and time.time() - t0 < 60:
            time.sleep(0.002)
        if p.poll() is not None:    # finished first (a loaded machine): again
            continue
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert p.returncode == -signal.SIGKILL      # the kill landed
        left = sorted(os.listdir(ck))
        if not mid_write or any(e.startswith(".tmp-") for e in left):
            break
    assert p.returncode == -signal.SIGKILL, "the run ended before the kill, 8 times"
    if mid_write:       # killed mid-write: the half-written snapshot is still there
        assert any(e.startswith(".tmp-") for e in left), left
    man = snapshots.latest(ck)[0]          # the snapshot the resume starts from
    assert man["current"] is not None, "killed after the machine was finished"
    at = man["current"]["solver"]["n_iter"]
    with _iterations() as ran:
        r = inproc(*_train(store, tmp_path / "m", "--resume", ck))
    assert r.returncode == 0, r.stderr
    for name in ("m0_coef", "m0_ids"):
        np.testing.assert_array_equal(np.load(ref / f"{name}.npy"),
                                      np.load(tmp_path / "m" / f"{name}.npy"))
    with open(tmp_path / "m" / "model.json") as f:
        got = json.load(f)["training"]["resumed_from"]
    with open(ref / "model.json") as f:
        total = sum(m["n_iter"] for m in json.load(f)["machines"])
    assert got == {"machines_done": 0, "n_iter": at}
    assert (0 < at or not started) and at < total, (at, total)
    # the work continued from the snapshot: the resumed run's solvers ran the
    # iterations after the snapshot's and no others (not those before it, not
    # the probe fit that train_size="auto" runs before its stages)
    assert sum(ran) == total - at, (ran, total, at)
    assert sum(ran) < fresh, (ran, fresh)


def _n_snapshots(ck, n):
    return lambda _: os.path.isdir(ck) and \
        sum(e.startswith("ckpt-") for e in os.listdir(ck)) >= 1 and \
        int(max(e for e in os.listdir(ck) if e.startswith("ckpt-"))[5:]) >= n


@pytest.mark.parametrize("n", [1, 10])
def test_sigkill_after_snapshots_resumes_to_the_same_model(kill_store, tmp_path, n):
    _kill_and_resume(kill_store, tmp_path, _n_snapshots(tmp_path / "ck", n), started=n > 1)


def test_sigkill_while_writing_a_snapshot(kill_store, tmp_path):
    ck = tmp_path / "ck"

    def writing(_):     # a snapshot being written, after a few (the first may be of iteration 0)
        return _n_snapshots(ck, 5)(ck) and any(e.startswith(".tmp-") for e in os.listdir(ck))
    _kill_and_resume(kill_store, tmp_path, writing, mid_write=True)


def test_exact_bvm_resume_is_exact(tmp_path, monkeypatch):
    """A store the sampler holds whole runs bvm_exact; with checkpoints it runs
    in pieces, snapshots between them, and resumes inside the compiled loop
    (a clean boundary at C = 100: most rows leave the passes, so the pause
    falls while they are out)."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((30000, 4)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * np.sin(3 * X[:, 2]) > 0, 1.0, -1.0)
    store = streamcvm.as_store(X, y)                     # one chunk: exact BVM
    orig = exact_bvm.bvm_exact
    calls = {"n": 0, "kill": None, "starts": [], "active": []}

    def counting(*a, **kw):
        calls["n"] += 1
        calls["starts"].append(int(a[18]["steps"][0]))     # the steps already taken (state)
        calls["active"].append(int(a[18]["active"][0]))    # rows in the passes (0: all)
        if calls["n"] == calls["kill"]:
            raise _Kill()
        return orig(*a, **kw)
    monkeypatch.setattr(exact_bvm, "bvm_exact", counting)
    fix = dict(eps=1e-5, method="bvm", C=100.0, gamma=0.5)
    ref = CVMClassifier(**fix).fit(store, checkpoint_dir=tmp_path / "ref", checkpoint_every=0.0)
    assert ref.machines_[0].history[-1].get("exact")
    pieces = calls["n"]
    # killed in the first piece that starts with rows out of the passes
    # (shrinking): the snapshot before it holds them out, and the resume puts
    # them back by perm
    kill = 1 + next(i for i, v in enumerate(calls["active"]) if 0 < v < len(y))
    calls.update(n=0, kill=kill)
    with pytest.raises(_Kill):
        CVMClassifier(**fix).fit(store, checkpoint_dir=tmp_path / "ck", checkpoint_every=0.0)
    man, arrays, _ = snapshots.latest(tmp_path / "ck")
    assert man["current"]["solver"]["exact"] and man["progress"]["iteration"] > 0
    active = [v[16] for k, v in arrays.items() if k.endswith("ex_state")]
    assert len(active) == 1 and 0 < active[0] < len(y)
    calls.update(n=0, kill=None, starts=[])
    res = CVMClassifier(**fix).fit(store, checkpoint_dir=tmp_path / "ck", resume=True)
    _same(ref, res)
    assert res.n_iter_ == ref.n_iter_
    # it continued: its first piece starts from the snapshot's steps, not from none
    assert pieces > kill and calls["starts"][0] == man["progress"]["iteration"] > 0


def test_resume_refuses_the_same_rows_chunked_differently(tmp_path):
    """The sampler's state names chunks: another chunking of the same rows
    (same content fingerprint) must not be resumed silently."""
    store = _data(n=3000)
    CVMClassifier(eps=1e-2, C=np.float64(1.0), max_core=np.int64(500)).fit(
        store, checkpoint_dir=tmp_path)
    other = streamcvm.as_store(store.X, store.y, chunk_rows=250)
    with pytest.raises(CheckpointError, match="chunk_rows"):
        CVMClassifier(eps=1e-2, C=np.float64(1.0), max_core=np.int64(500)).fit(
            other, checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize("method,auto", [("cvm", False), ("fvm", False), ("cvm", True)])
def test_regression_resume_is_exact(tmp_path, searches, kill_after, method, auto):
    """auto: mu and gamma chosen on held-out rows first (their small fits
    are not checkpointed, and run again on resume: the same choice). The
    reference is checkpointed too: a fit with checkpoints runs CVM, one
    without them on so few rows the exact SMO (problems.regression.exact_fit)."""
    from streamcvm import CVMRegressor
    from streamcvm.data.synthetic import friedman1_block
    X, y = friedman1_block(0, 6000)
    store = streamcvm.as_store(X, y, chunk_rows=300)
    kw = dict(method=method, eps=1e-3) if auto else dict(method=method, eps=1e-3, mu=0.05,
                                                          gamma=0.5)
    ref = CVMRegressor(**kw).fit(store, checkpoint_dir=tmp_path / "ref")
    n_ref = len(searches)
    assert (len(ref.selection_) == 5) == auto
    kill_after(n_ref - 50)              # in the last fit, after the selection's
    with pytest.raises(_Kill):
        CVMRegressor(**kw).fit(store, checkpoint_dir=tmp_path, checkpoint_every=0.0)
    kill_after(10 ** 9)
    assert snapshots.latest(tmp_path)[0]["current"] is not None
    n0 = len(searches)
    res = CVMRegressor(**kw).fit(store, checkpoint_dir=tmp_path, resume=True)
    _same(ref, res)
    _continued(res, n_ref, len(searches) - n0)
    assert ref.epsilon_bar_ == res.epsilon_bar_ and ref.n_iter_ == res.n_iter_


def test_weighted_classifier_resume_is_exact(tmp_path, searches, kill_after):
    store = _data()
    w = np.random.default_rng(1).uniform(0.5, 2.0, store.n)
    store = streamcvm.as_store(store.X, store.y, weight=w, chunk_rows=300)
    kw = dict(method="cvm", eps=1e-3, class_weight="balanced", **FIX)
    ref = CVMClassifier(**kw).fit(store)
    n_ref = len(searches)
    kill_after(100)
    with pytest.raises(_Kill):
        CVMClassifier(**kw).fit(store, checkpoint_dir=tmp_path, checkpoint_every=0.0)
    kill_after(10 ** 9)
    n0 = len(searches)
    res = CVMClassifier(**kw).fit(store, checkpoint_dir=tmp_path, resume=True)
    _same(ref, res)
    _continued(res, n_ref, len(searches) - n0)
