"""The two store formats, one class each, for reading and for writing
(docs/store-format.md): a Zarr v3 group (a folder, or an fsspec URL zarr
reads) and an HDF5 file (a local path). Both hold the same named arrays and
JSON attributes; :class:`streamcvm.store.DiskStore` reads through them and
:class:`streamcvm.ingest.writer.StoreWriter` writes through them, so the
format is written down here only.

``Format(path, "r")``: ``attrs`` (dict), ``array(name)``, ``has(name)``,
``close()``. ``Format(path, "w", clevel)``: ``create(name, shape, dtype,
chunks)`` (arrays grow along their first axis with ``resize``),
``set_attrs(dict)``, ``finish()`` (flush and close; Zarr: consolidate the
metadata so one read opens the store).
"""
import json


class StoreOpenError(Exception):
    """``path`` is not a store of this format (message: why, one line)."""


class ZarrFormat:
    name = "zarr"

    def __init__(self, path, mode="r", clevel=1):
        import zarr
        self._zarr = zarr
        self.path = path
        if mode == "r":
            try:
                self.group = zarr.open_group(path, mode="r")
            except Exception as e:  # noqa: BLE001 - any failure means not a store
                raise StoreOpenError(f"not a Zarr store ({type(e).__name__})") from None
            self.attrs = dict(self.group.attrs)
        else:
            from zarr.codecs import ZstdCodec
            self.group = zarr.open_group(path, mode="w", zarr_format=3)
            self.codec = ZstdCodec(level=clevel)

    def array(self, name):
        return self.group[name]

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

    def __init__(self, path, mode="r", clevel=1):
        import h5py
        import hdf5plugin          # registers the Zstd filter
        if mode == "r":
            try:
                self.file = h5py.File(path, "r")
            except OSError:
                raise StoreOpenError("not an HDF5 store") from None
            self.attrs = {k: json.loads(v) for k, v in self.file.attrs.items()}
        else:
            self.file = h5py.File(path, "w")
            self.comp = hdf5plugin.Zstd(clevel=clevel)
        self.path = path

    def array(self, name):
        return self.file[name]

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
