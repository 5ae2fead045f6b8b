"""Decision values of a trained model's machines on rows in memory.

The machines of a multi-class model share support rows: their kernel blocks
are computed once against the union of those rows, sorted by class, then per
class one product of its columns with the coefficients of the machines that
class takes part in (:func:`build_union`, :func:`union_values`). Compact
expansions (:mod:`streamcvm.problems.compress`) replace the full ones when
they are smaller by far (:func:`active_machines`). One-vs-one values become
class votes as LIBSVM counts them (:func:`ovo_votes`)."""
import dataclasses
import threading

import numpy as np
import scipy.sparse as sp

from ..options import default
from ..solvers.kernels import block_times, for_blocks, sq_norms


def active_machines(machines, exact):
    """The machines predict uses: each one's compact expansion where it
    has one, unless ``exact`` (then the full ones); the compact rows get ids
    of their own (negative, distinct)."""
    if exact or all(m.compact is None for m in machines):
        return list(machines)
    out, nxt = [], -1
    for m in machines:
        c = m.compact
        if c is None:
            out.append(m)
            continue
        if (m.compact_info or {}).get("shared"):     # one basis for all: its ids
            out.append(c)
            continue
        ids = nxt - np.arange(len(c.coef), dtype=np.int64)
        nxt -= len(c.coef)
        out.append(dataclasses.replace(c, sv_ids=ids))
    # machines share their support rows, not their compact bases: keep the
    # full expansions unless the compact ones are fewer rows by far
    full = len(np.unique(np.concatenate([m.sv_ids for m in machines])))
    mine = len(np.unique(np.concatenate([m.sv_ids for m in out])))
    return out if 2 * mine < full else list(machines)


def build_union(machines, keys=False):
    """(rows, squared norms, rows transposed or None, groups) of the
    distinct support rows of ``machines``, sorted by class, a group being
    (first column, end column, its machines, coefficients [rows,
    machines]). One-vs-one rows are grouped by their class (the sign of
    their coefficient tells which side); otherwise one group. ``keys``: and
    each row's class."""
    ids = np.concatenate([m.sv_ids for m in machines])
    coef = np.concatenate([m.coef for m in machines])
    mach = np.repeat(np.arange(len(machines)), [len(m.sv_ids) for m in machines])
    uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    key = np.zeros(len(uniq))
    if len(machines) > 1 and all(np.isscalar(c) for m in machines for c in m.classes):
        side = np.array([m.classes[1] for m in machines])[mach]
        other = np.array([m.classes[0] for m in machines])[mach]
        key[inv] = np.where(coef > 0, side, other)       # the row's own class
    order = np.lexsort((uniq, key))                       # by class, then row id
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    svs = [m.sv for m in machines]
    allrows = sp.vstack(svs).tocsr() if sp.issparse(svs[0]) else np.concatenate(svs)
    U = allrows[first[order]]
    col = rank[inv]
    groups = []
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(order)]):
        sel = (col >= lo) & (col < hi)
        ms = np.unique(mach[sel])
        W = np.zeros((hi - lo, len(ms)))
        W[col[sel] - lo, np.searchsorted(ms, mach[sel])] = coef[sel]
        groups.append((int(lo), int(hi), ms, W))
    UT = None if sp.issparse(U) else np.ascontiguousarray(U.T, np.float32)
    if keys:
        return U, sq_norms(U), UT, groups, key[order]
    return U, sq_norms(U), UT, groups


