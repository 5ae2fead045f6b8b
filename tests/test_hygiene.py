"""What a user of the package may take for granted: ``import streamcvm``
changes nothing on disk or in the environment, the version is written once,
the licence ships, and the surface command names the extra it needs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, cli_env

PROBE = """
import json, os, sys
before = dict(os.environ)
import streamcvm
import streamcvm._numba_cache as cache      # (importing it decides nothing)
print(json.dumps({"env": {k: v for k, v in os.environ.items() if before.get(k) != v},
                  "gone": sorted(set(before) - set(os.environ)), "decided": cache._done,
                  "numba": "numba" in sys.modules, "package": os.path.dirname(streamcvm.__file__)}))
"""


def _tree(folder):
    """Every path under ``folder`` but the byte-code folders: Python's own
    byte code is not streamcvm's doing (an installed package has it
    already), and numba's cache files there are the other test processes'
    compiling (the probe checks that the import loads no numba at all)."""
    out = set()
    for d, dirs, files in os.walk(folder):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out.update(os.path.join(d, f) for f in dirs + files)
    return out


def test_import_changes_nothing_on_disk_or_in_the_environment(tmp_path):
    """A fresh interpreter, an empty home and temporary folder: importing the
    package sets no variable (NUMBA_CACHE_DIR included), imports no numba
    and makes no file or folder there, in the package or in the working
    folder. (Where numba caches is decided when a compiled kernel is first
    defined: streamcvm._numba_cache.)"""
    import json
    import streamcvm
    home, tmp, cwd = tmp_path / "home", tmp_path / "tmp", tmp_path / "cwd"
    for p in (home, tmp, cwd):
        p.mkdir()
    env = {k: v for k, v in cli_env().items() if not k.startswith("NUMBA_")}
    env.pop("XDG_CACHE_HOME", None)
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    package = os.path.dirname(streamcvm.__file__)
    watched = [home, tmp, cwd, Path(package)]
    before = [_tree(p) for p in watched]
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=cwd, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["package"] == package
    assert got["env"] == {} and got["gone"] == [], got
    assert not got["numba"] and not got["decided"]
    assert [_tree(p) for p in watched] == before


def test_the_cache_folder_is_chosen_when_the_kernels_are_defined(tmp_path):
    """Where neither the package folder nor the home can hold numba's cache,
    the folder is chosen (NUMBA_CACHE_DIR set) when the solvers are
    imported, not before: the decision moved, it did not go."""
    import json
    code = ("import json, os, sys\n"
            "import streamcvm\n"
            "a = os.environ.get('NUMBA_CACHE_DIR')\n"
            "import streamcvm._numba_cache as c\n"
            "c._writable = lambda folder: False        # nothing writable\n"
            "import streamcvm.solvers\n"
            "print(json.dumps([a, os.environ.get('NUMBA_CACHE_DIR'), c.moved]))\n")
    env = {k: v for k, v in cli_env().items() if not k.startswith("NUMBA_")}
    env["TMPDIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    before, after, moved = json.loads(r.stdout.strip().splitlines()[-1])
    assert before is None and after == moved and moved.startswith(str(tmp_path))


def test_the_version_is_written_once():
    """pyproject reads the version from streamcvm/__init__.py."""
    import tomllib

    import streamcvm
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("needs the source tree")
    with open(REPO / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "streamcvm.__version__"
    from importlib.metadata import PackageNotFoundError, version
    try:
        installed = version("streamcvm")
    except PackageNotFoundError:
        pytest.skip("streamcvm is not installed")
    assert installed == streamcvm.__version__


def test_the_licence_is_the_one_pyproject_names():
    import tomllib
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("needs the source tree")
    with open(REPO / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["license"] == "BSD-3-Clause"
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Redistribution and use" in text
    assert project["license-files"] == ["LICENSE"]


@pytest.mark.parametrize("missing", ["skimage", "plyfile"])
def test_the_surface_command_names_the_extra_it_needs(tmp_path, missing):
    """Without the surface extra's packages, ``streamcvm surface`` says in one
    line what to install, before any work; the other commands do not need them."""
    pts = tmp_path / "p.xyz"
    pts.write_text("0 0 0\n1 0 0\n0 1 0\n")
    code = (f"import sys\nsys.modules[{missing!r}] = None     # as if not installed\n"
            "from streamcvm.cli import main\n"
            f"sys.exit(main(['surface', {str(pts)!r}, '-o', {str(tmp_path / 'm.ply')!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("streamcvm surface: error:") and "streamcvm[surface]" in line
    assert not (tmp_path / "m.ply").exists()


# -- the public API's annotations ------------------------------------------------

def _public_callables():
    """``(name, function)`` of every public callable of the API: the functions
    in ``streamcvm.__all__``, the public methods and properties of its classes
    (and of DaskStore) defined in their own module or in the module of their
    base (streamcvm.data.store's BaseStore, streamcvm.estimators.base; not
    those scikit-learn gives), ``__init__`` included;
    :mod:`streamcvm.options`' Options, SurfaceOptions, resolve and default;
    ``streamcvm.surface``'s reconstruct, fit, mesh and SurfaceModel."""
    import inspect
    import types

    import streamcvm
    from streamcvm import options
    from streamcvm.data.store import DaskStore

    out = []

    def members(cls, modules):
        for name in sorted(dir(cls)):
            if name.startswith("_") and name != "__init__":
                continue
            owner = next((k for k in cls.__mro__ if name in vars(k)), None)
            if owner is None or owner.__module__ not in modules:
                continue
            v = vars(owner)[name]
            if isinstance(v, property):
                v = v.fget
            elif isinstance(v, (classmethod, staticmethod)):
                v = v.__func__
            elif inspect.isfunction(getattr(v, "fn", None)):    # sklearn's available_if
                v = v.fn
            if callable(v):
                out.append((f"{cls.__module__}.{cls.__qualname__}.{name}", v))

    def of_class(cls):
        members(cls, {cls.__module__, "streamcvm.data.store", "streamcvm.estimators.base"})

    for name in streamcvm.__all__:
        obj = getattr(streamcvm, name)
        if isinstance(obj, type):
            of_class(obj)
        elif isinstance(obj, types.ModuleType) and name != "ingest":    # surface
            for fn in ("reconstruct", "fit", "mesh"):
                out.append((f"{obj.__name__}.{fn}", getattr(obj, fn)))
            of_class(obj.SurfaceModel)
        elif callable(obj):     # functions, and streamcvm.ingest (a callable module)
            out.append((f"streamcvm.{name}", obj if inspect.isfunction(obj) else
                        obj.pipeline.ingest))
    of_class(DaskStore)
    of_class(options.Options)
    of_class(options.SurfaceOptions)
    out += [("streamcvm.options.resolve", options.resolve),
            ("streamcvm.options.default", options.default)]
    return out


