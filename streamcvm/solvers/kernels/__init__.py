"""Kernels: each kernel an object that knows its parameters, whether k(x, x)
is constant and which compiled fast paths it has (:mod:`.base`, the
registry; the kernels in :mod:`.distance` and :mod:`.dot`), over pure numba
element kernels (:mod:`.compiled`, :mod:`.expf`, :mod:`.rows`) and the
weighted sums of kernel blocks that predict and the solvers share
(:mod:`.sums`).

Open first: :mod:`.base` (``Kernel``, ``kernel_class``).
"""
from . import distance, dot  # noqa: F401 (each registers its kernels)
from .base import FAST_PATHS, KERNELS, Kernel, estimate_beta, kernel_class, kernel_names
from .sums import (block_rows_for, block_times, for_blocks, kernel_sums, sq_norms,
                   summed_in_place, weighted_sum)

__all__ = ["FAST_PATHS", "KERNELS", "Kernel", "block_rows_for", "block_times",
           "estimate_beta", "for_blocks", "kernel_class", "kernel_names", "kernel_sums",
           "sq_norms", "summed_in_place", "weighted_sum"]
