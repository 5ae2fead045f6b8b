"""Compact kernel expansions (streamcvm.problems.compress) against direct dense
computations on a few hundred points."""
import numpy as np
import pytest

from streamcvm.options import Options
from streamcvm.problems import compress
from streamcvm.solvers.kernels import Kernel

OPTS = Options()

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


def test_fit_values_on_coinciding_basis_points_falls_back_to_least_squares(data):
    """Centres that coincide (k-means can give them) make the normal
    equations singular: Cholesky refuses them and the fit is least squares,
    finite, with the values of the basis without the copies."""
    X, _, T, k = data
    Z = np.concatenate([X[:10], X[:10]])
    f = rbf(T, X[:10]) @ np.random.default_rng(3).normal(size=10) + 0.3
    beta, b = compress.fit_values(k, Z, T, f, ridge=0.0)
    assert np.all(np.isfinite(beta))
    assert np.allclose(rbf(T, Z) @ beta + b, f, atol=1e-6 * np.abs(f).max())


def test_refit_intercept_and_kmeans_centres(data):
    X, a, _, _ = data
    assert compress.refit_intercept([1.0, 2.0, 3.0], [0.5, 1.5, 2.5]) == pytest.approx(0.5)
    C = compress.kmeans_centres(X, 12, weights=np.abs(a))
    assert C.shape == (12, 4) and C.dtype == np.float32
    assert np.all(np.isfinite(C))
    r = compress.random_rows(300, 50)
    assert len(set(r.tolist())) == 50 and r.max() < 300


def _objective(X, w, Z):
    """The weighted k-means objective, computed directly in float64."""
    d2 = ((np.asarray(X, np.float64)[:, None, :] - np.asarray(Z, np.float64)[None]) ** 2).sum(-1)
    return float(np.sum(w * d2.min(axis=1)))


def _lloyd_fixed_point(X, w, Z):
    """Every centre is the weighted mean of the rows nearest to it (Lloyd's
    fixed point), checked directly."""
    X64 = np.asarray(X, np.float64)
    lab = ((X64[:, None, :] - np.asarray(Z, np.float64)[None]) ** 2).sum(-1).argmin(axis=1)
    for j in np.unique(lab):
        sel = lab == j
        assert np.allclose(Z[j], (w[sel, None] * X64[sel]).sum(0) / w[sel].sum(), atol=1e-4)


def test_weighted_kmeans_is_as_good_as_minibatch_kmeans():
    """On support-row-like data (clusters of unequal size, weights like
    abs(a)), the NumPy k-means++ / Lloyd centres reach a weighted objective
    no worse than scikit-learn's MiniBatchKMeans (what class_centres used
    before) at every B, on average over seeds (either can land in a worse
    local minimum for one seed: B = 16, seed 0 is 9% above it)."""
    rng = np.random.default_rng(1)
    centres = rng.uniform(-4, 4, size=(40, 5))
    X = np.concatenate([c + rng.normal(scale=rng.uniform(0.1, 0.8), size=(rng.integers(10, 120), 5))
                        for c in centres]).astype(np.float32)
    w = rng.exponential(size=len(X))
    for B in (16, 48, 128):
        new = [_objective(X, w, compress.weighted_kmeans(X, B, w, seed=s)) for s in range(6)]
        old = [_objective(X, w, compress.kmeans_centres(X, B, weights=w, seed=s)) for s in range(6)]
        assert np.mean(new) <= np.mean(old), (B, new, old)
        assert max(np.divide(new, old)) < 1.15, (B, new, old)


