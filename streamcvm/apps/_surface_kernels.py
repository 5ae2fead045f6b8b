"""The numba kernels of :mod:`streamcvm.apps.surface` (apart, so that importing
the surface module, as the command line's parser does for its defaults,
compiles nothing)."""
import numpy as np
from numba import njit, prange

from ..solvers.smo import smo_simplex


@njit(cache=True)
def orient(indptr, indices, N, starts):
    """Signs (+-1) for the normals ``N``: breadth first over the forest
    (CSR ``indptr``, ``indices``), each tree from its first point in
    ``starts``, signed to point along +x; each point then agrees with the
    point it was reached from. O(points + edges)."""
    n = N.shape[0]
    sign = np.zeros(n)
    queue = np.empty(n, np.int64)
    for s in starts:
        if sign[s] != 0:
            continue
        sign[s] = 1.0 if N[s, 0] >= 0 else -1.0
        head, tail = 0, 1
        queue[0] = s
        while head < tail:
            i = queue[head]
            head += 1
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                if sign[j] == 0:
                    d = N[i, 0] * N[j, 0] + N[i, 1] * N[j, 1] + N[i, 2] * N[j, 2]
                    sign[j] = sign[i] if d >= 0 else -sign[i]
                    queue[tail] = j
                    tail += 1
    return sign


@njit(cache=True, nogil=True)
def _solve_block(X, t, gamma, ic0, two_over_C, C, tol, max_iter, coef):
    """The L2-SVR dual of one block's rows ``X`` [m, 3], targets ``t``
    (:class:`~streamcvm.solvers.points.SignedPoints`: each row twice, signs
    +-1, ``Q = s s' (K + 1) + ic0 I``, ``q = diag(Q) + two_over_C s t`` up to
    a constant), solved exactly by SMO over all 2m points. Writes each row's
    coefficient ``C (a_+ - a_-)`` to ``coef``; returns the intercept
    ``C sum a s``."""
    m = X.shape[0]
    n = 2 * m
    K = np.empty((n, n), np.float32)
    for i in range(m):
        for j in range(i, m):
            d = 0.0
            for c in range(3):
                v = X[i, c] - X[j, c]
                d += v * v
            k = np.float32(np.exp(-gamma * d))
            K[i, j] = k
            K[j, i] = k
            K[i + m, j + m] = k
            K[j + m, i + m] = k
            K[i, j + m] = k
            K[j + m, i] = k
            K[i + m, j] = k
            K[j, i + m] = k
    y = np.empty(n)
    q = np.empty(n)
    ic = np.full(n, ic0)
    best = 0
    for i in range(n):
        y[i] = 1.0 if i < m else -1.0
        q[i] = 2.0 + ic0 + two_over_C * y[i] * t[i % m]
        if q[i] > q[best]:
            best = i
    alpha = np.zeros(n)
    alpha[best] = 1.0
    g = np.empty(n)
    for i in range(n):
        v = y[i] * y[best] * (np.float64(K[i, best]) + 1.0)
        if i == best:
            v += ic0
        g[i] = 2.0 * v - q[i]
    smo_simplex(K, y, 1.0, ic, alpha, g, n, tol, max_iter)
    b = 0.0
    for i in range(m):
        coef[i] = C * (alpha[i] - alpha[i + m])
        b += coef[i]
    return b


@njit(cache=True, parallel=True)
def solve_blocks(X, t, ptr, gamma, ic0, two_over_C, C, tol, max_iter, coef, intercept):
    """:func:`_solve_block` for every block ``b``: rows ``ptr[b]:ptr[b + 1]``
    of ``X``, ``t`` (each block's rows contiguous), coefficients into the
    same rows of ``coef``, intercepts into ``intercept[b]``."""
    for b in prange(len(ptr) - 1):
        a, e = ptr[b], ptr[b + 1]
        intercept[b] = _solve_block(X[a:e], t[a:e], gamma, ic0, two_over_C, C, tol, max_iter,
                                    coef[a:e])


@njit(cache=True, nogil=True, inline="always")
def _weight(f):
    """The partition of unity's weight of the node below a coordinate at
    fraction ``f`` of its cell (the node above gets 1 - it): cos^2, C1."""
    c = np.cos(0.5 * np.pi * f)
    return c * c


