"""Stores: one interface over on-disk stores (Zarr, HDF5) and in-memory arrays.

A store is a sequence of row chunks. ``chunk(i)`` returns a :class:`Chunk`
``(X, y, qid, weight)`` with ``X`` a float32 ndarray or a scipy CSR matrix;
nothing ever reads more than one chunk at a time unless asked to. The same
interface wraps numpy/scipy arrays (:class:`ArrayStore`) without copying, so
every solver runs on either. The on-disk layout is docs/store-format.md.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

import numpy as np
import xxhash

from .formats import MANIFEST_KEY

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TypeAlias

    import dask.array
    from numpy.typing import ArrayLike
    from scipy.sparse import csr_matrix, spmatrix
    from typing_extensions import TypeIs

FORMAT_VERSION = 1
MAX_CLASSES = 1000          # more distinct labels than this: a regression target
TARGET_CHUNK_BYTES = 4 << 20


def default_chunk_rows(n_features, sparse=False, nnz_per_row=None):
    """Rows per chunk so that a chunk of X is about 4 MB uncompressed."""
    if sparse:
        per_row = 8.0 * max(nnz_per_row or 1.0, 1.0) + 8
    else:
        per_row = 4.0 * max(n_features, 1)
    rows = int(TARGET_CHUNK_BYTES // per_row)
    return int(min(max(rows, 16), 1 << 22))


class ContentHash:
    """The store fingerprint: XXH3-128 over per-array XXH3-128 digests.

    Each array is hashed as one stream of its row-major bytes, in row order,
    so the fingerprint depends on the contents only, not on the chunking or
    on the format of the files the store was made from.
    """

    ORDER = ("X", "indptr", "indices", "data", "y", "qid", "weight")

    def __init__(self):
        self._h = {}

    def update(self, name, arr):
        h = self._h.get(name)
        if h is None:
            h = self._h[name] = xxhash.xxh3_128()
        h.update(np.ascontiguousarray(arr).data)

    def hexdigest(self):
        top = xxhash.xxh3_128()
        for name in self.ORDER:
            if name in self._h:
                top.update(name.encode() + b":" + self._h[name].digest())
        return top.hexdigest()


ATTRS_DIGEST = "attrs_xxh3_128"
CHECKSUMS_KEY = "chunk_checksums"       # the checksum the writer put on every chunk
CHUNK_CHECKSUM = {"zarr": "crc32c", "hdf5": "fletcher32"}
ARRAYS_KEY = "arrays"       # each array's dtype, shape, chunks (and Zarr codecs) as written
DTYPES = {"X": "float32", "indptr": "int64", "indices": "int32", "data": "float32",
          "y": "float64", "qid": "int64", "weight": "float32", "class_counts": "int64"}
"""The dtype of every array streamcvm writes (docs/store-format.md): another
one is metadata edited to read the bytes as something else, in any store."""


def attrs_digest(attrs):
    """XXH3-128 of a store's attributes as canonical JSON (sorted keys, no
    blanks), without the digest itself: the chunks carry checksums, and so
    do the attributes that say how to read them (n, d, classes ...)."""
    import json
    body = {k: v for k, v in attrs.items() if k != ATTRS_DIGEST}
    return xxhash.xxh3_128(json.dumps(body, sort_keys=True, separators=(",", ":"))
                           .encode()).hexdigest()


class StoreError(Exception):
    """A path that is not a readable streamcvm store, or a store whose data
    cannot be trusted (one-line message)."""


def _why(e):
    """One short line for an exception raised while reading a chunk."""
    from .formats import MissingChunk
    if isinstance(e, MissingChunk):
        return str(e)
    text = " ".join(str(e).split())
    if "checksum" in text.lower():
        return "checksum mismatch"
    if "filter returned failure" in text:       # HDF5: fletcher32 or Zstd refused the chunk
        return "checksum mismatch or undecodable chunk"
    return f"{type(e).__name__}: {text[:160]}" if text else type(e).__name__


def count_classes(classes, ys):
    """Per-chunk class counts ``[chunks, len(classes)]`` (read-only) of the
    label arrays ``ys`` (one per chunk; NaN labels, no class, not counted)."""
    rows = []
    for y in ys:
        y = np.asarray(y, np.float64)
        y = y[~np.isnan(y)]
        rows.append(np.bincount(np.searchsorted(classes, y), minlength=len(classes)))
    out = np.array(rows, np.int64).reshape(len(rows), len(classes))
    out.flags.writeable = False
    return out


class Chunk(NamedTuple):
    """One chunk of a store's rows, as :meth:`DiskStore.chunk` and iteration return it.

    Parameters
    ----------
    X : ndarray of shape (m, d), float32, or scipy.sparse.csr_matrix
        The rows' features.
    y : ndarray of shape (m,), float64, or None
        Their labels or targets (text labels as the codes the store holds:
        :meth:`DiskStore.decode_labels`); None where the rows have none.
    qid : ndarray of shape (m,), int64, or None, default None
        Their query ids (ranking), or None.
    weight : ndarray of shape (m,), float32, or None, default None
        Their sample weights, or None.
    """

    X: np.ndarray | csr_matrix     # ndarray [m, d] float32 or scipy.sparse.csr_matrix
    y: Optional[np.ndarray]        # float64 [m]
    qid: Optional[np.ndarray] = None     # int64 [m]
    weight: Optional[np.ndarray] = None  # float32 [m]


def csr_view(data, indices, indptr, shape):
    """A scipy CSR matrix over the given arrays, without copying them.

    (scipy's constructor prunes, i.e. copies, views of larger arrays.)
    """
    import scipy.sparse as sp
    M = sp.csr_matrix(shape, dtype=data.dtype)
    M.data, M.indices, M.indptr = data, indices, indptr
    return M


class BaseStore:
    """What every store offers. Subclasses set the attributes in __init__
    and implement ``_read(a, b)``."""

    n: int
    d: int
    sparse: bool
    chunk_rows: int
    has_qid: bool = False
    has_weight: bool = False
    label_names: list[str] | None       # (set by each subclass)
    feature_names: list[str] | None
    _classes: np.ndarray | None

    if TYPE_CHECKING:
        def _read(self, a: int, b: int) -> Chunk: ...

    @property
    def n_chunks(self) -> int:
        """The number of chunks (the last one may be shorter)."""
        return -(-self.n // self.chunk_rows) if self.n else 0

    def __len__(self) -> int:
        return self.n

    def chunk_bounds(self, i: int) -> tuple[int, int]:
        """Give the rows of one chunk.

        Parameters
        ----------
        i : int
            The chunk's index, 0 to ``n_chunks - 1``.

        Returns
        -------
        a, b : int
            Its first row and one past its last row.

        Raises
        ------
        IndexError
            ``i`` is out of range.
        """
        if not 0 <= i < self.n_chunks:
            raise IndexError(f"chunk {i} out of range (store has {self.n_chunks})")
        a = i * self.chunk_rows
        return a, min(a + self.chunk_rows, self.n)

    def chunk(self, i: int) -> Chunk:
        """Read one chunk.

        Parameters
        ----------
        i : int
            The chunk's index, 0 to ``n_chunks - 1``.

        Returns
        -------
        Chunk
            Its rows (``X``, ``y``, ``qid``, ``weight``).
        """
        return self._read(*self.chunk_bounds(i))

    def rows(self, a: int, b: int) -> Chunk:
        """Read a range of rows, which may span chunks (memory is O(b - a)).

        Parameters
        ----------
        a : int
            The first row (clipped to 0).
        b : int
            One past the last row (clipped to ``n``).

        Returns
        -------
        Chunk
            Rows ``a:b``.
        """
        a, b = max(0, a), min(b, self.n)
        return self._read(a, b)

    def __iter__(self) -> Iterator[Chunk]:
        for i in range(self.n_chunks):
            yield self.chunk(i)

    # label helpers -----------------------------------------------------
    @property
    def classes(self) -> np.ndarray | None:
        """Sorted distinct values of ``y`` (None for a regression target)."""
        return self._classes

    def decode_labels(self, y: np.ndarray) -> np.ndarray:
        """Give the original labels of stored ``y`` values.

        Parameters
        ----------
        y : ndarray
            Values of the store's ``y``.

        Returns
        -------
        ndarray
            The text labels they stand for, where the store was ingested
            from text labels (``label_names``); else ``y`` itself.
        """
        if self.label_names is None:
            return y
        names = np.asarray(self.label_names, dtype=object)
        return names[np.asarray(y, dtype=np.int64)]

    def to_dask(self) -> tuple[dask.array.Array, dask.array.Array]:
        """Give the store's rows as dask arrays, one dask chunk per store chunk.

        Returns
        -------
        X : dask.array.Array of shape (n, d), float32
            The features (sparse stores: blocks of CSR matrices).
        y : dask.array.Array of shape (n,), float64
            The labels or targets.
        """
        import dask
        import dask.array as da
        import scipy.sparse as sp
        xs, ys = [], []
        for i in range(self.n_chunks):
            a, b = self.chunk_bounds(i)
            c = dask.delayed(self.chunk, pure=True)(i)
            meta = sp.csr_matrix((0, self.d), dtype=np.float32) if self.sparse else \
                np.empty((0, self.d), np.float32)
            xs.append(da.from_delayed(c.X, shape=(b - a, self.d), dtype=np.float32, meta=meta))
            ys.append(da.from_delayed(c.y, shape=(b - a,), dtype=np.float64))
        if not xs:
            return da.zeros((0, self.d), np.float32), da.zeros((0,), np.float64)
        return da.concatenate(xs), da.concatenate(ys)

    def __repr__(self) -> str:
        kind = "sparse" if self.sparse else "dense"
        return (f"<{type(self).__name__} n={self.n:,} d={self.d:,} {kind} "
                f"chunks={self.n_chunks} x {self.chunk_rows:,} rows>")


# ---------------------------------------------------------------------------

NOT_A_STORE = ("{}: {}, not a streamcvm store: make one with `streamcvm ingest` (text files) "
               "or streamcvm.as_store(X, y) (arrays)")


class DiskStore(BaseStore):
    """A store on disk, read a chunk at a time.

    A Zarr v3 group (a directory, or any fsspec URL zarr reads: ``file://``,
    ``s3://``, ``gs://`` ... with their fsspec package installed) or an HDF5
    file (a local path), as ``streamcvm ingest`` writes them
    (docs/store-format.md). It pickles as its path, so a dask worker reopens
    it where it runs. Iterating over it yields its chunks (:class:`Chunk`),
    in order.

    Every read is checked: a chunk that fails its checksum, is missing or
    cannot be decompressed, and a NaN or inf in X, is a one-line
    :class:`StoreError` naming the store and the rows, never data (a store
    ingested with ``--allow-nan`` says so in the message: training and
    prediction need finite features). ``check_finite=False`` returns X as
    stored instead, NaN and inf included, for code that handles them itself.

    Opening checks the arrays' metadata against what streamcvm wrote: the
    dtypes it always writes, and, in stores that record them (attribute
    ``arrays``, under the attributes' checksum), each array's shape, chunks
    and codecs. Stores with a chunk manifest (``chunk_manifest``) check each
    chunk's stored bytes against the digest written for its place, so a
    chunk copied over another is damage too (Zarr: every chunk fetched;
    HDF5: each chunk once per open store). Stores written without them are
    read with the checks they have.

    Parameters
    ----------
    path : str or os.PathLike
        The store: a Zarr directory, an fsspec URL of one, or an HDF5 file
        (``.h5``, ``.hdf5``; local paths only).
    check_finite : bool, default True
        Refuse NaN and inf in X (a :class:`StoreError`); False returns X as
        stored.

    Attributes
    ----------
    path : str
        ``path`` as given.
    backend : {"zarr", "hdf5"}
        The format.
    n, d : int
        Rows and features.
    sparse : bool
        Whether X is stored as CSR (indptr, indices, data).
    nnz : int
        The stored values of a sparse X.
    chunk_rows : int
        Rows per chunk (the last chunk may hold fewer).
    has_qid, has_weight : bool
        Whether the rows have query ids and sample weights.
    fingerprint : str or None
        The XXH3-128 digest of the contents, whatever the chunking.
    label_names : list of str or None
        The text labels ``y``'s integer codes stand for, or None.
    feature_names : list of str or None
        The column names of a CSV with a header, or None.
    attrs : dict
        The store's attributes (docs/store-format.md, "Attributes").

    Raises
    ------
    StoreError
        On opening: not a readable streamcvm store, a newer format, or
        damage to the attributes or the arrays' layout.
    """

    def __init__(self, path: str | os.PathLike[str], check_finite: bool = True) -> None:
        self.path = os.fspath(path)
        self.check_finite = bool(check_finite)
        self._open()

    def _open(self):
        path = self.path                    # as given: what messages name
        src = _file_url_path(path)          # file://: a local path (percent-decoded)
        src = path if src is None else src
        url = "://" in src                  # an fsspec URL: s3://, gs://, ...
        if url and src.rsplit(".", 1)[-1] in ("h5", "hdf5"):
            raise StoreError(f"{path}: HDF5 stores are opened by local path only "
                             "(use a Zarr store for object storage)")
        if not url and not os.path.exists(src):
            raise StoreError(f"{path}: no such store")
        from .formats import FORMATS, StoreOpenError
        self.backend = "zarr" if url or os.path.isdir(src) else "hdf5"
        try:
            self._src = FORMATS[self.backend](src, "r")
        except StoreOpenError as e:     # a Zarr array, a folder of other files: say so
            meta = [n for n in ("zarr.json", ".zgroup", ".zarray") if os.path.exists(f"{src}/{n}")]
            what = "a Zarr array" if "ContainsArrayError" in str(e) or ".zarray" in meta else None \
                if meta or url or self.backend != "zarr" else "a folder without Zarr metadata"
            raise StoreError(NOT_A_STORE.format(path, what) if what else f"{path}: {e}") from None
        attrs = self._src.attrs
        self._arr, self._has = self._src.array, self._src.has
        self.checksums = self._src.checksums
        ver = attrs.get("streamcvm_format")
        if ver is None:
            raise StoreError(NOT_A_STORE.format(path, {"zarr": "a Zarr group"}.get(
                self.backend, "an HDF5 file")))
        if not isinstance(ver, int) or ver > FORMAT_VERSION:
            raise StoreError(f"{path}: store format {ver!r} is newer than this streamcvm "
                             f"reads ({FORMAT_VERSION}); upgrade streamcvm")
        self.attrs = attrs
        want = attrs.get(ATTRS_DIGEST)
        self.attrs_checked = want is not None
        if want is not None and want != attrs_digest(attrs):
            raise StoreError(f"{path}: damaged store (its attributes do not match their "
                             f"checksum); re-ingest it or restore it from a copy")
        said = attrs.get(CHECKSUMS_KEY)
        if said is not None and said != self.checksums:
            raise StoreError(f"{path}: damaged store (written with {said} chunk checksums, "
                             f"its arrays now have {self.checksums or 'none'}); re-ingest it "
                             f"or restore it from a copy")
        try:
            self._read_attrs(attrs)
            self._check_layout(attrs.get(ARRAYS_KEY))
            self._open_arrays()
            manifest = attrs.get(MANIFEST_KEY)
            if manifest is not None:        # every chunk read is checked against it
                self._src.expect(manifest)
        except (KeyError, TypeError, ValueError) as e:
            why = f"no {e.args[0]}" if isinstance(e, KeyError) else str(e)
            raise StoreError(f"{path}: damaged store ({why}); re-ingest it or restore it "
                             f"from a copy") from None
        # data ingested with --allow-nan may hold NaN / inf; otherwise they
        # are damage (a store of an older streamcvm without checksums)
        self.allow_nan = bool((attrs.get("ingest_options") or {}).get("allow_nan"))

    def _read_attrs(self, attrs):
        def count(key, lo=0):
            v = attrs[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"attribute {key} is {v!r}")
            return v
        self.n, self.d, self.nnz = count("n"), count("d"), count("nnz")
        self.chunk_rows = count("chunk_rows", 1)
        self.sparse = bool(attrs["sparse"])
        self.has_qid = bool(attrs.get("has_qid"))
        self.has_weight = bool(attrs.get("has_weight"))
        self.fingerprint = attrs.get("fingerprint")
        self.label_names = attrs.get("label_names")
        self.feature_names = attrs.get("feature_names")
        c = attrs.get("classes")
        self._classes = None if c is None else np.asarray(c, dtype=np.float64)

    def _check_layout(self, written):
        """Each array's dtype is the one streamcvm writes (any store), and, in
        a store that recorded them (``written``: :data:`ARRAYS_KEY`), its
        dtype, shape, chunks and codecs are those written."""
        for name, dtype in DTYPES.items():
            if self._has(name):
                got = np.dtype(self._arr(name).dtype)
                if got != np.dtype(dtype) or not got.isnative:
                    raise ValueError(f"array {name} has dtype {got.str}, streamcvm writes "
                                     f"{dtype}")
        if written is None:
            return
        if not isinstance(written, dict):
            raise TypeError(f"attribute {ARRAYS_KEY} is {type(written).__name__}")
        for name, want in written.items():
            if not self._has(name):
                raise KeyError(f"array {name}")
            got = self._src.layout(name)
            for field in sorted(set(want) | set(got)):
                if want.get(field) != got.get(field):
                    raise ValueError(f"array {name} has {field} {got.get(field)}, it was "
                                     f"written with {want.get(field)}")

    def _open_arrays(self):
        """The arrays, each checked against the attributes (shape, row chunking)."""
        n, cr = self.n, self.chunk_rows

        def get(name, shape, rows_chunked=True):
            if not self._has(name):
                raise KeyError(f"array {name}")
            a = self._arr(name)
            if tuple(a.shape) != shape:
                raise ValueError(f"array {name} has shape {tuple(a.shape)}, the store's "
                                 f"attributes say {shape}")
            if rows_chunked and a.chunks[0] != cr:
                raise ValueError(f"array {name} has chunks of {a.chunks[0]} rows, the "
                                 f"store's attributes say {cr}")
            return a
        if self.sparse:
            self._indptr = get("indptr", (n + 1,))
            self._indices = get("indices", (self.nnz,), False)
            self._data = get("data", (self.nnz,), False)
        else:
            self._X = get("X", (n, self.d))
        self._y = get("y", (n,))
        self._qid = get("qid", (n,)) if self.has_qid else None
        self._w = get("weight", (n,)) if self.has_weight else None

    def __getstate__(self):
        return {"path": self.path, "check_finite": self.check_finite}

    def __setstate__(self, state):
        self.path = state["path"]
        self.check_finite = state.get("check_finite", True)
        self._open()

    def close(self) -> None:
        """Close the underlying files (an HDF5 file handle; Zarr holds none open)."""
        if getattr(self, "_src", None) is not None:
            self._src.close()

    @property
    def class_counts(self) -> np.ndarray | None:
        """Per-chunk class counts ``[n_chunks, len(classes)]`` (read-only; None without classes)."""
        if self._classes is None or not self._has("class_counts"):
            return None
        if getattr(self, "_counts", None) is None:      # read once, not once per machine
            arr = self._arr("class_counts")
            counts = self._get("class_counts", arr, 0, arr.shape[0])
            if counts.shape != (self.n_chunks, len(self._classes)) or (counts < 0).any() \
                    or counts.sum() > self.n:
                raise StoreError(f"{self.path}: damaged store: class_counts has shape "
                                 f"{counts.shape} or counts that do not fit {self.n:,} rows "
                                 f"in {self.n_chunks} chunks of {len(self._classes)} classes")
            self._counts = counts
            self._counts.flags.writeable = False
        return self._counts

    def _get(self, name, arr, a, b):
        """``arr[a:b]`` as an ndarray; a chunk that cannot be read (checksum
        mismatch, missing or truncated file, decompression error) is a
        StoreError naming the store, the array and the rows. Zarr ranges
        are read a row chunk at a time: the message names the chunk, and a
        failing chunk leaves no concurrent sibling reads behind."""
        step = int(arr.chunks[0]) if self.backend == "zarr" else 0
        if not step or b - a <= 0 or a // step == (b - 1) // step:
            return self._get_chunk(name, arr, a, b)
        out, s = None, a
        while s < b:
            e = min(b, (s // step + 1) * step)
            part = self._get_chunk(name, arr, s, e)
            if out is None:
                out = np.empty((b - a,) + part.shape[1:], part.dtype)
            out[s - a:e - a] = part
            s = e
        return out

    def _get_chunk(self, name, arr, a, b):
        try:
            self._src.verify(name, arr, a, b)
            v = np.asarray(arr[a:b])
            self._src.missing(name)
            return v
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the codec or file layer raises
            unit = "entries" if name in ("indices", "data") else "rows"
            raise StoreError(f"{self.path}: damaged store: {name} {unit} {a:,}-{b - 1:,} "
                             f"cannot be read ({_why(e)}); re-ingest it or restore it from "
                             f"a copy") from None

    def _read(self, a, b):
        y = self._get("y", self._y, a, b)
        if self.sparse:
            import scipy.sparse as sp
            ip = self._get("indptr", self._indptr, a, b + 1)
            s, e = int(ip[0]), int(ip[-1])
            if not (0 <= s <= e <= self.nnz and np.all(np.diff(ip) >= 0)):
                raise StoreError(f"{self.path}: damaged store: indptr of rows {a:,}-{b - 1:,} "
                                 f"is not increasing within the {self.nnz:,} entries")
            data = self._get("data", self._data, s, e)
            indices = self._get("indices", self._indices, s, e)
            self._check_finite(data, a, (ip - s, indices))
            X = sp.csr_matrix((data, indices, ip - s), shape=(b - a, self.d))
        else:
            X = self._get("X", self._X, a, b)
            self._check_finite(X, a)
        qid = self._get("qid", self._qid, a, b) if self._qid is not None else None
        w = self._get("weight", self._w, a, b) if self._w is not None else None
        return Chunk(X, y, qid, w)

    def _check_finite(self, values, a, csr=None):
        """X holds finite numbers only: NaN or inf is refused in one line
        naming the row (``values``: dense rows from row ``a``, or a CSR
        block's entries with ``csr`` = (its local indptr, its indices))."""
        if not self.check_finite:
            return
        ok = np.isfinite(values)
        if ok.all():
            return
        k = int(np.flatnonzero(~ok.ravel())[0])
        if csr is None:
            row, col, v = a + k // max(self.d, 1), k % max(self.d, 1), values.ravel()[k]
        else:
            indptr, indices = csr
            row = a + int(np.searchsorted(indptr, k, side="right")) - 1
            col, v = int(indices[k]), values[k]
        where = f"{self.path}: row {row:,} (0-based), feature {col:,} is {v}"
        if self.allow_nan:
            raise StoreError(f"{where}: the store was ingested with --allow-nan, and "
                             f"training and prediction need finite features (drop or fill "
                             f"such rows, then ingest again)")
        raise StoreError(f"{where}, in a store ingested without --allow-nan: the store is "
                         f"damaged; re-ingest it or restore it from a copy")

    def sizes(self) -> tuple[int, int]:
        """Give the size of the store's arrays, stored and uncompressed.

        Returns
        -------
        stored : int
            Bytes on disk (a Zarr folder's files, or the HDF5 file).
        raw : int
            Bytes of the arrays uncompressed (X or its CSR arrays, y, qid,
            weight).
        """
        names = ["indptr", "indices", "data"] if self.sparse else ["X"]
        names += ["y"] + (["qid"] if self.has_qid else []) + (["weight"] if self.has_weight else [])
        raw = 0
        for nm in names:
            a = self._arr(nm)
            raw += int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize
        if self.backend == "zarr":
            stored = 0
            for dp, _, fn in os.walk(self.path):
                stored += sum(os.path.getsize(os.path.join(dp, f)) for f in fn)
        else:
            stored = os.path.getsize(self.path)
        return stored, raw


def _file_url_path(path):
    """The local path of a ``file://`` URL, percent-decoded
    (``file:///tmp/my%20store.zarr`` is ``/tmp/my store.zarr``); None for
    anything else."""
    if not path.lower().startswith("file://"):
        return None
    from urllib.parse import unquote, urlsplit
    parts = urlsplit(path)
    if parts.netloc not in ("", "localhost"):
        return None                     # file://host/...: left to fsspec
    local = unquote(parts.path)
    if not os.path.exists(local) and os.path.exists(parts.path):
        return parts.path               # a name with a literal %XX in it
    return local


def is_dask_array(X: object) -> TypeIs[dask.array.Array]:
    return type(X).__module__.startswith("dask.") and hasattr(X, "chunks") and \
        hasattr(X, "compute")


def is_store_like(X: object) -> TypeIs[BaseStore | str | os.PathLike[Any]]:
    """A store, a path or a URL (what :func:`open_store` opens)."""
    return isinstance(X, (BaseStore, str, os.PathLike))


def open_store(path: StoreLike, check_finite: bool = True) -> BaseStore:
    """Open a store written by ``streamcvm ingest``.

    Parameters
    ----------
    path : str or os.PathLike or store
        A Zarr directory or fsspec URL, or an HDF5 file. A store already
        opened is returned as it is.
    check_finite : bool, default True
        Refuse NaN and inf in X when a chunk is read; False returns them as
        stored (:class:`DiskStore`).

    Returns
    -------
    DiskStore
        The opened store (or ``path`` itself, when it is a store).

    Raises
    ------
    StoreError
        ``path`` is not a readable streamcvm store (one line).
    """
    if isinstance(path, BaseStore):
        return path
    return DiskStore(path, check_finite=check_finite)


def as_store(X: DataLike, y: ArrayLike | dask.array.Array | None = None, **kw: Any
             ) -> BaseStore:
    """Give a store for data: a path is opened, arrays are wrapped.

    Float32 arrays (dense, or CSR) are wrapped as they are, without a copy;
    any other dtype is converted to float32 once, which copies it (the
    kernels compute in float32).

    Parameters
    ----------
    X : array_like, sparse matrix, dask array, store, str or os.PathLike
        The rows: arrays (:class:`ArrayStore`), a dask array
        (:class:`~streamcvm.data.arrays.DaskStore`), a store (returned as it
        is) or the path or URL of one (:class:`DiskStore`).
    y : array_like or dask array, optional
        The labels or targets of arrays (ignored for a store or a path).
    **kw
        The other arguments of :class:`ArrayStore` (``qid``, ``weight``,
        ``chunk_rows``) or of ``DaskStore`` (``chunk_rows``).

    Returns
    -------
    store
        A :class:`DiskStore`, :class:`ArrayStore` or ``DaskStore``.
    """
    if isinstance(X, BaseStore):
        return X
    if isinstance(X, (str, os.PathLike)):
        return DiskStore(X)
    if is_dask_array(X):
        return DaskStore(X, y, **kw)
    return ArrayStore(X, y, **kw)


# the in-memory stores (their own module), here too: ``from streamcvm.data.store
# import ArrayStore`` is how the rest of the package and users name them
from .arrays import ArrayStore, DaskStore  # noqa: E402

if TYPE_CHECKING:
    # what the functions and estimators take: a store or where one is ...
    StoreLike: TypeAlias = BaseStore | str | os.PathLike[str]
    # ... or the rows themselves (arrays, a sparse matrix, a dask array)
    DataLike: TypeAlias = ArrayLike | spmatrix | dask.array.Array | StoreLike
