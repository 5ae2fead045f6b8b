"""CVMOneClass: the one-class L2-SVM (SVDD), the data's enclosing ball."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import OutlierMixin

from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, SAMPLE_SIZE
from ..problems import train_machine
from .base import Checkpoints, FitData, _OneMachine, keep_params

if TYPE_CHECKING:
    import os
    from typing import Literal

    from distributed import Client
    from numpy.typing import ArrayLike

    from ..data.store import DataLike
    from ..options import OptionsLike


class CVMOneClass(OutlierMixin, _OneMachine):
    """One-class L2-SVM (SVDD): the data's enclosing ball in feature space.

    The (1 + eps)-approximate minimum enclosing ball of the data in the
    kernel's feature space; points outside it are outliers. ``predict``
    returns +1 (inside) / -1 (outside) as OneClassSVM does;
    ``decision_function`` is ``R^2 - ||phi(x) - c||^2`` (positive inside),
    ``score_samples`` is ``-||phi(x) - c||^2`` and ``offset_`` is ``-R^2``,
    where ``R^2`` is the radius the solver certified: the (1 + eps) ball in
    the L2-SVDD's augmented space, seen from a new point (see
    ``problems.classification.train_machine``).

    Parameters
    ----------
    method : {"cvm", "bvm", "fvm"}, default "cvm"
        The solver. CVM is the default: on kddcup99's normal traffic its AUC
        is the higher at every C tried (0.9962 against BVM's 0.9959-0.9960),
        at the default C=1 in the same time with the same 33 support vectors
        (BENCHMARKS.md); BVM trains faster where C is small and the core set
        large. "fvm": Frank-Wolfe.
    C : float, default 1.0
        Trades the ball's size against the slack of the rows outside it.
    kernel : str, default "rbf"
        The kernel, as :class:`CVMClassifier`'s.
    gamma : float or "auto", default "auto"
        The kernel's width. "auto": 1 / beta, beta the mean squared distance
        between rows.
    coef0 : float, default 0.0
        The constant term of the "poly" and "npoly" kernels.
    degree : int, default 3
        The degree of the "poly" and "npoly" kernels.
    eps : float or "auto", default 1e-3
        The ball's approximation tolerance, in (0, 1). The default is not
        "auto": the "auto" rule measures eps against the two-class margin
        ``||c||^2``, which a ball around one class does not have, and it
        stops at eps 0.025-0.05, where the ball still holds every training
        row (300 blobs: no outlier, against 55 at eps 1e-3 and 58 at 1e-5;
        docs/solvers.md). On kddcup99's 77,606 normal rows eps=1e-3 trains
        in 0.2 s with the same AUC (0.9961 against 0.9962).
    sample_size : int, default 59
        Rows per violator search (59: a point among the top 5% with 95%
        odds).
    max_core : int, optional
        A cap on the core vectors. None: no cap.
    full_pass : bool, default False
        Finish with passes over all rows until none lies outside the ball.
    scale : bool or {"standard", "range"}, default False
        Per-feature scaling, as :class:`CVMClassifier`'s ``scale``.
    options : Options, dict or None, default None
        The solvers' other settings, as :class:`CVMClassifier`'s.
    random_state : int or None, default 0
        Seed of the row sampling (None: 0).
    verbose : bool, default False
        Show a progress bar.

    Attributes
    ----------
    offset_ : float
        ``-R^2``, the certified squared radius negated: ``decision_function``
        is ``score_samples - offset_``.
    machine_ : Machine
        The trained machine (:class:`streamcvm.problems.machine.Machine`):
        its support rows, coefficients and radius.
    support_vectors_ : ndarray or scipy.sparse.csr_matrix of shape (n_SV, n_features)
        The support rows, as the kernel saw them (after ``scaler_``).
    dual_coef_ : ndarray of shape (n_SV,)
        The support rows' coefficients alpha_i.
    kernel_ : Kernel
        The kernel trained with.
    gamma_ : float
        The gamma trained with ("auto" resolved).
    n_iter_ : int
        Solver iterations.
    core_set_size_ : int
        Core vectors.
    history_ : list of dict
        Each eps level's record.
    scaler_ : Scaler or None
        The per-feature transform predict applies, or None.
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

    task = "one-class"  # what `streamcvm train --task` calls it

    def __init__(self, *, method: Literal["bvm", "cvm", "fvm"] = "cvm", C: float = 1.0,
                 kernel: str = "rbf", gamma: float | Literal["auto"] = "auto",
                 coef0: float = 0.0, degree: int = 3, eps: float | Literal["auto"] = 1e-3,
                 sample_size: int = SAMPLE_SIZE, max_core: int | None = None,
                 full_pass: bool = False, scale: bool | Literal["standard", "range"] = False,
                 options: OptionsLike = None, random_state: int | None = 0,
                 verbose: bool = False) -> None:
        keep_params(self, locals())

    requires_y = False

    def fit(self, X: DataLike, y: ArrayLike | None = None, *,
            checkpoint_dir: str | os.PathLike[str] | None = None,
            checkpoint_every: float | None = CHECKPOINT_EVERY,
            checkpoint_iters: int | None = None, checkpoint_keep: int = CHECKPOINT_KEEP,
            resume: bool = False, checkpoint_replace: bool = False,
            client: Client | str | None = None) -> CVMOneClass:
        """Fit the ball of the rows of X.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The training rows: arrays of shape (n_samples, n_features), a
            sparse matrix, a dask array, or a store (an opened store, its path
            or its URL), read a chunk at a time.
        y : None
            Ignored (scikit-learn's API).
        checkpoint_dir : str or os.PathLike, optional
            A folder for snapshots of the run, as :meth:`CVMClassifier.fit`'s.
        checkpoint_every : float or None, default 60.0
            Seconds between snapshots (None: never by time).
        checkpoint_iters : int, optional
            Iterations between snapshots (None: never by iterations).
        checkpoint_keep : int, default 2
            The snapshots kept.
        resume : bool, default False
            Continue from the newest snapshot in ``checkpoint_dir``.
        checkpoint_replace : bool, default False
            Delete another run's snapshots in ``checkpoint_dir`` instead of
            refusing them.
        client : distributed.Client or str, optional
            A dask client (or a scheduler address) for the passes over every
            row, as :meth:`CVMClassifier.fit`'s.

        Returns
        -------
        self : CVMOneClass
            The fitted estimator.
        """
        return self._fit(X, None, client=client, checkpoints=Checkpoints(
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume,
            checkpoint_replace))

    def _fit_data(self, X, y):
        return FitData(self._prepare(X)[0])

    def _train(self, data, run):
        """The ball of every row (:func:`~streamcvm.problems.train_machine`,
        one class); ``offset_`` its certified radius."""
        kern = self._kernel(data.store)
        self._fit_one(run, data.store, kern, run.solve(), lambda s: train_machine(
            data.store, kern, s, classes=None, C=self.C, full_pass=self.full_pass,
            train_size="all", stop="slack"))
        self.offset_ = -self.machine_.radius2

    def decision_function(self, X: DataLike) -> np.ndarray:
        """Compute ``R^2 - ||phi(x) - c||^2`` for the rows of X (positive inside the ball).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,)
            The decision values.
        """
        return self._values(X, streamed=1)

    def score_samples(self, X: DataLike) -> np.ndarray:
        """Compute ``-||phi(x) - c||^2`` for the rows of X (higher: more normal).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,)
            ``decision_function(X) + offset_``.
        """
        return self.decision_function(X) + self.offset_

    def _model_record(self):
        return [self.machine_], {"offset": self.offset_}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]
        self.offset_ = man["offset"]

    def predict_with_decision(self, X: DataLike) -> tuple[np.ndarray, np.ndarray]:
        """Predict inliers and outliers and the decision values in one pass.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            ``predict(X)``.
        decision : ndarray of shape (n_samples,)
            ``decision_function(X)``.
        """
        dec = self.decision_function(X)
        return np.where(dec >= 0, 1, -1), dec

    def predict(self, X: DataLike) -> np.ndarray:
        """Tell whether the rows of X lie inside the ball.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,)
            +1 inside (decision value >= 0), -1 outside (an outlier).
        """
        return self.predict_with_decision(X)[0]
