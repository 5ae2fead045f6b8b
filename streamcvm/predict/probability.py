"""Class probabilities (``CVMClassifier(probability=True)``, ``train -b 1``):
Platt scaling fitted on rows held out from training, pairwise coupling for
more than two classes.

- Up to the option ``probability_cv_rows`` rows, as LIBSVM: the model is
  trained on every row, and the sigmoids on every row's decision value from
  a model trained without it (``probability_folds``-fold cross-validation:
  five more fits). Beyond, where five more fits would cost more than the
  rows add: rows whose hash key (:func:`~streamcvm.problems.progressive.row_keys`
  with a seed of their own) falls below ``probability_holdout`` of the rows,
  clipped to [``probability_holdout_min``, ``probability_holdout_max``] and a
  quarter of the rows, are held out and never trained on. :class:`HoldoutStore` shows the training code a
  fold's or the held-out rows with the label NaN, which is no class: every
  machine's class filter drops them, while X, the chunking and the row ids
  stay those of the store.
- Platt's sigmoid ``P(positive side | f) = 1 / (1 + exp(A f + B))`` per
  machine, fitted by :func:`platt_fit` on the held-out rows of its two sides
  (Platt 2000, with the Newton method and the smoothed targets of Lin, Lin
  and Weng, "A note on Platt's probabilistic outputs", 2007).
- More than two classes, one-vs-one: the pairwise probabilities
  ``r_ij = P(i | i or j)`` are coupled into one distribution by
  :func:`pairwise_coupling` (Wu, Lin and Weng 2004, their second method, as
  LIBSVM); one-vs-rest: each class's sigmoid, normalised to sum 1.
"""
import numpy as np

from ..data.store import BaseStore, Chunk, count_classes

HOLDOUT_SEED = 0x5BD1E995       # added to the fit's seed: not the progressive sample's draw


