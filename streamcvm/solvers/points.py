"""Which points a problem's MEB is over, and their center-constrained terms.

The solvers work on the dual of docs/design.md section 2,

    max_a  a'q - a'K~a,   a >= 0, sum(a) = 1,
    K~_ij = s_i s_j (k(x_i, x_j) + b) + [i == j] ic_i,

where every point ``i`` stands on a row ``x_i`` with a sign ``s_i`` (+-1),
its ``ic_i = 1/C_i`` and its linear term ``q_i = K~_ii + Delta_i``. The
squared distance of point ``l`` from the center is
``||c||^2 - 2 (K~a)_l + q_l`` and the squared radius ``a'q - ||c||^2``.

A points object turns rows drawn from a store into candidate points, as
plain arrays ``(pid, ridx, s, q, ic)``: point ids, the index of each point's
row among the rows given, signs, linear terms and 1/C_i. Points that are not
rows are never materialised: SVR's 2m points are ``(row, sign)``, with point
id ``2 row + (sign < 0)``.

``plain`` is True when the problem is the plain MEB of the papers' sec. II
(constant ``q`` equal to a constant diagonal ``kt``, one C): the only case
BVM (and its exact variant) handles.
"""
import numpy as np


class RowPoints:
    """Classification and one-class points: one per row, sign = label.

    ``C``: the base C; ``mult(y, w)``: optional per-row C multipliers
    (class weights times sample weights) for labels ``y`` and sample
    weights ``w`` (None: all 1); ``min_mult``: their smallest value over the
    training rows; ``kmax``: an upper bound of ``k(x, x)`` over the training
    rows (1 for constant-diagonal kernels). With per-row C or a non-constant
    diagonal, ``q = eta = kmax + b + 1 / (C min_mult)`` for every point, the
    smallest eta with ``Delta = eta - K~_ll >= 0`` (generalized-cvm sec. IV-A).
    """

    def __init__(self, C, b, mult=None, min_mult=1.0, kmax=1.0, constant_diagonal=True,
                 weighted=False, skip_core=True):
        self.C = float(C)
        self.b = float(b)
        self.mult = mult
        self.weighted = weighted            # draws must carry the store's sample weights
        # skip_core: the sampler skips the core set's rows; else drawn points
        # are checked against it (ranking: points are pairs, not rows)
        self.skip_core = skip_core
        self.check_core = not skip_core
        self.plain = mult is None and constant_diagonal
        self.ic0 = 1.0 / self.C
        self.eta = (1.0 + self.b + 1.0 / self.C) if self.plain else \
            float(kmax) + self.b + 1.0 / (self.C * float(min_mult))

    def from_rows(self, ids, y, w=None):
        n = len(ids)
        ic = np.full(n, self.ic0) if self.mult is None else 1.0 / (self.C * self.mult(y, w))
        return (np.asarray(ids, np.int64), np.arange(n), np.asarray(y, np.float64),
                np.full(n, self.eta), ic)

    init_points = from_rows

    def exclude(self, core):
        """What the sampler skips: the core set's rows (point ids are row ids)."""
        return core if self.skip_core else None


class SignedPoints:
    """L2-SVR's points (cvr paper eqs. 7-8, 15): each row ``(x_i, t_i)``
    twice, with sign ``s = +1`` (lambda_i) and ``s = -1`` (lambda*_i);
    ``K~ = s s' (K + 1) + (mu m / C) I`` and ``q = eta + (2/C) s t``, with
    ``eta = kmax + 1 + mu m / C + (2/C) max|t|`` (the smallest eta making
    ``Delta >= 0``). Point id ``2 i + (s < 0)``. The targets are seen as
    ``(y - offset) / scale`` (their mean and standard deviation: the bias is
    penalised, so the fit is centred on the offset, which the machine's
    intercept adds back, and a problem in the targets' own units would
    weigh the slacks against ``||w||^2`` differently at every scale of y);
    ``mu`` and ``tmax`` (max |y - offset|) are in the targets' units, and
    ``self.mu`` is mu as the problem sees it, ``mu / scale``."""

    plain = False
    weighted = False
    check_core = True           # drawn points may be core points (nothing excluded)

    def __init__(self, C, mu, m, tmax, kmax=1.0, offset=0.0, scale=1.0):
        self.C = float(C)
        self.offset = float(offset)
        self.scale = float(scale)
        if not self.scale > 0:
            raise ValueError(f"the targets' scale must be positive, got {scale!r}")
        self.mu = float(mu) / self.scale
        self.ic0 = self.mu * float(m) / self.C
        self.two_over_C = 2.0 / self.C
        self.eta = float(kmax) + 1.0 + self.ic0 + self.two_over_C * float(tmax) / self.scale

    def targets(self, y):
        """The targets ``y`` (their units) as the problem sees them, float64."""
        return (np.asarray(y, np.float64) - self.offset) / self.scale

    def from_rows(self, ids, t, w=None):
        """Both signs of every row."""
        n = len(ids)
        ids = np.asarray(ids, np.int64)
        s = np.concatenate([np.ones(n), -np.ones(n)])
        tt = self.targets(np.concatenate([t, t]))
        return (np.concatenate([2 * ids, 2 * ids + 1]), np.concatenate([np.arange(n)] * 2),
                s, self.eta + self.two_over_C * s * tt, np.full(2 * n, self.ic0))

    def init_points(self, ids, t, w=None):
        """One point per row, the sign of its target (the furthest of the
        two from the empty center: d^2 = eta + (2/C) s t)."""
        n = len(ids)
        t = self.targets(t)
        s = np.where(t >= 0, 1.0, -1.0)
        return (2 * np.asarray(ids, np.int64) + (s < 0), np.arange(n), s,
                self.eta + self.two_over_C * s * t, np.full(n, self.ic0))

    def exclude(self, core):
        """Nothing is skipped: a row with one sign in the core set may still
        violate with the other, and FVM's core set can cover most rows (the
        searches then check drawn points against the core set instead)."""
        return None
