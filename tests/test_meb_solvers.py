"""CVM, BVM and FVM against an exact QP on a few hundred points.

Checks the mathematics: after the final full pass every point lies within
(1 + eps) of the radius, the dual objective is feasible (never above the
optimum) and, for CVM and FVM, within the (1 + eps)^2 approximation ratio of
the exact MEB radius found by scipy's SLSQP.
"""
import numpy as np
import pytest
from scipy.optimize import minimize

import streamcvm
from streamcvm.solvers.kernels import Kernel, estimate_beta
from streamcvm.data.sampling import ChunkPool
from streamcvm.solvers import MEBSolver, eps_levels
from streamcvm.solvers.exact import bvm_loop as exact


def _problem(n=160, seed=0, C=1.0, one_class=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.standard_normal(n) > 0.3, 1.0, -1.0)
    if one_class:
        y = np.ones(n)
    k = Kernel("rbf", gamma=1.0 / estimate_beta(X))
    b = 0.0 if one_class else 1.0
    Q = np.outer(y, y) * (k.block(X, X) + b) + np.eye(n) / C
    kt = 1.0 + b + 1.0 / C
    res = minimize(lambda a: a @ Q @ a, np.ones(n) / n, jac=lambda a: 2 * Q @ a,
                   method="SLSQP", bounds=[(0, None)] * n,
                   constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1,
                                 "jac": lambda a: np.ones(n)}],
                   options={"ftol": 1e-15, "maxiter": 2000})
    assert res.success
    return X, y, k, b, Q, kt, kt - res.x @ Q @ res.x


@pytest.fixture(scope="module")
def two_class():
    return _problem()


def _fit(X, y, k, b, method, eps, C=1.0, seed=0):
    store = streamcvm.as_store(X, y, chunk_rows=64)
    s = MEBSolver(k, X.shape[1], False, C=C, b=b, method=method, eps=eps)

    def full_pass():
        for i in range(store.n_chunks):
            a, e = store.chunk_bounds(i)
            c = store.chunk(i)
            yield np.arange(a, e), c.X, c.y

    classes = None if b == 0 else (-1.0, 1.0)
    s.fit(ChunkPool(store, np.random.default_rng(seed), pool_chunks=2, refresh=3),
          classes=classes, full_pass=full_pass)
    a = np.zeros(len(y))
    a[s.ball.core.ids[:s.ball.core.n]] = s.ball.core.alpha[:s.ball.core.n]
    return s, a


@pytest.mark.parametrize("method,eps", [
    ("cvm", 1e-2), ("cvm", 1e-3), ("bvm", 1e-2), ("bvm", 1e-3), ("fvm", 1e-2),
    ("fvm", 1e-3)])
def test_two_class_meb_against_exact_qp(two_class, method, eps):
    X, y, k, b, Q, kt, R2_opt = two_class
    s, a = _fit(X, y, k, b, method, eps)
    assert a.min() >= 0 and a.sum() == pytest.approx(1.0, abs=1e-9)
    c2 = a @ Q @ a
    assert s.ball.c2 == pytest.approx(c2, rel=1e-6)     # tracked ||c||^2 (float32 kernel cache)
    d2 = np.diag(Q) - 2 * Q @ a + c2
    # every point is inside the (1 + eps)-ball of the method's radius
    assert d2.max() <= (1 + eps) ** 2 * s.radius2 * (1 + 1e-9)
    if method in ("bvm", "fvm"):     # the tracked (K~a) of the core vectors stays exact
        np.testing.assert_allclose(s.ball.Ka, s.ball.core_Ka(), rtol=1e-5, atol=1e-8)   # float32 kernels
    R2 = kt - c2
    assert R2 <= R2_opt * (1 + 1e-9)                          # dual feasible
    if method in ("cvm", "fvm"):
        assert R2_opt <= (1 + eps) ** 2 * R2                  # (1 + eps)-approximation
    else:
        assert s.radius2 == pytest.approx(kt) and kt >= R2_opt   # BVM: r^2 = kt >= R*^2


