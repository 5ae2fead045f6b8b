"""streamcvm: Core Vector Machines trained from chunked stores larger than RAM.

The estimators (scikit-learn API): :class:`CVMClassifier`, :class:`CVMOneClass`,
:class:`CVMRegressor`, :class:`CVMRanker`. Stores: :func:`ingest` (CSV /
svmlight files into a chunked Zarr or HDF5 store), :func:`open_store`,
:func:`as_store`. Models: :func:`save_model`, :func:`load_model`.
"""
__version__ = "0.1.0"

from .store import ArrayStore, Chunk, DiskStore, StoreError, as_store, open_store  # noqa: E402

_ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker")
__all__ = ["open_store", "as_store", "ArrayStore", "DiskStore", "Chunk", "StoreError",
           *_ESTIMATORS, "ingest", "load_model", "save_model", "__version__"]


def __getattr__(name):
    # estimators import numba and scikit-learn, ingest its parsers: only when asked for
    if name in _ESTIMATORS:
        from . import estimators
        return getattr(estimators, name)
    if name in ("load_model", "save_model"):
        from . import model
        return getattr(model, name)
    if name == "ingest":
        from ingest.pipeline import ingest
        return ingest
    raise AttributeError(f"module 'streamcvm' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
