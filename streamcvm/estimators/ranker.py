"""CVMRanker: the kernel ranking SVM over preference pairs within queries."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.utils.validation import validate_data

from ..data.store import BaseStore, as_store, is_store_like
from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, SAMPLE_SIZE
from ..problems.ranking import RANKING, train_ranker
from ..solvers.methods import method_class
from .base import Checkpoints, FitData, _OneMachine, keep_params, no_labels_with_store

if TYPE_CHECKING:
    import os
    from typing import Literal

    from distributed import Client
    from numpy.typing import ArrayLike

    from ..data.store import DataLike
    from ..options import OptionsLike


class CVMRanker(_OneMachine):
    """Kernel ranking SVM (L2) over the preference pairs within each query.

    The generalized-cvm paper's sec. IV-B, trained by CVM (default) or
    Frank-Wolfe. ``fit(X, y, qid)`` (relevance labels, query ids) or
    ``fit(store)`` with a qid column; pairs are drawn within query groups
    from the sampler's pooled chunks, never materialised. ``predict``
    returns scores (higher ranks first).

    Parameters
    ----------
    method : {"cvm", "fvm"}, default "cvm"
        The solver: CVM or Frank-Wolfe.
    C : float, default 1.0
        The L2-SVM's regularisation.
    kernel : str, default "rbf"
        The kernel, as :class:`CVMClassifier`'s.
    gamma : float or "auto", default "auto"
        The kernel's width. "auto": 1 / beta, beta the mean squared distance
        between rows.
    coef0 : float, default 0.0
        The constant term of the "poly" and "npoly" kernels.
    degree : int, default 3
        The degree of the "poly" and "npoly" kernels.
    eps : float or "auto", default 1e-4
        The ball's approximation tolerance, in (0, 1), or "auto".
    sample_size : int, default 59
        Pairs per violator search.
    max_core : int or None, default 20000
        A cap on the core pairs. None: no cap.
    full_pass : bool, default False
        Finish with passes over all rows until no pair violates.
    scale : bool or {"standard", "range"}, default False
        Per-feature scaling, as :class:`CVMClassifier`'s ``scale``.
    options : Options, dict or None, default None
        The solvers' other settings, as :class:`CVMClassifier`'s.
    random_state : int or None, default 0
        Seed of the pair sampling (None: 0).
    verbose : bool, default False
        Show a progress bar.

    Attributes
    ----------
    machine_ : Machine
        The trained machine (:class:`streamcvm.problems.machine.Machine`):
        a score is its decision value.
    support_vectors_ : ndarray or scipy.sparse.csr_matrix of shape (n_SV, n_features)
        The support rows, as the kernel saw them (after ``scaler_``).
    dual_coef_ : ndarray of shape (n_SV,)
        The support rows' coefficients.
    kernel_ : Kernel
        The kernel trained with.
    gamma_ : float
        The gamma trained with ("auto" resolved).
    n_iter_ : int
        Solver iterations.
    core_set_size_ : int
        Core pairs.
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

    task = "ranking"  # what `streamcvm train --task` calls it
    y_hint = " (y: relevance; qid: query ids)"

    def __init__(self, *, method: Literal["cvm", "fvm"] = "cvm", C: float = 1.0,
                 kernel: str = "rbf", gamma: float | Literal["auto"] = "auto",
                 coef0: float = 0.0, degree: int = 3, eps: float | Literal["auto"] = 1e-4,
                 sample_size: int = SAMPLE_SIZE, max_core: int | None = 20000,
                 full_pass: bool = False, scale: bool | Literal["standard", "range"] = False,
                 options: OptionsLike = None, random_state: int | None = 0,
                 verbose: bool = False) -> None:
        keep_params(self, locals())

    def _check_params(self):
        super()._check_params()
        method_class(self.method, plain=False, problem=RANKING)

    def fit(self, X: DataLike, y: ArrayLike | None = None, qid: ArrayLike | None = None, *,
            checkpoint_dir: str | os.PathLike[str] | None = None,
            checkpoint_every: float | None = CHECKPOINT_EVERY,
            checkpoint_iters: int | None = None, checkpoint_keep: int = CHECKPOINT_KEEP,
            resume: bool = False, checkpoint_replace: bool = False,
            client: Client | str | None = None) -> CVMRanker:
        """Fit on arrays (X, y, qid) or a store with a qid column.

        Parameters
        ----------
        X : array_like, sparse matrix, store, str or os.PathLike
            The training rows: arrays of shape (n_samples, n_features), a
            sparse matrix, or a store (an opened store, its path or its URL)
            with relevance labels and a qid column, read a chunk at a time.
        y : array_like of shape (n_samples,), optional
            The relevance labels of arrays (higher: ranked first). None for a
            store.
        qid : array_like of shape (n_samples,), optional
            The integer query ids of arrays: pairs are formed within a query.
            None: the rows are one query (every pair of rows whose relevance
            differs). None for a store.
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
        self : CVMRanker
            The fitted estimator.
        """
        return self._fit(X, y, qid=qid, client=client, checkpoints=Checkpoints(
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume,
            checkpoint_replace))

    def _fit_data(self, X, y, qid=None):
        if isinstance(X, (BaseStore, str)) or hasattr(X, "__fspath__"):
            no_labels_with_store(X, y=y, qid=qid)
            return FitData(self._prepare(X)[0])
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float32,
                             reset=True, y_numeric=True)
        # no qid: every row in one query, pairs across all of them
        qid = np.zeros(X.shape[0], np.int64) if qid is None else np.asarray(qid)
        if qid.shape != (X.shape[0],):
            raise ValueError(f"qid has shape {qid.shape}, expected ({X.shape[0]},)")
        _check_pairs(np.asarray(y, np.float64), qid)
        return FitData(self._maybe_scale(as_store(X, np.asarray(y, np.float64), qid=qid)))

    def _train(self, data, run):
        """The ranking SVM over the pairs (:func:`~streamcvm.problems.ranking.train_ranker`)."""
        kern = self._kernel(data.store)
        self._fit_one(run, data.store, kern, run.solve(), lambda s: train_ranker(
            data.store, kern, s, C=self.C, full_pass=self.full_pass))

    def predict(self, X: DataLike) -> np.ndarray:
        """Score the rows of X: within a query, higher ranks first.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores.
        """
        return self._values(X)

    def predict_with_decision(self, X: DataLike) -> tuple[np.ndarray, np.ndarray]:
        """Score the rows of X, twice (the interface the classifiers share).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        scores, decision : ndarray of shape (n_samples,)
            ``predict(X)``, and the same array as the decision values.
        """
        f = self.predict(X)
        return f, f

    def score(self, X: DataLike, y: ArrayLike | None = None,
              qid: ArrayLike | None = None) -> float:
        """Give the mean NDCG@10 over the queries.

        Parameters
        ----------
        X : array_like, sparse matrix, store, str or os.PathLike
            The rows: arrays, a sparse matrix, or a store, its path or URL
            (streamed, scored against its own relevance labels and query ids).
        y : array_like of shape (n_samples,), optional
            The relevance labels of arrays (needed with arrays); None for a
            store.
        qid : array_like of shape (n_samples,), optional
            The query ids of arrays (None: the rows are one query); None for
            a store.

        Returns
        -------
        float
            The mean NDCG@10.
        """
        if is_store_like(X):
            if y is not None or qid is not None:
                raise ValueError("score on a store takes its labels and query ids from "
                                 "the store: pass no y or qid")
            from ..predict.metrics import RankingTotals
            from ..predict.chunks import predict_chunks
            store = as_store(X)
            if not store.has_qid:
                raise ValueError(f"{getattr(store, 'path', 'the store')}: no query ids "
                                 "(qid) to rank within")
            tot = RankingTotals(k=10)
            for r in predict_chunks(self, store):
                tot.add(r.y, r.pred, r.qid)
            return float(tot.result()[0])
        if y is None:
            raise ValueError("score(X, y, qid): y is needed with arrays")
        from ..predict.metrics import ndcg_at_k
        f = self.predict(X)
        return ndcg_at_k(y, f, np.zeros(len(f), np.int64) if qid is None else qid, k=10)


def _check_pairs(y, qid):
    """A ValueError unless some query holds two rows of different relevance
    (the pairs a ranking SVM trains on)."""
    _, inv = np.unique(qid, return_inverse=True)
    lo = np.full(inv.max() + 1 if len(inv) else 0, np.inf)
    hi = np.full_like(lo, -np.inf)
    np.minimum.at(lo, inv, y)
    np.maximum.at(hi, inv, y)
    if not np.any(hi > lo):
        rows = "1 sample" if len(y) == 1 else f"{len(y):,} rows"
        raise ValueError(f"nothing to rank: no query among {len(lo):,} has two rows of "
                         f"different relevance ({rows})")