def union_values(kernel, union, intercepts, X, n_jobs=1, few_machines=default("few_machines"),
                 tile=default("union_tile")):
    """Every machine's f(x) on rows ``X`` (validated and scaled), one column
    per machine: kernel blocks of ``X`` against the ``union`` of the support
    rows (:func:`build_union`), then per class group one GEMM with its
    machines' coefficients (:func:`~streamcvm.solvers.kernels.block_times`:
    a group of few machines summed over the float32 block in place), plus
    the ``intercepts`` (``few_machines``: the option's). A union of more
    than ``tile`` rows (the option ``union_tile``) is cut into tiles of at
    most that many within each class group, each a block of its own (at most
    2^19 kernel values, 2 MB of float32: it stays in cache from its Gram
    product through the exp to the sums, where one block of 128 rows against
    218,000 support rows, 112 MB, would go through memory three times; RBF
    blocks there take the one-pass exp, ``Kernel.block(one_pass=True)``).
    ``n_jobs`` threads (one BLAS thread each) take whole blocks of rows, as
    :func:`~streamcvm.solvers.kernels.kernel_sums` does:
    the exp of a block (NumPy's, one thread) is most of its cost, and the
    blocks and tiles start at the same rows and columns whatever ``n_jobs``:
    a row's values do not depend on it, nor on the rows predicted with it."""
    U, Usq, UT, groups = union
    sq = sq_norms(X)
    F = np.zeros((X.shape[0], len(intercepts)))
    if U.shape[0] > tile:       # (first, end, machines, coefficients) of each tile
        parts = [(t, min(t + tile, hi), mach, W[t - lo:min(t + tile, hi) - lo])
                 for lo, hi, mach, W in groups for t in range(lo, hi, tile)]
        wide = max(e - t for t, e, _, _ in parts)
        rows = int(max(16, min(2048, 2 ** 19 // wide)))
        sparse_rows = UT is not None and sp.issparse(X)      # csr_gram takes U' by tile
        cols = {t: (U[t:e], Usq[t:e], np.ascontiguousarray(UT[:, t:e]) if sparse_rows else None)
                for t, e, _, _ in parts}
    else:
        parts = None
        rows = int(max(128, min(2048, 2 ** 21 // max(U.shape[0], 1))))  # blocks of ~8 MB
        wide = max(hi - lo for lo, hi, _, _ in groups)
    local = threading.local()       # scratch blocks per thread (no page faults)

    def add(a, b, mach, P):
        if len(mach) == F.shape[1]:     # every machine (a shared compact basis)
            F[a:b] += P
        else:
            F[a:b, mach] += P

    def one(a):
        if not hasattr(local, "kbuf"):
            local.kbuf = np.empty(rows * (wide if parts else U.shape[0]), np.float32)
            local.buf = np.empty((rows, wide))          # float64 copies
        b = min(a + rows, X.shape[0])
        if parts is None:
            K = kernel.block(X[a:b], U, sq[a:b], Usq, BT=UT, out=local.kbuf)
            for lo, hi, mach, W in groups:
                add(a, b, mach, block_times(K, W, (lo, hi), local.buf, few_machines))
            return
        for t, e, mach, W in parts:
            Ut, Utsq, UTt = cols[t]
            K = kernel.block(X[a:b], Ut, sq[a:b], Utsq, BT=UTt, out=local.kbuf, one_pass=True)
            add(a, b, mach, block_times(K, W, None, local.buf, few_machines))

    for_blocks(one, range(0, X.shape[0], rows), n_jobs)
    F += intercepts
    return F


def class_indices(F, multi_class, n_classes):
    """Class indices predicted from machine values ``F`` [rows, machines]."""
    if F.shape[1] == 1:
        return (F[:, 0] > 0).astype(np.int64)
    if multi_class == "ovr":
        return np.argmax(F, axis=1)
    return np.argmax(ovo_votes(F, n_classes), axis=1)


def ovo_votes(F, k):
    """One-vs-one decisions -> per-class votes + confidence in (-1/3, 1/3).
    Column c of ``F`` is machine (i, j), i < j, in row-major order: positive
    votes for j, otherwise for i."""
    i, j = np.triu_indices(k, 1)
    to_j = np.zeros((len(i), k))
    to_j[np.arange(len(i)), j] = 1.0
    to_i = np.zeros((len(i), k))
    to_i[np.arange(len(i)), i] = 1.0
    pos = (F > 0).astype(np.float64)
    votes = pos @ to_j + (1.0 - pos) @ to_i
    conf = F @ (to_j - to_i)
    return votes + conf / (3.0 * (np.abs(conf) + 1.0))
