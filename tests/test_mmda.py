"""MMDA's core-set QP (mmda paper eq. 3, Algorithm 3) against an exact solver
on a few hundred points: three directions, each orthogonal to the ones before."""
import os

import numpy as np
import pytest
from scipy.optimize import minimize

from streamcvm.solvers.kernels import Kernel, estimate_beta
from streamcvm.solvers.ball import distance2
from streamcvm.solvers.mmda import core_matrix, direction, sor


def _data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3)).astype(np.float32)
    y = np.where(X[:, 0] + 0.7 * X[:, 1] ** 2 - 0.5 + 0.4 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def _exact(G, t):
    """min 1/2 x'Gx - [1; 0]'x, x[:t] >= 0, by L-BFGS-B to a tight tolerance."""
    lin = np.concatenate([np.ones(t), np.zeros(len(G) - t)])
    res = minimize(lambda x: (0.5 * x @ G @ x - lin @ x, G @ x - lin), np.zeros(len(G)),
                   jac=True, method="L-BFGS-B",
                   bounds=[(0, None)] * t + [(None, None)] * (len(G) - t),
                   options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 100000})
    return res.x[:t], res.x[t:], res.fun


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_sor_matches_the_exact_qp_and_directions_are_orthogonal(C):
    X, y = _data()
    kern = Kernel("rbf", gamma=1.0 / estimate_beta(X))
    K = kern.block(X, X).astype(np.float64)
    n = len(y)
    dirs = []                  # (rows' indices, coefficients) of each unit direction
    for s in range(3):
        B = np.zeros((n, s))
        for q, (_, c) in enumerate(dirs):
            B[:, q] = y * (K @ c)                      # y_i u_q'phi(x_i)
        G = core_matrix(K, y, C, B)
        a, g, steps = sor(G, np.zeros(n), np.zeros(s), tol=1e-12)
        ae, ge, fe = _exact(G, n)
        lin = np.concatenate([np.ones(n), np.zeros(s)])
        x = np.concatenate([a, g])
        f = 0.5 * x @ G @ x - lin @ x
        assert f <= fe + 1e-9 * abs(fe)                # as low as the exact solver's
        np.testing.assert_allclose(a, ae, atol=1e-5 * a.max())
        # KKT of eq. 3: gradient >= 0 on a, 0 where a > 0, and w orthogonal to every u_q
        grad = G @ x - lin
        assert grad[:n].min() > -1e-9 and np.abs(grad[:n][a > 1e-10]).max() < 1e-9
        coef = sum(direction(a, g, y, [(None, c) for _, c in dirs]))   # over all n rows
        for _, c in dirs:
            assert abs(c @ K @ coef) < 1e-8 * np.sqrt(coef @ K @ coef)
        dirs.append((None, coef / np.sqrt(coef @ K @ coef)))
    # the three unit directions are orthonormal in feature space
    Cm = np.array([c for _, c in dirs])
    np.testing.assert_allclose(Cm @ K @ Cm.T, np.eye(3), atol=1e-8)


def _greedy_sor(G, x, grad, invd, s, n, tol, max_iter):
    """Algorithm 3's rule written plainly: move the coordinate whose projected
    move is largest (the first of equals), the last n - s clipped at 0 (the
    gradient updated by the compiled axpy, whose fused multiply-adds numpy
    has not)."""
    from streamcvm.solvers.mmda.sor import _axpy
    for step in range(1, max_iter + 1):
        mv = -grad[:n] * invd[:n]
        mv[s:] = np.maximum(x[s:n] + mv[s:], 0.0) - x[s:n]
        i = int(np.argmax(np.abs(mv)))          # the first of equals
        if not abs(mv[i]) > tol:
            return step
        x[i] += mv[i]
        _axpy(G[i], grad, mv[i], n)
    return max_iter