def test_one_class_cvm_against_exact_qp():
    X, y, k, b, Q, kt, R2_opt = _problem(one_class=True)
    s, a = _fit(X, y, k, b, "cvm", 1e-3)
    R2 = kt - a @ Q @ a
    assert R2 <= R2_opt * (1 + 1e-9) and R2_opt <= (1 + 1e-3) ** 2 * R2


def test_same_seed_same_solution(two_class):
    X, y, k, b, *_ = two_class
    _, a1 = _fit(X, y, k, b, "bvm", 1e-3, seed=3)
    _, a2 = _fit(X, y, k, b, "bvm", 1e-3, seed=3)
    np.testing.assert_array_equal(a1, a2)


def test_eps_levels_anneal_to_the_target():
    assert eps_levels(1e-3) == [0.1, 0.05, 0.025, 0.0125, 0.00625, 0.003125, 0.0015625, 1e-3]
    assert eps_levels(0.5) == [0.5]


def test_bvm_refuses_a_kernel_without_constant_diagonal():
    with pytest.raises(ValueError, match="constant k"):
        MEBSolver(Kernel("linear"), 4, False, C=1.0, method="bvm", eps=1e-3)


def test_auto_eps_stops_once_the_margin_slack_is_small(two_class):
    X, y, k, b, *_ = two_class
    s, _ = _fit(X, y, k, b, "bvm", "auto")
    levels = [h for h in s.history if "full_pass_violators" not in h]
    slack = [h["margin_slack"] for h in levels]
    # annealed level by level until eps (2 + eps) R^2 / (2 ||c||^2) <= margin_tol
    assert slack[-1] <= s.margin_tol < min(slack[:-1])
    assert s.eps == levels[-1]["eps"] and s.eps < 0.1
    h = levels[-1]
    assert h["margin_slack"] == pytest.approx(
        h["eps"] * (2 + h["eps"]) * h["radius"] ** 2 / (2 * h["c2"]), rel=1e-9)


