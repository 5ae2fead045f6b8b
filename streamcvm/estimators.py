"""scikit-learn estimators over the core: CVMClassifier, CVMRegressor, CVMRanker and CVMOneClass.

``fit`` takes arrays, sparse matrices or a store (``streamcvm.open_store``);
large data never goes through a dense in-memory copy. The estimators only
validate and translate parameters; training is
:func:`streamcvm.problems.train_machine` on plain arrays and scalars.
"""
import math
import numbers
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, OutlierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import checkpoint
from .kernels import Kernel, estimate_beta
from .parallel import Runner
from .predict import ovo_votes
from .problems import one_blas_thread, pairs, train_machine
from .problems.driver import Solve
from .progress import FitProgress
from .problems.ranking import RANKING, train_ranker
from .problems.progressive import plan
from .problems.regression import STAGE_CORE, fit_warnings, prepare_fit, train_regressor
from .sampling import sample_rows, small_in_memory
from .solvers.methods import METHODS as _METHODS, method_class
from .store import BaseStore, DaskStore, as_store, is_dask_array, is_store_like

METHODS = tuple(sorted(_METHODS))
AUTO_C_PER_ROW = 5.0    # CVMRegressor(C="auto"): C = 5 x training rows
REGRESSION_MAX_CORE = 20000     # CVMRegressor(max_core=None) on every row


def _log(message):
    print(f"streamcvm: {message}", file=sys.stderr, flush=True)


def positive_number(v):
    """A real number, finite and > 0 (not NaN, not inf, not a bool)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) \
        and v > 0


def _resolve_gamma(gamma, store):
    if isinstance(gamma, str) and gamma == "auto":
        # 1/beta, beta the mean squared distance between rows, on 5,000 rows
        return 1.0 / estimate_beta(sample_rows(store, 5000), n_sample=5000, seed=0)
    if not positive_number(gamma):
        raise ValueError(f"gamma must be 'auto' or a positive finite number, got {gamma!r}")
    return float(gamma)


MANY_CLASSES = 100      # a warning beyond this many classes (k (k - 1) / 2 machines)


def _check_discrete(store, codes):
    """A store's y as classes: refuse a target that looks continuous
    (non-integer values), warn at more than ``MANY_CLASSES`` classes."""
    if not store.label_names and not np.all(np.asarray(codes) == np.round(codes)):
        frac = np.asarray(codes)[np.asarray(codes) != np.round(codes)]
        raise ValueError(f"the store's y has {len(codes):,} distinct values, some not "
                         f"integers (e.g. {frac[0]:g}): a continuous target; train a "
                         f"regressor (CVMRegressor, --task regression)")
    if len(codes) > MANY_CLASSES:
        import warnings
        warnings.warn(f"streamcvm: the store's y has {len(codes):,} classes (one-vs-one "
                      f"trains {len(codes) * (len(codes) - 1) // 2:,} machines); a "
                      f"regression target?", UserWarning, stacklevel=3)


def store_classes(store, labels=None):
    """(classes_, codes): the class labels and the values the store's y holds
    for them, in the same order. ``labels``: those scikit-learn validated
    (arrays; ``codes`` are then 0..k-1), None for a store, whose own labels
    are used (text labels decoded, sorted as np.unique sorts them, whatever
    order ingest met them in: classes_[1] is f(x) > 0)."""
    codes = np.asarray(store.classes)       # the values the store's y holds
    if len(codes) < 2:
        raise ValueError(f"need samples of at least 2 classes, got {len(codes)} class")
    if labels is None:
        _check_discrete(store, codes)
        if store.label_names:
            names = store.decode_labels(codes)
            order = np.argsort(names, kind="stable")
            labels, codes = np.asarray(names[order].tolist()), codes[order]
        else:
            labels = codes
    return np.asarray(labels), codes


def _training_record(est, store, t0):
    """What ``training_`` keeps (and a saved model, and ``streamcvm info``):
    the fit's wall seconds, the data it saw and the snapshot it resumed from."""
    return {"seconds": round(time.perf_counter() - t0, 3), "rows": int(store.n),
            "features": int(store.d), "store": getattr(store, "path", None),
            "store_fingerprint": store.fingerprint,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "resumed_from": getattr(est, "resumed_from_", None)}


def _resolve_eps(eps):
    if eps == "auto":
        return "auto"      # MEBSolver anneals until eps is small against the margin
    if not isinstance(eps, numbers.Real) or not 0 < eps < 1:
        raise ValueError(f"eps must be 'auto' or in (0, 1), got {eps!r}")
    return float(eps)


class _CVMBase(BaseEstimator):
    # The parameters every estimator has, assigned here once (scikit-learn's
    # rule: __init__ only stores its arguments); each estimator's own
    # __init__ names its defaults. These defaults are CVMOneClass's.
    def __init__(self, *, method="cvm", C=1.0, kernel="rbf", gamma="auto", coef0=0.0,
                 degree=3, eps="auto", sample_size=59, max_core=None, full_pass=False,
                 scale=False, random_state=0, verbose=False):
        self.scale = scale
        self.method = method
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.eps = eps
        self.sample_size = sample_size
        self.max_core = max_core
        self.full_pass = full_pass
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_params(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not positive_number(self.C):
            raise ValueError(f"C must be a positive finite number, got {self.C!r}")
        ts = getattr(self, "train_size", "all")
        if not (ts in ("auto", "all") or (isinstance(ts, numbers.Integral) and ts >= 1000)):
            raise ValueError(f"train_size must be 'auto', 'all' or a number of rows of at "
                             f"least 1,000, got {ts!r}")
        if getattr(self, "stop", "slack") not in ("slack", "validation"):
            raise ValueError(f"stop must be 'slack' or 'validation', got {self.stop!r}")
        if getattr(self, "compact", False) not in ("auto", False):
            raise ValueError(f"compact must be 'auto' or False, got {self.compact!r}")

    def _prepare(self, X, y=None, sample_weight=None, regression=False):
        store, labels = self._prepare_store(X, y, sample_weight, regression)
        return self._maybe_scale(store), labels

    def _prepare_store(self, X, y=None, sample_weight=None, regression=False):
        """A store for the training data, and the labels sklearn validated
        (None for a store, a dask array, or for regression)."""
        if is_store_like(X) or is_dask_array(X):
            if sample_weight is not None:
                raise ValueError("sample_weight with a store or a dask array: put the "
                                 "weights in the store's weight column (ingest --weight-col)")
            store = as_store(X) if is_store_like(X) else DaskStore(X, y)
            self.n_features_in_ = store.d
            return store, None
        if y is None:
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=True)
            return as_store(X, np.zeros(X.shape[0])), None
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float32, reset=True,
                             y_numeric=regression)
        if sample_weight is not None:
            from sklearn.utils.validation import _check_sample_weight
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if regression:
            return as_store(X, np.asarray(y, np.float64), weight=sample_weight), None
        check_classification_targets(y)
        labels, codes = np.unique(y, return_inverse=True)
        return as_store(X, codes.astype(np.float64), weight=sample_weight), labels

    def _maybe_scale(self, store):
        """``scale=True``: the per-feature scaling from one pass over the
        training store (``scaler_``), and the store read through it."""
        self.scaler_ = None
        if not getattr(self, "scale", False):
            return store
        from .scaling import ScaledStore, Scaler
        self.scaler_ = Scaler.fit(store)
        return ScaledStore(store, self.scaler_)

    def _kernel(self, store):
        self.gamma_ = _resolve_gamma(self.gamma, store)
        return Kernel(self.kernel, gamma=self.gamma_, coef0=self.coef0, degree=self.degree)

    def _validate_X(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=False)
        scaler = getattr(self, "scaler_", None)
        return X if scaler is None else scaler.transform(X)

    def _streamed(self, X):
        """(predictions, decision values, labels as the store holds them,
        store) over every chunk of a store, a path or URL, or a dask array
        (one chunk in memory at a time; the outputs are one value or row
        per input row); None for arrays."""
        if not (is_store_like(X) or is_dask_array(X)):
            return None
        check_is_fitted(self)
        from .predict import predict_chunks
        store = as_store(X) if is_store_like(X) else DaskStore(X)
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


