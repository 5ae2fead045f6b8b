"""Implicit surfaces with multi-scale CVR: normals signed
outwards, a sphere reconstructed closed and round, a resume after a level
that gives the same model, the `streamcvm surface` command and its
refusals. Small point sets and coarse grids; the bunny and the 2M-point
torus are in tools/bench_surface.py."""
import numpy as np
import pytest

from conftest import inproc, one_line_error
from streamcvm.apps import surface
from streamcvm.data.snapshots import CheckpointError
from streamcvm.apps.meshio import read_points
from streamcvm.options import SurfaceOptions

FAST = dict(scales=(0.3, 0.1), max_rows=2000)


def sphere(n, seed=0):
    P = np.random.default_rng(seed).normal(size=(n, 3))
    return P / np.linalg.norm(P, axis=1)[:, None]


def test_normals_point_outwards():
    P = sphere(2000)
    N = surface.normals(P)
    assert (np.einsum("ij,ij->i", N, P) > 0.95).all()


def test_normals_of_a_flat_ellipsoid_point_outwards():
    # 0.2 thick, its rim curved with radius 0.01: the signs must turn round
    # the rim (a far flatter rim, sharper than the points' spacing, defeats
    # the PCA normals there: 0.06 thick gives half the normals wrong)
    P = sphere(6000, seed=2) * [1.0, 1.0, 0.1]
    N = surface.normals(P)
    grad = P / np.array([1.0, 1.0, 0.1]) ** 2          # the outward normal's direction
    grad /= np.linalg.norm(grad, axis=1)[:, None]
    assert (np.einsum("ij,ij->i", N, grad) > 0).mean() > 0.99


def test_sphere_closed_and_round():
    P = sphere(600)
    V, F, model = surface.reconstruct(P, grid=32, **FAST)
    assert surface.is_closed(F)
    r = np.linalg.norm(V, axis=1)
    assert np.abs(r - 1).max() < 0.03, (r.min(), r.max())
    assert len(model.levels) == 2 and model.n_support > 0
    # f falls through 1 across the surface: above inside, below outside
    f = model.f(np.array([[0, 0, 0.9], [0, 0, 1.1]]))
    assert f[0] > 1 > f[1]


def test_resume_after_a_level_gives_the_same_model(tmp_path):
    keep = {"min_gain": -100.0}                         # keep both levels of the sphere
    P = sphere(300, seed=1)
    ref = surface.fit(P, checkpoint_dir=tmp_path / "ck", options=keep, **FAST)
    assert ref.options == SurfaceOptions(min_gain=-100.0, scales=(0.3, 0.1), max_rows=2000)
    snaps = sorted(p for p in (tmp_path / "ck").iterdir() if not p.name.startswith("."))
    assert len(snaps) == 2
    import shutil
    shutil.rmtree(snaps[-1])                # as if killed during the second level
    said, trained = [], []
    fit_local = surface.fit_local

    def counting(*a, **k):
        trained.append(1)
        return fit_local(*a, **k)
    import unittest.mock
    with unittest.mock.patch.object(surface, "fit_local", counting):
        got = surface.fit(P, checkpoint_dir=tmp_path / "ck", resume=True, log=said.append,
                          options=keep, **FAST)
    assert any("1 of 2 levels done" in s for s in said), said
    assert len(trained) == 1            # only the level after the snapshot was trained
    (_, a), (_, b) = ref.levels[0], got.levels[0]
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.sv, b.sv)
    a, b = ref.levels[1], got.levels[1]
    assert a.n_blocks > 1
    for name in ("coef", "sv", "intercept", "node_block", "bptr"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    with pytest.raises(CheckpointError, match="different run"):
        surface.fit(P, checkpoint_dir=tmp_path / "ck", resume=True, scales=(0.3, 0.05),
                    max_rows=2000, options=keep)
    # the options are the run's too: the same scales with other options are refused
    with pytest.raises(CheckpointError, match="different run"):
        surface.fit(P, checkpoint_dir=tmp_path / "ck", resume=True,
                    options=SurfaceOptions(min_gain=-50.0), **FAST)


def test_block_solve_is_the_cvr_solution():
    """A local block's exact SMO solve gives the L2-SVR the CVM trains on
    the same rows, C and mu (the same QP, cvr paper eqs. 7-8)."""
    from streamcvm.apps._surface_kernels import solve_blocks
    from streamcvm.data.store import as_store
    from streamcvm.problems.driver import Solve
    from streamcvm.problems.regression import train_regressor
    from streamcvm.solvers.kernels import Kernel
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.1, 0.1, (150, 3))
    t = np.sin(20 * X[:, 0]) + 0.1 * rng.normal(size=150)
    C, mu, gamma = 5.0 * len(X), 0.3, 50.0
    coef, b = np.zeros(len(X)), np.zeros(1)
    solve_blocks(X, t, np.array([0, len(X)]), gamma, mu * len(X) / C, 2.0 / C, C, 1e-9,
                 1_000_000, coef, b)
    m = train_regressor(as_store(X.astype(np.float32), t), Kernel("rbf", gamma=gamma),
                        Solve(method="cvm", eps=1e-9, seed=0), C=C, mu=mu, centred=False,
                        train_size="all")
    Q = rng.uniform(-0.1, 0.1, (200, 3))
    K = np.exp(-gamma * ((Q[:, None] - X[None]) ** 2).sum(-1))
    ours = K @ coef + b[0]
    ref = m.decision(Kernel("rbf", gamma=gamma), Q.astype(np.float32))
    assert np.abs(ours - ref).max() < 1e-3 * np.abs(ref).max(), np.abs(ours - ref).max()
    assert np.abs(ours - np.sin(20 * Q[:, 0])).mean() < 0.2       # and it fits


