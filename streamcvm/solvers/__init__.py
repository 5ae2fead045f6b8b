"""Solvers of the (center-constrained) MEB dual: plain arrays in, solver state out.

Open first: :mod:`.meb` (``MEBSolver``, the annealing driver), then
:mod:`.methods` (CVM, BVM, FVM). Subfolders: :mod:`.kernels`, :mod:`.exact`
(problems held whole), :mod:`.mmda` (MMDA's solver).
"""
from .._numba_cache import ensure as _ensure_numba_cache

_ensure_numba_cache()       # before the first compiled kernel is defined

from .meb import MEBSolver, eps_levels  # noqa: E402

__all__ = ["MEBSolver", "eps_levels"]
