"""Surface reconstruction benchmark: streamcvm's surface against
Open3D's screened Poisson, on the same points, in one run.

    python tools/bench_surface.py                                # default shapes, all methods
    python tools/bench_surface.py --shapes torus-200k --methods poisson-9
    python tools/bench_surface.py --shapes noisy-1 noisy-capsule-1 --methods streamcvm poisson-9
    python tools/bench_surface.py --shapes torus-2m torus-20m --threads 8 --out /tmp/meshes

Shapes: ``bunny`` (the Stanford scan, scored against its points);
``torus-200k|2m|20m`` (N points uniform by area on the torus R=1, r=0.35,
noise 2e-4 box diagonals per axis); ``noisy-0.5|1`` (200,000 points of the
torus with Gaussian noise of 0.5% / 1% of the box diagonal per axis, four
times denser on x > 0 than on x < 0, and three holes: the points within 3%
of the diagonal of three points of the surface removed) and
``noisy-capsule-0.5|1`` (the same on a capsule). All but the bunny are
scored against their analytic surface. Seeds are fixed.

Methods: ``streamcvm`` (``surface.fit`` + ``surface.mesh``, defaults; a mesh
refused as far from the points is measured with ``keep_far=True`` and marked
REFUSED) and ``poisson-8|9|10`` (Open3D: PCA normals of 30 neighbours,
oriented on the tangent plane graph, screened Poisson of that depth, no
density trimming; the normals are in its time).

Each (shape, method) runs in a fresh child process of this script (hidden
``--one SHAPE METHOD``), with OMP / NUMBA / BLAS threads = ``--threads`` for
every method, so seconds (the reconstruction only: not making the points,
not scoring) and peak RSS are its own. Scoring, the same for all: 1,000,000
points sampled uniformly by area on the mesh; Chamfer = mean of (mesh
samples -> points or analytic surface) and (scan points, or 1,000,000
noise-free points of the analytic surface -> mesh samples), in % of the
box diagonal; watertight is trimesh's ``is_watertight``. Prints a markdown
table and the ratios streamcvm / poisson-9 per shape; writes every row to
``--json`` (with the command, commit and date of the run).
"""
import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchlib as B  # noqa: E402  (tools/, the script's folder)

DATA = os.environ.get("STREAMCVM_DATA", os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "shared", "data", "raw"))
BUNNY = os.path.join(DATA, "bunny", "bun_zipper.ply")
R_MAJOR, R_MINOR = 1.0, 0.35        # the torus, about z
HALF, RADIUS = 0.8, 0.4             # the capsule: segment (-HALF..HALF, 0, 0), radius
HOLE = 0.03                         # hole radius, in box diagonals
SAMPLES = 1_000_000                 # points sampled on each mesh / true surface to score
METHODS = ["streamcvm", "poisson-8", "poisson-9", "poisson-10"]
SHAPES = {"bunny": None,
          **{f"torus-{k}": ("torus", n, 2e-4, False)
             for k, n in [("200k", 200_000), ("2m", 2_000_000), ("20m", 20_000_000)]},
          **{f"noisy-{p}": ("torus", 200_000, float(p) / 100, True) for p in ("0.5", "1")},
          **{f"noisy-capsule-{p}": ("capsule", 200_000, float(p) / 100, True)
             for p in ("0.5", "1")}}
