"""Progressive subsampling (``train_size="auto"``): a two-class machine
trained on as many rows as held-out accuracy asks for, at a cost that stops
growing with the store.

Why: on noisy data the L2-SVM's squared margin ``||c||^2`` falls like 1/n
while the ball's radius stays ~``kappa + 1 + 1/C``, so the eps that gives a
sane model (margin slack <= 0.3) falls like 1/n and the core set grows like
n: time like n^2, and a model with a support vector for ~10% of the rows
(docs/solvers.md, "Scale"). A model converged on a random m-row subsample is
far better per core vector than the n-row problem stopped early (measured on
the Gaussian mixture: 0.966 with 17K core vectors from 200K rows, 0.939 with
24K from 2M rows stopped at the same eps), and accuracy stops improving long
before m reaches millions of rows.

How: one pass over the store (a chunk task each, on the runner) draws a
uniform random sample of the machine's rows by a hash of (seed, row id):
``n_val`` validation rows, never trained on, and a training sample ordered by
that hash, at most the option ``sample_mb`` of it. Stages train the usual machine
(:func:`~streamcvm.problems.classification.train_machine`: exact or sampled
by cost, eps annealed) on the first m rows of the sample, m = the option
``first_stage_rows``, doubling, up to the whole sample. After each stage the
validation rows are predicted, and the stages' learning curve decides: the
next, costlier stage is trained only while the gain it promises up to the
sample's last stage is more than ``tol`` (the classifier's ``stage_tol``:
points of accuracy for a classifier, percent of the validation mean squared
error for a regression; :func:`gain_left`:
the learning curve ``a + b m^-c`` from the last two doublings' gains, the
last one taken one standard error up, and divided by ``1 - 2 e`` for the
label noise that a validation error ``e`` may hide, since flipped
validation labels shrink every gain seen on them). Each stage records the
estimate (``gain_left``, in the tolerance's unit): what stopping there
gave up. The last stage trained is the model. The sample, the stages and
the decisions depend only on the seed and the data, so a resumed run (the
stage, its solver and the gains so far are in the snapshot) gives the
same model.

Regression (:func:`~streamcvm.problems.regression.train_regressor`) runs the
same stages judged by squared errors (:class:`SquaredVerdict`; noisy
targets add their variance to both losses, so the drops need no noise
correction), each stage a fresh L2-SVR with C scaled to its rows. An
L2-SVR keeps most rows outside its tube as support vectors, so its core
set, and the |S|^2 kernel cache, grow like the stage's rows: the stages
also end before one whose core set, extrapolated from the last, would pass
a budget (``admit``).
"""
import numpy as np
import scipy.sparse as sp

from ..data.sampling import relabel
from ..options import Options

# The sizes, shares and the learning curve's priors are options (ProgressiveOptions):
# progressive_min_rows, first_stage_rows, sample_mb, stage_cap_rows / stage_cap_sqrt
# (an exact stage costs ~m^2, so beyond 2M rows the last stage's time grows like n),
# validation_share / _min / _max, rho_prior / _min / _max (error ~ a + b m^-c: a
# doubling's gain over the last one's is 2^-c; c = 0.5 at rho_prior 0.7).


def row_keys(ids, seed):
    """A uniform pseudo-random number in [0, 1) per row id (splitmix64 of
    seed and id): the sample a seed draws does not depend on the chunking."""
    with np.errstate(over="ignore"):
        z = np.asarray(ids, np.uint64) + np.uint64((int(seed) * 0x9E3779B97F4A7C15) % 2 ** 64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2 ** 53)


def machine_rows(store, classes):
    """The number of rows of the two sides of ``classes`` (all rows for None)."""
    if classes is None or store.classes is None:
        return int(store.n)
    counts = np.asarray(store.class_counts).sum(axis=0) if store.class_counts is not None \
        else None
    if counts is None:
        return int(store.n)
    cols = np.searchsorted(store.classes, np.concatenate([np.atleast_1d(c) for c in classes]))
    return int(counts[cols].sum())


def _sample_task(i, store, classes, hi, seed, weighted):
    """Chunk ``i``'s rows of ``classes`` whose key is below ``hi``: (ids,
    keys, X, y as +-1, w or None), or None."""
    a, e = store.chunk_bounds(i)
    ids = np.arange(a, e, dtype=np.int64)
    keys = row_keys(ids, seed)
    c = store.chunk(i)
    y = np.asarray(c.y, np.float64)
    keep = keys < hi
    if classes is not None:
        keep &= np.isin(y, classes[0]) | np.isin(y, classes[1])
    keep = np.flatnonzero(keep)
    if len(keep) == 0:
        return None
    X = c.X[keep]
    w = None
    if weighted:
        w = np.ones(len(keep)) if c.weight is None else np.asarray(c.weight, np.float64)[keep]
    yy = y[keep] if classes is None else relabel(y[keep], classes, "binary")
    return ids[keep], keys[keep], X, yy, w


