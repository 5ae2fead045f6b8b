"""The distance kernels, exp(-gamma d(x, z)): constant k(x, x) = 1, gamma a
length scale.

=========== =============================== ==================================
name        k(x, z)                         fast paths
=========== =============================== ==================================
rbf         exp(-gamma ||x - z||^2)         exact_bvm, kernel_rows, mmda_columns
laplacian   exp(-gamma ||x - z||_1)         mmda_columns
exponential exp(-gamma ||x - z||_2)         mmda_columns
=========== =============================== ==================================

The RBF block comes from the Gram matrix and the squared norms (float32 BLAS
for dense float32 rows); the L1 and L2 distances of the other two are numba
loops over the differences, in float64, so that k(x, x) is exactly 1.
"""
import numpy as np
import scipy.sparse as sp

from .base import Kernel, register
from .compiled import L1_CODE, L2_CODE, RBF_CODE, l1_l2_csr, l1_l2_dense, rbf_arg, rbf_exp
from .sums import sq_norms


class _Distance(Kernel):
    params = ("gamma",)
    constant_diagonal = True
    length_scale = True
    translation_invariant = True

    def pair_bound(self):
        return 2.0          # k in (0, 1]


@register
class RBF(_Distance):
    """exp(-gamma ||x - z||^2) (``"rbf"``, ``"gaussian"``)."""

    name = "rbf"
    aliases = ("gaussian",)
    fast_paths = frozenset({"exact_bvm", "kernel_rows", "mmda_columns"})
    code = RBF_CODE
    float32_gram = True
    distance, distance_text = "sqeuclidean", "||x - z||^2"

    def _from_gram(self, G, A, B, sqa, sqb):
        sqa = sq_norms(A) if sqa is None else sqa
        sqb = sq_norms(B) if sqb is None else sqb
        t = G.dtype.type
        # numpy's vectorised exp beats numba's scalar one by ~10x here
        rbf_arg(G, sqa.astype(t, copy=False), sqb.astype(t, copy=False), t(self.gamma))
        return np.exp(G, out=G)

    def _from_gram_one_pass(self, G, A, B, sqa, sqb):
        if G.dtype != np.float32 or not G.flags.c_contiguous:
            return self._from_gram(G, A, B, sqa, sqb)
        sqa = sq_norms(A) if sqa is None else sqa
        sqb = sq_norms(B) if sqb is None else sqb
        t = np.float32
        return rbf_exp(G, sqa.astype(t, copy=False), sqb.astype(t, copy=False), t(self.gamma))

    def pair_diag(self, Xi, Xj):
        Xi, Xj = np.asarray(Xi, np.float64), np.asarray(Xj, np.float64)
        return 2.0 - 2.0 * np.exp(-self.gamma * ((Xi - Xj) ** 2).sum(axis=1))


class _FromDifferences(_Distance):
    """exp(-gamma ||x - z||_p) from the differences (L1 or L2)."""

    distance_power = 1
    euclid = False

    def block(self, A, B, sqa=None, sqb=None, BT=None, out=None, one_pass=False):
        m, n = A.shape[0], B.shape[0]
        if m == 0 or n == 0:
            return np.zeros((m, n))
        out = np.empty((m, n))
        if sp.issparse(A) or sp.issparse(B):
            A = sp.csr_matrix(A)
            B = sp.csr_matrix(B)
            A.sort_indices()
            B.sort_indices()
            return l1_l2_csr(A.indptr, A.indices, A.data, B.indptr, B.indices, B.data,
                             self.gamma, out, self.euclid)
        return l1_l2_dense(np.ascontiguousarray(A), np.ascontiguousarray(B), self.gamma, out,
                           self.euclid)


@register
class Laplacian(_FromDifferences):
    """exp(-gamma ||x - z||_1) (``"laplacian"``, as scikit-learn's)."""

    name = "laplacian"
    fast_paths = frozenset({"mmda_columns"})
    code = L1_CODE
    distance, distance_text = "manhattan", "||x - z||_1"

    def pair_diag(self, Xi, Xj):
        Xi, Xj = np.asarray(Xi, np.float64), np.asarray(Xj, np.float64)
        return 2.0 - 2.0 * np.exp(-self.gamma * np.abs(Xi - Xj).sum(axis=1))


@register
class Exponential(_FromDifferences):
    """exp(-gamma ||x - z||_2) (``"exponential"``: the Euclidean Laplacian)."""

    name = "exponential"
    fast_paths = frozenset({"mmda_columns"})
    code = L2_CODE
    euclid = True
    distance, distance_text = "euclidean", "||x - z||"