DEFAULT_SHAPES = ["bunny", "torus-200k", "noisy-0.5", "noisy-1"]
THREAD_VARS = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def torus_points(n, noise, seed=0):
    """``n`` points uniform by area on the torus (R_MAJOR, R_MINOR) about z,
    plus Gaussian noise of ``noise`` x the box diagonal along each axis."""
    rng = np.random.default_rng(seed)
    out, got = np.empty((n, 3)), 0
    # more than 4M points: made 1M at a time and the noise added in place, so
    # that making them does not set the peak RSS of the run (below 4M, as at
    # first: the same points)
    big = n > 4_000_000
    while got < n:
        u, v = rng.uniform(0, 2 * np.pi, (2, 2 * (min(n - got, 1_000_000) if big else n - got)))
        # area element ~ (R + r cos v): rejection
        v = v[rng.uniform(0, R_MAJOR + R_MINOR, len(v)) < R_MAJOR + R_MINOR * np.cos(v)]
        u = u[:len(v)]
        k = min(len(v), n - got)
        w = R_MAJOR + R_MINOR * np.cos(v[:k])
        out[got:got + k] = np.column_stack([w * np.cos(u[:k]), w * np.sin(u[:k]),
                                            R_MINOR * np.sin(v[:k])])
        got += k
    diag = np.linalg.norm(out.max(0) - out.min(0))
    if not big:
        return out + rng.normal(scale=noise * diag, size=out.shape)
    for a in range(0, n, 1_000_000):
        out[a:a + 1_000_000] += rng.normal(scale=noise * diag, size=out[a:a + 1_000_000].shape)
    return out


def torus_distance(V):
    """Distance of points V to the analytic torus."""
    q = np.hypot(V[:, 0], V[:, 1]) - R_MAJOR
    return np.abs(np.hypot(q, V[:, 2]) - R_MINOR)


def capsule_points(n, seed=0):
    """``n`` points uniform by area on the capsule (HALF, RADIUS) along x."""
    rng = np.random.default_rng(seed)
    side = rng.uniform(size=n) < 2 * HALF / (2 * HALF + 2 * RADIUS)   # areas 4 pi r h : 4 pi r^2
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    d[side, 0] = 0.0                                                  # the cylinder: a ring ...
    d[side] /= np.linalg.norm(d[side], axis=1, keepdims=True)
    x = np.where(side, rng.uniform(-HALF, HALF, n), np.where(d[:, 0] >= 0, HALF, -HALF))
    return RADIUS * d + np.column_stack([x, np.zeros(n), np.zeros(n)])  # ... or a hemisphere


def capsule_distance(V):
    """Distance of points V to the analytic capsule."""
    t = np.clip(V[:, 0], -HALF, HALF)
    return np.abs(np.linalg.norm(V - np.column_stack([t, 0 * t, 0 * t]), axis=1) - RADIUS)


_a = 2 * np.pi / 3
GEOMETRY = {   # noise-free sampler, exact distance, box half-sides, hole centres on the surface
    "torus": (lambda n, seed: torus_points(n, 0.0, seed), torus_distance,
              (R_MAJOR + R_MINOR, R_MAJOR + R_MINOR, R_MINOR),
              [(R_MAJOR + R_MINOR, 0, 0), (R_MAJOR * np.cos(_a), R_MAJOR * np.sin(_a), R_MINOR),
               ((R_MAJOR - R_MINOR) * np.cos(2 * _a), (R_MAJOR - R_MINOR) * np.sin(2 * _a), 0)]),
    "capsule": (capsule_points, capsule_distance, (HALF + RADIUS, RADIUS, RADIUS),
                [(HALF + RADIUS, 0, 0), (0.3, 0, RADIUS), (-0.4, -RADIUS, 0)]),
}


def noisy_points(geometry, n, noise, seed=0):
    """``n`` points of ``geometry`` four times denser on x > 0 than on
    x < 0, without the points within HOLE diagonals of its hole centres,
    plus Gaussian noise of ``noise`` diagonals along each axis."""
    sample, _, half, holes = GEOMETRY[geometry]
    diag, rng, parts, got = 2 * np.linalg.norm(half), np.random.default_rng(seed), [], 0
    while got < n:
        Q = sample(2 * n, seed + 1000 + len(parts))
        keep = (Q[:, 0] > 0) | (rng.uniform(size=len(Q)) < 0.25)
        for c in holes:
            keep &= np.linalg.norm(Q - c, axis=1) > HOLE * diag
        parts.append(Q[keep])
        got += keep.sum()
    P = np.concatenate(parts)[:n]
    return P + rng.normal(scale=noise * diag, size=P.shape)