def test_weighted_kmeans_centres():
    """Shape, dtype, determinism by seed, the rows themselves when B >= n,
    a fixed point of Lloyd's step once converged, and the weights taken
    into account (a heavy row pulls its centre onto itself)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    w = np.ones(200)
    Z = compress.weighted_kmeans(X, 10, w, seed=3)
    assert Z.shape == (10, 3) and Z.dtype == np.float32 and np.all(np.isfinite(Z))
    assert np.array_equal(Z, compress.weighted_kmeans(X, 10, w, seed=3))
    assert np.array_equal(compress.weighted_kmeans(X[:7], 10, w[:7]), X[:7])
    _lloyd_fixed_point(X, w, compress.weighted_kmeans(X, 5, w, iters=200))
    heavy = w.copy()
    heavy[17] = 1e6
    Z = compress.weighted_kmeans(X, 5, heavy, iters=50)
    assert np.min(np.linalg.norm(Z - X[17], axis=1)) < 1e-2
    assert _objective(X, w, compress.weighted_kmeans(X, 10, w, iters=5)) <= \
        _objective(X, w, compress.weighted_kmeans(X, 10, w, iters=0)) + 1e-9
    with pytest.raises(ValueError, match="non-negative"):
        compress.weighted_kmeans(X, 5, -w)


def test_centres_for_growing_b_continue_one_seeding():
    """compact_shared tries B = 256, 512, ... on the same rows: the seeding
    kept from the smaller B and continued gives the very centres of a
    seeding drawn afresh for each B, per class, and when the rows run out
    (every row a centre: the rest repeat the first); it is continued, not
    drawn again (fewer draws)."""
    rng = np.random.default_rng(4)
    S = rng.normal(size=(900, 5)).astype(np.float32)
    w = rng.random(900) + 0.1
    key = np.where(rng.random(900) < 0.3, -1.0, 1.0)
    seeds = {}
    for B in (16, 40, 64, 200):
        assert np.array_equal(compress.class_centres(S, w, key, B, seed=2, seeds=seeds),
                              compress.class_centres(S, w, key, B, seed=2))
    assert {k: s.k for k, s in seeds.items()} == {-1.0: int(200 * np.mean(key < 0)),
                                                  1.0: int(200 * np.mean(key > 0))}
    X = np.repeat(np.arange(20.0, dtype=np.float32).reshape(4, 5), 5, axis=0)  # 4 rows x 5
    kept = compress._Seeds(X, np.ones(20), 1)
    for B in (3, 6, 12):
        assert np.array_equal(compress.weighted_kmeans(X, B, np.ones(20), seed=1, seeds=kept),
                              compress.weighted_kmeans(X, B, np.ones(20), seed=1))
    assert kept.spent


def test_threaded_values_equal_serial_ones(data):
    """decisions and union_values on two threads: the same values as on one
    (whole blocks of rows each, at the same starts)."""
    from streamcvm.predict.decision import build_union, union_values
    from streamcvm.problems.machine import Machine
    X, a, T, k = data
    rng = np.random.default_rng(4)
    R = np.concatenate([T] * 30)                     # 6,000 rows: several blocks
    Beta = rng.normal(size=(40, 3))
    one = compress.decisions(k, X[:40], Beta, 0.5, R, block=512)
    two = compress.decisions(k, X[:40], Beta, 0.5, R, block=512, n_jobs=2)
    assert np.array_equal(one, two)
    assert np.allclose(one, rbf(R, X[:40]) @ Beta + 0.5, atol=1e-4)
    ms = [Machine(sv=X[i::3], coef=a[i::3], intercept=0.1 * i, sv_ids=np.arange(300)[i::3],
                  classes=pair) for i, pair in enumerate([(0, 1), (0, 2), (1, 2)])]
    union = build_union(ms)
    ic = np.array([m.intercept for m in ms])
    one = union_values(k, union, ic, R)
    two = union_values(k, union, ic, R, n_jobs=2)
    assert np.allclose(one, two, rtol=1e-12, atol=1e-12)
    assert np.allclose(one[:, 0], rbf(R, X[0::3]) @ a[0::3], atol=1e-4)


def test_union_values_by_tiles_equal_one_block(data):
    """A union larger than the tile is cut into tiles within each class
    group (each kernel block stays in cache): the same values as one block
    over the union, to float32 rounding, from dense and CSR rows; and the
    same on one thread as on two."""
    import scipy.sparse as sp
    from streamcvm.predict.decision import build_union, union_values
    from streamcvm.problems.machine import Machine
    X, a, T, k = data
    R = np.concatenate([T] * 10)
    ms = [Machine(sv=X[i::3], coef=a[i::3], intercept=0.1 * i, sv_ids=np.arange(300)[i::3],
                  classes=pair) for i, pair in enumerate([(0, 1), (0, 2), (1, 2)])]
    union = build_union(ms)
    ic = np.array([m.intercept for m in ms])
    whole = union_values(k, union, ic, R, tile=10 ** 6)
    assert np.allclose(whole[:, 0], rbf(R, X[0::3]) @ a[0::3] + ic[0], atol=1e-4)
    for tile in (7, 64):                # tiles that do and do not divide the groups
        for rows in (R, sp.csr_matrix(R)):
            tiled = union_values(k, union, ic, rows, tile=tile)
            # (float32 Gram products of other shapes: equal to their rounding)
            assert np.allclose(tiled, whole, rtol=1e-5, atol=1e-5)
        assert np.allclose(union_values(k, union, ic, R, n_jobs=2, tile=tile),
                           union_values(k, union, ic, R, tile=tile), rtol=1e-12, atol=1e-12)


def test_few_machine_groups_sum_in_place_as_the_gemm_does(data):
    """union_values sums a class group of few machines from the float32
    block in place (weighted_sum over its columns), more by a float64 GEMM:
    the same values either way, for one machine and for one-vs-one groups."""
    import streamcvm.predict.decision as dec
    from streamcvm.options import default
    from streamcvm.problems.machine import Machine
    from streamcvm.solvers.kernels import weighted_sum
    X, a, T, k = data
    R = np.concatenate([T] * 10)
    G = k.block(R, X)
    w = np.random.default_rng(5).normal(size=(60, 2))
    assert np.allclose(weighted_sum(G, w, cols=(100, 160)),
                       G[:, 100:160].astype(np.float64) @ w, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="columns 100:160 of a 300-column block against 59"):
        weighted_sum(G, w[:59], cols=(100, 160))
    with pytest.raises(ValueError, match="columns 280:340 of a 300-column block"):
        weighted_sum(G, w, cols=(280, 340))         # past the block's end: no stray reads
    for ms in ([Machine(sv=X, coef=a, intercept=0.2, sv_ids=np.arange(300), classes=(0, 1))],
               [Machine(sv=X[i::3], coef=a[i::3], intercept=0.1 * i,
                        sv_ids=np.arange(300)[i::3], classes=pair)
                for i, pair in enumerate([(0, 1), (0, 2), (1, 2)])]):
        union = dec.build_union(ms)
        assert all(W.shape[1] <= default("few_machines") for _, _, _, W in union[3])
        ic = np.array([m.intercept for m in ms])
        few = dec.union_values(k, union, ic, R, n_jobs=2)
        gemm = dec.union_values(k, union, ic, R, n_jobs=2, few_machines=0)   # all by the GEMM
        assert np.allclose(few, gemm, rtol=1e-12, atol=1e-12)
        assert np.allclose(few[:, 0], rbf(R, ms[0].sv) @ ms[0].coef + ms[0].intercept,
                           atol=1e-4)

# -- a machine's compact expansion, chosen on validation rows ---------------------

def _machine(n_sv=2400, seed=0, regression=False):
    """A two-feature machine whose f is smooth (compressible): random
    support rows, coefficients from a smooth function of them."""
    from streamcvm.problems.machine import Machine
    rng = np.random.default_rng(seed)
    S = rng.uniform(-2, 2, size=(n_sv, 2)).astype(np.float32)
    a = np.sin(S[:, 0]) * np.cos(S[:, 1]) / n_sv * 50
    return Machine(sv=S, coef=a.astype(np.float64), intercept=0.05,
                   sv_ids=np.arange(n_sv), classes=None if regression else (-1.0, 1.0),
                   regression=regression)


def _noisy_labels(m, k, n=3000, seed=1):
    rng = np.random.default_rng(seed)
    Xf = rng.uniform(-2, 2, size=(4000, 2)).astype(np.float32)
    Xv = rng.uniform(-2, 2, size=(n, 2)).astype(np.float32)
    fv = m.decision(k, Xv)
    yv = np.where(fv > 0, 1.0, -1.0)            # labels the full model gets all right
    flip = rng.random(n) < 0.05                 # ... but 5% noise
    yv[flip] *= -1
    return Xf, Xv, yv, fv


@pytest.mark.parametrize("kmeans", [False, True])
def test_compact_machine_keeps_the_smallest_b_that_matches(data, kmeans):
    k = Kernel("rbf", gamma=1.0)
    m = _machine()
    Xf, Xv, yv, fv = _noisy_labels(m, k)
    opts = OPTS.but(compact_sizes=(4, 16, 64, 256), compact_kmeans=kmeans)
    c, rec = compress.compact_machine(m, k, Xf, Xv, yv, options=opts, tol=0.1)
    assert c is not None and rec["B"] == len(c.coef) == len(c.sv)
    tried = rec["tried"]
    # the largest first, then halves of it down to the first that fails
    assert [t["B"] for t in tried] == [256, 64, 16, 4][:len(tried)]
    allowed = rec["tolerance_rows"]
    assert allowed == 0.1 / 100 * len(yv)
    for t in tried:
        assert t["passed"] == (t["broken"] - t["fixed"] <= allowed)
    assert all(t["passed"] for t in tried[:-1])
    last_pass = [t for t in tried if t["passed"]][-1]
    assert rec["B"] == last_pass["B"] < 256            # a smaller B than the largest kept
    assert tried[-1]["passed"] is False or tried[-1]["B"] == 4
    assert np.mean((c.decision(k, Xv) > 0) == (fv > 0)) >= 0.98
    assert np.all(c.sv_ids < 0) and c.compact is None
    if not kmeans:                                   # basis points are support rows
        assert {tuple(r) for r in c.sv} <= {tuple(r) for r in m.sv}
    # what the choice cost: each try's seconds, within the whole
    spent = [t["seconds"] for t in tried]
    assert min(spent) > 0 and rec["seconds"] >= rec["setup_seconds"] + sum(spent)


def test_a_refused_compaction_tries_only_the_largest_b():
    """When the largest B does not match the full model, no smaller one is
    tried: a refusal costs one try."""
    k = Kernel("rbf", gamma=1.0)
    m = _machine()
    Xf, Xv, yv, _ = _noisy_labels(m, k)
    c, rec = compress.compact_machine(m, k, Xf, Xv, yv,
                                      options=OPTS.but(compact_sizes=(2, 3, 4)))
    assert c is None and [t["B"] for t in rec["tried"]] == [4]
    t = rec["tried"][0]
    assert not t["passed"] and t["broken"] - t["fixed"] > rec["tolerance_rows"]
    assert "the largest B, 4, did not match" in rec["decision"]


def test_the_fit_rows_grow_with_b():
    """At least 2 B rows fit B + 1 coefficients (fewer would leave the least
    squares nearly exact on its rows and loose elsewhere)."""
    k = Kernel("rbf", gamma=1.0)
    m = _machine()
    Xf, Xv, yv, _ = _noisy_labels(m, k)
    _, rec = compress.compact_machine(m, k, Xf, Xv, yv, options=OPTS.but(
        compact_sizes=(64, 512), compact_fit_rows=100, compact_pays=2.0))
    assert [(t["B"], t["fit_rows"]) for t in rec["tried"]][:2] == [(512, 1024), (64, 128)]


def test_compact_machine_declines_where_it_does_not_pay():
    k = Kernel("rbf", gamma=1.0)
    m = _machine(n_sv=500)
    X = np.zeros((10, 2), np.float32)
    c, rec = compress.compact_machine(m, k, X, X, np.ones(10),
                                      options=OPTS.but(compact_sizes=(256,)))
    assert c is None and "too few to pay" in rec["decision"]


def test_compact_machine_regression_keeps_the_rmse():
    k = Kernel("rbf", gamma=1.0)
    m = _machine(regression=True)
    rng = np.random.default_rng(2)
    Xf = rng.uniform(-2, 2, size=(4000, 2)).astype(np.float32)
    Xv = rng.uniform(-2, 2, size=(2000, 2)).astype(np.float32)
    yv = m.decision(k, Xv) + rng.normal(scale=0.05, size=2000)
    c, rec = compress.compact_machine(m, k, Xf, Xv, yv, regression=True,
                                      options=OPTS.but(compact_sizes=(16, 128, 512)))
    assert c is not None and rec["B"] == len(c.coef) < 512
    kept = [t for t in rec["tried"] if t["B"] == rec["B"]][0]
    assert kept["passed"] and kept["rmse"] <= rec["full_rmse"] * (1 + OPTS.compact_rmse_tol)
    assert all(t["passed"] == (t["rmse"] <= rec["full_rmse"] * (1 + OPTS.compact_rmse_tol))
               for t in rec["tried"])


def test_a_progressive_fit_records_its_compact_choice(tmp_path):
    """train_size below the rows: a progressive fit; its machine gets the
    compact record (kept or not), chosen on its validation rows."""
    from streamcvm import CVMClassifier
    from streamcvm.data import synthetic
    s = synthetic.write_store(tmp_path / "g.zarr", "gaussian", 8000, seed=0)
    est = CVMClassifier(train_size=6000, eps=1e-3).fit(s)
    m = est.machines_[0]
    info = m.compact_info
    assert info is not None and info["support_vectors"] == len(m.coef)
    assert info["validation_rows"] >= 1000
    if m.compact is None:
        assert info["decision"].startswith(("kept the full", f"{len(m.coef):,} support"))
    est2 = CVMClassifier(train_size=6000, eps=1e-3, compact=False).fit(s)
    assert est2.machines_[0].compact_info is None
    assert np.array_equal(est2.machines_[0].coef, m.coef)      # the same fit otherwise


def test_predict_uses_the_compact_expansion_unless_exact(tmp_path):
    """The estimator's plumbing: a compact expansion attached to a fitted
    machine is what predict uses; compact=False (predict --exact) the full
    one; both survive save / load; info says which."""
    from conftest import inproc
    from streamcvm import CVMClassifier, open_store
    from streamcvm.data import synthetic
    from streamcvm.estimators.model import load_model, save_model
    s = synthetic.write_store(tmp_path / "g.zarr", "gaussian", 3000, seed=0)
    est = CVMClassifier(eps=1e-3).fit(s)
    m = est.machines_[0]
    import dataclasses
    X = open_store(s).rows(0, 3000).X
    Z = compress.kmeans_centres(m.sv, 64, weights=np.abs(m.coef))
    beta, b = compress.fit_values(est.kernel_, Z, X, m.decision(est.kernel_, X))
    c = dataclasses.replace(m, sv=Z, coef=beta, intercept=b, sv_ids=-1 - np.arange(64),
                            sv_sq=None)
    m.compact, m.compact_info = c, {"B": 64, "support_vectors": len(m.coef),
                                   "validation_rows": 1500, "decision": "B = 64: test",
                                   "seconds": 1.5}
    est._set_machines(est.machines_)
    full = m.decision(est.kernel_, X)
    small = c.decision(est.kernel_, X)
    assert not np.allclose(full, small)
    assert np.allclose(est.decision_function(X), small)
    est.set_params(compact=False)
    assert np.allclose(est.decision_function(X), full)
    est.set_params(compact="auto")
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert np.allclose(back.decision_function(X), small)
    assert back.machines_[0].compact_info["B"] == 64
    r = inproc("info", tmp_path / "m")
    assert r.returncode == 0 and "compact    1 of 1 machine(s) predict with B = 64" in r.stdout
    assert "(1,500 validation rows; the tries took 1.5 s of the fit's " in r.stdout
    out = {}
    for flags in ((), ("--exact",)):
        p = tmp_path / f"p{len(flags)}.txt"
        r = inproc("predict", s, tmp_path / "m", "-o", p, *flags)
        assert r.returncode == 0, r.stderr
        out[flags] = np.loadtxt(p)
    labels = lambda f: np.where(f > 0, est.classes_[1], est.classes_[0])
    assert np.array_equal(out[()], labels(small)) and np.array_equal(out[("--exact",)],
                                                                      labels(full))


def test_no_compact_is_refused_where_nothing_is_compressed(tmp_path):
    from conftest import inproc, one_line_error
    from streamcvm.data import synthetic
    s = synthetic.write_store(tmp_path / "g.zarr", "gaussian", 500, seed=0)
    r = inproc("train", s, "-o", tmp_path / "m", "--task", "one-class", "--no-compact", "-q")
    one_line_error(r, "train", "--no-compact is for classification and regression")
    with pytest.raises(ValueError, match="compact must be"):
        from streamcvm import CVMClassifier
        CVMClassifier(compact="yes").fit(np.zeros((10, 2)), np.arange(10) % 2)


# fits without held-out rows: one shared basis, B by agreement with the full model

def _mixture(n, k, seed=0):
    """Overlapping Gaussian classes: most rows become support vectors."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    return (rng.normal(size=(n, 5)) + 0.8 * np.eye(5)[y]).astype(np.float32), y


