"""C and gamma chosen by held-out rows for :class:`CVMClassifier`
(``C="auto"``, ``gamma="auto"``): the rows, each candidate's machines and
their validation errors. The search itself (successive halving on a grid
that grows past its edges) is :func:`streamcvm.problems.selection.halving`.

The rows (the options ``search_*``): rows in memory, or a store of at most
``search_whole_rows`` rows, are read whole and split, class by class, into
``search_val_share`` validation rows (at most ``search_val_max``) and fit
rows; a larger store gives ``search_val_max`` validation rows and
``search_rows`` fit rows from one pass (by a hash of the seed and row id:
the rows a progressive fit validates on too). The last rung trains on at
most ``search_rows`` fit rows. The fit rows are ordered so that every
prefix holds each class in proportion (a class's i-th row comes at i / its
rows), and a rung trains on a prefix. The machines of a candidate are those
of the final model (every class pair or every class against the rest, the
class and sample weights), trained as a small in-memory fit on the rung's
rows; the validation error is the whole model's. With fewer than
``search_min_validation_rows`` validation rows there is no search: the
default point is chosen, and the record says so (``reason``).
"""
import numpy as np
import scipy.sparse as sp

from ..solvers.kernels import kernel_class
from ..predict.decision import build_union, class_indices, union_values
from ..problems import train_machine
from ..data.parallel import n_threads
from ..problems.progressive import draw_sample, row_keys
from ..problems.selection import Axis, halving, rung_sizes

# The search's rows, grids and rules are options (streamcvm.options.SearchOptions).
# Before a progressive fit (staged_*), no narrower kernel than 1/beta: a narrow
# kernel's lead on the search's few thousand rows fades as the stages grow (the
# Gaussian mixture: 8/beta ahead by 4.4 standard errors at 8,192 rows, behind by 0.13
# points at a 262,144-row stage, with twice the support vectors and no compact
# expansion), and no C above 100: BVM's steps, and a stage's time, grow with C (clean
# 200K-row boundary data chose C = 10^4, and its stages took 1,264 s against 212 s at
# C = 100). A candidate's C is the final fit's, on all its rows; a rung on fewer rows
# trains at C (rows / rung rows)^search_c_rows_exp. The best C of an L2-SVM falls as
# the rows grow (its loss sums over them): on ijcnn1 30 at 5,000 rows, 10 at 16,000,
# 3-10 at 50,000; ranking candidates at their own rows favours a C too large (and
# costly) for the final fit. The exponent is between 0 (C per row fixed) and 1 (C x
# rows fixed). Fewer held-out rows than search_min_validation_rows and there is no
# search: an error rate then moves in steps of 10% or more, the candidates tie, and
# ties go to the smallest C and gamma, which grows the grid to its far corner (C =
# 1e-3, gamma 1/64 of its unit: 9 rows, one held out, scored 56% on their own rows).
# The point chosen instead is the default one, C = 1 and gamma = 1/beta (a C or gamma
# given is kept).


def axes_of(options, staged):
    """The C and gamma :class:`~streamcvm.problems.selection.Axis` of the
    search (``staged``: before a progressive fit)."""
    o = options
    c = Axis("C", o.staged_c_grid if staged else o.search_c_grid, o.search_c_step,
             *(o.staged_c_bounds if staged else o.search_c_bounds))
    g = Axis("gamma", o.staged_gamma_grid if staged else o.search_gamma_grid,
             o.search_gamma_step, *(o.staged_gamma_bounds if staged else o.search_gamma_bounds))
    return c, g


NO_SEARCH = "too few rows to hold any out"


def _read_all(store):
    """(X, y, w or None) of every row of a small store."""
    if hasattr(store, "X") and store.y is not None:
        return store.X, np.asarray(store.y, np.float64), getattr(store, "weight", None)
    parts = [store.chunk(i) for i in range(store.n_chunks)]
    X = sp.vstack([p.X for p in parts], format="csr") if store.sparse else \
        np.concatenate([np.asarray(p.X) for p in parts])
    y = np.concatenate([np.asarray(p.y, np.float64) for p in parts])
    w = None
    if store.has_weight:
        w = np.concatenate([np.ones(len(p.y)) if p.weight is None else
                            np.asarray(p.weight, np.float64) for p in parts])
    return X, y, w


