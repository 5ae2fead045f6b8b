"""Surface reconstruction benchmark (issue 17): the Stanford bunny, and a
sampled noisy torus of N points against its analytic surface.

    python tools/bench_surface.py bunny [--points PATH] [--out DIR]
    python tools/bench_surface.py torus --n 2000000 [--noise 0.0002]

Prints the time of each stage, the support vectors, the symmetric Chamfer
distance (in % of the bounding-box diagonal), whether the mesh is closed and
the process's peak RSS; writes DIR/<name>.ply and DIR/<name>.png.
"""
import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from streamcvm.apps import surface                                   # noqa: E402
from streamcvm.apps.meshio import chamfer, read_points, render_png, write_mesh  # noqa: E402

DATA = os.environ.get("STREAMCVM_DATA", os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "shared", "data", "raw"))
R_MAJOR, R_MINOR = 1.0, 0.35


def torus_points(n, noise, seed=0):
    """``n`` points uniform by area on the torus (R_MAJOR, R_MINOR) about z,
    plus Gaussian noise of ``noise`` x the box diagonal along each axis."""
    rng = np.random.default_rng(seed)
    out, got = np.empty((n, 3)), 0
    while got < n:
        u, v = rng.uniform(0, 2 * np.pi, (2, 2 * (n - got)))
        # area element ~ (R + r cos v): rejection
        v = v[rng.uniform(0, R_MAJOR + R_MINOR, len(v)) < R_MAJOR + R_MINOR * np.cos(v)]
        u = u[:len(v)]
        k = min(len(v), n - got)
        w = R_MAJOR + R_MINOR * np.cos(v[:k])
        out[got:got + k] = np.column_stack([w * np.cos(u[:k]), w * np.sin(u[:k]),
                                            R_MINOR * np.sin(v[:k])])
        got += k
    diag = np.linalg.norm(out.max(0) - out.min(0))
    return out + rng.normal(scale=noise * diag, size=out.shape)


def torus_distance(V):
    """Distance of points V to the analytic torus."""
    q = np.hypot(V[:, 0], V[:, 1]) - R_MAJOR
    return np.abs(np.hypot(q, V[:, 2]) - R_MINOR)


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", choices=["bunny", "torus"])
    ap.add_argument("--points", default=os.path.join(DATA, "bunny", "bun_zipper.ply"))
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--noise", type=float, default=0.0002,
                    help="Gaussian noise per axis, in box diagonals (default 2e-4, a third of "
                         "the spacing of 2M points; at 1e-3 the local PCA normals are noise)")
    ap.add_argument("--grid", type=int, default=surface.GRID)
    ap.add_argument("--out", default="/tmp/streamcvm-bench/surface")
    ap.add_argument("--eps", type=float, default=surface.EPS)
    ap.add_argument("--mu", type=float, default=surface.MU)
    ap.add_argument("--max-rows", type=int, default=surface.MAX_ROWS)
    ap.add_argument("--tag", default="", help="added to the output names")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.perf_counter()
    if a.shape == "bunny":
        P = read_points(a.points)
        name, up = "bunny", "y"
    else:
        P = torus_points(a.n, a.noise)
        name, up = f"torus-{a.n}", "z"
    print(f"{name}: {len(P):,} points, read / made in {time.perf_counter() - t0:.1f} s, "
          f"peak {peak_mib():.0f} MiB", flush=True)
    diag = float(np.linalg.norm(P.max(0) - P.min(0)))
    t = time.perf_counter()
    name += a.tag
    model = surface.fit(P, n_jobs=os.cpu_count(), eps=a.eps, mu=a.mu, max_rows=a.max_rows,
                        log=lambda s: print(f"  {s} (peak {peak_mib():.0f} MiB)", flush=True))
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    V, F = surface.mesh(model, P, grid=a.grid)
    mesh_s = time.perf_counter() - t
    if a.shape == "bunny":
        c, ab, ba = chamfer(V, P)
    else:
        ab = torus_distance(V).mean()                  # mesh -> surface
        S = torus_points(200_000, 0.0, seed=1)          # surface -> mesh
        from scipy.spatial import cKDTree
        ba = cKDTree(V).query(S)[0].mean()
        c = 0.5 * (ab + ba)
    write_mesh(os.path.join(a.out, name + ".ply"), V, F)
    render_png(os.path.join(a.out, name + ".png"), V, F, up=up,
               title=f"{name}: {model.n_support:,} SVs, {fit_s + mesh_s:.0f} s")
    print(f"{name}: fit {fit_s:.1f} s, grid + marching cubes {mesh_s:.1f} s, "
          f"{model.n_support:,} support vectors ({', '.join(f'{len(m.coef):,}' for _, m in model.levels)}), "
          f"{len(V):,} vertices, closed {surface.is_closed(F)}, Chamfer {100 * c / diag:.3f}% "
          f"of the diagonal (mesh->points {100 * ab / diag:.3f}%, points->mesh "
          f"{100 * ba / diag:.3f}%), peak RSS {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