def load(shape):
    """(points, geometry name or None for a scan) of a shape."""
    if SHAPES[shape] is None:
        from streamcvm.apps.meshio import read_points
        return np.asarray(read_points(BUNNY), np.float64), None
    geometry, n, noise, uneven = SHAPES[shape]
    P = noisy_points(geometry, n, noise) if uneven else torus_points(n, noise)
    return P, geometry


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def need(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        sys.exit(f"bench_surface: {module} is missing: pip install '.[bench]'")


def run_streamcvm(P, threads):
    """(V, F, seconds, notes): fit + mesh; a refused mesh is made again
    with keep_far=True (the refused attempt is not in the seconds)."""
    from streamcvm.apps import surface
    log = lambda s: print(f"  {s} (peak {peak_mib():.0f} MiB)", file=sys.stderr, flush=True)
    t = time.perf_counter()
    model = surface.fit(P, n_jobs=threads, log=log)
    fit_s = time.perf_counter() - t
    info = {"support_vectors": int(model.n_support), "refused": False}
    t = time.perf_counter()
    try:
        V, F = surface.mesh(model, P)
    except surface.FarMeshError as e:
        log(f"mesh refused: {e}")
        info.update(refused=True, refused_why=str(e))
        t = time.perf_counter()
        V, F = surface.mesh(model, P, keep_far=True)
    return V, F, fit_s + time.perf_counter() - t, info


def run_poisson(P, depth):
    """(V, F, seconds, notes): Open3D's normals + screened Poisson."""
    o3d = need("open3d")
    t = time.perf_counter()
    pc = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(P))
    pc.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(30))
    pc.orient_normals_consistent_tangent_plane(30)
    m, _ = o3d.geometry.TriangleMesh.create_from_point_cloud_poisson(pc, depth=depth)
    V, F = np.asarray(m.vertices).copy(), np.asarray(m.triangles).astype(np.int64)
    return V, F, time.perf_counter() - t, {}


def sample_mesh(V, F, n, seed=0):
    """``n`` points uniform by area on the mesh (V, F)."""
    T = V[F]
    area = np.linalg.norm(np.cross(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0]), axis=1)
    rng = np.random.default_rng(seed)
    i = rng.choice(len(F), n, p=area / area.sum())
    s, r = np.sqrt(rng.random(n))[:, None], rng.random(n)[:, None]
    return T[i, 0] * (1 - s) + T[i, 1] * (s * (1 - r)) + T[i, 2] * (s * r)


def score(V, F, P, geometry):
    """(Chamfer, mesh -> points, points -> mesh), % of the box diagonal."""
    from scipy.spatial import cKDTree
    S = sample_mesh(V, F, SAMPLES)
    if geometry is None:                                     # a scan: against its points
        diag = np.linalg.norm(P.max(0) - P.min(0))
        ab = cKDTree(P).query(S, workers=-1)[0].mean()
        ba = cKDTree(S).query(P, workers=-1)[0].mean()
    else:                                                    # the analytic surface
        sample, distance, half, _ = GEOMETRY[geometry]
        diag = 2 * np.linalg.norm(half)
        ab = distance(S).mean()
        ba = cKDTree(S).query(sample(SAMPLES, 1), workers=-1)[0].mean()
    return [float(100 * x / diag) for x in (0.5 * (ab + ba), ab, ba)]


def run_one(shape, method, out):
    """The child: one (shape, method), measured and scored; a dict."""
    trimesh = need("trimesh")
    P, geometry = load(shape)
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count()))
    print(f"{shape} / {method}: {len(P):,} points, {threads} threads", file=sys.stderr, flush=True)
    if method == "streamcvm":
        V, F, seconds, info = run_streamcvm(P, threads)
    else:
        V, F, seconds, info = run_poisson(P, int(method.split("-")[1]))
    rec = dict(shape=shape, method=method, points=len(P), threads=threads, seconds=seconds,
               peak_mib=peak_mib(), vertices=len(V), faces=len(F), **info)
    if out:
        from streamcvm.apps.meshio import write_mesh
        os.makedirs(out, exist_ok=True)
        write_mesh(os.path.join(out, f"{shape}-{method}.ply"), V, F)
    rec["watertight"] = bool(trimesh.Trimesh(V, F, process=False).is_watertight)
    rec["chamfer"], rec["mesh_to_pts"], rec["pts_to_mesh"] = score(V, F, P, geometry)
    return rec


