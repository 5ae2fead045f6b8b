"""streamcvm: Core Vector Machines trained from chunked stores larger than RAM.

The estimators (scikit-learn API): :class:`CVMClassifier`, :class:`CVMOneClass`,
:class:`CVMRegressor`, :class:`CVMRanker`. Stores: :func:`ingest` (CSV /
svmlight files into a chunked Zarr or HDF5 store), :func:`open_store`,
:func:`as_store`. Models: :func:`save_model`, :func:`load_model`.
"""
__version__ = "0.1.0"

import os as _os

# The ingest code is the repository's top folder ingest/, installed as the
# subpackage streamcvm.ingest (pyproject.toml's package-dir). Run from a source
# checkout, that folder is beside this one: look for subpackages there too.
_src = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "ingest")) and \
        _os.path.isfile(_os.path.join(_src, "ingest", "__init__.py")):
    __path__.append(_src)

from .store import ArrayStore, Chunk, DiskStore, StoreError, as_store, open_store  # noqa: E402

_ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker")
__all__ = ["open_store", "as_store", "ArrayStore", "DiskStore", "Chunk", "StoreError",
           *_ESTIMATORS, "MMDATransformer", "ingest", "load_model", "save_model", "__version__"]


def __getattr__(name):
    # estimators import numba and scikit-learn, ingest its parsers: only when asked for
    if name in _ESTIMATORS:
        from . import estimators
        return getattr(estimators, name)
    if name == "MMDATransformer":
        from .transformers import MMDATransformer
        return MMDATransformer
    if name in ("load_model", "save_model"):
        from . import model
        return getattr(model, name)
    if name == "ingest":        # a module that is also the function: streamcvm.ingest(...)
        import importlib
        return importlib.import_module(__name__ + ".ingest")
    raise AttributeError(f"module 'streamcvm' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
