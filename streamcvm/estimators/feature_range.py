"""Features at any scale: what a fit does before any work so that its
float32 kernel values neither overflow nor vanish, and the check that a
model whose decision values are not finite is never kept.

Kernel blocks are float32 (the stores' dtype): rows of norm ~1e20 give
squared norms and dot products of ~1e40, past float32's largest value
(3.4e38), and rows of norm ~1e-20 give ~1e-40, below its smallest normal
number. The distance kernels (rbf, laplacian, exponential) and the
polynomial ones (poly, npoly) give the same model on ``s x`` as on ``x``
when gamma is divided by ``s^2`` (rbf, poly, npoly: gamma ||x - z||^2 and
gamma x'z) or by ``s`` (laplacian, exponential: gamma ||x - z||). So a fit
whose sampled rows have a largest squared norm outside ``SAFE_SQ_NORM``
reads its rows multiplied by a power of two ``s`` (exact in floating point),
chosen to bring that norm near 1, with gamma converted to match: the
model's ``scaler_`` holds the factor, so predict, evaluate and a saved
model apply it to raw rows. Rows inside the range (all ordinary data) are
read as they are: the same model, bit for bit, as without this module. The
linear kernel's values ``x'z`` change with the scale (and the model with
them), so such rows are refused in one line for it.

A gamma given as a number is in the units of the features the estimator
is given (after ``scale=True``'s standardisation, when asked): the internal
factor never changes its meaning. A gamma for which every kernel value
between two distinct sampled rows is exactly 0 or exactly 1 in float32
cannot give a model and is refused in one line before any training work.
"""
import weakref

import numpy as np

from ..data.sampling import sample_rows
from ..data.scaling import SAFE_SQ_NORM, ScaledStore, Scaler, range_scale
from ..data.store import ArrayStore
from ..solvers.kernels import estimate_beta, kernel_class, sq_norms

# gamma d above this for every sampled pair: exp(-gamma d) is 0 in float32 (below
# exp(-103.3), the smallest subnormal) with a factor 4 to spare
ZERO_EXPONENT = 4 * 104.0
# gamma d below this for every sampled pair: exp(-gamma d) rounds to 1 in float32
# (1 - t is 1 below t = 2^-25), with a factor 4 to spare
ONE_EXPONENT = 2.0 ** -27
# poly / npoly: (gamma x'z + coef0)^degree at most this on the sampled rows
# (float32 kernel caches hold up to 3.4e38 = 2^128; 2^8 to spare for rows outside)
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)

_last = [None, None]        # (weak reference to a store, its sample): the last one only


def sample(store, options):
    """``sample_rows(store, range_sample_rows)`` (the options'), drawn once
    for the store object a fit is working on (the range check and
    gamma="auto" share it: the same rows as before); only the last store's
    sample is kept."""
    ref, got = _last
    if ref is not None and ref() is store:
        return got
    got = sample_rows(store, options.range_sample_rows, options.range_sample_chunks)
    try:
        _last[:] = [weakref.ref(store), got]
    except TypeError:           # not weak-referable: not kept
        _last[:] = [None, None]
    return got


def _distances(kern, S, pair_rows):
    """Distances between distinct sampled rows (float64, those > 0), as the
    kernel class ``kern``'s exponent takes them (``kern.distance``: squared
    Euclidean for rbf, L1 for laplacian, Euclidean for exponential)."""
    from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances
    m = S.shape[0]
    if m > pair_rows:
        S = S[np.sort(np.random.default_rng(0).choice(m, pair_rows, replace=False))]
        m = pair_rows
    S = S.astype(np.float64)
    D = manhattan_distances(S) if kern.distance == "manhattan" else \
        euclidean_distances(S, squared=kern.distance == "sqeuclidean")
    d = D[np.triu_indices(m, 1)]
    return d[d > 0], m