def test_compact_shared_keeps_the_first_b_that_agrees():
    """The rule on its own: the first B whose labels equal the full model's
    on ``agree`` of the check rows; an unreachable ``agree`` keeps the full
    expansion, and too few support rows never ask for the sample."""
    from streamcvm import CVMClassifier
    X, y = _mixture(6000, 2)
    est = CVMClassifier(compact=False).fit(X, y)
    m = est.machines_[0]
    k = est.kernel_
    Xf, Xc = X[:3000], X[3000:]
    full = m.decision(k, Xc) > 0
    labels = lambda F: F[:, 0] > 0          # noqa: E731

    def sample(agree=OPTS.compact_agree):
        return Xf, m.decision(k, Xf)[:, None], Xc, compress.agreeing_labels(labels, full, agree)
    key = np.zeros(len(m.coef))
    got, rec = compress.compact_shared(m.sv, np.abs(m.coef), key, k, sample, options=OPTS)
    assert got is not None and rec["B"] == rec["tried"][-1]["B"]
    assert all(t["agree"] < OPTS.compact_agree for t in rec["tried"][:-1])
    Z, Beta, b = got
    agree = np.mean(labels(compress.decisions(k, Z, Beta, b, Xc)) == full)
    assert rec["tried"][-1]["agree"] == agree >= OPTS.compact_agree
    got, rec = compress.compact_shared(m.sv, np.abs(m.coef), key, k, lambda: sample(1.01),
                                       options=OPTS)
    assert got is None and rec["decision"].startswith("kept the full expansion")
    assert len(rec["tried"]) == len([B for B in OPTS.compact_sizes
                                     if len(m.coef) > OPTS.compact_pays * B])

    def never():
        raise AssertionError("sampled although no B pays")
    got, rec = compress.compact_shared(m.sv[:1000], np.abs(m.coef[:1000]), key[:1000], k,
                                       never, options=OPTS)
    assert got is None and "too few to pay" in rec["decision"]