@pytest.mark.parametrize("n, s", [(7, 0), (61, 3), (203, 2)])
def test_sor_steps_are_the_largest_projected_moves(n, s):
    """The compiled loop (moves into a buffer, eight running maxima, a scan
    for the first index) takes the same coordinates as the plain rule, on
    sizes that are not multiples of 8 and with equal moves at the start."""
    from streamcvm.solvers.mmda.sor import _sor
    X, y = _data(n)
    K = Kernel("rbf", gamma=1.0 / estimate_beta(X)).block(X, X).astype(np.float64)
    B = np.random.default_rng(1).standard_normal((n, s)) * 0.1
    Gq = core_matrix(K, y, 1.0, B)
    G = np.ascontiguousarray(Gq[np.ix_(np.r_[n:n + s, :n], np.r_[n:n + s, :n])])  # [g; a]
    for max_iter in (1, 5, 10_000):
        x0 = np.zeros(n + s)
        x0[s:] = 1.0 / n                  # every a equal: ties in the first moves
        lin = np.r_[np.zeros(s), np.ones(n)]
        runs = []
        for f in (_sor, _greedy_sor):
            x = x0.copy()
            grad = G @ x - lin
            steps = f(G, x, grad, 1.0 / np.diagonal(G).copy(), s, n + s,
                      *((1.0,) if f is _sor else ()), 1e-10, max_iter)
            runs.append((steps, x, grad))
        assert runs[0][0] == runs[1][0] and (max_iter > 5 or runs[0][0] == max_iter)
        np.testing.assert_array_equal(runs[0][1], runs[1][1])
        np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_the_normalised_solution_is_the_constrained_meb():
    """eq. 35: (a, g) / 1'a solves the constrained MEB (eq. 21): every point
    lies within its radius (eq. 22), the support points on it."""
    X, y = _data(n=160, seed=1)
    C = 1.0
    kern = Kernel("rbf", gamma=0.5)
    K = kern.block(X, X).astype(np.float64)
    n = len(y)
    a1, _, _ = sor(core_matrix(K, y, C, np.zeros((n, 0))), np.zeros(n), np.zeros(0), tol=1e-12)
    c1 = a1 * y / np.sqrt((a1 * y) @ K @ (a1 * y))
    B = (y * (K @ c1))[:, None]
    G = core_matrix(K, y, C, B)
    a, g, _ = sor(G, np.zeros(n), np.zeros(1), tol=1e-13)
    at, gt = a / a.sum(), g / a.sum()
    Kt = G[:n, :n]
    eta = Kt.diagonal().max()                           # Delta = eta - diag(K~) >= 0
    c2 = at @ Kt @ at + 2 * at @ B @ gt + gt @ gt       # ||c||^2 (eq. 23)
    R2 = eta - c2                                       # eq. 22 with diag(K~) + Delta = eta
    Ka = Kt @ at + B @ gt                               # c'phi~(z_l)
    d2 = distance2(c2, Ka, eta)                         # ||c - phi~(z_l)||^2 + delta_l^2
    assert d2.max() <= R2 * (1 + 1e-9)
    np.testing.assert_allclose(d2[at > 1e-8], R2, rtol=1e-7)


@pytest.mark.parametrize("memory", [True, False])
def test_sampled_directions_match_the_exact_ones(memory):
    """Algorithm 1 on samples (a store of 240 rows): each of two directions is
    the exact QP's (cosine in feature space near 1) and the two are
    orthonormal. (On these noisy rows nearly every row is a support row of
    the exact second direction, so the core set is not much smaller.) Both
    routes: the compiled in-memory loop and the sample-by-sample one."""
    import streamcvm
    from streamcvm.data.sampling import ChunkPool
    from streamcvm.solvers.mmda import Basis, Direction, MMDASolver
    X, y = _data()
    kern = Kernel("rbf", gamma=1.0 / estimate_beta(X))
    K = kern.block(X, X).astype(np.float64)
    n, C = len(y), 1.0
    exact, got = [], []
    for s in range(2):
        B = np.column_stack([y * (K @ c) for c in exact]) if exact else np.zeros((n, 0))
        a, g, _ = sor(core_matrix(K, y, C, B), np.zeros(n), np.zeros(s), tol=1e-12)
        c = a * y + sum((gq * cq for gq, cq in zip(g, exact)), np.zeros(n))
        exact.append(c / np.sqrt(c @ K @ c))
        store = streamcvm.as_store(X, y, chunk_rows=60)
        pool = ChunkPool(store, np.random.default_rng(s), classes=(-1.0, 1.0))
        solver = MMDASolver(kern, C=C, eps=1e-4, basis=Basis(got),
                            memory=memory).fit(pool, (-1.0, 1.0))
        pool.close()
        d = solver.unit_direction()
        got.append(d)
        # a row in the core set and in the earlier direction is one kernel evaluation
        assert len(np.unique(d.ids)) == len(d.ids) <= n
        # the feature-space cosine between the sampled and the exact direction
        cos = (d.coef @ kern.block(d.rows, X).astype(np.float64) @ exact[s])
        assert cos > 0.999, (s, cos)
    # orthonormal in feature space (the exact kernel, float64 rows) to the
    # precision of the solver's float32 kernel values (its core set's columns)
    G = np.array([[a.coef @ kern.block(a.rows.astype(np.float64), b.rows.astype(np.float64))
                   @ b.coef for b in got] for a in got])
    np.testing.assert_allclose(G, np.eye(2), atol=1e-5)
    assert isinstance(got[0], Direction)