def holdout_fraction(n, options):
    """The share of ``n`` rows held out for the sigmoid (the options
    ``probability_holdout*``)."""
    o = options
    rows = min(max(o.probability_holdout * n, o.probability_holdout_min),
               o.probability_holdout_max, n // 4)
    return rows / max(n, 1)


def held_mask(a, b, seed, lo, hi):
    """Which of rows ``a:b`` are held out: their key (a hash of seed and row
    id, uniform in [0, 1)) in [lo, hi)."""
    from ..problems.progressive import row_keys
    k = row_keys(np.arange(a, b, dtype=np.int64), seed + HOLDOUT_SEED)
    return (k >= lo) & (k < hi)


class HoldoutStore(BaseStore):
    """``store`` with its held-out rows (keys in [lo, hi)) labelled NaN (no
    class): the held-out share of :func:`holdout_fraction`, or a fold."""

    def __init__(self, store, seed, lo, hi):
        self.inner, self.seed, self.lo, self.hi = store, int(seed), float(lo), float(hi)
        for name in ("n", "d", "sparse", "chunk_rows", "has_qid", "has_weight", "nnz",
                     "label_names", "feature_names", "path"):
            setattr(self, name, getattr(store, name, None))
        self._classes = store.classes
        self._counts = None
        import xxhash
        self.fingerprint = xxhash.xxh3_128(
            f"{store.fingerprint}|holdout|{self.seed}|{self.lo!r}|{self.hi!r}".encode()).hexdigest()

    @property
    def class_counts(self):
        """Per-chunk counts of the training rows only (one pass over y)."""
        if self._classes is None:
            return None
        if self._counts is None:
            self._counts = count_classes(self._classes, (self.chunk(i).y
                                                         for i in range(self.n_chunks)))
        return self._counts

    def decode_labels(self, y):
        return self.inner.decode_labels(y)

    def _read(self, a, b):
        c = self.inner.rows(a, b)
        y = np.array(c.y, np.float64)
        y[held_mask(a, b, self.seed, self.lo, self.hi)] = np.nan
        return Chunk(c.X, y, c.qid, c.weight)

    def held_out(self):
        """(X, y) of the held-out rows, chunk by chunk."""
        import scipy.sparse as sp
        Xs, ys = [], []
        for i in range(self.n_chunks):
            a, b = self.chunk_bounds(i)
            keep = held_mask(a, b, self.seed, self.lo, self.hi)
            if keep.any():
                c = self.inner.rows(a, b)
                Xs.append(c.X[keep])
                ys.append(np.asarray(c.y, np.float64)[keep])
        if not Xs:
            return None, np.empty(0)
        X = sp.vstack(Xs).tocsr() if sp.issparse(Xs[0]) else np.concatenate(Xs)
        return X, np.concatenate(ys)


def _nll(f, t, A, B):
    z = f * A + B
    # t z + log(1 + exp(-z)) for z >= 0, (t - 1) z + log(1 + exp(z)) else: no overflow
    return float(np.sum(np.where(z >= 0, t * z + np.log1p(np.exp(-np.abs(z))),
                                 (t - 1) * z + np.log1p(np.exp(-np.abs(z))))))


def platt_fit(f, positive, max_iter=100):
    """(A, B) of ``P(positive | f) = 1 / (1 + exp(A f + B))``, by Newton's
    method with backtracking on the log loss against the smoothed targets
    (n+ + 1) / (n+ + 2) and 1 / (n- + 2)."""
    f = np.asarray(f, np.float64)
    positive = np.asarray(positive, bool)
    n1 = int(positive.sum())
    n0 = len(f) - n1
    t = np.where(positive, (n1 + 1.0) / (n1 + 2.0), 1.0 / (n0 + 2.0))
    A, B = 0.0, float(np.log((n0 + 1.0) / (n1 + 1.0)))
    fval = _nll(f, t, A, B)
    sigma = 1e-12
    for _ in range(max_iter):
        z = f * A + B
        e = np.exp(-np.abs(z))
        p = np.where(z >= 0, e / (1.0 + e), 1.0 / (1.0 + e))     # 1 / (1 + exp(z))
        q = 1.0 - p
        d2 = p * q
        h11 = sigma + float(np.dot(f * f, d2))
        h22 = sigma + float(d2.sum())
        h21 = float(np.dot(f, d2))
        d1 = t - p
        g1, g2 = float(np.dot(f, d1)), float(d1.sum())
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= 1e-10:
            nA, nB = A + step * dA, B + step * dB
            nf = _nll(f, t, nA, nB)
            if nf < fval + 1e-4 * step * gd:
                A, B, fval = nA, nB, nf
                break
            step /= 2.0
        else:
            break           # no descent: at the optimum to rounding
    return A, B


def platt_predict(f, A, B):
    """P(positive side | f), overflow-free."""
    z = np.asarray(f, np.float64) * A + B
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, e / (1.0 + e), 1.0 / (1.0 + e))


def pairwise_coupling(r, max_iter=None):
    """Class probabilities [n, k] from pairwise ones ``r[n, i, j] = P(i | i
    or j)`` (``r[:, j, i] = 1 - r[:, i, j]``): the p on the simplex that
    minimises sum_i sum_{j != i} (r_ji p_i - r_ij p_j)^2 (Wu, Lin, Weng 2004,
    method 2), by their fixed-point iteration, all rows at once."""
    n, k, _ = r.shape
    Q = -r.transpose(0, 2, 1) * r                   # Q_tj = -r_jt r_tj
    idx = np.arange(k)
    diag = (r[:, :, :] ** 2).sum(axis=1) - r[:, idx, idx] ** 2    # sum_{j != t} r_jt^2
    Q[:, idx, idx] = diag
    p = np.full((n, k), 1.0 / k)
    eps = 0.005 / k
    for _ in range(max_iter or max(100, k)):
        Qp = np.einsum("ntj,nj->nt", Q, p)
        pQp = np.einsum("nt,nt->n", p, Qp)
        if np.max(np.abs(Qp - pQp[:, None])) < eps:
            break
        for t in range(k):
            diff = (-Qp[:, t] + pQp) / Q[:, t, t]
            p[:, t] += diff
            pQp = (pQp + diff * (diff * Q[:, t, t] + 2 * Qp[:, t])) / (1 + diff) ** 2
            Qp = (Qp + diff[:, None] * Q[:, t, :]) / (1 + diff)[:, None]
            p /= (1 + diff)[:, None]
    return p


