"""Two-class, one-class and multi-class L2-SVMs as MEB problems over a store.

Each binary machine is trained by :class:`streamcvm.solvers.MEBSolver` on
the rows of two classes, sampled from the store through a
:class:`~streamcvm.sampling.ChunkPool` (class-balanced, using the store's
labels; no O(n) index). Multi-class is one-vs-one (as LIBSVM, the default) or
one-vs-rest. A trained machine is plain arrays: support rows, coefficients
``alpha_i y_i`` and an intercept, with ``f(x) = sum_i coef_i k(x_i, x) + b``.
"""
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..sampling import ChunkPool, relabel
from ..solvers import MEBSolver


@dataclass
class Machine:
    """One trained binary (or one-class) machine."""
    sv: object                    # support rows: ndarray [m, d] or CSR
    coef: np.ndarray              # alpha_i * y_i
    intercept: float              # sum alpha_i y_i * b
    sv_ids: np.ndarray            # global row ids of the support rows
    classes: tuple = None         # (neg, pos): label values (or a tuple: the rest); None: one-class
    radius2: float = 0.0          # one-class: outlier threshold on ||phi(x) - c||^2
    c2: float = 0.0               # one-class: ||c||^2 = a'Ka (original space)
    n_iter: int = 0
    core_size: int = 0
    full_pass_violators: object = None
    history: list = field(default_factory=list)
    sv_sq: np.ndarray = None      # squared norms of the support rows (lazy)

    def decision(self, kernel, X, sq=None, block_rows=2048):
        """f(x) (binary) or R^2 - d^2(x) (one-class), for rows X; kernel
        blocks of ``block_rows`` rows keep memory at block_rows x n_SV."""
        from ..kernels import sq_norms
        sq = sq_norms(X) if sq is None else sq
        if self.sv_sq is None:
            self.sv_sq = sq_norms(self.sv)
        sqs = self.sv_sq
        s = np.empty(X.shape[0])
        # CSR rows against dense support rows: from the nonzeros (kernels._csr_gram)
        svT = np.ascontiguousarray(self.sv.T, np.float32) \
            if sp.issparse(X) and not sp.issparse(self.sv) else None
        for a in range(0, X.shape[0], block_rows):
            b = min(a + block_rows, X.shape[0])
            s[a:b] = kernel.block(X[a:b], self.sv, sq[a:b], sqs, BT=svT) @ self.coef
        if self.classes is None:
            return self.radius2 - (self.c2 - 2.0 * s + kernel.diag(X, sq))
        return s + self.intercept


def machine_arrays(m):
    """A machine as (JSON-able record, arrays): checkpoints keep finished ones."""
    arrays = {"coef": m.coef, "ids": m.sv_ids}
    if sp.issparse(m.sv):
        arrays.update(sv_indptr=m.sv.indptr.astype(np.int64),
                      sv_indices=m.sv.indices.astype(np.int32),
                      sv_data=m.sv.data.astype(np.float32))
    else:
        arrays["sv"] = np.asarray(m.sv, np.float32)
    rec = {"classes": None if m.classes is None else list(m.classes),
           "intercept": m.intercept, "radius2": m.radius2, "c2": m.c2, "n_iter": m.n_iter,
           "core_size": m.core_size, "sparse": bool(sp.issparse(m.sv)),
           "shape": list(m.sv.shape), "full_pass_violators": m.full_pass_violators,
           "history": m.history}
    return rec, arrays


def machine_from(rec, arrays):
    """The inverse of :func:`machine_arrays`."""
    from ..store import csr_view
    sv = csr_view(arrays["sv_data"], arrays["sv_indices"], arrays["sv_indptr"],
                  tuple(rec["shape"])) if rec["sparse"] else arrays["sv"]
    cl = rec["classes"]
    return Machine(sv=sv, coef=arrays["coef"], intercept=rec["intercept"], sv_ids=arrays["ids"],
                   classes=None if cl is None else tuple(tuple(c) if isinstance(c, list) else c
                                                         for c in cl),
                   radius2=rec["radius2"], c2=rec["c2"], n_iter=rec["n_iter"],
                   core_size=rec["core_size"], full_pass_violators=rec["full_pass_violators"],
                   history=rec.get("history", []))


def _full_pass(store, classes, target):
    def passes():
        for i in range(store.n_chunks):
            a, e = store.chunk_bounds(i)
            c = store.chunk(i)
            ids = np.arange(a, e)
            y = np.asarray(c.y, np.float64)
            if classes is not None:
                keep = np.flatnonzero(np.isin(y, classes[0]) | np.isin(y, classes[1]))
                if len(keep) == 0:
                    continue
                yield ids[keep], c.X[keep], relabel(y[keep], classes, target)
            else:
                yield ids, c.X, relabel(y, classes, target)
    return passes


def one_blas_thread():
    """A context with one BLAS thread. The search's kernel blocks are small
    (59 rows x |S|), where OpenBLAS's threads cost more than they give
    (ijcnn1: 4.0 s against 11.2 s when another process is busy), and the
    sampler's prefetch thread decompresses chunks on the other core. Entered
    once per fit: threadpoolctl's inspection costs milliseconds."""
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=1, user_api="blas")


