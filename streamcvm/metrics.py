"""Ranking metrics over query groups (plain arrays; one group at a time)."""
import numpy as np


def _groups(qid):
    qid = np.asarray(qid)
    order = np.argsort(qid, kind="stable")
    cut = np.flatnonzero(np.diff(qid[order])) + 1
    return np.split(order, cut)


def pairwise_accuracy(y, score, qid):
    """The fraction of preference pairs (same query, y_i > y_j) that ``score``
    orders strictly right (ties count as wrong), over all queries."""
    y, score = np.asarray(y, np.float64), np.asarray(score, np.float64)
    right = total = 0
    for g in _groups(qid):
        yy, ss = y[g], score[g]
        pref = yy[:, None] > yy[None, :]
        total += int(pref.sum())
        right += int((pref & (ss[:, None] > ss[None, :])).sum())
    return right / total if total else float("nan")


def ndcg_at_k(y, score, qid, k=10):
    """Mean NDCG@k over the queries with a relevant document (gain 2^y - 1,
    discount 1 / log2(rank + 1); ties in ``score`` keep the input order)."""
    y, score = np.asarray(y, np.float64), np.asarray(score, np.float64)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    out = []
    for g in _groups(qid):
        yy, ss = y[g], score[g]
        top = yy[np.argsort(-ss, kind="stable")[:k]]
        ideal = np.sort(yy)[::-1][:k]
        idcg = ((2.0 ** ideal - 1.0) * disc[:len(ideal)]).sum()
        if idcg > 0:
            out.append(((2.0 ** top - 1.0) * disc[:len(top)]).sum() / idcg)
    return float(np.mean(out)) if out else float("nan")
