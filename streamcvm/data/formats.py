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
lack. A chunk's checksum does not say where it belongs: the chunk
manifest (:data:`MANIFEST_KEY`, in the checksummed attributes) does, so a
chunk copied over another is an error too (:class:`MisplacedChunk`).
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


class MisplacedChunk(MissingChunk):
    """A chunk file whose bytes are not those written at its place (the
    store's chunk manifest): a chunk copied or moved over another one."""

    def __init__(self, key):
        self.key = key
        Exception.__init__(self, f"the chunk file {key} is not the chunk written there "
                                 f"(copied or moved from elsewhere?)")


MANIFEST_KEY = "chunk_manifest"
"""Attribute: ``{"algorithm": "xxh3_64", "chunks": {chunk key: hex digest}}``,
the digest of every chunk's stored bytes as written (a Zarr chunk file, an
HDF5 chunk read raw), by chunk key (``ARRAY/c/i/j``): a chunk reads only at
its own place."""


def chunk_digest(buf):
    """XXH3-64 (hex) of a chunk file's bytes (a zarr Buffer or bytes)."""
    import xxhash
    data = buf.as_numpy_array() if hasattr(buf, "as_numpy_array") else buf
    return xxhash.xxh3_64(data).hexdigest()


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
        manifest = None         # chunk key -> digest (stores that carry one)
        misplaced = None

        async def get(self, key, prototype, byte_range=None):
            buf = await self._store.get(key, prototype, byte_range)
            if not _is_chunk_key(key):
                return buf
            if buf is None:
                if self.strict:
                    self.missing.add(key)
            elif self.manifest is not None and byte_range is None and \
                    self.manifest.get(key) != chunk_digest(buf):
                self.misplaced.add(key)
            return buf

    if "://" in path:
        inner = FsspecStore.from_url(path, read_only=True)
    else:
        inner = LocalStore(path, read_only=True)
    return Strict(inner)


