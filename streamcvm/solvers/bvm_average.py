"""The BVM step arithmetic that the sampled BVM (:class:`~.methods.BVM`) and
the exact pass (:mod:`.exact.bvm_loop`) share (pure numba): the mean of the
last two centers and the eps it is certified for."""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def half_last_step(beta, c2, ce2, d2, kt):
    """The mean of the last two BVM centers, ``(c_T + c_{T-1}) / 2``, is the
    last step ``c_{T-1} -> beta c_{T-1} + (1 - beta) phi_z`` taken at half its
    length, ``beta' = (1 + beta) / 2``. Given that step's beta and the state
    before it (``c2 = ||c_{T-1}||^2``, ``ce2``, and ``d2``, the squared distance
    of ``z`` then), returns ``(beta', ||c~||^2, ce~^2)``.

    Why: near the end of an eps level furthest-point steps alternate between
    two states (measured on ijcnn1, ``tools/bvm_path.py``): every step moves
    all decision values by about ``1 - beta ~ eps``, up then down, and the test
    accuracy swings by a point from one step to the next. Their mean does not
    swing, and it stays inside the ball of :func:`half_step_eps`."""
    bp = 0.5 * (1.0 + beta)
    p = 0.5 * (c2 + kt + ce2 - d2)            # (K~a)_z before the step
    c2n = bp * bp * c2 + 2.0 * bp * (1.0 - bp) * p + (1.0 - bp) ** 2 * kt
    return bp, c2n, bp * bp * ce2


@njit(cache=True, nogil=True)
def half_step_eps(D2, d2, r2):
    """Certified eps of the mean of the last two centers: every point is
    within ``sqrt(D2)`` of ``c_T`` (``D2 = (1 + eps)^2 r^2`` at the end of a
    level) and within ``sqrt(d2)`` (the furthest distance before the last
    step) of ``c_{T-1}``, so by the triangle inequality within
    ``(sqrt(D2) + sqrt(d2)) / 2`` of their mean: returns that over ``r``, - 1."""
    return 0.5 * (np.sqrt(D2) + np.sqrt(d2)) / np.sqrt(r2) - 1.0
