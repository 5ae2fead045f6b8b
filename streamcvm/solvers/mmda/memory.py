"""MMDA's in-memory route (pure numba): Algorithm 1 of the mmda paper in one
compiled loop per direction, for rows held in memory, over the kernel
columns of :mod:`.rowkernels`."""
import numpy as np
from numba import njit

from .rowkernels import column_cached
from .sor import _sor


@njit(cache=True, nogil=True)
def _draw(cands, need, incore, out, m):
    """``need`` uniform random rows of ``cands`` not in the core set (with
    replacement, as ChunkPool.draw) appended to ``out[m:]``; returns the count."""
    if len(cands) == 0:
        return m
    for _ in range(need):
        for _try in range(64):
            r = cands[np.random.randint(0, len(cands))]
            if not incore[r]:
                out[m] = r
                m += 1
                break
    return m


@njit(cache=True, nogil=True, fastmath=True)
def _dot(k, w, t):
    """``sum_j k_j w_j`` over the first ``t`` entries (float32 ``k``)."""
    acc = 0.0
    for j in range(t):
        acc += np.float64(k[j]) * w[j]
    return acc


@njit(cache=True, nogil=True)
def _grow(a, n):
    """``a`` (a vector) in a longer buffer of ``n`` entries."""
    b = np.zeros(n, a.dtype)
    b[:len(a)] = a
    return b