def check_gamma(kern, gamma, coef0, degree, S, auto=False, pair_rows=512):
    """A ValueError (one line) for a gamma (a number, in the units of the
    sampled rows ``S``) that cannot give a model, for the kernel class
    ``kern``: for the distance kernels, exp(-gamma d) exactly 0 or exactly 1
    in float32 for every pair of distinct sampled rows; for poly / npoly,
    kernel values past ``kern.value_limit``. ``auto``: the gamma is
    gamma="auto"'s (1/beta of these rows)."""
    if S.shape[0] < 2 or (kern.value_limit is None and kern.distance is None):
        return                  # (the linear kernel: no gamma)
    if kern.value_limit is not None:
        top = np.float64(sq_norms(S).max())     # |x'z| <= the largest squared norm
        with np.errstate(over="ignore", invalid="ignore"):
            v = float((gamma * top + abs(coef0)) ** degree)
        if not v <= kern.value_limit:
            name, fix = (f"gamma='auto' ({gamma:.3g}, 1 / the rows' mean squared distance)",
                         "standardise the features (scale=True, --scale) or give a smaller "
                         "gamma") if auto else (f"gamma={gamma:g}", "use gamma='auto' or a "
                                                                    "smaller one")
            raise ValueError(f"{name} is too large for these features: (gamma x'z + "
                             f"coef0)^degree reaches {v:.3g} on sampled rows, past what "
                             f"{kern.value_limit_why}; {fix}")
        return
    d, m = _distances(kern, S, pair_rows)
    if not len(d):
        return                  # every sampled row alike: nothing to judge by
    lo, hi = float(d.min()), float(d.max())     # Python floats: gamma d may be inf
    what = kern.distance_text
    hint = f"the median {what} between them is {np.median(d):.3g}: use gamma='auto' or " \
           f"about 1 / that"
    if gamma * lo > ZERO_EXPONENT:
        raise ValueError(f"gamma={gamma:g} is too large for these features: exp(-gamma "
                         f"{what}) is 0 in float32 for every pair of {m:,} sampled rows "
                         f"(the closest pair: gamma {what} = {gamma * lo:.3g}), so no "
                         f"two rows are alike to the kernel and no model can be learnt; "
                         f"{hint}")
    if gamma * hi < ONE_EXPONENT:
        raise ValueError(f"gamma={gamma:g} is too small for these features: exp(-gamma "
                         f"{what}) is 1 in float32 for every pair of {m:,} sampled rows "
                         f"(the farthest pair: gamma {what} = {gamma * hi:.3g}), so "
                         f"all rows are alike to the kernel and no model can be learnt; "
                         f"{hint}")


def float32_rows(X, kernel, options, *, warn=True):
    """``(X as float32, offsets or None)``: the rows the kernels see. Where
    the float32 cast would move some value of a column by more than the
    option ``float32_tol`` of that column's range (a Unix timestamp, ~1.7e9, has a
    float32 step of 128 s: 400 distinct seconds become 2 values), the
    translation-invariant kernels (rbf, laplacian, exponential) get that
    column centred first, in float64: the same kernel values, and the
    offsets go into the model's scaler so predict centres raw rows the same
    way. Other kernels change with a shift, so the columns are named in a
    one-line warning instead (``warn``). Dense float64 input only: float32
    and sparse rows are returned as they are (sparse: a warning when lossy)."""
    import scipy.sparse as sp
    if X.dtype == np.float32 or X.shape[0] == 0:
        return X, None
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        lossy = _lossy_columns(X.data, X.indices, X.shape[1], options.float32_tol) \
            if X.nnz else []
        if len(lossy) and warn:
            _warn_lossy(lossy, "sparse rows cannot be centred without filling their zeros")
        return X.astype(np.float32), None
    X = np.asarray(X, np.float64)
    lo, hi = X.min(axis=0), X.max(axis=0)
    X32 = X.astype(np.float32)
    err = np.zeros(X.shape[1])
    step = options.float32_block_rows
    for a in range(0, X.shape[0], step):     # float64 temporaries of a block only
        b = a + step
        np.maximum(err, np.abs(X32[a:b].astype(np.float64) - X[a:b]).max(axis=0), out=err)
    lossy = np.flatnonzero(err > options.float32_tol * (hi - lo))
    if not len(lossy):
        return X32, None
    if not kernel_class(kernel).translation_invariant:
        if warn:
            _warn_lossy(lossy, f"the {kernel} kernel changes with a shift, so they are "
                               f"not centred here: subtract each column's mean (in "
                               f"float64) before fitting")
        return X32, None
    offset = np.zeros(X.shape[1])
    offset[lossy] = (lo[lossy] + hi[lossy]) / 2
    return (X - offset).astype(np.float32), offset


