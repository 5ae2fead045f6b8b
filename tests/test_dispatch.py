"""The exact / sampled choice (streamcvm.problems.dispatch): the cost model
and that run_solver follows it and records it."""
import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier
from streamcvm.options import Options
from streamcvm.problems.dispatch import StepCosts


def test_step_costs():
    c = StepCosts(rows=200_000, values=22.0)
    # sampled steps grow with the core set, exact ones with the rows
    assert c.sampled(2000) > c.sampled(1000) > c.sampled(0) == Options().dispatch_sampled_fixed_s
    assert StepCosts(400_000, 22.0).exact() == pytest.approx(2 * c.exact())
    # the hand-over point: the first core-set size at which exact is the cheaper
    k = c.first_core()
    assert k > 0 and c.exact_cheaper(k) and not c.exact_cheaper(k - 1)
    # at 22 features and many rows it is about m / 100, the fixed rule
    # measured on the mixture (earlier on fewer rows: the sampled fixed cost)
    assert 2e6 / 130 < StepCosts(2_000_000, 22.0).first_core() < 2e6 / 80
    assert k < 200_000 / 100
    # few rows: exact from the start; many features cost both paths alike
    assert StepCosts(16384, 22.0).first_core() == 0
    assert StepCosts(16384, 22.0).exact_cheaper(0)
    assert StepCosts(2_000_000, 256.0).first_core() == pytest.approx(2e6 / 100, rel=0.2)
    rec = c.record("sampled", 10)
    assert rec["path"] == "sampled" and rec["core_size"] == 10
    assert rec["sampled_step_s"] == pytest.approx(c.sampled(10))
    assert rec["exact_step_s"] == pytest.approx(c.exact())


def _rows(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def test_small_problem_runs_exact_and_records_it():
    X, y = _rows(8000, 4)
    m = CVMClassifier(eps=1e-3, method="bvm", C=1.0, gamma=0.25).fit(
        streamcvm.as_store(X, y))                                   # one chunk: pooled
    rec = [h["dispatch"] for h in m.history_ if "dispatch" in h]
    assert len(rec) == 1 and rec[0]["path"] == "exact" and rec[0]["core_size"] == 0
    assert rec[0]["exact_step_s"] == pytest.approx(StepCosts.of(X, 59, Options()).exact())
    assert m.history_[-1].get("exact")


def test_sampled_start_hands_over_where_the_model_says():
    """A problem that starts sampled hands over to the exact pass at the
    first core-set size the model prices an exact step cheaper (here, with
    no fixed sampled cost, about rows / 105 at 4 features)."""
    from streamcvm.problems.classification import _fit
    from streamcvm.problems.driver import Solve
    from streamcvm.options import Options
    from streamcvm.solvers.kernels import Kernel
    free = Options(dispatch_sampled_fixed_s=0.0)
    X, y = _rows(20000, 4, seed=1)
    store = streamcvm.as_store(X, y)
    k = StepCosts.of(X, 59, free).first_core()
    assert 100 < k < 300
    m, solver = _fit(store, Kernel("rbf", gamma=0.5), (-1.0, 1.0),
                     Solve(method="bvm", eps=1e-3, options=free), C=1.0, class_weight=None,
                     sample_weight=False, exact_start=False)
    rec = [h["dispatch"] for h in solver.history if "dispatch" in h]
    assert len(rec) == 1 and rec[0]["path"] == "sampled, then exact"
    assert rec[0]["core_size"] == k          # one vector enters per step
    assert solver.history[-1].get("exact")
    # the same problem with a fixed cost large enough: exact from the start
    _, solver = _fit(store, Kernel("rbf", gamma=0.5), (-1.0, 1.0),
                     Solve(method="bvm", eps=1e-3, options=Options(dispatch_sampled_fixed_s=1.0)),
                     C=1.0, class_weight=None, sample_weight=False, exact_start=True)
    assert [h["dispatch"]["path"] for h in solver.history if "dispatch" in h] == ["exact"]


def test_progressive_stages_record_their_choice():
    """Each stage of a progressive fit records its path; the recorded
    core-set size and costs agree with the model's choice."""
    X, y = _rows(40000, 4, seed=2)
    y = np.where(np.random.default_rng(3).random(len(y)) < 0.15, -y, y)     # noisy: stages
    m = CVMClassifier(options={"progressive_min_rows": 10000}).fit(
        streamcvm.as_store(X, y, chunk_rows=5000))
    stages = [h for h in m.history_ if "stage_validation_error" in h]
    recs = [h["dispatch"] for h in m.history_ if "dispatch" in h]
    assert len(stages) >= 2 and len(recs) >= len(stages)
    for r in recs:
        c = StepCosts(r["rows"], 4.0)
        assert r["exact_step_s"] == pytest.approx(c.exact())
        assert r["sampled_step_s"] == pytest.approx(c.sampled(r["core_size"]))
        if r["path"] == "sampled":
            assert not c.exact_cheaper(r["core_size"])
        else:
            assert c.exact_cheaper(r["core_size"])


def test_resumed_exact_pass_keeps_its_choice(tmp_path, monkeypatch):
    """Killed inside the exact pass it handed over to, a run resumes with
    the choice its snapshot recorded (the sampled start and the core-set
    size of the hand-over), and the uninterrupted run's model."""
    from streamcvm.solvers.exact import bvm as exact_bvm

    class Kill(Exception):
        pass
    opts = {"dispatch_sampled_fixed_s": 0.0}                 # a sampled start, then exact
    X, y = _rows(30000, 4, seed=4)
    store = streamcvm.as_store(X, y)                        # one chunk: pooled whole
    orig, calls = exact_bvm.bvm_exact, {"n": 0, "kill": None}

    def counting(*a, **kw):
        calls["n"] += 1
        if calls["n"] == calls["kill"]:
            raise Kill()
        return orig(*a, **kw)
    monkeypatch.setattr(exact_bvm, "bvm_exact", counting)
    ref = CVMClassifier(eps=1e-4, method="bvm", C=1.0, gamma=0.25, options=opts).fit(
        store, checkpoint_dir=tmp_path / "ref", checkpoint_every=0.0)
    want = [h["dispatch"] for h in ref.history_ if "dispatch" in h]
    assert len(want) == 1 and want[0]["path"] == "sampled, then exact"
    assert calls["n"] > 4
    calls.update(n=0, kill=4)
    with pytest.raises(Kill):
        CVMClassifier(eps=1e-4, method="bvm", C=1.0, gamma=0.25, options=opts).fit(
            store, checkpoint_dir=tmp_path / "ck", checkpoint_every=0.0)
    assert calls["n"] == 4                                  # the kill landed in the pass
    calls.update(n=0, kill=None)
    res = CVMClassifier(eps=1e-4, method="bvm", C=1.0, gamma=0.25, options=opts).fit(
        store, checkpoint_dir=tmp_path / "ck", resume=True)
    assert [h["dispatch"] for h in res.history_ if "dispatch" in h] == want
    assert res.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(res.decision_function(X[:500]), ref.decision_function(X[:500]))
