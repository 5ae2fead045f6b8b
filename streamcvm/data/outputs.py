"""Where commands write: checked before any work, never over a user's data.

Every command that writes (``ingest``, ``train``, ``predict``, ``features``;
the Python ``save_model`` and ``transform_store``) asks :func:`check_output`
first, before it reads a row:

- an output never is, contains, or lies inside one of the command's inputs,
  whatever ``--overwrite`` says;
- an existing path of the command's own kind (a model folder for ``train``,
  a prediction store for ``predict``, a feature store for ``features``) is
  replaced; any other existing regular file or streamcvm output needs
  ``overwrite``; a folder of anything else, a symbolic link or a special
  file (a device, a pipe) is never replaced;
- a text output may be ``-`` (standard output) or a special file such as
  ``/dev/stdout`` or a named pipe: it is then written straight into, never
  renamed over;
- the folder the output goes in exists and is writable;
- an output is a local path, except a model folder (``url_ok``), which
  may go to an fsspec URL (the command line refuses ``memory://``: it
  lives in the command's own process and is gone when it exits).

The answer, a :class:`Target`, travels to the writer: its ``replace`` tells
:func:`streamcvm.data.atomic.publish` what it may replace when the output is
complete (whatever is there with ``overwrite``; else exactly what was
seen here, or nothing), so two runs writing one path never replace each
other's output in silence.

A refusal is an :class:`OutputError` with a one-line message.
"""
import json
import os
import stat
from typing import NamedTuple

STDOUT = "-"


class Target(NamedTuple):
    """What :func:`check_output` found at an output path."""
    path: str
    mode: str           # "stdout", "special" (write into it), "replace" or "new"
    replace: object     # for streamcvm.data.atomic.publish: True (anything: overwrite),
    #                     False (nothing) or the identity of what was there


class OutputError(Exception):
    """An output path a command refuses: ``str(err)`` is ``path: reason``, one line."""

    def __init__(self, path, reason):
        self.path, self.reason = os.fspath(path), reason
        super().__init__(f"{self.path}: {reason}")


def _real(path):
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _within(inner, outer):
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def streamcvm_kind(path):
    """What streamcvm output ``path`` holds: "model", "predictions" (a store
    written by ``predict``), "features" (one written by ``features``),
    "store", "checkpoints", or None."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "model.json")):
            try:
                with open(os.path.join(path, "model.json")) as f:
                    if "streamcvm_model_format" in json.load(f):
                        return "model"
            except (OSError, ValueError):
                return None
            return None
        from .snapshots import is_checkpoint_dir
        if is_checkpoint_dir(path):
            return "checkpoints"
    if os.path.isdir(path) or (os.path.isfile(path) and path.lower().endswith((".h5", ".hdf5"))):
        from .store import DiskStore, StoreError
        try:
            s = DiskStore(path)
        except (StoreError, OSError, ValueError, KeyError):
            return None
        kind = "predictions" if s.attrs.get("predictions") else \
            "features" if s.attrs.get("features") else "store"
        s.close()
        return kind
    return None


def check_output(path, *, what, own_kind=None, inputs=(), overwrite=False, stream=False,
                 url_ok=False):
    """Check ``path`` as the destination of ``what`` (a noun for messages:
    "model folder", "prediction file", ...) before any work is done.

    ``own_kind``: the :func:`streamcvm_kind` this command writes, replaced
    without ``overwrite``. ``inputs``: paths the command reads. ``stream``:
    the output is text that may go to ``-`` or a special file. ``url_ok``:
    the writer can upload to an fsspec URL (model folders).

    Returns a :class:`Target` whose ``mode`` is "stdout", "special" (write
    into it, no rename), "replace" (an existing path to be replaced when the
    new output is complete) or "new".
    """
    path = os.fspath(path)
    mode = _check_output(path, what, own_kind, inputs, overwrite, stream, url_ok)
    if overwrite or mode in ("stdout", "special") or "://" in path:
        replace = True if overwrite or mode != "new" else False
    else:
        from .atomic import identity
        replace = identity(path) if mode == "replace" else False
    return Target(path, mode, replace)


def _check_output(path, what, own_kind, inputs, overwrite, stream, url_ok):
    if stream and path == STDOUT:
        return "stdout"
    if "://" in path:
        if not url_ok:
            raise OutputError(path, f"a {what} is written to a local path, not a URL "
                                    f"(write it locally, then copy it)")
        return _check_model_url(path, what, overwrite)
    out = _real(path)
    for src in inputs:
        if src is None or "://" in os.fspath(src):
            continue
        s = _real(src)
        if out == s:
            raise OutputError(path, f"is the input {src}; write the {what} elsewhere")
        if _within(s, out):
            raise OutputError(path, f"contains the input {src}; write the {what} elsewhere")
        if _within(out, s):
            raise OutputError(path, f"is inside the input {src}; write the {what} elsewhere")
    if os.path.lexists(path):
        if os.path.islink(path):
            try:
                st = os.stat(path)
            except OSError:
                st = None
            if stream and st is not None and not stat.S_ISDIR(st.st_mode) and (
                    not stat.S_ISREG(st.st_mode) or _real(path).startswith("/proc/")
                    or os.path.abspath(path).startswith(("/dev/", "/proc/"))):
                return "special"    # /dev/stdout and its like: write through the link
            raise OutputError(path, f"is a symbolic link; give the path it points to "
                              f"({os.path.realpath(path)})")
        st = os.stat(path)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            if stream:
                return "special"
            raise OutputError(path, f"is not a regular file or folder; the {what} needs one")
        kind = streamcvm_kind(path)
        if own_kind is not None and kind == own_kind:
            return "replace"
        if stat.S_ISDIR(st.st_mode) and kind is None and os.listdir(path):
            raise OutputError(path, "is a folder of other files, not a streamcvm output; "
                                    "it is never replaced (choose another path)")
        if not overwrite and not (stat.S_ISDIR(st.st_mode) and not os.listdir(path)):
            held = f"a streamcvm {kind}" if kind else "a file"
            raise OutputError(path, f"already exists (pass --overwrite to replace it): "
                                    f"{held}, not a {what}")
        return "replace"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OutputError(path, f"the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(path, f"cannot write in the folder {parent} (permission denied)")
    return "new"


def _check_model_url(url, what, overwrite):
    """A model folder at an fsspec URL: a model there is replaced, anything
    else only with ``overwrite``."""
    import fsspec
    fs, root = fsspec.core.url_to_fs(url)
    if not fs.exists(root):
        return "new"
    if fs.isfile(root.rstrip("/") + "/model.json") or overwrite:
        return "replace"
    raise OutputError(url, f"already exists (pass --overwrite to replace it): not a {what}")
