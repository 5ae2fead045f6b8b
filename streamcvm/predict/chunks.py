"""Prediction over a store, one task per chunk (:mod:`streamcvm.data.parallel`):
the model is sent to the workers once, each task reads its chunk where the
data are and returns the chunk's labels, query ids, predictions and
decision values, in chunk order. Memory on the driver is a few chunks'
outputs, never X."""
from typing import NamedTuple

import numpy as np

from ..data.parallel import as_runner
from ..data.store import StoreError


class Predicted(NamedTuple):
    y: np.ndarray           # the chunk's stored labels / targets
    qid: object             # its query ids (None without a qid column)
    pred: np.ndarray        # est.predict
    dec: np.ndarray         # est.decision_function (a ranker's or regressor's f(x))
    proba: object = None    # est.predict_proba, when asked for


def _predict_task(i, store, est, proba=False):
    c = store.chunk(i)
    pred, dec = est.predict_with_decision(c.X)      # one kernel pass per chunk
    return Predicted(np.asarray(c.y), c.qid, pred, dec,
                     est.predict_proba(c.X) if proba else None)


def predict_chunks(est, store, runner=None, progress=None, proba=False):
    """:class:`Predicted` for every chunk of ``store``, in order, computed on
    ``runner`` (a :class:`~streamcvm.data.parallel.Runner`, a client, or None:
    the active client, else threads). ``progress(done, total)`` after each.
    ``proba``: with the class probabilities too."""
    if store.d != est.n_features_in_:
        raise StoreError(f"{getattr(store, 'path', 'store')}: {store.d} features, the model "
                         f"expects {est.n_features_in_}")
    yield from as_runner(runner).map(_predict_task, store.n_chunks, store, est, proba,
                                     progress=progress)


def class_table(classes, store, one_class=False):
    """For each of the store's label values (``store.classes``, sorted), the
    index in ``classes`` (a model's ``classes_``) of the class it is, or -1:
    text labels match by their text, numbers by value. One-class: 1 for
    label 1 (normal), 0 for any other. A ValueError, naming the store, when
    it has no labels, a continuous target, or none of the model's classes."""
    name = getattr(store, "path", "the store")
    if store.classes is None and getattr(store, "attrs", {}).get("label_kind") == "none":
        raise ValueError(f"{name}: has no labels to evaluate against")
    if store.classes is None:
        raise ValueError(f"{name}: y has more than 1,000 distinct values (a regression "
                         "target), but the model is a classifier")
    values = store.decode_labels(store.classes) if store.label_names else store.classes
    if one_class:
        if store.label_names:
            raise ValueError(f"{name}: text labels; a one-class model is evaluated on "
                             "labels 1 (normal) and any other number (outlier)")
        return np.where(np.asarray(values) == 1, 1, 0)
    text = store.label_names is not None or np.asarray(classes).dtype.kind in "USO"
    key = (lambda v: str(v)) if text else (lambda v: float(v))
    index = {key(c): j for j, c in enumerate(classes)}
    table = np.array([index.get(key(v), -1) for v in values], np.int64)
    if (table < 0).all():
        shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v)
                          for v in list(values)[:5])
        raise ValueError(f"{name}: none of its labels ({shown}"
                         f"{', ...' if len(values) > 5 else ''}) is a class of the model "
                         f"({', '.join(str(c) for c in list(classes)[:5])}"
                         f"{', ...' if len(classes) > 5 else ''})")
    return table
