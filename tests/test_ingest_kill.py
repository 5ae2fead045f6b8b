"""An ingest killed midway leaves no store; the next run cleans up and succeeds.

The input is a generated Gaussian-mixture svmlight.gz large enough for the
ingest to take a few seconds. The CLI runs in a subprocess; once its
``.out.zarr.partial-<pid>`` folder appears (the store is being written) it
gets SIGKILL, SIGINT (Ctrl-C) or SIGTERM.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import cli_cmd, cli_env, partials, run_cli
from streamcvm import open_store
from streamcvm.data.synthetic import write_text

if sys.platform == "win32":
    pytest.skip("POSIX signals", allow_module_level=True)

N_ROWS = 500_000        # ~60 MB gz, ~3 s to ingest on 2 cores (about 5 s to generate)


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    path = tmp_path_factory.mktemp("kill_src") / "mixture.svm.gz"
    write_text(str(path), "gaussian", N_ROWS, seed=11)
    return path


def _default_sigint():
    # whatever the parent does with Ctrl-C, the child gets Python's default
    # handler (KeyboardInterrupt), as it would in a terminal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_ingest(src, folder):
    return subprocess.Popen(cli_cmd("ingest", src, "-o", "out.zarr", "-q"), cwd=folder,
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)


def wait_for_partial(proc, folder, timeout=60.0):
    """Block until ``.out.zarr.partial-<pid>`` exists (the writer is at work)."""
    partial = folder / f".out.zarr.partial-{proc.pid}"
    t0 = time.monotonic()
    while not partial.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"ingest ended (status {proc.returncode}) before writing: {err}")
        if time.monotonic() - t0 > timeout:
            proc.kill()
            proc.wait()
            pytest.fail(f"{partial.name} did not appear within {timeout} s")
        time.sleep(0.01)
    return partial


def interrupt(proc, sig, delay=0.3):
    """Send ``sig`` a little after the store started; returns (status, stderr)."""
    time.sleep(delay)
    assert proc.poll() is None, "ingest finished before it could be interrupted: " \
                                "make N_ROWS larger"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_sigkill_leaves_no_store_and_rerun_succeeds(big_input, tmp_path):
    proc = start_ingest(big_input, tmp_path)
    partial = wait_for_partial(proc, tmp_path)
    status, _ = interrupt(proc, signal.SIGKILL)
    assert status == -signal.SIGKILL
    assert not (tmp_path / "out.zarr").exists()
    # SIGKILL cannot be cleaned up after: the partial folder is still there ...
    assert partial.exists()

    r = run_cli("ingest", big_input, "-o", "out.zarr", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    store = open_store(tmp_path / "out.zarr")
    assert store.n == N_ROWS
    assert store.d >= 22
    assert store.chunk(store.n_chunks - 1).y.shape == (store.n - store.chunk_bounds(
        store.n_chunks - 1)[0],)
    # ... and the rerun removed the stale partial of the dead process
    assert partials(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_cleans_up(big_input, tmp_path, sig):
    """Ctrl-C (and SIGTERM, which the CLI unwinds the same way): exit 130,
    one line on stderr, no store and no partial folder."""
    proc = start_ingest(big_input, tmp_path)
    wait_for_partial(proc, tmp_path)
    status, err = interrupt(proc, sig)
    assert status != 0
    assert status == 130, (status, err)
    assert "Traceback" not in err
    assert err.count("\n") == 1 and "interrupted" in err, err
    assert not (tmp_path / "out.zarr").exists()
    assert partials(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == []
