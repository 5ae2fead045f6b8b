"""No garbage in silence for surfaces: a clean modest cloud meshes at the
default grid (which follows the points' spacing), a stray far point does
not set the box, a scan far from the origin keeps its precision to the
file written, and a grid that cannot fit in memory is refused at once.

The three reference clouds (a 2,000-point unit sphere; with 1% far
outliers; offset by 1e6) run at default options; the rest use two coarse
widths to stay fast."""
import time

import numpy as np
from plyfile import PlyData, PlyElement

from conftest import inproc, one_line_error
from streamcvm.apps import surface
from streamcvm.apps.meshio import read_points
from streamcvm.options import SurfaceOptions

FAST = dict(scales=(0.3, 0.1), max_rows=2000)
TOL = 0.01                 # vertex distance to the true sphere, in radii


def sphere(n, seed=0):
    P = np.random.default_rng(seed).normal(size=(n, 3))
    return P / np.linalg.norm(P, axis=1)[:, None]


def _xyz(path, P):
    path.write_text("\n".join(" ".join(repr(float(v)) for v in row) for row in P) + "\n")
    return path


def _radius_error(V, center=0.0):
    return float(np.abs(np.linalg.norm(np.asarray(V, np.float64) - center, axis=1) - 1).max())


# -- the reference clouds, at default options -------------------------------

def test_clean_sphere_meshes_at_default_options():
    V, F, _ = surface.reconstruct(sphere(2000))
    assert surface.is_closed(F) and len(V) > 1000
    assert _radius_error(V) < TOL


def test_sphere_with_far_outliers_meshes_at_default_options():
    P = sphere(2000)
    out = np.random.default_rng(9).uniform(-100, 100, (20, 3))      # 1%
    said = []
    V, F, _ = surface.reconstruct(np.vstack([P, out]), log=said.append)
    assert surface.is_closed(F) and len(V) > 1000, len(V)
    assert _radius_error(V) < TOL
    assert any("far outliers dropped" in s for s in said), said


def test_sphere_far_from_the_origin_meshes_at_default_options():
    c = np.array([1e6, -2e6, 5e5])
    V, F, _ = surface.reconstruct(sphere(2000) + c)
    assert np.asarray(V).dtype == np.float64
    assert surface.is_closed(F) and len(V) > 1000
    assert _radius_error(V, c) < TOL


# -- the default grid follows the points -------------------------------------

def test_default_grid_follows_the_spacing(monkeypatch):
    sparse = surface.fit(sphere(600), **FAST)
    lo, hi = surface.mesh_box(sparse, sphere(600))
    n = surface.default_grid(sparse, lo, hi)
    defaults = SurfaceOptions()
    assert defaults.min_grid <= n < defaults.grid
    # and mesh uses it when no grid is given
    used, grid_values = [], surface.grid_values
    monkeypatch.setattr(surface, "grid_values",
                        lambda m, Z, lo, hi, g, **kw: used.append(g) or grid_values(m, Z, lo, hi,
                                                                                     g, **kw))
    surface.mesh(sparse, sphere(600))
    assert used == [n]
    dense = surface.SurfaceModel(np.zeros(3), 1.0, [], {"spacing": 1e-4})
    assert surface.default_grid(dense, lo, hi) == defaults.grid
    assert surface.default_grid(surface.SurfaceModel(np.zeros(3), 1.0, []), lo, hi) == \
        defaults.grid
    # the options' grid bounds, the model's unless told otherwise
    assert surface.default_grid(dense, lo, hi, {"grid": 100}) == 100
    assert surface.default_grid(surface.SurfaceModel(np.zeros(3), 1.0, [], {"spacing": 1e-4},
                                                     {"grid": 64}), lo, hi) == 64


def test_a_grid_finer_than_the_points_still_meshes():
    # vertices between sparse points lie further than two fine steps from
    # every point: nearness is judged against the spacing too
    P = sphere(600)
    model = surface.fit(P, **FAST)
    V, F = surface.mesh(model, P, grid=96)
    assert surface.is_closed(F)
    assert _radius_error(V) < 0.03