class CVMClassifier(ClassifierMixin, _CVMBase):
    """Kernel L2-SVM classifier trained by BVM (default), CVM or Frank-Wolfe.

    Parameters
    ----------
    method : "bvm", "cvm" or "fvm"
    C : regularisation (the L2-SVM's; compare LIBSVM's C with care)
    kernel : "rbf" (default), "laplacian" (L1 distance), "exponential" (L2
        distance: exp(-gamma ||x - z||)), "npoly" (constant k(x, x) needed)
    gamma : "auto" (1 / mean squared distance between rows) or a number
    eps : approximation tolerance of the enclosing ball, or "auto"
    sample_size : rows per violator search (59: top 5% with 95% odds)
    max_core : cap on core vectors per binary machine
    full_pass : finish with passes over all rows until none violates
    multi_class : "ovo" (one-vs-one, as LIBSVM; default) or "ovr" (one-vs-rest:
        one machine per class, trained on every row)
    train_size : "auto" (default), "all" or a number of rows. "auto": a
        binary machine of more than 65,536 rows first trains on every row,
        sampled, and keeps that model if its core set stays under 2,048
        vectors (clean data); else it trains by progressive
        subsampling: stages on 16,384, 32,768, ... random rows, each
        converged, while the last doubling still fixed significantly more
        rows of a held-out validation sample than it broke (never trained
        on; see streamcvm.problems.progressive). Time and the model's size
        then follow what the data's noise allows, not n. "all": every row
        (the L2-SVM of the whole store; full_pass implies it). A number:
        "auto" with the sample capped at that many rows.
    n_jobs : threads of the exact BVM pass (-1, the default: every core; 1:
        one). The model does not depend on it.
    stop : "slack" (default) or "validation": what ends the eps annealing,
        the margin slack (eps="auto") or, with held-out rows (progressive
        fits), a validation error that has not improved on its best by more
        than its standard error for two levels.
    class_weight : None, "balanced" (n / (k n_c), as scikit-learn) or a dict
        {label: weight}: class c's rows get C * weight_c (generalized-cvm
        sec. IV-A). Weighted rows, like ``sample_weight`` and kernels without
        a constant k(x, x) ("linear", "poly"), make a center-constrained MEB,
        which methods "cvm" and "fvm" solve ("bvm" refuses it).
    scale : False (default) or True: standardise each feature (dense data:
        (x - mean) / sd; sparse: x / max |x|, no centring) from one streamed
        pass over the training rows, as LIBSVM's svm-scale does; ``scaler_``
        keeps the transform, which predict applies and a saved model keeps.
        Use it when raw columns have very different ranges (byte counts next
        to flags): the RBF distance would see only the largest.
    probability : False (default) or True: also fit Platt's sigmoid per
        machine on rows held out from training (10% of the rows, 1,000 to
        50,000, a quarter at most; streamcvm.probability), for
        ``predict_proba`` and ``predict_log_proba`` (more than two classes:
        pairwise coupling, as LIBSVM). The held-out rows are not trained on.
    compact : "auto" (default) or False. "auto": a machine trained by
        progressive subsampling also gets a compact expansion over B <= 4,096
        basis points, B chosen on its held-out validation rows
        (streamcvm.compress.compact_machine); predict uses it. False: no
        compact expansion at fit, and predict uses the full one (set it on a
        fitted or loaded model to predict exactly).
    random_state : seed of the row sampling
    verbose : show a progress bar (eps level, core-set size, radius)
    """

    task = "classification"  # what `streamcvm train --task` calls it

    def __init__(self, *, method="bvm", C=1.0, kernel="rbf", gamma="auto", coef0=0.0,
                 degree=3, eps="auto", sample_size=59, max_core=None, full_pass=False,
                 multi_class="ovo", decision_function_shape="ovr", class_weight=None,
                 train_size="auto", stop="slack", n_jobs=-1, scale=False,
                 probability=False, compact="auto", random_state=0, verbose=False):
        super().__init__(method=method, C=C, kernel=kernel, gamma=gamma, coef0=coef0,
                         degree=degree, eps=eps, sample_size=sample_size, max_core=max_core,
                         full_pass=full_pass, scale=scale, random_state=random_state,
                         verbose=verbose)
        self.probability = probability
        self.multi_class = multi_class
        self.decision_function_shape = decision_function_shape
        self.class_weight = class_weight
        self.train_size = train_size
        self.stop = stop
        self.n_jobs = n_jobs
        self.compact = compact

    def fit(self, X, y=None, sample_weight=None, *, checkpoint_dir=None,
            checkpoint_every=60.0, checkpoint_iters=None, checkpoint_keep=2, resume=False,
            checkpoint_replace=False,
            client=None):
        """Fit on arrays (X, y), a sparse matrix, or a store (y from the store).

        ``sample_weight``: per-row multipliers of C (arrays only); a store's
        weight column, when it has one, is used instead.
        ``checkpoint_dir``: snapshot the run there every ``checkpoint_every``
        seconds (None: never by time) and/or ``checkpoint_iters`` iterations,
        at each eps level and after each machine, keeping the last
        ``checkpoint_keep``; ``resume=True`` continues from the newest snapshot
        in it (the same model as a run that was never interrupted). The
        folder is this run's while it writes (locked); another run's
        snapshots there are refused, or deleted with ``checkpoint_replace=True``.
        ``client``: a ``dask.distributed.Client`` (or a scheduler address) on
        which the passes over every row run (row statistics, full violator
        passes); default: the active client if there is one, else dask's
        threaded scheduler. The model does not depend on it."""
        t0 = time.perf_counter()
        self._check_params()
        if y is None and not isinstance(X, BaseStore) and not isinstance(X, str) \
                and not hasattr(X, "__fspath__"):
            raise ValueError(f"{type(self).__name__} requires y to be passed, "
                             "but the target y is None")
        store, labels = self._prepare(X, y, sample_weight)
        if store.classes is None:
            raise ValueError("Unknown label type: the store's y has more than 1,000 "
                             "distinct values, a continuous target; train a regressor "
                             "(CVMRegressor, --task regression)")
        labels, classes = store_classes(store, labels)
        self.classes_ = labels
        kern = self._kernel(store)
        eps = _resolve_eps(self.eps)
        seed = 0 if self.random_state is None else int(self.random_state)
        subs = pairs(classes, self.multi_class)
        cw = _class_weights(self.class_weight, store, classes, self.classes_)
        if cw is not None and self.multi_class == "ovr" and len(subs) > 1:
            raise ValueError("class_weight with multi_class='ovr' is not supported (the "
                             "'rest' side mixes classes): use multi_class='ovo'")
        weighted = bool(store.has_weight)
        source = store
        store = small_in_memory(store) if len(subs) > 1 and not weighted else store
        cv = False
        if self.probability:
            from .probability import CV_MAX_ROWS, HoldoutStore, holdout_fraction
            cv = store.n <= CV_MAX_ROWS     # else held-out rows, never trained on
            if not cv:
                store = HoldoutStore(store, seed, 0.0, holdout_fraction(store.n))
        solve = Solve(method=self.method, eps=eps, sample_size=self.sample_size,
                      max_core=self.max_core, n_jobs=self.n_jobs, compact=self.compact)
        fit_kw = dict(C=self.C, full_pass=self.full_pass, sample_weight=weighted,
                      train_size=self.train_size, stop=self.stop)
        ck, machines, cur = checkpoint.for_fit(self, store, kern, checkpoint_dir, resume,
                                               checkpoint_every, checkpoint_iters,
                                               checkpoint_keep, checkpoint_replace)
        k_resume = len(machines)            # finished before the interruption
        with checkpoint.held(ck), FitProgress(self.verbose, len(subs), self.method) as bar, \
                one_blas_thread(), Runner(client) as runner:
            for k, pair in enumerate(subs):
                bar.next()
                if k < k_resume:
                    continue
                run = solve.but(seed=seed + k, callback=bar.update, checkpointer=ck,
                                n_machines=len(subs), resume=cur if k == k_resume else None,
                                runner=runner, pass_progress=bar.passes)
                m = train_machine(store, kern, run, classes=pair,
                                  class_weight=None if cw is None else (cw[pair[0]], cw[pair[1]]),
                                  **fit_kw)
                machines.append(m)
                checkpoint.machine_done(ck, m, len(subs))
            self._set_machines(machines)
            self.kernel_ = kern
            if self.compact == "auto" and not any(m.compact_info for m in machines):
                self._compact_fitted(store, seed, solve.but(runner=runner))
            self.probA_ = self.probB_ = None
            if cv:
                F, y = self._cv_decisions(store, subs, kern, seed, cw,
                                          solve.but(runner=runner), fit_kw)
                self._fit_sigmoids(F, y, subs)
            elif self.probability:
                X, y = store.held_out()
                F = self._ovo_rows(X) if X is not None else np.zeros((0, len(subs)))
                self._fit_sigmoids(F, y, subs)
        self.checkpoint_stats_ = checkpoint.stats(ck)
        self.n_iter_ = sum(m.n_iter for m in self.machines_)
        self.core_set_size_ = sum(m.core_size for m in self.machines_)
        self.history_ = [h for m in self.machines_ for h in m.history]
        self.training_ = _training_record(self, source, t0)
        return self

    @property
    def n_support_(self):
        check_is_fitted(self)
        return np.array([len(m.coef) for m in self.machines_])

    @property
    def support_vectors_(self):
        check_is_fitted(self)
        svs = [m.sv for m in self.machines_]
        return sp.vstack(svs).tocsr() if sp.issparse(svs[0]) else np.concatenate(svs)

    @property
    def dual_coef_(self):
        check_is_fitted(self)
        return [m.coef for m in self.machines_]

    @property
    def intercept_(self):
        check_is_fitted(self)
        return np.array([m.intercept for m in self.machines_])

    def _ovo(self, X):
        """Every machine's f(x), one column each. The machines share support
        rows, so kernel blocks are computed once against their union (sorted
        by class); then, per class, one product of its columns with the
        coefficients of the machines that class takes part in (one-vs-one:
        k - 1 of them), i.e. a few small GEMMs instead of a gather per
        (machine, support row)."""
        return self._ovo_rows(self._validate_X(X))

    def _ovo_rows(self, X):
        """:meth:`_ovo` of rows already validated (and scaled)."""
        from .kernels import sq_norms
        (U, Usq, UT, groups), intercepts = self._union()
        sq = sq_norms(X)
        F = np.zeros((X.shape[0], len(self.machines_)))
        rows = int(max(128, min(2048, 2 ** 21 // max(U.shape[0], 1))))  # blocks of ~8 MB, cache-friendly
        kbuf = np.empty(rows * U.shape[0], np.float32)
        wide = max(hi - lo for lo, hi, _, _ in groups)
        buf = np.empty((rows, wide))          # float64 copies, reused (no page faults)
        for a in range(0, X.shape[0], rows):
            b = min(a + rows, X.shape[0])
            K = self.kernel_.block(X[a:b], U, sq[a:b], Usq, BT=UT, out=kbuf)
            for lo, hi, mach, W in groups:
                Kd = buf[:b - a, :hi - lo]
                np.copyto(Kd, K[:, lo:hi])
                if len(mach) == F.shape[1]:     # every machine (a shared compact basis)
                    F[a:b] += Kd @ W
                else:
                    F[a:b, mach] += Kd @ W
        F += intercepts
        return F

    def _model_record(self):
        """(machines, this estimator's fields of the model manifest): what
        :func:`streamcvm.model.save_model` writes (with :meth:`_model_restore`)."""
        probability = None if getattr(self, "probA_", None) is None else \
            {"A": [float(v) for v in self.probA_], "B": [float(v) for v in self.probB_],
             "rows": getattr(self, "n_probability_rows_", None)}
        return self.machines_, {"classes": [c.item() if hasattr(c, "item") else c
                                            for c in self.classes_],
                                "probability": probability}

    def _model_restore(self, machines, man):
        self.classes_ = np.asarray(man["classes"])
        self._set_machines(machines)
        pr = man.get("probability")
        self.probA_ = None if pr is None else np.asarray(pr["A"], np.float64)
        self.probB_ = None if pr is None else np.asarray(pr["B"], np.float64)

    def _set_machines(self, machines):
        """Set ``machines_`` and the distinct support rows they share, sorted
        by class: (rows, squared norms, rows transposed or None, groups), a
        group being (first column, end column, its machines, coefficients
        [rows, machines]). One-vs-one rows are grouped by their class (the
        sign of their coefficient tells which side); otherwise one group."""
        self.machines_ = machines
        self._unions_ = {}

    def _labels_of(self, F):
        """Class indices predicted from machine values ``F`` [rows, machines]."""
        if F.shape[1] == 1:
            return (F[:, 0] > 0).astype(np.int64)
        if self.multi_class == "ovr":
            return np.argmax(F, axis=1)
        return np.argmax(ovo_votes(F, len(self.classes_)), axis=1)

    def _compact_fitted(self, store, seed, solve):
        """A compact expansion for machines trained on every row (no held-out
        rows): one k-means basis shared by all of them, B chosen by how often
        its labels equal the full model's on training rows the least-squares
        fit did not use (:func:`streamcvm.compress.compact_shared`)."""
        from .compress import agreeing_labels, attach_shared, compact_shared, sample_rows
        machines = self.machines_
        got, info = None, {"decision": "sparse support rows: not compressed"}
        if not (store.sparse or any(sp.issparse(m.sv) for m in machines)):
            U, _, _, groups, key = self._build_union(machines, keys=True)
            w = np.zeros(U.shape[0])
            for lo, hi, _, W in groups:
                w[lo:hi] = np.abs(W).sum(axis=1)

            def sample():
                Xf, Xc = sample_rows(store, seed, solve.runner)
                return Xf, self._ovo_rows(Xf), Xc, agreeing_labels(
                    self._labels_of, self._labels_of(self._ovo_rows(Xc)))
            got, info = compact_shared(U, w, key, self.kernel_, sample, seed=seed)
        attach_shared(machines, got, info)
        self._set_machines(machines)

    def _active_machines(self, exact=None):
        """The machines predict uses: each one's compact expansion where it
        has one and ``compact`` is not False (``exact=True``: the full ones),
        the compact rows given ids of their own (negative, distinct)."""
        import dataclasses
        exact = self.compact is False if exact is None else exact
        if exact or all(m.compact is None for m in self.machines_):
            return list(self.machines_)
        out, nxt = [], -1
        for m in self.machines_:
            c = m.compact
            if c is None:
                out.append(m)
                continue
            if (m.compact_info or {}).get("shared"):     # one basis for all: its ids
                out.append(c)
                continue
            ids = nxt - np.arange(len(c.coef), dtype=np.int64)
            nxt -= len(c.coef)
            out.append(dataclasses.replace(c, sv_ids=ids))
        # machines share their support rows, not their compact bases: keep the
        # full expansions unless the compact ones are fewer rows by far
        full = len(np.unique(np.concatenate([m.sv_ids for m in self.machines_])))
        mine = len(np.unique(np.concatenate([m.sv_ids for m in out])))
        return out if 2 * mine < full else list(self.machines_)

    def _union(self, exact=None):
        """The support rows the active machines share (:meth:`_build_union`)
        and their intercepts, built once per setting of ``compact`` (predict
        calls this for every chunk)."""
        exact = self.compact is False if exact is None else exact
        got = self.__dict__.setdefault("_unions_", {}).get(exact)
        if got is None:
            machines = self._active_machines(exact)
            got = self._unions_[exact] = (self._build_union(machines),
                                          np.array([m.intercept for m in machines]))
        return got

    def _build_union(self, machines, keys=False):
        """(rows, squared norms, rows transposed or None, groups) of the
        distinct support rows of ``machines``, sorted by class (see
        :meth:`_set_machines`); ``keys``: and each row's class."""
        from .kernels import sq_norms
        ids = np.concatenate([m.sv_ids for m in machines])
        coef = np.concatenate([m.coef for m in machines])
        mach = np.repeat(np.arange(len(machines)), [len(m.sv_ids) for m in machines])
        uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
        key = np.zeros(len(uniq))
        if len(machines) > 1 and all(np.isscalar(c) for m in machines for c in m.classes):
            side = np.array([m.classes[1] for m in machines])[mach]
            other = np.array([m.classes[0] for m in machines])[mach]
            key[inv] = np.where(coef > 0, side, other)       # the row's own class
        order = np.lexsort((uniq, key))                       # by class, then row id
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        svs = [m.sv for m in machines]
        allrows = sp.vstack(svs).tocsr() if sp.issparse(svs[0]) else np.concatenate(svs)
        U = allrows[first[order]]
        col = rank[inv]
        groups = []
        bounds = np.flatnonzero(np.diff(key[order])) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(order)]):
            sel = (col >= lo) & (col < hi)
            ms = np.unique(mach[sel])
            W = np.zeros((hi - lo, len(ms)))
            W[col[sel] - lo, np.searchsorted(ms, mach[sel])] = coef[sel]
            groups.append((int(lo), int(hi), ms, W))
        UT = None if sp.issparse(U) else np.ascontiguousarray(U.T, np.float32)
        if keys:
            return U, sq_norms(U), UT, groups, key[order]
        return U, sq_norms(U), UT, groups

    def predict_with_decision(self, X):
        """(predict(X), decision_function(X)) from one pass of kernel blocks."""
        got = self._streamed(X)
        if got is not None:
            return got[0], got[1]
        F = self._ovo(X)
        if F.shape[1] == 1:
            return self.classes_[(F[:, 0] > 0).astype(int)], F[:, 0]
        if self.multi_class == "ovr":       # machine k: class k against the rest
            return self.classes_[np.argmax(F, axis=1)], F
        V = ovo_votes(F, len(self.classes_))
        dec = F if self.decision_function_shape == "ovo" else V
        return self.classes_[np.argmax(V, axis=1)], dec

    def decision_function(self, X):
        """Binary: f(x), positive for classes_[1]. Multi-class one-vs-one:
        with ``decision_function_shape="ovr"`` (default, as SVC) one column
        per class, the one-vs-one votes plus a confidence below 1/3 that
        breaks ties; with "ovo", one column per machine (classes i < j,
        positive for j). Multi-class one-vs-rest (``multi_class="ovr"``):
        column k is machine k's f(x), positive for class k."""
        return self.predict_with_decision(X)[1]

    def predict(self, X):
        """Class labels of the rows of X: arrays, a sparse matrix, a store,
        its path or URL, or a dask array (streamed chunk by chunk)."""
        return self.predict_with_decision(X)[0]

    def _cv_decisions(self, store, subs, kern, seed, cw, solve, fit_kw):
        """Every row's decision values (one column per machine) from machines
        trained without its fold, and the rows' labels (CV_FOLDS folds by a
        hash of the row ids); not checkpointed. ``solve``: the machines'
        :class:`~streamcvm.problems.driver.Solve` (with the runner)."""
        from .probability import CV_FOLDS, HoldoutStore
        Fs, ys = [], []
        for f in range(CV_FOLDS):
            fold = HoldoutStore(store, seed, f / CV_FOLDS, (f + 1) / CV_FOLDS)
            X, y = fold.held_out()
            if X is None:
                continue
            F = np.zeros((len(y), len(subs)))     # X: rows as the machines see them
            for k, pair in enumerate(subs):
                m = train_machine(fold, kern, solve.but(seed=seed + k), classes=pair,
                                  class_weight=None if cw is None else (cw[pair[0]],
                                                                        cw[pair[1]]),
                                  **fit_kw)
                F[:, k] = m.decision(kern, X)
            Fs.append(F)
            ys.append(y)
        return np.concatenate(Fs), np.concatenate(ys)

    def _fit_sigmoids(self, F, y, subs):
        """Platt's (A, B) per machine on the rows of its two sides: decision
        values ``F`` [rows, machines] of rows not trained on, labels ``y``."""
        from .probability import platt_fit
        A, B = np.zeros(len(subs)), np.zeros(len(subs))
        for k, (neg, pos) in enumerate(subs):
            on_pos = np.isin(y, np.atleast_1d(pos))
            mine = on_pos | np.isin(y, np.atleast_1d(neg))
            if on_pos[mine].all() or not on_pos[mine].any():
                raise ValueError(f"probability=True: the {int(mine.sum())} rows the sigmoid of "
                                 f"machine {k} is fitted on hold one side only; too few rows "
                                 "to fit probabilities")
            A[k], B[k] = platt_fit(F[mine, k], on_pos[mine])
        self.probA_, self.probB_ = A, B
        self.n_probability_rows_ = int(len(y))

    def _proba_rows(self, X):
        from .probability import pairwise_coupling, platt_predict
        F = self._ovo_rows(X)
        P = platt_predict(F, self.probA_, self.probB_)      # P(positive side) per machine
        k = len(self.classes_)
        if F.shape[1] == 1:
            return np.column_stack([1.0 - P[:, 0], P[:, 0]])
        if self.multi_class == "ovr":       # machine c: class c against the rest
            return P / np.maximum(P.sum(axis=1, keepdims=True), 1e-300)
        r = np.zeros((len(F), k, k))
        col = 0
        for i in range(k):
            for j in range(i + 1, k):       # machine (i, j): f > 0 means j
                pj = np.clip(P[:, col], 1e-7, 1 - 1e-7)
                r[:, j, i], r[:, i, j] = pj, 1.0 - pj
                col += 1
        return pairwise_coupling(r)

    @available_if(lambda self: self.probability)
    def predict_proba(self, X):
        """P(class | x), one column per ``classes_`` entry, for arrays, a
        store, its path or URL, or a dask array (streamed); needs
        ``probability=True``."""
        check_is_fitted(self)
        if getattr(self, "probA_", None) is None:
            raise AttributeError("predict_proba needs a model fitted with probability=True "
                                 "(streamcvm train -b 1)")
        if is_store_like(X) or is_dask_array(X):
            store = as_store(X) if is_store_like(X) else DaskStore(X)
            if store.d != self.n_features_in_:
                raise ValueError(f"{getattr(store, 'path', 'X')}: {store.d} features, the "
                                 f"model expects {self.n_features_in_}")
            out = [self._proba_rows(self._validate_X(c.X)) for c in store]
            return np.concatenate(out) if out else np.zeros((0, len(self.classes_)))
        return self._proba_rows(self._validate_X(X))

    @available_if(lambda self: self.probability)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def score(self, X, y=None, sample_weight=None):
        """Mean accuracy; on a store (path, URL) against its own labels,
        streamed (a store none of whose labels is a class is refused)."""
        if not is_store_like(X):
            return super().score(X, y, sample_weight)
        if y is not None or sample_weight is not None:
            raise ValueError("score on a store takes its labels from the store: "
                             "pass no y or sample_weight")
        from .predict import class_table
        pred, _, yst, store = self._streamed(X)
        table = class_table(self.classes_, store)
        truth = table[np.searchsorted(store.classes, yst)]
        idx = np.searchsorted(self.classes_, pred)     # classes_ is sorted
        return float(np.mean(truth == idx)) if len(pred) else float("nan")


def _class_weights(class_weight, store, codes, labels):
    """{code: weight} for ``class_weight`` (None, "balanced" or {label:
    weight}), or None. "balanced" is scikit-learn's n / (k n_c), from the
    store's per-chunk class counts."""
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, "
                             f"got {class_weight!r}")
        counts = np.asarray(store.class_counts).sum(axis=0).astype(np.float64)
        col = np.searchsorted(store.classes, codes)       # codes may be in label order
        return {c: counts.sum() / (len(codes) * counts[k]) for k, c in zip(col, codes)}
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got "
                         f"{type(class_weight).__name__}")
    index = {(v.item() if hasattr(v, "item") else v): c for v, c in zip(labels, codes)}
    out = {c: 1.0 for c in codes}
    for label, w in class_weight.items():
        key = label.item() if hasattr(label, "item") else label
        if key not in index:
            raise ValueError(f"class_weight: label {label!r} is not among the classes "
                             f"{list(index)}")
        if not isinstance(w, numbers.Real) or not w > 0:
            raise ValueError(f"class_weight[{label!r}] must be a positive number, got {w!r}")
        out[index[key]] = float(w)
    return out


