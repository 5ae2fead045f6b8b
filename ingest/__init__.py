"""Ingest svmlight/LIBSVM and CSV/TSV text (plain, .gz, .bz2) into chunked stores."""
from .errors import IngestError
from .pipeline import ingest
from .writer import StoreWriter

__all__ = ["ingest", "IngestError", "StoreWriter"]
