"""Numba kernels that format blocks of rows as svmlight or CSV text.

Used to write large synthetic text files (benchmarks, the demo) quickly;
``np.savetxt`` manages only a few MB/s. Values are written with a fixed
number of decimals (trailing zeros trimmed), which round-trips exactly
through any correct parser to the value rounded to that many decimals.
"""
import numpy as np
from numba import njit

from ..._numba_cache import ensure as _ensure_numba_cache

_ensure_numba_cache()       # before the first compiled kernel is defined


@njit(cache=True, nogil=True)
def _put_int(out, p, v):
    if v == 0:
        out[p] = 48
        return p + 1
    tmp = np.empty(20, np.uint8)
    k = 0
    while v > 0:
        tmp[k] = 48 + v % 10
        v //= 10
        k += 1
    for j in range(k):
        out[p + j] = tmp[k - 1 - j]
    return p + k


@njit(cache=True, nogil=True)
def _put_float(out, p, v, decimals, scale):
    if v != v:
        out[p] = 110
        out[p + 1] = 97
        out[p + 2] = 110
        return p + 3
    if v < 0:
        q = np.int64(np.floor(-v * scale + 0.5))
        if q == 0:
            out[p] = 48
            return p + 1
        out[p] = 45
        p += 1
    else:
        q = np.int64(np.floor(v * scale + 0.5))
    ip = q // np.int64(scale)
    fp = q - ip * np.int64(scale)
    p = _put_int(out, p, ip)
    if fp != 0:
        out[p] = 46
        p += 1
        digs = np.empty(decimals, np.uint8)
        for j in range(decimals - 1, -1, -1):
            digs[j] = 48 + fp % 10
            fp //= 10
        last = decimals
        while last > 0 and digs[last - 1] == 48:
            last -= 1
        for j in range(last):
            out[p + j] = digs[j]
        p += last
    return p


@njit(cache=True, nogil=True)
def format_svmlight(y, indptr, indices, data, decimals, one_based):
    """CSR rows -> svmlight bytes (``label i:v ...\\n``)."""
    n = len(y)
    cap = n * 24 + len(data) * (32 + decimals)
    out = np.empty(cap, np.uint8)
    scale = 10.0 ** decimals
    off = 1 if one_based else 0
    p = 0
    for r in range(n):
        p = _put_float(out, p, y[r], decimals, scale)
        for k in range(indptr[r], indptr[r + 1]):
            out[p] = 32
            p = _put_int(out, p + 1, np.int64(indices[k]) + off)
            out[p] = 58
            p = _put_float(out, p + 1, data[k], decimals, scale)
        out[p] = 10
        p += 1
    return out[:p]


@njit(cache=True, nogil=True)
def format_csv(y, X, decimals, delim):
    """Dense rows -> delimited bytes with the label first."""
    n, d = X.shape
    out = np.empty(n * (24 + d * (24 + decimals)), np.uint8)
    scale = 10.0 ** decimals
    p = 0
    for r in range(n):
        p = _put_float(out, p, y[r], decimals, scale)
        for j in range(d):
            out[p] = delim
            p = _put_float(out, p + 1, X[r, j], decimals, scale)
        out[p] = 10
        p += 1
    return out[:p]
