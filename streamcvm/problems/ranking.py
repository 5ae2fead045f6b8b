"""Ranking SVM as a center-constrained MEB (generalized-cvm sec. IV-B).

Points are preference pairs ``p = (q; i above j)``: two documents of the
same query ``q`` with relevance ``y_i > y_j``. The primal
``min ||w||^2/2 - rho + C/2 sum xi_p^2`` s.t. ``w'(phi_i - phi_j) >= rho - xi_p``
has the dual (eq. 24) ``max -a'K~a`` on the simplex with

    K~_pp' = (phi_i - phi_j)'(phi_i' - phi_j') + [p == p'] / C
           = k(x_i, x_i') - k(x_i, x_j') - k(x_j, x_i') + k(x_j, x_j') + [p == p'] / C,

whose diagonal ``k_ii + k_jj - 2 k_ij + 1/C`` is not constant: with
``Delta_p = eta - K~_pp`` it is a center-constrained MEB with constant
``q = eta`` (:class:`~streamcvm.solvers.points.RowPoints`, sign 1, no bias).

A pair is handed to the solvers as one "row", the two documents' features
side by side ``[x_i, x_j]``, under :class:`PairKernel`: so CVM and FVM run
unchanged (BVM refuses the non-constant diagonal). Pairs are never
materialised over the data: they are drawn within query groups from the
sampler's pooled chunks (:meth:`~streamcvm.data.sampling.ChunkPool.draw_pairs`),
with point id ``i n + j``. The scoring function is
``f(x) = sum_p a_p (k(x_i, x) - k(x_j, x))``, one coefficient per document
row (its pairs' weights summed, with sign).
"""
import numpy as np
import scipy.sparse as sp

from ..solvers.kernels import Kernel
from ..data.sampling import ChunkPool
from ..solvers.methods import method_class
from .driver import kernel_bound, row_stats, run_solver
from .machine import Machine
from ..solvers.points import RowPoints

RANKING = "ranking (the pair kernel's diagonal is not constant)"


class PairKernel(Kernel):
    """k~(p, p') = (phi_i - phi_j)'(phi_i' - phi_j') for pairs given as rows
    ``[x_i, x_j]`` (dense, 2d columns), from four blocks of ``base``. No
    compiled fast path knows pairs."""

    constant_diagonal = False

    def __new__(cls, base):
        return object.__new__(cls)

    def __init__(self, base):
        self.base = base
        self.name = f"pair({base.name})"
        self.gamma, self.coef0, self.degree = base.gamma, base.coef0, base.degree

    def block(self, A, B, sqa=None, sqb=None, BT=None, out=None):
        d = A.shape[1] // 2
        k = self.base.block
        Ai, Aj, Bi, Bj = A[:, :d], A[:, d:], B[:, :d], B[:, d:]
        return (np.asarray(k(Ai, Bi), np.float64) - k(Ai, Bj) - k(Aj, Bi)
                + np.asarray(k(Aj, Bj), np.float64))

    def diag(self, X, sq=None):
        """k_ii + k_jj - 2 k_ij of each pair row."""
        d = X.shape[1] // 2
        return self.base.pair_diag(np.asarray(X[:, :d], np.float64),
                                   np.asarray(X[:, d:], np.float64))


def _col_sums(i, store):
    return np.asarray(store.chunk(i).X.sum(axis=0), np.float64).ravel()


def _max_centered(i, store, mean):
    from ..solvers.kernels import sq_norms
    X = store.chunk(i).X
    # ||x - mean||^2 = ||x||^2 - 2 x'mean + ||mean||^2 (CSR rows stay sparse)
    return float((sq_norms(X) - 2.0 * np.asarray(X @ mean).ravel() + mean @ mean).max())


def centered_max_sq(store, runner=None):
    """max ||x - mean||^2 over the rows, in two passes of chunk tasks."""
    from ..data.parallel import as_runner
    run = as_runner(runner)
    total = sum(run.map(_col_sums, store.n_chunks, store), np.zeros(store.d))
    mean = total / max(store.n, 1)
    return max(run.map(_max_centered, store.n_chunks, store, mean), default=0.0)


def pair_bound(base, store, runner=None):
    """An upper bound of k_ii + k_jj - 2 k_ij over pairs of rows of
    ``store``: 2 for the RBF and Laplacian kernels (k in (0, 1]), 4 for npoly;
    for the linear kernel ||x_i - x_j||^2 <= 4 max ||x - mean||^2 (pairs are
    differences: translation does not change them, and 4 max ||x||^2 would
    be far looser on features that are all positive, making eta, hence the
    radius and eps's meaning, too large); else k_ii + k_jj + 2 sqrt(k_ii k_jj)
    <= 4 max k(x, x) (Cauchy-Schwarz). Raised by 1e-4 relative for float32
    kernel blocks (see driver.kernel_bound)."""
    bound = base.pair_bound()
    if bound is not None:
        return bound
    if base.pairs_translation_invariant:
        return 4.0 * centered_max_sq(store, runner) * (1.0 + 1e-4)
    return 4.0 * kernel_bound(base, row_stats(store, runner=runner))


