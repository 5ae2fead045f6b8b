"""The two store formats, one class each, for reading and for writing
(docs/store-format.md): a Zarr v3 group (a folder, or an fsspec URL zarr
reads) and an HDF5 file (a local path). Both hold the same named arrays and
JSON attributes; :class:`streamcvm.data.store.DiskStore` reads through them and
:class:`streamcvm.data.writer.StoreWriter` writes through them, so the
format is written down here only.

``Format(path, "r")``: ``attrs`` (dict), ``array(name)``, ``has(name)``,
``checksums`` (what guards the chunks: "crc32c", "fletcher32" or None),
``close()``. ``Format(path, "w", clevel, checksums=True)``: ``create(name,
shape, dtype, chunks)`` (arrays grow along their first axis with
``resize``), ``set_attrs(dict)``, ``finish()`` (flush and close; Zarr:
consolidate the metadata so one read opens the store).

Integrity: every chunk written carries a checksum, checked on every read
(Zarr: the ``crc32c`` codec after Zstd, over the compressed bytes; HDF5:
the fletcher32 filter), so a flipped byte or a truncated chunk is an error,
never data. Every chunk of a Zarr array is written (``write_empty_chunks``),
so a chunk file that is not there is an error too, never the fill value
(:class:`MissingChunk`); stores written before the checksums (no
``crc32c``) are read as they were, and ``streamcvm info`` says what they
lack.
"""
import json


class StoreOpenError(Exception):
    """``path`` is not a store of this format (message: why, one line)."""


class MissingChunk(Exception):
    """A chunk file that a store with checksummed chunks must have is not
    there (zarr would read it as the fill value)."""

    def __init__(self, key):
        self.key = key
        super().__init__(f"the chunk file {key} is missing")


def _is_chunk_key(key):
    """Zarr v3's default chunk keys: ``ARRAY/c/i/j``."""
    return "/c/" in "/" + key or key == "c"


def _strict_store(path):
    """A read-only zarr store for ``path`` (a folder or an fsspec URL) that
    records the chunk keys it was asked for and does not have, once
    ``strict`` is set (:meth:`ZarrFormat.missing` reports them). Recorded,
    not raised: an exception inside zarr's concurrent reads leaves the
    sibling tasks pending, and asyncio complains about them at exit."""
    from zarr.storage import FsspecStore, LocalStore, WrapperStore

    class Strict(WrapperStore):
        strict = False
        missing = None

        async def get(self, key, prototype, byte_range=None):
            buf = await self._store.get(key, prototype, byte_range)
            if buf is None and self.strict and _is_chunk_key(key):
                self.missing.add(key)
            return buf

    if "://" in path:
        inner = FsspecStore.from_url(path, read_only=True)
    else:
        inner = LocalStore(path, read_only=True)
    return Strict(inner)


class ZarrFormat:
    name = "zarr"

    def __init__(self, path, mode="r", clevel=1, checksums=True):
        import zarr
        self._zarr = zarr
        self.path = path
        if mode == "r":
            try:
                self._store = _strict_store(path)
                self.group = zarr.open_group(self._store, mode="r")
            except Exception as e:  # noqa: BLE001 - any failure means not a store
                raise StoreOpenError(f"not a Zarr store ({type(e).__name__})") from None
            self.attrs = dict(self.group.attrs)
            # crc32c only if every array has it (a store's arrays are written alike)
            names = [n for n, _ in self.group.arrays()]
            self.checksums = "crc32c" if names and all(
                any(c.to_dict().get("name") == "crc32c" for c in self.group[n].compressors)
                for n in names) else None
            # checksummed stores have every chunk written: a missing one is damage
            self._store.strict = self.checksums is not None
            self._store.missing = set()
        else:
            from zarr.codecs import Crc32cCodec, ZstdCodec
            self.group = zarr.open_group(path, mode="w", zarr_format=3)
            self.codec = (ZstdCodec(level=clevel),) + ((Crc32cCodec(),) if checksums else ())

    def array(self, name):
        return self.group[name]

    def missing(self, name):
        """Raise :class:`MissingChunk` if a read of array ``name`` asked for
        a chunk file that is not there (a checksummed store: every chunk is
        written), instead of taking zarr's fill value."""
        gone = getattr(self._store, "missing", None)
        if gone:
            mine = sorted(k for k in list(gone) if k.startswith(name + "/c/"))
            if mine:
                gone.difference_update(mine)
                raise MissingChunk(mine[0])

    def has(self, name):
        return name in self.group

    def close(self):
        pass

    def create(self, name, shape, dtype, chunks):
        return self.group.create_array(
            name, shape=shape, dtype=dtype, chunks=chunks,
            compressors=self.codec, fill_value=0,
            # every chunk we write is data: skip zarr's per-chunk "is it empty?" scan
            config={"write_empty_chunks": True})

    @staticmethod
    def resize(arr, shape):
        arr.resize(shape)

    def set_attrs(self, attrs):
        self.group.attrs.update(attrs)

    def finish(self):
        import warnings
        with warnings.catch_warnings():
            # consolidated metadata is a zarr-python extension of v3; we want it
            # (one read opens the store) and zarr-python reads it back
            warnings.simplefilter("ignore")
            self._zarr.consolidate_metadata(self.path)


class HDF5Format:
    name = "hdf5"

    def __init__(self, path, mode="r", clevel=1, checksums=True):
        import h5py
        import hdf5plugin          # registers the Zstd filter
        if mode == "r":
            try:
                self.file = h5py.File(path, "r")
                self.attrs = {k: json.loads(v) for k, v in self.file.attrs.items()}
            except (OSError, ValueError, TypeError) as e:
                why = " ".join(str(e).split())[:160]
                raise StoreOpenError(f"not a readable HDF5 store ({why})") from None
            names = [n for n in self.file if isinstance(self.file[n], h5py.Dataset)]
            self.checksums = "fletcher32" if names and all(
                self.file[n].fletcher32 for n in names) else None
        else:
            self.file = h5py.File(path, "w")
            self.comp = dict(hdf5plugin.Zstd(clevel=clevel), fletcher32=bool(checksums))
        self.path = path

    def array(self, name):
        return self.file[name]

    @staticmethod
    def missing(name):
        """HDF5 keeps its own chunk index: nothing to check (see ZarrFormat)."""

    def has(self, name):
        return name in self.file

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None

    def create(self, name, shape, dtype, chunks):
        maxshape = (None,) + tuple(None for _ in shape[1:])
        return self.file.create_dataset(
            name, shape=shape, dtype=dtype, chunks=chunks, maxshape=maxshape,
            fillvalue=0, **self.comp)

    @staticmethod
    def resize(arr, shape):
        arr.resize(shape)

    def set_attrs(self, attrs):
        for k, v in attrs.items():
            self.file.attrs[k] = json.dumps(v)

    def finish(self):
        self.file.flush()
        self.close()


FORMATS = {"zarr": ZarrFormat, "hdf5": HDF5Format}
