"""probability=True: Platt's sigmoid on held-out rows,
pairwise coupling, saved with the model, the CLI's -b 1."""
import numpy as np
import pytest
from sklearn.datasets import make_blobs

import streamcvm
from streamcvm import CVMClassifier
from streamcvm.predict.probability import (HoldoutStore, holdout_fraction, pairwise_coupling,
    platt_fit, platt_predict)


def test_platt_recovers_a_known_sigmoid():
    rng = np.random.default_rng(0)
    f = rng.normal(0, 2, 20000)
    p_true = 1.0 / (1.0 + np.exp(-1.5 * f + 0.4))          # A = -1.5, B = 0.4
    y = rng.random(len(f)) < p_true
    A, B = platt_fit(f, y)
    assert A == pytest.approx(-1.5, abs=0.08) and B == pytest.approx(0.4, abs=0.08)
    p = platt_predict(np.array([-1e4, 0.0, 1e4]), A, B)     # no overflow at the ends
    assert p[0] < 1e-6 and p[2] > 1 - 1e-6 and 0 < p[1] < 1


def test_pairwise_coupling_recovers_consistent_probabilities():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=50)
    r = p[:, :, None] / (p[:, :, None] + p[:, None, :])     # r_ij = p_i / (p_i + p_j)
    got = pairwise_coupling(r)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(got, p, atol=2e-3)


def test_held_out_rows_are_never_trained_on():
    """Above the option probability_cv_rows rows the sigmoid's rows are held
    out from training."""
    from streamcvm.options import Options
    X, y = make_blobs(n_samples=6000, centers=2, cluster_std=3.0, random_state=0)
    store = streamcvm.as_store(X.astype(np.float32), y.astype(float), chunk_rows=1000)
    frac = holdout_fraction(store.n, Options())
    hs = HoldoutStore(store, 0, 0.0, frac)
    Xh, yh = hs.held_out()
    assert 900 < len(yh) < 1100                              # 1,000 of 6,000 expected
    clf = CVMClassifier(probability=True, eps=1e-2,
                        options={"probability_cv_rows": 1000}).fit(store)
    held = np.concatenate([np.isnan(hs.chunk(i).y) for i in range(hs.n_chunks)])
    ids = clf.machines_[0].sv_ids
    assert not held[ids].any()                               # no support vector held out
    assert clf.n_probability_rows_ == len(yh)
    assert hs.class_counts.sum() == store.n - len(yh)


def test_small_data_cross_validates_the_sigmoids_and_keeps_the_plain_model():
    """Up to CV_MAX_ROWS rows, as LIBSVM: the model is the one of every row,
    the sigmoids are fitted on every row's out-of-fold decision value."""
    X, y = make_blobs(n_samples=3000, centers=2, cluster_std=3.0, random_state=0)
    plain = CVMClassifier().fit(X, y)
    prob = CVMClassifier(probability=True).fit(X, y)
    np.testing.assert_array_equal(plain.machines_[0].sv_ids, prob.machines_[0].sv_ids)
    np.testing.assert_array_equal(plain.machines_[0].coef, prob.machines_[0].coef)
    assert prob.n_probability_rows_ == 3000 and prob.probA_[0] < 0


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_predict_proba_is_calibrated_and_agrees_with_predict(multi_class, tmp_path):
    Xa, ya = make_blobs(n_samples=9000, centers=[[0, 0], [2, 0], [0, 2]], cluster_std=1.2,
                        random_state=3)
    X, y, Xt, yt = Xa[:6000], ya[:6000], Xa[6000:], ya[6000:]
    clf = CVMClassifier(probability=True, multi_class=multi_class).fit(X, y)
    P = clf.predict_proba(Xt)
    assert P.shape == (3000, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
    assert np.mean(clf.classes_[P.argmax(axis=1)] == clf.predict(Xt)) > 0.95
    # calibrated: the Brier score is near that of the true posterior of the blobs
    from scipy.stats import multivariate_normal
    dens = np.column_stack([multivariate_normal(c, 1.44).pdf(Xt)
                            for c in [[0, 0], [2, 0], [0, 2]]])
    post = dens / dens.sum(axis=1, keepdims=True)
    onehot = np.eye(3)[yt]
    brier, best = np.mean(((P - onehot) ** 2).sum(1)), np.mean(((post - onehot) ** 2).sum(1))
    assert brier < best + 0.03, (brier, best)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(Xt[:5])), P[:5])
    back = streamcvm.load_model(streamcvm.save_model(clf, tmp_path / "m"))
    np.testing.assert_allclose(back.predict_proba(Xt), P, rtol=1e-12)


def test_predict_proba_needs_probability_true():
    X, y = make_blobs(n_samples=300, centers=2, random_state=0)
    clf = CVMClassifier(eps=1e-2).fit(X, y)
    assert not hasattr(clf, "predict_proba")
    with pytest.raises(AttributeError):
        clf.predict_proba(X)


def test_cli_b1_train_and_predict(tmp_path, capsys):
    from streamcvm.cli import main
    from streamcvm.data import synthetic
    st = str(tmp_path / "g.zarr")
    synthetic.write_store(st, "gaussian", 5000, seed=0, chunk_rows=1000)
    m = str(tmp_path / "m")
    assert main(["train", st, "-o", m, "-b", "1", "-q", "-e", "1e-2"]) == 0
    out = str(tmp_path / "p.txt")
    assert main(["predict", st, m, "-o", out, "-b", "1"]) == 0
    lines = open(out).read().splitlines()
    clf = streamcvm.load_model(m)
    assert lines[0] == "labels " + " ".join(str(int(c)) for c in clf.classes_)
    first = lines[1].split()
    P = clf.predict_proba(streamcvm.open_store(st).rows(0, 1).X)
    assert float(first[1]) == pytest.approx(P[0, 0], rel=1e-5) and len(lines) == 5001
    m2 = str(tmp_path / "m2")
    assert main(["train", st, "-o", m2, "-q", "-e", "1e-2"]) == 0
    with pytest.raises(SystemExit, match="-b 1 needs a classifier trained with -b 1"):
        main(["predict", st, m2, "-o", str(tmp_path / "q.txt"), "-b", "1"])
    with pytest.raises(SystemExit, match="for classification"):
        main(["train", st, "-o", str(tmp_path / "r"), "--task", "regression", "-b", "1"])


def test_a_pair_whose_held_out_rows_hold_one_side_gets_the_smoothed_prior():
    """A rare class can leave a machine's held-out rows one-sided (kddcup99's
    23 classes with -b 1): that machine's sigmoid is Platt's smoothed prior,
    (n + 1) / (n + 2) for the side seen and 1/2 with no row, with a warning,
    and the other machines are fitted as ever."""
    from streamcvm.predict.probability import fit_sigmoids, platt_predict
    rng = np.random.default_rng(0)
    f = rng.normal(size=60)
    y = np.r_[np.zeros(40), np.ones(20)]            # no row of class 2, 3 or 4
    F = np.c_[f, f, f]
    subs = [(0.0, 1.0), (0.0, 2.0), (3.0, 4.0)]     # (0, 2): class 0 only; (3, 4): none
    with pytest.warns(UserWarning, match="machine 2 of 3 hold rows of one side only"):
        A, B = fit_sigmoids(F, y, subs)
    assert A[1] == 0.0 and platt_predict([0.0], A[1], B[1])[0] == pytest.approx(1 / 42)
    assert A[2] == 0.0 and platt_predict([0.0], A[2], B[2])[0] == pytest.approx(0.5)
    assert A[0] != 0.0
