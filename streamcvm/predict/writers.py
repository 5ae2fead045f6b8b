"""Predictions written out: to a store (y = the predicted labels, X = the
decision values or the class probabilities) or to a text file (one label per
line, as LIBSVM's svm-predict), chunk by chunk; a store under a temporary
name, renamed when complete; a file through :func:`~streamcvm.data.atomic.atomic_file`
unless it is standard output or a special file such as a pipe."""
import os
import sys

import numpy as np

from ..data.atomic import atomic_file
from ..data.writer import StoreWriter
from .chunks import predict_chunks


def label_codes(classes, labels):
    """Positions in ``classes`` of each of ``labels`` (all among them),
    vectorised; ``classes`` need not be sorted (models of older versions)."""
    classes = np.asarray(classes)
    order = np.argsort(classes, kind="stable")
    return order[np.searchsorted(classes[order], np.asarray(labels))]


def label_text(values):
    """Labels as LIBSVM writes them: integers without '.0'."""
    v = np.asarray(values)
    if v.dtype.kind == "f" and np.all(v == np.round(v)) and np.all(np.abs(v) < 2.0 ** 53):
        v = v.astype(np.int64)
    return [str(x.item() if hasattr(x, "item") else x) for x in v]


def _outputs(est, store, runner, proba, progress):
    """(predictions, decision values or class probabilities) per chunk."""
    for r in predict_chunks(est, store, runner, progress=progress, proba=proba):
        yield r.pred, (r.proba if proba else r.dec)


def to_store(est, store, out, model_path, runner=None, proba=False, replace=True,
             progress=None):
    """Predictions as a store at ``out``: X = the decision values (one column,
    or one per class / machine; ``proba``: the class probabilities, one
    column per class), y = the predicted label (codes + label map when the
    labels are not numbers). ``replace``: what the final rename may replace
    (the path was checked by :func:`~streamcvm.data.outputs.check_output`).
    Returns the rows written; a store without rows is a ValueError."""
    classes = getattr(est, "classes_", None)
    numeric = classes is None or np.issubdtype(np.asarray(classes).dtype, np.number)
    w = None
    n = 0
    try:
        for pred, dec in _outputs(est, store, runner, proba, progress):
            dec = np.asarray(dec, np.float32).reshape(len(pred), -1)
            if w is None:
                w = StoreWriter(out, dec.shape[1], overwrite=replace,
                                fmt="zarr" if out.endswith(".zarr") else "hdf5")
            y = np.asarray(pred, np.float64) if numeric else \
                label_codes(classes, pred).astype(np.float64)
            w.append(dec, y)
            n += len(pred)
        if w is None:
            raise ValueError("the store has no rows")
        attrs = {"predictions": {"model": os.path.abspath(model_path),
                                 "source": getattr(store, "path", None),
                                 "X": "predict_proba" if proba else "decision_function",
                                 "y": "predict"}}
        if not numeric:
            attrs["label_names"] = [str(c) for c in classes]
        w.close(attrs)
    except BaseException:
        if w is not None:
            w.abort()
        raise
    return n


def to_text(est, store, output, runner=None, mode="new", proba=False, replace=True,
            progress=None):
    """One prediction per line (``proba``: then the class probabilities,
    after a 'labels ...' header, as LIBSVM's svm-predict -b 1): to standard
    output (``mode`` "stdout"), straight into a special file such as a pipe
    ("special"), or under a temporary name renamed into place when complete.
    Returns the rows written."""
    labels = est.task in ("classification", "one-class")

    def write(f):
        n = 0
        if proba:
            f.write("labels " + " ".join(label_text(est.classes_)) + "\n")
        for pred, P in _outputs(est, store, runner, proba, progress):
            pred = np.asarray(pred)
            text = label_text(pred) if labels else [str(v.item() if hasattr(v, "item") else v)
                                                    for v in pred]
            if proba:
                text = [t + " " + " ".join(f"{p:.6g}" for p in row) for t, row in zip(text, P)]
            f.write("\n".join(text))
            f.write("\n")
            n += len(pred)
        f.flush()
        return n
    if mode == "stdout":
        return write(sys.stdout)
    if mode == "special":
        with open(output, "w") as f:
            return write(f)
    with atomic_file(output, replace=replace) as f:
        return write(f)
