"""Shared fixtures for the ingest tests.

* ``raw``: the folder of real benchmark files (``../shared/data/raw`` next to
  the checkout, read-only); tests that need it are skipped when it is absent.
* ``run_cli``: run ``python -m streamcvm.cli ...`` in a subprocess.
* ``read_all``: a whole store read back chunk by chunk.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
RAW = REPO.parent / "shared" / "data" / "raw"


def raw_dir():
    """The raw data folder, or None when it is not there."""
    return RAW if RAW.is_dir() else None


@pytest.fixture(scope="session")
def raw():
    """Path of the real data folder; skips the test when it is absent."""
    if raw_dir() is None:
        pytest.skip(f"real data folder {RAW} is absent")
    return RAW


def raw_file(raw, rel):
    """``raw / rel``, skipping the test if that one file is missing."""
    p = raw / rel
    if not p.is_file():
        pytest.skip(f"{rel} is not in {raw}")
    return p


def tested_package():
    """The folder the tests import ``streamcvm`` from: the installed package
    (``pytest``, as CI runs it) or the checkout (``python -m pytest`` from
    its root, or an editable install)."""
    import streamcvm
    return Path(streamcvm.__file__).resolve().parent


def pytest_report_header(config):
    return f"streamcvm under test: {tested_package()}"


def cli_env():
    env = dict(os.environ)
    if tested_package().parent == REPO:
        # the checkout first on the path, whatever the current directory is,
        # so that a subprocess runs the code the tests import
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli_cmd(*args):
    return [sys.executable, "-m", "streamcvm.cli", *map(str, args)]


def run_cli(*args, cwd=None, timeout=300):
    """Run ``streamcvm ARGS...`` in a subprocess; returns the CompletedProcess
    (text stdout/stderr, never raises on a non-zero exit)."""
    return subprocess.run(cli_cmd(*args), cwd=cwd, env=cli_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def cli():
    """The :func:`run_cli` helper as a fixture."""
    return run_cli


def read_all(store):
    """(X, y, qid) of a whole store, concatenating ``store.chunk(i)`` over all
    chunks (X stays sparse for a sparse store)."""
    import scipy.sparse as sp
    chunks = [store.chunk(i) for i in range(store.n_chunks)]
    if store.sparse:
        X = sp.vstack([c.X for c in chunks], format="csr")
    else:
        X = np.concatenate([c.X for c in chunks])
    y = np.concatenate([c.y for c in chunks])
    qid = np.concatenate([c.qid for c in chunks]) if store.has_qid else None
    return X, y, qid


def partials(folder, name="out.zarr"):
    """Leftover ``.NAME.partial-*`` entries of the atomic writer in ``folder``."""
    return sorted(p.name for p in Path(folder).glob(f".{name}.partial-*"))


def inproc(*args):
    """``streamcvm ARGS`` run in this process (no interpreter start-up): the
    same exit status and output as :func:`run_cli` gives, for the checks
    after each item's subprocess test."""
    import contextlib
    import io
    from streamcvm.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:         # what the interpreter does with it
            rc = e.code if isinstance(e.code, int) else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=err)
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def tree(path):
    """Every file under ``path`` with its bytes' digest: unchanged or not."""
    import hashlib
    p = Path(path)
    if p.is_file():
        return {"": hashlib.sha1(p.read_bytes()).hexdigest()}
    return {str(f.relative_to(p)): hashlib.sha1(f.read_bytes()).hexdigest()
            for f in sorted(p.rglob("*")) if f.is_file()}


def one_line_error(r, command, phrase):
    """Exit status 1 and exactly one line ``streamcvm COMMAND: error: ...``."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"streamcvm {command}: error: "), lines[0]
    assert re.search(phrase, lines[0]), (phrase, lines[0])