def test_local_weights_are_a_partition_of_unity():
    """Blocks of constant value 1 on every node blend to exactly 1."""
    from streamcvm.apps.local import LocalLevel
    nb = np.arange(5 * 5 * 5, dtype=np.int32).reshape(5, 5, 5)
    lev = LocalLevel(0.1, [0.0, 0.0, 0.0], 0.3, nb, np.zeros(126, np.int64),
                     np.zeros((0, 3)), [], np.ones(125))
    Q = np.random.default_rng(1).uniform(0.0, 1.2, (1000, 3))
    np.testing.assert_allclose(lev.add_to(Q, np.zeros(len(Q)), SurfaceOptions()), 1.0,
                               atol=1e-12)


def test_local_level_on_grid_nodes_is_its_value_there():
    """The grid's separable tables give the level's value at grid nodes."""
    model = surface.fit(sphere(3000), scales=(0.3, 0.05, 0.02), max_rows=1000)
    lev = model.levels[-1]
    lo, step = np.array([-0.4, -0.4, -0.4]), 0.004
    idx = np.random.default_rng(1).integers(0, 200, (20000, 3))
    want = lev.add_to(lo + step * idx, np.zeros(len(idx)), model.options)
    assert (want != 0).mean() > 0.3
    got = lev.add_grid(idx, lo, step, np.zeros(len(idx)))
    np.testing.assert_allclose(got, want, atol=1e-6 * np.abs(want).max())


def test_a_level_that_does_not_help_is_dropped():
    """A level that cuts the held-out points' mean |1 - f| by less than
    min_gain (here 90%: the sphere's second level cuts about 60%) is
    dropped, and the finer ones; the ones kept are in params["used"]."""
    said = []
    model = surface.fit(sphere(4000, seed=6), scales=(0.3, 0.1, 0.03), log=said.append,
                        max_rows=1000, options=SurfaceOptions(min_gain=0.9))
    assert any("level sigma 0.1: " in s and "dropped" in s for s in said), said
    assert len(model.levels) == 1 and model.params["used"] == [0.3]


def test_noisy_scan_is_thinned_and_widths_follow_the_noise():
    # 2% noise: 128 neighbours of 20,000 points are too thick; the fit thins
    # the points, finds the noise and keeps no width below 10 noise widths
    P = sphere(20000, seed=4)
    P += np.random.default_rng(5).normal(scale=0.02 * np.linalg.norm(P.max(0) - P.min(0)),
                                         size=P.shape)
    said = []
    model = surface.fit(P, scales=(0.3, 0.05, 0.01), log=said.append, max_rows=1000)
    assert "of 1 point in" in said[0], said[0]
    assert 0.01 < model.params["noise"] < 0.03, model.params
    assert min(model.params["used"]) >= 10 * model.params["noise"] - 1e-12


def test_a_mesh_far_from_the_points_is_refused():
    P = sphere(600)
    V, F, model = surface.reconstruct(P, grid=32, **FAST)
    Z = model.normalise(P)
    step = 0.005           # normalised units: 0.02 diagonals of tolerance
    assert surface.check_near(model, model.normalise(V), Z, step) is None
    far = surface.check_near(model, model.normalise(V * 1.3), Z, step)
    assert far is not None and "far from the points" in far
    # the mesh takes the options the fit used, unless told otherwise
    assert surface.check_near(model, model.normalise(V * 1.3), Z, step,
                              {"far_steps": 1e3}) is None
    model.options = model.options.but(far_steps=0.0, far_noise=0.0)   # every point far
    with pytest.raises(surface.FarMeshError, match="far from the points"):
        surface.mesh(model, P, grid=32)
    V2, _ = surface.mesh(model, P, grid=32, options={"far_steps": 4.0, "far_noise": 4.0})
    np.testing.assert_array_equal(V2, V)


def _xyz(path, P):
    path.write_text("\n".join(" ".join(f"{v:.9g}" for v in row) for row in P) + "\n")
    return path


