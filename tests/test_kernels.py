"""Kernel blocks against sklearn.metrics.pairwise, dense and CSR."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import pairwise as pw

from streamcvm.solvers.kernels import Kernel, estimate_beta, kernel_class


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((37, 11)).astype(np.float32)
    B = rng.standard_normal((23, 11)).astype(np.float32)
    A[A < 0.3] = 0          # some zeros, so CSR differs from dense storage
    B[B < 0.3] = 0
    return A, B


def reference(name, A, B, gamma, coef0, degree):
    A = A.astype(np.float64)
    B = B.astype(np.float64)
    if name == "rbf":
        return pw.rbf_kernel(A, B, gamma=gamma)
    if name == "laplacian":
        return pw.laplacian_kernel(A, B, gamma=gamma)
    if name == "exponential":
        return np.exp(-gamma * pw.euclidean_distances(A, B))
    if name == "linear":
        return pw.linear_kernel(A, B)
    P = pw.polynomial_kernel(A, B, gamma=gamma, coef0=coef0, degree=degree)
    if name == "poly":
        return P
    da = pw.polynomial_kernel(A, A, gamma=gamma, coef0=coef0, degree=degree).diagonal()
    db = pw.polynomial_kernel(B, B, gamma=gamma, coef0=coef0, degree=degree).diagonal()
    return P / np.sqrt(np.outer(da, db))


@pytest.mark.parametrize("name", ["rbf", "laplacian", "exponential", "npoly", "poly",
                                  "linear"])
@pytest.mark.parametrize("layout", ["dense", "csr", "mixed"])
def test_kernel_block_matches_sklearn(data, name, layout):
    A, B = data
    k = Kernel(name, gamma=0.07, coef0=1.0, degree=3)
    a = sp.csr_matrix(A) if layout in ("csr", "mixed") else A
    b = sp.csr_matrix(B) if layout == "csr" else B
    K = k.block(a, b)
    np.testing.assert_allclose(K, reference(name, A, B, 0.07, 1.0, 3), rtol=2e-5, atol=1e-6)
    # the diagonal helper agrees with the kernel of a row with itself
    np.testing.assert_allclose(k.diag(a), np.diagonal(k.block(a, a)), rtol=2e-5, atol=1e-6)


def test_exponential_is_exactly_one_on_the_diagonal():
    """exp(-gamma ||x - z||_2) of dense rows from their differences: k(x, x)
    is 1 exactly (a Gram-based distance would leave float32 cancellation,
    magnified by the square root, on the diagonal the MEB assumes is 1)."""
    rng = np.random.default_rng(2)
    X = (rng.standard_normal((50, 3)) * 100 + 1000).astype(np.float32)
    K = Kernel("exponential", gamma=30.0).block(X, X)
    assert np.all(np.diagonal(K) == 1.0)


def test_unknown_kernel_and_bad_gamma():
    with pytest.raises(ValueError, match="unknown kernel"):
        kernel_class("sigmoid")
    with pytest.raises(ValueError, match="gamma"):
        Kernel("rbf", gamma=0)


def test_estimate_beta_is_the_mean_pairwise_squared_distance():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 4)) * [1, 2, 3, 4]
    D = pw.euclidean_distances(X, X, squared=True)
    exact = D.sum() / (300 * 299)
    assert estimate_beta(X, n_sample=5000) == pytest.approx(exact, rel=1e-10)
    # on a sample it is close
    big = rng.standard_normal((20000, 4))
    assert estimate_beta(big, n_sample=5000) == pytest.approx(8.0, rel=0.05)


def test_exp_nonpos_matches_numpy():
    """The vectorised float32 exp of the compiled RBF loops: within 2e-7
    relative of the exact value on [-87, 0], exact at 0, and 0 below -87."""
    from streamcvm.solvers.kernels.expf import EXP_MIN, exp_nonpos
    rng = np.random.default_rng(0)
    a = np.concatenate([-rng.random(20000) * 95, -rng.random(2000) * 1e-3,
                        [0.0, -0.0, EXP_MIN, -87.01, -1e-40, -300.0]]).astype(np.float32)
    out = np.empty_like(a)
    exp_nonpos(a, out, np.empty(a.size, np.int32))
    ref = np.exp(a.astype(np.float64))
    ok = a >= EXP_MIN
    assert np.all(np.abs(out[ok] - ref[ok]) <= 2e-7 * ref[ok])
    assert np.all(out[~ok] == 0.0) and out[-6] == 1.0 and out[-2] == 1.0


def test_float32_rbf_blocks_take_the_one_pass_exp():
    """A dense float32 RBF block by one pass (``one_pass=True``, predict's
    tiles) is the Gram matrix turned into exp(-gamma d^2) row by row through
    exp_nonpos (rbf_exp): within 2e-7 relative of
    the float64 kernel's values (plus the argument's rounding) where the
    Gram matrix is exact, 1 on a row
    against itself; the same as rbf_arg + NumPy's exp to float32 rounding."""
    from streamcvm.solvers.kernels.compiled import rbf_arg, rbf_exp
    rng = np.random.default_rng(3)
    A = rng.integers(-3, 4, size=(50, 6)).astype(np.float32)   # exact float32 products
    B = np.concatenate([A[:5], rng.integers(-3, 4, size=(300, 6))]).astype(np.float32)
    K = Kernel("rbf", gamma=0.05).block(A, B, one_pass=True)
    assert K.dtype == np.float32
    d2 = ((A[:, None, :].astype(np.float64) - B[None, :, :]) ** 2).sum(-1)
    ref = np.exp(-0.05 * d2)
    # (-gamma d^2 rounds to float32: 6e-8 relative of the argument)
    assert np.all(np.abs(K - ref) <= (2e-7 + 1.2e-7 * 0.05 * d2) * ref)
    assert np.all(np.diag(K[:5, :5]) == 1.0)
    sq = lambda X: (X.astype(np.float64) ** 2).sum(1).astype(np.float32)   # noqa: E731
    G = A @ B.T
    one = rbf_exp(G.copy(), sq(A), sq(B), np.float32(0.05))
    two = np.exp(rbf_arg(G.copy(), sq(A), sq(B), np.float32(0.05)))
    assert np.allclose(one, two, rtol=3e-7, atol=0)