@njit(cache=True, parallel=True, fastmath=True)
def local_values(Q, origin, L, node_block, bptr, sv, coef, intercept, gamma, cut, out):
    """Adds a local level's value at points ``Q`` [n, 3] to ``out``: the
    blend, by a C1 partition of unity over the nodes ``origin + L * (i, j,
    k)``, of the 8 surrounding nodes' block expansions (``node_block``: the
    block of each node, -1 none; block b's support vectors ``bptr[b] :
    bptr[b + 1]`` of ``sv``, ``coef``; its ``intercept[b]``). Kernel values
    below exp(-``cut``) are skipped (``SurfaceOptions.cut``: 16, exp(-16) = 1.1e-7,
    a support vector further than 5.7 widths adds nothing)."""
    nx, ny, nz = node_block.shape
    reach = cut / gamma
    for i in prange(Q.shape[0]):
        u0 = (Q[i, 0] - origin[0]) / L
        u1 = (Q[i, 1] - origin[1]) / L
        u2 = (Q[i, 2] - origin[2]) / L
        b0, b1, b2 = int(np.floor(u0)), int(np.floor(u1)), int(np.floor(u2))
        w0, w1, w2 = _weight(u0 - b0), _weight(u1 - b1), _weight(u2 - b2)
        acc = 0.0
        for a in range(2):
            ia = b0 + a
            if ia < 0 or ia >= nx:
                continue
            wa = w0 if a == 0 else 1.0 - w0
            for b in range(2):
                ib = b1 + b
                if ib < 0 or ib >= ny:
                    continue
                wb = wa * (w1 if b == 0 else 1.0 - w1)
                for c in range(2):
                    ic = b2 + c
                    if ic < 0 or ic >= nz:
                        continue
                    blk = node_block[ia, ib, ic]
                    if blk < 0:
                        continue
                    s = intercept[blk]
                    for p in range(bptr[blk], bptr[blk + 1]):
                        d = 0.0
                        for k in range(3):
                            v = Q[i, k] - sv[p, k]
                            d += v * v
                        if d < reach:
                            s += coef[p] * np.exp(-gamma * d)
                    acc += wb * (w2 if c == 0 else 1.0 - w2) * s
        out[i] += acc


@njit(cache=True, parallel=True, fastmath=True)
def local_grid_values(idx, lo, step, origin, L, node_block, block_node, bptr, sv, coef,
                      intercept, gamma, out):
    """:func:`local_values` at the grid nodes ``lo + step * idx`` (``idx``
    [n, 3] integer), by the Gaussian's separability: each block's
    exp(-gamma (x - s)^2) is tabled per axis over the grid lines crossing
    its support, so a node costs three products per support vector and no
    exp (``block_node``: each block's node)."""
    nb = len(intercept)
    W = int(2.0 * L / step) + 3
    first = np.empty((nb, 3), np.int64)
    T = np.empty((3, W * bptr[nb]), np.float32)
    for b in prange(nb):
        s0, s1 = bptr[b], bptr[b + 1]
        for a in range(3):
            i0 = int(np.floor((origin[a] + (block_node[b, a] - 1) * L - lo[a]) / step))
            first[b, a] = i0
            for w in range(W):
                x = lo[a] + (i0 + w) * step
                for p in range(s0, s1):
                    d = x - sv[p, a]
                    T[a, W * s0 + w * (s1 - s0) + p - s0] = np.exp(-gamma * d * d)
    nx, ny, nz = node_block.shape
    for i in prange(idx.shape[0]):
        q0 = lo[0] + idx[i, 0] * step
        q1 = lo[1] + idx[i, 1] * step
        q2 = lo[2] + idx[i, 2] * step
        u0, u1, u2 = (q0 - origin[0]) / L, (q1 - origin[1]) / L, (q2 - origin[2]) / L
        b0, b1, b2 = int(np.floor(u0)), int(np.floor(u1)), int(np.floor(u2))
        w0, w1, w2 = _weight(u0 - b0), _weight(u1 - b1), _weight(u2 - b2)
        acc = 0.0
        for a in range(2):
            ia = b0 + a
            if ia < 0 or ia >= nx:
                continue
            wa = w0 if a == 0 else 1.0 - w0
            for b in range(2):
                ib = b1 + b
                if ib < 0 or ib >= ny:
                    continue
                wb = wa * (w1 if b == 0 else 1.0 - w1)
                for c in range(2):
                    ic = b2 + c
                    if ic < 0 or ic >= nz:
                        continue
                    blk = node_block[ia, ib, ic]
                    if blk < 0:
                        continue
                    s0, s1 = bptr[blk], bptr[blk + 1]
                    n = s1 - s0
                    ox = W * s0 + (idx[i, 0] - first[blk, 0]) * n
                    oy = W * s0 + (idx[i, 1] - first[blk, 1]) * n
                    oz = W * s0 + (idx[i, 2] - first[blk, 2]) * n
                    s = 0.0
                    for p in range(n):
                        s += coef[s0 + p] * (T[0, ox + p] * T[1, oy + p] * T[2, oz + p])
                    acc += wb * (w2 if c == 0 else 1.0 - w2) * (intercept[blk] + s)
        out[i] += acc
