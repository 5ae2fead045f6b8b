"""What every estimator shares: one fit (:class:`FitTemplate`), parameter
checks and defaults (gamma, eps, classes), the input conversion (arrays,
sparse matrices, stores, dask arrays), and :class:`Fit`, the set-up every
estimator and the MMDA transformer train inside (checkpoint folder,
progress bar, one BLAS thread, runner).

The one fit, :meth:`FitTemplate._fit`, is what each estimator's ``fit``
calls: it checks the parameters, resolves the options
(:class:`streamcvm.options.Options`), turns the input into a store
(validation, scaling: the estimator's :meth:`~FitTemplate._fit_data`),
fixes the seed, the checkpoint arguments and the route the rows take (in
memory, sampled from a store on disk, or passes on a distributed client:
:class:`Run`), hands them to the estimator's :meth:`~FitTemplate._train`
(the call to its problem, :mod:`streamcvm.problems`), and records the
training (``training_``). Prediction is :mod:`streamcvm.predict`.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..data.parallel import Runner
from ..data.store import ArrayStore, BaseStore, DaskStore, as_store, is_dask_array, \
    is_store_like
from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, SAMPLE_SIZE, Options, resolve
from ..problems import checkpoint, one_blas_thread
from ..problems.driver import Solve
from ..solvers.kernels import Kernel, estimate_beta
from ..solvers.methods import METHODS as _METHODS
from .progress import FitProgress

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

METHODS = tuple(sorted(_METHODS))


def log(message):
    print(f"streamcvm: {message}", file=sys.stderr, flush=True)


def positive_number(v):
    """A real number, finite and > 0 (not NaN, not inf, not a bool)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) \
        and v > 0


def resolve_gamma(gamma, store, options):
    """gamma in the units of the rows the kernel sees: "auto" is 1/beta of
    ``store``'s rows; a number is in the units of the features given, times
    the store's ``gamma_factor`` when a fit reads them times a power of two
    (:func:`~streamcvm.estimators.feature_range.fit_range`). A ValueError
    (one line) for a gamma outside float32's range."""
    from .feature_range import float32_gamma, sample
    if isinstance(gamma, str) and gamma == "auto":
        # 1/beta, beta the mean squared distance between rows, on range_sample_rows rows
        n = options.range_sample_rows
        return float32_gamma(1.0 / estimate_beta(sample(store, options), n_sample=n, seed=0))
    if not positive_number(gamma):
        raise ValueError(f"gamma must be 'auto' or a positive finite number, got {gamma!r}")
    return float32_gamma(float(gamma) * getattr(store, "gamma_factor", 1.0), float(gamma))


def _check_discrete(store, codes, many):
    """A store's y as classes: refuse a target that looks continuous
    (non-integer values), warn at more than ``many`` classes (the option
    ``many_classes``)."""
    if not store.label_names and not np.all(np.asarray(codes) == np.round(codes)):
        frac = np.asarray(codes)[np.asarray(codes) != np.round(codes)]
        raise ValueError(f"the store's y has {len(codes):,} distinct values, some not "
                         f"integers (e.g. {frac[0]:g}): a continuous target; train a "
                         f"regressor (CVMRegressor, --task regression)")
    if len(codes) > many:
        import warnings
        warnings.warn(f"streamcvm: the store's y has {len(codes):,} classes (one-vs-one "
                      f"trains {len(codes) * (len(codes) - 1) // 2:,} machines); a "
                      f"regression target?", UserWarning, stacklevel=3)


def store_classes(store, labels=None, options=None):
    """(classes_, codes): the class labels and the values the store's y holds
    for them, in the same order. ``labels``: those scikit-learn validated
    (arrays; ``codes`` are then 0..k-1), None for a store, whose own labels
    are used (text labels decoded, sorted as np.unique sorts them, whatever
    order ingest met them in: classes_[1] is f(x) > 0)."""
    codes = np.asarray(store.classes)       # the values the store's y holds
    if len(codes) < 2:
        raise ValueError(f"need samples of at least 2 classes, got {len(codes)} class")
    if labels is None:
        _check_discrete(store, codes, (options or Options()).many_classes)
        if store.label_names:
            names = store.decode_labels(codes)
            order = np.argsort(names, kind="stable")
            labels, codes = np.asarray(names[order].tolist()), codes[order]
        else:
            labels = codes
    return np.asarray(labels), codes


