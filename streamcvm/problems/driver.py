"""What every problem's training shares: the sampler and solver of one
machine, driven to the end (sampled or exact), full passes over a store,
and the one pass of row statistics that some problems' eta needs."""
import dataclasses

import numpy as np

from ..data.sampling import ChunkPool, relabel
from ..options import SAMPLE_SIZE, Options
from ..solvers import MEBSolver
from .dispatch import StepCosts


class RowSource:
    """The rows of ``store`` (of the two sides of ``classes``, when given) as
    a full pass's point source: ``points(i)`` is store chunk ``i`` as
    ``[(ids, X, y[, w])]`` (labels as ``target``; ``w`` the sample weights
    when ``weighted``), empty when none of its rows is in ``classes``. A
    plain object: it is sent to dask workers, which open the store there.
    Calling it yields every chunk's blocks in order."""

    def __init__(self, store, classes=None, target="raw", weighted=False):
        self.store, self.classes, self.target, self.weighted = store, classes, target, weighted

    @property
    def n_chunks(self):
        return self.store.n_chunks

    def points(self, i):
        store, classes = self.store, self.classes
        a, e = store.chunk_bounds(i)
        c = store.chunk(i)
        ids = np.arange(a, e)
        y = np.asarray(c.y, np.float64)
        keep = slice(None)
        if classes is not None:
            keep = np.flatnonzero(np.isin(y, classes[0]) | np.isin(y, classes[1]))
            if len(keep) == 0:
                return []
        out = (ids[keep], c.X[keep], relabel(y[keep], classes, self.target))
        if self.weighted:
            w = np.ones(e - a) if c.weight is None else np.asarray(c.weight, np.float64)
            out += (w[keep],)
        return [out]

    def __call__(self):
        for i in range(self.n_chunks):
            yield from self.points(i)


def one_blas_thread():
    """A context with one BLAS thread. The search's kernel blocks are small
    (59 rows x |S|), where OpenBLAS's threads cost more than they give
    (ijcnn1: 4.0 s against 11.2 s when another process is busy), and the
    sampler's prefetch thread decompresses chunks on the other core. Entered
    once per fit (:func:`~streamcvm.data.parallel.thread_limits`)."""
    from ..data.parallel import thread_limits
    return thread_limits(1, "blas")


def _stats_task(i, store, classes):
    from ..solvers.kernels import sq_norms
    c = store.chunk(i)
    y = np.asarray(c.y, np.float64)
    keep = np.ones(len(y), bool) if classes is None else \
        np.isin(y, classes[0]) | np.isin(y, classes[1])
    if not keep.any():
        return None
    sq = sq_norms(c.X)[keep]
    w = 1.0 if c.weight is None else float(np.min(np.asarray(c.weight)[keep]))
    yk = y[keep]
    mean = float(yk.mean())
    return (float(sq.max()), float(sq.min()), float(np.abs(yk).max()), w, len(yk),
            float(yk.sum()), float(yk.min()), float(yk.max()), float((yk * yk).sum()),
            mean, float(((yk - mean) ** 2).sum()))


def row_stats(store, classes=None, runner=None):
    """One streaming pass (a task per chunk, on ``runner``): the extremes
    some problems' eta needs. Returns ``{"max_sq", "min_sq"}`` (squared row
    norms), and ``"max_abs_y"`` and ``"min_w"`` (smallest sample weight, 1
    without a weight column), ``"n"``, ``"sum_y"``, ``"sum_y2"``, ``"min_y"``,
    ``"max_y"``, and ``"mean_y"`` and ``"m2_y"`` (the sum of squared
    deviations from that mean: chunks' moments merged by their deviations,
    Chan et al., so a target far from 0 loses nothing to cancellation), over
    the rows of ``classes`` when given."""
    from ..data.parallel import as_runner
    out = {"max_sq": 0.0, "min_sq": np.inf, "max_abs_y": 0.0, "min_w": np.inf, "n": 0,
           "sum_y": 0.0, "sum_y2": 0.0, "min_y": np.inf, "max_y": -np.inf,
           "mean_y": 0.0, "m2_y": 0.0}
    for r in as_runner(runner).map(_stats_task, store.n_chunks, store, classes):
        if r is None:
            continue
        out["max_sq"] = max(out["max_sq"], r[0])
        out["min_sq"] = min(out["min_sq"], r[1])
        out["max_abs_y"] = max(out["max_abs_y"], r[2])
        out["min_w"] = min(out["min_w"], r[3])
        n, k = out["n"], r[4]
        delta = r[9] - out["mean_y"]
        out["m2_y"] += r[10] + delta * delta * (n * k / (n + k))
        out["mean_y"] += delta * (k / (n + k))
        out["n"] += r[4]
        out["sum_y"] += r[5]
        out["min_y"] = min(out["min_y"], r[6])
        out["max_y"] = max(out["max_y"], r[7])
        out["sum_y2"] += r[8]
    return out


