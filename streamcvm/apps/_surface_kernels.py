"""The numba kernel of :mod:`streamcvm.apps.surface` (apart, so that importing
the surface module, as the command line's parser does for its defaults,
compiles nothing)."""
import numpy as np
from numba import njit


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