@njit(cache=True, nogil=True)
def _fit_memory(X, ys, neg, pos, P, C, levels, patience, m, init_size, max_core, tol, loose,
                omega, seed, code, gamma, GC, slot_of, id_of, ring, Kf, G):
    """Algorithm 1 on rows ``X`` in memory (labels ``ys`` +-1, 0: neither
    side; sides ``neg`` / ``pos``; ``P`` [rows, s] the projections onto the
    directions before): the core set grows one furthest violator at a time,
    the core matrix in place (``[g; a]``: the free coordinates first, so a
    row entering appends a row and a column), its gradient kept up to date
    and SOR warm started from the previous solution. A row's kernel column
    (``column_cached``) serves its distances to the center and its row of G.
    Returns (core rows, x = [g; a], G, K among the core rows (float32 columns
    [rows, t]), steps, solves, history [levels, 5] (core size, c2, R2, SOR
    steps, samples drawn))."""
    np.random.seed(seed)
    n = X.shape[0]
    s = P.shape[1]
    kt = 2.0 + 1.0 / C
    cap = Kf.shape[1] - 16      # Kf [rows, cap + 16], G: buffers kept from direction to direction
    if G.shape[0] < s + cap:
        G = np.empty((s + cap, s + cap))
    core = np.empty(cap, np.int64)
    G[:s, :s] = 0.0
    x = np.zeros(s + cap)
    grad = np.zeros(s + cap)
    invd = np.ones(s + cap)
    for q in range(s):
        G[q, q] = 1.0
    incore = np.zeros(n, np.bool_)
    sample = np.empty(max(m, init_size), np.int64)
    ay = np.zeros(cap)
    hist = np.zeros((len(levels), 5))
    draws = 0
    t = 0
    steps = 0
    solves = 0
    # the first rows: init_size random rows, half of each side
    k = _draw(neg, init_size - init_size // 2, incore, sample, 0)
    for i in range(k):
        incore[sample[i]] = True
    k2 = _draw(pos, init_size // 2, incore, sample, k)
    for i in range(k, k2):
        incore[sample[i]] = True
    first = sample[:k2].copy()
    c2 = 0.0
    R2 = 0.0
    for e in range(len(levels) + 1):
        calm = 0
        while calm < patience:
            if e == 0:              # the first rows enter, then one solve
                new = first
                calm = patience
            else:
                draws += 1
                cnt = _draw(neg, m - m // 2, incore, sample, 0)
                cnt = _draw(pos, m // 2, incore, sample, cnt)
                if cnt == 0:
                    break
                # the furthest sampled row: d2 = c2 - 2 y (K~a)_l + kt
                inv = 1.0 / x[s:s + t].sum()
                ay1 = 0.0
                for j in range(t):
                    ay[j] = x[s + j] * ys[core[j]]
                    ay1 += ay[j]
                best, bk = -np.inf, -1
                for i in range(cnt):
                    r = sample[i]
                    ka = ay1 + _dot(Kf[r], ay, t)
                    for q in range(s):
                        ka += x[q] * P[r, q]
                    d2 = c2 - 2.0 * ys[r] * ka * inv + kt
                    if d2 > best:
                        best, bk = d2, i
                full = max_core >= 0 and t >= max_core
                eps = levels[e - 1]
                if best <= (1.0 + eps) ** 2 * R2 or full:
                    calm += 1
                    continue
                calm = 0
                new = sample[bk:bk + 1].copy()
            for r in new:
                if t == cap:
                    cap *= 2
                    core = _grow(core, cap)
                    ay = _grow(ay, cap)
                    Kf2 = np.empty((n, cap + 16), np.float32)
                    Kf2[:, :t] = Kf[:, :t]
                    Kf = Kf2
                    G2 = np.empty((s + cap, s + cap))
                    G2[:s + t, :s + t] = G[:s + t, :s + t]
                    G = G2
                    x = _grow(x, s + cap)
                    grad = _grow(grad, s + cap)
                    invd = _grow(invd, s + cap)
                col = column_cached(X, r, code, gamma, GC, slot_of, id_of, ring)
                for i in range(n):
                    Kf[i, t] = col[i]
                incore[r] = True
                core[t] = r
                kk = s + t
                yr = ys[r]
                g = -1.0
                for j in range(t):
                    v = yr * ys[core[j]] * (np.float64(Kf[r, j]) + 1.0)
                    G[kk, s + j] = v
                    G[s + j, kk] = v
                    g += v * x[s + j]
                for q in range(s):
                    v = yr * P[r, q]
                    G[kk, q] = v
                    G[q, kk] = v
                    g += v * x[q]
                G[kk, kk] = np.float64(Kf[r, t]) + 1.0 + 1.0 / C
                invd[kk] = 1.0 / G[kk, kk]
                x[kk] = 0.0
                grad[kk] = g + G[kk, kk] * x[kk]
                t += 1
            if e == 0:               # alpha = 1/t, then the full gradient once
                for j in range(t):
                    x[s + j] = 1.0 / t
                for j in range(s + t):
                    acc = -1.0 if j >= s else 0.0
                    for i in range(s + t):
                        acc += G[j, i] * x[i]
                    grad[j] = acc
            sa = x[s:s + t].sum()
            rel = max(tol, loose * levels[max(e - 1, 0)])
            steps += _sor(G, x, grad, invd, s, s + t, omega, rel * max(sa, 1.0), 10_000_000)
            solves += 1
            # ||c||^2 = x'Gx / (1'a)^2 = (x'grad + 1'a) / (1'a)^2 (eqs. 23, 35)
            sa = x[s:s + t].sum()
            xg = 0.0
            for j in range(s + t):
                xg += x[j] * grad[j]
            c2 = (xg + sa) / (sa * sa)
            R2 = kt - c2
        if e > 0:
            hist[e - 1, 0] = t
            hist[e - 1, 1] = c2
            hist[e - 1, 2] = R2
            hist[e - 1, 3] = steps
            hist[e - 1, 4] = draws
    if loose > 0.0:             # the last core set's QP to the tolerance asked
        sa = x[s:s + t].sum()
        steps += _sor(G, x, grad, invd, s, s + t, omega, tol * max(sa, 1.0), 10_000_000)
        hist[len(levels) - 1, 3] = steps
    K = np.empty((t, t), np.float32)
    for i in range(t):
        for j in range(t):
            K[i, j] = Kf[core[i], j]
    return (core[:t].copy(), x[:s + t].copy(), G[:s + t, :s + t].copy(), K, steps, solves, hist,
            Kf, G)