@pytest.mark.parametrize("eps", [1e-2, 1e-3, "auto"])
def test_bvm_exact_encloses_every_row(two_class, eps):
    """bvm_exact (small in-memory problems): every row inside the certified
    ball (1 + eps)^2 r^2 - ce^2, and the closed-form ||c||^2 exact."""
    X, y, k, b, Q, kt, R2_opt = two_class
    s = MEBSolver(k, X.shape[1], False, C=1.0, b=b, method="bvm", eps=eps)
    assert s.exact_ok(X)
    s.fit_exact(np.arange(len(y)), X, y)
    a = np.zeros(len(y))
    a[s.ball.core.ids[:s.ball.core.n]] = s.ball.core.alpha[:s.ball.core.n]
    assert a.min() >= 0 and a.sum() == pytest.approx(1.0, abs=1e-9)
    c2 = a @ Q @ a
    assert s.ball.c2 == pytest.approx(c2, rel=1e-6)
    d2 = np.diag(Q) - 2 * Q @ a + c2
    assert d2.max() <= (1 + s.certified_eps) ** 2 * s.ball.r2 - s.ball.ce2 + 1e-9
    assert kt - c2 <= R2_opt * (1 + 1e-9)                     # dual feasible
    if eps == "auto":
        assert s.history[-1]["margin_slack"] <= s.margin_tol


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_bvm_exact_blocks_and_sparse_rows(layout):
    """bvm_exact over several row blocks (n > the option exact_block_rows),
    on dense rows and on CSR rows: every row inside the certified ball,
    ||c||^2 exact, and the sparse and dense runs reach the same ball."""
    import scipy.sparse as sp
    from streamcvm.options import default
    EXACT_BLOCK = default("exact_block_rows")
    rng = np.random.default_rng(3)
    n = 2 * EXACT_BLOCK + 300
    X = rng.standard_normal((n, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.5] = 0.0                   # half the entries zero
    y = np.where(X[:, 0] - X[:, 1] + 0.4 * rng.standard_normal(n) > 0, 1.0, -1.0)
    k = Kernel("rbf", gamma=1.0 / estimate_beta(X))
    Q = np.outer(y, y) * (k.block(X, X).astype(np.float64) + 1.0) + np.eye(n)
    fits = {}
    for lay in ("dense", layout):
        s = MEBSolver(k, X.shape[1], lay == "csr", C=1.0, b=1.0, method="bvm", eps=1e-3)
        Xl = sp.csr_matrix(X) if lay == "csr" else X
        assert s.exact_ok(Xl)
        s.fit_exact(np.arange(n), Xl, y)
        a = np.zeros(n)
        a[s.ball.core.ids[:s.ball.core.n]] = s.ball.core.alpha[:s.ball.core.n]
        c2 = a @ Q @ a
        assert s.ball.c2 == pytest.approx(c2, rel=1e-5)
        d2 = np.diag(Q) - 2 * Q @ a + c2
        assert d2.max() <= (1 + s.certified_eps) ** 2 * s.ball.r2 - s.ball.ce2 + 1e-5
        assert s.full_pass_violators == 0
        fits[lay] = (a, s.ball.c2)
    a_d, c2_d = fits["dense"]
    a_l, c2_l = fits[layout]
    assert c2_l == pytest.approx(c2_d, rel=1e-3)
    assert np.abs(a_l - a_d).sum() < 0.05


def test_bvm_exact_dense_columns_same_run(monkeypatch):
    """Sparse rows whose columns are long (one-hot fields, as a9a) go to the
    exact pass dense; the run is the one the scatter gives, step for step
    (the same products summed in the same order), and the rule picks dense
    for long columns and scatter for short ones."""
    import scipy.sparse as sp
    from streamcvm.solvers.exact import bvm as exact_bvm
    rng = np.random.default_rng(5)
    n, fields, levels = 3000, 8, 2
    cols = rng.integers(0, levels, (n, fields)) + levels * np.arange(fields)
    X = sp.csr_matrix((np.ones(n * fields, np.float32), cols.ravel(),
                       np.arange(0, n * fields + 1, fields)), shape=(n, fields * levels))
    y = np.where((cols % levels)[:, :4].sum(axis=1) + rng.standard_normal(n) > 2,
                 1.0, -1.0)
    from streamcvm.options import Options
    assert exact_bvm.dense_columns(X, Options())
    text = sp.random(n, 20 * n, density=10 / (20 * n), format="csr", random_state=1,
                     dtype=np.float32)
    assert not exact_bvm.dense_columns(text, Options())     # too wide to hold dense
    k = Kernel("rbf", gamma=0.1)
    fits = []
    for dense in (True, False):
        monkeypatch.setattr(exact_bvm, "dense_columns", lambda X, o, dense=dense: dense)
        s = MEBSolver(k, X.shape[1], True, C=1.0, b=1.0, method="bvm", eps=1e-4)
        s.fit_exact(np.arange(n), X, y)
        fits.append((s.ball.core.ids[:s.ball.core.n].copy(),
                     s.ball.core.alpha[:s.ball.core.n].copy(), s.n_iter))
    assert fits[0][2] == fits[1][2] > 100
    np.testing.assert_array_equal(fits[0][0], fits[1][0])
    np.testing.assert_array_equal(fits[0][1], fits[1][1])


def test_bvm_exact_returns_the_mean_of_its_last_two_centers(two_class):
    """With ``average`` (the default) bvm_exact returns (a_T + a_{T-1}) / 2,
    its ||c||^2 is that mean's, and every row lies within the certified eps."""
    from streamcvm.solvers.kernels import sq_norms
    from streamcvm.solvers.exact.bvm_loop import bvm_exact
    X, y, k, b, Q, kt, _ = two_class
    n = len(y)
    e, ef = np.zeros(0, np.int64), np.zeros(0, np.float32)
    levels = np.array(eps_levels(1e-4))

    def run(steps, average):
        a, h = np.zeros(n), exact.new_hist(len(levels))
        last = bvm_exact(np.ascontiguousarray(X.T), e, e, ef, e, e, ef, sq_norms(X), y,
                         k.gamma, b, 1.0, levels, 0.0, steps, a, h, average,
                         exact.new_state(), np.zeros(n), -1, 1, -1, False)
        return a, h[last]

    T = 60
    a_T, _ = run(T, False)
    a_prev, _ = run(T - 1, False)
    a_mean, h = run(T, True)
    np.testing.assert_allclose(a_mean, 0.5 * (a_T + a_prev), atol=1e-12)
    assert not np.allclose(a_T, a_prev)
    c2 = a_mean @ Q @ a_mean
    assert h["c2_out"] == pytest.approx(c2, rel=1e-6)
    d2 = np.diag(Q) - 2 * Q @ a_mean + c2
    # the triangle bound from the furthest rows of both centers (the step cap
    # stopped it mid-level, so it exceeds the level's eps)
    assert h["cert_eps"] > h["eps"]
    assert d2.max() <= (1 + h["cert_eps"]) ** 2 * kt - h["ce2_out"] + 1e-9


def _shrink_problem(n=6000, n_cand=5000, seed=11):
    """Rows of a curved boundary (the shrinking's case: most rows far inside),
    the last ``n - n_cand`` held out."""
    from streamcvm.solvers.kernels import sq_norms
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * np.sin(3 * X[:, 2]) > 0, 1.0, -1.0)
    return X, y, sq_norms(X)