def test_close_values_is_the_worst_columns_r2():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(500, 3))
    E = np.zeros_like(F)
    E[:, 1] = 0.05 * rng.normal(size=500)           # one column off by 5% of its sd
    ok, t = compress.close_values(F, OPTS.compact_r2_min)(F + E)
    r2 = 1 - (E[:, 1] ** 2).sum() / ((F[:, 1] - F[:, 1].mean()) ** 2).sum()
    assert not ok and np.isclose(t["r2_min"], r2) and r2 < OPTS.compact_r2_min
    ok, t = compress.close_values(F, OPTS.compact_r2_min)(F + E / 10)
    assert ok and t["r2_min"] >= OPTS.compact_r2_min


def test_a_fit_on_every_row_gets_a_compact_expansion(tmp_path):
    """A two-class fit on 6,000 rows (no held-out rows): predict uses the
    compact expansion, recorded with its check; it agrees with the full one
    on fresh rows; save / load keeps it; info says so."""
    from conftest import inproc
    from streamcvm import CVMClassifier
    from streamcvm.estimators.model import load_model, save_model
    X, y = _mixture(6000, 2)
    T, _ = _mixture(4000, 2, seed=1)
    est = CVMClassifier().fit(X, y)
    m = est.machines_[0]
    info = m.compact_info
    assert m.compact is not None and info["B"] == len(m.compact.coef) < len(m.coef) / 4
    assert info["check_rows"] >= 2900 and info["tried"][-1]["agree"] >= OPTS.compact_agree
    k = est.kernel_
    assert np.allclose(est.decision_function(T), m.compact.decision(k, T))
    exact = m.decision(k, T)
    assert not np.allclose(est.decision_function(T), exact)
    assert np.mean((est.decision_function(T) > 0) == (exact > 0)) >= 0.995
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert np.array_equal(back.predict(T), est.predict(T))
    assert np.array_equal(back.set_params(compact=False).predict(T),
                          est.set_params(compact=False).predict(T))
    r = inproc("info", tmp_path / "m")
    assert r.returncode == 0
    assert f"predict with one basis of B = {info['B']:,} points" in r.stdout
    assert "training rows" in r.stdout


