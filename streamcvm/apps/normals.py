"""Normals and training rows of a surface's points (:mod:`streamcvm.apps.surface`).

The normals are local PCA over a neighbourhood sized to the scan's noise
(:func:`neighbourhood`), signed along a minimum spanning tree; the training
rows are the points (target 1) and a row each side along the normal.
Their settings (``neighbours`` ... ``block``) are fields of
:class:`~streamcvm.options.SurfaceOptions`, passed down as ``opts``.
"""
import numpy as np

from ..options import SurfaceOptions, resolve


def neighbourhood(Z, tree=None, sample=4000, seed=0, *, opts):
    """(k, spacing, noise, flat) of points ``Z`` [n, 3]: ``k`` the smallest of
    ``opts.neighbours`` (16), 32, 64, ``opts.largest`` (128) neighbours whose
    PCA thickness (sqrt of the smallest eigenvalue) is at most
    ``opts.flatness`` of the neighbourhood's radius at the median over
    ``sample`` points (a clean scan's curvature passes at 16; noise of width
    s needs a radius of ~10 s); ``spacing`` the median distance to the
    ``opts.neighbours``-th neighbour; ``noise`` the median thickness at k
    (the scan's noise along the normal, or its curvature's if clean);
    ``flat`` False when even the largest neighbourhood is thicker than that
    (its radius is then too small for the noise, which is underestimated)."""
    from scipy.spatial import cKDTree
    tree = cKDTree(Z) if tree is None else tree
    n = len(Z)
    rng = np.random.default_rng(seed)
    S = Z[rng.choice(n, min(sample, n), replace=False)]
    spacing = noise = None
    for k in (opts.neighbours, 32, 64, opts.largest):
        kk = min(k, n)
        d, idx = tree.query(S, kk, workers=-1)
        nb = Z[idx].astype(np.float64)
        nb -= nb.mean(1, keepdims=True)
        lam = np.linalg.eigvalsh(np.einsum("nki,nkj->nij", nb, nb) / kk)[:, 0]
        thick = np.sqrt(np.maximum(lam, 0))
        if spacing is None:
            spacing = float(np.median(d[:, -1]))
        noise = float(np.median(thick))
        if np.median(thick / np.maximum(d[:, -1], 1e-30)) <= opts.flatness or kk == n:
            return kk, spacing, noise, True
    return kk, spacing, noise, False


def normals(Z, k=None, tree=None, options=None):
    """Unit normals of points ``Z`` [n, 3], consistently signed and pointing
    outwards: the smallest principal axis of each point's ``k`` nearest
    neighbours (None: :func:`neighbourhood`'s; ``options``: a
    :class:`~streamcvm.options.SurfaceOptions`, a dict of its fields, or
    None for the defaults); the signs carried along a minimum spanning tree of the
    neighbour graph whose edge weights prefer neighbours with parallel
    normals *beside* each other (a neighbour across a thin part lies along
    the normal, and copying its sign would turn one side inside out); the
    point furthest along x points along +x."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial import cKDTree
    opts = resolve(options, SurfaceOptions)
    n = len(Z)
    tree = cKDTree(Z) if tree is None else tree
    k = int(min(neighbourhood(Z, tree, opts=opts)[0] if k is None else k, n))
    N = np.empty((n, 3))
    kg = min(8, k)              # the orientation graph: fewer edges, same tree
    rows, cols, wts = [], [], []
    blk = max(1024, opts.block * opts.neighbours // k)
    for a in range(0, n, blk):
        idx = tree.query(Z[a:a + blk], k, workers=-1)[1]
        nb = Z[idx].astype(np.float64)
        nb -= nb.mean(1, keepdims=True)
        N[a:a + blk] = np.linalg.eigh(np.einsum("nki,nkj->nij", nb, nb))[1][:, :, 0]
        rows.append(np.repeat(np.arange(a, a + len(idx), dtype=np.int32), kg - 1))
        cols.append(idx[:, 1:kg].ravel().astype(np.int32))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    for a in range(0, len(rows), opts.block * 8):
        r, c = rows[a:a + opts.block * 8], cols[a:a + opts.block * 8]
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


def training_rows(Z, N, offset, step, tree=None):
    """(rows [m, 3] float32, targets [m]): the points with target 1 and, for
    each, rows at +-``offset`` along its normal with targets 1 -+ ``step``
    (scaled with the distance when a row moves closer: when the surface
    elsewhere, a thin part's other side, lies within half the distance; a
    test on the nearest point being the row's own point instead would fail
    on noisy scans, whose neighbours stick out further than a row's point)."""
    from scipy.spatial import cKDTree
    tree = cKDTree(Z) if tree is None else tree
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