def kernel_bound(kernel, stats):
    """An upper bound of k(x, x) over the rows ``stats`` describes (1 for a
    constant diagonal): the diagonal is a power of an affine function of
    ||x||^2, so its largest value is at one of the extremes. Raised by 1e-4
    relative: the solvers see float32 kernel blocks, whose diagonal may
    round above the float64 norm (by ~d 2^-24 relative)."""
    if kernel.constant_diagonal:
        return 1.0
    sq = np.array([stats["min_sq"], stats["max_sq"]])
    return float(kernel.diag(np.zeros((2, 1), np.float32), sq).max()) * (1.0 + 1e-4)


@dataclasses.dataclass
class Solve:
    """How one machine's solver runs: what every problem hands on to
    :func:`run_solver` unchanged, set once by the estimator.

    The solver's options: ``method`` ("bvm", "cvm", "fvm"), ``eps`` (or
    "auto"), ``sample_size``, ``max_core``, ``seed`` (the sampler's),
    ``n_jobs`` (threads of the exact pass; None: all). The run's plumbing:
    ``callback(solver)`` (progress), ``pass_progress(done, total, pass)``
    (full passes' chunk tasks), ``checkpointer`` (a
    :class:`streamcvm.problems.checkpoint.Checkpointer` that snapshots the solver as it
    goes; ``n_machines``: for its progress record), ``resume`` (``{"current":
    manifest["current"], "arrays": ...}`` of a snapshot taken inside this
    machine, to continue from), ``runner`` (where O(n) passes run their
    chunk tasks: a :class:`streamcvm.data.parallel.Runner`; None: the active dask
    client, else threads). ``compact``: "auto" (a machine trained by
    progressive subsampling gets a compact expansion where it pays,
    :func:`streamcvm.problems.compress.compact_machine`) or False (the default: trial
    fits, folds; the estimators set it). ``options``: every other setting of the
    solvers and samplers (:class:`streamcvm.options.Options`), as the estimator
    was given them."""

    method: str
    eps: object
    sample_size: int = SAMPLE_SIZE
    max_core: object = None
    seed: int = 0
    n_jobs: object = None
    callback: object = None
    pass_progress: object = None
    checkpointer: object = None
    n_machines: int = 1
    resume: object = None
    runner: object = None
    compact: object = False
    options: Options = dataclasses.field(default_factory=Options)

    def but(self, **changes):
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)


