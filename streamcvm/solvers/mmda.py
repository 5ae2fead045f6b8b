"""MMDA's constrained MEB on a core set (mmda paper, sec. IV): the QP of one
large-margin direction orthogonal to the directions found before, solved by
SOR (Algorithm 3).

Directions are kernel expansions: ``u_q = sum_j c_qj phi(x_j)`` over rows
``X_q`` (unit norm, mutually orthogonal). For the core set's rows ``x_i``
with labels ``y_i``, the dual of eq. (2) is eq. (3):

    min_{a >= 0, g}  1/2 [a; g]' G [a; g] - 1'a,
    G = [[K^, B], [B', U'U]],  K^ = Y (K + 11' + I / C) Y,  B_iq = y_i u_q'phi(x_i)

(halved; ``U'U = I``). Its solution normalised by ``1'a`` is the
constrained MEB's (eq. 35), whose center's distance to a point is the one
formula of :func:`streamcvm.solvers.ball.distance2`. The new direction is
``w = sum_i a_i y_i phi(x_i) + sum_q g_q u_q`` (eq. 8).
"""
import numpy as np

SOR_OMEGA = 1.0         # the extrapolation factor omega of Algorithm 3 (Gauss-Seidel: 1)


def sor(G, a0, g0, omega=SOR_OMEGA, tol=1e-8, max_iter=1_000_000):
    """Algorithm 3: coordinate steps on ``min 1/2 x'Gx - [1; 0]'x``, ``x = [a;
    g]``, ``a >= 0`` (the first ``len(a0)`` coordinates), each time on the
    coordinate whose projected step is largest, until no step exceeds
    ``tol``. Warm start from ``(a0, g0)``. Returns ``(a, g, steps)``."""
    t = len(a0)
    x = np.concatenate([np.asarray(a0, np.float64), np.asarray(g0, np.float64)])
    lin = np.concatenate([np.ones(t), np.zeros(len(x) - t)])
    grad = G @ x - lin
    diag = np.diag(G).copy()
    steps = 0
    for steps in range(1, max_iter + 1):
        move = -omega * grad / diag
        move[:t] = np.maximum(x[:t] + move[:t], 0.0) - x[:t]     # a >= 0: clip
        i = int(np.argmax(np.abs(move)))
        if abs(move[i]) <= tol:
            break
        x[i] += move[i]
        grad += G[:, i] * move[i]
    return x[:t], x[t:], steps


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