def _recording_store(path, digests):
    """A zarr store writing to the folder ``path`` that keeps the digest of
    every chunk file it writes in ``digests`` (chunk key -> hex), so the
    writer's chunk manifest costs no second pass over the data."""
    from zarr.storage import LocalStore, WrapperStore

    class Recording(WrapperStore):
        async def set(self, key, value):
            await self._store.set(key, value)
            if _is_chunk_key(key):
                digests[key] = chunk_digest(value)

    return Recording(LocalStore(path))


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
            self._names = set(names)        # has(): no store round trip per name
            self.checksums = "crc32c" if names and all(
                any(c.to_dict().get("name") == "crc32c" for c in self.group[n].compressors)
                for n in names) else None
            # checksummed stores have every chunk written: a missing one is damage
            self._store.strict = self.checksums is not None
            self._store.missing = set()
            self._store.misplaced = set()
        else:
            import os

            from zarr.codecs import Crc32cCodec, ZstdCodec
            os.makedirs(path, exist_ok=True)
            self._digests = {}
            self.group = zarr.open_group(_recording_store(path, self._digests), mode="w",
                                         zarr_format=3)
            self.codec = (ZstdCodec(level=clevel),) + ((Crc32cCodec(),) if checksums else ())

    def array(self, name):
        cache = self.__dict__.setdefault("_arrays", {})
        if name not in cache:           # one Array object per name (opening costs)
            cache[name] = self.group[name]
        return cache[name]

    def layout(self, name):
        """What a reader needs to know of array ``name`` to read its bytes
        as the values written: dtype, shape, chunks, codecs (JSON)."""
        a = self.array(name)
        return {"dtype": str(a.dtype), "shape": list(a.shape), "chunks": list(a.chunks),
                "codecs": [c.to_dict() for c in a.metadata.codecs]}

    def expect(self, manifest):
        """Check every chunk read against ``manifest`` (:data:`MANIFEST_KEY`)."""
        self._store.manifest = dict(manifest["chunks"])

    @staticmethod
    def verify(name, arr, a, b):
        """Zarr: chunks are checked as they are fetched (see ``_strict_store``)."""

    def manifest(self):
        """The written chunks' manifest (:data:`MANIFEST_KEY`), at the end of
        a write (chunks trimmed away by a resize are not in it)."""
        import os
        chunks = {}
        for key in sorted(self._digests):
            if os.path.isfile(os.path.join(self.path, key)):
                chunks[key] = self._digests[key]
        return {"algorithm": "xxh3_64", "chunks": chunks}

    def missing(self, name):
        """Raise :class:`MissingChunk` if a read of array ``name`` asked for
        a chunk file that is not there (a checksummed store: every chunk is
        written), instead of taking zarr's fill value, and
        :class:`MisplacedChunk` for a chunk file that is not the one the
        store's manifest says was written there."""
        for found, error in ((getattr(self._store, "missing", None), MissingChunk),
                             (getattr(self._store, "misplaced", None), MisplacedChunk)):
            if found:
                mine = sorted(k for k in list(found) if k.startswith(name + "/c/"))
                if mine:
                    found.difference_update(mine)
                    raise error(mine[0])

    def has(self, name):
        names = getattr(self, "_names", None)
        return name in names if names is not None else name in self.group

    def close(self):
        pass

    def create(self, name, shape, dtype, chunks):
        return self.group.create_array(
            name, shape=shape, dtype=dtype, chunks=chunks,
            compressors=self.codec, fill_value=0,
            # every chunk written here is data: skip zarr's per-chunk "is it empty?" scan
            config={"write_empty_chunks": True})

    @staticmethod
    def resize(arr, shape):
        arr.resize(shape)

    def set_attrs(self, attrs):
        self.group.attrs.update(attrs)

    def finish(self):
        import warnings
        with warnings.catch_warnings():
            # consolidated metadata is a zarr-python extension of v3, wanted here
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
            names = []
            for n in self.file:
                try:
                    if isinstance(self.file[n], h5py.Dataset):
                        names.append(n)
                except (KeyError, OSError, RuntimeError, ValueError) as e:
                    why = " ".join(str(e).split())[:160]
                    self.close()
                    raise StoreOpenError(f"damaged store: its object {n} cannot be opened "
                                         f"({why}); re-ingest it or restore it from a copy") \
                        from None
            self.checksums = "fletcher32" if names and all(
                self.file[n].fletcher32 for n in names) else None
        else:
            self.file = h5py.File(path, "w")
            self.comp = dict(hdf5plugin.Zstd(clevel=clevel), fletcher32=bool(checksums))
        self.path = path

    def array(self, name):
        return self.file[name]

    def layout(self, name):
        """As :meth:`ZarrFormat.layout` (HDF5: dtype with its byte order)."""
        a = self.file[name]
        return {"dtype": a.dtype.str, "shape": list(a.shape), "chunks": list(a.chunks or ())}

    def expect(self, manifest):
        """Check chunks against ``manifest`` (:data:`MANIFEST_KEY`) when read
        (:meth:`verify`)."""
        self._manifest, self._verified = dict(manifest["chunks"]), set()

    def verify(self, name, arr, a, b):
        """Raise :class:`MisplacedChunk` if a chunk of rows ``a:b`` of array
        ``name`` is not the one the manifest says was written at its place
        (its stored bytes, as HDF5 reads them raw). Each chunk is checked
        once per open store."""
        manifest = getattr(self, "_manifest", None)
        if manifest is None or b <= a:
            return
        import itertools
        rest = [range(-(-n // c)) for n, c in zip(arr.shape[1:], arr.chunks[1:])]
        step = arr.chunks[0]
        for idx in itertools.product(range(a // step, (b - 1) // step + 1), *rest):
            key = name + "/c/" + "/".join(map(str, idx))
            if key in self._verified:
                continue
            _, raw = arr.id.read_direct_chunk(tuple(i * c for i, c in zip(idx, arr.chunks)))
            if manifest.get(key) != chunk_digest(raw):
                raise MisplacedChunk(key)
            self._verified.add(key)

    def manifest(self):
        """The written chunks' manifest (:data:`MANIFEST_KEY`): the digest of
        each chunk's stored bytes, by chunk key (``NAME/c/i/j``, as Zarr's)."""
        import h5py
        chunks = {}
        for name in self.file:
            ds = self.file[name]
            if not isinstance(ds, h5py.Dataset) or ds.chunks is None:
                continue
            for i in range(ds.id.get_num_chunks()):
                off = ds.id.get_chunk_info(i).chunk_offset
                _, raw = ds.id.read_direct_chunk(off)
                idx = (o // c for o, c in zip(off, ds.chunks))
                chunks[name + "/c/" + "/".join(map(str, idx))] = chunk_digest(raw)
        return {"algorithm": "xxh3_64", "chunks": chunks}

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