def training_record(est, store, t0):
    """What ``training_`` keeps (and a saved model, and ``streamcvm info``):
    the fit's wall seconds, the data it saw and the snapshot it resumed from.
    The last step of every fit, so first a fitted model whose decision values
    are not finite is refused (a ValueError: :func:`.feature_range.check_finite`)."""
    from .feature_range import check_finite
    check_finite(est, rows=est.options_.finite_check_rows,
                 machines=getattr(est, "machines_", None) or [est.machine_])
    return {"seconds": round(time.perf_counter() - t0, 3), "rows": int(store.n),
            "features": int(store.d), "store": getattr(store, "path", None),
            "store_fingerprint": store.fingerprint,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "resumed_from": getattr(est, "resumed_from_", None)}


def resolve_eps(eps):
    if eps == "auto":
        return "auto"      # MEBSolver anneals until eps is small against the margin
    if not isinstance(eps, numbers.Real) or not 0 < eps < 1:
        raise ValueError(f"eps must be 'auto' or in (0, 1), got {eps!r}")
    return float(eps)


@dataclass(frozen=True)
class Checkpoints:
    """A fit's checkpoint arguments, as :meth:`CVMClassifier.fit` takes them:
    the folder (None: no snapshots), every how many seconds and / or
    iterations, how many to keep, whether to resume from the newest, whether
    another run's snapshots there may be deleted."""
    dir: object = None
    every: object = CHECKPOINT_EVERY
    iters: object = None
    keep: int = CHECKPOINT_KEEP
    resume: bool = False
    replace: bool = False


class Fit:
    """The set-up of every fit, written once: the checkpoint folder claimed
    (the machines a resumed run finished, and the state of the one in
    progress), the progress bar, one BLAS thread (the solvers' own threads do
    the work) and the runner of the passes over every row (threads, or a
    dask client; ``runner=False``: none). Used as a context::

        with Fit(est, store, kern, n_machines, ckpt, client) as fit:
            for k in fit.todo():            # the machines not finished yet
                fit.done(train(fit.solve(solve, seed + k, k)))
        machines = fit.machines

    ``est.checkpoint_stats_`` is set when the fit ends."""

    def __init__(self, est, store, kern, n, ckpt, client=None, *, runner=True,
                 method=None, unit="machine", verb="train"):
        self.est, self.store, self.kern, self.n, self.ckpt = est, store, kern, n, ckpt
        self.client, self.use_runner = client, runner
        self.bar_args = (est.verbose, n, est.method if method is None else method, unit, verb)
        self.runner = None

    def __enter__(self):
        c = self.ckpt
        self.ck, self.machines, self._cur = checkpoint.for_fit(
            self.est, self.store, self.kern, c.dir, c.resume, c.every, c.iters, c.keep,
            c.replace)
        self._resumed = len(self.machines)
        with contextlib.ExitStack() as stack:
            stack.enter_context(checkpoint.held(self.ck))
            self.bar = stack.enter_context(FitProgress(*self.bar_args))
            stack.enter_context(one_blas_thread())
            if self.use_runner:
                self.runner = stack.enter_context(Runner(self.client))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc):
        self._stack.__exit__(*exc)
        if exc[0] is None:
            self.est.checkpoint_stats_ = checkpoint.stats(self.ck)
        return False

    def todo(self):
        """The indices of the machines still to train, the bar counting all."""
        for k in range(self.n):
            self.bar.next()
            if k >= self._resumed:
                yield k

    def remaining(self):
        """The indices :meth:`todo` yields, without moving the bar."""
        return list(range(self._resumed, self.n))

    def solve(self, solve, seed, k=0):
        """Machine ``k``'s :class:`~streamcvm.problems.driver.Solve`: ``solve``
        with its seed, progress, checkpointer, resume state and runner."""
        return solve.but(seed=seed, callback=self.bar.update, checkpointer=self.ck,
                         n_machines=self.n, resume=self._cur if k == self._resumed else None,
                         runner=self.runner, pass_progress=self.bar.passes)

    def done(self, m):
        """Record a finished machine (snapshotted when due, and after the last)."""
        self.machines.append(m)
        checkpoint.machine_done(self.ck, m, self.n)


