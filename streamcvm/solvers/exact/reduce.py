"""The exact SMO solvers' vectorised reductions (pure numba): the largest
score and gradient, and the smallest gradient, of every row in blocks of
``BLOCK`` rows, each reduced in ``LANES`` running extrema (a loop numba
vectorises; one running extremum would not be). ``BLOCK`` and ``LANES`` are
the compiled loops' shape, not settings: every row's value is the same
whatever they are; only the vector code changes.
"""
import numpy as np
from numba import njit

FAST = {"nnan", "ninf", "nsz"}      # max / min reductions vectorise; arithmetic as written
BLOCK = 256     # rows per block of the argmin / argmax passes
LANES = 16      # running minima / maxima per block
F0 = np.float32(0.0)
F1 = np.float32(1.0)
TINY = np.float32(1e-12)
NEG = np.float32(-np.inf)


@njit(cache=True, nogil=True, fastmath=FAST)
def _max_block(s, g):
    """(max s, the first block of ``BLOCK`` rows holding it, max g): each
    block reduced in ``LANES`` running maxima (a loop numba vectorises; one
    running maximum would not be)."""
    m = len(s)
    best = NEG
    gmax = NEG
    bb = -1
    accs = np.empty(LANES, np.float32)
    accg = np.empty(LANES, np.float32)
    for b0 in range(0, m, BLOCK):
        b1 = min(b0 + BLOCK, m)
        n = b0 + (b1 - b0) // LANES * LANES
        accs[:] = NEG
        accg[:] = NEG
        for k0 in range(b0, n, LANES):
            for l in range(LANES):
                v = s[k0 + l]
                accs[l] = v if v > accs[l] else accs[l]
                v = g[k0 + l]
                accg[l] = v if v > accg[l] else accg[l]
        bs = NEG
        for k in range(n, b1):
            bs = max(bs, s[k])
            gmax = max(gmax, g[k])
        for l in range(LANES):
            bs = max(bs, accs[l])
            gmax = max(gmax, accg[l])
        if bs > best:
            best = bs
            bb = b0
    return best, bb, gmax


@njit(cache=True, nogil=True, fastmath=FAST)
def _lowest(hp, hm):
    """The smallest h: (row, sign). Blocks and lanes as :func:`_max_block`."""
    m = len(hp)
    lo = np.float32(np.inf)
    bb = np.int64(0)        # (not the literal 0: numba would compile _argmin_in twice)
    acc = np.empty(LANES, np.float32)
    for b0 in range(0, m, BLOCK):
        b1 = min(b0 + BLOCK, m)
        n = b0 + (b1 - b0) // LANES * LANES
        acc[:] = np.float32(np.inf)
        for k0 in range(b0, n, LANES):
            for l in range(LANES):
                p = hp[k0 + l]
                q = hm[k0 + l]
                v = p if p < q else q
                acc[l] = v if v < acc[l] else acc[l]
        bl = np.float32(np.inf)
        for k in range(n, b1):
            bl = min(bl, min(hp[k], hm[k]))
        for l in range(LANES):
            bl = min(bl, acc[l])
        if bl < lo:
            lo = bl
            bb = b0
    return _argmin_in(hp, hm, bb, lo)


@njit(cache=True, nogil=True)
def _argmin_in(hp, hm, b0, lo):
    """The first row from ``b0`` holding the value ``lo``: (row, sign)."""
    for k in range(b0, len(hp)):
        if hp[k] == lo:
            return k, 1.0
        if hm[k] == lo:
            return k, -1.0
    return -1, 0.0