class _OneMachine(_CVMBase):
    """Estimators of a single machine (one-class, regression): the fit's
    checkpointing and progress plumbing, and the machine's arrays."""

    def _fit_one(self, store, kern, solve, train, checkpoint_dir, every, every_iter, keep,
                 resume, client=None, t0=None, replace=False):
        """``train(solve)`` -> the machine, unless a finished run's snapshot
        already holds it; ``solve`` (:class:`~streamcvm.problems.driver.Solve`)
        gets the seed, progress, checkpointer, resume state and runner here.
        ``client``: as :meth:`CVMClassifier.fit`'s."""
        seed = 0 if self.random_state is None else int(self.random_state)
        ck, done, cur = checkpoint.for_fit(self, store, kern, checkpoint_dir, resume,
                                           every, every_iter, keep, replace)
        with checkpoint.held(ck), FitProgress(self.verbose, 1, self.method) as bar, \
                one_blas_thread(), Runner(client) as runner:
            bar.next()
            if done:
                self.machine_ = done[0]
            else:
                self.machine_ = train(solve.but(seed=seed, callback=bar.update,
                                                checkpointer=ck, resume=cur, runner=runner,
                                                pass_progress=bar.passes))
                checkpoint.machine_done(ck, self.machine_, 1)
        self.checkpoint_stats_ = checkpoint.stats(ck)
        self.kernel_ = kern
        self.n_iter_ = self.machine_.n_iter
        self.core_set_size_ = self.machine_.core_size
        self.history_ = self.machine_.history
        self.training_ = _training_record(self, store,
                                           time.perf_counter() if t0 is None else t0)

    def _model_record(self):
        """(machines, this estimator's fields of the model manifest): see
        :meth:`CVMClassifier._model_record`."""
        return [self.machine_], {}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]

    @property
    def support_vectors_(self):
        check_is_fitted(self)
        return self.machine_.sv

    @property
    def dual_coef_(self):
        """The support rows' coefficients: alpha_i (one-class), C (lambda_i -
        lambda*_i) (regression, cvr eq. 9)."""
        check_is_fitted(self)
        return self.machine_.coef


