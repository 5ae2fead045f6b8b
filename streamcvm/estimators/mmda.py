"""Feature extraction: :class:`MMDATransformer`, maximum margin discriminant
analysis by the core vector method (mmda paper; the problem is
:mod:`streamcvm.problems.mmda`, the solver
:class:`streamcvm.solvers.mmda.MMDASolver`).

A feature is a unit direction in the kernel's feature space, kept as a
:class:`~streamcvm.problems.machine.Machine` (its full kernel expansion,
intercept 0), so models and checkpoints store features as they store
machines. Features are found one after another, each orthogonal to those
before it of the same class; a run that was killed resumes at the feature it
was on and gives the same features.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..data.store import as_store, is_store_like
from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, SAMPLE_SIZE, resolve
from ..problems import mmda as mmda_problem
from ..solvers.kernels import Kernel
from ..solvers.mmda import Basis
from .base import (Checkpoints, FitData, FitTemplate, check_options, keep_params,
                   no_labels_with_store, positive_number, resolve_gamma, store_classes)

if TYPE_CHECKING:
    import os
    from typing import Literal

    from distributed import Client
    from numpy.typing import ArrayLike

    from ..data.store import DataLike, StoreLike
    from ..options import OptionsLike


class MMDATransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, FitTemplate,
                      BaseEstimator):
    """Large-margin features: maximum margin discriminant analysis (MMDA) by the core vector method.

    A sequence of orthogonal directions in the kernel's feature space, each
    the weight vector of an L2-SVM (C) in the subspace orthogonal to the
    ones before (mmda paper, eqs. 1-3).

    Two classes: ``n_components`` directions. More: one-vs-rest as in the
    paper, ``n_components`` directions **per class** (``N_c x n_components``
    features in all, class by class; ``feature_class_`` and
    ``feature_rank_`` say which). The first ``k`` features of each class are
    exactly those of a fit with ``n_components=k``.

    A feature is a kernel expansion: ``kernel_evaluations_`` holds, per
    feature, the support rows it adds (the paper's Table IV). Features share
    rows (each class's are expansions over the support rows of those before
    it), so ``transform`` evaluates the kernel at ``expansion_rows_``
    distinct rows per input row for all the features, at most the sum of
    ``kernel_evaluations_`` and at most the training rows.

    ``fit`` takes arrays or a store (a path or an opened store: y from the
    store); ``transform`` takes arrays or a store (streamed chunk by chunk);
    :meth:`transform_store` writes the features of a store to a new store.

    Parameters
    ----------
    n_components : int, default 1
        Directions per class (two classes: in all).
    C : float, default 1.0
        The L2-SVM's regularisation.
    kernel : {"rbf", "laplacian", "exponential"}, default "rbf"
        The kernel (MMDA takes the distance kernels: a constant k(x, x),
        gamma a length scale).
    gamma : float or "auto", default "auto"
        The kernel's width. "auto": 1 / the mean squared distance between
        rows, on 5,000 rows, as the paper's beta.
    eps : float, default 1e-3
        The MEB tolerance, in (0, 1).
    sample_size : int, default 59
        Rows per random sample of the violator search.
    max_core : int, optional
        A cap on the core set. None: no cap.
    compact : "auto" or False, default "auto"
        "auto": after the fit, one basis of B <= 4,096 k-means centres
        replaces the ``expansion_rows_`` where every feature keeps R^2 >=
        0.999 on training rows the fit of the basis did not use, and
        ``transform`` uses it; False: the full expansions, at fit and in
        ``transform``, which can be set on a fitted or loaded model
        (:func:`streamcvm.problems.compress.compact_shared`).
    options : Options, dict or None, default None
        As :class:`CVMClassifier`'s: the ``mmda_*`` fields set the solver and
        its in-memory route.
    random_state : int or None, default 0
        The sampler's seed (None: 0).
    verbose : bool, default False
        Show a progress bar.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    machines_ : list of Machine
        The features, each a unit direction kept as a
        :class:`streamcvm.problems.machine.Machine` (its kernel expansion,
        intercept 0), class by class.
    feature_class_ : ndarray of shape (n_features_out,)
        The sequence of directions each feature belongs to: with more than
        two classes, the index (into ``classes_``) of the class it separates
        from the rest; with two, 0 for all.
    feature_rank_ : ndarray of shape (n_features_out,)
        Each feature's place among its class's, from 0.
    feature_seconds_ : ndarray of shape (n_features_out,)
        The seconds each feature took to find.
    kernel_evaluations_ : ndarray of shape (n_features_out,)
        The support rows each feature adds (the paper's Table IV).
    expansion_rows_ : int
        The distinct rows ``transform`` evaluates the kernel at, for all
        features (without a compact basis).
    kernel_ : Kernel
        The kernel trained with.
    gamma_ : float
        The gamma trained with ("auto" resolved).
    n_iter_ : int
        Solver iterations, summed over the features.
    options_ : Options
        The :class:`streamcvm.options.Options` the fit used.
    route_ : {"memory", "sampled", "distributed"}
        How the rows reached the solver.
    training_ : dict
        The fit's record (seconds, rows, features, store, fingerprint).
    checkpoint_stats_ : dict or None
        Snapshots written by the fit and the seconds spent; None without
        ``checkpoint_dir``.
    resumed_from_ : dict or None
        What the fit resumed from a snapshot, or None.
    n_features_in_ : int
        The number of features seen by fit.
    feature_names_in_ : ndarray of str
        The column names of a DataFrame with string column names given to
        fit (only then).
    """

    task = "features"

    def __init__(self, n_components: int = 1, *, C: float = 1.0, kernel: str = "rbf",
                 gamma: float | Literal["auto"] = "auto", eps: float = 1e-3,
                 sample_size: int = SAMPLE_SIZE, max_core: int | None = None,
                 compact: Literal["auto", False] = "auto", options: OptionsLike = None,
                 random_state: int | None = 0, verbose: bool = False) -> None:
        keep_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True           # CSR rows, as the estimators take them
        tags.target_tags.required = True        # the classes to separate
        return tags

    def _options(self):
        """The options of this model (``options_``, or its ``options`` resolved)."""
        got = self.__dict__.get("options_")
        return got if got is not None else resolve(self.options)

    def _check_params(self):
        check_options(self.options)
        if not (isinstance(self.n_components, numbers.Integral) and self.n_components >= 1):
            raise ValueError(f"n_components must be a positive integer, got "
                             f"{self.n_components!r}")
        if not positive_number(self.C):
            raise ValueError(f"C must be a positive finite number, got {self.C!r}")
        if not isinstance(self.eps, numbers.Real) or not 0 < self.eps < 1:
            raise ValueError(f"eps must be in (0, 1), got {self.eps!r}")
        if self.compact not in ("auto", False):
            raise ValueError(f"compact must be 'auto' or False, got {self.compact!r}")
        from ..solvers.kernels import KERNELS
        ok = sorted({c.name for c in KERNELS.values() if c.constant_diagonal and c.length_scale})
        if self.kernel not in KERNELS or self.kernel not in ok:
            raise ValueError(f"kernel must be one of {ok} (MMDA takes the distance kernels: "
                             f"a constant k(x, x), gamma a length scale), got {self.kernel!r}")

    def fit(self, X: DataLike, y: ArrayLike | None = None, *,
            checkpoint_dir: str | os.PathLike[str] | None = None,
            checkpoint_every: float | None = CHECKPOINT_EVERY,
            checkpoint_keep: int = CHECKPOINT_KEEP, resume: bool = False,
            checkpoint_replace: bool = False) -> MMDATransformer:
        """Find the features on arrays (X, y) or a store (its y).

        Parameters
        ----------
        X : array_like, sparse matrix, store, str or os.PathLike
            The training rows: arrays of shape (n_samples, n_features), a
            sparse matrix, or a store (an opened store, its path or its URL).
        y : array_like of shape (n_samples,), optional
            The class labels of arrays (at least two classes). None for a
            store.
        checkpoint_dir : str or os.PathLike, optional
            A folder for a snapshot after each feature (at most every
            ``checkpoint_every`` seconds, and after the last). None: no
            snapshots.
        checkpoint_every : float or None, default 60.0
            The least seconds between two snapshots (None: 1).
        checkpoint_keep : int, default 2
            The snapshots kept.
        resume : bool, default False
            Continue from the newest snapshot in ``checkpoint_dir``, with the
            same features as a run never interrupted.
        checkpoint_replace : bool, default False
            Delete another run's snapshots in ``checkpoint_dir`` instead of
            refusing them.

        Returns
        -------
        self : MMDATransformer
            The fitted transformer.
        """
        return self._fit(X, y, checkpoints=Checkpoints(
            checkpoint_dir, checkpoint_every, None, checkpoint_keep, resume, checkpoint_replace))

    def _fit_data(self, X, y):
        """The store and ``classes_`` (at least two)."""
        if is_store_like(X):
            no_labels_with_store(X, y=y)
            store, labels = as_store(X), None
            self.n_features_in_ = store.d
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float32, reset=True)
            check_classification_targets(y)
            labels, codes = np.unique(y, return_inverse=True)
            store = as_store(X, codes.astype(np.float64))
        if store.classes is None:
            raise ValueError("MMDATransformer needs class labels: the store's y has more "
                             "than 1,000 distinct values")
        try:
            self.classes_, codes = store_classes(store, labels, self.options_)
        except ValueError as e:
            raise ValueError(f"MMDATransformer needs at least two classes in y ({e})") \
                from None
        if self.n_components > store.n:
            # each feature is a direction in the span of the training rows'
            # images, orthogonal to its class's earlier ones: at most one per row
            raise ValueError(f"n_components={self.n_components} is more than the "
                             f"{store.n:,} training rows allow (at most {store.n:,}: each "
                             f"feature is a new direction through the rows)")
        return FitData(store, labels, extra={"codes": codes})

    def _train(self, data, run):
        """The features class by class (:func:`streamcvm.problems.mmda.features_in_order`),
        then their compact basis."""
        store = data.store
        self.gamma_ = resolve_gamma(self.gamma, store, run.options)
        kern = Kernel(self.kernel, gamma=self.gamma_)
        sides = mmda_problem.sides(data.extra["codes"])
        with run.fit(store, kern, len(sides) * self.n_components, runner=False, method="mmda",
                     unit="feature", verb="fit") as fit:
            if fit.ck is not None:
                every = run.checkpoints.every
                fit.ck.event_gap = every if every is not None else 1.0
            for f, m in mmda_problem.features_in_order(
                    fit, store, kern, sides, self.n_components, run.seed, C=self.C,
                    eps=self.eps, sample_size=self.sample_size, max_core=self.max_core,
                    options=run.options):
                fit.done(m)
                j, s = divmod(f, self.n_components)
                fit.bar.note(f"class {j + 1}/{len(sides)} feature {s + 1}: "
                             f"{m.core_size:,} support rows")
        self.kernel_ = kern
        self._set_features(fit.machines)
        if self.compact == "auto":
            self._compact_features(store, run.seed)

    def _set_features(self, machines, seconds=None):
        """``machines_`` and what they give: the per-feature attributes and the
        :class:`Basis` of all features (their distinct rows)."""
        self.machines_ = machines
        self.feature_class_, self.feature_rank_ = np.divmod(np.arange(len(machines)),
                                                            self.n_components)
        if seconds is None:
            seconds = [m.history[-1]["seconds"] for m in machines]
        self.feature_seconds_ = np.asarray(seconds, np.float64)
        self.kernel_evaluations_ = np.array([m.core_size for m in machines])
        self.n_iter_ = sum(m.n_iter for m in machines)
        # every feature over the distinct rows of all: the kernel evaluations a row costs
        self._basis = Basis(mmda_problem.directions(machines))
        self.expansion_rows_ = len(self._basis.ids)
        self._n_features_out = len(machines)
        self._compact_basis = None          # (Z, Beta [B, features], b, |Z|^2): one basis for all
        if machines and all(m.compact is not None for m in machines):
            from ..solvers.kernels import sq_norms
            Z = np.asarray(machines[0].compact.sv, np.float32)
            self._compact_basis = (Z, np.stack([m.compact.coef for m in machines], axis=1),
                                   np.array([m.compact.intercept for m in machines]),
                                   sq_norms(Z))

    def _compact_features(self, store, seed):
        """One compact basis for all features
        (:func:`streamcvm.problems.mmda.compact_features`)."""
        mmda_problem.compact_features(self.machines_, self._basis, self.kernel_, store, seed,
                                      self._options())
        self._set_features(self.machines_, self.feature_seconds_)

    # -- transform ------------------------------------------------------------
    def _features(self, X):
        """The features of validated rows X (float32 or CSR): by the compact
        basis where there is one and ``compact`` is not False."""
        c = self._compact_basis
        if c is None or self.compact is False:
            return self._basis.project(self.kernel_, X,
                                       few_machines=self._options().few_machines)
        from ..solvers.kernels import kernel_sums
        Z, Beta, b, Zsq = c
        return np.asarray(kernel_sums(self.kernel_, X, Z, Beta, None, Zsq,
                                      few_machines=self._options().few_machines),
                          np.float64).reshape(X.shape[0], Beta.shape[1]) + b

    def transform(self, X: DataLike) -> np.ndarray:
        """Give the features of the rows of X.

        Parameters
        ----------
        X : array_like, sparse matrix, store, str or os.PathLike
            The rows: arrays, a sparse matrix, or a store, its path or URL
            (every row, in order, streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples, n_features_out)
            The features, class by class (``feature_class_``,
            ``feature_rank_``).
        """
        check_is_fitted(self)
        if is_store_like(X):
            from ..predict.features import features_chunks
            parts = [f for _, _, f in features_chunks(self, as_store(X))]
            return np.concatenate(parts) if parts else np.zeros((0, self._n_features_out))
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=False)
        return self._features(X)

    def transform_store(self, X: StoreLike, path: str | os.PathLike[str], *,
                        overwrite: bool = False, client: Client | str | None = None) -> int:
        """Write the features of a store to a new store, chunk by chunk.

        The new store's X is the features; its y and qid are those of ``X``.
        The output rules are those of every command
        (:func:`streamcvm.data.outputs.check_output`).

        Parameters
        ----------
        X : store, str or os.PathLike
            The store whose rows to transform (opened, or its path or URL).
        path : str or os.PathLike
            The new store.
        overwrite : bool, default False
            Replace an existing file or streamcvm output at ``path``.
        client : distributed.Client or str, optional
            A dask client (or a scheduler address) on which the chunks are
            transformed. None: threads of this process.

        Returns
        -------
        int
            The rows written.
        """
        check_is_fitted(self)
        from ..predict.features import write_features
        from ..data.parallel import Runner
        with Runner(client) as runner:
            return write_features(self, as_store(X), path, overwrite=overwrite, runner=runner,
                                  progress=self.verbose)

    # -- the model file -------------------------------------------------------
    def _model_record(self):
        return self.machines_, {"classes": [c.item() if hasattr(c, "item") else c
                                            for c in self.classes_],
                                "feature_seconds": [float(v) for v in self.feature_seconds_]}

    def _model_restore(self, machines, man):
        self.classes_ = np.asarray(man["classes"])
        self._set_features(machines, man["feature_seconds"])


