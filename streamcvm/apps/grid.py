"""The grid a surface is meshed on: the box around the points (far
outliers left out), how many grid points it gets by default (from the point
spacing), and the memory check a grid must pass before any work. Their
settings (``grid`` ... ``outlier_reach``) are fields of
:class:`~streamcvm.options.SurfaceOptions`: each function here takes
``options`` (a SurfaceOptions, a dict of its fields, or None: the defaults,
or for a model the options it was fitted with)."""
import os

import numpy as np

from ..options import SurfaceOptions, resolve


def model_options(model, options=None):
    """The options for work on a fitted ``model``: ``options`` (a
    :class:`~streamcvm.options.SurfaceOptions`), or those the model was
    fitted with (None), or those with the fields of a dict changed."""
    base = getattr(model, "options", None)
    base = SurfaceOptions() if base is None else base
    if options is None:
        return base
    if isinstance(options, dict):
        return SurfaceOptions.from_dict(dict(base.changed(), **options))
    return resolve(options, SurfaceOptions)


def inliers(P, options=None):
    """A mask of the points ``P`` [n, 3] (float64) that are not far
    outliers: within the box of their ``outlier_quantile`` to ``1 -
    outlier_quantile`` quantiles per axis, grown on each side by
    ``outlier_reach`` times its longest side (``options``' fields). A few
    stray points far away would otherwise set the box, the scale and the
    grid, and the surface would shrink to a few grid cells."""
    opts = resolve(options, SurfaceOptions)
    S = P[:: max(1, len(P) // 1_000_000)]
    lo, hi = np.quantile(S, [opts.outlier_quantile, 1.0 - opts.outlier_quantile], axis=0)
    reach = opts.outlier_reach * float((hi - lo).max())
    return ((P >= lo - reach) & (P <= hi + reach)).all(axis=1)


def grid_axes(lo, hi, n):
    """The axes of a grid over the box [lo, hi], ``n`` points along the
    longest side, the same step on all three."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    step = (hi - lo).max() / (n - 1)
    return [lo[i] + step * np.arange(int(np.ceil((hi[i] - lo[i]) / step - 1e-9)) + 1)
            for i in range(3)]


def _available_bytes():
    """The memory available to this process (MemAvailable, else all of it)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def points_box(P, pad=0.1, options=None):
    """(lo, hi): the box meshed around the points ``P`` (far outliers left
    out, :func:`inliers` with ``options``): their box grown by ``pad`` of its
    longest side on each side."""
    P = np.asarray(P, np.float64)
    P = P[inliers(P, options)]
    lo, hi = P.min(0), P.max(0)
    grow = pad * (hi - lo).max()
    return lo - grow, hi + grow


def default_grid(model, lo, hi, options=None):
    """Grid points along the longest side of the box [lo, hi]
    (normalised): ``grid_per_spacing`` steps per point spacing (the median
    distance to the 16th neighbour, as the fit found it), ``min_grid`` to
    ``grid`` (``options``' fields; None: the model's). A finer grid than the
    points resolve puts its vertices between the points, further from them
    than a few steps."""
    opts = model_options(model, options)
    spacing = model.params.get("spacing")
    if not spacing or not np.isfinite(spacing):
        return opts.grid
    n = int(np.ceil(float((np.asarray(hi) - lo).max()) * opts.grid_per_spacing / spacing)) + 1
    return int(min(opts.grid, max(opts.min_grid, n)))


def check_grid(lo, hi, n, available=None, options=None):
    """A one-line ValueError naming ``--grid`` when a grid of ``n`` points
    along the longest side of [lo, hi] needs more memory (``grid_bytes`` a
    node, a field of ``options``) than is available."""
    opts = resolve(options, SurfaceOptions)
    shape = [len(a) for a in grid_axes(lo, hi, n)] if n <= 100_000 else [n, n, n]
    need = opts.grid_bytes * float(np.prod(np.asarray(shape, np.float64)))
    have = _available_bytes() if available is None else available
    if have is not None and need > have:
        raise ValueError(f"--grid {n}: a grid of {' x '.join(str(s) for s in shape)} nodes "
                         f"needs about {need / 2 ** 30:,.1f} GiB, more than the "
                         f"{have / 2 ** 30:,.1f} GiB of memory available: use a smaller --grid")
