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
    """Kernel ranking SVM (L2, generalized-cvm sec. IV-B) over the preference
    pairs within each query, trained by CVM (default) or Frank-Wolfe.

    ``fit(X, y, qid)`` (relevance labels, query ids) or ``fit(store)`` with a
    qid column; pairs are drawn within query groups from the sampler's pooled
    chunks, never materialised. ``predict`` returns scores (higher ranks
    first). Parameters are those of :class:`CVMClassifier`; ``max_core`` caps
    the core pairs (default 20,000).
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
        """Fit on arrays (X, y, qid) or a store with a qid column; arrays
        without ``qid`` are one query (every pair of rows whose relevance
        differs). The
        checkpoint arguments and ``client`` are those of :meth:`CVMClassifier.fit`."""
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
        """Scores: within a query, higher ranks first. X: arrays, a store,
        its path or URL, or a dask array (streamed)."""
        return self._values(X)

    def predict_with_decision(self, X: DataLike) -> tuple[np.ndarray, np.ndarray]:
        f = self.predict(X)
        return f, f

    def score(self, X: DataLike, y: ArrayLike | None = None,
              qid: ArrayLike | None = None) -> float:
        """Mean NDCG@10 over the queries (no ``qid``: the rows are one
        query); on a store (path, URL) against its own relevance labels and
        query ids, streamed."""
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