def _run_shrinking(X, y, sq, n_cand, levels, options, piece=None, snapshot=False,
                   average=True):
    """bvm_exact with shrinking (``perm``), to the end or in pieces of
    ``piece`` steps; ``snapshot``: between pieces, rebuild the rows from the
    original order and the saved ``perm`` (what a resumed fit does). Returns
    (alpha, hist, last, the rows in the passes at each pause, the state,
    (K~a))."""
    from streamcvm.solvers.exact.bvm_loop import bvm_exact
    n = len(y)
    e, ef = np.zeros(0, np.int64), np.zeros(0, np.float32)
    XT, sq32, yp = np.ascontiguousarray(X.T), sq.astype(np.float32), y.copy()
    st, Ka, alpha = exact.new_state(), np.zeros(n), np.zeros(n)
    hist, perm = exact.new_hist(len(levels)), np.arange(n, dtype=np.int64)
    active, last = [], -1
    while last < 0:
        stop = -1 if piece is None else int(st[0]["steps"]) + piece
        last = bvm_exact(XT, e, e, ef, e, e, ef, sq32, yp, 0.5, 1.0, 0.01, levels, 0.0, 10**7,
                         alpha, hist, average, st, Ka, stop, 1, n_cand, False, options=options,
                         perm=perm)
        active.append(int(st[0]["active"]))
        if snapshot and last < 0:
            st, Ka, alpha, hist, perm = (v.copy() for v in (st, Ka, alpha, hist, perm))
            XT = np.ascontiguousarray(X.T[:, perm])
            sq32, yp = sq.astype(np.float32)[perm], y[perm]
    np.testing.assert_array_equal(perm, np.arange(n))     # every row back in its place
    np.testing.assert_array_equal(XT, X.T)
    return alpha, hist, last, active, st[0], Ka