def draw_sample(store, classes, n_val, n_train, seed, runner=None, weighted=False):
    """One pass: the validation rows (the ``n_val / rows`` share of smallest
    keys) and a training sample of about ``n_train`` rows after them, in key
    order (at most ``n_train`` rows), each as (ids, X, y, w)."""
    from ..data.parallel import as_runner
    rows = max(machine_rows(store, classes), 1)
    f_val = n_val / rows
    # a little over the expected count (4 standard deviations), cut to n_train below
    hi = min(1.0, (n_val + n_train + 4 * np.sqrt(n_train) + 16) / rows)
    parts = [r for r in as_runner(runner).map(_sample_task, store.n_chunks, store, classes,
                                              hi, seed, weighted) if r is not None]
    if not parts:
        raise ValueError("no rows of these classes in the store")
    ids = np.concatenate([p[0] for p in parts])
    keys = np.concatenate([p[1] for p in parts])
    X = sp.vstack([p[2] for p in parts]).tocsr() if sp.issparse(parts[0][2]) else \
        np.concatenate([p[2] for p in parts])
    y = np.concatenate([p[3] for p in parts])
    w = np.concatenate([p[4] for p in parts]) if weighted else None
    order = np.argsort(keys, kind="stable")
    v = order[keys[order] < f_val]
    t = order[keys[order] >= f_val][:n_train]

    def take(sel):
        return ids[sel], X[sel], y[sel], None if w is None else w[sel]
    return take(v), take(t)