class CVMOneClass(OutlierMixin, _OneMachine):
    """One-class L2-SVM (SVDD): the (1 + eps)-approximate minimum enclosing
    ball of the data in feature space; points outside it are outliers.

    Parameters are those of :class:`CVMClassifier` (``method`` defaults to
    "cvm" here); ``verbose`` shows a progress bar.

    ``predict`` returns +1 (inside) / -1 (outside) as OneClassSVM does;
    ``decision_function`` is ``R^2 - ||phi(x) - c||^2`` (positive inside),
    ``score_samples`` is ``-||phi(x) - c||^2`` and ``offset_`` is ``-R^2``,
    where ``R^2`` is the radius the solver certified: the (1 + eps) ball in
    the L2-SVDD's augmented space, seen from a new point (see
    ``problems.classification.train_machine``). ``C`` trades the ball's size
    against the slack of the rows outside it.
    """

    task = "one-class"  # what `streamcvm train --task` calls it

    def fit(self, X, y=None, *, checkpoint_dir=None, checkpoint_every=60.0,
            checkpoint_iters=None, checkpoint_keep=2, resume=False,
            checkpoint_replace=False,
            client=None):
        """Fit on the rows of X (arrays, a sparse matrix or a store); y is
        ignored. The checkpoint arguments and ``client`` are those of
        :meth:`CVMClassifier.fit`."""
        t0 = time.perf_counter()
        self._check_params()
        store, _ = self._prepare(X)
        kern = self._kernel(store)
        solve = Solve(method=self.method, eps=_resolve_eps(self.eps),
                      sample_size=self.sample_size, max_core=self.max_core)
        self._fit_one(store, kern, solve, lambda run: train_machine(
            store, kern, run, classes=None, C=self.C, full_pass=self.full_pass),
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume, client,
            t0=t0, replace=checkpoint_replace)
        self.offset_ = -self.machine_.radius2
        return self

    def decision_function(self, X):
        """R^2 - ||phi(x) - c||^2 (positive inside) for arrays, a store, its
        path or URL, or a dask array (streamed)."""
        got = self._streamed(X)
        if got is not None:
            return got[1]
        X = self._validate_X(X)
        return self.machine_.decision(self.kernel_, X)

    def score_samples(self, X):
        return self.decision_function(X) + self.offset_

    def _model_record(self):
        return [self.machine_], {"offset": self.offset_}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]
        self.offset_ = man["offset"]

    def predict_with_decision(self, X):
        dec = self.decision_function(X)
        return np.where(dec >= 0, 1, -1), dec

    def predict(self, X):
        return self.predict_with_decision(X)[0]