def train_machine(store, kernel, *, classes=None, C=1.0, method="bvm",
                  eps=1e-3, sample_size=59, max_core=None, seed=0, full_pass=False,
                  callback=None, checkpointer=None, n_machines=1, resume=None):
    """Train one machine on ``store``.

    ``checkpointer``: a :class:`streamcvm.checkpoint.Checkpointer` that snapshots
    the sampled solver as it goes (``n_machines``: for its progress record);
    ``resume``: ``{"current": manifest["current"], "arrays": solver arrays}`` of
    a snapshot taken inside this machine, to continue from.

    ``classes=(neg, pos)``: a two-class L2-SVM on the rows of those labels.
    ``classes=None``: a one-class L2-SVM (SVDD) on every row.
    Callers should hold BLAS to one thread (see :func:`one_blas_thread`).
    """
    rng = np.random.default_rng(seed)
    cur = None if resume is None else resume.get("current")
    if cur is not None:
        pool = ChunkPool.from_state(store, rng, cur["pool"], classes=classes)
    else:
        pool = ChunkPool(store, rng, classes=classes, sample_size=sample_size)
    one_class = classes is None
    target = "ones" if one_class else "binary"
    solver = MEBSolver(kernel, store.d, store.sparse, C=C, b=0.0 if one_class else 1.0,
                       method=method, eps=eps, sample_size=sample_size, max_core=max_core)
    try:
        if cur is not None:
            solver.restore(cur["solver"], resume["arrays"])
        hook = None if checkpointer is None else checkpointer.solver_hook(pool, n_machines)
        rows = pool.all_rows(classes, target)       # a small store, wholly pooled
        if rows is not None and solver.exact_ok(rows[1]):
            solver.fit_exact(*rows, checkpoint=hook)
            if callback is not None:
                callback(solver)
        else:
            solver.fit(pool, classes=classes, target=target, callback=callback,
                       full_pass=_full_pass(store, classes, target) if full_pass else None,
                       checkpoint=hook, resume=None if cur is None else tuple(cur["position"]))
    finally:
        pool.close()
    slots, alpha = solver.support()
    cs = solver.core
    rows = cs.rows()[slots]
    coef = alpha * cs.y[slots]
    b = 0.0 if one_class else 1.0
    m = Machine(sv=rows.copy() if not hasattr(rows, "tocsr") else rows.tocsr(copy=True),
                coef=coef, intercept=float(b * coef.sum()), sv_ids=cs.ids[slots].copy(),
                classes=None if one_class else tuple(_side(c) for c in classes),
                n_iter=solver.n_iter, core_size=cs.n,
                full_pass_violators=getattr(solver, "full_pass_violators", None),
                history=solver.history)
    if one_class:
        # The MEB lives in the augmented space phi~ = [phi; e_i / sqrt(C)], with
        # center c~ = [c; a / sqrt(C)] and radius R~^2 = kappa + 1/C - a'K~a.
        # A new row x (no slack coordinate of its own in the center) is at
        # d~^2 = ||phi(x) - c||^2 + ||a||^2 / C + 1/C. The solver certifies
        # every training row within (1 + eps) R~, so a row is an outlier when
        # ||phi(x) - c||^2 > (1 + eps)^2 R~^2 - ||a||^2 / C - 1/C =: radius2.
        # (At eps = 0 and the optimum this is SVDD's primal radius
        # kappa - a'Ka - 2 ||a||^2 / C; with an approximate center and a
        # 1/C-dominated R~, the (1 + eps) tolerance is what keeps the inliers
        # of the training data inside.)
        K = kernel.block(rows, rows)
        m.c2 = float(alpha @ K @ alpha)
        a2 = float((alpha ** 2).sum())
        # the certified ball: R~^2 = kt - a'K~a (CVM, FVM), or BVM's fixed r^2
        # less its extra coordinate ce^2 (bvm paper sec. 3.3)
        R2t = solver.r2 - solver.ce2 if method == "bvm" else 1.0 + 1.0 / C - m.c2 - a2 / C
        m.radius2 = float((1.0 + solver.certified_eps) ** 2 * R2t - a2 / C - 1.0 / C)
    return m


def _side(c):
    """A side of a sub-problem as stored: a float, or a tuple of floats."""
    return tuple(float(v) for v in c) if isinstance(c, (tuple, list)) else float(c)


def pairs(classes, strategy="ovo"):
    """The (neg, pos) sub-problems of a multi-class strategy: one-vs-one
    (``ovo``: every pair, as LIBSVM) or one-vs-rest (``ovr``: class k against
    the tuple of all others, one machine per class)."""
    classes = list(classes)
    if strategy not in ("ovo", "ovr"):
        raise ValueError(f"multi_class must be 'ovo' or 'ovr', got {strategy!r}")
    if len(classes) == 2:
        return [(classes[0], classes[1])]
    if strategy == "ovo":
        return [(classes[i], classes[j]) for i in range(len(classes))
                for j in range(i + 1, len(classes))]
    return [(tuple(c for c in classes if c != k), k) for k in classes]
