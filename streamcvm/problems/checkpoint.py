"""Crash-safe training checkpoints: a JSON manifest plus .npy arrays, no pickle.

A checkpoint directory holds numbered snapshots ``ckpt-00000012/``, each with
``manifest.json`` and one ``.npy`` file per array. A snapshot is written under
a temporary name in the same folder, every file fsynced, then renamed into
place and the folder fsynced, so a crash leaves either the previous snapshots
or the new one complete, never a half-written one under a final name. The
manifest records the XXH3-128 checksum of every array file; :func:`latest` skips a
snapshot whose files are missing or do not match (a torn disk write, a
truncated copy) with a warning and falls back to the one before. The last
``keep`` snapshots are kept (default 2).

The manifest carries ``format_version``: a snapshot written by a newer format
is refused with a clear error rather than misread.

A folder belongs to one run (:meth:`Checkpointer.claim`): its identity (the
estimator, its parameters, the store's fingerprint ...) is in every
manifest, a folder holding another run's snapshots is refused unless the
caller asks to replace them, and pruning only ever removes the run's own
snapshots. While a run writes, it holds ``.lock`` in the folder
(:class:`FolderLock`, an flock the OS drops when the process dies), so a
second writer is refused instead of racing the first.

The checkpoint directory may be an fsspec URL (``s3://``, ``memory://`` ...):
a snapshot is then written locally and uploaded with its manifest last
(:func:`streamcvm.data.atomic.atomic_dir`); a snapshot left without its manifest
by a killed upload is skipped, with a warning, as a damaged one is.
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

from ..data.atomic import Place, atomic_dir

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


def _snapshots(path):
    """(seq, folder name) of the snapshots under ``path``, oldest first."""
    out = []
    for name in Place(path).listdir():
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            out.append((int(name[len(PREFIX):]), name))
    return sorted(out)


def _run_of(place, name):
    """The run identity (``manifest["run"]``) of snapshot ``name``, or
    None when its manifest cannot be read."""
    try:
        m = json.loads(place.read(name, "manifest.json"))
        return m["run"] if isinstance(m, dict) else None
    except (OSError, ValueError, KeyError):
        return None


def _same(a, b):
    """Two run identities as JSON compares them (tuples are lists there)."""
    return json.loads(json.dumps(a, sort_keys=True, default=str)) == \
        json.loads(json.dumps(b, sort_keys=True, default=str))


def write(path, manifest, arrays, keep=2, own=None):
    """Write one snapshot (``manifest``: JSON-able dict; ``arrays``: name ->
    ndarray) atomically under ``path``; prune all but the last ``keep`` of
    the run's own snapshots: those in ``own`` (names), or by default those
    whose manifest holds the same ``run`` as this one (another run's
    snapshots are never removed). Returns the snapshot's folder."""
    place = Place(path)
    place.makedirs()
    snaps = _snapshots(path)
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
            own = [n for _, n in _snapshots(path)[:-1] if _same(_run_of(place, n), run)]
        mine = sorted(set(own) | {name}, key=lambda n: int(n[len(PREFIX):]))
        for old in mine[:-keep]:
            place.remove(old)
    return final


def clean_temporaries(path):
    """Remove half-written snapshots a killed writer left behind."""
    place = Place(path)
    for name in place.listdir():
        if name.startswith(".tmp-" + PREFIX):
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
    for _, name in reversed(_snapshots(path)):
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
    return bool(_snapshots(path))


def info(path):
    """One line per snapshot: what ``streamcvm info CHECKPOINT_DIR`` prints."""
    lines = []
    place = Place(path)
    for _, name in _snapshots(path):
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


def _difference(have, want):
    """(what, have, want) of the first key in which two run identities
    differ, the store first."""
    keys = sorted(set(want) | set(have), key=lambda k: (k != "store", str(k)))
    for key in keys:
        a, b = have.get(key), want.get(key)
        if _same(a, b):
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            k = [x for x in sorted(set(a) | set(b), key=str) if not _same(a.get(x), b.get(x))][0]
            return f"{key} {k}", a.get(k), b.get(k)
        return key, a, b
    return None, None, None


