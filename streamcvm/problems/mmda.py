"""MMDA features as a problem (mmda paper, sec. IV): which rows each class's
directions separate, one direction after another, and the compact basis of
all of them. The solver of one direction is
:class:`streamcvm.solvers.mmda.MMDASolver`.

A feature is a unit direction in the kernel's feature space, kept as a
:class:`~.machine.Machine` (its full kernel expansion, intercept 0), so
models and checkpoints store features as they store machines. Two classes
give one sequence of directions; more give one sequence per class, that
class against the rest (:func:`sides`). Each direction is orthogonal to the
earlier ones of its class, so the classes are independent of each other:
they run side by side where the rows are held in memory
(:func:`features_in_order`).
"""
import time

import numpy as np

from ..data.sampling import ChunkPool
from ..solvers.mmda import Basis, Direction, MMDASolver, RowKernels
from .machine import Machine

def sides(codes):
    """The (neg, pos) sides of each sequence of directions: the two classes,
    or each class (pos) against the tuple of all others."""
    codes = [float(c) for c in codes]
    if len(codes) == 2:
        return [(codes[0], codes[1])]
    return [(tuple(c for c in codes if c != p), p) for p in codes]


def directions(machines):
    """The unit directions of finished features (machines)."""
    return [Direction(m.sv, m.coef, m.sv_ids, m.core_size) for m in machines]


def train_feature(store, kernel, side, key, before, cache, *, C, eps, sample_size, max_core,
                  n_components, options):
    """The next feature of one class (``side``), orthogonal to its features
    ``before``; ``key``: (seed, class, rank), its draws' seed; ``cache``: the
    :class:`~streamcvm.solvers.mmda.RowKernels` its solver may use;
    ``options``: the fit's :class:`~streamcvm.options.Options`. A ValueError
    (one line) when the rows give no direction."""
    t = time.perf_counter()
    pool = ChunkPool(store, np.random.default_rng(list(key)), classes=side,
                     pool_chunks=options.pool_chunks)
    try:
        solver = MMDASolver(kernel, C=C, eps=eps, basis=Basis(directions(before)),
                            sample_size=sample_size, max_core=max_core, cache=cache,
                            options=options).fit(pool, side)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = solver.unit_direction()
        ok = np.all(np.isfinite(d.coef))
    except ZeroDivisionError:
        ok = False
    finally:
        pool.close()            # its chunks freed before the next feature's pool
    if not ok:      # the earlier features span all the rows tell apart: none is left
        if key[2] == 0:
            raise ValueError(f"MMDA finds no direction for class {key[1] + 1}: its rows "
                             f"and the others' are not told apart (kernel "
                             f"{kernel.name}, gamma {kernel.gamma:.4g})")
        raise ValueError(f"n_components={n_components} is more than these rows "
                         f"give: feature {key[2] + 1} of class {key[1] + 1} has no "
                         f"direction left (at most {key[2]} here; ask for fewer)")
    hist = solver.history + [{"seconds": time.perf_counter() - t}]
    return Machine(sv=d.rows, coef=d.coef, intercept=0.0, sv_ids=d.ids, classes=side,
                   n_iter=solver.n_iter, core_size=d.own, history=hist)


def features_in_order(fit, store, kernel, sides, n_components, seed, **solver_kw):
    """(index, feature) of every feature ``fit`` (the estimator's
    :class:`~streamcvm.estimators.base.Fit`: its finished ``machines`` and
    ``todo()``) has still to find, in order; ``solver_kw``: C, eps,
    sample_size, max_core, options (:func:`train_feature`).

    Each class's features depend only on that class's earlier ones, so
    classes run side by side on up to ``numba.get_num_threads()`` threads
    (the compiled loop releases the GIL), each with its own row kernels (the
    ring's budget split between them); one thread: feature by feature, each
    handed to the checkpoint as it is found. A feature does not depend on
    the thread count (nor on what a cache held): the same features either
    way."""
    import queue

    import numba

    opts = solver_kw["options"]
    n, done = n_components, len(fit.machines)
    left = [j for j in range(len(sides)) if (j + 1) * n > done]
    # side by side only on the in-memory route (MMDASolver.fit: a store held
    # whole, MMDASolver.memory_route), which launches no parallel numba kernel
    # (numba's workqueue layer, where no OpenMP / TBB, aborts on two at once),
    # and for rows of at most the option mmda_side_by_side_mb: each thread's pool
    # and row kernels hold a copy of them
    memory = (store.n_chunks <= opts.pool_chunks
              and MMDASolver.memory_route(kernel, store.n, store.d, opts)
              and 4.0 * store.n * store.d <= opts.mmda_side_by_side_mb << 20)
    jobs = max(1, min(numba.get_num_threads(), len(left))) if memory else 1
    free = queue.SimpleQueue()
    for _ in range(jobs):
        free.put(RowKernels(kernel, budget=(opts.mmda_row_cache_mb << 20) // jobs)
                 if kernel.has("mmda_columns") else None)
    kw = dict(solver_kw, n_components=n)

    def one_class(j):          # its features not done yet, from its done ones
        first = max(done - j * n, 0)
        cache = free.get()
        try:
            out = list(fit.machines[j * n:j * n + first])
            for s in range(first, n):
                out.append(train_feature(store, kernel, sides[j], (seed, j, s), out, cache,
                                         **kw))
            return out[first:]
        finally:
            free.put(cache)

    todo = fit.todo()
    if jobs == 1:
        cache = free.get()
        for f in todo:
            j, s = divmod(f, n)
            yield f, train_feature(store, kernel, sides[j], (seed, j, s),
                                   fit.machines[j * n:f], cache, **kw)
        return
    from concurrent.futures import ThreadPoolExecutor
    ex = ThreadPoolExecutor(jobs)
    try:
        got = {j: ex.submit(one_class, j) for j in left}
        for f in todo:
            j, s = divmod(f, n)
            yield f, got[j].result()[s - max(done - j * n, 0)]
    finally:        # on an error or interrupt: the classes not started are dropped
        ex.shutdown(wait=True, cancel_futures=True)


def compact_features(machines, basis, kernel, store, seed, options):
    """One compact basis for all features (every machine's ``compact``,
    :func:`~.compress.compact_shared`), kept when every feature keeps R^2 >=
    the option ``compact_r2_min`` on training rows the fit did not use;
    ``basis``: the features' :class:`~streamcvm.solvers.mmda.Basis` (their
    distinct rows). Sets each machine's compact expansion and its record."""
    import scipy.sparse as sp
    from .compress import attach_shared, close_values, compact_shared, sample_rows
    got, info = None, {"decision": "sparse support rows: not compressed"}
    if not (store.sparse or sp.issparse(basis.rows)):
        few = options.few_machines

        def sample():
            Xf, Xc = sample_rows(store, options, seed)
            return (Xf, basis.project(kernel, Xf, few_machines=few), Xc,
                    close_values(basis.project(kernel, Xc, few_machines=few),
                                 options.compact_r2_min))
        got, info = compact_shared(basis.rows, np.abs(basis.W).sum(axis=1),
                                   np.zeros(len(basis.ids)), kernel, sample, options=options,
                                   seed=seed)
    attach_shared(machines, got, info)
