"""Crash-safe snapshots in a folder: a JSON manifest plus .npy arrays, no pickle.

A checkpoint directory holds numbered snapshots ``ckpt-00000012/``, each with
``manifest.json`` and one ``.npy`` file per array. A snapshot is written under
a temporary name in the same folder, every file fsynced, then renamed into
place and the folder fsynced, so a crash leaves either the previous snapshots
or the new one complete, never a half-written one under a final name. The
manifest records the XXH3-128 checksum of every array file; :func:`latest` skips a
snapshot whose files are missing or do not match (a torn disk write, a
truncated copy) with a warning and falls back to the one before. The last
``keep`` snapshots of a run are kept (default 2); another run's are never
removed.

The manifest carries ``format_version``: a snapshot written by a newer format
is refused with a clear error rather than misread. While a run writes, it
holds ``.lock`` in the folder (:class:`FolderLock`, an flock the OS drops when
the process dies), so a second writer is refused instead of racing the first.

The folder may be an fsspec URL (``s3://``, ``memory://`` ...): a snapshot is
then written locally and uploaded with its manifest last
(:func:`streamcvm.data.atomic.atomic_dir`); a snapshot left without its
manifest by a killed upload is skipped, with a warning, as a damaged one is.

What a snapshot holds for a training run (the solver's state, finished
machines) is :mod:`streamcvm.problems.checkpoint`'s.
"""
import datetime
import io
import json
import os
import socket
import time
import warnings

import numpy as np
import xxhash

from ..options import CHECKPOINT_KEEP
from .atomic import Place, atomic_dir, fsync_dir, is_url, remove

FORMAT_VERSION = 1
PREFIX = "ckpt-"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (newer format, other store or parameters)."""


def _versions():
    import numba
    import scipy
    from .. import __version__
    return {"streamcvm": __version__, "numpy": np.__version__, "numba": numba.__version__,
            "scipy": scipy.__version__}


def file_digest(path):
    """XXH3-128 of a file's bytes (the checksum of checkpoint and model files)."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def list_snapshots(path):
    """(seq, folder name) of the snapshots under ``path``, oldest first."""
    out = []
    for name in Place(path).listdir():
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            out.append((int(name[len(PREFIX):]), name))
    return sorted(out)


def run_of(place, name):
    """The run identity (``manifest["run"]``) of snapshot ``name``, or
    None when its manifest cannot be read."""
    try:
        m = json.loads(place.read(name, "manifest.json"))
        return m["run"] if isinstance(m, dict) else None
    except (OSError, ValueError, KeyError):
        return None


def same_run(a, b):
    """Two run identities as JSON compares them (tuples are lists there)."""
    return json.loads(json.dumps(a, sort_keys=True, default=str)) == \
        json.loads(json.dumps(b, sort_keys=True, default=str))