class PairPool:
    """A ChunkPool seen as a source of preference pairs: ``draw`` returns
    (pair ids ``i n + j``, pair rows ``[x_i, x_j]``, ones), the interface
    :meth:`MEBSolver.fit` draws from; its state is the ChunkPool's."""

    def __init__(self, pool):
        self.pool = pool
        self.n = pool.store.n

    def draw(self, m, classes=None, exclude=None, target="raw", with_weight=False):
        ia, ib, Xa, Xb = self.pool.draw_pairs(m)
        if sp.issparse(Xa):
            Xa, Xb = Xa.toarray(), Xb.toarray()
        X = np.hstack([np.asarray(Xa, np.float32), np.asarray(Xb, np.float32)])
        return ia * self.n + ib, X, np.ones(len(ia))

    def all_rows(self, classes=None, target="raw"):
        return None                 # no exact path for pairs

    def state(self):
        return self.pool.state()

    def close(self):
        self.pool.close()


class PairSource:
    """Every preference pair of ``store`` as a full pass's point source:
    ``points(i)``, the pairs within each query group of store chunk ``i`` (as
    the pair sampler sees them), one ``(pair ids i n + j, pair rows [x_i,
    x_j], ones)`` block per query. O(sum of squared group sizes) per pass.
    Calling it yields every chunk's blocks in order."""

    def __init__(self, store):
        self.store = store

    @property
    def n_chunks(self):
        return self.store.n_chunks

    def points(self, c):
        store = self.store
        n = store.n
        a, _ = store.chunk_bounds(c)
        ch = store.chunk(c)
        X = ch.X.toarray() if sp.issparse(ch.X) else np.asarray(ch.X)
        X = X.astype(np.float32)
        y, q = np.asarray(ch.y, np.float64), np.asarray(ch.qid)
        out = []
        for g in np.unique(q):
            r = np.flatnonzero(q == g)
            hi, lo = np.nonzero(y[r][:, None] > y[r][None, :])
            if len(hi) == 0:
                continue
            i, j = r[hi], r[lo]
            out.append(((a + i) * n + (a + j), np.hstack([X[i], X[j]]), np.ones(len(i))))
        return out

    def __call__(self):
        for c in range(self.n_chunks):
            yield from self.points(c)


def all_pairs(store):
    """A :class:`PairSource` over ``store`` (also a factory of its blocks)."""
    return PairSource(store)


def train_ranker(store, kernel, solve, *, C, full_pass=False):
    """Train a ranking SVM on ``store`` (labels = relevance, ``qid`` =
    query); returns a :class:`Machine` scoring rows (``regression=True``: a
    real-valued function, ``f(x) = sum coef_r k(x_r, x)``, no intercept).
    ``solve``: the solver's options and the run's plumbing
    (:class:`~streamcvm.problems.driver.Solve`; default: CVM, eps 1e-3)."""
    method_class(solve.method, plain=False, problem=RANKING)
    if not store.has_qid:
        raise ValueError("ranking needs query ids: the store has no qid column "
                         "(ingest svmlight files with qid:, or CSV with --qid-col)")
    points = RowPoints(C, 0.0, kmax=pair_bound(kernel, store, solve.runner),
                       constant_diagonal=False, skip_core=False)

    def make_pool(rng, state):
        pool = ChunkPool(store, rng, sample_size=solve.sample_size,
                         pool_chunks=solve.options.pool_chunks) if state is None else \
            ChunkPool.from_state(store, rng, state)
        return PairPool(pool)
    solver = run_solver(store, PairKernel(kernel), points, solve, b=0.0, C=C,
                        full_pass=all_pairs(store) if full_pass else False,
                        make_pool=make_pool, dim=2 * store.d, sparse=False)
    slots, alpha = solver.support()
    cs = solver.ball.core
    n, d = store.n, store.d
    hi, lo = np.divmod(cs.ids[slots], n)
    rows = cs.rows()[slots]
    ids = np.concatenate([hi, lo])
    X = np.concatenate([rows[:, :d], rows[:, d:]])
    w = np.concatenate([alpha, -alpha])
    uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    coef = np.zeros(len(uniq))
    np.add.at(coef, inv, w)
    return Machine(sv=np.ascontiguousarray(X[first]), coef=coef, intercept=0.0,
                   sv_ids=uniq.astype(np.int64), classes=None, regression=True,
                   n_iter=solver.n_iter, core_size=cs.n, history=solver.history)
