"""Implicit surfaces from 3D point sets with Core Vector Regression (cvr
paper, sec. 4.2), fine levels local.

The points are scaled into a box of unit diagonal. f = 1 is fitted on every
point (the paper's "one-set") and 1 -+ ``step`` on rows just outside and
inside along the normals (:mod:`.normals`), at widths coarse to fine, each
level fitting the residuals of the levels before it; the surface is the
level set f = 1 of their sum, meshed by marching cubes.

The settings named here (``step``, ``max_rows``, ``max_points``,
``grid_per_spacing`` ...) are the fields of
:class:`~streamcvm.options.SurfaceOptions`: :func:`fit`, :func:`mesh` and
:func:`reconstruct` take them as ``options=`` (a SurfaceOptions, or a dict
of the fields to change) and pass them down with the call; the fitted
:class:`SurfaceModel` keeps them, so that :func:`mesh` uses the options the
fit used unless told otherwise.

- **The first level** is one L2-SVR over ``max_rows`` rows drawn at
  random, trained by the CVM (``train_regressor``): it fixes f far from
  the points, where holes in a scan are bridged.
- **The finer levels** are local (:mod:`.local`): a Gaussian of width sigma
  fixes f only within a few sigma, so each is many small CVR fits on the
  blocks of a grid of nodes, blended by a partition of unity. Their cost
  grows with the surface's area over sigma^2, not with the points.
- **Levels finer than the scan** are replaced by the finest it resolves: a
  width below ``spacings`` (half) the points' spacing (median distance to
  the 16th neighbour) or ``noise_widths`` (10) times their noise (the PCA
  thickness, :func:`.normals.neighbourhood`) would fit holes or noise.
- **A scan of more than ``max_points`` points** is fitted as the means of
  its points in small cells (:func:`voxel_means`): the noise of a mean of k
  points is 1/sqrt(k) of theirs, and the cost stays fixed. A local level
  that does not help on held-out points is dropped, with the finer ones.
- **Far outliers** (:func:`inliers`) are dropped, with a note: points
  beyond the box of the central 96% of the points (per axis,
  ``outlier_quantile``) grown by its longest side (``outlier_reach``) would
  otherwise set the box, the scale and the grid.
- **The grid** follows the points: by default ``grid_per_spacing`` steps
  per point spacing, ``min_grid`` to ``grid`` along the longest side; a grid
  that cannot fit in the memory available is refused (:func:`check_grid`).
- **Coordinates** stay float64 until they are centred and scaled (a scan
  far from the origin keeps its precision); the mesh's vertices come back
  in float64 (:func:`.meshio.write_mesh` writes them as doubles when float32
  would round them).
- **The mesh** (:func:`mesh`) evaluates f exactly only in a band around the
  points and where a coarse grid's f crosses the level; elsewhere the
  coarse grid's values, interpolated, give marching cubes the sign. A mesh
  far from the points is refused (:class:`FarMeshError`).

Where this departs from the paper, and why: docs/surface.md.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..options import SurfaceOptions, resolve
from .grid import check_grid, default_grid, grid_axes, inliers, model_options, points_box
from .local import LocalLevel, fit_local
from .normals import neighbourhood, normals, training_rows

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Sequence
    from typing import TypeAlias

    from numpy.typing import ArrayLike

    from ..data.parallel import Runner

    _Options: TypeAlias = SurfaceOptions | dict[str, Any] | None


class FarMeshError(ValueError):
    """The mesh lies far from the points (:func:`check_near`)."""


class SurfaceModel:
    """The fitted multi-scale function whose level set f = 1 is the surface.

    The levels are fitted on points mapped by ``(x - center) / scale``
    (:meth:`normalise`); ``f(X)`` is the sum of the levels. :func:`fit`
    makes one; :func:`mesh` meshes it.

    Parameters
    ----------
    center : array_like of shape (3,)
        The point mapped to the origin (the centre of the points' box).
    scale : float
        The length mapped to 1 (the diagonal of the points' box).
    levels : list
        The levels, coarse to fine: the first a ``(Kernel, Machine)`` pair,
        the others :class:`~streamcvm.apps.local.LocalLevel`.
    params : dict, optional
        The fit's arguments and what the points set (the scales used, the
        noise and spacing found). None: empty.
    options : SurfaceOptions or dict or None, optional
        The :class:`~streamcvm.options.SurfaceOptions` it was fitted with (a
        dict of the fields that differ, or None: the defaults), which
        :func:`mesh` and :meth:`f` use unless told otherwise.

    Attributes
    ----------
    center : ndarray of shape (3,)
        ``center`` as float64.
    scale : float
        ``scale``.
    levels : list
        ``levels``.
    params : dict
        ``params`` (a copy).
    options : SurfaceOptions
        ``options`` resolved.
    """

    def __init__(self, center: ArrayLike, scale: float, levels: list[Any],
                 params: dict[str, Any] | None = None, options: _Options = None) -> None:
        self.center = np.asarray(center, np.float64)
        self.scale = float(scale)
        self.levels = levels
        self.params = dict(params or {})
        self.options = resolve(options, SurfaceOptions)

    def normalise(self, X: ArrayLike) -> np.ndarray:
        """Map points to the coordinates the levels were fitted in.

        Parameters
        ----------
        X : array_like of shape (n, 3)
            Points in the original coordinates.

        Returns
        -------
        ndarray of shape (n, 3)
            ``(X - center) / scale``, float64.
        """
        return (np.asarray(X, np.float64) - self.center) / self.scale

    def f(self, X: ArrayLike, n_jobs: int = 1) -> np.ndarray:
        """Evaluate f at points in the original coordinates.

        Parameters
        ----------
        X : array_like of shape (n, 3)
            The points.
        n_jobs : int, default 1
            Threads of the first level's kernel sums.

        Returns
        -------
        ndarray of shape (n,)
            f at each point (the surface is f = 1).
        """
        return self.f_normalised(self.normalise(X), n_jobs=n_jobs)

    def f_normalised(self, Z: ArrayLike, n_jobs: int = 1, levels: Sequence[Any] | None = None,
                     opts: SurfaceOptions | None = None) -> np.ndarray:
        """Evaluate f at points in normalised coordinates (see :meth:`normalise`).

        Parameters
        ----------
        Z : array_like of shape (n, 3)
            The normalised points.
        n_jobs : int, default 1
            Threads of the first level's kernel sums.
        levels : sequence, optional
            Sum only these of the model's levels. None: all of them.
        opts : SurfaceOptions, optional
            The options (``block``: the rows evaluated at a time). None: the
            model's.

        Returns
        -------
        ndarray of shape (n,)
            The sum of the levels at each point.
        """
        opts = self.options if opts is None else opts
        block = opts.block
        Z = np.ascontiguousarray(Z, np.float64)
        out = np.zeros(len(Z))
        for lev in self.levels if levels is None else levels:
            if isinstance(lev, LocalLevel):
                lev.add_to(Z, out, opts)
                continue
            k, m = lev
            for a in range(0, len(Z), block):
                out[a:a + block] += m.decision(k, Z[a:a + block].astype(np.float32),
                                               n_jobs=n_jobs)
        return out

    @property
    def n_support(self) -> int:
        """The support vectors of all levels (each local block's counted)."""
        return sum(lev.n_support if isinstance(lev, LocalLevel) else len(lev[1].coef)
                   for lev in self.levels)


def check_points(points, options=None):
    """Check that a surface can come of a point set.

    Parameters
    ----------
    points : array_like of shape (n, 3)
        The points.
    options : SurfaceOptions or dict or None, optional
        The options whose fields ``neighbours`` and ``flat`` set the rules
        (None: the defaults).

    Returns
    -------
    ndarray of shape (n, 3)
        ``points`` as float64.

    Raises
    ------
    ValueError
        In one line, when no surface can come of them: another shape, fewer
        than twice ``neighbours`` points, NaN or infinite coordinates, all
        points equal, or points spread in fewer than three dimensions (on a
        plane or a line, or a few far outliers dwarf the rest: the smallest
        singular value of the centred points, on a subsample of at most
        ~100,000, under ``flat`` times the largest).
    """
    opts = resolve(options, SurfaceOptions)
    min_points = 2 * opts.neighbours    # fewer: no mesh (each normal needs its neighbours)
    P = np.asarray(points, np.float64)
    if P.ndim != 2 or P.shape[1] != 3:
        raise ValueError(f"a surface needs points of 3 coordinates, got shape {P.shape}")
    if len(P) < min_points:
        raise ValueError(f"a surface needs at least {min_points} points (each normal is "
                         f"fitted to its {opts.neighbours} nearest neighbours), got {len(P)}")
    if not np.isfinite(P).all():
        raise ValueError("the points hold NaN or infinite coordinates")
    if not np.linalg.norm(P.max(0) - P.min(0)) > 0:
        raise ValueError("the points are all equal: no surface")
    S = P[:: max(1, len(P) // 100_000)]
    spread = np.linalg.svd(S - S.mean(0), compute_uv=False)
    if spread[2] <= opts.flat * spread[0]:
        raise ValueError(f"the points lie on a plane or a line, or a few far outliers dwarf "
                         f"the rest (spread {spread[2]:.3g} across against {spread[0]:.3g} "
                         f"along): a closed surface needs points spread in three dimensions")
    return P


def _kept(P, opts, say=None):
    """``P`` without its far outliers (:func:`inliers` with ``opts``), saying
    how many were dropped."""
    keep = inliers(P, opts)
    if keep.all():
        return P
    n = int(len(P) - np.count_nonzero(keep))
    if say is not None:
        say(f"{n:,} far outlier{'s' if n > 1 else ''} dropped ({100 * n / len(P):.2g}% of "
            f"the points, beyond the box of the central "
            f"{100 * (1 - 2 * opts.outlier_quantile):g}% grown by {opts.outlier_reach:g} of "
            f"its longest side)")
    return check_points(P[keep], opts)


def _params(scales, mu, local_mu, c_per_row, eps, step, max_rows, cap, max_points, seed):
    return {"scales": [float(s) for s in scales], "mu": float(mu), "local_mu": float(local_mu),
            "c_per_row": float(c_per_row), "eps": float(eps), "step": float(step),
            "max_rows": int(max_rows), "cap": int(cap), "max_points": int(max_points),
            "seed": int(seed)}


def _kernel(sigma):
    from ..solvers.kernels import Kernel
    return Kernel("rbf", gamma=0.5 / sigma ** 2)


def _sample(n, most, seed):
    """Sorted indices of at most ``most`` of ``n`` points (all if fewer)."""
    if n <= most:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 7]).choice(n, most, replace=False))


def voxel_means(model, P, most, opts):
    """Stand about ``most`` cell means in for a large point set.

    The means of the points in each cell of a grid sized for that many
    cells. A mean of k points has 1/sqrt(k) of their noise, and the cells
    are far smaller than the finest width, so every point's information is
    kept.

    Parameters
    ----------
    model : SurfaceModel
        The model whose :meth:`~SurfaceModel.normalise` maps the points.
    P : ndarray of shape (n, 3)
        The points, in the original coordinates.
    most : int
        About how many means to return.
    opts : SurfaceOptions
        The options (``opts.block`` x 16 points are read at a time).

    Returns
    -------
    ndarray of shape (m, 3)
        The means of the points of each non-empty cell, normalised.
    """
    chunk = opts.block * 16
    h = 0.002
    for _ in range(2):
        keys = np.empty(len(P), np.int64)
        for a in range(0, len(P), chunk):
            c = np.floor((model.normalise(P[a:a + chunk]) + 1.0) / h).astype(np.int64)
            keys[a:a + chunk] = (c[:, 0] * 1_000_003 + c[:, 1]) * 1_000_003 + c[:, 2]
        uniq, inv = np.unique(keys, return_inverse=True)
        del keys
        if len(uniq) <= most:
            break
        h *= np.sqrt(len(uniq) / most)
    sums = np.zeros((len(uniq), 3))
    for a in range(0, len(P), chunk):
        z = model.normalise(P[a:a + chunk])
        for k in range(3):
            sums[:, k] += np.bincount(inv[a:a + chunk], z[:, k], minlength=len(uniq))
    return sums / np.bincount(inv, minlength=len(uniq))[:, None]


_FIT_FIELDS = ("scales", "mu", "local_mu", "c_per_row", "eps", "step", "max_rows", "cap",
               "max_points")        # fit's keywords that are SurfaceOptions fields


def _check_scales(scales: Any) -> tuple[float, ...]:
    scales = tuple(float(v) for v in scales)
    if len(scales) < 1 or not all(np.isfinite(v) and v > 0 for v in scales):
        raise ValueError(f"scales must be positive finite widths, got {scales!r}")
    return scales


def fit(points: ArrayLike, *, scales: Sequence[float] | None = None, mu: float | None = None,
        local_mu: float | None = None, c_per_row: float | None = None,
        eps: float | None = None, step: float | None = None, max_rows: int | None = None,
        cap: int | None = None, max_points: int | None = None, seed: int = 0,
        n_jobs: int = 1, checkpoint_dir: str | os.PathLike[str] | None = None,
        resume: bool = False, checkpoint_replace: bool = False,
        log: Callable[[str], object] | None = None,
        progress: Callable[[int, int], object] | None = None,
        options: _Options = None) -> SurfaceModel:
    """Fit the multi-scale model of a 3D point set (see the module).

    The keywords ``scales`` to ``max_points``, when given, change those
    fields of ``options``; None keeps the options' value. The model keeps
    the options it was fitted with (``model.options``).

    Parameters
    ----------
    points : array_like of shape (n, 3)
        The points (checked by :func:`check_points`; far outliers,
        :func:`~streamcvm.apps.grid.inliers`, are dropped).
    scales : sequence of float, optional
        The levels' kernel widths sigma, coarse to fine, in box diagonals;
        those finer than the scan resolves are replaced by the finest it
        does. None: ``options.scales``.
    mu : float, optional
        The first level's mean slack (CVR's mu). None: ``options.mu``.
    local_mu : float, optional
        The local levels' mu. None: ``options.local_mu``.
    c_per_row : float, optional
        C is this times the rows fitted. None: ``options.c_per_row``.
    eps : float, optional
        The first level's CVM eps. None: ``options.eps``.
    step : float, optional
        The off-surface rows' targets are 1 + step (outside) and 1 - step
        (inside). None: ``options.step``.
    max_rows : int, optional
        Rows the first level is fitted on. None: ``options.max_rows``.
    cap : int, optional
        Rows a local block is fitted on, at most. None: ``options.cap``.
    max_points : int, optional
        A scan of more points is fitted as the means of its points in small
        cells (:func:`voxel_means`). None: ``options.max_points``.
    seed : int, default 0
        Seed of the samples (each level's sample has its own seed derived
        from it).
    n_jobs : int, default 1
        Threads of the evaluation of the fitted levels on the rows (the
        residuals each level fits).
    checkpoint_dir : str or os.PathLike, optional
        A folder for a snapshot after each level. None: no snapshots.
    resume : bool, default False
        Continue after the last level in ``checkpoint_dir`` (the same levels
        come back); it needs ``checkpoint_dir``.
    checkpoint_replace : bool, default False
        Delete another run's snapshots in ``checkpoint_dir`` instead of
        refusing them.
    log : callable, optional
        ``log(line)`` gets one line of text per stage. None: silent.
    progress : callable, optional
        ``progress(done, total)`` gets the levels done.
    options : SurfaceOptions or dict or None, optional
        The settings: a :class:`~streamcvm.options.SurfaceOptions`, a dict
        of the fields to change, or None (the defaults).

    Returns
    -------
    SurfaceModel
        The fitted model; ``model.params`` records the arguments and what
        the points set (the widths used, the spacing and noise found).

    Raises
    ------
    ValueError
        Fewer than twice ``options.neighbours`` points, points on a plane or
        a line, non-finite coordinates or scales, options out of range or
        unknown, or ``resume=True`` without a snapshot to resume from.
    """
    from ..problems.checkpoint import Checkpointer, finished_machines
    from ..problems import one_blas_thread
    from ..problems.driver import Solve
    from ..problems.machine import machine_arrays, machine_from
    from ..problems.regression import train_regressor
    from ..data.store import as_store
    from scipy.spatial import cKDTree
    opts = resolve(options, SurfaceOptions)
    P = check_points(points, opts)
    given = {name: v for name, v in zip(_FIT_FIELDS, (scales, mu, local_mu, c_per_row, eps, step,
                                                      max_rows, cap, max_points))
             if v is not None}
    scales = _check_scales(given.get("scales", opts.scales))
    if given:
        opts = opts.but(**dict(given, scales=scales))
    params = _params(scales, opts.mu, opts.local_mu, opts.c_per_row, opts.eps, opts.step,
                     opts.max_rows, opts.cap, opts.max_points, seed)
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs checkpoint_dir")
    say = (lambda s: None) if log is None else log
    P = _kept(P, opts, say)
    lo, hi = P.min(0), P.max(0)
    center, scale = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    model = SurfaceModel(center, scale, [], params, opts)
    max_points, thin_by = opts.max_points, opts.thin
    t = time.perf_counter()
    Z = model.normalise(P) if len(P) <= max_points else voxel_means(model, P, max_points, opts)
    tree = cKDTree(Z)
    k, spacing, noise, flat = neighbourhood(Z, tree, seed=seed, opts=opts)
    Zn, tree_n, thin = Z, tree, 1
    while not flat and len(Zn) >= thin_by * opts.min_thinned:
        # too noisy for the largest neighbourhood: the normals from fewer
        # points, whose neighbourhoods are wider; every point takes its
        # nearest one's
        Zn = Zn[_sample(len(Zn), len(Zn) // thin_by, seed)]
        thin *= thin_by
        tree_n = cKDTree(Zn)
        k, _, noise, flat = neighbourhood(Zn, tree_n, seed=seed, opts=opts)
    N = normals(Zn, k, tree_n, opts)
    if Zn is not Z:
        N = N[tree_n.query(Z, workers=-1)[1]]
    del Zn, tree_n
    offset = max(opts.offset, opts.noise_offsets * noise)
    X, T = training_rows(Z, N, offset, opts.step, tree)
    X = X.astype(np.float64)
    del tree, N
    finest = max(opts.spacings * spacing, opts.noise_widths * noise)
    # no level narrower than the scan resolves: those are dropped, and the
    # finest width it does resolve stands in for them
    used = scales[:1] + tuple(s for s in scales[1:] if s >= finest)
    if len(used) < len(scales) and finest < used[-1]:
        used += (finest,)
    rows_per_block = int(opts.cap * min(4.0, max(1.0, opts.noise_widths * noise / opts.cap_width,
                                                 np.sqrt(len(P) / len(Z)))))
    model.params.update(rows_per_block=rows_per_block, used=list(used), spacing=spacing, noise=noise, neighbours=k,
                        offset=offset)
    say(f"{len(P):,} points{f' (as {len(Z):,} cell means)' if len(Z) < len(P) else ''}: spacing "
        f"{spacing:.2g}, noise {noise:.2g} diagonals; normals from {k} neighbours"
        f"{f' of 1 point in {thin}' if thin > 1 else ''}, "
        f"{len(X) - len(Z):,} off-surface rows at {offset:.3g}, {time.perf_counter() - t:.1f} s"
        + (f"; widths below {finest:.2g} replaced by it ({', '.join(f'{s:g}' for s in scales if s not in used)})"
           if set(used) != set(scales) else ""))
    # held-out points judge each local level (none of their rows is fitted)
    held = np.zeros(len(X), bool)
    held[_sample(len(Z), max(int(opts.held * len(Z)), min(opts.min_held, len(Z) // 10)),
                 seed + 1)] = True
    on = np.flatnonzero(held)
    fit_rows = np.flatnonzero(~held)
    Xf = X[fit_rows]

    def level_from(rec, arrays):
        if "local" in rec:
            return LocalLevel.from_record(rec, arrays)
        return _kernel(used[0]), machine_from(rec, arrays)

    ck = None
    if checkpoint_dir is not None:
        import hashlib
        digest = hashlib.sha256(np.ascontiguousarray(P)).hexdigest()[:32]  # type: ignore[arg-type]  # no copy (an ndarray is a buffer)
        run = {"estimator": "surface", "params": params, "points": digest,
               "rows": int(len(P))}
        changed = {k: v for k, v in opts.changed().items() if k not in params}
        if changed:         # the other options that differ (none: as before they were)
            run["options"] = changed
        ck = Checkpointer(checkpoint_dir, run, every=float("inf")).claim(resume,
                                                                          checkpoint_replace)
    try:
        if ck is not None:
            got = ck.load() if resume else None
            if got is not None:
                model.levels.extend(finished_machines(ck, *got, make=level_from))  # type: ignore[misc]  # (got: manifest, arrays)
                say(f"resumed from {checkpoint_dir}: {len(model.levels)} of {len(used)} "
                    f"levels done")
            elif resume:
                raise ValueError(f"{checkpoint_dir}: no checkpoint to resume from")
        if progress is not None:
            progress(len(model.levels), len(used))

        def residual(rows):
            return T[rows] - model.f_normalised(X[rows], n_jobs=n_jobs)

        with one_blas_thread():
            for lev in range(len(model.levels), len(used)):
                s = used[lev]
                t = time.perf_counter()
                before = np.abs(residual(on)).mean()
                if lev == 0:
                    rows = fit_rows[_sample(len(fit_rows), opts.max_rows, seed)]
                    r = residual(rows)
                    # the targets in units of their largest: eps is relative
                    # to the ball, not to the targets
                    a = float(np.abs(r).max()) or 1.0
                    m = train_regressor(as_store(X[rows].astype(np.float32), r / a),
                                        _kernel(s), Solve(method="cvm", eps=opts.eps,
                                                          seed=seed),
                                        C=opts.c_per_row * len(rows), mu=opts.mu,
                                        centred=False, train_size="all")
                    m.coef = m.coef * a
                    m.intercept *= a
                    level, what = (_kernel(s), m), f"from {len(rows):,} rows"
                    rec = machine_arrays(m)
                else:
                    level = fit_local(Xf, lambda r: residual(fit_rows[r]), s,
                                      c_per_row=opts.c_per_row, mu=opts.local_mu,
                                      cap=rows_per_block, seed=[seed, lev], lo=X.min(0),
                                      hi=X.max(0), opts=opts,
                                      on=int(np.count_nonzero(fit_rows < len(Z))))
                    what = f"in {level.n_blocks:,} blocks"
                    rec = level.record()
                model.levels.append(level)
                res = np.abs(residual(on))
                if lev and res.mean() > (1.0 - opts.min_gain) * before:
                    # no finer width will find what this one did not
                    model.levels.pop()
                    model.params["used"] = list(used[:lev])
                    say(f"level sigma {s:g}: |1 - f| on the held-out points {before:.4f} -> "
                        f"{res.mean():.4f}, under {100 * opts.min_gain:g}% better: dropped, and "
                        f"the finer widths with it")
                    if progress is not None:
                        progress(len(used), len(used))
                    break
                if ck is not None:
                    ck.done.append(rec)
                    ck.machine = len(model.levels)
                    ck.save(machines=len(used))
                n_sv = level.n_support if lev else len(level[1].coef)  # type: ignore[attr-defined]  # (lev > 0: a LocalLevel)
                say(f"level sigma {s:g}: {n_sv:,} support vectors {what}, "
                    f"{time.perf_counter() - t:.1f} s; |1 - f| on the held-out points mean "
                    f"{before:.4f} -> {res.mean():.4f}, max {res.max():.4f}")
                if progress is not None:
                    progress(lev + 1, len(used))
        return model
    finally:
        if ck is not None:
            ck.close()


def mesh_box(model, P, pad=0.1, options=None):
    """Give the box meshed around the points, in normalised coordinates.

    The points' box (far outliers left out,
    :func:`~streamcvm.apps.grid.inliers`) grown by ``pad`` of its longest
    side on each side (:func:`~streamcvm.apps.grid.points_box`).

    Parameters
    ----------
    model : SurfaceModel
        The model whose :meth:`~SurfaceModel.normalise` maps the box.
    P : array_like of shape (n, 3)
        The points, in the original coordinates.
    pad : float, default 0.1
        The growth on each side, in longest sides of the box.
    options : SurfaceOptions or dict or None, optional
        The options of the outlier rule. None: the model's; a dict: the
        model's with those fields changed.

    Returns
    -------
    lo, hi : ndarray of shape (3,)
        The box's corners, normalised.
    """
    lo, hi = points_box(P, pad, model_options(model, options))
    return model.normalise(lo), model.normalise(hi)


def _coarse_factor(sigma, step):
    """Every how many grid steps a level of width ``sigma`` needs a node:
    sigma over 10 steps (trilinear interpolation then errs by about 1/800
    of the level's size), 1 to 8."""
    return int(min(8, max(1, sigma / (10 * step))))


def grid_values(model, Z, lo, hi, n, *, band=None, runner=None, progress=None, opts=None):
    """Evaluate f on a grid over a box, exactly where the surface can be.

    f is exact at the nodes within ``band`` steps of the points and around
    the cells of a coarse grid (every few nodes) where f crosses 1;
    elsewhere the coarse grid's f, interpolated, stands in (marching cubes
    needs only its sign there). The first level, smooth, comes from the
    coarse grid everywhere.

    Parameters
    ----------
    model : SurfaceModel
        The fitted model.
    Z : ndarray of shape (m, 3)
        The points, normalised.
    lo, hi : array_like of shape (3,)
        The box's corners, normalised.
    n : int
        Grid points along the box's longest side (the same step on all
        three).
    band : int, optional
        f is exact within this many grid steps of the points. None:
        ``opts.band``.
    runner : Runner, optional
        A runner with a dask client evaluates the exact nodes as chunk
        tasks on the cluster; None (or no client): this process, on all
        cores.
    progress : callable, optional
        ``progress(done, total)`` gets the chunk tasks done.
    opts : SurfaceOptions or dict or None, optional
        The options. None: the model's; a dict: the model's with those
        fields changed.

    Returns
    -------
    values : ndarray of shape (nx, ny, nz), float32
        f at the grid's nodes.
    axes : list of 3 ndarrays
        The nodes' coordinates along each axis.
    """
    from scipy.ndimage import binary_dilation, map_coordinates
    opts = model_options(model, opts)
    band = opts.band if band is None else band
    axes = grid_axes(lo, hi, n)
    shape = tuple(len(a) for a in axes)
    step = axes[0][1] - axes[0][0]
    c = _coarse_factor((0.5 / model.levels[0][0].gamma) ** 0.5, step) if model.levels else 1
    cax = [a[0] + c * step * np.arange(-(-(len(a) - 1) // c) + 1) for a in axes]
    cg = np.stack(np.meshgrid(*cax, indexing="ij"), -1).reshape(-1, 3)
    first, rest = model.levels[:1], model.levels[1:]
    CG = model.f_normalised(cg, levels=first, opts=opts).reshape([len(a) for a in cax])
    CF = CG + model.f_normalised(cg, levels=rest, opts=opts).reshape(CG.shape)
    # the band: nodes near the points, and the coarse cells where f crosses 1
    near = np.zeros(shape, bool)
    blk = opts.block * 8
    for a in range(0, len(Z), blk):
        idx = np.rint((Z[a:a + blk] - lo) / step).astype(np.int64)
        idx = np.clip(idx, 0, np.array(shape) - 1)
        near[idx[:, 0], idx[:, 1], idx[:, 2]] = True
    near = binary_dilation(near, np.ones((3, 3, 3), bool), iterations=band)
    above = CF > 1.0
    cross = np.zeros(np.array(CF.shape) - 1, bool)
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                v = above[dx:dx + cross.shape[0], dy:dy + cross.shape[1], dz:dz + cross.shape[2]]
                cross |= v != above[:cross.shape[0], :cross.shape[1], :cross.shape[2]]
    cross = binary_dilation(cross, np.ones((3, 3, 3), bool))
    cross = np.repeat(np.repeat(np.repeat(cross, c, 0), c, 1), c, 2)
    pad = [(0, max(0, s - cs)) for s, cs in zip(shape, cross.shape)]
    near |= np.pad(cross, pad)[:shape[0], :shape[1], :shape[2]]
    del cross
    # coarse values everywhere (trilinear), exact local levels in the band
    F = np.empty(shape, np.float32)
    for i in range(shape[0]):
        jj, kk = np.meshgrid(np.arange(shape[1]), np.arange(shape[2]), indexing="ij")
        crd = np.stack([np.full(jj.size, i / c), jj.ravel() / c, kk.ravel() / c])
        F[i] = map_coordinates(CF, crd, order=1).reshape(jj.shape)
    idx = np.argwhere(near)
    del near
    # at the band's nodes: the first level from the coarse grid; the local
    # levels exact, or (a smooth one, sigma over 10 steps or more)
    # interpolated from its own coarser grid there
    extra = map_coordinates(CG, (idx / c).T, order=1)
    exact = []
    for lev in rest:
        f = _coarse_factor(lev.sigma, step)
        if f == 1:
            exact.append(lev)
            continue
        mark = np.zeros(np.array(shape) // f + 2, bool)
        for d in np.ndindex(2, 2, 2):
            q = idx // f + d
            mark[q[:, 0], q[:, 1], q[:, 2]] = True
        nodes = np.argwhere(mark)
        at = np.zeros(mark.shape)
        del mark
        at[tuple(nodes.T)] = model.f_normalised(lo + f * step * nodes, levels=[lev], opts=opts)
        extra += map_coordinates(at, (idx / f).T, order=1)
    chunk = 1 << 18
    n_tasks = -(-len(idx) // chunk)
    if runner is not None and getattr(runner, "client", None) is not None:
        from ..data.parallel import as_runner
        parts = as_runner(runner).map(_band_task, n_tasks, model, idx, lo, step, chunk, exact,
                                      progress=progress)
    else:
        parts = (_band_task(t, model, idx, lo, step, chunk, exact) for t in range(n_tasks))
    for t, v in enumerate(parts):
        p = idx[t * chunk:(t + 1) * chunk]
        F[p[:, 0], p[:, 1], p[:, 2]] = v + extra[t * chunk:(t + 1) * chunk]
        if progress is not None and (runner is None or getattr(runner, "client", None) is None):
            progress(t + 1, n_tasks)
    return F, axes


def _band_task(t, model, idx, lo, step, chunk, levels):
    """``levels`` at the band nodes ``idx[t * chunk : (t + 1) * chunk]``."""
    p = idx[t * chunk:(t + 1) * chunk]
    out = np.zeros(len(p))
    for lev in levels:
        lev.add_grid(p, lo, step, out)
    return out


def mesh(model: SurfaceModel, points: ArrayLike, *, grid: int | None = None, pad: float = 0.1,
         band: int | None = None, keep_far: bool = False, runner: Runner | None = None,
         progress: Callable[[int, int], object] | None = None,
         options: _Options = None) -> tuple[np.ndarray, np.ndarray]:
    """Mesh the level set f = 1 of a fitted model by marching cubes.

    The grid covers the points' box (far outliers,
    :func:`~streamcvm.apps.grid.inliers`, left out) grown by ``pad`` of its
    longest side on each side, with f from :func:`grid_values`. The grid's
    outer faces are set below the level, so every surface closes; pieces
    of the level set whose median vertex lies more than two grid steps (or
    half the points' spacing, when that is more) from the points are
    dropped (:func:`near_components`), and the vertices are moved onto
    f = 1 (:func:`project`).

    Parameters
    ----------
    model : SurfaceModel
        The fitted model (:func:`fit`).
    points : array_like of shape (n, 3)
        The points it was fitted on, in the original coordinates.
    grid : int, optional
        Grid points along the box's longest side. None:
        :func:`~streamcvm.apps.grid.default_grid` (``grid_per_spacing``
        steps per point spacing, ``min_grid`` to ``grid``). A grid that
        cannot fit in memory is refused
        (:func:`~streamcvm.apps.grid.check_grid`).
    pad : float, default 0.1
        The box's growth on each side, in its longest sides.
    band : int, optional
        f is exact within this many grid steps of the points. None:
        ``options.band``.
    keep_far : bool, default False
        Return a mesh that lies far from the points (:func:`check_near`)
        instead of raising :class:`FarMeshError`.
    runner : Runner, optional
        A runner with a dask client evaluates the grid's exact nodes on the
        cluster (:func:`grid_values`). None: this process.
    progress : callable, optional
        ``progress(done, total)`` gets the grid's chunk tasks done.
    options : SurfaceOptions or dict or None, optional
        A :class:`~streamcvm.options.SurfaceOptions`; None: those the model
        was fitted with; a dict: those with its fields changed.

    Returns
    -------
    vertices : ndarray of shape (v, 3), float64
        The mesh's vertices, in the original coordinates.
    faces : ndarray of shape (f, 3)
        The triangles, as indices into ``vertices``.

    Raises
    ------
    FarMeshError
        The mesh lies far from the points and ``keep_far`` is False.
    ValueError
        f does not cross 1 on the grid, or no piece of the level set lies
        near the points: no surface.
    """
    from skimage.measure import marching_cubes
    opts = model_options(model, options)
    P = _kept(check_points(points, opts), opts)
    Z = model.normalise(P[_sample(len(P), opts.max_points, model.params.get("seed", 0))])
    # the box of every point, not of the sample (which finds the band),
    # grown by pad of the longest side: a flat scan still gets a box to close in
    lo, hi = mesh_box(model, P, pad, opts)
    if grid is None:
        grid = default_grid(model, lo, hi, opts)
    check_grid(lo, hi, grid, options=opts)
    F, axes = grid_values(model, Z, lo, hi, grid, band=band, runner=runner, progress=progress,
                          opts=opts)
    level = 1.0
    if not (F.min() < level < F.max()):
        raise ValueError(f"f does not cross {level:g} on the grid (it spans {F.min():.3g} "
                         f".. {F.max():.3g}): no surface")
    low = min(float(F.min()), 0.0)
    F[0], F[-1], F[:, 0], F[:, -1], F[:, :, 0], F[:, :, -1] = low, low, low, low, low, low
    step = axes[0][1] - axes[0][0]
    V, faces, _, _ = marching_cubes(F, level=level, spacing=(step, step, step))
    # near: two grid steps, or half the points' spacing on a grid finer than them
    V, faces = near_components(V + lo, faces, Z,
                               max(2.0 * step, 0.5 * model.params.get("spacing", 0.0)))
    V = project(model, V, F, lo, step, opts=opts)
    del F
    if len(faces) == 0:
        raise ValueError("no piece of the level set f = 1 lies near the points: no surface "
                         "(points far from the rest? too few or too sparse points?)")
    far = check_near(model, V, Z, step, opts)
    if far is not None and not keep_far:
        raise FarMeshError(far)
    return V * model.scale + model.center, faces


def project(model, V, F, lo, step, rounds=None, opts=None):
    """Move a mesh's vertices onto f = 1 by Newton steps.

    Each step goes along the gradient of the grid's values (trilinear, over
    half a step), with f exact at the vertices, and moves a vertex at most
    half a grid step. Marching cubes places a vertex by linear
    interpolation along a cell edge, off the level set by the curvature of
    f across the cell.

    Parameters
    ----------
    model : SurfaceModel
        The fitted model.
    V : array_like of shape (v, 3)
        The vertices, normalised.
    F : ndarray of shape (nx, ny, nz)
        f on the grid (:func:`grid_values`).
    lo : array_like of shape (3,)
        The grid's first corner, normalised.
    step : float
        The grid's step, normalised.
    rounds : int, optional
        Newton steps. None: ``opts.project``.
    opts : SurfaceOptions or dict or None, optional
        The options. None: the model's; a dict: the model's with those
        fields changed.

    Returns
    -------
    ndarray of shape (v, 3)
        The moved vertices, normalised (float64, a copy).
    """
    from scipy.ndimage import map_coordinates
    opts = model_options(model, opts)
    rounds = opts.project if rounds is None else rounds
    V = np.array(V, np.float64)
    for _ in range(rounds):
        u = ((V - lo) / step).T
        g = np.empty_like(V)
        for a in range(3):
            e = np.zeros((3, 1))
            e[a] = 0.5
            g[:, a] = (map_coordinates(F, u + e, order=1) - map_coordinates(F, u - e, order=1)) / step
        g2 = np.maximum(np.einsum("ij,ij->i", g, g), 1e-30)
        move = ((model.f_normalised(V, opts=opts) - 1.0) / g2)[:, None] * g
        size = np.linalg.norm(move, axis=1)
        move *= np.minimum(1.0, 0.5 * step / np.maximum(size, 1e-300))[:, None]
        V -= move
    return V


def check_near(model, V, Z, step, options=None):
    """Tell whether a mesh lies near the points it was made from.

    A mesh is far when more than ``max_far`` of the points are further from
    every vertex than both ``far_steps`` grid steps and ``far_noise`` times
    the noise the fit found (the options' fields).

    Parameters
    ----------
    model : SurfaceModel
        The fitted model (its ``params`` give the noise and widths).
    V : array_like of shape (v, 3)
        The mesh's vertices, normalised.
    Z : array_like of shape (m, 3)
        The points, normalised.
    step : float
        The grid's step, normalised.
    options : SurfaceOptions or dict or None, optional
        The options. None: the model's; a dict: the model's with those
        fields changed.

    Returns
    -------
    str or None
        None when the mesh lies near the points; else why not, in one line.
    """
    from scipy.spatial import cKDTree
    opts = model_options(model, options)
    tol = max(opts.far_steps * step, opts.far_noise * model.params.get("noise", 0.0))
    d = cKDTree(V).query(Z, distance_upper_bound=tol, workers=-1)[0]
    share = float(np.mean(~np.isfinite(d)))
    if share <= opts.max_far:
        return None
    return (f"the mesh lies far from the points: {100 * share:.1f}% of them are more than "
            f"{100 * tol:.2g}% of the box diagonal from it (at most {100 * opts.max_far:g}% "
            f"allowed); the scan may be too noisy or too sparse for the widths "
            f"{', '.join(f'{s:g}' for s in model.params.get('used', []))}: try coarser "
            f"--scales or a finer --grid (--keep-far writes it anyway)")


def near_components(V, faces, points, tol):
    """Keep the pieces of a mesh that lie near the points.

    The level set can also cross where no point is: a connected component
    is kept when its median vertex lies within ``tol`` of the points.

    Parameters
    ----------
    V : ndarray of shape (v, 3)
        The vertices.
    faces : ndarray of shape (f, 3)
        The triangles, as indices into ``V``.
    points : array_like of shape (m, 3)
        The points, in the coordinates of ``V``.
    tol : float
        The largest median distance of a kept component's vertices to the
        points.

    Returns
    -------
    vertices : ndarray
        The kept vertices.
    faces : ndarray
        The kept triangles, the vertices renumbered.
    """
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
    """Tell whether a mesh is closed (watertight).

    Parameters
    ----------
    faces : ndarray of shape (f, 3)
        The triangles, as vertex indices.

    Returns
    -------
    bool
        True when there is a face and every edge of the mesh is shared by
        exactly two faces.
    """
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), 1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return bool(len(faces)) and bool((counts == 2).all())


def reconstruct(points: ArrayLike, *, grid: int | None = None, keep_far: bool = False,
                runner: Runner | None = None, log: Callable[[str], object] | None = None,
                progress: Callable[[int, int], object] | None = None, options: _Options = None,
                **fit_kw: Any) -> tuple[np.ndarray, np.ndarray, SurfaceModel]:
    """Fit and mesh the multi-scale CVR surface of a 3D point set.

    :func:`fit`, then :func:`mesh` with the options the fit used.

    Parameters
    ----------
    points : array_like of shape (n, 3)
        The points.
    grid : int, optional
        Grid points along the box's longest side (see :func:`mesh`). None:
        chosen from the points' spacing.
    keep_far : bool, default False
        Return a mesh that lies far from the points instead of raising
        :class:`FarMeshError`.
    runner : Runner, optional
        A runner with a dask client evaluates the grid on the cluster. None:
        this process.
    log : callable, optional
        ``log(line)`` gets one line of text per stage of the fit.
    progress : callable, optional
        ``progress(done, total)`` gets the grid's chunk tasks done.
    options : SurfaceOptions or dict or None, optional
        A :class:`~streamcvm.options.SurfaceOptions` or a dict of its fields,
        for the fit and the mesh. None: the defaults.
    **fit_kw
        :func:`fit`'s other arguments (``scales``, ``seed``,
        ``checkpoint_dir`` ...).

    Returns
    -------
    vertices : ndarray of shape (v, 3)
        The mesh's vertices, in the points' coordinates.
    faces : ndarray of shape (f, 3)
        The triangles, as indices into ``vertices``.
    model : SurfaceModel
        The fitted model.
    """
    model = fit(points, log=log, options=options, **fit_kw)
    V, faces = mesh(model, points, grid=grid, keep_far=keep_far, runner=runner,
                    progress=progress)
    return V, faces, model