def test_bvm_exact_shrinking_certifies_every_row():
    """Rows far inside the ball leave the passes and come back at each
    level's end: with the most aggressive margin (0: every row of no weight
    that does not violate leaves), some come back violating, and the level
    goes on. Every row, those that left included, is inside the certified
    ball at the end of the levels where some came back (9 and 12 here), and
    the ball is the one without shrinking within the certificate. Every
    row's (K~a) at the end is its own from the weights (those that left
    too), so the held-out rows' errors are right."""
    from streamcvm.options import Options
    from streamcvm.solvers.exact.bvm_loop import bvm_exact
    X, y, sq = _shrink_problem(seed=0)
    n, n_cand = len(y), 5000
    k = Kernel("rbf", gamma=0.5)
    Q = np.outer(y, y) * (k.block(X, X).astype(np.float64) + 1.0) + 0.01 * np.eye(n)
    Qc = Q[:n_cand, :n_cand]
    kt = 1.0 + 1.0 + 0.01
    opts = Options(exact_shrink_margin=0.0, exact_shrink_share=0.0)
    Kall = np.outer(y, y[:n_cand]) * (k.block(X, X[:n_cand]).astype(np.float64) + 1.0)
    Kall[:n_cand] += 0.01 * np.eye(n_cand)
    for L in (10, 13):
        # the last center itself (no averaging: its certificate is the level's eps)
        levels = np.array(eps_levels(1e-6))[:L]
        a, hist, last, active, st, Ka = _run_shrinking(X, y, sq, n_cand, levels, opts,
                                                       piece=200, average=False)
        assert last == L - 1
        assert min(x for x in active if x > 0) < n // 2   # it did shrink, by half or more
        assert st["returned"] > 0                           # and some came back violating
        h = hist[last]
        assert a[n_cand:].max() == 0.0 and a.sum() == pytest.approx(1.0, abs=1e-9)
        ac = a[:n_cand]
        c2 = ac @ Qc @ ac
        assert h["c2"] == pytest.approx(c2, rel=1e-5)         # (float32 kernel values)
        d2 = np.diag(Qc) - 2 * Qc @ ac + c2
        assert d2.max() <= (1 + h["eps"]) ** 2 * kt - h["ce2"] + 1e-7
        # (K~a) of every row from the weights, the held-out rows' errors from it
        np.testing.assert_allclose(Ka, Kall @ ac, rtol=0, atol=1e-8)
        assert h["val_error"] == np.mean(Ka[n_cand:] <= 0)
    # the same problem without shrinking: the same ball, within the certificate
    # (both radii kt - c2 within (1 + eps)^2 of the smallest)
    e, ef = np.zeros(0, np.int64), np.zeros(0, np.float32)
    a0, h0 = np.zeros(n), exact.new_hist(len(levels))
    last0 = bvm_exact(np.ascontiguousarray(X.T), e, e, ef, e, e, ef, sq, y.copy(), 0.5, 1.0,
                      0.01, levels, 0.0, 10**7, a0, h0, False, exact.new_state(), np.zeros(n),
                      -1, 1, n_cand, False)
    assert last0 == last
    assert abs(h0[last0]["c2"] - c2) <= ((1 + h["eps"]) ** 2 - 1) * kt


def test_bvm_exact_shrinking_resumes_exactly():
    """Paused while rows are out of the passes, and continued from what a
    snapshot holds (the state, (K~a), the weights, perm; the rows rebuilt in
    their original order and moved by perm), the run is the one that never
    paused, step for step."""
    from streamcvm.options import Options
    X, y, sq = _shrink_problem(n=4000, n_cand=3500, seed=12)
    levels = np.array(eps_levels(1e-5))
    opts = Options(exact_shrink_share=0.0)
    ref, href, last, _, _, _ = _run_shrinking(X, y, sq, 3500, levels, opts)
    a, h, last2, active, _, _ = _run_shrinking(X, y, sq, 3500, levels, opts, piece=97,
                                         snapshot=True)
    assert any(0 < x < len(y) for x in active)           # paused while shrunk
    assert last2 == last
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(h["steps"], href["steps"])