class CVMRegressor(RegressorMixin, _OneMachine):
    """Kernel L2-SVR trained as a center-constrained MEB: Core Vector
    Regression (cvr paper, eqs. 6-10), by CVM (default) or Frank-Wolfe.

    The tube's half width is not a parameter: ``mu``, the mean slack outside
    the tube in the target's units (at the optimum the slacks sum to mu m,
    whatever C), sets it, and ``epsilon_bar_`` reports the width found:
    larger mu, narrower tube and more support vectors; a mu above the
    residuals' size gives a negative width, i.e. a kernel ridge regression
    regularised by mu / (C / m). The bias is penalised, as in the paper, so
    the fit is centred on the targets' mean (added back in ``intercept_``).

    Parameters
    ----------
    method : "cvm" or "fvm" (BVM solves only the plain MEB)
    C : regularisation, or "auto": ``AUTO_C_PER_ROW`` (5) times the number
        of training rows. In the primal ``||w||^2 + b^2 + C/(mu m) sum xi^2 +
        2 C epsbar`` one row's squared slack weighs C/(mu m), so C should
        grow with m to keep a fit as tight (``C_`` holds the value used).
    mu : positive, or "auto" (default): chosen by the RMSE on 2,000 held-out
        rows of fits on 2,000 others, among 0.03, 0.1, 0.3 and 1 times the
        targets' standard deviation, after gamma="auto" is chosen at 0.3;
        a progressive fit (``train_size`` below) tries every (mu, gamma)
        pair instead (``selection_`` lists the trials; docs/solvers.md,
        "Regression defaults"). ``mu_`` holds the value used.
    gamma : "auto" (default: 1 / or 2 / the mean squared distance between
        rows, whichever validates better; with a given mu too) or a number
    max_core : cap on core points. Default (None): 20,000 (a 1.6 GB kernel
        cache) on a fit on every row, and progressive stages (below) that
        stop before a stage whose core set would pass 11,000 (0.5 GB). A
        number caps both. ``eps="auto"`` asks for a tolerance that shrinks
        as the rows grow (one row's weight in the loss is C/(mu m)), and an
        L2-SVR keeps most rows outside its tube as support vectors, so the
        core set grows like the rows trained on; a fit that reaches the cap
        warns.
    train_size : "auto" (default), "all" or a number of rows. "auto": a
        store of more than 65,536 rows trains by progressive subsampling
        (streamcvm.problems.progressive): fits on random samples of 16,384,
        32,768, ... rows (C="auto" scaled to each), the next only while the
        last doubling lowered the squared error on held-out rows (10% of
        the rows, at most 50,000) by more than its standard error and its
        core set would stay within the budget above. The stages are in
        ``history_`` (``stage_rows``, ``stage_validation_rmse``). A number:
        at most that many rows, the same way.
    compact : "auto" (default) or False, as :class:`CVMClassifier`; a
        compact expansion is kept when its validation RMSE is within 0.5% of
        the full model's.
    kernel, coef0, degree, eps, sample_size, full_pass, scale,
    random_state, verbose : as :class:`CVMClassifier`

    After ``fit``, a warning says when the tube holds more than 95% of the
    rows (a few extreme rows set the fit), the residuals' mean is far from 0,
    or the fit is worse than predicting the mean, measured on up to 2,000
    random training rows.
    """

    task = "regression"  # what `streamcvm train --task` calls it

    def __init__(self, *, method="cvm", C="auto", mu="auto", kernel="rbf", gamma="auto",
                 coef0=0.0, degree=3, eps="auto", sample_size=59, max_core=None,
                 full_pass=False, train_size="auto", scale=False, compact="auto",
                 random_state=0, verbose=False):
        super().__init__(method=method, C=C, kernel=kernel, gamma=gamma, coef0=coef0,
                         degree=degree, eps=eps, sample_size=sample_size, max_core=max_core,
                         full_pass=full_pass, scale=scale, random_state=random_state,
                         verbose=verbose)
        self.mu = mu
        self.train_size = train_size
        self.compact = compact

    def _check_params(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.C, str) and self.C == "auto") and not positive_number(self.C):
            raise ValueError(f"C must be 'auto' or a positive finite number, got {self.C!r}")
        method_class(self.method, plain=False, problem="regression (a linear term)")
        if not (isinstance(self.mu, str) and self.mu == "auto") and \
                not positive_number(self.mu):
            raise ValueError(f"mu must be 'auto' or a positive finite number, got {self.mu!r}")
        if self.compact not in ("auto", False):
            raise ValueError(f"compact must be 'auto' or False, got {self.compact!r}")
        ts = self.train_size
        if not (ts in ("auto", "all") or (isinstance(ts, numbers.Integral) and ts >= 1000)):
            raise ValueError(f"train_size must be 'auto', 'all' or a number of rows of at "
                             f"least 1,000, got {ts!r}")

    def fit(self, X, y=None, *, checkpoint_dir=None, checkpoint_every=60.0,
            checkpoint_iters=None, checkpoint_keep=2, resume=False,
            checkpoint_replace=False,
            client=None):
        """Fit on arrays (X, y), a sparse matrix, or a store (targets from its
        y). The checkpoint arguments and ``client`` are those of
        :meth:`CVMClassifier.fit`."""
        t0 = time.perf_counter()
        self._check_params()
        if y is None and not isinstance(X, (BaseStore, str)) and not hasattr(X, "__fspath__"):
            raise ValueError(f"{type(self).__name__} requires y to be passed, "
                             "but the target y is None")
        store, _ = self._prepare(X, y, regression=True)
        cl = store.classes      # None: more than MAX_CLASSES distinct values
        self.target_type_ = "continuous" if cl is None or not np.all(cl == np.round(cl)) \
            else "integer"
        self.C_ = AUTO_C_PER_ROW * store.n if isinstance(self.C, str) else float(self.C)
        seed = 0 if self.random_state is None else int(self.random_state)
        eps = _resolve_eps(self.eps)
        auto_gamma = isinstance(self.gamma, str) and self.gamma == "auto"
        base = self._kernel(store).gamma        # gamma, or gamma="auto"'s 1/beta
        with one_blas_thread(), Runner(client) as runner:
            pre = prepare_fit(store, self._make_kernel, c=self.C_ / store.n, mu=self.mu,
                              gamma="auto" if auto_gamma and self.kernel in ("rbf", "laplacian")
                              else base, base_gamma=base,
                              method=self.method, eps=eps, seed=seed, runner=runner,
                              log=_log if self.verbose else None,
                              # a progressive fit: every (mu, gamma) pair, since the SV
                              # share sets how many rows its core budget reaches; no
                              # row-statistics pass (the stages use their samples')
                              progressive=not self.full_pass and
                              plan(store, None, self.train_size) is not None)
        self.mu_, gamma, self.selection_, stats = pre["mu"], pre["gamma"], pre["trials"], \
            pre["stats"]
        self.gamma_ = float(gamma)
        kern = self._make_kernel(self.gamma_)
        auto_c = isinstance(self.C, str)
        solve = Solve(method=self.method, eps=eps, sample_size=self.sample_size,
                      max_core=REGRESSION_MAX_CORE if self.max_core is None else self.max_core,
                      compact=self.compact)
        self._fit_one(store, kern, solve, lambda run: train_regressor(
            store, kern, run, C=self.C_, mu=self.mu_,
            stage_core=STAGE_CORE if self.max_core is None else self.max_core,
            full_pass=self.full_pass, stats=stats, train_size=self.train_size,
            c_per_row=AUTO_C_PER_ROW if auto_c else None),
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume, client,
            t0=t0, replace=checkpoint_replace)
        stages = [h["stage_rows"] for h in self.history_ if "stage_rows" in h]
        if stages and auto_c:               # a progressive fit: its last stage's C
            self.C_ = AUTO_C_PER_ROW * stages[-1]
        self.epsilon_bar_ = self.machine_.epsilon_bar
        Xv, yv = pre["check"]
        for w in fit_warnings(self.machine_.decision(kern, Xv) if len(yv) else [], yv,
                              self.epsilon_bar_, pre["sd"]):
            warnings.warn(f"streamcvm: {w}", RuntimeWarning, stacklevel=2)
        return self

    def _make_kernel(self, gamma):
        return Kernel(self.kernel, gamma=gamma, coef0=self.coef0, degree=self.degree)

    @property
    def intercept_(self):
        check_is_fitted(self)
        return self.machine_.intercept

    @property
    def n_support_(self):
        check_is_fitted(self)
        return len(self.machine_.coef)

    def _model_record(self):
        # the C and mu used (C="auto", mu="auto"); "continuous" or "integer"
        # targets (evaluate refuses class stores)
        return [self.machine_], {"C_": self.C_, "mu_": self.mu_,
                                 "target_type": getattr(self, "target_type_", None)}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]
        self.epsilon_bar_ = machines[0].epsilon_bar
        self.C_ = man.get("C_")
        self.mu_ = man.get("mu_")
        self.target_type_ = man.get("target_type")

    def predict(self, X):
        """f(x) for arrays, a store, its path or URL, or a dask array (streamed)."""
        got = self._streamed(X)
        if got is not None:
            return got[0]
        X = self._validate_X(X)
        m = self.machine_
        use = m.compact if self.compact is not False and m.compact is not None else m
        return use.decision(self.kernel_, X)

    def predict_with_decision(self, X):
        f = self.predict(X)
        return f, f

    def score(self, X, y=None, sample_weight=None):
        """R^2; on a store (path, URL) against its own targets, from sums
        kept chunk by chunk."""
        if not is_store_like(X):
            return super().score(X, y, sample_weight)
        if y is not None or sample_weight is not None:
            raise ValueError("score on a store takes its targets from the store: "
                             "pass no y or sample_weight")
        f, _, t, _ = self._streamed(X)
        t = np.asarray(t, np.float64)
        sst = float(((t - t.mean()) ** 2).sum())
        return 1.0 - float(((t - f) ** 2).sum()) / sst if sst > 0 else float("nan")


