"""Faults that used to end in a traceback where one line is promised: the
ranking solver given no preference pair, from arrays, a store and the
command line."""
import numpy as np
import pytest

import streamcvm
from streamcvm import CVMRanker


def _flat(n=200):
    X = np.random.default_rng(0).random((n, 3)).astype(np.float32)
    return X, np.ones(n), np.repeat(np.arange(n // 10), 10)


def test_ranking_store_without_pairs_is_refused_in_one_line():
    X, y, q = _flat()
    with pytest.raises(ValueError, match="no training points: 256 samples drew none"):
        CVMRanker().fit(streamcvm.as_store(X, y, qid=q, chunk_rows=50))


def test_ranking_store_whose_pairs_are_in_one_chunk_trains():
    """The first draws may come from chunks without a pair: the solver keeps
    drawing (the pool moves on to other chunks) instead of refusing."""
    X, y, q = _flat(2000)
    y[-10:] = np.arange(10)                     # one query of the last chunk ranks
    m = CVMRanker().fit(streamcvm.as_store(X, y, qid=q, chunk_rows=100))
    assert m.machine_.coef.size > 0


def test_cli_ranking_without_pairs(tmp_path, cli):
    from sklearn.datasets import dump_svmlight_file
    X, y, q = _flat()
    dump_svmlight_file(X, y, str(tmp_path / "r.svm"), query_id=q, zero_based=False)
    assert cli("ingest", tmp_path / "r.svm", "-o", tmp_path / "r.zarr", "-q").returncode == 0
    r = cli("train", tmp_path / "r.zarr", "-o", tmp_path / "m", "--task", "ranking", "-q")
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "no training points" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m").exists()


def test_a_nan_query_id_is_refused_not_cast():
    """NaN cast to int64 is a garbage id (-2**63, with only a warning)."""
    X, y, q = _flat()
    y[:5] = np.arange(5)
    q = q.astype(float)
    q[3] = np.nan
    with pytest.raises(ValueError, match=r"qid must hold integer query ids: row 3 .* nan"):
        CVMRanker().fit(X, y, q)
    with pytest.raises(ValueError, match="qid must hold integer query ids"):
        streamcvm.as_store(X, y, qid=np.r_[q[:3], 0.5, q[4:]])
