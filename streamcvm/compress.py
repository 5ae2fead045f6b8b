"""Compact kernel expansions (issue 27, first step: the candidates, measured).

A trained machine predicts with ``f(x) = sum_i a_i k(x_i, x) + b`` over its
support rows ``x_i``; on noisy data there are tens of thousands. A compact
expansion ``f~(x) = sum_j beta_j k(z_j, x) + b~`` over ``B << |S|`` basis
points costs ``B / |S|`` of that. This module holds the pieces, on plain
dense float32 arrays:

- basis points: :func:`pivoted_cholesky` (support rows chosen greedily by the
  largest residual diagonal of ``K_SS``, the incomplete Cholesky pivots),
  :func:`kmeans_centres` (centres not restricted to support rows),
  :func:`random_rows` (the baseline);
- coefficients: :func:`project` (the RKHS projection of ``w = sum_i a_i
  phi(x_i)`` on the span of the basis: ``K_ZZ beta = K_ZS a``, which
  minimises ``||w - w~||`` in the feature space), :func:`fit_values` (least
  squares on the full model's decision values at sample rows, with its own
  intercept);
- :func:`rkhs_error` (``||w - w~||``: the bound ``|f(x) - f~(x)| <= ||w - w~||
  sqrt(k(x, x))`` for ``b~ = b``) and :func:`refit_intercept`.

``tools/compress_study.py`` compares them at equal B on a trained model;
docs/solvers.md, "Compact expansions", gives the formulations.
"""
import numpy as np

from .kernels import kernel_sums, sq_norms


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
    km = MiniBatchKMeans(n_clusters=int(min(B, len(X))), random_state=seed, n_init=1,
                         batch_size=max(4096, 3 * B))
    km.fit(X, sample_weight=weights)
    return _dense(km.cluster_centers_)


def random_rows(n, B, seed=0):
    """``B`` distinct indices of ``n`` rows, uniformly at random (a baseline)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=int(min(B, n)), replace=False))


def _gram(kernel, Z, ridge):
    """K(Z, Z) in float64 with ``ridge`` x its mean diagonal added to the diagonal."""
    K = np.array(kernel.block(Z, Z), np.float64)
    K[np.diag_indices_from(K)] += ridge * max(float(np.mean(np.diag(K))), 1e-300)
    return K


def _solve(G, h):
    """``G x = h`` for a symmetric positive semi-definite ``G``: Cholesky, or
    least squares when G is singular (basis points that coincide, as
    k-means centres can)."""
    import scipy.linalg
    try:
        return scipy.linalg.solve(G, h, assume_a="pos")
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


def fit_values(kernel, Z, R, f, ridge=1e-8, block=8192):
    """``(beta, b)`` minimising ``sum_r (sum_j beta_j k(z_j, x_r) + b - f_r)^2
    + ridge' beta' K_ZZ beta`` over sample rows ``R`` with the full model's
    values ``f`` (``ridge'``: ``ridge`` x the mean diagonal of ``K_RZ' K_RZ``).
    The normal equations are accumulated in blocks of rows, so memory is
    O(B^2), not O(|R| B)."""
    Z, R = _dense(Z), _dense(R)
    f = np.asarray(f, np.float64)
    nb = len(Z)
    G = np.zeros((nb + 1, nb + 1))
    h = np.zeros(nb + 1)
    sqz = sq_norms(Z)
    for s in range(0, len(R), block):
        K = np.empty((min(block, len(R) - s), nb + 1))
        K[:, :nb] = kernel.block(R[s:s + block], Z, None, sqz)
        K[:, nb] = 1.0
        G += K.T @ K
        h += K.T @ f[s:s + block]
    scale = float(np.mean(np.diag(G)[:nb])) if nb else 0.0
    G[:nb, :nb] += ridge * scale * _gram(kernel, Z, 1e-10)
    sol = _solve(G, h)
    return sol[:nb], float(sol[nb])


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