def cv_decisions(store, subs, kern, seed, cw, solve, fit_kw):
    """Every row's decision values (one column per machine) from machines
    trained without its fold, and the rows' labels (the option
    ``probability_folds`` folds by a hash of the row ids); not checkpointed.
    ``solve``: the machines' :class:`~streamcvm.problems.driver.Solve`
    (with the runner and the options)."""
    from ..problems import train_machine
    Fs, ys = [], []
    folds = solve.options.probability_folds
    for f in range(folds):
        fold = HoldoutStore(store, seed, f / folds, (f + 1) / folds)
        X, y = fold.held_out()
        if X is None:
            continue
        F = np.zeros((len(y), len(subs)))     # X: rows as the machines see them
        for k, pair in enumerate(subs):
            m = train_machine(fold, kern, solve.but(seed=seed + k), classes=pair,
                              class_weight=None if cw is None else (cw[pair[0]],
                                                                    cw[pair[1]]),
                              **fit_kw)
            F[:, k] = m.decision(kern, X)
        Fs.append(F)
        ys.append(y)
    return np.concatenate(Fs), np.concatenate(ys)


def fit_sigmoids(F, y, subs):
    """Platt's (A, B), one per machine, each fitted on the rows of its two
    sides: decision values ``F`` [rows, machines] of rows not trained on,
    labels ``y``; ``subs``: each machine's (negative, positive) classes."""
    A, B = np.zeros(len(subs)), np.zeros(len(subs))
    for k, (neg, pos) in enumerate(subs):
        on_pos = np.isin(y, np.atleast_1d(pos))
        mine = on_pos | np.isin(y, np.atleast_1d(neg))
        if on_pos[mine].all() or not on_pos[mine].any():
            # a rare pair: Platt's smoothed targets still give a sigmoid, the
            # constant (n + 1) / (n + 2) for the side seen (1/2 with no rows)
            import warnings
            seen = "no row" if not mine.any() else \
                f"rows of one side only ({int(mine.sum()):,})"
            warnings.warn(f"streamcvm: probability: the rows held out for machine "
                          f"{k + 1} of {len(subs)} hold {seen}; its sigmoid is a constant "
                          f"(Platt's smoothed prior), not fitted to its decision values",
                          UserWarning, stacklevel=2)
        A[k], B[k] = platt_fit(F[mine, k], on_pos[mine])
    return A, B


def probabilities(F, A, B, multi_class, k):
    """P(class | x) [rows, k] from the machines' values ``F`` [rows,
    machines] and their sigmoids (A, B): one machine, its sigmoid; one-vs-rest,
    the sigmoids normalised; one-vs-one, the pairwise coupling."""
    P = platt_predict(F, A, B)      # P(positive side) per machine
    if F.shape[1] == 1:
        return np.column_stack([1.0 - P[:, 0], P[:, 0]])
    if multi_class == "ovr":       # machine c: class c against the rest
        return P / np.maximum(P.sum(axis=1, keepdims=True), 1e-300)
    r = np.zeros((len(F), k, k))
    col = 0
    for i in range(k):
        for j in range(i + 1, k):       # machine (i, j): f > 0 means j
            pj = np.clip(P[:, col], 1e-7, 1 - 1e-7)
            r[:, j, i], r[:, i, j] = pj, 1.0 - pj
            col += 1
    return pairwise_coupling(r)