def no_labels_with_store(X, what="y", **given):
    """A store (a path, URL or opened store) brings its own labels: a ``y``
    (or ``qid``) passed with it would be ignored, so it is refused instead."""
    extra = [name for name, v in given.items() if v is not None]
    if extra and is_store_like(X):
        names = " and ".join(extra)
        raise ValueError(f"{names} passed with a store: a store's own {names} "
                         f"{'is' if len(extra) == 1 else 'are'} used for training; pass "
                         f"{' and '.join(f'{n}=None' for n in extra)}, or give arrays (or "
                         f"ingest a store with the other labels)")


def keep_params(est, params):
    """scikit-learn's rule for ``__init__``: keep each argument, as given,
    under its own name; ``params``: the ``__init__``'s ``locals()``."""
    for name, value in params.items():
        if name not in ("self", "__class__"):
            setattr(est, name, value)


@dataclass
class FitData:
    """What :meth:`FitTemplate._fit_data` makes of a fit's input: the
    training ``store`` (validated, scaled), the labels scikit-learn
    validated (None for a store), the store ``training_`` describes
    (``source``: before any row is held out of training), and what an
    estimator needs besides (``extra``: e.g. the rows a weight of 0 dropped)."""
    store: object
    labels: object = None
    source: object = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.source is None:
            self.source = self.store


@dataclass
class Run:
    """A fit's settings, fixed once by :meth:`FitTemplate._fit` and handed to
    the estimator's :meth:`~FitTemplate._train`: the estimator, its options,
    its seed, the checkpoint arguments, the dask ``client`` (or None), and
    the start time. :meth:`solve` is the machines' solver options,
    :meth:`fit` the set-up they train in, :meth:`passes` the runner of the
    passes a fit makes before (row statistics, held-out samples).

    ``route`` (also the estimator's ``route_``): how the rows reach the
    solvers: "memory" (arrays, or a store of at most ``pool_chunks`` chunks,
    held whole), "sampled" (random rows from a store on disk, passes on
    threads) or "distributed" (passes on a dask.distributed client)."""
    est: object
    options: Options
    seed: int
    checkpoints: "Checkpoints"
    client: object = None
    t0: float = 0.0
    route: str = "sampled"

    def solve(self, **changes):
        """The :class:`~streamcvm.problems.driver.Solve` of this fit's
        machines: the estimator's method, eps, sample size, core cap, seed and
        options, with ``changes``."""
        est = self.est
        kw = dict(method=est.method, eps=resolve_eps(est.eps), sample_size=est.sample_size,
                  max_core=est.max_core, seed=self.seed, options=self.options)
        kw.update(changes)
        return Solve(**kw)

    def fit(self, store, kern, n, **kw):
        """The set-up of ``n`` machines (:class:`Fit`) on ``store``."""
        return Fit(self.est, store, kern, n, self.checkpoints, self.client, **kw)

    @contextlib.contextmanager
    def passes(self):
        """A runner of chunk tasks (one BLAS thread), for the passes a fit
        makes before its machines."""
        with one_blas_thread(), Runner(self.client) as runner:
            yield runner

    def held_whole(self, store):
        """``store`` read into memory when it is of at most ``pool_chunks``
        chunks (what one machine's sampler pools anyway: the machines of a
        multi-class fit do not each decompress it again), else as it is."""
        from ..data.sampling import small_in_memory
        return small_in_memory(store, self.options.pool_chunks)


