"""Solvers of the (center-constrained) MEB dual: plain arrays in, solver state out."""
from .meb import MEBSolver, eps_levels

__all__ = ["MEBSolver", "eps_levels"]