def write(path, manifest, arrays, keep=CHECKPOINT_KEEP, own=None):
    """Write one snapshot (``manifest``: JSON-able dict; ``arrays``: name ->
    ndarray) atomically under ``path``; prune all but the last ``keep`` of
    the run's own snapshots: those in ``own`` (names), or by default those
    whose manifest holds the same ``run`` as this one (another run's
    snapshots are never removed). Returns the snapshot's folder."""
    place = Place(path)
    place.makedirs()
    snaps = list_snapshots(path)
    seq = snaps[-1][0] + 1 if snaps else 1
    final = place.join(f"{PREFIX}{seq:08d}")
    for name, a in arrays.items():
        if np.asarray(a).dtype == object:
            raise TypeError(f"checkpoint array {name!r} has dtype object")
    with atomic_dir(final, tmp=place.join(f".tmp-{PREFIX}{seq:08d}-{os.getpid()}"),
                    last="manifest.json", replace=False) as tmp:
        files = {}
        for name, a in arrays.items():
            fn = os.path.join(tmp, name + ".npy")
            np.save(fn, np.asarray(a), allow_pickle=False)
            files[name] = file_digest(fn)
        m = dict(manifest)
        m["format_version"] = FORMAT_VERSION
        m["library_versions"] = _versions()
        m["written"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        m["arrays"] = files
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump(m, f, indent=1, sort_keys=True)
    if keep > 0:
        name = f"{PREFIX}{seq:08d}"
        if own is None:
            run = manifest.get("run")
            own = [n for _, n in list_snapshots(path)[:-1] if same_run(run_of(place, n), run)]
        mine = sorted(set(own) | {name}, key=lambda n: int(n[len(PREFIX):]))
        for old in mine[:-keep]:
            remove_snapshot(place, old)
    return final


DELETING = ".deleting-"     # a snapshot being removed: renamed first, never read again


def remove_snapshot(place, name):
    """Remove snapshot ``name`` from ``place`` (a :class:`Place`) so that an
    interruption leaves no half-deleted snapshot under a snapshot's name: a
    local one is first renamed (atomically) to ``.deleting-NAME``, which no
    reader lists and :func:`clean_temporaries` removes, then deleted. An
    object store has no rename: its files go with the manifest first (a
    snapshot without its manifest is skipped as damaged)."""
    local = local_path(place.path)
    if local is None:
        p = place.root.rstrip("/") + "/" + name
        try:
            place.fs.rm_file(p + "/manifest.json")
        except (FileNotFoundError, OSError):
            pass
        place.remove(name)
        return
    doomed = os.path.join(local, f"{DELETING}{name}-{os.getpid()}")
    try:
        os.rename(os.path.join(local, name), doomed)
    except FileNotFoundError:
        return
    fsync_dir(local)
    remove(doomed)


def local_path(path):
    """The local folder of ``path``: itself, or the folder a ``file://`` URL
    names (the one :class:`Place` reads and writes its snapshots in); None
    for another URL (an object store)."""
    path = os.fspath(path)
    if not is_url(path):
        return path
    from fsspec.implementations.local import LocalFileSystem
    place = Place(path)         # the folder its snapshots are read from and written to
    return place.root if isinstance(place.fs, LocalFileSystem) else None


def clean_temporaries(path):
    """Remove half-written snapshots a killed writer left behind, and the
    leftovers of an interrupted pruning (:func:`remove_snapshot`)."""
    place = Place(path)
    for name in place.listdir():
        if name.startswith((".tmp-" + PREFIX, DELETING + PREFIX)):
            place.remove(name)


def read(folder):
    """(manifest, arrays) of one snapshot; raises CheckpointError for a newer
    format and OSError / ValueError for a damaged one."""
    place = Place(folder)
    m = json.loads(place.read("manifest.json"))
    v = m.get("format_version")
    if not isinstance(v, int) or v > FORMAT_VERSION:
        raise CheckpointError(f"{folder}: checkpoint format version {v!r} is newer than "
                              f"this streamcvm reads ({FORMAT_VERSION}); upgrade streamcvm")
    arrays = {}
    for name, digest in m["arrays"].items():
        fn = place.join(name + ".npy")
        if place.url:           # an object store: the bytes, then the array
            data = place.read(name + ".npy")
            if xxhash.xxh3_128(data).hexdigest() != digest:
                raise ValueError(f"{fn}: checksum mismatch")
            arrays[name] = np.load(io.BytesIO(data), allow_pickle=False)
            continue
        if file_digest(fn) != digest:
            raise ValueError(f"{fn}: checksum mismatch")
        arrays[name] = np.load(fn, allow_pickle=False)
    return m, arrays


def latest(path):
    """The newest readable snapshot under ``path`` as (manifest, arrays,
    folder), or None when there is none. A damaged newest snapshot is skipped
    with a warning; a newer-format one raises CheckpointError."""
    for _, name in reversed(list_snapshots(path)):
        folder = Place(path).join(name)
        try:
            m, arrays = read(folder)
        except CheckpointError:
            raise
        except (OSError, ValueError, KeyError) as e:
            warnings.warn(f"streamcvm: skipping damaged checkpoint {folder} ({e}); "
                          f"using an older one", RuntimeWarning, stacklevel=2)
            continue
        return m, arrays, folder
    return None


def is_checkpoint_dir(path):
    """True for a folder holding snapshots (what ``streamcvm info`` tells apart
    from a store)."""
    return bool(list_snapshots(path))


def info(path):
    """One line per snapshot: what ``streamcvm info CHECKPOINT_DIR`` prints."""
    lines = []
    place = Place(path)
    for _, name in list_snapshots(path):
        try:
            m = json.loads(place.read(name, "manifest.json"))
        except (OSError, ValueError) as e:
            lines.append(f"{name}: unreadable ({e})")
            continue
        p = m.get("progress", {})
        head = f"{name}: written {m.get('written')}, "
        if p.get("in_progress"):
            lines.append(head + f"machine {p.get('machine', 0) + 1}/{p.get('machines', 1)}, "
                         f"iteration {p.get('iteration', 0):,}, core set "
                         f"{p.get('core_size', 0):,}, eps level {p.get('eps')}, "
                         f"elapsed {p.get('elapsed', 0.0):.1f} s")
        else:
            lines.append(head + f"{p.get('machine', 0)}/{p.get('machines', 1)} machines "
                         f"finished")
    return lines


class FolderLock:
    """``FOLDER/.lock``, held (flock, exclusive) while one run writes
    snapshots there: a second writer is refused with a one-line
    :class:`CheckpointError` naming the holder. The OS drops an flock when
    its process dies, so a killed run's lock is stale at once; the file
    names the holder for messages only. Local folders only (object stores
    have no locks)."""

    NAME = ".lock"

    def __init__(self, folder):
        import fcntl
        self.folder = os.fspath(folder)
        self.path = os.path.join(self.folder, self.NAME)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
                os.close(fd)
                raise CheckpointError(
                    f"{self.folder}: in use by another streamcvm run"
                    f"{' (' + holder + ')' if holder else ''}; wait for it to end, or use "
                    f"another checkpoint folder") from None
            # still the file at the path (a releasing holder unlinks it first)?
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        when = datetime.datetime.now().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {when}".encode(), 0)
        self.fd = fd

    def release(self):
        import fcntl
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def describe_run(run):
    """A run identity in a few words, for messages."""
    if not isinstance(run, dict):
        return "an unknown run"
    est = run.get("estimator", "?")
    data = run.get("store") or run.get("points")
    return f"a {est} run" + (f" on data {str(data)[:12]}..." if data else "")


def run_difference(have, want):
    """(what, have, want) of the first key in which two run identities
    differ, the store first."""
    keys = sorted(set(want) | set(have), key=lambda k: (k != "store", str(k)))
    for key in keys:
        a, b = have.get(key), want.get(key)
        if same_run(a, b):
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            k = [x for x in sorted(set(a) | set(b), key=str) if not same_run(a.get(x), b.get(x))][0]
            return f"{key} {k}", a.get(k), b.get(k)
        return key, a, b
    return None, None, None
