"""The fine levels of a surface: many small CVR fits blended by a partition
of unity (:mod:`streamcvm.apps.surface`).

A Gaussian of width sigma fixes f only within a few sigma, so a fine level
need not be one machine over every row: the space is cut by a grid of nodes
``L = block_sigmas x sigma`` apart, and each node's block is an L2-SVR
(the cvr paper's QP, :class:`~streamcvm.solvers.points.SignedPoints`) over
at most ``cap`` rows drawn from its support, the 2L cube around it. The
level's value is the blend of the 8 nodes around a point with C1 weights
that sum to one (cos^2 per axis). A block's QP is small (at most 2 x cap
points), so it is solved exactly: SMO on the whole dual
(:func:`~streamcvm.apps._surface_kernels.solve_blocks`, every core in
parallel) rather than by sampled core-set steps, whose Python step costs
more than the block's whole solve. Each block's rows, C and mu follow the
level's CVR: ``C = c_per_row x`` the median block's rows, and the ridge
``mu rows / C`` at that size, ``mu / c_per_row``, in every block.

Time and memory grow with the blocks, that is with the surface's area over
sigma^2, not with the points.
"""
import numpy as np


class LocalLevel:
    """One fine level: ``sigma``; the node grid ``origin``, spacing ``L``
    and ``node_block`` [nx, ny, nz] (-1: no block); the blocks' support
    vectors ``sv[bptr[b]:bptr[b + 1]]``, ``coef`` and ``intercept[b]``."""

    def __init__(self, sigma, origin, L, node_block, bptr, sv, coef, intercept):
        self.sigma = float(sigma)
        self.origin = np.asarray(origin, np.float64)
        self.L = float(L)
        self.node_block = np.asarray(node_block, np.int32)
        self.bptr = np.asarray(bptr, np.int64)
        self.sv = np.ascontiguousarray(sv, np.float64)
        self.coef = np.asarray(coef, np.float64)
        self.intercept = np.asarray(intercept, np.float64)

    @property
    def gamma(self):
        return 0.5 / self.sigma ** 2

    @property
    def n_support(self):
        return len(self.coef)

    @property
    def n_blocks(self):
        return len(self.intercept)

    def add_to(self, Z, out, opts):
        """out += this level at points ``Z`` [n, 3] (normalised coordinates);
        support vectors further than ``opts.cut`` (a
        :class:`~streamcvm.options.SurfaceOptions`) in gamma d^2 skipped."""
        from ._surface_kernels import local_values
        local_values(np.ascontiguousarray(Z, np.float64), self.origin, self.L,
                     self.node_block, self.bptr, self.sv, self.coef, self.intercept,
                     self.gamma, float(opts.cut), out)
        return out

    def add_grid(self, idx, lo, step, out):
        """out += this level at grid nodes ``lo + step * idx`` (``idx`` [n, 3]
        integer): the same values as :meth:`add_to`, by tables of the
        Gaussian per axis (the level's width must span a few steps)."""
        from ._surface_kernels import local_grid_values
        if not self.n_blocks:
            return out
        nodes = np.argwhere(self.node_block >= 0)
        block_node = np.empty_like(nodes)
        block_node[self.node_block[tuple(nodes.T)]] = nodes
        local_grid_values(np.ascontiguousarray(idx, np.int64), np.asarray(lo, np.float64),
                          float(step), self.origin, self.L, self.node_block, block_node,
                          self.bptr, self.sv, self.coef, self.intercept, self.gamma, out)
        return out

    def record(self):
        """(JSON-able record, arrays) for a checkpoint; arrays named as a
        :class:`~streamcvm.problems.machine.Machine`'s (sv, coef, ids)."""
        nodes = np.flatnonzero(self.node_block.ravel() >= 0)
        rec = {"local": {"sigma": self.sigma, "origin": self.origin.tolist(), "L": self.L,
                         "shape": list(self.node_block.shape), "nodes": nodes.tolist(),
                         "blocks": self.node_block.ravel()[nodes].tolist(),
                         "bptr": self.bptr.tolist(), "intercept": self.intercept.tolist()}}
        return rec, {"sv": self.sv.astype(np.float32), "coef": self.coef,
                     "ids": np.zeros(len(self.coef), np.int64)}

    @classmethod
    def from_record(cls, rec, arrays):
        r = rec["local"]
        nb = np.full(int(np.prod(r["shape"])), -1, np.int32)
        nb[np.asarray(r["nodes"], np.int64)] = np.asarray(r["blocks"], np.int32)
        return cls(r["sigma"], r["origin"], r["L"], nb.reshape(r["shape"]), r["bptr"],
                   arrays["sv"], arrays["coef"], r["intercept"])


