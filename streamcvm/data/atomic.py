"""Atomic writes: every file streamcvm writes appears whole or not at all.

One rule for models, checkpoints, stores, prediction files and generated
text: the output is written under a temporary name next to its
destination, every file in it is flushed to disk (fsync), then it is
renamed into place and the folder holding it is fsynced. A crash or a kill
leaves the previous output (or nothing) and, at worst, a temporary name
that the next writer removes. An existing destination is renamed aside
first and removed only once the new one is in place (:func:`publish`); the
caller has already checked that it may be replaced
(:func:`streamcvm.data.outputs.check_output`), and says what it may replace:
anything (``replace=True``), nothing (``False``: the final rename refuses
to replace a path, atomically, where the OS can), or exactly what it saw
when it checked (an :func:`identity`). A path that appeared or changed
while the output was being written is then never replaced: the output is
kept under ``NAME.unpublished-PID`` beside it and :class:`OutputRaced`
says so, in one line.

- :func:`atomic_dir`: a folder (a model, a snapshot, a Zarr store);
- :func:`atomic_file`: one file, through any opener (``open``, ``gzip.open``);
- :func:`temporary_name`: the temporary name, for writers that create the
  output themselves (an HDF5 file) and finish with :func:`finish`.

A disk that fills up while an output is written is :class:`NoSpace`
(errno ENOSPC), one line naming the output, whichever layer saw it
(:func:`write_error`: Python's writes, h5py's, numpy's ``N requested and
M written``); the temporary output is removed. Temporary names whose
process is gone (a kill, a failure that could not clean up) are removed
by the next write of the same output (:func:`remove_stale`), never those
of a live process.

A folder may also go to an fsspec URL (``s3://``, ``gs://``, ``file://``,
``memory://`` ..., with the file system's fsspec package installed), where
object stores have no rename: it is written to a local temporary folder,
then uploaded file by file with its manifest (``last``) uploaded last, so a
reader that finds the manifest finds the files it names (their checksums
catch a half-replaced output).
"""
import contextlib
import ctypes
import errno
import os
import re
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
    writing process is gone (killed, or failed without cleaning up): they
    are never a finished output. A live process's are left alone (a PID
    that is in use again is taken as alive: kept). One exception: a
    previous output set aside by :func:`publish` (``....old``) when nothing
    is at ``path`` any more (the run died between its two renames) is the
    last copy of it and is put back, not deleted."""
    head, tail = os.path.split(os.path.abspath(os.fspath(path)))
    prefix = f".{tail}.{tag}-"
    try:
        names = os.listdir(head)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in sorted(names, key=lambda n: not n.endswith(".old")):
        if not name.startswith(prefix):
            continue
        try:
            pid = int(name[len(prefix):].split(".")[0])
        except ValueError:
            continue
        if pid != os.getpid() and _pid_alive(pid):
            continue
        stale = os.path.join(head, name)
        if name.endswith(".old") and not os.path.lexists(os.path.join(head, tail)):
            try:
                rename_noreplace(stale, os.path.join(head, tail))
                continue
            except OSError:
                pass
        try:
            remove(stale)
        except OSError:
            pass


class NoSpace(OSError):
    """A write that ran out of room (errno ENOSPC, or EDQUOT: over a quota):
    ``filename`` is the output that could not be written, ``str(err)`` one
    line that names it. Nothing of it was left behind."""

    def __init__(self, path, code=errno.ENOSPC, detail=""):
        what = "disk quota exceeded" if code == getattr(errno, "EDQUOT", None) else \
            "no space left on device"
        super().__init__(code, f"{what}{detail}; nothing was written (free some space "
                               f"and run again)", os.fspath(path))

    def __str__(self):
        return f"{self.filename}: {self.strerror}"


class ShortWrite(OSError):
    """A write that stopped short for a reason the OS did not give (numpy's
    ``N requested and M written``) with room left on the disk: an I/O error."""

    def __init__(self, path, detail):
        super().__init__(errno.EIO, f"the write stopped short ({detail}): the disk may be "
                                    f"failing; nothing was written", os.fspath(path))

    def __str__(self):
        return f"{self.filename}: {self.strerror}"


_SHORT = re.compile(r"^(\d+) requested and (\d+) written$")
_NO_ROOM = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def _free_bytes(where):
    """Bytes an unprivileged writer may still use on ``where``'s file system
    (None when it cannot be told)."""
    while where and not os.path.exists(where):
        where = os.path.dirname(where)
    try:
        st = os.statvfs(where or ".")
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def write_error(err, path, tmp=None):
    """The one-line error to raise for ``err``, raised while writing the
    output ``path`` (under the temporary name ``tmp``), or None to let
    ``err`` through as it is.

    A full disk reaches us in three spellings: an OSError with errno ENOSPC
    (Python's own writes: zarr's chunk files, text, JSON) without the path,
    h5py's ``... error message = 'No space left on device' ...``, and
    numpy's ``N requested and M written`` (``np.save`` writes through C's
    fwrite and drops errno): that one is a full disk when the file system
    has less room left than the bytes that were not written, an I/O error
    otherwise. Look before the temporary output is removed (that frees the
    room)."""
    if isinstance(err, (NoSpace, ShortWrite)) or not isinstance(err, OSError):
        return None
    if err.errno in _NO_ROOM:
        return NoSpace(path, err.errno)
    text = str(err)
    if "No space left on device" in text or "errno = 28," in text:
        return NoSpace(path)
    m = _SHORT.match(text.strip())
    if m:
        asked, wrote = int(m.group(1)), int(m.group(2))
        free = _free_bytes(os.fspath(tmp if tmp is not None else path))
        detail = f"{wrote} of {asked} bytes written"
        if free is not None and free < asked - wrote + (1 << 16):
            return NoSpace(path, detail=f" ({detail})")
        return ShortWrite(path, detail)
    return None


@contextlib.contextmanager
def writing(path, tmp=None):
    """Around the writes of the output ``path`` (temporary name ``tmp``):
    a full disk becomes :class:`NoSpace` naming ``path`` (:func:`write_error`);
    the caller still removes the temporary output."""
    try:
        yield
    except OSError as e:
        new = write_error(e, path, tmp)
        if new is None:
            raise
        raise new from e


def translate_write_errors(method):
    """Decorate a writer's method: :func:`writing` its ``self.path`` /
    ``self.tmp``."""
    import functools

    @functools.wraps(method)
    def wrapper(self, *args, **kw):
        with writing(self.path, getattr(self, "tmp", None)):
            return method(self, *args, **kw)
    return wrapper


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


class OutputRaced(FileExistsError):
    """The destination appeared or changed while the output was being
    written (another run?): it was not replaced; ``kept`` is where this
    run's output is. ``str(err)`` is one line."""

    def __init__(self, path, kept):
        self.path, self.kept = os.fspath(path), kept
        where = f"this run's output is kept at {kept}" if kept else \
            "this run's output was not kept"
        super().__init__(f"{self.path}: appeared or changed while this run was writing it "
                         f"(another run?); not replaced: {where} (pass --overwrite to "
                         f"replace it)")


