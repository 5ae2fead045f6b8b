"""Compact kernel expansions (streamcvm.compress) against direct dense
computations on a few hundred points."""
import numpy as np
import pytest

from streamcvm import compress
from streamcvm.kernels import Kernel

GAMMA = 0.3


def rbf(A, B, gamma=GAMMA):
    """The RBF kernel matrix computed independently, in float64."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-gamma * d2)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    a = rng.normal(size=300)
    T = rng.normal(size=(200, 4)).astype(np.float32)
    return X, a, T, Kernel("rbf", gamma=GAMMA)


def greedy_pivots(K, B):
    """Pivoted Cholesky on an explicit matrix: Schur complements."""
    K = K.copy()
    out = []
    for _ in range(B):
        p = int(np.argmax(np.diag(K)))
        out.append(p)
        c = K[:, p] / np.sqrt(K[p, p])
        K = K - np.outer(c, c)
    return out


def test_pivoted_cholesky_picks_the_greedy_pivots(data):
    X, _, _, k = data
    got = compress.pivoted_cholesky(k, X, 25)
    assert list(got) == greedy_pivots(rbf(X, X), 25)


def test_pivoted_cholesky_stops_when_the_rows_are_explained():
    X = np.repeat(np.eye(3, dtype=np.float32), 10, axis=0)     # 3 distinct rows, 10 times
    idx = compress.pivoted_cholesky(Kernel("rbf", gamma=1.0), X, 20)
    assert len(idx) == 3 and len({tuple(X[i]) for i in idx}) == 3


def test_projection_solves_the_normal_equations(data):
    X, a, _, k = data
    Z = X[compress.pivoted_cholesky(k, X, 40)]
    beta = compress.project(k, Z, X, a, ridge=0.0)
    want = np.linalg.solve(rbf(Z, Z), rbf(Z, X) @ a)
    assert np.allclose(beta, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())


def test_projection_on_every_row_is_the_expansion_itself(data):
    X, a, _, k = data
    Z = X[:60]
    beta = compress.project(k, Z, Z, a[:60], ridge=0.0)
    assert np.allclose(beta, a[:60], atol=1e-3)


def test_rkhs_error_is_the_feature_space_distance_and_bounds_f(data):
    X, a, T, k = data
    Z = X[compress.pivoted_cholesky(k, X, 30)]
    beta = compress.project(k, Z, X, a)
    c = np.concatenate([a, -beta])
    P = np.concatenate([X, Z])
    want = np.sqrt(c @ rbf(P, P) @ c)
    err = compress.rkhs_error(k, X, a, Z, beta)
    assert err == pytest.approx(want, rel=1e-4)
    f = rbf(T, X) @ a
    f_c = compress.decision(k, Z, beta, 0.0, T)
    assert np.all(np.abs(f - f_c) <= err * (1 + 1e-6))   # k(x, x) = 1 for the RBF
    assert compress.rkhs_error(k, X, a, X, a) < 1e-3 * np.sqrt(a @ rbf(X, X) @ a)


def test_more_basis_points_never_project_worse(data):
    X, a, _, k = data
    idx = compress.pivoted_cholesky(k, X, 80)
    errs = [compress.rkhs_error(k, X, a, X[idx[:B]], compress.project(k, X[idx[:B]], X, a))
            for B in (10, 20, 40, 80)]
    assert all(e2 <= e1 * (1 + 1e-6) for e1, e2 in zip(errs, errs[1:])), errs


def test_fit_values_is_least_squares_with_an_intercept(data):
    X, _, T, k = data
    Z = X[:20]
    f = rbf(T, X) @ np.random.default_rng(1).normal(size=len(X)) + 0.7
    beta, b = compress.fit_values(k, Z, T, f, ridge=0.0, block=64)
    A = np.hstack([rbf(T, Z), np.ones((len(T), 1))])
    sol = np.linalg.lstsq(A, f, rcond=None)[0]
    assert np.allclose(A @ np.append(beta, b), A @ sol, atol=1e-5 * np.abs(f).max())


def test_fit_values_recovers_an_expansion_on_the_basis(data):
    X, _, T, k = data
    Z = X[:15]
    beta0 = np.random.default_rng(2).normal(size=15)
    f = rbf(T, Z) @ beta0 - 0.25
    beta, b = compress.fit_values(k, Z, T, f, ridge=0.0)
    assert np.allclose(beta, beta0, atol=1e-3) and b == pytest.approx(-0.25, abs=1e-4)


def test_refit_intercept_and_kmeans_centres(data):
    X, a, _, _ = data
    assert compress.refit_intercept([1.0, 2.0, 3.0], [0.5, 1.5, 2.5]) == pytest.approx(0.5)
    C = compress.kmeans_centres(X, 12, weights=np.abs(a))
    assert C.shape == (12, 4) and C.dtype == np.float32
    assert np.all(np.isfinite(C))
    r = compress.random_rows(300, 50)
    assert len(set(r.tolist())) == 50 and r.max() < 300
