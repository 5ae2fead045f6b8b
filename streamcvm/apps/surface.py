"""Implicit surfaces from 3D point sets with Core Vector Regression (cvr
paper, sec. 4.2).

The points are scaled into a box of unit diagonal. An L2-SVR learns f = 1
on every point (the "one-set"; the zero-set has the trivial solution), its
bias penalised and the targets not centred, at three widths, coarse to
fine: each next fit, narrower, fits the residuals of the sum so far. The
surface is the level set f = 1 of the sum, meshed by marching cubes on a
grid evaluated slab by slab on the runner prediction uses.

Two departures from the paper, both measured on the Stanford bunny
(docs/surface.md):

- **Off-surface points.** f = 1 on the points alone leaves f flat across
  the surface, so the level set wanders where the fit is loose (the bunny
  came out lumpy at every width and tube tried). Each point also gives two
  rows at +-``offset`` along its normal (local PCA of its neighbours, signs
  made consistent over a spanning tree of the neighbour graph) with targets
  1 -+ ``step``: f then falls through 1 across the surface. An off-surface
  row with another part of the surface within half its distance (a thin
  part) moves closer, then is dropped.
- **A Gaussian kernel** by default. The paper's Laplacian kernel (here
  ``exponential``, exp(-||x - z|| / sigma)) has a cusp at every support
  vector, and its finest level covers the surface with small blobs;
  ``kernel="exponential"`` keeps it available.

Each level is fitted on at most ``max_rows`` rows drawn at random (all of
them when there are fewer): a width-sigma function is fixed by far fewer
points than a scanner gives, and the fit's eps, relative to a ball whose
radius grows with the rows, would otherwise have to shrink like 1/n: a
target moves a row's distance by 2 t / C against a radius of about
sqrt(2 + mu m / C), so eps must stay below about 2 / (10 m) (1.7e-6 at
MAX_ROWS; at 1e-5 the bunny's fit is garbage). The
residuals, the normals and the grid are computed over every point, in
blocks: time grows linearly with the points, memory by a few arrays of
them.
"""
import time

import numpy as np

SCALES = (0.2, 0.06, 0.02)      # kernel widths sigma, in units of the box diagonal
KERNEL = "rbf"
MU = 0.1                        # CVR's mean slack
C_PER_ROW = 5.0                 # C = 5 x rows fitted, as CVMRegressor's C="auto"
EPS = 1e-6                      # below 2 / (10 x MAX_ROWS): see the module
OFFSET = 0.01                   # off-surface rows at this distance (box diagonals) ...
STEP = 0.5                      # ... with targets 1 -+ STEP (outside / inside)
NEIGHBOURS = 16                 # for the normals
MAX_ROWS = 120_000              # rows a level is fitted on
GRID = 128                      # grid points along the longest side
MIN_POINTS = 2 * NEIGHBOURS     # fewer cannot give a mesh (each normal needs its neighbours)
FLAT = 1e-6                     # spread across / along below this: points on a plane
BLOCK = 65536                   # rows per block of residual / normal work


class SurfaceModel:
    """The fitted multi-scale function: ``levels`` of (Kernel, Machine) on
    points mapped by ``(x - center) / scale``. ``f(X)`` is the sum; the
    surface is f = 1."""

    def __init__(self, center, scale, levels, params=None):
        self.center = np.asarray(center, np.float64)
        self.scale = float(scale)
        self.levels = levels
        self.params = dict(params or {})

    def normalise(self, X):
        return ((np.asarray(X, np.float64) - self.center) / self.scale).astype(np.float32)

    def f(self, X, n_jobs=1):
        """f at points ``X`` (original coordinates)."""
        return self.f_normalised(self.normalise(X), n_jobs=n_jobs)

    def f_normalised(self, Z, n_jobs=1):
        out = np.zeros(len(Z))
        for a in range(0, len(Z), BLOCK):
            z = Z[a:a + BLOCK]
            out[a:a + BLOCK] = sum(m.decision(k, z, n_jobs=n_jobs) for k, m in self.levels)
        return out

    @property
    def n_support(self):
        return sum(len(m.coef) for _, m in self.levels)


