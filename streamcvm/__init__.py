"""streamcvm: Core Vector Machines trained from chunked stores larger than RAM.

The estimators (scikit-learn API): :class:`CVMClassifier`, :class:`CVMOneClass`,
:class:`CVMRegressor`, :class:`CVMRanker`. Stores: :func:`ingest` (CSV /
svmlight files into a chunked Zarr or HDF5 store), :func:`open_store`,
:func:`as_store`. Models: :func:`save_model`, :func:`load_model`.
"""
__version__ = "0.1.0"

import os as _os


def _writable(folder):
    """Whether files can be created in ``folder`` (made if need be), as
    numba's cache locators test it."""
    import tempfile
    try:
        _os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def _numba_cache():
    """Where numba caches the compiled kernels (``@njit(cache=True)``): next
    to the sources, else in ~/.cache/numba, as numba chooses; when neither
    is writable (a shared install, a container without a home), numba would
    refuse to define the kernels at all, so they go to a folder of this
    user's under the temporary directory instead. Returns that folder (the
    command line says so in one line), or None. NUMBA_CACHE_DIR, when set,
    is left alone."""
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return None
    here = _os.path.dirname(_os.path.abspath(__file__))
    home = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"),
                                                             ".cache")
    if _writable(_os.path.join(here, "__pycache__")) or \
            _writable(_os.path.join(home, "numba")):
        return None
    import stat
    import tempfile
    folder = _os.path.join(tempfile.gettempdir(), f"streamcvm-numba-cache-{_os.getuid()}")
    try:
        _os.makedirs(folder, mode=0o700, exist_ok=True)
        st = _os.lstat(folder)
        # numba's cache index is a pickle: only a folder of this user's, closed to others
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != _os.getuid() or st.st_mode & 0o022:
            raise OSError("not this user's own folder")
    except OSError:
        folder = tempfile.mkdtemp(prefix="streamcvm-numba-cache-")
    _os.environ["NUMBA_CACHE_DIR"] = folder
    import sys
    if "numba" in sys.modules:          # imported before us: its config is read already
        sys.modules["numba"].config.CACHE_DIR = folder
    return folder


numba_cache_moved = _numba_cache()

from .data.store import ArrayStore, Chunk, DiskStore, StoreError, as_store, open_store  # noqa: E402

_ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker", "MMDATransformer")
__all__ = ["open_store", "as_store", "ArrayStore", "DiskStore", "Chunk", "StoreError",
           *_ESTIMATORS, "ingest", "load_model", "save_model", "surface", "__version__"]


def __getattr__(name):
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


def __dir__():
    return sorted(set(globals()) | set(__all__))