def test_one_vs_one_machines_share_one_basis(tmp_path):
    """Three classes: the three machines' compact expansions are one basis
    (predict evaluates B kernel values a row, not the union's), written
    once in the model folder; a manifest that points a machine at a basis
    that is not there is refused."""
    import json
    from streamcvm import CVMClassifier
    from streamcvm.estimators.model import (DIGEST_KEY, ModelError, load_model, manifest_digest,
        save_model)
    X, y = _mixture(6000, 3)
    T, _ = _mixture(3000, 3, seed=1)
    est = CVMClassifier().fit(X, y)
    cs = [m.compact for m in est.machines_]
    assert all(c is not None and c.sv is cs[0].sv for c in cs)
    B = len(cs[0].coef)
    (U, _, _, groups), _ = est._union()
    assert U.shape[0] == B and B < len(est._union(True)[0][0]) / 4
    full = est.set_params(compact=False).predict(T)
    small = est.set_params(compact="auto").predict(T)
    assert np.mean(full == small) >= 0.99
    save_model(est, tmp_path / "m")
    files = {p.name for p in (tmp_path / "m").iterdir()}
    assert "m0_compact_sv.npy" in files and "m1_compact_sv.npy" not in files
    back = load_model(tmp_path / "m")
    assert np.array_equal(back.predict(T), small)
    assert back.machines_[2].compact.sv is back.machines_[0].compact.sv
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["machines"][1]["compact"]["basis_of"] == 0
    meta["machines"][1]["compact"]["basis_of"] = 2
    meta.pop(DIGEST_KEY)
    meta[DIGEST_KEY] = manifest_digest(meta)
    (tmp_path / "m" / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="compact basis is that of machine 2"):
        load_model(tmp_path / "m")


