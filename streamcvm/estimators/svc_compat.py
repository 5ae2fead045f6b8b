"""What the classifier shares with :class:`sklearn.svm.SVC`: its machines
laid out as SVC's attributes (``support_``, ``n_support_``,
``support_vectors_``, ``dual_coef_``, ``intercept_``), and SVC's rule for
sample weights (a weight of 0 drops the row)."""
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp


class SVCLayout(NamedTuple):
    """A classifier's machines as :class:`sklearn.svm.SVC` lays them out."""
    support: np.ndarray       # distinct support rows' indices, by class then index
    n_support: np.ndarray     # how many of them per class
    rows: object              # the rows themselves (ndarray or CSR), in that order
    dual_coef: np.ndarray     # [n_classes - 1, n_SV] one-vs-one, [1, n_SV] two
                              # classes, [n_classes, n_SV] one-vs-rest
    intercept: np.ndarray     # one per machine, in SVC's sign


def one_vs_rest(machines):
    """Whether ``machines`` are one-vs-rest ones (class k against a tuple of the rest)."""
    return isinstance(machines[0].classes[0], tuple)


def support_classes(machines, n_classes, ovr):
    """(the distinct support row ids, sorted; each one's class index, -1 where
    the machines do not tell it). A row on a machine's positive side (coef >
    0) is of that side's class; a one-vs-one or two-class row's negative side
    is a class too, a one-vs-rest row's ("the rest") is not."""
    ids = np.concatenate([m.sv_ids for m in machines])
    coef = np.concatenate([m.coef for m in machines])
    mach = np.repeat(np.arange(len(machines)), [len(m.sv_ids) for m in machines])
    uniq, inv = np.unique(ids, return_inverse=True)
    cls = np.full(len(uniq), -1, np.int64)
    if ovr:                                 # machine k: class k (positive) against the rest
        pos = coef > 0
        cls[inv[pos]] = mach[pos]
    else:                                   # machine (i, j), i < j: positive for j
        lo, hi = np.triu_indices(n_classes, 1)
        cls[inv] = np.where(coef > 0, hi[mach], lo[mach])
    return uniq, cls


def svc_layout(machines, n_classes, ovr=False, row_classes=None):
    """The machines (one-vs-one in classes_ order i < j, positive for j; or
    two classes, positive for classes_[1]; or ``ovr``: machine k positive for
    class k) in SVC's layout (:class:`SVCLayout`). The distinct support rows
    (by id: a row several machines share is one support vector) sorted by
    class, then id. One-vs-one: machine (i, j) counts positive for i, as
    SVC's (its coefficients and intercept negated); the coefficient of a
    row of class c in its machine against class o is in row o of
    ``dual_coef`` if o < c, else o - 1 (LIBSVM's layout); 0 where the row is
    not a support vector of that machine. Two classes: one row, positive
    for classes_[1]. One-vs-rest: row k is machine k's coefficients.
    ``row_classes``: one-vs-rest, the class of each distinct support row
    (sorted by id), which the machines do not always tell."""
    uniq, cls = support_classes(machines, n_classes, ovr)
    if ovr:
        cls = np.asarray(row_classes, np.int64)
        if len(cls) != len(uniq):
            raise ValueError("the support rows' classes do not match the machines")
    order = np.lexsort((uniq, cls))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    ids = np.concatenate([m.sv_ids for m in machines])
    coef = np.concatenate([np.asarray(m.coef, np.float64) for m in machines])
    mach = np.repeat(np.arange(len(machines)), [len(m.sv_ids) for m in machines])
    pos = np.searchsorted(uniq, ids)        # each entry's distinct row
    col = rank[pos]
    intercept = np.array([m.intercept for m in machines], np.float64)
    if ovr:
        D = np.zeros((n_classes, len(uniq)))
        D[mach, col] = coef
    elif len(machines) == 1:
        D = np.zeros((1, len(uniq)))
        D[0, col] = coef
    else:
        lo, hi = np.triu_indices(n_classes, 1)
        own = cls[pos]
        other = np.where(own == lo[mach], hi[mach], lo[mach])
        D = np.zeros((n_classes - 1, len(uniq)))
        D[np.where(other < own, other, other - 1), col] = -coef
        intercept = -intercept
    svs = [m.sv for m in machines]
    allrows = sp.vstack(svs).tocsr() if sp.issparse(svs[0]) else np.concatenate(svs)
    _, first = np.unique(ids, return_index=True)
    return SVCLayout(uniq[order], np.bincount(cls, minlength=n_classes).astype(np.int32),
                     allrows[first[order]], D, intercept)


def _labels_at(store, ids, codes):
    """The class indices (positions in ``codes``) of the store's rows ``ids``
    (sorted), read from the chunks that hold them."""
    index = {float(c): k for k, c in enumerate(codes)}
    out = np.empty(len(ids), np.int64)
    chunk = ids // store.chunk_rows
    for i in np.unique(chunk):
        a, _ = store.chunk_bounds(int(i))
        sel = np.flatnonzero(chunk == i)
        y = np.asarray(store.chunk(int(i)).y, np.float64)[ids[sel] - a]
        out[sel] = [index[float(v)] for v in y]
    return out


def _weighted_rows(est, X, y, sample_weight):
    """(X, y, weights, kept) for a fit on arrays with ``sample_weight``: rows
    of weight 0 dropped, as SVC drops them (``kept``: the indices of the
    rows kept, None when all are), weights that are all 1 made None (an
    unweighted fit, the same problem). Negative weights are refused."""
    from sklearn.utils import _safe_indexing
    from sklearn.utils.validation import _check_sample_weight, check_consistent_length
    check_consistent_length(X, y, sample_weight)
    sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
    if (sw < 0).any():
        raise ValueError(f"sample_weight must be >= 0 (a weight of 0 drops the row), got "
                         f"{sw.min():g}")
    kept = np.flatnonzero(sw > 0)
    if len(kept) == 0:
        raise ValueError("every sample_weight is 0: no row to train on")
    if len(kept) == len(sw):
        kept = None
    else:       # (X and y as given: fit validates them, keeping a frame's column names)
        X, y, sw = _safe_indexing(X, kept), _safe_indexing(y, kept), sw[kept]
    return X, y, None if np.all(sw == 1.0) else sw, kept