def test_thread_limits_keeps_one_controller_until_an_import():
    """thread_limits holds BLAS to one thread and restores it, from one
    threadpoolctl controller (making one inspects every loaded library),
    made again once a module is imported (it may bring a new BLAS)."""
    import sys
    import types

    from threadpoolctl import threadpool_info

    from streamcvm.data import parallel

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    with parallel.thread_limits(1, "blas"):
        assert blas_threads() and set(blas_threads()) == {1}
    assert blas_threads() == before
    ctl = parallel._CONTROLLER[0]
    with parallel.thread_limits(1, "blas"):
        pass
    assert parallel._CONTROLLER[0] is ctl
    sys.modules["_streamcvm_test_new_module"] = types.ModuleType("_streamcvm_test_new_module")
    try:
        with parallel.thread_limits(1, "blas"):
            assert set(blas_threads()) == {1}
        assert parallel._CONTROLLER[0] is not ctl
    finally:
        del sys.modules["_streamcvm_test_new_module"]


@pytest.mark.parametrize("machines", [0, 1, 3, 12])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_kernel_sums_of_one_or_many_machines_match_float64(machines, n_jobs):
    """kernel_sums over blocks of rows (the last one partial): a weight
    vector, few machines (summed in place) and many (MMDA's features: a
    GEMM from a float64 copy kept per thread) all give the float64 product
    of the float32 kernel block, at one or two threads."""
    from streamcvm.solvers.kernels import block_rows_for, kernel_sums
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2000, 5)).astype(np.float32)
    B = rng.standard_normal((5000, 5)).astype(np.float32)
    assert block_rows_for(len(B)) < len(X) and len(X) % block_rows_for(len(B))
    w = rng.standard_normal((len(B), machines) if machines else len(B))
    kern = Kernel("rbf", gamma=0.3)
    ref = np.asarray(kern.block(X, B), np.float64) @ w
    got = kernel_sums(kern, X, B, w, n_jobs=n_jobs)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * np.abs(w).sum())
