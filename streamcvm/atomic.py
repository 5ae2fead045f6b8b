"""Atomic writes: every file streamcvm writes appears whole or not at all.

One rule for models, checkpoints, stores, prediction files and generated
text: the output is written under a temporary name next to its
destination, every file in it is flushed to disk (fsync), then it is
renamed into place and the folder holding it is fsynced. A crash or a kill
leaves the previous output (or nothing) and, at worst, a temporary name
that the next writer removes. An existing destination is renamed aside
first and removed only once the new one is in place (:func:`publish`); the
caller has already checked that it may be replaced
(:func:`streamcvm.outputs.check_output`).

- :func:`atomic_dir`: a folder (a model, a snapshot, a Zarr store);
- :func:`atomic_file`: one file, through any opener (``open``, ``gzip.open``);
- :func:`temporary_name`: the temporary name, for writers that create the
  output themselves (an HDF5 file) and finish with :func:`finish`.

A folder may also go to an fsspec URL (``s3://``, ``gs://``, ``file://``,
``memory://`` ..., with the file system's fsspec package installed), where
object stores have no rename: it is written to a local temporary folder,
then uploaded file by file with its manifest (``last``) uploaded last, so a
reader that finds the manifest finds the files it names (their checksums
catch a half-replaced output).
"""
import contextlib
import os
import shutil
import tempfile


def is_url(path):
    """Whether ``path`` is an fsspec URL rather than a local path."""
    return "://" in os.fspath(path)


def temporary_name(path, tag="writing"):
    """``.NAME.TAG-PID`` next to ``path``: hidden, and one per process."""
    head, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(head, f".{name}.{tag}-{os.getpid()}")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(path, tag="writing"):
    """Delete the :func:`temporary_name` leftovers of ``path`` (``tag``) whose
    writing process is gone (killed): they are never a finished output."""
    head, tail = os.path.split(os.path.abspath(os.fspath(path)))
    prefix = f".{tail}.{tag}-"
    try:
        names = os.listdir(head)
    except FileNotFoundError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        try:
            pid = int(name[len(prefix):].split(".")[0])
        except ValueError:
            continue
        if pid != os.getpid() and _pid_alive(pid):
            continue
        remove(os.path.join(head, name))


def remove(path):
    """Remove a file or a folder tree, if there."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def fsync_dir(path):
    """Flush a folder's entries (names created, renamed) to disk; a file
    system that cannot (some network mounts) is left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(path):
    """fsync every file below ``path`` (or the file itself), then the folders."""
    if not os.path.isdir(path):
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        return
    for head, _, files in os.walk(path, topdown=False):
        for name in files:
            with open(os.path.join(head, name), "rb+") as f:
                os.fsync(f.fileno())
        fsync_dir(head)


def publish(tmp, path):
    """Rename the finished output ``tmp`` to ``path``, replacing what is there:
    the old one is renamed aside first and removed only once the new one is
    in place; then the folder is fsynced."""
    if os.path.lexists(path):
        trash = f"{tmp}.old"
        os.rename(path, trash)
        os.rename(tmp, path)
        remove(trash)
    else:
        os.rename(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def finish(tmp, path):
    """fsync the finished output ``tmp`` (a file or a folder), then :func:`publish` it."""
    fsync_tree(tmp)
    publish(tmp, path)


class Place:
    """A folder to list, read and prune: a local path (os) or an fsspec URL.
    ``join(*names)`` gives a child's path or URL."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.url = is_url(self.path)
        if self.url:
            import fsspec
            self.fs, self.root = fsspec.core.url_to_fs(self.path)

    def join(self, *names):
        if self.url:
            return "/".join([self.path.rstrip("/"), *names])
        return os.path.join(self.path, *names)

    def listdir(self):
        """Names in the folder ([] when it does not exist)."""
        if not self.url:
            return os.listdir(self.path) if os.path.isdir(self.path) else []
        if not self.fs.exists(self.root):
            return []
        return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.root, detail=False)]

    def makedirs(self):
        if self.url:
            self.fs.makedirs(self.root, exist_ok=True)
        else:
            os.makedirs(self.path, exist_ok=True)

    def read(self, *names):
        """A file's bytes (OSError when it is not there)."""
        if not self.url:
            with open(self.join(*names), "rb") as f:
                return f.read()
        p = "/".join([self.root.rstrip("/"), *names])
        try:
            return self.fs.cat_file(p)
        except FileNotFoundError as e:
            raise OSError(f"{self.join(*names)}: not found") from e

    def remove(self, name):
        """Remove a child (file or folder tree), if there."""
        if self.url:
            p = self.root.rstrip("/") + "/" + name
            if self.fs.exists(p):
                self.fs.rm(p, recursive=True)
        else:
            remove(self.join(name))


def upload(folder, url, last=None):
    """Copy the files of the local ``folder`` to the fsspec ``url``, ``last``
    (the manifest) after all the others."""
    import fsspec
    fs, root = fsspec.core.url_to_fs(url)
    fs.makedirs(root, exist_ok=True)
    for name in sorted(os.listdir(folder), key=lambda n: (n == last, n)):
        fs.put_file(os.path.join(folder, name), root.rstrip("/") + "/" + name)


@contextlib.contextmanager
def atomic_dir(path, tmp=None, last=None):
    """Write a folder: yields the temporary folder to write into; on success
    it is fsynced and renamed to ``path``, on an exception removed.
    ``tmp``: its name (default :func:`temporary_name`). ``path`` may be an
    fsspec URL: see the module docstring (``last``: the manifest's name)."""
    if is_url(path):
        with tempfile.TemporaryDirectory(prefix=".streamcvm-") as local:
            yield local
            upload(local, os.fspath(path), last)
        return
    tmp = temporary_name(path) if tmp is None else tmp
    remove(tmp)
    os.makedirs(tmp)
    try:
        yield tmp
        finish(tmp, path)
    except BaseException:
        remove(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path, mode="w", opener=open, tmp=None, **kw):
    """Write a file: yields ``opener(tmp, mode, **kw)``; on success it is
    closed, fsynced and renamed to ``path``, on an exception removed."""
    tmp = temporary_name(path) if tmp is None else tmp
    f = opener(tmp, mode, **kw)
    try:
        yield f
        f.close()
        finish(tmp, path)
    except BaseException:
        f.close()
        remove(tmp)
        raise
