"""MMDA's solver (mmda paper, sec. IV): one large-margin direction at a time,
the constrained MEB orthogonal to the directions before it.

Open first: :mod:`.solver` (:class:`MMDASolver`). Then :mod:`.basis` (the
directions as kernel expansions), :mod:`.sor` (Algorithm 3, the core QP),
:mod:`.memory` (the compiled in-memory route) and :mod:`.rowkernels` (its
kernel columns).
"""
from .basis import Basis, Direction, core_matrix, direction, merge_rows
from .rowkernels import RowKernels
from .solver import MMDASolver
from .sor import sor

__all__ = ["Basis", "Direction", "MMDASolver", "RowKernels", "core_matrix", "direction",
           "merge_rows", "sor"]
