"""Where numba caches streamcvm's compiled kernels, decided when the first
module of compiled kernels is imported (the solvers, ingest's parsers,
generated text), not by ``import streamcvm``, which changes nothing on disk
or in the environment.

numba caches next to the sources, else in ~/.cache/numba, as it chooses;
when neither is writable (a shared install, a container without a home) it
would refuse to define the kernels at all, so they go to a folder of this
user's under the temporary directory instead (:func:`ensure`), and the
command line says so in one line.
"""
import os as _os

moved = None        # the folder chosen (NUMBA_CACHE_DIR), when ensure() had to move it
_done = False


def _writable(folder):
    """Whether files can be created in ``folder`` (made if need be), as
    numba's cache locators test it."""
    import tempfile
    try:
        _os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def ensure():
    """Choose the cache folder once (see the module's docstring); returns
    the folder it moved the cache to, or None. NUMBA_CACHE_DIR, when set, is
    left alone."""
    global moved, _done
    if not _done:
        _done = True
        moved = _numba_cache()
    return moved


def _numba_cache():
    """Where numba caches the compiled kernels (``@njit(cache=True)``): next
    to the sources, else in ~/.cache/numba, as numba chooses; when neither
    is writable (a shared install, a container without a home), numba would
    refuse to define the kernels at all, so they go to a folder of this
    user's under the temporary directory instead. Returns that folder (the
    command line says so in one line), or None. NUMBA_CACHE_DIR, when set,
    is left alone."""
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return None
    here = _os.path.dirname(_os.path.abspath(__file__))     # the package folder
    home = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"),
                                                             ".cache")
    if _writable(_os.path.join(here, "__pycache__")) or \
            _writable(_os.path.join(home, "numba")):
        return None
    import stat
    import tempfile
    folder = _os.path.join(tempfile.gettempdir(), f"streamcvm-numba-cache-{_os.getuid()}")
    try:
        _os.makedirs(folder, mode=0o700, exist_ok=True)
        st = _os.lstat(folder)
        # numba's cache index is a pickle: only a folder of this user's, closed to others
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != _os.getuid() or st.st_mode & 0o022:
            raise OSError("not this user's own folder")
    except OSError:
        folder = tempfile.mkdtemp(prefix="streamcvm-numba-cache-")
    _os.environ["NUMBA_CACHE_DIR"] = folder
    import sys
    if "numba" in sys.modules:          # imported before us: its config is read already
        sys.modules["numba"].config.CACHE_DIR = folder
    return folder