def route_of(store, client, options):
    """The :attr:`Run.route` of a fit on ``store`` given ``client`` (as the
    estimators' ``fit`` takes it: None uses the active dask client, if any)."""
    from ..data.parallel import active_client
    if client is not None or active_client() is not None:
        return "distributed"
    held = isinstance(store, ArrayStore) or store.n_chunks <= options.pool_chunks
    return "memory" if held else "sampled"


class FitTemplate:
    """The one fit of every estimator (and the MMDA transformer). Each
    estimator's ``fit`` calls :meth:`_fit` with its arguments; the estimator
    supplies only what differs:

    - ``_check_params()``: its parameters' rules;
    - ``_fit_data(X, y, **inputs)`` -> :class:`FitData`: its input as a
      store (and labels);
    - ``_train(data, run)``: the call to its problem, setting the fitted
      attributes (``run``: :class:`Run`);
    - ``requires_y``: whether ``fit(X)`` of arrays needs y.
    """

    requires_y = True
    y_hint = ""             # what the missing y would have been, in the message

    def _fit(self, X, y=None, *, checkpoints=None, client=None, **inputs):
        """Fit on ``X`` (arrays, a sparse matrix, a store, its path or URL, a
        dask array) and ``y``; ``checkpoints``: a :class:`Checkpoints`;
        ``inputs``: what the estimator's ``_fit_data`` takes besides
        (``sample_weight``, ``qid``). Returns self."""
        t0 = time.perf_counter()
        self._check_params()
        self.options_ = resolve(getattr(self, "options", None))
        if self.requires_y and y is None and not is_store_like(X) \
                and not isinstance(X, BaseStore):
            raise ValueError(f"{type(self).__name__} requires y to be passed, "
                             f"but the target y is None{self.y_hint}")
        data = self._fit_data(X, y, **inputs)
        seed = 0 if self.random_state is None else int(self.random_state)
        run = Run(self, self.options_, seed, checkpoints or Checkpoints(), client, t0)
        run.route = self.route_ = route_of(data.store, client, self.options_)
        self._train(data, run)
        self.training_ = training_record(self, data.source, t0)
        return self


def check_options(options):
    """A ValueError (one line) unless ``options`` is None, an
    :class:`~streamcvm.options.Options` or a dict of its fields."""
    resolve(options)


