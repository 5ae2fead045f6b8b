"""SOR for MMDA's core QP (mmda paper, Algorithm 3), pure numba: coordinate
steps on ``min 1/2 x'Gx - [1; 0]'x``, the largest projected move first.
"""
import numpy as np
from numba import njit

from ...options import default

@njit(cache=True, nogil=True)
def _sor(G, x, grad, invd, s, n, omega, tol, max_iter):
    """Algorithm 3's loop on the leading ``n`` coordinates of ``x`` and their
    gradient, in place; the first ``s`` are free, the others ``>= 0``;
    ``invd`` = 1 / diag(G) (a vector: the diagonal is one page apart per
    entry in G). Each step moves the coordinate whose projected move is
    largest (the first of equals). Returns the steps.

    The moves are written to a buffer and their largest found by eight
    running maxima, then its first index by a scan, rather than in one loop
    that keeps the index: that loop waited on each compare before the next
    (optdigits' 50 features, 710K steps on up to ~300 coordinates: the whole
    fit took ~1.3x as long). The same arithmetic, so the same steps to the bit."""
    mv = np.empty(n)
    best = _moves(x, grad, invd, s, n, omega, mv)
    for step in range(1, max_iter + 1):
        if not best > tol:          # (no move at all: best = 0)
            return step
        bi = _first_equal(mv, best, n)
        x[bi] += mv[bi]
        _axpy(G[bi], grad, mv[bi], n)      # G is symmetric: its row, contiguous
        best = _moves(x, grad, invd, s, n, omega, mv)
    return max_iter


@njit(cache=True, nogil=True)
def _moves(x, grad, invd, s, n, omega, mv):
    """Every coordinate's projected move into ``mv``; returns the largest |move|."""
    for j in range(s):
        mv[j] = -omega * grad[j] * invd[j]
    _clipped_moves(x[s:n], grad[s:n], invd[s:n], omega, mv[s:n])
    return _abs_max(mv[:n])


@njit(cache=True, nogil=True)
def _clipped_moves(x, grad, invd, omega, mv):
    """The moves of coordinates ``>= 0``: to the clipped Gauss-Seidel value.
    (Indexed from 0 on slices: numba then knows the index is not negative and
    loads contiguous lanes; indexed by ``range(s, n)`` it compiled to gathers.)"""
    for k in range(len(x)):
        xj = x[k]
        v = xj - omega * grad[k] * invd[k]
        mv[k] = (v if v > 0.0 else 0.0) - xj


@njit(cache=True, nogil=True)
def _abs_max(v):
    """The largest |v_i| (0 for an empty v), by eight running maxima."""
    n = len(v)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    k = n - n % 8
    for i in range(0, k, 8):
        a0 = max(a0, abs(v[i]))
        a1 = max(a1, abs(v[i + 1]))
        a2 = max(a2, abs(v[i + 2]))
        a3 = max(a3, abs(v[i + 3]))
        a4 = max(a4, abs(v[i + 4]))
        a5 = max(a5, abs(v[i + 5]))
        a6 = max(a6, abs(v[i + 6]))
        a7 = max(a7, abs(v[i + 7]))
    m = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
    for i in range(k, n):
        m = max(m, abs(v[i]))
    return m


@njit(cache=True, nogil=True)
def _first_equal(v, m, n):
    """The first index ``i < n`` with ``|v_i| == m``."""
    for i in range(n):
        if abs(v[i]) == m:
            return i
    return n - 1


@njit(cache=True, nogil=True, fastmath=True)
def _axpy(row, y, a, n):
    for j in range(n):
        y[j] += row[j] * a


def sor(G, a0, g0, omega=default("mmda_sor_omega"), tol=1e-8, max_iter=10_000_000):
    """Algorithm 3: coordinate steps on ``min 1/2 x'Gx - [1; 0]'x``, ``x = [a;
    g]``, ``a >= 0`` (the first ``len(a0)`` coordinates), each time on the
    coordinate whose projected step is largest, until no step exceeds
    ``tol``. Warm start from ``(a0, g0)``. Returns ``(a, g, steps)``.
    (:class:`MMDASolver` keeps ``[g; a]`` and its gradient in place instead.)"""
    t = len(a0)
    G = np.asarray(G, np.float64)
    perm = np.r_[np.arange(t, len(G)), np.arange(t)]        # [g; a]: the free ones first
    Gp = np.ascontiguousarray(G[np.ix_(perm, perm)])
    x = np.concatenate([np.asarray(g0, np.float64), np.asarray(a0, np.float64)])
    lin = np.concatenate([np.zeros(len(x) - t), np.ones(t)])
    grad = Gp @ x - lin
    s = len(x) - t
    invd = 1.0 / np.diagonal(Gp)
    steps = _sor(Gp, x, grad, invd, s, len(x), float(omega), float(tol), int(max_iter))
    return x[s:], x[:s], steps