def _stratified(y, keys):
    """An order of the rows in which every prefix holds each class in
    proportion: a class's rows by key, the i-th of n_c at i / n_c."""
    pos = np.empty(len(y))
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        idx = idx[np.argsort(keys[idx], kind="stable")]
        pos[idx] = np.arange(len(idx)) / len(idx)
    return np.lexsort((keys, pos))


def split_rows(store, seed, options, runner=None):
    """((X, y, w) fit rows in :func:`_stratified` order, (X, y) validation
    rows); ``w`` None without sample weights. ``options``: the search's
    rows (``search_whole_rows``, ``search_val_share``, ``search_val_max``,
    ``search_rows``)."""
    from ..data.store import ArrayStore
    o = options
    if isinstance(store, ArrayStore) or store.n <= o.search_whole_rows:
        X, y, w = _read_all(store)
        keys = row_keys(np.arange(len(y)), seed)
        val = np.zeros(len(y), bool)
        share = min(o.search_val_share, o.search_val_max / max(len(y), 1))
        for c in np.unique(y):
            idx = np.flatnonzero(y == c)
            k = int(round(share * len(idx))) if len(idx) >= 5 else 0
            val[idx[np.argsort(keys[idx], kind="stable")[:k]]] = True
        v, f = np.flatnonzero(val), np.flatnonzero(~val)
        f = f[_stratified(y[f], keys[f])]
        return (X[f], y[f], None if w is None else np.asarray(w)[f]), (X[v], y[v])
    n_val = int(min(o.search_val_max, o.search_val_share * store.n))
    (_, Xv, yv, _), (ids, Xf, yf, wf) = draw_sample(store, None, n_val, o.search_rows, seed,
                                                    runner, weighted=store.has_weight)
    o = _stratified(yf, row_keys(ids, seed))
    return (Xf[o], yf[o], None if wf is None else wf[o]), (Xv, yv)


def fit_machines(store, kern, solve, subs, C, class_weight, **kw):
    """A candidate's machines: every sub-problem of ``subs`` trained on
    ``store`` (in memory) at ``C``, side by side where they can be
    (:func:`~streamcvm.problems.classification.side_by_side`)."""
    from ..data.parallel import in_order
    from ..problems.classification import side_by_side

    def one(k):
        pair = subs[k]
        return train_machine(store, kern, solve.but(seed=solve.seed + k), classes=pair, C=C,
                             class_weight=None if class_weight is None else
                             (class_weight[pair[0]], class_weight[pair[1]]), **kw)
    jobs = side_by_side(store, kern, subs, solve, class_weight=class_weight, **kw)
    return list(in_order(one, range(len(subs)), jobs))