class Checkpointer:
    """Periodic snapshots of a training run (used by the estimators).

    ``base``: the run's identity, written into every manifest and compared on
    resume (``params``, ``store`` fingerprint, ...). Snapshots are taken by
    :meth:`solver_hook` every ``every`` seconds and/or ``every_iter``
    iterations and when an eps level begins, and by :meth:`save` between
    machines and at the end; those at a level or machine boundary only once a
    second has passed since the last (:meth:`due`). ``writing_s`` accumulates
    the time spent writing.
    """

    def __init__(self, path, base, every=60.0, every_iter=None, keep=2):
        self.path = os.fspath(path)
        self.base = base
        self.every = every
        self.every_iter = every_iter
        self.keep = keep
        self.writing_s = 0.0
        self.n_written = 0
        self._t_last = time.perf_counter()
        self._it_last = 0
        self._level = None
        self.done = []          # (record, arrays) of the finished machines
        self.event_gap = 1.0
        self.machine = 0
        self.own = None         # this run's snapshots in the folder (claim)
        self._lock = None
        self._made = False

    def claim(self, resume=False, replace=False):
        """Take the folder for this run before anything is written: lock it
        (a local folder: :class:`FolderLock`), remove the temporaries of
        killed writers, and look at the snapshots there. Another run's (a
        different identity) are refused with a :class:`CheckpointError`
        naming that run, unless ``replace`` (then they are deleted); this
        run's own are kept (``resume`` continues from them; without it they
        are pruned as the new ones come). Returns self."""
        place = Place(self.path)
        if not place.url:
            self._made = not os.path.isdir(self.path)
            os.makedirs(self.path, exist_ok=True)
            self._lock = FolderLock(self.path)
        try:
            clean_temporaries(self.path)
            own, other = [], []
            for _, name in _snapshots(self.path):
                run = _run_of(place, name)
                if run is None:
                    continue        # unreadable: skipped by latest(), never pruned
                (own if _same(run, self.base) else other).append((name, run))
            if other and not replace:
                name, run = other[-1]
                what, have, want = _difference(run, self.base)
                raise CheckpointError(
                    f"{self.path}: holds {len(other)} snapshot(s) of a different run "
                    f"({describe_run(run)}, newest {name}; it differs in {what}: "
                    f"{_short(have)} there, {_short(want)} here); use another checkpoint "
                    f"folder, or pass --checkpoint-replace to delete them"
                    + (" (this run cannot resume from them)" if resume else ""))
            for name, _ in other:
                place.remove(name)
            self.own = [name for name, _ in own]
        except BaseException:
            self.close()
            raise
        return self

    def close(self):
        """Release the folder's lock; a folder this run made and left empty
        goes too."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            if self._made:
                try:
                    os.rmdir(self.path)
                except OSError:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def load(self):
        """The newest usable snapshot (manifest, arrays) or None; a snapshot
        of another run raises CheckpointError naming what differs."""
        got = latest(self.path)
        if got is None:
            return None
        m, arrays, folder = got
        what, have, want = _difference(m.get("run", {}), self.base)
        if what is not None:
            raise CheckpointError(
                f"{folder}: checkpoint of a different run ({what}: checkpoint has "
                f"{_short(have)}, this run {_short(want)}); use another checkpoint folder "
                f"or do not resume")
        return m, arrays

    def save(self, solver=None, pool=None, position=None, machines=1, done=None):
        """Write a snapshot: the finished machines plus, when given, the
        machine in progress (solver and pool state, loop position)."""
        t = time.perf_counter()
        done = self.done if done is None else done
        # finished machines packed: one array per field, whatever their number
        # (one file per machine and field made 325 one-vs-one machines cost
        # 200x the training time)
        arrays = {}
        recs = []
        for rec, arrs in done:
            recs.append(dict(rec, lengths={n: len(a) for n, a in arrs.items()}))
        for n in (sorted(done[0][1]) if done else []):
            arrays["done_" + n] = np.concatenate([arrs[n] for _, arrs in done])
        progress = {"machine": self.machine, "machines": machines, "iteration": 0,
                    "core_size": 0, "eps": None, "elapsed": 0.0, "in_progress": False}
        current = None
        if solver is not None:
            meta, sarr = solver.state()
            arrays.update({"cur_" + n: a for n, a in sarr.items()})
            current = {"solver": meta, "pool": pool.state(), "position": list(position)}
            progress.update(in_progress=True, iteration=meta["n_iter"],
                            core_size=int(meta.get("core_size", solver.ball.core.n)),
                            eps=meta["level_eps"], elapsed=meta["elapsed"])
        manifest = {"run": self.base, "machines_done": recs, "current": current,
                    "progress": progress}
        folder = write(self.path, manifest, arrays, keep=self.keep, own=self.own)
        if self.own is not None:
            name = folder.rstrip("/").rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1]
            self.own = [n for n in self.own + [name]
                        if n in {m for _, m in _snapshots(self.path)}]
        self.n_written += 1
        self.writing_s += time.perf_counter() - t
        self._t_last = time.perf_counter()

    def due(self):
        """A snapshot at an event (an eps level begins, a machine ends) is taken
        when at least ``event_gap`` seconds have passed since the last one, so
        many short levels or machines do not turn into many writes."""
        return time.perf_counter() - self._t_last >= self.event_gap

    def solver_hook(self, pool, machines=1):
        """The ``checkpoint`` callable for :meth:`MEBSolver.fit`."""
        def hook(solver, position):
            level = position[0]
            due = (level != self._level and position[1] == 0 and self.due()) or \
                (self.every is not None and time.perf_counter() - self._t_last >= self.every) or \
                (self.every_iter is not None and solver.n_iter - self._it_last >= self.every_iter)
            self._level = level
            if due:
                self._it_last = solver.n_iter
                self.save(solver, pool, position, machines)
        return hook


def _short(v):
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


# -- a fit's checkpoints (the estimators' side) -------------------------------
def for_fit(est, store, kern, checkpoint_dir, resume, every, every_iter, keep, replace=False):
    """(Checkpointer or None, finished machines, resume state of the machine
    in progress or None) for a fit with these checkpoint arguments. The
    Checkpointer has claimed its folder (:meth:`Checkpointer.claim`;
    ``replace``: delete another run's snapshots there): the caller closes
    it when the fit ends (:func:`held`)."""
    est.resumed_from_ = None
    if checkpoint_dir is None:
        if resume:
            raise ValueError("resume=True needs checkpoint_dir")
        return None, [], None
    skip = ("verbose", "decision_function_shape", "n_jobs")      # do not change the model
    params = {k: v for k, v in est.get_params().items() if k not in skip}
    # numpy scalars as Python numbers, so a snapshot compares equal to its run
    params = json.loads(json.dumps(params, default=lambda v: v.item() if hasattr(v, "item")
                                   else str(v)))
    # the chunking too: the sampler's state names chunks
    base = {"estimator": type(est).__name__, "params": params,
            "store": store.fingerprint, "rows": int(store.n), "features": int(store.d),
            "chunk_rows": int(store.chunk_rows), "gamma": float(kern.gamma)}
    ck = Checkpointer(checkpoint_dir, base, every=every, every_iter=every_iter,
                      keep=keep).claim(resume, replace)
    try:
        return _resume(ck, est, checkpoint_dir, resume)
    except BaseException:
        ck.close()
        raise


def held(ck):
    """A context that closes the Checkpointer ``ck`` (None: nothing) on exit."""
    import contextlib
    return contextlib.nullcontext() if ck is None else ck


def _resume(ck, est, checkpoint_dir, resume):
    got = ck.load() if resume else None
    if got is None:
        if resume:
            import warnings
            warnings.warn(f"streamcvm: no checkpoint in {checkpoint_dir}; training from the "
                          f"start", RuntimeWarning, stacklevel=3)
        return ck, [], None
    man, arrays = got
    machines = finished_machines(ck, man, arrays)
    cur = None
    if man["current"] is not None:
        cur = {"current": man["current"],
               "arrays": {n[4:]: a for n, a in arrays.items() if n.startswith("cur_")}}
    # where the run continues from (training_, streamcvm info): a resume that
    # ignored its snapshot would be indistinguishable from a fresh fit otherwise
    est.resumed_from_ = {"machines_done": len(machines),
                         "n_iter": None if cur is None else
                         (cur["current"].get("solver") or {}).get("n_iter")}
    return ck, machines, cur


def finished_machines(ck, man, arrays):
    """The finished machines of a snapshot (manifest ``man``, ``arrays``),
    unpacked from :meth:`Checkpointer.save`'s one array per field and put
    back into ``ck`` (its ``done``, ``machine``) so later snapshots keep
    them."""
    from .machine import machine_from
    machines = []
    start = {}
    for rec in man["machines_done"]:
        rec = dict(rec)
        lengths = rec.pop("lengths")
        arrs = {}
        for n, ln in lengths.items():
            a = start.get(n, 0)
            arrs[n] = arrays["done_" + n][a:a + ln]
            start[n] = a + ln
        ck.done.append((rec, arrs))
        machines.append(machine_from(rec, arrs))
    ck.machine = len(machines)
    return machines


def stats(ck):
    """Snapshots written by this fit and the seconds spent writing them."""
    return None if ck is None else {"written": ck.n_written, "seconds": ck.writing_s}


def machine_done(ck, m, n_machines):
    """Record a finished machine; snapshot the run (no machine in progress)
    after the last machine, and after others when a snapshot is due."""
    if ck is None:
        return
    from .machine import machine_arrays
    ck.done.append(machine_arrays(m))
    ck.machine = len(ck.done)
    if ck.machine == n_machines or ck.due():
        ck.save(machines=n_machines)