def _lossy_columns(values, cols, d, tol):
    """Sparse: the columns whose stored values float32 moves by more than
    ``tol`` of their range (zeros included)."""
    err = np.zeros(d)
    lo, hi = np.zeros(d), np.zeros(d)
    np.maximum.at(err, cols, np.abs(values.astype(np.float32).astype(np.float64) - values))
    np.minimum.at(lo, cols, values)
    np.maximum.at(hi, cols, values)
    return np.flatnonzero(err > tol * (hi - lo))


def _warn_lossy(cols, why):
    import warnings
    shown = ", ".join(str(int(c)) for c in cols[:5]) + (", ..." if len(cols) > 5 else "")
    warnings.warn(f"streamcvm: float32 (the kernels' precision) loses the variation of "
                  f"{len(cols):,} feature(s) (column {shown}): their spread is tiny next to "
                  f"their magnitude; {why}", UserWarning, stacklevel=4)


def with_offset(scaler, offset):
    """``scaler`` (or None) applied to rows already shifted by ``offset``
    (or None), as one :class:`~streamcvm.data.scaling.Scaler` of raw rows."""
    if offset is None:
        return scaler
    if scaler is None:
        return Scaler(offset, np.ones(len(offset)))
    inner = np.zeros(len(offset)) if scaler.offset is None else scaler.offset
    return Scaler(offset + inner, scaler.scale)


def fit_range(est, store):
    """``(store, scaler)`` for a fit of ``est`` on ``store``: the store
    itself and None when its sampled rows are in float32's safe range (the
    same fit as ever), else the rows times a power of two ``s`` (a uniform
    :class:`~streamcvm.data.scaling.Scaler`, and the store read through it,
    with ``gamma_factor``, what :func:`~streamcvm.estimators.base.resolve_gamma`
    multiplies a given gamma by).
    A gamma given as a number is checked first (:func:`check_gamma`); the
    linear kernel refuses rows out of range. ValueError, one line."""
    from .base import positive_number
    kern = kernel_class(est.kernel)
    opts = est.options_
    S = sample(store, opts)
    top = float(sq_norms(S).max()) if S.shape[0] else 0.0
    s = range_scale(top)
    if "gamma" not in kern.params and s != 1.0:     # no gamma absorbs the rows' scale
        lo, hi = SAFE_SQ_NORM
        raise ValueError(f"the rows' squared norms reach {top:.3g}, outside what float32 "
                         f"linear kernel values x'z hold safely ({lo:.3g} to {hi:.3g}), and "
                         f"a linear model changes with the features' scale: standardise "
                         f"them (scale=True, streamcvm train --scale) or rescale X")
    gamma = getattr(est, "gamma", "auto")
    if positive_number(gamma):
        check_gamma(kern, float(gamma), float(est.coef0), float(est.degree), S,
                    pair_rows=opts.gamma_pair_rows)
    elif kern.value_limit is not None and S.shape[0] > 1:   # "auto": 1/beta of these rows
        check_gamma(kern, 1.0 / estimate_beta(S, n_sample=opts.range_sample_rows, seed=0),
                    float(est.coef0), float(est.degree), S, auto=True,
                    pair_rows=opts.gamma_pair_rows)
    if s == 1.0:
        return store, None
    scaler = Scaler.uniform(store.d, s)
    if isinstance(store, ArrayStore):       # in memory: the scaled rows, held as before
        X = scaler.transform(store.X) if store.sparse else \
            np.multiply(store.X, np.float32(s))         # exact: s is a power of two
        out = ArrayStore(X, store.y, qid=store.qid, weight=store.weight,
                         chunk_rows=store.chunk_rows)
    else:
        out = ScaledStore(store, scaler)
    out.gamma_factor = 1.0 / s ** kern.distance_power
    return out, scaler