def _cells(X, origin, L):
    return np.floor((X - origin) / L).astype(np.int64)


def fit_local(X, residual, sigma, *, c_per_row, mu, cap, seed, lo, hi, opts, on=0):
    """A :class:`LocalLevel` of width ``sigma`` fitted to the rows ``X``
    [m, 3] (float64): ``residual(rows)`` gives the targets of the row
    indices asked for (what the coarser levels left). Nodes cover the box
    [lo, hi] grown by a node spacing (``opts.block_sigmas`` widths; ``opts``
    a :class:`~streamcvm.options.SurfaceOptions`); each node with at least
    ``opts.block_min_rows`` rows in its support gets a block, which fits at
    most ``cap`` of them, drawn with ``seed``: up to ``opts.block_on_share``
    of them from the first ``on`` rows (the points), the rest from the
    others; its SMO stops at ``opts.block_tol`` (in units of the largest
    |target|) or after ``opts.block_max_iter`` steps."""
    from ._surface_kernels import solve_blocks
    L = opts.block_sigmas * sigma
    origin = np.asarray(lo, np.float64) - L
    shape = tuple(int(v) for v in np.floor((np.asarray(hi) - origin) / L).astype(np.int64) + 3)
    cell = _cells(X, origin, L)
    key = (cell[:, 0] * shape[1] + cell[:, 1]) * shape[2] + cell[:, 2]
    order = np.argsort(key, kind="stable")
    skey = key[order]
    uniq, first = np.unique(skey, return_index=True)
    ends = np.append(first[1:], len(skey))
    # the rows of node n: those of cells n - (0|1) on each axis
    cand = np.unique(np.concatenate([uniq + (a * shape[1] + b) * shape[2] + c
                                     for a in (0, 1) for b in (0, 1) for c in (0, 1)]))
    rng = np.random.default_rng(seed)
    nodes, parts = [], []
    for nd in cand:
        sel = []
        for a in (0, 1):
            for b in (0, 1):
                for c in (0, 1):
                    k = nd - (a * shape[1] + b) * shape[2] - c
                    p = np.searchsorted(uniq, k)
                    if p < len(uniq) and uniq[p] == k:
                        sel.append(order[first[p]:ends[p]])
        n = sum(len(s) for s in sel)
        if n < opts.block_min_rows:
            continue
        sel = np.concatenate(sel)
        if n > cap:
            # the points first (they place the level set), off-surface rows
            # for the rest (the slope needs fewer)
            pts, off = sel[sel < on], sel[sel >= on]
            k = min(len(pts), int(opts.block_on_share * cap))
            sel = np.concatenate([rng.choice(pts, k, replace=False),
                                  rng.choice(off, min(len(off), cap - k), replace=False)])
        nodes.append(nd)
        parts.append(np.sort(sel))
    node_block = np.full(int(np.prod(shape)), -1, np.int32)
    if not nodes:
        return LocalLevel(sigma, origin, L, node_block.reshape(shape), [0], np.zeros((0, 3)),
                          [], [])
    node_block[np.asarray(nodes)] = np.arange(len(nodes), dtype=np.int32)
    ptr = np.zeros(len(parts) + 1, np.int64)
    ptr[1:] = np.cumsum([len(p) for p in parts])
    rows = np.concatenate(parts)
    uniq_rows, inv = np.unique(rows, return_inverse=True)
    t = residual(uniq_rows)[inv]
    coef = np.zeros(len(rows))
    intercept = np.zeros(len(parts))
    # the targets in units of the level's largest, as one machine's fit
    a = float(np.abs(t).max()) or 1.0
    # one C for the level, c_per_row x the median block's rows, and the
    # ridge mu rows / C at that size (mu / c_per_row) in every block
    C = c_per_row * float(np.median(np.diff(ptr)))
    solve_blocks(np.ascontiguousarray(X[rows], np.float64), t / a, ptr, 0.5 / sigma ** 2,
                 mu / c_per_row, 2.0 / C, C, opts.block_tol * 2.0 / C, opts.block_max_iter,
                 coef, intercept)
    keep = coef != 0.0
    counts = np.add.reduceat(keep.astype(np.int64), ptr[:-1]) if len(rows) else []
    bptr = np.zeros(len(parts) + 1, np.int64)
    bptr[1:] = np.cumsum(counts)
    return LocalLevel(sigma, origin, L, node_block.reshape(shape), bptr, X[rows][keep],
                      coef[keep] * a, intercept * a)