def test_ovo_votes_match_the_pairwise_loop():
    from streamcvm.predict.decision import ovo_votes
    rng = np.random.default_rng(0)
    for k in (2, 3, 7):
        F = rng.normal(size=(50, k * (k - 1) // 2))
        F[0] = 0.0
        votes, conf, col = np.zeros((50, k)), np.zeros((50, k)), 0
        for i in range(k):
            for j in range(i + 1, k):
                votes[:, j] += F[:, col] > 0
                votes[:, i] += F[:, col] <= 0
                conf[:, j] += F[:, col]
                conf[:, i] -= F[:, col]
                col += 1
        assert np.allclose(ovo_votes(F, k), votes + conf / (3 * (np.abs(conf) + 1)))


def test_mmda_features_by_one_compact_basis(tmp_path):
    """MMDA: the compact basis is kept only when every feature keeps its R^2
    (here a looser one, so that 6,000 rows have a basis to keep); transform
    then uses it, compact=False the full expansions; save / load keeps both;
    the CLI's --exact writes the full features."""
    from conftest import inproc
    from streamcvm import MMDATransformer, as_store
    from streamcvm.estimators.model import load_model, save_model
    X, y = _mixture(6000, 3)
    T, _ = _mixture(2000, 3, seed=1)
    strict = MMDATransformer(n_components=2).fit(X, y)
    info = strict.machines_[0].compact_info
    assert strict._compact_basis is None and info["decision"].startswith("kept the full")
    assert info["tried"][0]["r2_min"] < OPTS.compact_r2_min
    est = MMDATransformer(n_components=2, options={"compact_r2_min": 0.95}).fit(X, y)
    Z, Beta, b, _ = est._compact_basis
    info = est.machines_[0].compact_info
    assert len(Z) == info["B"] < est.expansion_rows_ / 4 and info["tried"][-1]["r2_min"] >= 0.95
    full = strict.transform(T)
    assert np.allclose(est.set_params(compact=False).transform(T), full)
    small = est.set_params(compact="auto").transform(T)
    assert np.allclose(small, compress.decisions(est.kernel_, Z, Beta, b, T))
    r2 = 1 - ((small - full) ** 2).sum(0) / ((full - full.mean(0)) ** 2).sum(0)
    assert r2.min() > 0.9 and not np.allclose(small, full)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert np.allclose(back.transform(T), small)
    r = inproc("info", tmp_path / "m")
    assert r.returncode == 0 and "features are computed with one basis" in r.stdout
    from streamcvm.ingest import StoreWriter
    with StoreWriter(tmp_path / "t.zarr", 5) as w:
        w.append(T, np.zeros(len(T)))
        w.close()
    out = {}
    for flags in ((), ("--exact",)):
        p = tmp_path / f"f{len(flags)}.zarr"
        r = inproc("features", tmp_path / "t.zarr", "--model", tmp_path / "m", "-o", p, "-q",
                   *flags)
        assert r.returncode == 0, r.stderr
        out[flags] = as_store(str(p)).rows(0, len(T)).X
    assert np.allclose(out[()], small, atol=1e-5) and np.allclose(out[("--exact",)], full,
                                                                   atol=1e-5)


def test_sample_rows_of_a_store_of_many_chunks_reads_a_few(monkeypatch):
    """The compaction's fit and check rows: disjoint and of the asked sizes,
    and from a store of more than ``max_chunks`` chunks read from that many
    chunks only (a fit that only samples, MMDA, would otherwise pay a pass:
    13.1 s against 9.4 s on 20M rows); up to it, from every chunk as before."""
    from streamcvm import as_store
    X = np.arange(30_000 * 2, dtype=np.float32).reshape(30_000, 2)   # every row distinct
    store = as_store(X, np.arange(30_000) % 2, chunk_rows=1000)         # 30 chunks
    read = []
    real = type(store).chunk
    monkeypatch.setattr(type(store), "chunk", lambda self, i: read.append(i) or real(self, i))
    for max_chunks in (20, 30):
        read.clear()
        Xf, Xc = compress.sample_rows(store, OPTS.but(compact_sample_chunks=max_chunks), seed=3)
        assert len(set(read)) == max_chunks
        if max_chunks < 30:             # (by the row keys, about as many)
            assert len(Xc) == OPTS.compact_check_rows and len(Xf) == OPTS.compact_fit_rows
        assert len(np.unique(np.concatenate([Xf, Xc])[:, 0])) == len(Xf) + len(Xc)
    assert set(Xf[:, 0]).isdisjoint(Xc[:, 0])


def test_paired_labels_accepts_equal_errors_where_labels_differ():
    """The many-machine rule: labels equal to the full model's on the
    ``agree`` share, or, where they differ (near-tied classes), errors on
    the check rows within ``tol`` points of the full model's; more errors
    than that are refused, and the record counts fixed and broken rows."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 10_000)
    full = np.where(rng.random(10_000) < 0.8, y, (y + 1) % 4)     # 80% right
    labels = lambda F: F                                           # noqa: E731
    accept = compress.paired_labels(labels, full, y, 0.999, 0.02)
    assert accept(full.copy())[0]
    swap = full.copy()                       # 200 rows fixed, 200 broken: 96% agree
    wrong, right = np.flatnonzero(full != y)[:200], np.flatnonzero(full == y)[:200]
    swap[wrong], swap[right] = y[wrong], (y[right] + 1) % 4
    ok, t = accept(swap)
    assert ok and t["agree"] == 0.96 and t["fixed"] == t["broken"] == 200
    assert not compress.agreeing_labels(labels, full, 0.999)(swap)[0]
    extra = np.flatnonzero((full == y) & (swap == y))[:3]     # 3 more broken: 0.03 points
    worse = swap.copy()
    worse[extra] = (y[extra] + 1) % 4
    ok, t = accept(worse)
    assert not ok and t["broken"] - t["fixed"] == 3 > 0.02 / 100 * len(y)


def test_compact_shared_largest_first_halves_while_it_passes():
    """``largest_first``: the largest B that pays first; while B passes, its
    half, and the smallest that passed is kept; a refused largest B is the
    only try."""
    from streamcvm import CVMClassifier
    X, y = _mixture(6000, 2)
    est = CVMClassifier(compact=False).fit(X, y)
    m, k = est.machines_[0], est.kernel_
    Xf, Xc = X[:3000], X[3000:]
    opts = OPTS.but(compact_sizes=(64, 128, 256, 512))
    key = np.zeros(len(m.coef))

    def sample(pass_from):
        def accept(Fc):
            return Fc.shape[0] == len(Xc) and seen[-1] >= pass_from, {}
        accept.rule, accept.says = "test", lambda t, n: f"B {t['B']}"
        return Xf, m.decision(k, Xf)[:, None], Xc, accept
    seen = []
    real = compress.class_centres

    def centres(S, w, key, B, *args, **kw):
        seen.append(B)
        return real(S, w, key, B, *args, **kw)
    compress.class_centres = centres
    try:
        got, rec = compress.compact_shared(m.sv, np.abs(m.coef), key, k, lambda: sample(128),
                                           options=opts, largest_first=True)
        assert [t["B"] for t in rec["tried"]] == [512, 256, 128, 64] == seen
        assert got is not None and rec["B"] == 128 == len(got[0])
        seen.clear()
        got, rec = compress.compact_shared(m.sv, np.abs(m.coef), key, k, lambda: sample(10 ** 6),
                                           options=opts, largest_first=True)
        assert got is None and seen == [512] and "smaller B not tried" in rec["decision"]
    finally:
        compress.class_centres = real


def test_progressive_multi_class_machines_share_one_basis(tmp_path):
    """Three classes whose machines train progressively: no machine compacts
    itself on its own validation rows; the model gets one basis for all of
    them (or a record of why not) by the many-machine rule; ``info`` says
    which route each machine took."""
    from streamcvm import CVMClassifier
    from streamcvm.data import synthetic
    s = synthetic.write_store(tmp_path / "g.zarr", "gaussian", 9000, seed=0, n_classes=3)
    est = CVMClassifier(train_size=4000, eps=1e-3).fit(s)
    infos = [m.compact_info for m in est.machines_]
    assert all(i is not None and "validation_rows" not in i for i in infos)
    assert all(any("stage_rows" in h for h in m.history) for m in est.machines_)
    largest = max(B for B in OPTS.compact_sizes
                  if infos[0]["support_vectors"] > OPTS.compact_pays * B)
    tried = [t["B"] for t in infos[0]["tried"]]
    # the largest B first (B centres split over the classes: a few fewer), then halves
    assert "paired" in infos[0]["rule"] and largest // 2 < tried[0] <= largest
    assert tried == sorted(tried, reverse=True)
    cs = [m.compact for m in est.machines_]
    assert all(c is None for c in cs) or all(c is not None and c.sv is cs[0].sv for c in cs)
    # the model records each machine's route; info counts them
    from streamcvm.cli.info import describe_model
    from streamcvm.estimators.model import save_model
    save_model(est, tmp_path / "m")
    assert "routes     3 machines: 3 progressive" in describe_model(str(tmp_path / "m"))