def normals(Z, k=NEIGHBOURS):
    """Unit normals of points ``Z`` [n, 3], consistently signed and pointing
    outwards: the smallest principal axis of each point's ``k`` nearest
    neighbours; the signs carried along a minimum spanning tree of the
    neighbour graph whose edge weights prefer neighbours with parallel
    normals *beside* each other (a neighbour across a thin part lies along
    the normal, and copying its sign would turn one side inside out); the
    point furthest along x points along +x."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial import cKDTree
    n = len(Z)
    k = int(min(k, n))
    tree = cKDTree(Z)
    N = np.empty((n, 3))
    kg = min(8, k)              # the orientation graph: fewer edges, same tree
    rows, cols, wts = [], [], []
    for a in range(0, n, BLOCK):
        idx = tree.query(Z[a:a + BLOCK], k, workers=-1)[1]
        nb = Z[idx].astype(np.float64)
        nb -= nb.mean(1, keepdims=True)
        N[a:a + BLOCK] = np.linalg.eigh(np.einsum("nki,nkj->nij", nb, nb))[1][:, :, 0]
        rows.append(np.repeat(np.arange(a, a + len(idx), dtype=np.int32), kg - 1))
        cols.append(idx[:, 1:kg].ravel().astype(np.int32))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    for a in range(0, len(rows), BLOCK * 8):
        r, c = rows[a:a + BLOCK * 8], cols[a:a + BLOCK * 8]
        u = Z[c].astype(np.float64) - Z[r]
        u /= np.maximum(np.linalg.norm(u, axis=1), 1e-30)[:, None]
        wts.append(1.0 - np.abs(np.einsum("ij,ij->i", N[r], N[c]))
                   + np.abs(np.einsum("ij,ij->i", N[r], u)) + 1e-9)
    g = sp.coo_matrix((np.concatenate(wts), (rows, cols)), shape=(n, n)).tocsr()
    del rows, cols, wts
    tree_ = minimum_spanning_tree(g.maximum(g.T))
    del g
    tree_ = (tree_ + tree_.T).tocsr()
    # a forest when the graph is not connected: each component from its own
    # point furthest along x, whose normal points along +x
    from ._surface_kernels import orient
    sign = orient(tree_.indptr, tree_.indices, N, np.argsort(-Z[:, 0], kind="stable"))
    return N * sign[:, None]


def training_rows(Z, N, offset=OFFSET, step=STEP):
    """(rows [m, 3] float32, targets [m]): the points with target 1 and, for
    each, rows at +-``offset`` along its normal with targets 1 -+ ``step``
    (scaled with the distance when a row moves closer: when the surface
    elsewhere, a thin part's other side, lies within half the distance; a
    test on the nearest point being the row's own point instead would fail
    on noisy scans, whose neighbours stick out further than a row's point)."""
    from scipy.spatial import cKDTree
    tree = cKDTree(Z)
    X, T = [Z.astype(np.float32)], [np.ones(len(Z))]
    for sgn in (1.0, -1.0):
        h = np.full(len(Z), offset)
        ok = np.zeros(len(Z), bool)
        for r in range(4):
            todo = np.flatnonzero(~ok)
            Q = Z[todo] + sgn * h[todo, None] * N[todo]
            # another part of the surface within half the distance: too near
            # (the rows left all have the same h; the bound ends each search early)
            near = 0.5 * offset / 2 ** r
            ok[todo] = ~np.isfinite(tree.query(Q, distance_upper_bound=near, workers=-1)[0])
            h[~ok] /= 2
        h[~ok] = 0
        keep = np.flatnonzero(ok)
        X.append((Z[keep] + sgn * h[keep, None] * N[keep]).astype(np.float32))
        T.append(1.0 - sgn * step * h[keep] / offset)
    return np.concatenate(X), np.concatenate(T)


def _params(scales, kernel, mu, c_per_row, eps, offset, step, max_rows, seed):
    return {"scales": [float(s) for s in scales], "kernel": str(kernel), "mu": float(mu),
            "c_per_row": float(c_per_row), "eps": float(eps), "offset": float(offset),
            "step": float(step), "max_rows": int(max_rows), "seed": int(seed)}


def _kernel(name, sigma):
    from ..solvers.kernels import Kernel
    if name == "rbf":
        return Kernel("rbf", gamma=0.5 / sigma ** 2)
    if name == "exponential":
        return Kernel("exponential", gamma=1.0 / sigma)
    raise ValueError(f"surface kernel must be 'rbf' or 'exponential', got {name!r}")


def check_points(points):
    """``points`` as float64 ``[n, 3]``, or a one-line ValueError when no
    surface can come of them: another shape, fewer than ``MIN_POINTS``,
    NaN or infinite coordinates, all equal, or spread in fewer than three
    dimensions (on a plane or a line, or a few far outliers dwarf the rest:
    the smallest singular value of the centred points, on a subsample of at
    most ~100,000, under ``FLAT`` times the largest)."""
    P = np.asarray(points, np.float64)
    if P.ndim != 2 or P.shape[1] != 3:
        raise ValueError(f"a surface needs points of 3 coordinates, got shape {P.shape}")
    if len(P) < MIN_POINTS:
        raise ValueError(f"a surface needs at least {MIN_POINTS} points (each normal is "
                         f"fitted to its {NEIGHBOURS} nearest neighbours), got {len(P)}")
    if not np.isfinite(P).all():
        raise ValueError("the points hold NaN or infinite coordinates")
    if not np.linalg.norm(P.max(0) - P.min(0)) > 0:
        raise ValueError("the points are all equal: no surface")
    S = P[:: max(1, len(P) // 100_000)]
    spread = np.linalg.svd(S - S.mean(0), compute_uv=False)
    if spread[2] <= FLAT * spread[0]:
        raise ValueError(f"the points lie on a plane or a line, or a few far outliers dwarf "
                         f"the rest (spread {spread[2]:.3g} across against {spread[0]:.3g} "
                         f"along): a closed surface needs points spread in three dimensions")
    return P


def fit(points, *, scales=SCALES, kernel=KERNEL, mu=MU, c_per_row=C_PER_ROW, eps=EPS,
        offset=OFFSET, step=STEP, max_rows=MAX_ROWS, seed=0, n_jobs=1, checkpoint_dir=None,
        resume=False, checkpoint_replace=False, log=None, progress=None):
    """The multi-scale model of ``points`` [n, 3] (see the module).

    ``checkpoint_dir``: a snapshot after each level; ``resume=True``
    continues after the last level in it (the same levels come back: each
    level's sample has its own seed); another run's snapshots there are
    refused, or deleted with ``checkpoint_replace=True``. ``log(str)`` gets
    a line per stage, ``progress(done, total)`` the levels done. Fewer than
    ``MIN_POINTS`` points, points on a plane or a line, or non-finite
    coordinates or scales are a ValueError."""
    from ..problems.checkpoint import Checkpointer, finished_machines
    from ..problems import one_blas_thread
    from ..problems.driver import Solve
    from ..problems.machine import machine_arrays
    from ..problems.regression import train_regressor
    from ..data.store import as_store
    P = check_points(points)
    scales = tuple(scales)
    if len(scales) < 1 or not all(np.isfinite(v) and v > 0 for v in scales):
        raise ValueError(f"scales must be positive finite widths, got {scales!r}")
    _kernel(kernel, 1.0)
    params = _params(scales, kernel, mu, c_per_row, eps, offset, step, max_rows, seed)
    lo, hi = P.min(0), P.max(0)
    center, scale = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    model = SurfaceModel(center, scale, [], params)
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs checkpoint_dir")
    ck = None
    if checkpoint_dir is not None:
        import hashlib
        digest = hashlib.sha256(np.ascontiguousarray(P).tobytes()).hexdigest()[:32]
        ck = Checkpointer(checkpoint_dir, {"estimator": "surface", "params": params,
                                           "points": digest, "rows": int(len(P))},
                          every=float("inf")).claim(resume, checkpoint_replace)
    try:
        if ck is not None:
            got = ck.load() if resume else None
            if got is not None:
                for m in finished_machines(ck, *got):
                    model.levels.append((_kernel(kernel, scales[len(model.levels)]), m))
                if log is not None:
                    log(f"resumed from {checkpoint_dir}: {len(model.levels)} of {len(scales)} "
                        f"levels done")
            elif resume:
                raise ValueError(f"{checkpoint_dir}: no checkpoint to resume from")
        Z = model.normalise(P).astype(np.float64)
        t = time.perf_counter()
        X, T = training_rows(Z, normals(Z), offset, step)
        del Z
        if log is not None:
            log(f"{len(P):,} points: normals and {len(X) - len(P):,} off-surface rows, "
                f"{time.perf_counter() - t:.1f} s")
        r = T.copy()
        for k, m in model.levels:       # resumed levels, subtracted as the run did
            _subtract(r, X, k, m, n_jobs)
        if progress is not None:
            progress(len(model.levels), len(scales))
        with one_blas_thread():
            for lev in range(len(model.levels), len(scales)):
                s = scales[lev]
                t = time.perf_counter()
                k = _kernel(kernel, s)
                rows = np.arange(len(X))
                if len(X) > max_rows:
                    rows = np.sort(np.random.default_rng([seed, lev]).choice(len(X), max_rows,
                                                                             replace=False))
                # the targets in units of their largest size (the first level's
                # are 1 + step): eps is relative to the ball, not to the targets
                a = float(np.abs(r[rows]).max()) or 1.0
                m = train_regressor(as_store(X[rows], r[rows] / a), k,
                                    Solve(method="cvm", eps=eps, seed=seed + lev),
                                    C=c_per_row * len(rows), mu=mu, centred=False,
                                    train_size="all")
                m.coef = m.coef * a
                m.intercept *= a
                _subtract(r, X, k, m, n_jobs)
                model.levels.append((k, m))
                if ck is not None:
                    ck.done.append(machine_arrays(m))
                    ck.machine = len(model.levels)
                    ck.save(machines=len(scales))
                if log is not None:
                    on = np.abs(r[:len(P)])
                    log(f"level sigma {s:g}: {len(m.coef):,} support vectors from {len(rows):,} "
                        f"rows, {time.perf_counter() - t:.1f} s; |1 - f| on the points mean "
                        f"{on.mean():.4f} max {on.max():.4f}")
                if progress is not None:
                    progress(lev + 1, len(scales))
        return model
    finally:
        if ck is not None:
            ck.close()


def _subtract(r, X, k, m, n_jobs):
    """r -= level (k, m) at rows X, block by block (the same floats whether
    the level was just fitted or read back from a snapshot)."""
    for b in range(0, len(X), BLOCK):
        r[b:b + BLOCK] -= m.decision(k, X[b:b + BLOCK], n_jobs=n_jobs)


def grid_axes(lo, hi, n):
    """The axes of a grid over the box [lo, hi], ``n`` points along the
    longest side, the same step on all three."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    step = (hi - lo).max() / (n - 1)
    return [lo[i] + step * np.arange(int(np.ceil((hi[i] - lo[i]) / step - 1e-9)) + 1)
            for i in range(3)]


def _slab_task(i, model, axes, per):
    """f on x-slabs [i * per, (i + 1) * per) of the grid: one runner task."""
    xs = axes[0][i * per:(i + 1) * per]
    g = np.meshgrid(xs, axes[1], axes[2], indexing="ij")
    pts = np.column_stack([v.ravel() for v in g])
    return model.f(pts).reshape(len(xs), len(axes[1]), len(axes[2])).astype(np.float32)


def grid_values(model, lo, hi, n, *, runner=None, progress=None):
    """f on a grid over [lo, hi] (``n`` points along the longest side):
    (values [nx, ny, nz] float32, axes). The grid is cut into slabs of x,
    one chunk task each on ``runner`` (:class:`~streamcvm.data.parallel.Runner`,
    a client or None: dask's threads), so memory is a few slabs' kernel
    blocks plus the grid's floats."""
    from ..solvers.kernels import sq_norms
    from ..data.parallel import as_runner
    for _, m in model.levels:           # filled before the tasks share the model
        if m.sv_sq is None:
            m.sv_sq = sq_norms(m.sv)
    axes = grid_axes(lo, hi, n)
    per = max(1, 2 ** 15 // (len(axes[1]) * len(axes[2])))
    n_tasks = -(-len(axes[0]) // per)
    F = np.empty([len(a) for a in axes], np.float32)
    for i, slab in enumerate(as_runner(runner).map(_slab_task, n_tasks, model, axes, per,
                                                   progress=progress)):
        F[i * per:i * per + len(slab)] = slab
    return F, axes


def mesh(model, points, *, grid=GRID, pad=0.1, runner=None, progress=None):
    """(vertices, faces) of the level set f = 1 by marching cubes on a grid
    over the points' box grown by ``pad`` of its longest side on each side. The
    grid's outer faces are set below the level, so every surface closes;
    pieces of the level set whose median vertex lies more than two grid
    steps from the points are dropped (:func:`near_components`)."""
    from skimage.measure import marching_cubes
    P = np.asarray(points, np.float64)
    lo, hi = P.min(0), P.max(0)
    # grown by pad of the longest side: a flat scan still gets a box to close in
    grow = pad * (hi - lo).max()
    lo, hi = lo - grow, hi + grow
    F, axes = grid_values(model, lo, hi, grid, runner=runner, progress=progress)
    level = 1.0
    if not (F.min() < level < F.max()):
        raise ValueError(f"f does not cross {level:g} on the grid (it spans {F.min():.3g} "
                         f".. {F.max():.3g}): no surface")
    low = min(float(F.min()), 0.0)
    F[0], F[-1], F[:, 0], F[:, -1], F[:, :, 0], F[:, :, -1] = low, low, low, low, low, low
    step = axes[0][1] - axes[0][0]
    V, faces, _, _ = marching_cubes(F, level=level, spacing=(step, step, step))
    V, faces = near_components(V + lo, faces, P, 2.0 * step)
    if len(faces) == 0:
        raise ValueError("no piece of the level set f = 1 lies near the points: no surface "
                         "(points far from the rest? too few or too sparse points?)")
    return V, faces


def near_components(V, faces, points, tol):
    """The connected components of a mesh whose median vertex lies within
    ``tol`` of the points (the level set can also cross where no point is);
    vertices renumbered."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree
    n = len(V)
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]]])
    g = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
    k, label = connected_components(g, directed=False)
    dist = cKDTree(points).query(V)[0]
    med = np.array([np.median(d) for d in np.split(dist[np.argsort(label, kind="stable")],
                                                      np.cumsum(np.bincount(label))[:-1])])
    keep = (med <= tol)[label]
    new = np.cumsum(keep) - 1
    return V[keep], new[faces[keep[faces[:, 0]]]]


def is_closed(faces):
    """True when every edge of the mesh is shared by exactly two faces."""
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), 1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return bool(len(faces)) and bool((counts == 2).all())


def reconstruct(points, *, grid=GRID, runner=None, log=None, progress=None, **fit_kw):
    """(vertices, faces, model): the multi-scale CVR surface of ``points``
    (``fit_kw``: :func:`fit`'s options)."""
    model = fit(points, log=log, **fit_kw)
    V, faces = mesh(model, points, grid=grid, runner=runner, progress=progress)
    return V, faces, model
