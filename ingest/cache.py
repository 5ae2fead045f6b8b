"""Text files where a store is expected: ``streamcvm train a9a``, ``streamcvm
predict a9a.t MODEL``, as LIBSVM's tools read them.

:func:`text_format` tells a recognisable text file (svmlight/LIBSVM or
delimited numbers; plain, gzip or bz2) from anything else, by its first lines.
:func:`cached_store` ingests such a file once, with :func:`ingest`'s defaults,
into a store in the cache folder (:func:`cache_folder`), named after the
file and keyed by its real path, size and modification time: a second run
on the unchanged file opens that store instead of parsing the text again,
and a changed file gets a new one. The store is built under a temporary name
and renamed when complete, as every ingest, so a killed run leaves none.
Stores in the cache may be deleted at any time.
"""
import os
import re

import xxhash

from .errors import IngestError
from .sniff import _first_lines, sniff_delimiter, sniff_format
from .sources import Source

ENV = "STREAMCVM_CACHE_DIR"     # where the cache folder is, when set
KEY_VERSION = 1                 # part of the key: bump when ingest's defaults change


def cache_folder():
    """The folder of stores ingested on the fly: ``$STREAMCVM_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/streamcvm/ingested`` (``~/.cache/...``)."""
    if os.environ.get(ENV):
        return os.path.abspath(os.environ[ENV])
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "streamcvm", "ingested")


def text_format(path):
    """"svmlight" or "csv" for a text file of data (plain, .gz or .bz2; by
    its first lines), None for anything else (a binary file, an empty one,
    lines of words)."""
    try:
        src = Source(path)
        if b"\x00" in src.head(lines=0):     # binary: not read further
            return None
        head = src.head()
    except (IngestError, OSError):
        return None
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:     # not just a character cut at the end of the block
            return None
    lines = _first_lines(head, 6)[:5] if b"\n" in head else []
    if not lines:
        return None
    if sniff_format(head) == "svmlight":
        return "svmlight"
    delim = sniff_delimiter(path, head)
    split = (lambda ln: ln.split()) if delim == " " else (lambda ln: ln.split(delim.encode()))
    widths = {len(split(ln)) for ln in lines[1:] or lines}
    last = split(lines[-1])
    if len(widths) != 1 or min(widths) < 2 or not any(_is_number(t) for t in last):
        return None
    return "csv"


def _is_number(tok):
    try:
        float(tok)
        return True
    except ValueError:
        return False


def cache_path(path):
    """Where :func:`cached_store` keeps the store of the text file ``path``."""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = xxhash.xxh3_128(f"{KEY_VERSION}\0{real}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(real)) or "input"
    return os.path.join(cache_folder(), f"{name}-{key.hexdigest()[:16]}.zarr")


def cached_store(path, progress=False):
    """(store path, summary) for the text file ``path``: its store in the
    cache, ingested now (summary: :func:`ingest`'s) or earlier (summary
    None). A file that ingest refuses is its :class:`IngestError`, with a
    hint at ``streamcvm ingest`` and its options."""
    from streamcvm.data.store import DiskStore, StoreError

    from .pipeline import ingest
    out = cache_path(path)
    if os.path.isdir(out):
        try:
            DiskStore(out).close()
            return out, None
        except StoreError:
            pass                # damaged: ingested again below
    try:
        os.makedirs(cache_folder(), exist_ok=True)
    except OSError as e:
        raise IngestError(cache_folder(), f"cannot create the cache folder for stores "
                                          f"ingested on the fly ({e.strerror}); set {ENV} "
                                          f"to another folder, or ingest the file with "
                                          f"`streamcvm ingest {path} -o STORE.zarr`") from None
    try:
        return out, ingest([path], out, overwrite=os.path.isdir(out), progress=progress)
    except FileExistsError as e:    # OutputRaced: another run published the same store first
        kept = getattr(e, "kept", None)
        if kept and os.path.isdir(kept):
            import shutil
            shutil.rmtree(kept, ignore_errors=True)     # ours, the same rows
        if os.path.isdir(out):
            return out, None
        raise
    except IngestError as e:
        if os.path.isdir(out) and "already exists" in str(e):   # another run made it meanwhile
            return out, None
        raise IngestError(e.path, f"{e.message} (a text file is read with `streamcvm ingest`'s "
                                  f"defaults; for other options ingest it yourself: "
                                  f"`streamcvm ingest {path} -o STORE.zarr ...`)",
                          e.line) from None