def run_child(shape, method, a):
    """Run one (shape, method) in a fresh process; its dict, or one with 'error'."""
    env = dict(os.environ, **{k: str(a.threads) for k in THREAD_VARS})
    cmd = [sys.executable, os.path.abspath(__file__), "--one", shape, method]
    p = subprocess.run(cmd + (["--out", a.out] if a.out else []), env=env,
                       stdout=subprocess.PIPE, text=True)
    lines = [s for s in p.stdout.splitlines() if s.startswith("{")]
    if p.returncode or not lines:
        return dict(shape=shape, method=method, error=f"child exited {p.returncode}")
    return json.loads(lines[-1])


def row(r):
    if "error" in r:
        return f"| {r['shape']} | {r['method']} | - | - | - | - | - | - | {r['error']} |"
    notes = [f"{r['faces']:,} faces"]
    if "support_vectors" in r:
        notes.append(f"{r['support_vectors']:,} SVs")
    if r.get("refused"):
        notes.append("REFUSED (measured with keep_far)")
    return (f"| {r['shape']} | {r['method']} | {r['points']:,} | {r['seconds']:.1f} | "
            f"{r['peak_mib']:.0f} | {r['chamfer']:.3f} ({r['mesh_to_pts']:.3f} / "
            f"{r['pts_to_mesh']:.3f}) | {'yes' if r['watertight'] else 'NO'} | "
            f"{r['vertices']:,} | {'; '.join(notes)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=DEFAULT_SHAPES)
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="OMP / NUMBA / BLAS threads of every method (default: every core)")
    ap.add_argument("--json", default="/tmp/streamcvm-bench/surface/results.json")
    ap.add_argument("--out", help="write each mesh as DIR/<shape>-<method>.ply")
    ap.add_argument("--one", nargs=2, metavar=("SHAPE", "METHOD"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        try:
            rec = run_one(*a.one, a.out)
        except Exception as e:                    # a failed reconstruction is a row too
            traceback.print_exc()
            rec = dict(shape=a.one[0], method=a.one[1], error=f"{type(e).__name__}: {e}")
        print(json.dumps(rec), flush=True)
        return
    shapes = list(a.shapes)
    if "bunny" in shapes and not os.path.exists(BUNNY):
        print(f"bunny skipped: {BUNNY} not found (set STREAMCVM_DATA)")
        shapes.remove("bunny")
    rows = []
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    bench_run = B.BenchRun(("streamcvm", "open3d", "numpy"))
    for shape in shapes:
        for method in a.methods:
            rows.append(run_child(shape, method, a))
            print(row(rows[-1]), flush=True)
            # after every row: a crash keeps the rest
            B.save_json(a.json, bench_run.record(threads=a.threads, runs=rows))
    print(f"\n{a.threads} threads each; Chamfer in % of the box diagonal\n")
    print("| shape | method | points | seconds | peak MiB | Chamfer % (mesh->pts / pts->mesh) "
          "| watertight | vertices | notes |\n|" + " --- |" * 9)
    print("\n".join(row(r) for r in rows))
    for shape in shapes:
        got = {r["method"]: r for r in rows if r["shape"] == shape and "error" not in r}
        if "streamcvm" in got and "poisson-9" in got:
            ours, ref = got["streamcvm"], got["poisson-9"]
            print(f"{shape}: streamcvm / poisson-9: seconds x{ours['seconds'] / ref['seconds']:.2f}"
                  f", Chamfer x{ours['chamfer'] / ref['chamfer']:.2f}")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
