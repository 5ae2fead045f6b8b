"""streamcvm: Core Vector Machines trained from chunked stores larger than RAM."""
__version__ = "0.1.0"

from .store import ArrayStore, Chunk, DiskStore, StoreError, as_store, open_store  # noqa: E402

__all__ = ["open_store", "as_store", "ArrayStore", "DiskStore", "Chunk", "StoreError",
           "__version__"]