def _rss_bytes():
    import os
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="Linux RSS")
def test_a_capped_kernel_cache_costs_its_filled_part_only():
    """Past the option core_reserve, a core set with a cap allocates its [cap, cap] cache
    once (no growth copies), and RAM follows |S|^2 (4,200^2 x 4 B = 71 MB),
    not |S| x cap (336 MB for a cap of 20,000, as a cache on huge pages
    would cost) nor the 1.6 GB of the whole cache."""
    from streamcvm.options import default
    from streamcvm.solvers.coreset import CoreSet
    RESERVE = default("core_reserve")
    kern = Kernel("rbf", gamma=1.0)
    X = np.random.default_rng(0).random((4200, 2)).astype(np.float32)
    cs = CoreSet(2, False, max_cap=20000)
    for i in range(RESERVE // 2):         # the next one grows the cache past RESERVE
        cs.add(i, X[i:i + 1], 1.0, kern, 0.0, 0.0)
    before = _rss_bytes()
    for i in range(RESERVE // 2, 4200):
        cs.add(i, X[i:i + 1], 1.0, kern, 0.0, 0.0)
    grown = _rss_bytes() - before
    assert cs.K.shape == (20000, 20000)
    assert grown < 0.35 * 4200 * 20000 * 4, f"{grown / 1e6:.0f} MB"
    # the cache is the same as the uncapped one's
    ref = CoreSet(2, False)
    for i in range(300):
        ref.add(i, X[i:i + 1], 1.0, kern, 0.0, 0.0)
    np.testing.assert_array_equal(ref.K[:300, :300], cs.K[:300, :300])


def test_the_exact_pass_thread_choice_is_robust_and_probes_cheaply():
    """_Threads: ``most`` first, then one thread on a short probe, then the
    faster by the median of each count's last pieces (one slow piece does
    not flip it), the other retried every exact_thread_retry pieces, on a probe."""
    from streamcvm.options import Options
    from streamcvm.solvers.exact.bvm import _Threads
    o = Options()
    PROBE = o.exact_thread_probe
    t = _Threads(2, 100000, o)
    assert t.pick() == (2, 1.0)
    t.took(2, 1.0)
    assert t.pick() == (1, PROBE) and PROBE < 1
    t.took(1, 1.3)
    assert t.pick() == (2, 1.0)
    t.took(2, 1.0)
    t.took(2, 5.0)              # one piece slowed by other work
    assert t.cost(2) == 1.0 and t.pick() == (2, 1.0)
    t.took(2, 5.0)
    t.took(2, 5.0)              # a sustained slow-down: one thread is now faster
    assert t.pick() == (1, 1.0)
    picks = [t.pick() for _ in range(2 * o.exact_thread_retry)]
    assert picks.count((2, PROBE)) == 2 and picks.count((1, 1.0)) == len(picks) - 2
    assert _Threads(2, o.exact_thread_rows - 1, o).pick() == (1, 1.0)      # too few rows


def test_bvm_exact_same_run_whatever_the_threads_choose(monkeypatch):
    """The pieces' thread counts and lengths do not change the run."""
    from streamcvm.solvers.exact import bvm as exact_bvm
    rng = np.random.default_rng(3)
    from streamcvm.options import default
    n = default("exact_thread_rows") + 2000
    X = rng.standard_normal((n, 4)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.5 * rng.standard_normal(n) > 0.3, 1.0, -1.0)
    k = Kernel("rbf", gamma=0.5)
    fits, pieces = [], []
    for plan in ([(2, 1.0)], [(1, 0.01), (2, 0.01), (1, 0.02)]):   # one piece; ~16-step pieces
        seq = iter(plan * 100000)
        pieces.append(0)

        def pick(self, seq=seq):
            pieces[-1] += 1
            return next(seq)
        monkeypatch.setattr(exact_bvm._Threads, "pick", pick)
        s = MEBSolver(k, X.shape[1], False, C=1.0, b=1.0, method="bvm", eps=1e-3)
        s.fit_exact(np.arange(len(y)), X, y)
        fits.append((s.ball.core.ids[:s.ball.core.n].copy(),
                     s.ball.core.alpha[:s.ball.core.n].copy(), s.n_iter))
    assert pieces[0] <= 2 and pieces[1] > 20, pieces
    assert fits[0][2] == fits[1][2] > 100
    np.testing.assert_array_equal(fits[0][0], fits[1][0])
    np.testing.assert_array_equal(fits[0][1], fits[1][1])
