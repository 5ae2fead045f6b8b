"""A training run's checkpoints: what a snapshot (:mod:`streamcvm.data.snapshots`)
holds for a fit, and the estimators' side of it.

A folder belongs to one run (:meth:`Checkpointer.claim`): its identity (the
estimator, its parameters, the store's fingerprint ...) is in every
manifest, a folder holding another run's snapshots is refused unless the
caller asks to replace them, and pruning only ever removes the run's own
snapshots. While a run writes, it holds the folder's lock
(:class:`~streamcvm.data.snapshots.FolderLock`). :meth:`Checkpointer.solver_hook`
snapshots the solver and its sampler at each new eps level, every N seconds
or every N iterations; :func:`for_fit` and :func:`machine_done` are what a fit
calls (through :class:`streamcvm.estimators.base.Fit`).
"""
import json
import os
import time

import numpy as np

from ..data.atomic import Place
from ..data.snapshots import (CheckpointError, FolderLock, clean_temporaries, describe_run,
                              latest, list_snapshots, local_path, read, remove_snapshot,
                              run_difference, run_of, same_run, write)
from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, recorded


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

    def __init__(self, path, base, every=CHECKPOINT_EVERY, every_iter=None,
                 keep=CHECKPOINT_KEEP):
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
        local = local_path(self.path)     # a file:// URL is a local folder: locked too
        if local is not None:
            self._made = not os.path.isdir(local)
            os.makedirs(local, exist_ok=True)
            self._lock = FolderLock(local)
        try:
            clean_temporaries(self.path)
            own, other = [], []
            for _, name in list_snapshots(self.path):
                run = run_of(place, name)
                if run is None:
                    continue        # unreadable: skipped by latest(), never pruned
                (own if same_run(run, self.base) else other).append((name, run))
            if other and not replace:
                name, run = other[-1]
                what, have, want = run_difference(run, self.base)
                raise CheckpointError(
                    f"{self.path}: holds {len(other)} snapshot(s) of a different run "
                    f"({describe_run(run)}, newest {name}; it differs in {what}: "
                    f"{_short(have)} there, {_short(want)} here); use another checkpoint "
                    f"folder, or pass --checkpoint-replace to delete them"
                    + (" (this run cannot resume from them)" if resume else ""))
            for name, _ in other:
                remove_snapshot(place, name)
            self.own = [name for name, _ in own]
        except BaseException:
            self.close()
            raise
        return self

    def close(self):
        """Release the folder's lock; a folder this run made and left empty
        goes too."""
        if self._lock is not None:
            self._lock_folder = self._lock.folder
            self._lock.release()
            self._lock = None
            if self._made:
                try:
                    os.rmdir(self._lock_folder)
                except OSError:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def load(self):
        """The newest usable snapshot (manifest, arrays) or None when the
        folder holds no snapshot; a snapshot of another run raises
        CheckpointError naming what differs, and so does a folder whose
        snapshots are all damaged (nothing there is deleted: a resume
        never silently starts over)."""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = latest(self.path)
        if got is None:
            snaps = list_snapshots(self.path)
            if snaps:
                newest = Place(self.path).join(snaps[-1][1])
                try:
                    read(newest)
                    why = "unreadable"
                except Exception as e:      # noqa: BLE001 (what made it unusable)
                    why = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise CheckpointError(
                    f"{self.path}: no usable snapshot to resume from: all {len(snaps)} "
                    f"damaged (newest {snaps[-1][1]}: {why}); nothing was deleted: move "
                    f"the folder aside or use another checkpoint folder")
            return None
        for w in caught:            # skipped damaged ones, as latest() says
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        m, arrays, folder = got
        what, have, want = run_difference(m.get("run", {}), self.base)
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
                        if n in {m for _, m in list_snapshots(self.path)}]
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
    params = {k: v for k, v in recorded(est.get_params()).items() if k not in skip}
    # numpy scalars as Python numbers, so a snapshot compares equal to its run
    params = json.loads(json.dumps(params, default=lambda v: v.item() if hasattr(v, "item")
                                   else str(v)))
    # the chunking too: the sampler's state names chunks
    base = {"estimator": type(est).__name__, "params": params,
            "store": store.fingerprint, "rows": int(store.n), "features": int(store.d),
            "chunk_rows": int(store.chunk_rows), "gamma": float(kern.gamma)}
    # what the solver's state depends on beyond these, when the estimator says
    # (a regressor's standardised targets: a snapshot of a fit on raw targets,
    # from an older streamcvm, is another run)
    base.update(getattr(est, "run_identity", {}))
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


def finished_machines(ck, man, arrays, make=None):
    """The finished machines of a snapshot (manifest ``man``, ``arrays``),
    unpacked from :meth:`Checkpointer.save`'s one array per field and put
    back into ``ck`` (its ``done``, ``machine``) so later snapshots keep
    them. ``make(record, arrays)``: what each becomes (default
    :func:`~.machine.machine_from`)."""
    from .machine import machine_from
    make = machine_from if make is None else make
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
        machines.append(make(rec, arrs))
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
