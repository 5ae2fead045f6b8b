"""The grid a surface is meshed on: the box around the points (far
outliers left out), how many grid points it gets by default (from the point
spacing), and the memory check a grid must pass before any work."""
import os

import numpy as np

GRID = 192                      # grid points along the longest side, at most (default) ...
MIN_GRID = 32                   # ... and at least
GRID_PER_SPACING = 4            # grid steps per point spacing (default grid)
GRID_BYTES = 16                 # bytes a grid node takes while meshing (values, masks, copies)
OUTLIER_QUANTILE = 0.02         # the central box: these quantiles per axis ...
OUTLIER_REACH = 1.0             # ... grown by this many of its longest sides: beyond is far


def inliers(P):
    """A mask of the points ``P`` [n, 3] (float64) that are not far
    outliers: within the box of their ``OUTLIER_QUANTILE`` to ``1 -
    OUTLIER_QUANTILE`` quantiles per axis, grown on each side by
    ``OUTLIER_REACH`` times its longest side. A few stray points far away
    would otherwise set the box, the scale and the grid, and the surface
    would shrink to a few grid cells."""
    S = P[:: max(1, len(P) // 1_000_000)]
    lo, hi = np.quantile(S, [OUTLIER_QUANTILE, 1.0 - OUTLIER_QUANTILE], axis=0)
    reach = OUTLIER_REACH * float((hi - lo).max())
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


def points_box(P, pad=0.1):
    """(lo, hi): the box meshed around the points ``P`` (far outliers left
    out, :func:`inliers`): their box grown by ``pad`` of its longest side on
    each side."""
    P = np.asarray(P, np.float64)
    P = P[inliers(P)]
    lo, hi = P.min(0), P.max(0)
    grow = pad * (hi - lo).max()
    return lo - grow, hi + grow


def default_grid(model, lo, hi):
    """Grid points along the longest side of the box [lo, hi]
    (normalised): ``GRID_PER_SPACING`` steps per point spacing (the median
    distance to the 16th neighbour, as the fit found it), ``MIN_GRID`` to
    ``GRID``. A finer grid than the points resolve puts its vertices between
    the points, further from them than a few steps."""
    spacing = model.params.get("spacing")
    if not spacing or not np.isfinite(spacing):
        return GRID
    n = int(np.ceil(float((np.asarray(hi) - lo).max()) * GRID_PER_SPACING / spacing)) + 1
    return int(min(GRID, max(MIN_GRID, n)))


def check_grid(lo, hi, n, available=None):
    """A one-line ValueError naming ``--grid`` when a grid of ``n`` points
    along the longest side of [lo, hi] needs more memory (``GRID_BYTES`` a
    node) than is available."""
    shape = [len(a) for a in grid_axes(lo, hi, n)] if n <= 100_000 else [n, n, n]
    need = GRID_BYTES * float(np.prod(np.asarray(shape, np.float64)))
    have = _available_bytes() if available is None else available
    if have is not None and need > have:
        raise ValueError(f"--grid {n}: a grid of {' x '.join(str(s) for s in shape)} nodes "
                         f"needs about {need / 2 ** 30:,.1f} GiB, more than the "
                         f"{have / 2 ** 30:,.1f} GiB of memory available: use a smaller --grid")
