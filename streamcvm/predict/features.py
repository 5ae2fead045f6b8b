"""Features of a store, one task per chunk (:mod:`streamcvm.data.parallel`), as
prediction is (:mod:`streamcvm.predict`): the transformer goes to the
workers once, each task reads its chunk where the data are and returns the
chunk's features; the driver holds a few chunks' outputs, never X.
:func:`write_features` writes them to a new store, atomically."""
import os

import numpy as np

from ..data.parallel import as_runner
from ..data.store import StoreError


def _features_task(i, store, est):
    c = store.chunk(i)
    return np.asarray(c.y), c.qid, est._features(c.X)      # not X: tasks in flight hold these


def features_chunks(est, store, runner=None, progress=None):
    """(y, qid, features) of every chunk of ``store``, in order."""
    if store.d != est.n_features_in_:
        raise StoreError(f"{getattr(store, 'path', 'store')}: {store.d} features, the model "
                         f"expects {est.n_features_in_}")
    yield from as_runner(runner).map(_features_task, store.n_chunks, store, est,
                                     progress=progress)


def write_features(est, store, path, *, overwrite=False, runner=None, progress=False,
                   model_path=None, target=None):
    """Write the features of every row of ``store`` to a new store at
    ``path`` (``.zarr``, or ``.h5`` / ``.hdf5``): X = the features (float32),
    y, qid and label names as in ``store``. Checked first as every output is
    (:func:`streamcvm.data.outputs.check_output`: a feature store there is
    replaced, anything else only with ``overwrite``, the inputs never);
    written under a temporary name and renamed (``target``: that check,
    made earlier by the caller: a store another run wrote there since is
    then not replaced). Returns the rows written."""
    from ..data.writer import StoreWriter
    from ..data.outputs import check_output
    path = os.fspath(path)
    if target is None:
        target = check_output(path, what="feature store", own_kind="features",
                              inputs=[getattr(store, "path", None), model_path],
                              overwrite=overwrite)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=store.n_chunks, unit="chunk", desc="features", mininterval=0.5)
    w = StoreWriter(path, est._n_features_out, overwrite=target.replace,
                    has_qid=bool(getattr(store, "has_qid", False)),
                    fmt="hdf5" if path.lower().endswith((".h5", ".hdf5")) else "zarr")
    n = 0
    try:
        for y, qid, F in features_chunks(est, store, runner, progress=None if bar is None
                                         else lambda d, t: bar.update(1)):
            w.append(np.asarray(F, np.float32), np.asarray(y, np.float64),
                     qid=qid if w.has_qid else None)
            n += len(F)
        attrs = {"features": {"model": None if model_path is None else
                              os.path.abspath(model_path),
                              "source": getattr(store, "path", None),
                              "transformer": type(est).__name__,
                              "n_features": int(est._n_features_out)}}
        if getattr(store, "label_names", None):
            attrs["label_names"] = list(store.label_names)
        w.close(attrs)
    except BaseException:
        w.abort()
        raise
    finally:
        if bar is not None:
            bar.close()
    return n
