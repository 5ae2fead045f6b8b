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


class RankingTotals:
    """NDCG@k and pairwise accuracy accumulated over a stream of rows whose
    queries are contiguous (as in svmlight/LETOR files): a query's rows are
    held until the next query starts, so memory is one query, not n rows."""

    def __init__(self, k=10):
        self.k = k
        self.right = self.pairs = 0
        self.ndcg_sum = 0.0
        self.queries = 0
        self._buf = None            # (y, score, qid) of the unfinished query

    def add(self, y, score, qid):
        y, score, qid = (np.asarray(a) for a in (y, score, qid))
        if self._buf is not None:
            y, score, qid = (np.concatenate([b, a]) for b, a in zip(self._buf, (y, score, qid)))
        if len(qid) == 0:
            return
        last = qid[-1]
        done = np.flatnonzero(qid != last)
        cut = done[-1] + 1 if len(done) else 0
        self._take(y[:cut], score[:cut], qid[:cut])
        self._buf = (y[cut:], score[cut:], qid[cut:])

    def _take(self, y, score, qid):
        for g in _groups(qid):
            yy, ss = y[g].astype(np.float64), score[g].astype(np.float64)
            pref = yy[:, None] > yy[None, :]
            self.pairs += int(pref.sum())
            self.right += int((pref & (ss[:, None] > ss[None, :])).sum())
            n = ndcg_at_k(yy, ss, np.zeros(len(g)), self.k)
            if not np.isnan(n):
                self.ndcg_sum += n
                self.queries += 1

    def result(self):
        """(NDCG@k, pairwise accuracy, queries with a relevant document, pairs)."""
        if self._buf is not None:
            self._take(*self._buf)
            self._buf = None
        return (self.ndcg_sum / self.queries if self.queries else float("nan"),
                self.right / self.pairs if self.pairs else float("nan"), self.queries, self.pairs)


class AUCSketch:
    """The ROC AUC of a stream of (score, positive?) in memory independent of
    the rows: a histogram of the scores' float32 bit patterns, mapped to
    integers in score order and cut to their top ``BITS`` bits (2^20 bins
    over every float: scores closer than ~1e-3 relative share a bin). Pairs in
    different bins count exactly; a positive and a negative in one bin count
    1/2 (a tie), so the result is the exact AUC up to the share of
    positive-negative pairs that share a bin."""
    BITS = 20

    def __init__(self):
        self.pos = np.zeros(1 << self.BITS, np.int64)
        self.neg = np.zeros(1 << self.BITS, np.int64)

    @classmethod
    def bins(cls, score):
        u = np.ascontiguousarray(score, np.float32).view(np.uint32)
        # order-preserving: flip every bit of negatives, the sign bit of the rest
        key = np.where(u >> 31, ~u, u | np.uint32(0x80000000))
        return (key >> np.uint32(32 - cls.BITS)).astype(np.int64)

    def add(self, score, positive):
        b = self.bins(score)
        positive = np.asarray(positive, bool)
        self.pos += np.bincount(b[positive], minlength=len(self.pos))
        self.neg += np.bincount(b[~positive], minlength=len(self.neg))

    def both_classes(self):
        return bool(self.pos.any() and self.neg.any())

    def result(self):
        """P(score of a positive > score of a negative) + 1/2 P(tie)."""
        below = np.cumsum(self.neg) - self.neg          # negatives in lower bins
        wins = float(self.pos @ below) + 0.5 * float(self.pos @ self.neg)
        return wins / (float(self.pos.sum()) * float(self.neg.sum()))


class ClassTotals:
    """Classification (or one-class) figures streamed chunk by chunk: the
    confusion counts (one bincount per chunk) and, for two classes, the AUC
    of the decision values (:class:`AUCSketch`). Rows are given as class
    indices: ``t`` true (-1: a label the model does not know, counted apart),
    ``p`` predicted."""

    def __init__(self, n_classes):
        self.k = int(n_classes)
        self.cm = np.zeros((self.k, self.k), np.int64)
        self.auc = AUCSketch() if self.k == 2 else None
        self.unknown = 0

    def add(self, t, p, dec=None):
        ok = t >= 0
        self.unknown += int((~ok).sum())
        self.cm += np.bincount(t[ok] * self.k + p[ok], minlength=self.cm.size).reshape(self.cm.shape)
        if self.auc is not None and dec is not None and dec.ndim == 1:
            self.auc.add(dec[ok], t[ok] == 1)

    def result(self):
        """rows, unknown_label_rows, accuracy, balanced_loss (1 - the mean
        recall of the classes present), confusion, and auc when known."""
        cm = self.cm
        total = cm.sum()
        recall = np.diag(cm) / np.maximum(cm.sum(axis=1), 1)
        present = cm.sum(axis=1) > 0
        out = {"rows": int(total), "unknown_label_rows": self.unknown,
               "accuracy": float(np.trace(cm) / max(total, 1)),
               "balanced_loss": float(1 - recall[present].mean()) if present.any() else None,
               "confusion": cm.tolist()}
        if self.auc is not None and self.auc.both_classes():
            out["auc"] = self.auc.result()
        return out


class RegressionTotals:
    """RMSE, nRMSE (RMSE / max y, the cvr paper's), MRE (mean |(f - y) / y|
    over rows with y != 0) and R^2, from sums kept chunk by chunk."""

    def __init__(self):
        self.n = self.nrel = 0
        self.sse = self.sy = self.syy = self.rel = 0.0
        self.ymax = -np.inf

    def add(self, y, f):
        y = np.asarray(y, np.float64)
        e = f - y
        self.n += len(y)
        self.sse += float(e @ e)
        self.sy += float(y.sum())
        self.syy += float(y @ y)
        self.ymax = max(self.ymax, float(y.max())) if len(y) else self.ymax
        nz = y != 0
        self.rel += float(np.abs(e[nz] / y[nz]).sum())
        self.nrel += int(nz.sum())

    def result(self):
        """rows, rmse, nrmse, mre, r2 (None where undefined: max y <= 0, every
        y 0, a constant y)."""
        n, sse = self.n, self.sse
        rmse = np.sqrt(sse / n)
        sst = self.syy - self.sy * self.sy / n
        return {"rows": n, "rmse": float(rmse),
                "nrmse": float(rmse / self.ymax) if self.ymax > 0 else None,
                "mre": self.rel / self.nrel if self.nrel else None,
                "r2": float(1.0 - sse / sst) if sst > 0 else None,
                "rows_nonzero_y": self.nrel}
