"""The dot-product kernels: functions of x'z.

======= ================================================== =========
name    k(x, z)                                            k(x, x)
======= ================================================== =========
linear  x'z                                                varies
poly    (gamma x'z + coef0)^degree                         varies
npoly   (gamma x'z + coef0)^degree / sqrt(k~(x, x) k~(z, z)) 1
======= ================================================== =========

(k~ the unnormalised poly.) No compiled fast path knows them: their blocks
come from the Gram matrix (float32 BLAS, or scipy for CSR), transformed in
float64 (:func:`.compiled.dot_transform`).
"""
import numpy as np

from .base import Kernel, register
from .compiled import dot_transform
from .sums import sq_norms


@register
class Linear(Kernel):
    """x'z (``"linear"``)."""

    name = "linear"
    params = ()
    float32_gram = True
    pairs_translation_invariant = True

    def _diag(self, X, sq):
        return sq

    def _from_gram(self, G, A, B, sqa, sqb):
        return G

    def pair_diag(self, Xi, Xj):
        Xi, Xj = np.asarray(Xi, np.float64), np.asarray(Xj, np.float64)
        return ((Xi - Xj) ** 2).sum(axis=1)


@register
class Poly(Kernel):
    """(gamma x'z + coef0)^degree (``"poly"``, ``"polynomial"``)."""

    name = "poly"
    aliases = ("polynomial",)
    normalized = False
    # the largest (gamma x'z + coef0)^degree the kernel's values may reach, and
    # what holds it: float32 kernel blocks
    value_limit = 2.0 ** 120
    value_limit_why = "float32 kernel values hold (3.4e38)"

    def _diag(self, X, sq):
        return (self.gamma * sq + self.coef0) ** self.degree

    def _from_gram(self, G, A, B, sqa, sqb):
        sqa = sq_norms(A) if sqa is None else sqa
        sqb = sq_norms(B) if sqb is None else sqb
        return dot_transform(G, sqa, sqb, self.normalized, self.gamma, self.coef0,
                             self.degree)


@register
class NPoly(Poly):
    """The normalised polynomial (``"npoly"``, ``"normalized_poly"``):
    k(x, x) = 1."""

    name = "npoly"
    aliases = ("normalized_poly",)
    normalized = True
    constant_diagonal = True
    # npoly divides by sqrt(k(x, x) k(z, z)), in float64 (2^1024)
    value_limit = 2.0 ** 480
    value_limit_why = "the float64 normalisation holds (its square must stay below 1.8e308)"

    def pair_bound(self):
        return 4.0
