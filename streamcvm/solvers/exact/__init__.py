"""Solvers of problems held whole in memory, every row checked at every step
rather than sampled: the exact BVM pass (:mod:`.bvm`, its compiled loop in
:mod:`.bvm_loop`), SMO for the two-class L2-SVM (:mod:`.svc`) and for the
L2-SVR (:mod:`.svr`), over a shared kernel-row cache (:mod:`.rowcache`) and
vectorised reductions (:mod:`.reduce`).

Open first: :mod:`.bvm` (``ExactBVM``), then :mod:`.svc` (``svc_exact``).
"""
