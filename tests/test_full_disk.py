"""A full disk, simulated (no root, no real file system filled): every
output (stores, models, checkpoints, prediction files) then fails in one
line that names the output and says "no space left on device" (errno
ENOSPC), and leaves nothing of it behind; the temporary names of writers
that died are removed by the next write to the same output, never those of
a live process.

The three ways a full disk reaches streamcvm are simulated where they
arise: Python's own writes (zarr's chunk files, text) raise OSError(ENOSPC)
without a path; ``np.save`` (models, checkpoints) writes through C's fwrite
and numpy raises ``N requested and M written``, without errno.
"""
import errno
import io
import os
import subprocess
import sys

import numpy as np
import pytest

from streamcvm.data import atomic
from streamcvm.data.atomic import NoSpace, ShortWrite, atomic_dir, atomic_file

from conftest import inproc


def _one_line_no_space(err, path):
    text = str(err)
    assert "\n" not in text, text
    assert os.fspath(path) in text and "no space left on device" in text, text
    assert err.errno == errno.ENOSPC and err.filename == os.fspath(path)


def _left(folder):
    """Everything in ``folder``: a failed write must leave nothing."""
    return sorted(os.listdir(folder))


class _Statvfs:
    def __init__(self, free):
        self.f_bavail, self.f_frsize = free // 4096, 4096


@pytest.fixture
def numpy_disk_full(monkeypatch):
    """``np.save`` as on a full disk: part of the array written, then
    numpy's own error (fwrite came back short; no errno); the file system
    has no room left."""
    import numpy.lib.format as fmt
    real = fmt.write_array

    def short(fp, array, *a, **k):
        buf = io.BytesIO()
        real(buf, array, *a, **k)
        data = buf.getvalue()
        fp.write(data[: len(data) // 2])
        raise OSError(f"{len(data)} requested and {len(data) // 2} written")
    monkeypatch.setattr(fmt, "write_array", short)
    monkeypatch.setattr(os, "statvfs", lambda p: _Statvfs(0))


@pytest.fixture
def zarr_disk_full(monkeypatch):
    return _zarr_full(monkeypatch)


def _zarr_full(monkeypatch):
    """zarr's chunk and metadata files as on a full disk after three files:
    OSError(ENOSPC) without a path, as Python's write raises it."""
    from zarr.storage import _local
    real, calls = _local._put, []

    def put(path, value, *a, **k):
        calls.append(path)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, value, *a, **k)
    monkeypatch.setattr(_local, "_put", put)
    return calls


def _model():
    from streamcvm import CVMClassifier
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    return CVMClassifier().fit(X, np.where(X[:, 0] > 0, 1, -1))


def test_model_on_a_full_disk(tmp_path, numpy_disk_full):
    from streamcvm.estimators.model import save_model
    est = _model()
    with pytest.raises(NoSpace) as e:
        save_model(est, tmp_path / "m")
    _one_line_no_space(e.value, tmp_path / "m")
    assert _left(tmp_path) == []


def test_checkpoint_on_a_full_disk(tmp_path, numpy_disk_full):
    from streamcvm.data import snapshots
    with pytest.raises(NoSpace) as e:
        snapshots.write(tmp_path / "ck", {"run": "r"}, {"a": np.arange(10_000.0)})
    assert "\n" not in str(e.value) and "no space left on device" in str(e.value)
    assert e.value.errno == errno.ENOSPC and str(tmp_path / "ck") in str(e.value)
    assert [n for n in _left(tmp_path / "ck") if not n.startswith(".lock")] == []


def test_a_short_write_with_room_left_is_not_called_a_full_disk(tmp_path, monkeypatch,
                                                                 numpy_disk_full):
    monkeypatch.setattr(os, "statvfs", lambda p: _Statvfs(1 << 30))
    with pytest.raises(ShortWrite) as e:
        with atomic_dir(tmp_path / "d") as tmp:
            np.save(os.path.join(tmp, "a.npy"), np.arange(1000.0))
    assert "\n" not in str(e.value) and str(tmp_path / "d") in str(e.value)
    assert "stopped short" in str(e.value) and e.value.errno == errno.EIO
    assert _left(tmp_path) == []


@pytest.mark.parametrize("fmt", [".zarr", ".h5"])
def test_store_on_a_full_disk(tmp_path, monkeypatch, fmt, zarr_disk_full):
    from streamcvm.data.writer import StoreWriter
    out = tmp_path / ("s" + fmt)
    if fmt == ".h5":        # HDF5 says it in its own words, errno in the text
        import h5py
        real = h5py.Dataset.__setitem__

        def full(self, key, value):
            if self.name == "/X":
                raise OSError("Can't synchronously write data (file write failed: time = "
                              "..., filename = 'x', file descriptor = 3, errno = 28, error "
                              "message = 'No space left on device', buf = 0x1, total write "
                              "size = 85096, bytes this sub-write = 85096, bytes actually "
                              "written = 18446744073709551615, offset = 0)")
            return real(self, key, value)
        monkeypatch.setattr(h5py.Dataset, "__setitem__", full)
    X = np.ones((5000, 4), np.float32)
    with pytest.raises(NoSpace) as e:
        with StoreWriter(out, 4, chunk_rows=1000) as w:
            w.append(X, np.zeros(5000))
            w.close()
    _one_line_no_space(e.value, out)
    assert _left(tmp_path) == []


def test_ingest_on_a_full_disk_says_so_in_one_line(tmp_path, zarr_disk_full):
    src = tmp_path / "a.csv"
    rng = np.random.default_rng(0)
    src.write_text("".join(f"{int(r[0] > 0)},{r[1]:.4f},{r[2]:.4f}\n"
                           for r in rng.normal(size=(3000, 3))))
    out = tmp_path / "a.zarr"
    r = inproc("ingest", src, "-o", out, "--chunk-rows", "500", "-q")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(out) in lines[0] and "no space left on device" in lines[0], lines
    assert _left(tmp_path) == ["a.csv"]


class _FullRaw(io.RawIOBase):
    """A file on a disk that fills after ``room`` bytes: a short write, then
    ENOSPC, as write(2) does."""

    def __init__(self, path, room):
        self.f, self.room = open(path, "wb", buffering=0), room

    def writable(self):
        return True

    def write(self, b):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = self.f.write(bytes(b)[: self.room])
        self.room -= n
        return n

    def close(self):
        self.f.close()
        super().close()


def _full_opener(room):
    return lambda path, mode="w", **kw: io.TextIOWrapper(io.BufferedWriter(_FullRaw(path, room)))


@pytest.mark.parametrize("rows", [10, 100_000])     # failing at close (buffered), or before
def test_predictions_file_on_a_full_disk(tmp_path, rows):
    out = tmp_path / "p.txt"
    with pytest.raises(NoSpace) as e:
        with atomic_file(out, opener=_full_opener(8)) as f:
            for i in range(rows):
                f.write(f"{i}\n")
    _one_line_no_space(e.value, out)
    assert _left(tmp_path) == []


def test_predict_store_on_a_full_disk(tmp_path, monkeypatch):
    from streamcvm.data.store import open_store
    from streamcvm.data.synthetic import write_store
    from streamcvm.predict.writers import to_store
    src = tmp_path / "in" / "x.zarr"
    src.parent.mkdir()
    write_store(str(src), "gaussian", 2000, d=3, seed=0)
    est = _model()
    _zarr_full(monkeypatch)
    out = tmp_path / "p.zarr"
    with pytest.raises(NoSpace) as e:
        to_store(est, open_store(str(src)), str(out), "m", replace=False)
    _one_line_no_space(e.value, out)
    assert _left(tmp_path) == ["in"]


def test_a_failed_replace_keeps_the_previous_output(tmp_path, monkeypatch):
    """A rename that fails after the previous output was set aside puts it
    back: the path holds the old output, never nothing."""
    out = tmp_path / "o.txt"
    out.write_text("old\n")
    real = os.rename

    def rename(src, dst):
        if os.fspath(src).endswith(".writing-%d" % os.getpid()):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError):
        with atomic_file(out) as f:
            f.write("new\n")
    monkeypatch.undo()
    assert out.read_text() == "old\n" and _left(tmp_path) == ["o.txt"]


