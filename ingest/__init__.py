"""Ingest svmlight/LIBSVM and CSV/TSV text (plain, .gz, .bz2) into chunked stores.

This folder sits at the repository's top; ``streamcvm/ingest`` links to it,
so it is the subpackage ``streamcvm.ingest`` in the source tree and installed
alike (docs/architecture.md says why). What it uses of the library it imports by absolute name
(``streamcvm.data...``), so a reader and a static tool see it. Called,
``streamcvm.ingest`` is :func:`streamcvm.ingest.pipeline.ingest`:
``streamcvm.ingest(paths, store, ...)``.
"""
import sys
import types

from streamcvm._numba_cache import ensure as _ensure_numba_cache

_ensure_numba_cache()       # before the parsers' compiled kernels are defined

from streamcvm.data.writer import StoreWriter  # noqa: E402

from .errors import IngestError  # noqa: E402
from .pipeline import ingest  # noqa: E402

__all__ = ["ingest", "IngestError", "StoreWriter"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return ingest(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
