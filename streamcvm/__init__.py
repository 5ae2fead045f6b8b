"""streamcvm: Core Vector Machines trained from chunked stores larger than RAM.

The estimators (scikit-learn API): :class:`CVMClassifier`, :class:`CVMOneClass`,
:class:`CVMRegressor`, :class:`CVMRanker`. Stores: :func:`ingest` (CSV /
svmlight files into a chunked Zarr or HDF5 store), :func:`open_store`,
:func:`as_store`. Models: :func:`save_model`, :func:`load_model`.
"""
from __future__ import annotations

__version__ = "0.1.0"     # the one place it is written (pyproject reads it)

from typing import TYPE_CHECKING, Any  # noqa: E402

from .data.store import ArrayStore, Chunk, DiskStore, StoreError, as_store, open_store  # noqa: E402

if TYPE_CHECKING:       # what __getattr__ imports when first asked for, for type checkers
    from .apps import surface as surface
    from .estimators.classifier import CVMClassifier as CVMClassifier
    from .estimators.mmda import MMDATransformer as MMDATransformer
    from .estimators.model import load_model as load_model
    from .estimators.model import save_model as save_model
    from .estimators.oneclass import CVMOneClass as CVMOneClass
    from .estimators.ranker import CVMRanker as CVMRanker
    from .estimators.regressor import CVMRegressor as CVMRegressor
    from .ingest.pipeline import ingest as ingest

_ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker", "MMDATransformer")
__all__ = ["open_store", "as_store", "ArrayStore", "DiskStore", "Chunk", "StoreError",
           *_ESTIMATORS, "ingest", "load_model", "save_model", "surface", "__version__"]


def __getattr__(name: str) -> Any:
    # estimators import numba and scikit-learn, ingest its parsers: only when asked for
    if name in _ESTIMATORS:
        from . import estimators
        return getattr(estimators, name)
    if name in ("load_model", "save_model"):
        from .estimators import model
        return getattr(model, name)
    if name == "surface":       # streamcvm.surface.reconstruct(points)
        from .apps import surface
        return surface
    if name == "ingest":        # a module that is also the function: streamcvm.ingest(...)
        import streamcvm.ingest  # noqa: F401 (the import sets this module's attribute "ingest")
        return globals()["ingest"]
    raise AttributeError(f"module 'streamcvm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
