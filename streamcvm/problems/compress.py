"""Compact kernel expansions: a trained machine's ``f`` over B << |S| points.

A trained machine predicts with ``f(x) = sum_i a_i k(x_i, x) + b`` over its
support rows ``x_i``; on noisy data there are tens of thousands. A compact
expansion ``f~(x) = sum_j beta_j k(z_j, x) + b~`` over ``B << |S|`` basis
points costs ``B / |S|`` of that. This module holds the pieces, on plain
dense float32 arrays:

- basis points: :func:`pivoted_cholesky` (support rows chosen greedily by the
  largest residual diagonal of ``K_SS``, the incomplete Cholesky pivots),
  :func:`kmeans_centres` (centres not restricted to support rows:
  scikit-learn's MiniBatchKMeans) and :func:`weighted_kmeans` (k-means++
  seeding and a few Lloyd iterations in NumPy, what :func:`class_centres` uses),
  :func:`random_rows` (the baseline);
- coefficients: :func:`project` (the RKHS projection of ``w = sum_i a_i
  phi(x_i)`` on the span of the basis: ``K_ZZ beta = K_ZS a``, which
  minimises ``||w - w~||`` in the feature space), :func:`fit_values` (least
  squares on the full model's decision values at sample rows, with its own
  intercept);
- :func:`rkhs_error` (``||w - w~||``: the bound ``|f(x) - f~(x)| <= ||w - w~||
  sqrt(k(x, x))`` for ``b~ = b``) and :func:`refit_intercept`.

What ships: :func:`compact_machine` (a progressive fit's machine, B chosen
on its held-out validation rows) and :func:`compact_shared` (one basis for
all machines or features of a fit on every row, B chosen by
:func:`agreeing_labels`, :func:`paired_labels` or :func:`close_values` on
unused training rows).
``tools/compress_study.py`` compares the candidates at equal B on a trained
model; docs/solvers.md, "Compact expansions", gives the formulations.
"""
import numpy as np

from ..data.parallel import n_threads
from ..options import default
from ..solvers.kernels import block_times, for_blocks, kernel_sums, sq_norms


def _dense(X):
    return np.ascontiguousarray(X, np.float32)


def pivoted_cholesky(kernel, X, B, tol=1e-6):
    """Indices of up to ``B`` rows of ``X`` chosen by the greedy pivoted
    (incomplete) Cholesky factorisation of ``K(X, X)``: each pivot is the
    row whose kernel column the chosen ones explain least (the largest
    residual diagonal). Stops early when every residual is below ``tol``
    times the largest diagonal (the factor is float32: 1e-6 is its noise).
    O(n B) kernel values and O(n B^2) flops, a B x n float32 factor in
    memory: pass a subsample of a large support set."""
    X = _dense(X)
    n = len(X)
    B = int(min(B, n))
    sq = sq_norms(X)
    d = np.asarray(kernel.diag(X, sq), np.float64).copy()
    stop = tol * float(d.max()) if n else 0.0
    LT = np.zeros((B, n), np.float32)      # the factor, a row per pivot (contiguous GEMV)
    idx = []
    for j in range(B):
        p = int(np.argmax(d))
        if d[p] <= stop:
            break
        col = np.asarray(kernel.block(X, X[p:p + 1], sq, sq[p:p + 1]), np.float64)[:, 0]
        if j:
            col -= LT[:j].T @ LT[:j, p]
        col /= np.sqrt(d[p])
        LT[j] = col
        d -= col * col
        d[p] = 0.0
        np.maximum(d, 0.0, out=d)
        idx.append(p)
    return np.asarray(idx, np.int64)


def kmeans_centres(X, B, weights=None, seed=0):
    """``B`` k-means centres of the rows ``X`` (weighted, e.g. by ``|a_i|``):
    basis points that need not be support rows (scikit-learn's
    MiniBatchKMeans)."""
    from sklearn.cluster import MiniBatchKMeans
    X = _dense(X)
    # random initial centres: k-means++'s seeding costs 4x the fit at B = 4,096 and
    # gives the same expansion quality (compress_study)
    # batches of 1,024 rows (scikit-learn's default): a batch's distances to the
    # centres are batch x B float64, 32 MB at B = 4,096
    km = MiniBatchKMeans(n_clusters=int(min(B, len(X))), random_state=seed, n_init=1,
                         init="random", batch_size=1024)
    # on one OpenMP thread: its small batches make two threads wait on each other
    # (ijcnn1's B = 256 centres of 8,080 rows: 0.12 s on one thread, 3.3 s on two
    # on a busy 2-core machine); the centres are the same
    from ..data.parallel import thread_limits
    with thread_limits(1, "openmp"):
        km.fit(X, sample_weight=weights)
    return _dense(km.cluster_centers_)