class CVMRanker(_OneMachine):
    """Kernel ranking SVM (L2, generalized-cvm sec. IV-B) over the preference
    pairs within each query, trained by CVM (default) or Frank-Wolfe.

    ``fit(X, y, qid)`` (relevance labels, query ids) or ``fit(store)`` with a
    qid column; pairs are drawn within query groups from the sampler's pooled
    chunks, never materialised. ``predict`` returns scores (higher ranks
    first). Parameters are those of :class:`CVMClassifier`; ``max_core`` caps
    the core pairs (default 20,000).
    """

    task = "ranking"  # what `streamcvm train --task` calls it

    def __init__(self, *, method="cvm", C=1.0, kernel="rbf", gamma="auto", coef0=0.0,
                 degree=3, eps=1e-4, sample_size=59, max_core=20000, full_pass=False,
                 scale=False, random_state=0, verbose=False):
        super().__init__(method=method, C=C, kernel=kernel, gamma=gamma, coef0=coef0,
                         degree=degree, eps=eps, sample_size=sample_size, max_core=max_core,
                         full_pass=full_pass, scale=scale, random_state=random_state,
                         verbose=verbose)

    def fit(self, X, y=None, qid=None, *, checkpoint_dir=None, checkpoint_every=60.0,
            checkpoint_iters=None, checkpoint_keep=2, resume=False,
            checkpoint_replace=False,
            client=None):
        """Fit on arrays (X, y, qid) or a store with a qid column. The
        checkpoint arguments and ``client`` are those of :meth:`CVMClassifier.fit`."""
        t0 = time.perf_counter()
        self._check_params()
        method_class(self.method, plain=False, problem=RANKING)
        if isinstance(X, (BaseStore, str)) or hasattr(X, "__fspath__"):
            store, _ = self._prepare(X)
        else:
            if y is None or qid is None:
                raise ValueError("CVMRanker.fit needs y (relevance) and qid (query ids)")
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float32,
                                 reset=True, y_numeric=True)
            qid = np.asarray(qid)
            if qid.shape != (X.shape[0],):
                raise ValueError(f"qid has shape {qid.shape}, expected ({X.shape[0]},)")
            store = self._maybe_scale(as_store(X, np.asarray(y, np.float64), qid=qid))
        kern = self._kernel(store)
        solve = Solve(method=self.method, eps=_resolve_eps(self.eps),
                      sample_size=self.sample_size, max_core=self.max_core)
        self._fit_one(store, kern, solve, lambda run: train_ranker(
            store, kern, run, C=self.C, full_pass=self.full_pass),
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume, client,
            t0=t0, replace=checkpoint_replace)
        return self

    def predict(self, X):
        """Scores: within a query, higher ranks first. X: arrays, a store,
        its path or URL, or a dask array (streamed)."""
        got = self._streamed(X)
        if got is not None:
            return got[0]
        X = self._validate_X(X)
        return self.machine_.decision(self.kernel_, X)

    def predict_with_decision(self, X):
        f = self.predict(X)
        return f, f

    def score(self, X, y=None, qid=None):
        """Mean NDCG@10 over the queries; on a store (path, URL) against its
        own relevance labels and query ids, streamed."""
        if is_store_like(X):
            if y is not None or qid is not None:
                raise ValueError("score on a store takes its labels and query ids from "
                                 "the store: pass no y or qid")
            from .metrics import RankingTotals
            from .predict import predict_chunks
            store = as_store(X)
            if not store.has_qid:
                raise ValueError(f"{getattr(store, 'path', 'the store')}: no query ids "
                                 "(qid) to rank within")
            tot = RankingTotals(k=10)
            for r in predict_chunks(self, store):
                tot.add(r.y, r.pred, r.qid)
            return float(tot.result()[0])
        if y is None or qid is None:
            raise ValueError("score(X, y, qid): y and qid are needed with arrays")
        from .metrics import ndcg_at_k
        return ndcg_at_k(y, self.predict(X), qid, k=10)


# the estimators a model file may name (streamcvm.model), by task
ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker")
