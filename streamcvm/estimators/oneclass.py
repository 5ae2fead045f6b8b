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
    """One-class L2-SVM (SVDD): the (1 + eps)-approximate minimum enclosing
    ball of the data in feature space; points outside it are outliers.

    Parameters are those of :class:`CVMClassifier`, with its defaults but
    ``method="cvm"``: on kddcup99's normal traffic its AUC is the higher at
    every C tried (0.9962 against BVM's 0.9959-0.9960), at the default C=1 in
    the same time with the same 33 support vectors (BENCHMARKS.md);
    BVM trains faster where C is small and the core set large. ``verbose``
    shows a progress bar.

    ``eps`` defaults to 1e-3, not "auto": the "auto" rule measures eps
    against the two-class margin ``||c||^2``, which a ball around one class
    does not have, and it stops at eps 0.025-0.05, where the ball still
    holds every training row (300 blobs: no outlier, against 55 at eps
    1e-3 and 58 at 1e-5; docs/solvers.md). On kddcup99's 77,606 normal rows eps=1e-3 trains
    in 0.2 s with the same AUC (0.9961 against 0.9962).

    ``predict`` returns +1 (inside) / -1 (outside) as OneClassSVM does;
    ``decision_function`` is ``R^2 - ||phi(x) - c||^2`` (positive inside),
    ``score_samples`` is ``-||phi(x) - c||^2`` and ``offset_`` is ``-R^2``,
    where ``R^2`` is the radius the solver certified: the (1 + eps) ball in
    the L2-SVDD's augmented space, seen from a new point (see
    ``problems.classification.train_machine``). ``C`` trades the ball's size
    against the slack of the rows outside it.
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
        """Fit on the rows of X (arrays, a sparse matrix or a store); y is
        ignored. The checkpoint arguments and ``client`` are those of
        :meth:`CVMClassifier.fit`."""
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
        """R^2 - ||phi(x) - c||^2 (positive inside) for arrays, a store, its
        path or URL, or a dask array (streamed)."""
        return self._values(X, streamed=1)

    def score_samples(self, X: DataLike) -> np.ndarray:
        return self.decision_function(X) + self.offset_

    def _model_record(self):
        return [self.machine_], {"offset": self.offset_}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]
        self.offset_ = man["offset"]

    def predict_with_decision(self, X: DataLike) -> tuple[np.ndarray, np.ndarray]:
        dec = self.decision_function(X)
        return np.where(dec >= 0, 1, -1), dec

    def predict(self, X: DataLike) -> np.ndarray:
        return self.predict_with_decision(X)[0]
