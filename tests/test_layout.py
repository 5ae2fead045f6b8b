"""The layout's rules (docs/architecture.md), checked on the source tree: no
import cycle between folders (each stage imports only the stages before it),
one installed top-level package (no user-importable ``ingest``), and every
package folder installed. Module and folder sizes are not rules: a folder
that grows gets subfolders."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "streamcvm")
INGEST = os.path.join(ROOT, "ingest")       # installed as streamcvm.ingest
# the stages in the order they may import each other: a folder imports only
# folders before it (and itself); "streamcvm" is the package's own __init__
ORDER = ["data", "solvers", "problems", "predict", "estimators", "ingest", "apps", "cli"]

pytestmark = pytest.mark.skipif(not os.path.isdir(INGEST),
                                reason="needs the source tree (ingest/ beside streamcvm/)")


def _modules():
    """(folder, path) of every module of the library and of ingest/."""
    out = []
    for base, name in ((PACKAGE, None), (INGEST, "ingest")):
        for d, dirs, files in os.walk(base):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(d, base)
                    folder = name or ("streamcvm" if rel == "." else rel.split(os.sep)[0])
                    out.append((folder, os.path.join(d, f)))
    return out


def _module_name(path):
    if path.startswith(INGEST):
        parts = ["streamcvm", "ingest"] + os.path.relpath(path, INGEST)[:-3].split(os.sep)
    else:
        parts = ["streamcvm"] + os.path.relpath(path, PACKAGE)[:-3].split(os.sep)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _folder_of(module):
    """The folder (stage) a dotted streamcvm module lives in."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] not in ORDER:
        return "streamcvm"
    return parts[1]


def imports(path):
    """Every streamcvm module ``path`` imports (at the top or in functions)."""
    mod = _module_name(path)
    pkg = mod if path.endswith("__init__.py") else mod[:-1]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "streamcvm":
                out.add(target)     # and each name, which may be a module of it
                out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "streamcvm")
    return out


def _packages():
    """Every package folder of the library, dotted (``streamcvm.solvers.exact``)."""
    out = set()
    for base, top in ((PACKAGE, ["streamcvm"]), (INGEST, ["streamcvm", "ingest"])):
        for d, dirs, files in os.walk(base):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(d, base)
                out.add(".".join(top + ([] if rel == "." else rel.split(os.sep))))
    return out


def test_every_package_folder_is_installed_and_nothing_else():
    """pyproject's package list is exactly the library's package folders: a
    new subfolder cannot be left out of the wheel, and the only top-level
    package is ``streamcvm`` (the repository's ``ingest/`` is installed as
    ``streamcvm.ingest``, so a user's own ``ingest.py`` shadows nothing)."""
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    assert listed == _packages(), (sorted(listed - _packages()), sorted(_packages() - listed))
    assert {p.split(".")[0] for p in listed} == {"streamcvm"}


def test_each_stage_imports_only_the_stages_before_it():
    """No import cycle between folders: data -> solvers -> problems -> predict
    -> estimators -> ingest -> apps -> cli, each importing only earlier ones
    (the package's own ``streamcvm/__init__.py`` and ``__main__`` excepted:
    they re-export)."""
    rank = {f: i for i, f in enumerate(ORDER)}
    wrong = []
    for folder, path in _modules():
        if folder == "streamcvm":
            continue
        for target in imports(path):
            other = _folder_of(target)
            if other == "streamcvm":
                # streamcvm.options: the settings, below every stage (it imports
                # nothing of the library: test_options_are_below_every_stage)
                if target not in ("streamcvm", "streamcvm.__version__") and \
                        not target.startswith("streamcvm._numba_cache") and \
                        not target.startswith("streamcvm.options"):
                    wrong.append(f"{os.path.relpath(path, ROOT)} imports {target}")
                continue
            if rank[other] > rank[folder]:
                wrong.append(f"{os.path.relpath(path, ROOT)} ({folder}) imports {target} "
                             f"({other})")
    assert not wrong, "\n".join(sorted(wrong))


def test_options_are_below_every_stage():
    """streamcvm/options.py, which every stage reads its settings from,
    imports nothing of the library (no cycle through it)."""
    assert not imports(os.path.join(PACKAGE, "options.py"))


def test_the_import_graph_sees_the_imports():
    """The check above reads real imports: ingest's use of the store writer and
    the estimators' use of the solvers are found (a parser that saw nothing
    would pass the rules trivially)."""
    got = {t for _, p in _modules() if p.startswith(INGEST) for t in imports(p)}
    assert "streamcvm.data.writer" in got
    est = {t for f, p in _modules() if f == "estimators" for t in imports(p)}
    assert any(t.startswith("streamcvm.solvers") for t in est)


def _imported_after(module, code, timeout=300):
    """Whether ``module`` is imported once ``code`` has run in a fresh interpreter."""
    import subprocess
    import sys
    probe = f"{code}\nimport sys; print({module!r} in sys.modules)"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr
    return {"True": True, "False": False}[r.stdout.strip().splitlines()[-1]]


