"""A trained machine: support rows, coefficients, intercept, and how it
predicts; stored as plain arrays (model files and checkpoints alike)."""
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


@dataclass
class Machine:
    """One trained binary (or one-class) machine."""
    sv: object                    # support rows: ndarray [m, d] or CSR
    coef: np.ndarray              # alpha_i * y_i
    intercept: float              # sum alpha_i y_i * b
    sv_ids: np.ndarray            # global row ids of the support rows
    classes: tuple = None         # (neg, pos): label values (or a tuple: the rest); None: one-class
    radius2: float = 0.0          # one-class: outlier threshold on ||phi(x) - c||^2
    c2: float = 0.0               # one-class: ||c||^2 = a'Ka (original space)
    n_iter: int = 0
    core_size: int = 0
    full_pass_violators: object = None
    history: list = field(default_factory=list)
    sv_sq: np.ndarray = None      # squared norms of the support rows (lazy)
    regression: bool = False      # f(x) is a regression estimate (classes None)
    epsilon_bar: float = None     # regression: the tube width the L2-SVR found (cvr eq. 10)
    compact: object = None        # a compact expansion of f (a Machine of B basis rows), or None
    compact_info: dict = None     # how it was chosen (streamcvm.problems.compress.compact_machine)
    target: tuple = None          # regression: (mean, sd) of the targets its fit standardised
                                  # ((y - mean) / sd); coef, intercept, epsilon_bar are in y's units

    def decision(self, kernel, X, sq=None, n_jobs=1):
        """f(x) (binary) or R^2 - d^2(x) (one-class), for rows X, in kernel
        blocks of bounded memory (:func:`~streamcvm.solvers.kernels.kernel_sums`, on
        ``n_jobs`` threads)."""
        from ..solvers.kernels import kernel_sums, sq_norms
        sq = sq_norms(X) if sq is None else sq
        if self.sv_sq is None:
            self.sv_sq = sq_norms(self.sv)
        # CSR rows against dense support rows: from the nonzeros (kernels._csr_gram)
        svT = np.ascontiguousarray(self.sv.T, np.float32) \
            if sp.issparse(X) and not sp.issparse(self.sv) else None
        s = kernel_sums(kernel, X, self.sv, self.coef, sq, self.sv_sq, BT=svT, n_jobs=n_jobs)
        if self.classes is None and not self.regression:
            return self.radius2 - (self.c2 - 2.0 * s + kernel.diag(X, sq))
        return s + self.intercept


def machine_arrays(m):
    """A machine as (JSON-able record, arrays): checkpoints keep finished ones."""
    arrays = {"coef": m.coef, "ids": m.sv_ids}
    if sp.issparse(m.sv):
        arrays.update(sv_indptr=m.sv.indptr.astype(np.int64),
                      sv_indices=m.sv.indices.astype(np.int32),
                      sv_data=m.sv.data.astype(np.float32))
    else:
        arrays["sv"] = np.asarray(m.sv, np.float32)
    if m.compact is not None:
        arrays.update(compact_sv=np.asarray(m.compact.sv, np.float32),
                      compact_coef=np.asarray(m.compact.coef, np.float64))
    rec = {"classes": None if m.classes is None else list(m.classes),
           "intercept": m.intercept, "radius2": m.radius2, "c2": m.c2, "n_iter": m.n_iter,
           "core_size": m.core_size, "sparse": bool(sp.issparse(m.sv)),
           "shape": list(m.sv.shape), "full_pass_violators": m.full_pass_violators,
           "history": m.history, "regression": m.regression, "epsilon_bar": m.epsilon_bar,
           "compact": None if m.compact_info is None else
           dict(m.compact_info, intercept=None if m.compact is None else m.compact.intercept)}
    if m.target is not None:
        rec["target"] = {"mean": float(m.target[0]), "sd": float(m.target[1])}
    return rec, arrays


COMPACT_ARRAYS = ("compact_sv", "compact_coef")


def has_compact(rec):
    """Whether a machine record (:func:`machine_arrays`) has a compact expansion."""
    return isinstance(rec.get("compact"), dict) and rec["compact"].get("intercept") is not None


def machine_from(rec, arrays):
    """The inverse of :func:`machine_arrays`."""
    from ..data.store import csr_view
    sv = csr_view(arrays["sv_data"], arrays["sv_indices"], arrays["sv_indptr"],
                  tuple(rec["shape"])) if rec["sparse"] else arrays["sv"]
    cl = rec["classes"]
    m = Machine(sv=sv, coef=arrays["coef"], intercept=rec["intercept"], sv_ids=arrays["ids"],
                classes=None if cl is None else tuple(tuple(c) if isinstance(c, list) else c
                                                      for c in cl),
                radius2=rec["radius2"], c2=rec["c2"], n_iter=rec["n_iter"],
                core_size=rec["core_size"], full_pass_violators=rec["full_pass_violators"],
                history=rec.get("history", []), regression=rec.get("regression", False),
                epsilon_bar=rec.get("epsilon_bar"))
    t = rec.get("target")       # (models of an older streamcvm: none recorded)
    if isinstance(t, dict):
        m.target = (float(t["mean"]), float(t["sd"]))
    info = rec.get("compact")
    if isinstance(info, dict):
        m.compact_info = {k: v for k, v in info.items() if k not in ("intercept", "basis_of")}
        if has_compact(rec):
            import dataclasses
            Z = arrays["compact_sv"]
            m.compact = dataclasses.replace(
                m, sv=Z, coef=arrays["compact_coef"], intercept=float(info["intercept"]),
                sv_ids=-1 - np.arange(len(Z), dtype=np.int64), sv_sq=None, history=[],
                full_pass_violators=None, compact=None, compact_info=None)
    return m