def test_cli_ply_with_normals_and_colours_at_the_default_grid(tmp_path):
    P = sphere(1000, seed=3)
    v = np.empty(len(P), dtype=[(c, "f4") for c in ("x", "y", "z", "nx", "ny", "nz")]
                 + [(c, "u1") for c in ("red", "green", "blue")])
    for i, c in enumerate("xyz"):
        v[c], v["n" + c] = P[:, i], P[:, i]
    v["red"], v["green"], v["blue"] = 200, 100, 50
    PlyData([PlyElement.describe(v, "vertex")], text=False).write(str(tmp_path / "p.ply"))
    r = inproc("surface", tmp_path / "p.ply", "-o", tmp_path / "m.ply", "--scales", "0.3,0.1",
               "-q")
    assert r.returncode == 0, r.stderr
    assert _radius_error(read_points(tmp_path / "m.ply")) < 0.03


# -- far outliers ------------------------------------------------------------

def test_inliers_drop_only_far_points():
    P = sphere(4000)
    Q = np.vstack([P, [[100.0, 0, 0], [1.5, 0, 0]]])
    keep = surface.inliers(Q)
    assert keep[:4000].all() and keep[4001] and not keep[4000]
    # a long thin cloud keeps its ends
    L = np.random.default_rng(1).uniform(-1, 1, (5000, 3)) * [50, 1, 1]
    assert surface.inliers(L).all()


def test_one_stray_point_does_not_shrink_the_mesh():
    P = np.vstack([sphere(2000), [[100.0, 0, 0]]])
    said = []
    V, F, model = surface.reconstruct(P, log=said.append, **FAST)
    assert surface.is_closed(F) and len(V) > 1000, len(V)
    assert _radius_error(V) < 0.03
    assert model.scale < 4                  # the sphere's diagonal, not 100
    assert said[0].startswith("1 far outlier dropped"), said


# -- far from the origin -----------------------------------------------------

def test_cli_keeps_the_precision_of_a_scan_far_from_the_origin(tmp_path):
    # a 1 cm sphere at 1e6 m: float32 steps there are 6 cm
    c = np.array([1e6, 2e6, -1e6])
    pts = _xyz(tmp_path / "s.xyz", 0.005 * sphere(600) + c)
    for out in ("m.ply", "m.obj"):
        r = inproc("surface", pts, "-o", tmp_path / out, "--scales", "0.3,0.1", "-q")
        assert r.returncode == 0, r.stderr
    V = read_points(tmp_path / "m.ply")
    assert np.abs(np.linalg.norm(V - c, axis=1) / 0.005 - 1).max() < 0.03
    O = np.array([[float(t) for t in line.split()[1:]] for line in
                  (tmp_path / "m.obj").read_text().splitlines() if line.startswith("v ")])
    np.testing.assert_allclose(O, V, rtol=0, atol=1e-9)


# -- a grid that cannot fit --------------------------------------------------

def test_a_grid_too_large_for_memory_is_refused_at_once(tmp_path):
    pts = _xyz(tmp_path / "s.xyz", sphere(200))
    t = time.perf_counter()
    one_line_error(inproc("surface", pts, "-o", tmp_path / "m.ply", "--grid", "5000", "-q"),
                   "surface", r"--grid 5000: .* GiB")
    assert time.perf_counter() - t < 30
    assert not (tmp_path / "m.ply").exists()


def test_check_grid_names_the_memory():
    lo, hi = np.zeros(3), np.ones(3)
    surface.check_grid(lo, hi, 64, available=2 ** 30)
    import pytest
    with pytest.raises(ValueError, match=r"--grid 1024: a grid of 1024 x 1024 x 1024 nodes "
                                         r"needs about 16\.0 GiB, more than the 1\.0 GiB"):
        surface.check_grid(lo, hi, 1024, available=2 ** 30)