def plan(store, classes, train_size, options):
    """(n_val, sample rows) for a progressive fit of this machine, or None
    when it trains on every row: ``train_size="all"``, or "auto" and at most
    the option ``progressive_min_rows`` rows. An integer ``train_size`` caps
    the sample."""
    o = options
    rows = machine_rows(store, classes)
    if train_size == "all" or (train_size == "auto" and rows <= o.progressive_min_rows) or \
            (train_size != "auto" and rows <= int(train_size)):
        return None
    n_val = int(min(max(o.validation_share * rows, o.validation_min), o.validation_max,
                    rows // 4))
    per_row = 8.0 * max(store.nnz / max(store.n, 1), 1.0) if store.sparse else 4.0 * store.d
    n_train = int(min(rows - n_val, (o.sample_mb << 20) // (per_row + 24)))
    if train_size == "auto":
        n_train = min(n_train, int(max(o.stage_cap_rows, o.stage_cap_sqrt * np.sqrt(rows))))
    else:
        n_train = min(n_train, int(train_size))
    return n_val, n_train


def stage_sizes(n_train, first):
    """first, 2 first, ... and n_train last (a last step of less than 1.5x
    merged); ``first`` is at most a quarter of ``n_train`` (and 1,000 rows)."""
    out = []
    m = max(min(first, n_train // 4), min(1000, n_train))
    while m * 1.5 < n_train:
        out.append(m)
        m *= 2
    out.append(n_train)
    return out


def paired(ok_prev, ok_new):
    """(fixed, broken): validation rows the new model gets right and the old
    one wrong, and the reverse."""
    return int(np.sum(ok_new & ~ok_prev)), int(np.sum(ok_prev & ~ok_new))


def gain_left(gains, ses, rows, last_rows, noise=0.0, options=None):
    """The drop in validation loss (per row) still expected from training up
    to ``last_rows`` rows rather than ``rows``, and the gain ratio used.

    The stages' learning curve, ``loss(m) = a + b m^-c``, gains ``rho =
    2^-c`` times the last doubling's gain with each doubling: the doublings
    left to ``last_rows`` (``J = log2(last_rows / rows)``, fractional for a
    last step of less than a doubling) gain ``g rho (1 - rho^J) / (1 -
    rho)``. ``g`` is the last doubling's gain plus one standard error of it
    (``ses``: a gain the validation rows cannot rule out); ``rho`` the last
    two gains' ratio, within the options' ``[rho_min, rho_max]``
    (``rho_prior`` after the first doubling; ``options`` None: the
    defaults). ``noise``: the validation labels' flip rate (an
    upper bound; :func:`label_noise`): flips shrink every gain seen on them
    by ``1 - 2 noise``, so the gain on clean labels is the one seen divided
    by it."""
    o = Options() if options is None else options
    g = max(gains[-1] + ses[-1], 0.0)
    if len(gains) >= 2 and gains[-2] > 0:
        rho = float(min(max(gains[-1] / gains[-2], o.rho_min), o.rho_max))
    else:
        rho = o.rho_prior
    J = max(np.log2(last_rows / rows), 0.0)
    left = g * rho * (1.0 - rho ** J) / (1.0 - rho) / max(1.0 - 2.0 * noise, 0.1)
    return float(left), rho


def label_noise(loss):
    """An upper bound on the validation labels' flip rate: the stage's
    validation error ``e = noise + (1 - 2 noise) e_clean >= noise`` (below
    one half), capped at 0.45. Class overlap counts as noise here too: for
    the rows where the classes overlap the same shrinking holds."""
    return float(min(np.mean(loss), 0.45))


class ErrorVerdict:
    """A two-class machine's stages judged by their held-out 0/1 errors
    (labels +-1); the last stage's rights and wrongs kept as bits."""
    classes = (-1.0, 1.0)   # the stage's rows as its pool draws them
    key = "ok"
    warm = True             # a stage continues from the last one's solver

    def losses(self, machine, kernel, Xv, yv, n_jobs):
        return ((machine.decision(kernel, Xv, n_jobs=n_jobs) > 0) != (yv > 0)).astype(np.float64)

    def record(self, loss, prev):
        rec = {"stage_validation_error": float(loss.mean())}
        if prev is not None:
            fixed, broken = paired(prev == 0, loss == 0)
            rec.update(fixed=fixed, broken=broken, noise_bound=label_noise(loss))
        return rec

    def noise(self, loss):
        return label_noise(loss)

    def points(self, left, loss):
        """A loss drop as the tolerance's unit: points of accuracy."""
        return 100.0 * left

    def encode(self, loss):
        return np.packbits(loss == 0).tobytes().hex()

    def decode(self, text, n):
        ok = np.unpackbits(np.frombuffer(bytes.fromhex(text), np.uint8))[:n].astype(bool)
        return (~ok).astype(np.float64)


class SquaredVerdict:
    """A regression's stages judged by their held-out squared errors (raw
    targets); the last stage's kept as float64."""
    classes = None
    key = "loss"
    warm = False            # C and the points change with the rows: each stage fresh

    def losses(self, machine, kernel, Xv, yv, n_jobs):
        return (machine.decision(kernel, Xv, n_jobs=n_jobs) - yv) ** 2

    def record(self, loss, prev):
        rec = {"stage_validation_rmse": float(np.sqrt(loss.mean()))}
        if prev is not None:
            d = prev - loss
            rec.update(gain=float(d.mean()), gain_se=float(np.sqrt(np.dot(d, d)) / len(d)))
        return rec

    def noise(self, loss):
        return 0.0          # noisy targets add their variance to both losses: drops are unbiased

    def points(self, left, loss):
        """A loss drop as the tolerance's unit: percent of the validation MSE."""
        return 100.0 * left / max(float(loss.mean()), 1e-300)

    def encode(self, loss):
        return np.asarray(loss, "<f8").tobytes().hex()

    def decode(self, text, n):
        return np.frombuffer(bytes.fromhex(text), "<f8")[:n].astype(np.float64)


class StagePool:
    """The sampler of a stage, with the progressive run's position in its
    snapshots (what :meth:`Checkpointer.solver_hook` saves as the pool)."""

    def __init__(self, pool, progress):
        self.pool, self.progress = pool, progress

    def state(self):
        return {"pool": self.pool.state(), "progressive": self.progress}

    def __getattr__(self, name):
        return getattr(self.pool, name)


def train_progressive(store, kernel, classes, sizes, *, options, tol, seed=0, runner=None,
                      weighted=False, resume=None, train=None, callback=None, verdict=None,
                      admit=None, compact=None):
    """Train the stages of a progressive fit; ``sizes = plan(...)``.
    ``train(stage_store, validation, make_pool, resume, warm)`` trains one
    stage's machine on an in-memory store of the sample's first rows (labels
    +-1), continuing from ``warm`` (the previous stage's solver) where it
    can, and returns (machine, solver). ``resume``: the machine-in-progress part of a snapshot
    (``current``, ``arrays``). ``verdict``: how stages are judged
    (:class:`ErrorVerdict`, the default, or :class:`SquaredVerdict` for a
    regression, ``classes`` None). ``admit(next rows, machine, rows)``:
    whether the next stage may be trained at all (e.g. its core set would
    not fit), asked after a stage the verdict would continue from.
    ``compact(machine, training rows, Xv, yv, losses)``: called on the final
    machine with its validation losses (e.g. to add its compact expansion,
    chosen on the validation rows). Returns
    the machine (support ids mapped to the store's rows) with the stages
    recorded in its history, the last one with why it was the last
    (``stopped_by``: "gain left below tolerance", "core budget" or "the
    whole sample"). ``tol``: the stop rule's tolerance (the classifier's
    ``stage_tol``, :func:`gain_left`); ``options``: the fit's
    :class:`~streamcvm.options.Options` (the stages' sizes, the learning
    curve's priors)."""
    from ..data.sampling import ChunkPool
    from ..data.store import ArrayStore
    n_val, n_train = sizes
    (vid, Xv, yv, _), (tid, Xt, yt, wt) = draw_sample(store, classes, n_val, n_train, seed,
                                                      runner, weighted)
    stages = stage_sizes(len(tid), options.first_stage_rows)
    verdict = ErrorVerdict() if verdict is None else verdict
    key = verdict.key
    progress = {"stage": 0, "records": [], key: None, "gains": [], "ses": []}
    cur = None if resume is None else resume.get("current")
    if cur is not None:
        progress = dict(cur["pool"]["progressive"])
        resume = {"current": dict(cur, pool=cur["pool"]["pool"]), "arrays": resume["arrays"]}
    prev = None if progress[key] is None else verdict.decode(progress[key], len(yv))
    machine = solver = None
    for k in range(progress["stage"], len(stages)):
        m = stages[k]
        sub = ArrayStore(Xt[:m], yt[:m], weight=None if wt is None else wt[:m], chunk_rows=m)
        progress = dict(progress, stage=k)
        snap = dict(progress)

        def make_pool(rng, state, sub=sub, snap=snap):
            pool = ChunkPool(sub, rng, classes=verdict.classes,
                             pool_chunks=options.pool_chunks) if state is None else \
                ChunkPool.from_state(sub, rng, state, classes=verdict.classes)
            return StagePool(pool, snap)
        if not verdict.warm:
            solver = None       # the last stage's solver (its kernel cache) is not kept
        machine, solver = train(sub, (Xv, yv), make_pool, resume, solver)
        resume = None
        loss = verdict.losses(machine, kernel, Xv, yv, solver.n_tasks())
        rec = {"stage_rows": int(m), "validation_rows": int(len(yv))}
        rec.update(verdict.record(loss, prev))
        go = k + 1 < len(stages)
        if not go:
            rec["stopped_by"] = "the whole sample"
        gains = list(progress.get("gains", []))
        ses = list(progress.get("ses", []))
        if prev is not None:
            d = prev - loss
            gains.append(float(d.mean()))
            ses.append(float(np.sqrt(np.dot(d, d)) / len(d)))
            if go:
                left, rho = gain_left(gains, ses, m, stages[-1], verdict.noise(loss),
                                      options)
                rec.update(gain_left=verdict.points(left, loss), gain_ratio=rho)
                if rec["gain_left"] <= tol:
                    rec["stopped_by"] = "gain left below tolerance"
                    go = False
        if go and admit is not None and not admit(stages[k + 1], machine, m):
            rec["stopped_by"] = "core budget"
            go = False
        new = [h for h in machine.history if "stage_rows" not in h]
        for h in new:
            h["stage_rows"] = int(m)
        new[-1].update(rec)                 # the stage's last level: its verdict
        progress = {"stage": k + 1, "records": progress["records"] + [rec],
                    key: verdict.encode(loss), "gains": gains, "ses": ses}
        prev = loss
        if callback is not None:
            callback(rec)
        if not go:
            break
    if compact is not None:
        solver = None       # its kernel cache goes first: compaction's memory comes after
        compact(machine, Xt[:m], Xv, yv, prev)     # prev: the machine's validation losses
    machine.sv_ids = tid[machine.sv_ids]
    # a stage that started a new solver (not a warm exact chain) left its
    # levels behind: its verdict is kept, ahead of the last solver's levels
    present = {h["stage_rows"] for h in machine.history if "validation_rows" in h}
    machine.history = [dict(r) for r in progress["records"]
                       if r["stage_rows"] not in present] + machine.history
    return machine