def test_a_command_starts_without_scikit_learn():
    """What every command imports before its work (the parser, the errors it
    reports, model.py's) leaves scikit-learn out: the estimators are imported
    only when a command needs them (streamcvm/estimators/__init__.py is lazy),
    so ``streamcvm info`` or ``ingest`` do not pay for it."""
    assert not _imported_after("sklearn", "import streamcvm.cli, streamcvm.estimators.model, "
                               "streamcvm.ingest.errors, streamcvm.data.snapshots; "
                               "streamcvm.cli.build_parser()")


def test_a_fit_in_memory_of_one_chunk_does_not_import_dask():
    """A store of one chunk (a small fit from arrays) runs its one pass task
    in place: dask's first import (0.24 s, a quarter of SVR()'s whole fit on
    cpu_act) is left to stores of several chunks."""
    assert not _imported_after("dask", "import numpy as np; from streamcvm import CVMRegressor; "
                               "X = np.random.default_rng(0).random((600, 5)).astype(np.float32); "
                               "CVMRegressor().fit(X, X.sum(axis=1))")


# -- settings live in one place (streamcvm/options.py) -------------------------
# The folders whose code trains and predicts: a numeric module- or class-level
# constant there would be a setting no user could change. What is left of them is
# listed here with the reason it is not a setting.
SETTINGS_FOLDERS = ("solvers", "problems", "estimators", "predict", "apps")
NOT_SETTINGS = {
    # the compiled loops' shape (streamcvm.options.COMPILED): vector lanes, tiles,
    # batches; every value they compute is the same whatever they are
    "solvers/exact/reduce.py": {"BLOCK", "LANES", "F0", "F1", "TINY"},
    "solvers/exact/rowcache.py": {"RBF_BATCH", "CACHE_MIN_ROWS"},   # (min: a step's rows i, j)
    "solvers/kernels/rows.py": {"RBF_TILE"},
    "solvers/kernels/expf.py": {"_LOG2E", "_LN2_HI", "_LN2_LO", "_ROUND", "EXP_MIN", "_ONE",
                                "_ZERO"},                   # Cephes' expf constants
    "solvers/kernels/compiled.py": {"RBF_CODE", "L1_CODE", "L2_CODE"},   # kernel codes
    # what a kernel is (its declarations), not how a solver runs
    "solvers/kernels/base.py": {"Kernel.code", "Kernel.distance_power"},
    "solvers/kernels/distance.py": {"_FromDifferences.distance_power"},
    "solvers/kernels/dot.py": {"Poly.value_limit", "NPoly.value_limit"},    # float limits
    "predict/metrics.py": {"AUCSketch.BITS"},       # the AUC sketch's bins (its resolution)
    "predict/probability.py": {"HOLDOUT_SEED"},     # a seed offset, not a size
    "problems/progressive.py": {"ErrorVerdict.classes"},    # the labels -1, +1
    "problems/regression.py": {"TINY_SD"},          # a constant target (float64 rounding)
    "estimators/feature_range.py": {"ZERO_EXPONENT", "ONE_EXPONENT"},   # float32's range
    "estimators/model.py": {"FORMAT_VERSION"},
}


def _numeric(node):
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_numeric(e) for e in node.elts)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.Call):      # np.float32(1.0), ...
        return bool(node.args) and all(_numeric(a) for a in node.args)
    return False


def numeric_constants(path):
    """``NAME`` and ``Class.NAME`` of the numeric constants a module sets at
    its top level or in a class body (not a dataclass's annotated fields)."""
    out = set()
    for node in ast.parse(open(path).read()).body:
        bodies = [(None, [node])] if not isinstance(node, ast.ClassDef) else \
            [(node.name, node.body)]
        for cls, nodes in bodies:
            for n in nodes:
                if cls is not None and isinstance(n, ast.AnnAssign):
                    continue        # a record's field and its default (dataclasses)
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None \
                        and _numeric(n.value):
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                            if isinstance(e, ast.Name):
                                out.add(e.id if cls is None else f"{cls}.{e.id}")
    return out


def test_no_setting_outside_the_options():
    """No module of the folders that train and predict sets a numeric
    constant (a setting no user could change: it belongs in
    streamcvm/options.py) but those listed with a reason."""
    found = {}
    for folder, path in _modules():
        if folder not in SETTINGS_FOLDERS:
            continue
        rel = os.path.relpath(path, PACKAGE)
        extra = numeric_constants(path) - NOT_SETTINGS.get(rel, set())
        if extra:
            found[rel] = sorted(extra)
    assert not found, found


def test_the_settings_check_sees_constants(tmp_path):
    """The check above finds what it looks for."""
    p = tmp_path / "m.py"
    p.write_text("A = 3\nB, C = 1.0, (1, 2)\nD = 1 << 20\nE = 'text'\n"
                 "class K:\n    F = 2.5\n    G = None\n    H: int = 0\n")
    assert numeric_constants(str(p)) == {"A", "B", "C", "D", "K.F"}


def test_no_test_monkeypatches_a_module_constant():
    """Tests set options (streamcvm.options), never a module's constants."""
    import re
    pat = re.compile(r"""(?:monkeypatch|m)\.setattr\([^,]+,\s*["']([A-Z][A-Z0-9_]+)["']""")
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for f in sorted(os.listdir(here)):
        if f.endswith(".py"):
            for k, line in enumerate(open(os.path.join(here, f)), 1):
                m = pat.search(line)
                if m and f != "test_layout.py":
                    found.append(f"{f}:{k}: {m.group(1)}")
    assert not found, found