def search(est, store, classes, subs, class_weight, base_gamma, solve, runner=None,
           progress=None, final_rows=None, staged=False):
    """(C, gamma, record) chosen by :func:`~streamcvm.problems.selection.halving`
    on held-out rows of ``store`` for ``est`` (a :class:`CVMClassifier`;
    its ``C`` and ``gamma``: "auto" is searched, a number is kept).
    ``classes``: the codes of the store's y, in the model's order;
    ``solve``: the fits' :class:`~streamcvm.problems.driver.Solve`;
    ``progress(trial, best)``: after each fit; ``final_rows``: the rows the
    final fit trains on (default: the store's), to which a candidate's C
    refers (the option ``search_c_rows_exp``); ``staged``: the final fit is
    progressive (its stages train on more rows: the narrower axes
    ``staged_*``). The rows, grids and rules are ``solve.options``'
    (:class:`~streamcvm.options.SearchOptions`). ``record`` is what
    ``selection_`` keeps."""
    from ..data.store import ArrayStore
    from ..solvers.kernels import Kernel
    o = solve.options
    (Xf, yf, wf), (Xv, yv) = split_rows(store, solve.seed, o, runner)
    c_axis, gamma_axis = axes_of(o, staged)
    index = {float(c): i for i, c in enumerate(classes)}
    truth = np.array([index.get(float(v), -1) for v in yv])
    axes, fixed = [], {}
    if est.C == "auto":
        axes.append(c_axis)
    else:
        fixed["C"] = float(est.C)
    if est.gamma == "auto" and kernel_class(est.kernel).length_scale:
        axes.append(gamma_axis)
    else:
        fixed["gamma"] = 1.0 if est.gamma == "auto" else float(est.gamma) / base_gamma
    weighted = wf is not None
    final_rows = int(store.n if final_rows is None else final_rows)
    if len(yv) < o.search_min_validation_rows:
        return _default_point(axes, fixed, base_gamma, final_rows, len(yf), len(yv), o)
    rungs = rung_sizes(min(len(yf), o.search_rows), o.search_first_rows, o.halving_eta)

    def evaluate(p, rows):
        kern = Kernel(est.kernel, gamma=p["gamma"] * base_gamma, coef0=est.coef0,
                      degree=est.degree)
        sub = ArrayStore(Xf[:rows], yf[:rows], weight=None if wf is None else wf[:rows])
        present = set(np.unique(yf[:rows]).tolist())
        todo = [s for s in subs if all(_present(side, present) for side in s)]
        c_fit = p["C"] * (final_rows / rows) ** o.search_c_rows_exp
        ms = fit_machines(sub, kern, solve, todo, c_fit, class_weight,
                          sample_weight=weighted, train_size="all", stop="slack")
        nv = len(yv) if rows == rungs[-1] else min(len(yv), o.search_val_early)
        F = union_values(kern, build_union(ms), np.array([m.intercept for m in ms]), Xv[:nv],
                         n_jobs=n_threads(solve.n_jobs), few_machines=o.few_machines)
        if len(todo) == len(subs):
            pred = class_indices(F, est.multi_class, len(classes))
        else:           # a class missing from the rung's rows: never predicted
            pred = _partial_indices(F, todo, classes, est.multi_class)
        n_sv = len(np.unique(np.concatenate([m.sv_ids for m in ms])))
        return {"losses": (pred != truth[:nv]).astype(np.float64), "n_support": int(n_sv),
                "n_iter": int(sum(m.n_iter for m in ms)), "C_fit": float(c_fit)}

    # before a progressive fit, the default point, kept unless the validation rows
    # tell a better one: the stages train on far more rows than the search saw
    anchor = {a.name: 1.0 for a in axes} if staged else None
    chosen, trials = halving(axes, rungs, evaluate, eta=o.halving_eta,
                             cost_ratio=o.halving_cost_ratio, fixed=fixed, callback=progress,
                             cost="n_iter", anchor=anchor)
    record = {"searched": [a.name for a in axes], "fixed": fixed, "final_rows": final_rows,
              "c_rows_exp": o.search_c_rows_exp,
              "gamma_unit": float(base_gamma), "fit_rows": int(len(yf)),
              "validation_rows": int(len(yv)), "rungs": [int(r) for r in rungs],
              "chosen": {"C": chosen["C"], "gamma": chosen["gamma"] * base_gamma,
                         "gamma_x": chosen["gamma"]},
              "trials": [dict(t, gamma_x=t["gamma"], gamma=t["gamma"] * base_gamma)
                         for t in trials]}
    return chosen["C"], chosen["gamma"] * base_gamma, record


def _default_point(axes, fixed, base_gamma, final_rows, fit_rows, val_rows, options):
    """(C, gamma, record) without a search: the searched parameters at the
    default point (C = 1, gamma = 1 x ``base_gamma``), the others as given;
    the record says why (``reason``) and holds no trials."""
    chosen = dict({a.name: 1.0 for a in axes}, **fixed)
    record = {"searched": [], "not_searched": [a.name for a in axes], "fixed": fixed,
              "reason": f"{NO_SEARCH}: {val_rows} held-out row(s), the search needs "
                        f"{options.search_min_validation_rows} (a class holds rows out from "
                        f"5 rows on, {options.search_val_share:.0%} of them)",
              "final_rows": final_rows, "c_rows_exp": options.search_c_rows_exp,
              "gamma_unit": float(base_gamma), "fit_rows": int(fit_rows),
              "validation_rows": int(val_rows), "rungs": [],
              "chosen": {"C": chosen["C"], "gamma": chosen["gamma"] * base_gamma,
                         "gamma_x": chosen["gamma"]},
              "trials": []}
    return chosen["C"], chosen["gamma"] * base_gamma, record


def _present(side, present):
    if isinstance(side, tuple):
        return any(float(c) in present for c in side)
    return float(side) in present


def _partial_indices(F, todo, classes, multi_class):
    """Class indices from the machines of the classes a rung holds."""
    if multi_class == "ovr":
        ks = [list(classes).index(s[1]) for s in todo]
        return np.asarray(ks)[np.argmax(F, axis=1)]
    have = sorted({list(classes).index(c) for s in todo for c in s})
    local = class_indices(F, multi_class, len(have)) if len(have) > 1 else \
        np.zeros(F.shape[0], np.int64)
    return np.asarray(have)[local]
