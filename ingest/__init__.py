"""Ingest svmlight/LIBSVM and CSV/TSV text (plain, .gz, .bz2) into chunked stores.

``streamcvm.ingest`` is this package and, called, its function
:func:`streamcvm.ingest.pipeline.ingest`: ``streamcvm.ingest(paths, store, ...)``.
"""
import sys
import types

from .errors import IngestError
from .pipeline import ingest
from streamcvm.data.writer import StoreWriter

__all__ = ["ingest", "IngestError", "StoreWriter"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return ingest(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
