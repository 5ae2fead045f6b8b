"""streamcvm: Core Vector Machines trained from chunked stores larger than RAM."""
__version__ = "0.1.0"

from .store import ArrayStore, Chunk, DiskStore, StoreError, as_store, open_store  # noqa: E402

__all__ = ["open_store", "as_store", "ArrayStore", "DiskStore", "Chunk", "StoreError",
           "CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker", "__version__"]


def __getattr__(name):
    # estimators import numba and scikit-learn: only when asked for
    if name in ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker"):
        from . import estimators
        return getattr(estimators, name)
    raise AttributeError(f"module 'streamcvm' has no attribute {name!r}")
