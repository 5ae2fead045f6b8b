"""Full violator passes as chunk tasks (docs/design.md section 4: the core set stays
with the driver, the rows stay with the data).

A pass freezes the center in a :class:`~.ball.Center` (the core rows, their
weights and the ball's radius: small, picklable, sent to the workers once
per pass) and runs :func:`violator_task` on every chunk of a point source:
the task reads its chunk, computes every point's distance to the frozen
center and returns how many points lie outside the (1 + eps) ball, and its
furthest rows outside the radius itself (the option ``pass_per_chunk``):
violators, and the near-violators that the steps about to be taken may push
out. The driver (:meth:`~.meb.MEBSolver.confirm`) keeps the furthest of all
of them (``pass_per_pass``, :func:`pass_rows`),
ordered by (distance, id), and takes its steps on those, furthest first,
with their distances updated after every step. Passes repeat until one
finds no violator (its steps then find none either: the center it certifies
is the one returned). Everything a task returns depends only on the chunk and the
center, so the model is the same on any scheduler, with any number of
workers, and when a task is rerun after its worker died.

A point source (:class:`streamcvm.problems.driver.RowSource`,
:class:`streamcvm.problems.ranking.PairSource`) has ``n_chunks`` and
``points(i)``: the problem's points of store chunk ``i`` as a list of
``(ids, X, y[, w])`` blocks.
"""
import numpy as np
import scipy.sparse as sp

from .kernels import sq_norms

# How many rows a chunk task returns and the driver keeps per pass are options
# (pass_per_chunk, pass_per_pass, pass_mb). An ad-hoc probe, cvm eps 1e-3 on 2M
# Gaussian rows (42 chunks): 256 / 16,384 needed 8 passes, 1,024 / 43,008 needed 4
# (a serial pass stepping as it goes: 3).


def pass_rows(d, sparse, opts):
    """Candidate rows the driver keeps per pass for rows of ``d`` features
    (``opts``: the :class:`~streamcvm.options.Options`; dense rows: at most
    ``pass_mb`` of them)."""
    most = opts.pass_per_pass
    return most if sparse else \
        int(min(most, max(opts.pass_block_rows, (opts.pass_mb << 20) // (4 * d))))


def sub_blocks(chunks, rows):
    """(ids, X, y[, w]) chunks cut into blocks of at most ``rows`` rows, so
    that a block's kernel against the core set stays rows x |S|."""
    for c in chunks:
        for a in range(0, len(c[0]), rows):
            yield tuple(None if v is None else v[a:a + rows] for v in c)


def _take(X, rows):
    return X[rows] if sp.issparse(X) else np.asarray(X)[rows]


def scan(blocks, center, limit, block_rows):
    """(violators found, candidates) over point blocks ``(ids, X, y[, w])``,
    in kernel blocks of ``block_rows`` rows: candidates are ``(ids, X, y, w
    or None, d2)`` of the at most ``limit`` furthest rows beyond the radius,
    each row scored by its furthest point, furthest first (ties by id), or
    None when there are none."""
    found = 0
    parts = []
    for blk in sub_blocks(blocks, block_rows):
        ids, X, y = blk[0], blk[1], blk[2]
        w = blk[3] if len(blk) > 3 else None
        P = center.points.from_rows(ids, y, w)
        d2 = center.dist2(X, P, sq_norms(X))
        found += int((d2 > center.thr).sum())
        near = d2 > center.floor
        if not near.any():
            continue
        score = np.full(len(ids), -np.inf)
        np.maximum.at(score, P[1][near], d2[near])
        r = np.flatnonzero(score > -np.inf)
        parts.append((ids[r], _take(X, r), np.asarray(y)[r],
                      None if w is None else np.asarray(w)[r], score[r]))
    return found, merge(parts, limit)


def merge(parts, limit):
    """The ``limit`` furthest rows of candidate parts (None entries skipped),
    ordered by (-d2, id): a total order, so the same whatever the parts'
    order or the scheduler."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    ids = np.concatenate([p[0] for p in parts])
    d2 = np.concatenate([p[4] for p in parts])
    order = np.lexsort((ids, -d2))[:limit]
    Xs = [p[1] for p in parts]
    X = sp.vstack(Xs).tocsr() if sp.issparse(Xs[0]) else np.concatenate(Xs)
    y = np.concatenate([p[2] for p in parts])
    w = None if parts[0][3] is None else np.concatenate([p[3] for p in parts])
    return (ids[order], _take(X, order), y[order], None if w is None else w[order], d2[order])


class TopRows:
    """The ``limit`` furthest candidate rows of a stream of :func:`scan`
    outputs, kept in bounded memory (merged whenever twice ``limit`` rows are
    held): the same rows as one :func:`merge` of them all."""

    def __init__(self, limit):
        self.limit, self.parts, self.rows = limit, [], 0

    def add(self, cand):
        if cand is None:
            return
        self.parts.append(cand)
        self.rows += len(cand[0])
        if self.rows > 2 * self.limit:
            self.parts = [merge(self.parts, self.limit)]
            self.rows = len(self.parts[0][0])

    def result(self):
        return merge(self.parts, self.limit)


def violator_task(i, source, center, limit, block_rows):
    """The chunk task of a pass: :func:`scan` over ``source.points(i)``."""
    return scan(source.points(i), center, limit, block_rows)