class _CVMBase(FitTemplate, BaseEstimator):
    auto_C = False          # whether C="auto" (chosen by the data) and method="auto" are allowed
    # The parameters every estimator has; each estimator's own __init__ names
    # its defaults (these are CVMOneClass's) and only keeps its arguments.
    def __init__(self, *, method="cvm", C=1.0, kernel="rbf", gamma="auto", coef0=0.0,
                 degree=3, eps="auto", sample_size=SAMPLE_SIZE, max_core=None, full_pass=False,
                 scale=False, options=None, random_state=0, verbose=False):
        keep_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_params(self):
        check_options(getattr(self, "options", None))
        methods = ("auto",) + METHODS if self.auto_C else METHODS
        if self.method not in methods:
            raise ValueError(f"method must be one of {methods}, got {self.method!r}")
        if not positive_number(self.C) and not (self.auto_C and isinstance(self.C, str)
                                                and self.C == "auto"):
            rule = "'auto' or a positive finite number" if self.auto_C else \
                "a positive finite number"
            raise ValueError(f"C must be {rule}, got {self.C!r}")
        ts = getattr(self, "train_size", "all")
        if not (ts in ("auto", "all") or (isinstance(ts, numbers.Integral) and ts >= 1000)):
            raise ValueError(f"train_size must be 'auto', 'all' or a number of rows of at "
                             f"least 1,000, got {ts!r}")
        st = getattr(self, "stage_tol", 0.0)
        if not (isinstance(st, numbers.Real) and not isinstance(st, bool) and math.isfinite(st)
                and st >= 0):
            raise ValueError(f"stage_tol must be a finite number of points >= 0, got {st!r}")
        if getattr(self, "stop", "slack") not in ("slack", "validation"):
            raise ValueError(f"stop must be 'slack' or 'validation', got {self.stop!r}")
        if getattr(self, "compact", False) not in ("auto", False):
            raise ValueError(f"compact must be 'auto' or False, got {self.compact!r}")

    def _prepare(self, X, y=None, sample_weight=None, regression=False):
        from .feature_range import with_offset
        self._row_offset = None
        store, labels = self._prepare_store(X, y, sample_weight, regression)
        store = self._maybe_scale(store)
        # columns centred before the float32 cast (feature_range.float32_rows)
        self.scaler_ = with_offset(self.scaler_, self._row_offset)
        return store, labels

    def _prepare_store(self, X, y=None, sample_weight=None, regression=False):
        """A store for the training data, and the labels sklearn validated
        (None for a store, a dask array, or for regression)."""
        no_labels_with_store(X, y=y)
        if is_store_like(X) or is_dask_array(X):
            if sample_weight is not None:
                raise ValueError("sample_weight with a store or a dask array: put the "
                                 "weights in the store's weight column (ingest --weight-col)")
            store = as_store(X) if is_store_like(X) else DaskStore(X, y)
            self.n_features_in_ = store.d
            return store, None
        from .feature_range import float32_rows
        # float64 kept until float32_rows has judged what the float32 cast loses
        if y is None:
            X = validate_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32),
                              reset=True)
            X, self._row_offset = float32_rows(X, self.kernel, self.options_)
            return as_store(X, np.zeros(X.shape[0])), None
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=(np.float64, np.float32),
                             reset=True, y_numeric=regression)
        X, self._row_offset = float32_rows(X, self.kernel, self.options_)
        if sample_weight is not None:
            from sklearn.utils.validation import _check_sample_weight
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if regression:
            return as_store(X, np.asarray(y, np.float64), weight=sample_weight), None
        check_classification_targets(y)
        labels, codes = np.unique(y, return_inverse=True)
        return as_store(X, codes.astype(np.float64), weight=sample_weight), labels

    def _maybe_scale(self, store):
        """``scale=True`` or "standard" (standardised), "range" (svm-scale's
        [-1, 1]): the per-feature scaling from one pass over the training
        store (``scaler_``, :mod:`streamcvm.data.scaling`), and the store
        read through it. Then, whatever ``scale``, rows beyond float32's safe
        range are read times a power of two, kept in ``scaler_`` too, and a
        gamma given as a number is checked
        (:func:`~streamcvm.estimators.feature_range.fit_range`)."""
        from ..data.scaling import ScaledStore, Scaler
        from .feature_range import fit_range
        scale = getattr(self, "scale", False)
        if not (isinstance(scale, (bool, np.bool_)) or
                (isinstance(scale, str) and scale in ("standard", "range"))):
            raise ValueError(f"scale must be False, True (= 'standard'), 'standard' or "
                             f"'range', got {scale!r}")
        self.scaler_ = None
        raw = store
        if scale:
            self.scaler_ = Scaler.fit(store, kind="range" if scale == "range" else "standard")
            store = ScaledStore(store, self.scaler_)
        store, uniform = fit_range(self, store)
        if uniform is not None and self.scaler_ is not None:   # one transform for both
            factor = store.gamma_factor
            self.scaler_ = Scaler(self.scaler_.offset, self.scaler_.scale * uniform.scale)
            store = ScaledStore(raw, self.scaler_)
            store.gamma_factor = factor
        elif uniform is not None:
            self.scaler_ = uniform
        return store

    def _options(self):
        """The options of this model: the fit's (``options_``), or, for a
        model loaded from a file, its ``options`` parameter resolved."""
        got = self.__dict__.get("options_")
        return got if got is not None else resolve(getattr(self, "options", None))

    def _kernel(self, store):
        self.gamma_ = resolve_gamma(self.gamma, store, self.options_)
        return Kernel(self.kernel, gamma=self.gamma_, coef0=self.coef0, degree=self.degree)

    def _validate_X(self, X):
        check_is_fitted(self)
        scaler = getattr(self, "scaler_", None)
        # rows the scaler shifts stay float64 until it has (Scaler.transform: float32 out)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=np.float32 if scaler is None else (np.float64, np.float32))
        return X if scaler is None else scaler.transform(X)

    def _streamed(self, X):
        """(predictions, decision values, labels as the store holds them,
        store) over every chunk of a store, a path or URL, or a dask array
        (one chunk in memory at a time; the outputs are one value or row
        per input row); None for arrays."""
        if not (is_store_like(X) or is_dask_array(X)):
            return None
        check_is_fitted(self)
        from ..predict.chunks import predict_chunks
        store = as_store(X) if is_store_like(X) else DaskStore(X)
        sources = getattr(store, "attrs", {}).get("sources") or []
        if store.d < self.n_features_in_ and "csv" not in {s.get("format") for s in sources}:
            # svm-predict's rule: features past the file's last index are 0
            # (not for CSV columns, matched by position)
            from ..data.scaling import PaddedStore
            store = PaddedStore(store, self.n_features_in_)
        if store.d != self.n_features_in_:
            raise ValueError(f"{getattr(store, 'path', 'X')}: {store.d} features, the model "
                             f"expects {self.n_features_in_}")
        preds, decs, ys = [], [], []
        for r in predict_chunks(self, store):
            preds.append(np.asarray(r.pred))
            decs.append(np.asarray(r.dec))
            ys.append(r.y)
        if not preds:
            return np.empty(0), np.empty(0), np.empty(0), store
        cat = np.concatenate
        labelled = np.ndim(ys[0]) > 0          # a dask array without y: none
        return cat(preds), cat(decs), cat(ys) if labelled else None, store


