"""The exact solver of a small two-class L2-SVM: SMO over every row held in
memory (:func:`~.smo.svc_exact`), the same MEB dual as BVM, CVM and
Frank-Wolfe solved to its optimum. It shares the kernel-row cache and the
vectorised reductions of the exact L2-SVR (:mod:`streamcvm.solvers.smo`)."""
from .smo import SVC_TOL, svc_exact, svc_smo

__all__ = ["SVC_TOL", "svc_exact", "svc_smo"]