def run_solver(store, kernel, points, solve, *, classes=None, target="raw", b=1.0,
               C, full_pass=False, make_pool=None, dim=None, sparse=None, validation=None,
               stop="slack", warm=None, exact_start=True, certify=True):
    """Train one machine's MEB on ``store`` and return the solver.

    ``points``: the problem's points (:mod:`streamcvm.solvers.points`);
    ``solve``: the solver's options and the run's plumbing (:class:`Solve`;
    default ``Solve()``). ``classes``/``target``: which rows and how their
    labels are seen (see :meth:`streamcvm.data.sampling.ChunkPool.draw`). Small
    plain problems wholly pooled run the exact BVM. ``make_pool(rng, state)``: the
    sampler to draw from, fresh (``state`` None) or as saved (default: a
    :class:`ChunkPool` of rows); ``dim``, ``sparse``: the points' feature
    layout when they are not the store's rows. Callers should hold BLAS to
    one thread (:func:`one_blas_thread`). ``full_pass``: True for passes over
    the store's rows, or the problem's own point source (or a factory of
    point chunks). ``warm``: the solver of a smaller problem over the first rows of this one
    (a progressive fit's previous stage); an exact BVM run continues from its
    center. ``stop="validation"``: the annealing ends by the error of the
    held-out ``validation = (X, y)`` (y as the machine sees it), recorded at
    every eps level (:meth:`MEBSolver.set_validation`), rather than by the
    margin slack.

    Exact or sampled, by cost (:mod:`.dispatch`): a wholly pooled plain BVM
    problem runs :meth:`MEBSolver.fit_exact` from the start when an exact
    step costs at most a sampled step's fixed cost (unless ``exact_start``
    is False); otherwise it starts sampled and hands over to the exact pass,
    warm, once a sampled step (``sample_size`` x |S| kernel values) is
    predicted to cost more than an exact one (a kernel value per held row). A
    ``warm`` start goes on the same way: exact if its core set is already
    that large, else sampled from the level it ended on. The choice, with
    both predicted step costs, is recorded as ``dispatch`` in the history's
    last level. ``certify=False``: a fit stopped
    by ``max_core`` skips the pass that finds the eps its center satisfies
    (a probe whose model is thrown away when it reaches the cap)."""
    sample_size, max_core, resume = solve.sample_size, solve.max_core, solve.resume
    callback, runner, opts = solve.callback, solve.runner, solve.options
    rng = np.random.default_rng(solve.seed)
    cur = None if resume is None else resume.get("current")
    state = None if cur is None else cur["pool"]
    if make_pool is not None:
        pool = make_pool(rng, state)
    elif state is not None:
        pool = ChunkPool.from_state(store, rng, state, classes=classes)
    else:
        pool = ChunkPool(store, rng, classes=classes, sample_size=sample_size,
                         pool_chunks=opts.pool_chunks)
    solver = MEBSolver(kernel, store.d if dim is None else dim,
                       store.sparse if sparse is None else sparse, C=C, b=b,
                       method=solve.method, eps=solve.eps, sample_size=sample_size,
                       max_core=max_core, points=points, n_jobs=solve.n_jobs, options=opts)
    if stop == "validation":
        if validation is None:
            raise ValueError("stop='validation' needs held-out rows: a progressive fit "
                             "(train_size='auto' on more than 65,536 rows per machine, or "
                             "train_size=N below the rows)")
        solver.set_validation(validation[0], validation[1], rule=True)
    try:
        if cur is not None:
            solver.restore(cur["solver"], resume["arrays"])
        hook = None if solve.checkpointer is None else \
            solve.checkpointer.solver_hook(pool, solve.n_machines)
        rows = pool.all_rows(classes, target)       # a small store, wholly pooled
        exact = rows is not None and solver.exact_ok(rows[1])
        position = None if cur is None else tuple(cur["position"])
        if warm is not None and cur is None and rows is not None and warm.ball.core.n:
            solver = warm       # (a resumed run restores its own state instead)
            if stop == "validation":
                solver.set_validation(validation[0], validation[1], rule=True)
            # the sampled path continues at the level the last problem ended on
            position = (solver.levels().index(solver.level_eps), 0)
        costs = StepCosts.of(rows[1], sample_size, opts) if exact else None
        cheaper_exact = (lambda s: costs.exact_cheaper(s.ball.core.n)) if exact else None
        chose = None
        if solver is warm and exact and cheaper_exact(solver):
            chose = solver.dispatch = costs.record("exact", solver.ball.core.n)
            solver.fit_exact(*rows, checkpoint=hook, warm=True, callback=callback)
        elif solver is not warm and exact and (solver.exact_pending
                                                   or exact_start and costs.exact_cheaper(0)):
            # (a resumed exact pass keeps the choice its snapshot recorded)
            chose = solver.dispatch if solver.exact_pending and solver.dispatch else \
                costs.record("exact", 0)
            solver.dispatch = chose
            solver.fit_exact(*rows, checkpoint=hook, callback=callback)  # fresh, or resumed
        else:
            passes = full_pass if callable(full_pass) or hasattr(full_pass, "points") else \
                RowSource(store, classes, target, points.weighted) if full_pass else None
            solver.fit(pool, classes=classes, target=target, callback=callback,
                       full_pass=passes, checkpoint=hook, resume=position,
                       runner=runner, pass_progress=solve.pass_progress, switch=cheaper_exact)
            if exact:
                chose = solver.dispatch = costs.record(
                    "sampled, then exact" if solver.switched else "sampled", solver.ball.core.n)
            if solver.switched:
                solver.fit_exact(*rows, checkpoint=hook, warm=True, callback=callback)
            elif certify and passes is None and make_pool is None and dim is None and \
                    max_core is not None and solver.ball.core.n >= max_core:
                # stopped by the cap before its eps (points are the store's
                # rows): the eps its center satisfies, from one pass
                solver.certify(RowSource(store, classes, target, points.weighted),
                               runner=runner, progress=solve.pass_progress)
        if chose is not None and solver.history:
            solver.history[-1]["dispatch"] = chose
        if callback is not None:
            callback(solver)
    finally:
        pool.close()
    return solver
