"""MMDA's directions as kernel expansions: :class:`Direction` (one unit
direction over distinct rows), :class:`Basis` (a class's directions as one
expansion, evaluated together), and the algebra of the core QP's matrix
(:func:`core_matrix`) and of a new direction (:func:`direction`)."""
import numpy as np

from ...options import default

def core_matrix(K, y, C, B):
    """``G`` of the core set: ``K`` the base kernel among its rows, ``y``
    their labels, ``B`` [rows, directions] = ``y_i u_q'phi(x_i)``."""
    y = np.asarray(y, np.float64)
    Kh = np.outer(y, y) * (np.asarray(K, np.float64) + 1.0) + np.eye(len(y)) / C
    s = B.shape[1]
    return np.block([[Kh, B], [B.T, np.eye(s)]])


def direction(alpha, gamma, y, dirs):
    """The new direction's expansion ``w = sum_i a_i y_i phi(x_i) + sum_q
    g_q u_q`` as coefficients over (core rows, then each direction's rows):
    a list of coefficient vectors, the core rows' first."""
    return [np.asarray(alpha) * np.asarray(y)] + [gq * c for gq, (_, c) in zip(gamma, dirs)]


def merge_rows(ids, rows, coef):
    """Distinct rows by id: ``(ids, rows, coef)`` with the coefficient
    columns of a row that occurs several times summed. ``coef``: a vector or
    a matrix [rows, columns]."""
    uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    coef = np.asarray(coef, np.float64)
    out = np.zeros((len(uniq),) + coef.shape[1:])
    np.add.at(out, inv, coef)
    return uniq, rows[first], out


class Direction:
    """A unit direction ``u = sum_j coef_j phi(rows_j)`` over distinct rows
    (their store ids ``ids``), the full expansion (its own support rows and
    those of the directions it was made orthogonal to). ``own``: how many of
    the rows are its own support rows (the kernel evaluations it adds).
    Directions are evaluated together, through a :class:`Basis`."""

    def __init__(self, rows, coef, ids, own=None):
        self.rows = rows
        self.coef = np.asarray(coef, np.float64)
        self.ids = np.asarray(ids, np.int64)
        self.own = len(self.ids) if own is None else int(own)


class Basis:
    """Unit directions found so far (one class's), as one kernel expansion:
    distinct rows ``rows`` (ids ``ids``) and a coefficient column per
    direction ``W`` [rows, directions]. A row shared by directions is one
    kernel evaluation; ``project`` evaluates every direction at once."""

    def __init__(self, directions=()):
        directions = list(directions)
        self.s = len(directions)
        if not directions:
            self.ids, self.rows, self.W = np.empty(0, np.int64), None, np.zeros((0, 0))
            return
        ids = np.concatenate([d.ids for d in directions])
        self.ids, first = np.unique(ids, return_index=True)
        self.rows = np.concatenate([np.asarray(d.rows) for d in directions])[first]
        # each direction's coefficients into its column (summed where its ids
        # repeat): merge_rows on [ids, directions] summed every zero as well
        # (0.02 s for optdigits' 50 features, twice a fit)
        self.W = np.zeros((len(self.ids), self.s))
        for q, d in enumerate(directions):
            np.add.at(self.W[:, q], np.searchsorted(self.ids, d.ids), d.coef)
        from ..kernels import sq_norms
        self.sq = sq_norms(self.rows)

    def project(self, kernel, X, sq=None, few_machines=default("few_machines")):
        """[len(X), s]: ``u_q'phi(x)`` of every row and direction
        (``few_machines``: the option's, :func:`~streamcvm.solvers.kernels.block_times`)."""
        if self.s == 0:
            return np.zeros((X.shape[0], 0))
        from ..kernels import kernel_sums
        return np.asarray(kernel_sums(kernel, X, self.rows, self.W, sq, self.sq,
                                      few_machines=few_machines),
                          np.float64).reshape(X.shape[0], self.s)