def test_the_public_api_is_annotated():
    """Every parameter (but self / cls) and the return of every public
    callable of the API has an annotation (pyproject's [tool.mypy] checks
    them: the next test)."""
    import inspect
    found = _public_callables()
    names = {name.rsplit(".", 1)[-1] for name, _ in found}
    # the walk reaches what it is meant to (a broken walk would pass on nothing)
    assert {"open_store", "as_store", "ingest", "load_model", "save_model", "reconstruct",
            "fit", "mesh", "predict", "predict_proba", "decision_function", "score_samples",
            "transform", "transform_store", "support_", "dual_coef_", "intercept_",
            "chunk", "rows", "chunk_bounds", "resolve", "default", "but", "__init__"} <= names
    missing = []
    for name, fn in found:
        sig = inspect.signature(fn, eval_str=False)
        for p in sig.parameters.values():
            if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty:
                missing.append(f"{name}({p.name})")
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{name} -> ?")
    assert not missing, f"{len(missing)} missing annotations: {', '.join(missing)}"


def test_the_public_api_type_checks():
    """``python -m mypy`` in the source tree (pyproject's [tool.mypy]: the
    public API's modules, their imports read silently) finds no error."""
    import importlib.util
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("needs mypy (the test extra)")
    if not (REPO / "pyproject.toml").is_file() or not (REPO / "streamcvm" / "__init__.py").is_file():
        pytest.skip("needs the source tree")
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
    assert r.returncode == 0, f"mypy exited {r.returncode}:\n{r.stdout}{r.stderr}"
