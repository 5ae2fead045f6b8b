"""Prediction over a store, one task per chunk (:mod:`streamcvm.parallel`):
the model is sent to the workers once, each task reads its chunk where the
data are and returns the chunk's labels, query ids, predictions and
decision values, in chunk order. Memory on the driver is a few chunks'
outputs, never X."""
from typing import NamedTuple

import numpy as np

from .parallel import as_runner
from .store import StoreError


class Predicted(NamedTuple):
    y: np.ndarray           # the chunk's stored labels / targets
    qid: object             # its query ids (None without a qid column)
    pred: np.ndarray        # est.predict
    dec: np.ndarray         # est.decision_function (a ranker's or regressor's f(x))


def _predict_task(i, store, est):
    c = store.chunk(i)
    pred, dec = est.predict_with_decision(c.X)      # one kernel pass per chunk
    return Predicted(np.asarray(c.y), c.qid, pred, dec)


def predict_chunks(est, store, runner=None, progress=None):
    """:class:`Predicted` for every chunk of ``store``, in order, computed on
    ``runner`` (a :class:`~streamcvm.parallel.Runner`, a client, or None:
    the active client, else threads). ``progress(done, total)`` after each."""
    if store.d != est.n_features_in_:
        raise StoreError(f"{getattr(store, 'path', 'store')}: {store.d} features, the model "
                         f"expects {est.n_features_in_}")
    yield from as_runner(runner).map(_predict_task, store.n_chunks, store, est,
                                     progress=progress)