class _OneMachine(_CVMBase):
    """Estimators of a single machine (one-class, regression, ranking): the
    machine's training inside :class:`Fit` and its arrays."""

    def _fit_one(self, run, store, kern, solve, train):
        """``train(solve)`` -> the machine, unless a finished run's snapshot
        already holds it; ``solve`` (:class:`~streamcvm.problems.driver.Solve`)
        gets the seed, progress, checkpointer, resume state and runner from
        :class:`Fit`; ``run``: the fit's :class:`Run`."""
        with run.fit(store, kern, 1) as fit:
            for _ in fit.todo():
                fit.done(train(fit.solve(solve, run.seed)))
        self.machine_ = fit.machines[0]
        self.kernel_ = kern
        self.n_iter_ = self.machine_.n_iter
        self.core_set_size_ = self.machine_.core_size
        self.history_ = self.machine_.history

    def _model_record(self):
        """(machines, this estimator's fields of the model manifest): see
        :meth:`CVMClassifier._model_record`."""
        return [self.machine_], {}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]

    @property
    def support_vectors_(self) -> np.ndarray | csr_matrix:
        """The machine's support rows, as the kernel saw them (after ``scaler_``)."""
        check_is_fitted(self)
        return self.machine_.sv

    @property
    def dual_coef_(self) -> np.ndarray:
        """The support rows' coefficients: alpha_i (one-class), C (lambda_i -
        lambda*_i) (regression, cvr eq. 9)."""
        check_is_fitted(self)
        return self.machine_.coef

    def _values(self, X, streamed=0):
        """The machine's f(x). On a store, its path or URL, or a dask array:
        chunk by chunk, column ``streamed`` of :meth:`_streamed` (0: predict,
        1: decision values). On arrays: the compact expansion where the
        machine has one and ``compact`` is not False, else the full one."""
        got = self._streamed(X)
        if got is not None:
            return got[streamed]
        X = self._validate_X(X)
        m = self.machine_
        compact = getattr(self, "compact", False) is not False and m.compact is not None
        return (m.compact if compact else m).decision(self.kernel_, X)