# -- leftovers of writers that died ------------------------------------------

def _dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _live_process():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_the_next_write_removes_dead_writers_leftovers(tmp_path, kind):
    out = tmp_path / ("o.txt" if kind == "file" else "m")
    dead, live = _dead_pid(), _live_process()
    try:
        stale_file = tmp_path / f".{out.name}.writing-{dead}"
        stale_dir = tmp_path / f".{out.name}.writing-{dead + 1_000_000}"   # no such pid
        stale_old = tmp_path / f".{out.name}.writing-{dead}.old"
        busy = tmp_path / f".{out.name}.writing-{live.pid}"
        other = tmp_path / f".other.writing-{dead}"     # another output's: not ours to judge
        stale_file.write_text("half")
        stale_dir.mkdir()
        (stale_dir / "a.npy").write_bytes(b"half")
        stale_old.write_text("older")
        busy.mkdir()
        other.write_text("x")
        if kind == "file":
            out.write_text("previous")
            with atomic_file(out) as f:
                f.write("new")
        else:
            with atomic_dir(out) as tmp:
                open(os.path.join(tmp, "x"), "w").close()
        assert not stale_file.exists() and not stale_dir.exists() and not stale_old.exists()
        assert busy.exists() and other.exists()
    finally:
        live.kill()
        live.wait()


def test_a_dead_writers_set_aside_output_is_put_back_not_deleted(tmp_path):
    """Killed between its two renames, a writer leaves the previous output
    only under ``....old``: the next writer puts it back first."""
    out = tmp_path / "o.txt"
    dead = _dead_pid()
    (tmp_path / f".o.txt.writing-{dead}.old").write_text("previous")
    atomic.remove_stale(out)
    assert out.read_text() == "previous" and _left(tmp_path) == ["o.txt"]


def test_a_failed_write_is_cleaned_by_the_next_one(tmp_path, numpy_disk_full, monkeypatch):
    """What a failed run could not remove (here: its temporary folder, the
    removal made to fail too) is removed by the next write of the output."""
    out = tmp_path / "m"
    monkeypatch.setattr(atomic, "remove", lambda p: None)
    pid = os.getpid()
    with pytest.raises(OSError):
        with atomic_dir(out) as tmp:
            np.save(os.path.join(tmp, "a.npy"), np.arange(1000.0))
    monkeypatch.undo()
    left = tmp_path / f".m.writing-{pid}"
    assert left.exists()
    dead = _dead_pid()
    os.rename(left, tmp_path / f".m.writing-{dead}")     # as if that run were gone
    with atomic_dir(out) as tmp:
        open(os.path.join(tmp, "x"), "w").close()
    assert _left(tmp_path) == ["m"]