def float32_gamma(g, given=None):
    """``g``, the gamma the kernel uses, when it is a float32 number (1.2e-38
    to 3.4e38: the kernels compute in float32), else a ValueError (one
    line). ``given``: the user's gamma it comes from (None: gamma="auto")."""
    if F32_TINY <= g <= F32_MAX:
        return g
    if given is not None:
        seen = "" if g == given else f" ({g:.3g} on the rows as the fit scaled them)"
        raise ValueError(f"gamma={given:g}{seen} is outside float32's range (1.2e-38 to "
                         f"3.4e38), where the kernels are computed: no model can be "
                         f"learnt; use gamma='auto'")
    raise ValueError(f"gamma='auto' is {g:.3g} for these rows (1 / their mean squared "
                     f"distance), outside float32's range (1.2e-38 to 3.4e38), where the "
                     f"kernels are computed: the rows' scale or spread is too extreme; "
                     f"standardise the features (the estimators' scale=True, streamcvm "
                     f"train --scale)")


def uniform_factor(est):
    """The power of two a fit multiplied its rows by (:func:`fit_range`),
    or None (no scaling, or ``scale=True``'s own)."""
    sc = getattr(est, "scaler_", None)
    if sc is None or getattr(est, "scale", False) or sc.offset is not None or \
            not len(sc.scale) or not np.all(sc.scale == sc.scale[0]):
        return None
    return float(1.0 / sc.scale[0])


def _rows(sv, k):
    """At most ``k`` support rows, evenly spread."""
    n = sv.shape[0]
    return sv[::max(1, -(-n // k))][:k]


def check_finite(est, rows=None, machines=None):
    """A ValueError (one line) when a fitted model is not fit to keep: its
    decision values on each machine's own support rows (up to ``rows``, split
    between the machines, at least 8 each), which are training rows, are not
    all finite, by its full expansion or its
    compact one, or its coefficients, intercepts, probability sigmoids or
    scaling are not finite. Called when a fit ends and before a model is
    saved; ``machines``: the fitted machines (default: the model record's)."""
    machines = est._model_record()[0] if machines is None else machines
    kern = est.kernel_
    bad = None
    if rows is None:        # the option finite_check_rows of the model's options
        from ..options import resolve
        rows = resolve(getattr(est, "options", None)).finite_check_rows
    per = max(8, rows // len(machines))     # many machines (one-vs-one): fewer rows each
    for k, m in enumerate(machines):
        where = f"machine {k + 1} of {len(machines)}" if len(machines) > 1 else "its machine"
        X = _rows(m.sv, per) if m.sv.shape[0] else None
        for name, mm in (("", m), ("compact ", m.compact)):
            if mm is None:
                continue
            if not (np.all(np.isfinite(mm.coef)) and np.isfinite(mm.intercept)):
                bad = f"{where}'s {name}coefficients are not finite"
            elif X is not None:
                with np.errstate(all="ignore"):
                    f = mm.decision(kern, X)
                if not np.all(np.isfinite(f)):
                    bad = (f"its {name}decision values are not finite (NaN or inf) on "
                           f"{int(np.sum(~np.isfinite(f))):,} of {X.shape[0]:,} of {where}'s "
                           f"own support rows")
            if bad:
                break
        if bad:
            break
    sc = getattr(est, "scaler_", None)
    if bad is None and sc is not None and not (
            np.all(np.isfinite(sc.scale)) and (sc.offset is None or
                                               np.all(np.isfinite(sc.offset)))):
        bad = "its feature scaling is not finite"
    for name in ("probA_", "probB_"):
        v = getattr(est, name, None)
        if bad is None and v is not None and not np.all(np.isfinite(v)):
            bad = "its probability sigmoids are not finite"
    if bad:
        raise ValueError(f"the fitted {type(est).__name__} is not usable: {bad} (kernel "
                         f"{kern.name}, gamma {kern.gamma:.3g}); it is not saved. Check "
                         f"the features' scale and gamma")
