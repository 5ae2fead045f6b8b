"""Implicit surfaces from 3D point sets with Core Vector Regression (cvr
paper, sec. 4.2; issue 17, work in progress).

The points are scaled into a box of unit diagonal. An L2-SVR with the
Laplacian kernel learns f = 1 on every point (the "one-set": the zero-set
has the trivial solution), its bias penalised and the targets not centred.
Three scales, coarse to fine, as the paper (after Schoelkopf et al. 2005):
the first fit with a wide kernel gives f > 1 inside the shape and f < 1
outside; each next fit, narrower, fits the residuals 1 - f. The surface is
the level set f = 1 of the sum, meshed by marching cubes on a grid
evaluated in blocks.
"""
import time

import numpy as np

SCALES = (0.5, 0.125, 0.03)     # kernel widths sigma, in units of the box diagonal
MU = 0.01                       # mean slack outside the tube, in f's units
C_PER_ROW = 5.0                 # C = 5 x points, as CVMRegressor's C="auto"
EPS = 1e-6                      # the fits need the ball far tighter than regression's default
GRID = 128                      # grid points along the longest side


class SurfaceModel:
    """The fitted multi-scale function: ``levels`` of (Kernel, Machine) on
    points mapped by ``(x - center) / scale``. ``f(X)`` is the sum."""

    def __init__(self, center, scale, levels):
        self.center = np.asarray(center, np.float64)
        self.scale = float(scale)
        self.levels = levels

    def normalise(self, X):
        return ((np.asarray(X, np.float64) - self.center) / self.scale).astype(np.float32)

    def f(self, X, n_jobs=1):
        """f at points ``X`` (original coordinates)."""
        Z = self.normalise(X)
        return sum(m.decision(k, Z, n_jobs=n_jobs) for k, m in self.levels)

    @property
    def n_support(self):
        return sum(len(m.coef) for _, m in self.levels)


def fit(points, *, scales=SCALES, mu=MU, c_per_row=C_PER_ROW, eps=EPS, log=None):
    """The multi-scale model of ``points`` [n, 3] (see the module)."""
    from .kernels import Kernel
    from .problems import one_blas_thread
    from .problems.driver import Solve
    from .problems.regression import train_regressor
    from .store import as_store
    P = np.asarray(points, np.float64)
    lo, hi = P.min(0), P.max(0)
    center, scale = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    if not scale > 0:
        raise ValueError("the points are all equal: no surface")
    model = SurfaceModel(center, scale, [])
    Z = model.normalise(P)
    r = np.ones(len(Z))
    with one_blas_thread():
        for s in scales:
            t = time.perf_counter()
            k = Kernel("exponential", gamma=1.0 / s)
            # the targets in units of their largest size (the first level's are 1):
            # eps is relative to the ball, whose size does not follow the targets'
            a = float(np.abs(r).max())
            m = train_regressor(as_store(Z, r / a), k, Solve(method="cvm", eps=eps),
                                C=c_per_row * len(Z), mu=mu, centred=False)
            m.coef = m.coef * a
            m.intercept *= a
            r -= m.decision(k, Z)
            model.levels.append((k, m))
            if log is not None:
                log(f"level sigma {s:g}: {len(m.coef):,} support vectors, "
                    f"{time.perf_counter() - t:.1f} s, |1 - f| mean {np.abs(r).mean():.4f} "
                    f"max {np.abs(r).max():.4f}")
    return model


def grid_values(model, lo, hi, n, *, n_jobs=1, progress=None):
    """f on a grid over the box [lo, hi] with ``n`` points along the longest
    side: (values [nx, ny, nz], the axes). Evaluated a slab of x at a time,
    so memory is one slab's kernel blocks plus the grid's floats."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    step = (hi - lo).max() / (n - 1)
    axes = [lo[i] + step * np.arange(int(np.ceil((hi[i] - lo[i]) / step)) + 1)
            for i in range(3)]
    F = np.empty([len(a) for a in axes], np.float32)
    yy, zz = np.meshgrid(axes[1], axes[2], indexing="ij")
    for i, x in enumerate(axes[0]):
        slab = np.column_stack([np.full(yy.size, x), yy.ravel(), zz.ravel()])
        F[i] = model.f(slab, n_jobs=n_jobs).reshape(yy.shape)
        if progress is not None:
            progress(i + 1, len(axes[0]))
    return F, axes


def mesh(model, points, *, grid=GRID, pad=0.1, n_jobs=1, progress=None):
    """(vertices, faces) of the level set f = 1 by marching cubes on a grid
    over the points' box grown by ``pad`` of its size on each side."""
    from skimage.measure import marching_cubes
    P = np.asarray(points, np.float64)
    lo, hi = P.min(0), P.max(0)
    lo, hi = lo - pad * (hi - lo), hi + pad * (hi - lo)
    F, axes = grid_values(model, lo, hi, grid, n_jobs=n_jobs, progress=progress)
    # the level through the points: f is ~1 there, and f is flat across the
    # surface (slope ~0.1 per box diagonal), so a residual of 0.004 would move
    # the surface by 4% of the box; the median of f on the points does not
    level = float(np.median(model.f(P, n_jobs=n_jobs)))
    if not (F.min() < level < F.max()):
        raise ValueError(f"f does not cross {level:.4g} on the grid (it spans {F.min():.3g} "
                         f".. {F.max():.3g}): no surface")
    step = axes[0][1] - axes[0][0]
    V, faces, _, _ = marching_cubes(F, level=level, spacing=(step, step, step))
    return near_components(V + lo, faces, P, 2.0 * step)


def near_components(V, faces, points, tol):
    """The connected components of a mesh whose median vertex lies within
    ``tol`` of the points: the level set f = 1 also crosses where no point
    is (deep inside, or far out where the coarse level's f passes 1), and
    those pieces describe nothing that was scanned. Vertices renumbered."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree
    n = len(V)
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]]])
    g = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
    k, label = connected_components(g, directed=False)
    dist = cKDTree(points).query(V)[0]
    keep_comp = np.array([np.median(dist[label == c]) <= tol for c in range(k)])
    keep = keep_comp[label]
    new = np.cumsum(keep) - 1
    fk = keep[faces[:, 0]]
    return V[keep], new[faces[fk]]


def reconstruct(points, *, grid=GRID, n_jobs=1, log=None, **fit_kw):
    """(vertices, faces, model): the multi-scale CVR surface of ``points``."""
    model = fit(points, log=log, **fit_kw)
    V, faces = mesh(model, points, grid=grid, n_jobs=n_jobs)
    return V, faces, model