def identity(path):
    """What is at ``path`` now, to tell later whether it is still the same
    thing: (device, inode, modification time in ns) of the path itself, or
    None when there is nothing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


def _load_renameat2():
    try:
        f = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):       # not glibc >= 2.28 / not Linux
        return None
    f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    f.restype = ctypes.c_int
    return f


_RENAMEAT2 = _load_renameat2()
_AT_FDCWD, _RENAME_NOREPLACE = -100, 1


def rename_noreplace(src, dst):
    """Rename ``src`` to ``dst`` unless ``dst`` exists (FileExistsError):
    atomically with Linux's renameat2(RENAME_NOREPLACE); elsewhere a file
    by a hard link (atomic too), a folder by a check just before the rename."""
    if _RENAMEAT2 is not None:
        if _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst),
                      _RENAME_NOREPLACE) == 0:
            return
        e = ctypes.get_errno()
        if e == errno.EEXIST:
            raise FileExistsError(e, os.strerror(e), dst)
        if e not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(e, os.strerror(e), src, None, dst)
        # a file system without the flag: as below
    if not os.path.isdir(src):
        try:
            os.link(src, dst)
        except FileExistsError:
            raise
        except OSError:         # no hard links here (FAT, some network mounts)
            pass
        else:
            os.unlink(src)
            return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
    os.rename(src, dst)


def _keep(tmp, path):
    """Move a finished output that may not be published to
    ``PATH.unpublished-PID`` (a name no cleanup removes); returns it."""
    base = f"{os.fspath(path)}.unpublished-{os.getpid()}"
    for k in range(100):
        kept = base if k == 0 else f"{base}-{k}"
        try:
            rename_noreplace(tmp, kept)
            return kept
        except FileExistsError:
            continue
    return tmp


def publish(tmp, path, replace=True):
    """Rename the finished output ``tmp`` to ``path``; then fsync the folder.

    ``replace``: True: whatever is at ``path`` is replaced (renamed aside
    first, removed once the new one is in place). False: nothing may be
    there. An :func:`identity`: only exactly that may be there (what the
    caller saw when it checked the path), or nothing. Otherwise the output
    is kept beside ``path`` and :class:`OutputRaced` raised."""
    parent = os.path.dirname(os.path.abspath(path))
    trash = f"{tmp}.old"
    if replace is True:
        if os.path.lexists(path):
            os.rename(path, trash)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(trash, path)      # the previous output stays where it was
                raise
            remove(trash)
        else:
            os.rename(tmp, path)
        fsync_dir(parent)
        return
    moved = False
    if replace is not False and replace is not None:
        try:
            os.rename(path, trash)      # aside, then look at what it was
            moved = True
        except FileNotFoundError:
            pass                        # gone meanwhile: nothing to replace
        if moved and identity(trash) != tuple(replace):
            try:                        # another writer's: put it back
                rename_noreplace(trash, path)
            except OSError:
                pass
            raise OutputRaced(path, _keep(tmp, path))
    try:
        rename_noreplace(tmp, path)
    except FileExistsError:
        raise OutputRaced(path, _keep(tmp, path)) from None
    except BaseException:
        if moved:                           # the previous output stays where it was
            rename_noreplace(trash, path)
        raise
    if moved:
        remove(trash)
    fsync_dir(parent)


def finish(tmp, path, replace=True):
    """fsync the finished output ``tmp`` (a file or a folder), then
    :func:`publish` it (``replace``: what may be replaced)."""
    fsync_tree(tmp)
    publish(tmp, path, replace)


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


def _url_exists(url):
    import fsspec
    fs, root = fsspec.core.url_to_fs(url)
    return fs.exists(root)


@contextlib.contextmanager
def atomic_dir(path, tmp=None, last=None, replace=True):
    """Write a folder: yields the temporary folder to write into; on success
    it is fsynced and renamed to ``path``, on an exception removed.
    ``tmp``: its name (default :func:`temporary_name`); ``replace``: what
    may be at ``path`` (:func:`publish`). ``path`` may be an fsspec URL: see
    the module docstring (``last``: the manifest's name); object stores
    have no atomic rename, so ``replace=False`` is a check before the
    upload there."""
    if is_url(path):
        with tempfile.TemporaryDirectory(prefix=".streamcvm-") as local, \
                writing(path, local):
            yield local
            if replace is False and _url_exists(os.fspath(path)):
                raise OutputRaced(path, None)
            upload(local, os.fspath(path), last)
        return
    if tmp is None:
        remove_stale(path)
        tmp = temporary_name(path)
    remove(tmp)
    published = False
    try:
        with writing(path, tmp):
            os.makedirs(tmp)
            yield tmp
            published = True
            finish(tmp, path, replace)
    except BaseException as e:
        if not (published and isinstance(e, OutputRaced)):
            remove(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path, mode="w", opener=open, tmp=None, replace=True, **kw):
    """Write a file: yields ``opener(tmp, mode, **kw)``; on success it is
    closed, fsynced and renamed to ``path`` (``replace``: what may be
    there, :func:`publish`), on an exception removed."""
    if tmp is None:
        remove_stale(path)
        tmp = temporary_name(path)
    f = None
    try:
        with writing(path, tmp):
            f = opener(tmp, mode, **kw)
            yield f
            f.close()       # buffered bytes meet a full disk here, if not before
            finish(tmp, path, replace)
    except BaseException as e:
        if f is not None:
            try:
                f.close()   # again: its flush may fail as the write did
            except Exception:   # noqa: BLE001 - the first error is the one to report
                pass
        if not isinstance(e, OutputRaced):
            remove(tmp)
        raise