def test_cli_writes_mesh_and_png(tmp_path):
    pts = _xyz(tmp_path / "s.xyz", sphere(600))
    r = inproc("surface", pts, "-o", tmp_path / "s.ply", "--png", tmp_path / "s.png",
               "--scales", "0.3,0.1", "--grid", "32", "-q")
    assert r.returncode == 0, r.stderr
    V = read_points(tmp_path / "s.ply")
    assert np.abs(np.linalg.norm(V, axis=1) - 1).max() < 0.05
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a second run replaces neither without --overwrite, and the input never
    before = (tmp_path / "s.ply").read_bytes()
    one_line_error(inproc("surface", pts, "-o", tmp_path / "s.ply", "-q"), "surface",
                   "already exists")
    assert (tmp_path / "s.ply").read_bytes() == before
    one_line_error(inproc("surface", pts, "-o", tmp_path / "s.ply", "--png", pts, "-q",
                          "--overwrite"), "surface", "png")
    one_line_error(inproc("surface", tmp_path / "s.ply", "-o", tmp_path / "s.ply", "-q",
                          "--overwrite"), "surface", "is the input")
    assert (tmp_path / "s.ply").read_bytes() == before


def test_cli_refuses_a_far_mesh_unless_kept(tmp_path):
    # every point counts as far (no tolerance): the mesh is refused, exit 1,
    # nothing written; --keep-far writes it
    pts = _xyz(tmp_path / "s.xyz", sphere(600))
    opts = ["--scales", "0.3,0.1", "--grid", "24", "-q", "--option", "far_steps=0",
            "--option", "far_noise=0"]
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", *opts), "surface",
                   "far from the points")
    assert not (tmp_path / "m.ply").exists()
    assert inproc("surface", pts, "-o", tmp_path / "m.ply", "--keep-far", *opts).returncode == 0
    assert (tmp_path / "m.ply").exists()


def test_cli_option_reaches_the_fit(tmp_path, monkeypatch):
    """``--option NAME=VALUE`` (repeatable) gives the fit those
    SurfaceOptions; a bad name or value is one line, exit 1, before any
    work."""
    pts = _xyz(tmp_path / "s.xyz", sphere(200))
    got = []

    def fit(P, **kw):
        got.append(kw)
        raise ValueError("stopped after the options")
    monkeypatch.setattr(surface, "fit", fit)
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "-q", "--option",
                          "min_gain=0.5", "--option", "far-steps=8"), "surface", "stopped")
    assert got[-1]["options"] == SurfaceOptions(min_gain=0.5, far_steps=8.0)
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "-q"), "surface",
                   "stopped")
    assert "options" not in got[-1]         # none given: the library's defaults
    n = len(got)
    for bad, phrase in [("min_gian=0.5", "unknown option 'min_gian' .*min_gain"),
                        ("min_gain=x", "min_gain=x: not a number"),
                        ("min_gain", "expected NAME=VALUE"),
                        ("max_far=2", "max_far=2.0: must be <= 1")]:
        one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "-q", "--option", bad),
                       "surface", phrase)
    assert len(got) == n and not (tmp_path / "m.ply").exists()


def test_cli_refusals(tmp_path):
    pts = _xyz(tmp_path / "s.xyz", sphere(50))
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.stl"), "surface", r"\.ply or \.obj")
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "--scales", "0.2,x"),
                   "surface", "--scales")
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "--scales", "0.2,-1"),
                   "surface", "positive")
    bad = tmp_path / "bad.xyz"
    bad.write_text("0 0 0\n1 1\n")
    one_line_error(inproc("surface", bad, "-o", tmp_path / "m.ply"), "surface", "bad.xyz:2")
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "--resume",
                          tmp_path / "none"), "surface", "no checkpoint")
    assert not (tmp_path / "m.ply").exists() and not (tmp_path / "m.stl").exists()


def test_sigkill_after_a_level_then_resume_writes_the_same_mesh(tmp_path):
    """``streamcvm surface`` killed by SIGKILL after its first level's
    snapshot of two of its three levels writes no mesh; --resume continues
    from there (the residuals recomputed level by level) and writes
    the mesh an uninterrupted run writes, byte for byte."""
    import signal
    import subprocess
    import sys
    import time
    from streamcvm.data import snapshots
    pts = _xyz(tmp_path / "s.xyz", sphere(600, seed=3))
    opts = ["--scales", "0.3,0.1,0.05", "--grid", "24", "-q"]
    assert inproc("surface", pts, "-o", tmp_path / "ref.ply", *opts).returncode == 0
    ck = tmp_path / "ck"

    def levels():
        got = snapshots.latest(str(ck)) if snapshots.is_checkpoint_dir(str(ck)) else None
        return 0 if got is None else len(got[0]["machines_done"])
    p = subprocess.Popen([sys.executable, "-m", "streamcvm.cli", "surface", str(pts), "-o",
                          str(tmp_path / "m.ply"), "--checkpoint-dir", str(ck), *opts])
    t0 = time.time()
    while levels() < 2 and p.poll() is None and time.time() - t0 < 300:
        time.sleep(0.01)
    assert p.poll() is None, "the run ended before the kill"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL            # the kill landed
    assert levels() == 2 and not (tmp_path / "m.ply").exists()
    r = inproc("surface", pts, "-o", tmp_path / "m.ply", "--resume", ck, *opts[:-1])
    assert r.returncode == 0, r.stderr
    assert "levels done" in r.stderr
    # the work continued: one level trained (its log line), not three
    assert r.stderr.count("level sigma") == 1, r.stderr
    assert (tmp_path / "m.ply").read_bytes() == (tmp_path / "ref.ply").read_bytes()
