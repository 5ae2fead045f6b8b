"""CVMRanker and the ranking metrics (the pair QP itself: test_ccmeb)."""
import numpy as np
import pytest

import streamcvm
from streamcvm import CVMRanker
from streamcvm.predict.metrics import ndcg_at_k, pairwise_accuracy
from streamcvm.estimators.model import load_model, save_model


def test_metrics_by_hand():
    y = np.array([2, 1, 0, 1, 0])
    q = np.array([7, 7, 7, 9, 9])
    s = np.array([0.1, 0.9, 0.0, 0.5, 0.5])       # query 7: one inversion; 9: a tie
    # query 7: pairs (2>1, 2>0, 1>0): 2 right of 3; query 9: (1>0) tied: wrong
    assert pairwise_accuracy(y, s, q) == pytest.approx(2 / 4)
    d = 1 / np.log2(np.arange(2, 5))
    n7 = ((2 ** 1 - 1) * d[0] + (2 ** 2 - 1) * d[1]) / ((2 ** 2 - 1) * d[0] + (2 ** 1 - 1) * d[1])
    n9 = 1.0                                      # a tie keeps input order: relevant first
    assert ndcg_at_k(y, s, q, k=10) == pytest.approx((n7 + n9) / 2)
    assert ndcg_at_k(y, y, q) == 1.0 and pairwise_accuracy(y, y, q) == 1.0


def _queries(nq=40, per=15, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((nq * per, d)).astype(np.float32)
    score = np.sin(X[:, 0]) + X[:, 1] ** 2 / 2 + 0.3 * rng.standard_normal(len(X))
    y = np.digitize(score, [0.0, 0.8, 1.6]).astype(float)
    return X, y, np.repeat(np.arange(nq), per)


def test_ranker_learns_the_order_and_roundtrips(tmp_path):
    X, y, q = _queries()
    Xt, yt, qt = _queries(seed=1)
    r = CVMRanker(C=1.0, eps=1e-4).fit(X, y, q)
    s = r.predict(Xt)
    assert pairwise_accuracy(yt, s, qt) > 0.8         # random scores give 0.5
    assert r.score(Xt, yt, qt) > ndcg_at_k(yt, np.zeros(len(yt)) + np.arange(len(yt)) % 3, qt)
    back = load_model(save_model(r, tmp_path / "rk"))
    np.testing.assert_array_equal(back.predict(Xt), s)
    # from a store with a qid column
    st = streamcvm.as_store(X, y, qid=q, chunk_rows=150)
    r2 = CVMRanker(C=1.0, eps=1e-4).fit(st)
    assert pairwise_accuracy(yt, r2.predict(Xt), qt) > 0.8


def test_ranker_refuses_what_it_cannot_do():
    X, y, q = _queries(nq=4)
    with pytest.raises(ValueError, match="requires y to be passed"):
        CVMRanker().fit(X, None, q)
    with pytest.raises(ValueError, match="use method='cvm' or 'fvm'"):
        CVMRanker(method="bvm").fit(X, y, q)
    with pytest.raises(ValueError, match="no qid column"):
        CVMRanker().fit(streamcvm.as_store(X, y))


def test_streamed_ranking_totals_equal_the_batch_metrics():
    from streamcvm.predict.metrics import RankingTotals
    X, y, q = _queries(nq=12, per=9)
    s = np.random.default_rng(3).standard_normal(len(y))
    tot = RankingTotals(k=10)
    for a in range(0, len(y), 25):          # chunks that cut queries in two
        tot.add(y[a:a + 25], s[a:a + 25], q[a:a + 25])
    ndcg, acc, nq, _ = tot.result()
    assert ndcg == pytest.approx(ndcg_at_k(y, s, q)) and acc == pytest.approx(
        pairwise_accuracy(y, s, q)) and nq == 12


def test_cli_ranking_train_evaluate(tmp_path, cli):
    from sklearn.datasets import dump_svmlight_file
    X, y, q = _queries()
    Xt, yt, qt = _queries(seed=1)
    dump_svmlight_file(X, y, str(tmp_path / "tr.svm"), query_id=q, zero_based=False)
    dump_svmlight_file(Xt, yt, str(tmp_path / "te.svm"), query_id=qt, zero_based=False)
    for name in ("tr", "te"):
        r = cli("ingest", str(tmp_path / f"{name}.svm"), "-o", str(tmp_path / f"{name}.zarr"),
                "--chunk-rows", "100", "-q")
        assert r.returncode == 0, r.stderr
    model = str(tmp_path / "rk")
    r = cli("train", str(tmp_path / "tr.zarr"), "-o", model, "--task", "ranking", "-q")
    assert r.returncode == 0, r.stderr
    r = cli("evaluate", str(tmp_path / "te.zarr"), model)
    assert r.returncode == 0, r.stderr
    got = {ln.split()[0]: float(ln.split()[1]) for ln in r.stdout.splitlines()[1:]}
    est = load_model(model)
    s = est.predict(Xt)
    assert got["NDCG@10"] == pytest.approx(ndcg_at_k(yt, s, qt), rel=1e-5)
    assert got["pairwise"] == pytest.approx(pairwise_accuracy(yt, s, qt), rel=1e-5)
    assert got["pairwise"] > 0.8