def test_transformer_contract_and_pipeline():
    """MMDATransformer: n_components per class (one-vs-rest beyond two
    classes), feature names, kernel evaluations per feature, and a Pipeline
    with a 1-NN classifier that beats chance by far on separable classes."""
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from streamcvm.estimators.mmda import MMDATransformer
    rng = np.random.default_rng(3)
    centers = np.array([[0, 0], [3, 0], [0, 3]], np.float32)
    y = np.repeat([0, 1, 2], 60)
    X = (centers[y] + rng.standard_normal((180, 2))).astype(np.float32)
    m = MMDATransformer(n_components=2, eps=1e-2).fit(X, y)
    F = m.transform(X)
    assert F.shape == (180, 6) and len(m.kernel_evaluations_) == 6
    assert list(m.get_feature_names_out()) == [f"mmdatransformer{i}" for i in range(6)]
    assert (m.kernel_evaluations_ > 0).all()
    two = MMDATransformer(n_components=2, eps=1e-2).fit(X[y < 2], y[y < 2])
    assert two.transform(X[:5]).shape == (5, 2)
    pipe = make_pipeline(MMDATransformer(eps=1e-2), KNeighborsClassifier(1)).fit(X, y)
    assert pipe.score(X, y) > 0.8
    with pytest.raises(ValueError, match="two classes"):
        MMDATransformer().fit(X, np.zeros(len(y)))


@pytest.mark.parametrize("name", ["laplacian", "exponential"])
def test_in_memory_route_other_kernels(name):
    """The compiled in-memory loop's own kernel columns (laplacian,
    exponential): the direction is the exact QP's on all rows (cosine in
    feature space near 1), as the sample-by-sample route's is."""
    import streamcvm
    from streamcvm.data.sampling import ChunkPool
    from streamcvm.solvers.mmda import MMDASolver
    X, y = _data(n=160, seed=2)
    kern = Kernel(name, gamma=0.5)
    K = kern.block(X.astype(np.float64), X.astype(np.float64))
    n = len(y)
    a, _, _ = sor(core_matrix(K, y, 1.0, np.zeros((n, 0))), np.zeros(n), np.zeros(0), tol=1e-12)
    exact = a * y / np.sqrt((a * y) @ K @ (a * y))
    store = streamcvm.as_store(X, y, chunk_rows=40)
    for memory in (True, False):
        pool = ChunkPool(store, np.random.default_rng(0), classes=(-1.0, 1.0))
        solver = MMDASolver(kern, C=1.0, eps=1e-4, memory=memory).fit(pool, (-1.0, 1.0))
        pool.close()
        assert ("samples" in solver.history[-1]) == memory      # the route taken
        d = solver.unit_direction()
        cos = d.coef @ kern.block(d.rows.astype(np.float64), X.astype(np.float64)) @ exact
        assert cos > 0.999, (memory, cos)


@pytest.mark.skipif(os.cpu_count() < 2, reason="needs two cores")
def test_a_store_of_more_than_memory_rows_is_sampled(monkeypatch):
    """Above the option ``mmda_memory_rows`` rows the solver samples (its history has no
    draw counts), at the limit it takes the compiled loop; and the estimator
    runs classes side by side only where its solvers take that loop (a
    kernel column over every row per entering row grows with the rows: 26 s
    on 200K rows of the mixture against 6 s sampled)."""
    import numba

    import streamcvm
    import streamcvm.problems.mmda as em
    from streamcvm import MMDATransformer
    from streamcvm.data.sampling import ChunkPool
    from streamcvm.options import Options
    from streamcvm.solvers.mmda import MMDASolver
    X, y = _data(n=160, seed=2)
    kern = Kernel("rbf", gamma=0.5)
    store = streamcvm.as_store(X, y, chunk_rows=40)
    for rows, memory in ((160, True), (159, False)):
        opts = Options(mmda_memory_rows=rows)
        pool = ChunkPool(store, np.random.default_rng(0), classes=(-1.0, 1.0))
        solver = MMDASolver(kern, C=1.0, eps=1e-2, options=opts).fit(pool, (-1.0, 1.0))
        pool.close()
        assert ("samples" in solver.history[-1]) == memory
    made = []

    class Counted(em.RowKernels):       # one per thread of the estimator
        def __init__(self, *a, **k):
            made.append(k.get("budget"))
            super().__init__(*a, **k)
    monkeypatch.setattr(em, "RowKernels", Counted)
    X3 = np.concatenate([X, X[:60] + 3.0])
    y3 = np.concatenate([(y > 0).astype(int), np.full(60, 2)])
    was = numba.get_num_threads()
    try:
        numba.set_num_threads(2)
        for rows, side_by_side in ((len(X3), True), (len(X3) - 1, False)):
            made.clear()
            MMDATransformer(n_components=1, eps=1e-2,
                            options={"mmda_memory_rows": rows}).fit(X3, y3)
            assert (len(made) == 2) == side_by_side, made
    finally:
        numba.set_num_threads(was)
