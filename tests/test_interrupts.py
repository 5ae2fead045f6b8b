"""Interrupts and damaged checkpoint folders: what the command line says and
leaves behind.

- Ctrl-C (or SIGTERM) that lands while numba's compiled code calls back into
  Python reaches the command as ``SystemError ... returned a result with an
  exception set`` (the KeyboardInterrupt as its cause): still one line,
  exit 130.
- An interrupt after the output is complete (``predict --workers 2``: while
  the workers shut down) says so, never "nothing was written".
- Pruning old snapshots that is interrupted leaves no half-deleted snapshot
  under a snapshot's name; the next run removes what is left.
- ``--resume`` on a folder whose snapshots are all damaged is refused in one
  line, and nothing there is deleted.
- A ``file://`` checkpoint folder is locked as its local path is.
- An interrupt that leaves asyncio tasks pending (zarr's writes) is still one
  line: asyncio's "Task was destroyed but it is pending!" is not printed.
"""
import contextlib
import os
import shutil

import numpy as np
import pytest

from streamcvm.data import snapshots
from streamcvm.data.snapshots import CheckpointError
from streamcvm.problems.checkpoint import Checkpointer

from conftest import inproc

RUN = {"estimator": "test", "params": {"a": 1}}


def _numba_like_interrupt():
    """What the interpreter raises when Ctrl-C lands in a Python function that
    compiled numba code called (its ``_numba_unpickle``)."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as ki:
        raise SystemError("<function _numba_unpickle at 0x7f> returned a result with an "
                          "exception set") from ki


def test_an_interrupt_with_pending_async_writes_is_one_line():
    """zarr writes through its own asyncio loop; an interrupt mid-write leaves
    its tasks pending, and asyncio logs each one it destroys (several lines on
    stderr, seen when an ingest got SIGTERM on a loaded machine). The child
    leaves one pending, is interrupted, then lets it be destroyed."""
    import subprocess
    import sys
    child = "\n".join([
        "import asyncio, gc, sys",
        "from streamcvm.cli import _interrupted",
        "loop = asyncio.new_event_loop()",
        "async def never():",
        "    await asyncio.sleep(3600)",
        "t = loop.create_task(never())",
        "loop.run_until_complete(asyncio.sleep(0))",
        "rc = _interrupted('ingest', KeyboardInterrupt())",
        "del t, loop",
        "gc.collect()",
        "sys.exit(rc)"])
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 130
    assert r.stderr == "streamcvm ingest: interrupted (nothing was written)\n", r.stderr


def test_an_interrupt_inside_compiled_code_is_one_line(tmp_path, monkeypatch):
    from streamcvm.cli import info

    def run(args):
        _numba_like_interrupt()
    monkeypatch.setattr(info, "run", run)
    r = inproc("info", tmp_path)
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "SystemError" not in r.stderr
    assert r.stderr == "streamcvm info: interrupted (nothing was written)\n", r.stderr


def test_an_interrupt_while_the_command_starts_is_one_line(tmp_path, monkeypatch):
    """Ctrl-C while the command's modules are imported (numba compiling, a
    slow disk): no traceback either."""
    import sys

    class Importing:
        def __getattr__(self, name):
            raise KeyboardInterrupt
    monkeypatch.setitem(sys.modules, "streamcvm.data.outputs", Importing())
    try:
        r = inproc("info", tmp_path)
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped as a traceback")
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr == "streamcvm info: interrupted (nothing was written)\n", r.stderr


def test_a_system_error_without_an_interrupt_is_not_hidden(tmp_path, monkeypatch):
    from streamcvm.cli import info

    def run(args):
        raise SystemError("something else")
    monkeypatch.setattr(info, "run", run)
    with pytest.raises(SystemError, match="something else"):
        inproc("info", tmp_path)


@pytest.fixture(scope="module")
def model_and_store(tmp_path_factory):
    from streamcvm import CVMClassifier, save_model
    from streamcvm.data.writer import StoreWriter
    d = tmp_path_factory.mktemp("irq")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float64)
    with StoreWriter(str(d / "s.zarr"), 3, chunk_rows=100) as w:
        w.append(X, y)
        w.close()
    save_model(CVMClassifier(eps=1e-2).fit(X, y), str(d / "m"))
    return d / "s.zarr", d / "m"


def _interrupted_on_exit(*args, **kw):
    """A runner whose shutdown is interrupted (Ctrl-C while a dask cluster
    closes, after the output was written)."""
    @contextlib.contextmanager
    def cm():
        yield None
        raise KeyboardInterrupt
    return cm()


@pytest.mark.parametrize("out", ["p.txt", "p.zarr"])
def test_an_interrupt_after_the_predictions_are_written_says_so(model_and_store, tmp_path,
                                                               monkeypatch, out):
    from streamcvm.cli import predict
    store, model = model_and_store
    monkeypatch.setattr(predict, "runner_of", _interrupted_on_exit)
    r = inproc("predict", store, model, "-o", tmp_path / out)
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert (tmp_path / out).exists()
    if out.endswith(".txt"):
        assert len((tmp_path / out).read_text().splitlines()) == 300
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamcvm predict: interrupted ("), r.stderr
    assert "nothing was written" not in lines[0]
    assert str(tmp_path / out) in lines[0] and "complete" in lines[0], lines[0]


def test_an_interrupt_as_the_prediction_file_is_renamed_into_place_says_so(
        model_and_store, tmp_path, monkeypatch):
    from streamcvm.data import atomic
    store, model = model_and_store

    def interrupted(path):
        raise KeyboardInterrupt         # just after the rename
    monkeypatch.setattr(atomic, "fsync_dir", interrupted)
    r = inproc("predict", store, model, "-o", tmp_path / "p.txt")
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert len((tmp_path / "p.txt").read_text().splitlines()) == 300
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was written" not in lines[0], r.stderr
    assert str(tmp_path / "p.txt") in lines[0] and "complete" in lines[0], lines[0]


def test_an_interrupt_before_the_predictions_are_complete_writes_nothing(
        model_and_store, tmp_path, monkeypatch):
    from streamcvm.predict import writers
    store, model = model_and_store

    def chunks(*a, **kw):
        raise KeyboardInterrupt
        yield
    monkeypatch.setattr(writers, "_outputs", chunks)
    r = inproc("predict", store, model, "-o", tmp_path / "p.txt")
    assert r.returncode == 130
    assert r.stderr == "streamcvm predict: interrupted (nothing was written)\n", r.stderr
    assert os.listdir(tmp_path) == []


def _write(ck, n=1):
    for _ in range(n):
        snapshots.write(str(ck), {"run": RUN}, {"x": np.arange(5)}, keep=2)


def test_an_interrupted_prune_leaves_no_half_deleted_snapshot(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    _write(ck, 2)

    def torn(path, *a, **kw):
        # the manifest goes first, then the interrupt lands
        os.remove(os.path.join(path, "manifest.json"))
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(shutil, "rmtree", torn)
        with pytest.raises(KeyboardInterrupt):
            _write(ck)              # the third prunes the first
    assert [n for _, n in snapshots.list_snapshots(str(ck))] == \
        ["ckpt-00000002", "ckpt-00000003"]
    assert not any("unreadable" in line for line in snapshots.info(str(ck)))
    # the next run on the folder removes what the interrupted prune left
    Checkpointer(str(ck), RUN).claim().close()
    assert sorted(os.listdir(ck)) == ["ckpt-00000002", "ckpt-00000003"]


def test_a_resume_folder_of_only_damaged_snapshots_is_refused(tmp_path):
    from streamcvm.data.writer import StoreWriter
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3)).astype(np.float32)
    X[:100] += 3
    y = np.repeat([0.0, 1.0, 2.0], 100)
    with StoreWriter(str(tmp_path / "s.zarr"), 3) as w:
        w.append(X, y)
        w.close()
    ck = tmp_path / "ck"
    opts = ["-k", "1", "-e", "1e-2", "-q"]
    r = inproc("features", tmp_path / "s.zarr", "-o", tmp_path / "a.zarr",
               "--checkpoint-dir", ck, "--checkpoint-every", "0", *opts)
    assert r.returncode == 0, r.stderr
    names = [n for _, n in snapshots.list_snapshots(str(ck))]
    assert names
    for name in names:          # every snapshot damaged: a flipped byte in an array
        arr = next(f for f in os.listdir(ck / name) if f.endswith(".npy"))
        data = bytearray((ck / name / arr).read_bytes())
        data[-1] ^= 0xFF
        (ck / name / arr).write_bytes(bytes(data))
    before = sorted(os.listdir(ck))
    r = inproc("features", tmp_path / "s.zarr", "-o", tmp_path / "b.zarr", "--resume", ck,
               *opts)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("streamcvm features: error: ") and str(ck) in lines[0]
    assert "damaged" in lines[0], lines[0]
    assert sorted(os.listdir(ck)) == before         # nothing deleted
    assert not (tmp_path / "b.zarr").exists()


def test_a_damaged_newest_snapshot_still_falls_back(tmp_path):
    ck = tmp_path / "ck"
    _write(ck, 2)
    (ck / "ckpt-00000002" / "x.npy").write_bytes(b"torn")
    with pytest.warns(RuntimeWarning, match="damaged checkpoint"):
        _, arrays = Checkpointer(str(ck), RUN).load()
    np.testing.assert_array_equal(arrays["x"], np.arange(5))


def test_a_file_url_checkpoint_folder_is_locked(tmp_path):
    ck = tmp_path / "ck"
    url = "file://" + str(ck)
    first = Checkpointer(url, RUN).claim()
    try:
        assert (ck / ".lock").exists()
        for other in (url, str(ck)):
            with pytest.raises(CheckpointError, match="in use by another streamcvm run"):
                Checkpointer(other, RUN).claim()
        with pytest.raises(CheckpointError, match="in use"):
            Checkpointer(url, RUN).claim()
    finally:
        first.close()
    assert not (ck / ".lock").exists()
    Checkpointer(str(ck), RUN).claim().close()      # free again