def random_rows(n, B, seed=0):
    """``B`` distinct indices of ``n`` rows, uniformly at random (a baseline)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=int(min(B, n)), replace=False))


def _nearest(X, xx, Z, block=None):
    """(index of the nearest row of ``Z``, squared distance to it) for every
    row of ``X`` (``xx``: its squared norms), from ``X Z'`` (BLAS) in blocks
    of rows: memory O(block x |Z|), not O(|X| |Z|)."""
    n, nz = len(X), len(Z)
    block = block or max(64, (1 << 22) // max(nz, 1))     # 16 MB of float32 distances
    zz = np.einsum("ij,ij->i", Z, Z, dtype=np.float64).astype(np.float32)
    Zm2 = np.ascontiguousarray(-2.0 * Z, np.float32)
    lab = np.empty(n, np.int64)
    dist = np.empty(n)
    for s in range(0, n, block):
        D = X[s:s + block] @ Zm2.T
        D += zz
        j = np.argmin(D, axis=1)
        lab[s:s + block] = j
        dist[s:s + block] = D[np.arange(len(j)), j]
    dist += xx
    np.maximum(dist, 0.0, out=dist)
    return lab, dist


def weighted_kmeans(X, B, weights=None, seed=0, iters=default("kmeans_iters"), seeds=None):
    """``B`` centres of the rows ``X`` minimising the weighted k-means
    objective ``sum_i w_i min_j ||x_i - z_j||^2``: k-means++ seeding (each
    new centre a row drawn with probability ``w_i D_i^2``, ``D_i`` its
    distance to the centres so far) then ``iters`` Lloyd iterations (every
    row to its nearest centre, every centre to its rows' weighted mean; an
    emptied centre goes to the row of largest ``w_i D_i^2``). Plain NumPy
    on one BLAS thread (its GEMMs are small: OpenBLAS's two threads made
    usps's centres 3x slower on a busy machine), no scikit-learn import
    (0.3 s in a fresh process); docs/solvers.md, "Compact expansions",
    compares it with MiniBatchKMeans. ``seeds``: a :class:`_Seeds` of these
    rows, weights and seed, kept from an earlier call (its seeding is
    continued, not drawn again: the same centres)."""
    from ..data.parallel import thread_limits
    with thread_limits(1, "blas"):
        return _weighted_kmeans(X, B, weights, seed, iters, seeds)


def _weighted_kmeans(X, B, weights, seed, iters, seeds=None):
    X = _dense(X)
    n = len(X)
    B = int(min(B, n))
    if B >= n:
        return X.copy()
    seeds = _Seeds(X, weights, seed) if seeds is None else seeds
    return _lloyd(seeds.X, seeds.xx, seeds.w, seeds.first(B), iters)


class _Seeds:
    """The k-means++ seeding of :func:`weighted_kmeans` (rows ``X``, weights),
    drawn as far as asked and kept: ``first(B)`` is the seeding for B
    centres, and a seeding for more centres continues it (its draws are the
    same stream, one uniform per centre), so trying B = 256, 512, 1,024 in
    turn seeds 1,024 centres once rather than 1,792."""

    def __init__(self, X, weights, seed):
        n = len(X)
        w = np.ones(n) if weights is None else np.asarray(weights, np.float64)
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("k-means weights must be finite and non-negative")
        if not w.sum() > 0:
            w = np.ones(n)
        self.X, self.w = X, w
        self.rng = np.random.default_rng(seed)
        self.xx = np.einsum("ij,ij->i", X, X, dtype=np.float64)
        i = int(self.rng.choice(n, p=w / w.sum()))
        self.Z = np.empty((min(256, n), X.shape[1]), np.float32)
        self.Z[0] = X[i]
        self.k = 1                     # centres drawn
        self.u = self.rng.random(1)    # one uniform per centre (the first one's unused)
        self.d = np.maximum(self.xx - 2.0 * (X @ X[i]) + self.xx[i], 0.0)
        self.spent = False             # every row is a centre: the rest repeat the first

    def first(self, B):
        X, w, d, xx = self.X, self.w, self.d, self.xx
        if B > len(self.Z):
            Z = np.empty((B, X.shape[1]), np.float32)
            Z[:self.k] = self.Z[:self.k]
            self.Z = Z
        if B > len(self.u):
            self.u = np.concatenate((self.u, self.rng.random(B - len(self.u))))
        for j in range(self.k, B):
            c = None if self.spent else np.cumsum(w * d)
            self.spent = c is None or not c[-1] > 0
            if self.spent:
                self.Z[j] = self.Z[0]
                continue
            i = min(int(np.searchsorted(c, self.u[j] * c[-1], side="right")), len(X) - 1)
            self.Z[j] = X[i]
            np.minimum(d, np.maximum(xx - 2.0 * (X @ X[i]) + xx[i], 0.0), out=d)
        self.k = max(self.k, B)
        return self.Z[:B].copy()


def _lloyd(X, xx, w, Z, iters):
    """``iters`` Lloyd iterations from the centres ``Z`` (rows ``X``, squared
    norms ``xx``, weights ``w``); an emptied centre goes to the row of
    largest ``w_i D_i^2``."""
    import scipy.sparse as sp
    n, B = len(X), len(Z)
    rows = np.arange(n)
    for _ in range(iters):
        lab, d = _nearest(X, xx, Z)
        M = sp.csr_matrix((w, (lab, rows)), shape=(B, n))
        mass = np.asarray(M.sum(axis=1)).ravel()
        new = Z.copy()
        full = mass > 0
        new[full] = (M @ X)[full] / mass[full, None]
        if not full.all():
            new[~full] = X[np.argsort(-w * d, kind="stable")[:int((~full).sum())]]
        if np.array_equal(new, Z):
            break
        Z = new
    return Z


def _gram(kernel, Z, ridge):
    """K(Z, Z) in float64 with ``ridge`` x its mean diagonal added to the diagonal."""
    K = np.array(kernel.block(Z, Z), np.float64)
    K[np.diag_indices_from(K)] += ridge * max(float(np.mean(np.diag(K))), 1e-300)
    return K


def _solve(G, h):
    """``G x = h`` for a symmetric positive semi-definite ``G``: Cholesky, or
    least squares when G is singular (basis points that coincide, as
    k-means centres can). ``cho_factor`` / ``cho_solve`` rather than
    ``solve(assume_a="pos")``: the same factorisation and solution, without
    the condition estimate (ill-conditioned is expected: the ridge holds it),
    in ~0.6 of the time (B = 1,025, two threads: 16 against 29 ms)."""
    import scipy.linalg
    try:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(G), h)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        return scipy.linalg.lstsq(G, h, cond=1e-12)[0]


def project(kernel, Z, X, a, ridge=1e-10, n_jobs=1):
    """The RKHS projection of ``w = sum_i a_i phi(x_i)`` (rows ``X``) on the
    span of ``phi(z_j)`` (rows ``Z``): ``beta`` solving ``K_ZZ beta = K_ZX a``
    (a tiny ``ridge`` keeps K_ZZ positive definite). With ``b~ = b`` it
    minimises ``sup_x |f(x) - f~(x)| / sqrt(k(x, x))`` over expansions on Z."""
    Z, X = _dense(Z), _dense(X)
    rhs = kernel_sums(kernel, Z, X, np.asarray(a, np.float64), n_jobs=n_jobs)
    return _solve(_gram(kernel, Z, ridge), rhs)


def fit_values(kernel, Z, R, f, ridge=1e-8, block=1024, n_jobs=1):
    """``(beta, b)`` minimising ``sum_r (sum_j beta_j k(z_j, x_r) + b - f_r)^2
    + ridge' ||beta||^2`` over sample rows ``R`` with the full model's
    values ``f`` (``ridge'``: ``ridge`` x the mean diagonal of ``K_RZ' K_RZ``,
    enough to keep the normal equations positive definite for Cholesky).
    ``f`` may be a matrix, a column per machine on the same basis: then
    ``beta`` is [B, machines] and ``b`` a vector (one factorisation).
    The normal equations are accumulated in blocks of rows, so memory is
    O(B^2) (134 MB at B = 4,096), not O(|R| B). ``n_jobs`` BLAS threads for
    them and the solve (a fit holds BLAS to one thread for its small blocks:
    this is one large SYRK per block of rows, 8,192 x B^2 multiply-adds in all)."""
    from ..data.parallel import thread_limits
    with thread_limits(max(1, int(n_jobs)), "blas"):
        return _fit_values(kernel, _dense(Z), _dense(R), f, ridge, block)


def _fit_values(kernel, Z, R, f, ridge, block):
    f = np.asarray(f, np.float64)
    nb = len(Z)
    G = np.zeros((nb + 1, nb + 1))
    h = np.zeros((nb + 1,) + f.shape[1:])
    sqz = sq_norms(Z)
    for s in range(0, len(R), block):
        K = np.empty((min(block, len(R) - s), nb + 1))
        K[:, :nb] = kernel.block(R[s:s + block], Z, None, sqz)
        K[:, nb] = 1.0
        G += K.T @ K
        h += K.T @ f[s:s + block]
    scale = float(np.mean(np.diag(G)[:nb])) if nb else 0.0
    G[np.arange(nb), np.arange(nb)] += ridge * scale
    sol = _solve(G, h)
    if f.ndim == 1:
        return sol[:nb], float(sol[nb])
    return sol[:nb], np.asarray(sol[nb], np.float64)


def decisions(kernel, Z, Beta, b, X, block=2048, n_jobs=1,
              few_machines=default("few_machines")):
    """``K(X, Z) Beta + b`` for a matrix ``Beta`` [B, machines] (a shared
    basis), in blocks of rows: [rows, machines]. ``n_jobs`` threads (one
    BLAS thread each) take whole blocks: a row's value does not depend on it."""
    Z, X = _dense(Z), _dense(X)
    Beta = np.asarray(Beta, np.float64)
    sqz = sq_norms(Z)
    out = np.empty((len(X), Beta.shape[1]))

    def one(s):
        out[s:s + block] = block_times(kernel.block(X[s:s + block], Z, None, sqz), Beta,
                                       few_machines=few_machines)

    for_blocks(one, range(0, len(X), block), n_jobs)
    return out + b


def rkhs_error(kernel, X, a, Z, beta, n_jobs=1):
    """``||w - w~||`` in the feature space, ``w = sum a_i phi(x_i)``, ``w~ =
    sum beta_j phi(z_j)``: ``a'K_XX a - 2 beta'K_ZX a + beta'K_ZZ beta``
    (O(|X|^2) kernel values)."""
    X, Z = _dense(X), _dense(Z)
    a, beta = np.asarray(a, np.float64), np.asarray(beta, np.float64)
    ww = float(a @ kernel_sums(kernel, X, X, a, n_jobs=n_jobs))
    wz = float(beta @ kernel_sums(kernel, Z, X, a, n_jobs=n_jobs))
    zz = float(beta @ kernel_sums(kernel, Z, Z, beta, n_jobs=n_jobs))
    return float(np.sqrt(max(ww - 2.0 * wz + zz, 0.0)))


def refit_intercept(f, f_compact):
    """The shift of ``b~`` that makes the compact values' mean match the full
    model's on sample rows: ``mean(f - f~)``."""
    return float(np.mean(np.asarray(f, np.float64) - np.asarray(f_compact, np.float64)))


def decision(kernel, Z, beta, b, X, n_jobs=1):
    """``f~(x) = sum_j beta_j k(z_j, x) + b`` for the rows ``X``."""
    return kernel_sums(kernel, X, _dense(Z), np.asarray(beta, np.float64), n_jobs=n_jobs) + b


# ---------------------------------------------------------------------------
# a machine's compact expansion, B chosen on the validation rows
# ---------------------------------------------------------------------------

# The sizes tried, the rows the fit and its check use and the tolerances are the
# options compact_* (streamcvm.options.CompactOptions).


def compact_machine(machine, kernel, Xfit, Xv, yv, *, options, regression=False, seed=0,
                    n_jobs=1, full_loss=None, tol=None):
    """A compact expansion of ``machine`` (dense support rows), or None, and
    a record of the choice.

    The sizes tried are those of the option ``compact_sizes`` with ``|S| >
    compact_pays x B``. A try at B: B basis points (the option
    ``compact_kmeans``: k-means centres of the support rows weighted by
    abs(a_i), or support rows drawn with probability proportional to abs(a_i)),
    beta and b~ by least squares on the full model's values at
    ``max(compact_fit_rows, 2 B)`` of the training rows ``Xfit``, judged on
    the held-out rows ``Xv``, ``yv`` (never trained on). Two classes (labels
    +-1): broken - fixed at most ``tol`` points of the validation rows (None:
    ``compact_error_tol``; the progressive fit passes its stages' tolerance),
    fixed / broken counting the rows the compact model gets right / wrong
    where the full one does not: a compact model measurably less accurate
    than the full one is not kept. Regression: a validation RMSE within
    ``compact_rmse_tol`` of the full model's.

    Largest B first: when it fails, no smaller one is tried (a basis that
    the largest does not match, a smaller one matches only by the check's
    chance), so a refused compaction costs one try; when it passes, each
    half of it in turn, down to the first that fails, and the smallest that
    passed is kept. The compact expansion is a
    :class:`~streamcvm.problems.machine.Machine` of B "support rows" (ids -1,
    -2, ...). ``full_loss``: the full model's validation losses if known (the
    progressive verdict's: 0/1 errors, or squared errors), which saves
    computing its values there. The record gives each try's seconds and the
    whole choice's (``seconds``, its ``setup_seconds`` the full model's
    values at the fit rows)."""
    import dataclasses
    import time
    import scipy.sparse as sp
    opts = options
    t0 = time.perf_counter()
    tol = opts.compact_error_tol if tol is None else tol
    sizes, pays = opts.compact_sizes, opts.compact_pays
    S, a = machine.sv, np.asarray(machine.coef, np.float64)
    rec = {"support_vectors": int(S.shape[0]), "validation_rows": int(len(yv)), "tried": []}
    todo = sorted((B for B in sizes if S.shape[0] > pays * B), reverse=True)
    if sp.issparse(S) or sp.issparse(Xv) or not todo:
        rec["decision"] = ("sparse support rows: not compressed" if sp.issparse(S) or
                           sp.issparse(Xv) else f"{S.shape[0]:,} support vectors: too few to "
                           f"pay (compressed only above {pays:g} x {min(sizes)})")
        return None, rec
    S = _dense(S)
    rng = np.random.default_rng(seed)
    n_fit = min(max(opts.compact_fit_rows, 2 * todo[0]), len(Xfit))
    pick = np.sort(rng.choice(len(Xfit), size=n_fit, replace=False))
    Xf = _dense(Xfit[pick])
    ff = kernel_sums(kernel, Xf, S, a, n_jobs=n_jobs) + machine.intercept
    yv = np.asarray(yv, np.float64)
    Xv = _dense(Xv)
    if full_loss is None:
        fv = kernel_sums(kernel, Xv, S, a, n_jobs=n_jobs) + machine.intercept
        full_loss = (fv - yv) ** 2 if regression else ((fv > 0) != (yv > 0)).astype(float)
    full_loss = np.asarray(full_loss, np.float64)
    if regression:
        full = float(np.sqrt(np.mean(full_loss)))
        rec["full_rmse"] = full
    else:
        right = full_loss == 0
        full_pos = right == (yv > 0)            # the full model's label, +1 or not
        rec["full_error"] = float(1.0 - right.mean())
        rec["tolerance_rows"] = float(tol / 100.0 * len(yv))
    rec["setup_seconds"] = time.perf_counter() - t0
    kept = None
    for B in todo:
        t1 = time.perf_counter()
        Z = basis_points(S, a, B, opts.compact_kmeans, seed)
        m = min(max(opts.compact_fit_rows, 2 * B), n_fit)   # the first m: a random subset too
        beta, b = fit_values(kernel, Z, Xf[:m], ff[:m], n_jobs=n_jobs)
        fc = kernel_sums(kernel, Xv, Z, beta, n_jobs=n_jobs) + b
        t = {"B": int(len(Z)), "fit_rows": int(m)}
        if regression:
            rmse = float(np.sqrt(np.mean((fc - yv) ** 2)))
            ok = rmse <= full * (1.0 + opts.compact_rmse_tol)
            t.update(rmse=rmse)
        else:
            rc = (fc > 0) == (yv > 0)
            fixed, broken = paired_counts(rc, right)
            ok = broken - fixed <= rec["tolerance_rows"]
            t.update(error=float(1.0 - rc.mean()), fixed=fixed, broken=broken,
                     agree=float(np.mean((fc > 0) == full_pos)))
        t["passed"] = bool(ok)
        t["seconds"] = time.perf_counter() - t1        # (a record: no choice depends on it)
        rec["tried"].append(t)
        rec["seconds"] = time.perf_counter() - t0
        if not ok:
            break
        kept = (Z, beta, b, t)
    if kept is None:
        t = rec["tried"][0]
        rec["decision"] = (f"kept the full expansion: the largest B, {t['B']:,}, did not match "
                           "it (" + (f"validation RMSE {t['rmse']:.4g} against {full:.4g}"
                                     if regression else
                                     f"{t['broken'] - t['fixed']} validation rows lost, "
                                     f"{rec['tolerance_rows']:.1f} allowed") +
                           "; smaller B not tried)")
        return None, rec
    Z, beta, b, t = kept
    rec.update(B=int(len(Z)), decision=f"B = {len(Z):,}: validation "
               + (f"RMSE {t['rmse']:.4g} against {full:.4g}" if regression else
                  f"errors within {tol:g} points of the full model's (fixed "
                  f"{t['fixed']}, broken {t['broken']}: "
                  f"{100 * (t['broken'] - t['fixed']) / len(yv):+.3f} points), labels "
                  f"{100 * t['agree']:.2f}% equal"))
    ids = -1 - np.arange(len(Z), dtype=np.int64)
    return dataclasses.replace(machine, sv=Z, coef=np.asarray(beta, np.float64),
                               intercept=float(b), sv_ids=ids, sv_sq=None,
                               history=[], full_pass_violators=None, compact=None,
                               compact_info=None), rec


def basis_points(S, a, B, kmeans=True, seed=0):
    """``B`` basis points for a machine's support rows ``S`` and coefficients
    ``a``: :func:`kmeans_centres` of the rows weighted by abs(a_i), or
    (``kmeans=False``) support rows drawn without replacement with
    probability proportional to abs(a_i) (no cost beyond the draw)."""
    if kmeans:
        return kmeans_centres(S, B, weights=np.abs(a), seed=seed)
    w = np.abs(np.asarray(a, np.float64))
    B = int(min(B, len(S)))
    p = w / w.sum() if w.sum() > 0 and np.count_nonzero(w) >= B else None
    idx = np.random.default_rng(seed).choice(len(S), size=B, replace=False, p=p)
    return _dense(S[np.sort(idx)])


def paired_counts(right_compact, right_full):
    """(fixed, broken): rows the compact model gets right where the full
    model's label is wrong, and wrong where it is right (boolean arrays of
    each model's correct rows)."""
    return (int(np.sum(right_compact & ~right_full)),
            int(np.sum(~right_compact & right_full)))


def compactor(kernel, solve, regression=False, tol=None):
    """The ``compact`` hook of :func:`~streamcvm.problems.progressive.train_progressive`
    for the options ``solve`` (its ``compact``: "auto" or False; its
    ``options``), or None; ``tol``: :func:`compact_machine`'s, in points of
    accuracy."""
    if solve.compact is False or solve.compact is None:
        return None
    jobs = n_threads(solve.n_jobs)

    def hook(machine, Xfit, Xv, yv, loss=None):
        machine.compact, machine.compact_info = compact_machine(
            machine, kernel, Xfit, Xv, yv, options=solve.options, regression=regression,
            seed=solve.seed, n_jobs=jobs, full_loss=loss, tol=tol)
    return hook


def sample_rows(store, options, seed=0, runner=None, labels=False):
    """(fit rows, check rows) of a training store, disjoint, dense (and,
    with ``labels``, the check rows' labels as a third item): up to
    the options' ``compact_fit_rows`` and ``compact_check_rows`` (half the
    rows each when it has fewer). A store of at most ``compact_sample_chunks``
    chunks gives them by the row keys of a progressive fit's split, from
    every chunk; a larger one from that many random chunks (fewer fit rows
    if those hold fewer), so that a fit that only samples (MMDA) pays no
    pass here (MMDA on a 20M-row store: 9.4 s against 13.1 s)."""
    max_chunks = options.compact_sample_chunks
    n_check = int(min(options.compact_check_rows, store.n // 2))
    n_fit = int(min(options.compact_fit_rows, store.n - n_check))
    if store.n_chunks > max_chunks:
        from ..data.sampling import sample_rows as rows_of_chunks
        X, y = rows_of_chunks(store, n_check + n_fit, max_chunks, seed, labels=True)
        X = _dense(X)
        order = np.random.default_rng(seed).permutation(len(X))
        got = X[order[n_check:]], X[order[:n_check]], np.asarray(y)[order[:n_check]]
    else:
        from .progressive import draw_sample
        (_, Xc, yc, _), (_, Xf, _, _) = draw_sample(store, None, n_check, n_fit, seed, runner)
        got = _dense(Xf), _dense(Xc), np.asarray(yc)
    return got if labels else got[:2]


def class_centres(S, weights, key, B, seed=0, seeds=None, iters=default("kmeans_iters")):
    """``B`` k-means centres of the rows ``S`` (weighted), split over the
    distinct values of ``key`` (e.g. each row's class) in proportion to
    their rows, at least one each. ``seeds``: a dict kept across calls on
    the same rows (each class's k-means++ seeding continued, not drawn
    again: the same centres as without it)."""
    S = _dense(S)
    keys, counts = np.unique(key, return_counts=True)
    share = np.maximum(1, np.floor(B * counts / counts.sum())).astype(int)
    share = np.minimum(share, counts)
    Z = []
    for k, nk in zip(keys, share):
        sel = key == k
        if nk >= sel.sum():
            Z.append(S[sel])
            continue
        Xk, wk = _dense(S[sel]), weights[sel]
        sk = None if seeds is None else seeds.get(k)
        if seeds is not None and sk is None:
            sk = seeds[k] = _Seeds(Xk, wk, seed)
        Z.append(weighted_kmeans(Xk, nk, weights=wk, seed=seed, seeds=sk, iters=iters))
    return _dense(np.concatenate(Z))


def agreeing_labels(labels, full_labels, agree):
    """The acceptance of :func:`compact_shared` for classifiers: the labels
    predicted from the compact values (``labels(F)``) equal the full
    model's ``full_labels`` on at least ``agree`` of the check rows (the
    option ``compact_agree``). Labels,
    not errors: the full model was fitted to these rows' labels, so its
    errors there are optimistic and the paired rule would refuse every B
    (a9a: fixed 19, broken 39 at B = 6,000 with test accuracy unchanged).
    Labels equal on a share ``agree`` of the rows bound the change of
    accuracy on data like them by ``1 - agree`` (0.1 points), up to the
    check's sampling error."""
    def accept(Fc):
        q = float(np.mean(labels(Fc) == full_labels))
        return q >= agree, {"agree": q}
    accept.rule = (f"labels equal to the full model's on {100 * agree:g}% of training rows "
                   "not used in the fit (no held-out rows)")
    accept.says = lambda t, n: f"labels {100 * t['agree']:.2f}% equal to the full model's " \
                               f"on {n:,} training rows"
    return accept


def paired_labels(labels, full_labels, y, agree, tol):
    """The acceptance of :func:`compact_shared` for multi-class classifiers:
    :func:`agreeing_labels`, or the paired rule of :func:`compact_machine`
    on the same check rows, with their labels ``y``: the compact model's
    labels wrong where the full model's are right (broken) less those right
    where the full model's are wrong (fixed) at most ``tol`` points of the
    rows. These rows are training rows: the full model was fitted to their
    labels, so its errors there are optimistic and the rule leans towards
    refusing (the direction :func:`agreeing_labels` names); it does not need
    the labels to be equal where the full model's pick among near-tied
    classes is a coin toss, as on overlapping classes (label agreement
    refuses every B there while the accuracy holds)."""
    y = np.asarray(y)
    right = np.asarray(full_labels) == y
    n = max(len(y), 1)

    def accept(Fc):
        lab = labels(Fc)
        q = float(np.mean(lab == full_labels))
        fixed, broken = paired_counts(lab == y, right)
        ok = q >= agree or broken - fixed <= tol / 100.0 * n
        return ok, {"agree": q, "fixed": fixed, "broken": broken}
    accept.rule = (f"labels equal to the full model's on {100 * agree:g}% of training rows "
                   f"not used in the fit, or errors there within {tol:g} points of the full "
                   "model's (paired; no held-out rows)")
    accept.says = lambda t, n: (f"labels {100 * t['agree']:.2f}% equal to the full model's "
                                f"on {n:,} training rows (fixed {t['fixed']}, broken "
                                f"{t['broken']})")
    return accept


def close_values(full, r2):
    """The acceptance of :func:`compact_shared` for features (no labels): every
    column's values at the check rows explained to ``R^2 >= r2`` (the option
    ``compact_r2_min``) by the compact ones (``1 - SSE / SST`` per column, SST about its mean): an RMS
    error at most ``sqrt(1 - r2)`` of the column's spread (3.2% for 0.999)."""
    full = np.asarray(full, np.float64)
    sst = np.maximum(((full - full.mean(axis=0)) ** 2).sum(axis=0), 1e-300)

    def accept(Fc):
        worst = float(np.min(1.0 - ((Fc - full) ** 2).sum(axis=0) / sst))
        return worst >= r2, {"r2_min": worst}
    accept.rule = f"every feature's R^2 >= {r2:g} on training rows not used in the fit"
    accept.says = lambda t, n: f"every feature's R^2 >= {t['r2_min']:.5f} on {n:,} training rows"
    return accept


def compact_shared(S, weights, key, kernel, sample, *, options, seed=0, n_jobs=1,
                   largest_first=False):
    """One compact basis for the machines of a fit that held no rows out
    (trained on every row: nothing to judge errors on), or None, and a
    record of the choice.

    ``S``: the machines' distinct support rows (dense), ``weights``: each
    row's summed abs(a), ``key``: its class (the centres are split over the
    classes, :func:`class_centres`). ``sample()``: (``Xfit``, ``Ffit``
    [rows, machines], ``Xcheck``, ``accept``), the full machines' values at
    training rows ``Xfit``, other training rows ``Xcheck`` and the test of a
    compact model's values there (:func:`agreeing_labels`,
    :func:`close_values`: ``accept(Fc)`` -> (kept?, figures to record));
    asked only when some B pays.

    For each B of the option ``compact_sizes`` with ``|S| > compact_pays x
    B``, smallest first: B centres; every
    machine's beta and b~ by least squares on all of them (one
    factorisation for all machines); the first B that ``accept`` passes is
    kept. ``largest_first`` (many machines, whose union of support rows
    only a large B pays for): the largest B first, and when it passes each
    half of it in turn down to the first that fails, keeping the smallest
    that passed; when it fails, no smaller B is tried (a refused compaction
    costs one try), as :func:`compact_machine`. (A one-vs-one machine on its
    two classes' centres only, the structure of its support rows, needed
    twice the B for 99.75% equal labels on letter.) Returns ((Z, Beta [B,
    machines], b [machines]) or None, record)."""
    opts = options
    sizes, pays = opts.compact_sizes, opts.compact_pays
    rec = {"support_vectors": int(S.shape[0]), "tried": []}
    todo = sorted((B for B in sizes if S.shape[0] > pays * B), reverse=largest_first)
    if not todo:
        rec["decision"] = (f"{S.shape[0]:,} support vectors: too few to pay (compressed only "
                           f"above {pays:g} x {sizes[0]})")
        return None, rec
    S = _dense(S)
    Xfit, Ffit, Xcheck, accept = sample()
    Ffit = np.asarray(Ffit, np.float64).reshape(len(Xfit), -1)
    Xfit, Xcheck = _dense(Xfit), _dense(Xcheck)
    rec.update(check_rows=int(len(Xcheck)), rule=accept.rule)
    seeds = {}          # each class's k-means++ seeding, continued from one B to the next
    kept = None
    for B in todo:
        Z = class_centres(S, np.asarray(weights, np.float64), np.asarray(key), B, seed, seeds,
                          iters=opts.kmeans_iters)
        Beta, b = fit_values(kernel, Z, Xfit, Ffit, n_jobs=n_jobs)   # O(B^2) memory
        ok, t = accept(decisions(kernel, Z, Beta, b, Xcheck, n_jobs=n_jobs,
                                 few_machines=opts.few_machines))
        t = {"B": int(len(Z)), **t, "passed": bool(ok)}
        rec["tried"].append(t)
        if ok:
            kept = (Z, Beta, b), t
            if not largest_first:
                break
        elif largest_first:
            break
    if kept is None:
        rec["decision"] = (f"kept the full expansion: no B up to {max(todo):,} passed"
                           + ("; smaller B not tried" if largest_first and len(todo) > 1
                              else ""))
        return None, rec
    got, t = kept
    rec.update(B=t["B"], decision=f"B = {t['B']:,}: {accept.says(t, len(Xcheck))}")
    return got, rec


def attach_shared(machines, got, info):
    """Give each of ``machines`` its expansion on the shared basis ``got``
    (:func:`compact_shared`'s (Z, Beta, b), column j for machine j; None:
    none kept) as ``compact``, and the record ``info`` as ``compact_info``
    ("shared": the basis is one array for all, written once in a model)."""
    import dataclasses
    for j, m in enumerate(machines):
        if got is not None:
            Z, Beta, b = got
            m.compact = dataclasses.replace(
                m, sv=Z, coef=np.ascontiguousarray(Beta[:, j]), intercept=float(b[j]),
                sv_ids=-1 - np.arange(len(Z), dtype=np.int64), sv_sq=None, history=[],
                full_pass_violators=None, compact=None, compact_info=None)
        m.compact_info = dict(info, shared=True) if got is not None else dict(info)
