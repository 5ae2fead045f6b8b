"""Progressive subsampling (train_size): the sample, the stages, the stop
rule, held-out rows never trained on, and resume inside a stage."""
import numpy as np
import pytest

import streamcvm
from streamcvm import CVMClassifier
from streamcvm.data import snapshots
from streamcvm.options import Options
from streamcvm.problems import progressive as pg
from streamcvm.solvers import meb
from streamcvm.solvers.exact import bvm as exact_bvm


# the progressive machinery at a fixed point (C and gamma not searched: the search has
# tests of its own, tests/test_selection.py)
FIX = dict(C=1.0, gamma=0.125)
SMALL = {"options": {"progressive_min_rows": 10000}}     # progressive from 10,000 rows


def _noisy(n=24000, seed=0, chunk_rows=3000):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)).astype(np.float32)
    f = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]
    y = np.where(f + 0.6 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return streamcvm.as_store(X, y, chunk_rows=chunk_rows)


def test_row_keys_are_uniform_and_the_sample_ignores_the_chunking():
    k = pg.row_keys(np.arange(200000), seed=3)
    assert 0 <= k.min() and k.max() < 1
    assert abs(k.mean() - 0.5) < 0.005 and abs(np.mean(k < 0.1) - 0.1) < 0.005
    assert not np.array_equal(k, pg.row_keys(np.arange(200000), seed=4))
    a, b = _noisy(chunk_rows=1000), _noisy(chunk_rows=7000)
    (va, Xa, ya, _), (ta, Ta, _, _) = pg.draw_sample(a, (-1.0, 1.0), 1000, 5000, seed=0)
    (vb, _, _, _), (tb, _, _, _) = pg.draw_sample(b, (-1.0, 1.0), 1000, 5000, seed=0)
    np.testing.assert_array_equal(va, vb)
    np.testing.assert_array_equal(ta, tb)
    assert not set(va.tolist()) & set(ta.tolist())          # held out: disjoint
    assert abs(len(va) - 1000) < 150 and abs(len(ta) - 5000) < 300
    np.testing.assert_array_equal(Xa, a.X[va])
    # the training sample is in key order: its prefixes are random subsets
    keys = pg.row_keys(ta, 0)
    assert np.all(np.diff(keys) >= 0)


def test_plan_and_stages():
    s = _noisy()
    o = Options()
    assert pg.plan(s, (-1.0, 1.0), "all", o) is None
    assert pg.plan(s, (-1.0, 1.0), "auto", o) is None         # 24,000 <= progressive_min_rows
    assert pg.plan(s, (-1.0, 1.0), "auto", o.but(progressive_min_rows=20000)) is not None
    n_val, n_train = pg.plan(s, (-1.0, 1.0), 16000, o)
    assert n_val == 2400 and n_train == 16000
    first = o.first_stage_rows
    assert pg.stage_sizes(16000, first) == [4000, 8000, 16000]
    assert pg.stage_sizes(190000, first) == [16384, 32768, 65536, 190000]
    assert pg.stage_sizes(300000, first)[-2:] == [131072, 300000]


def test_gain_left_follows_the_learning_curve():
    """On an exact power-law curve error(m) = a + b m^-c the estimate from
    its last two doublings' gains is the gain still to come (up to the one
    standard error it adds), and a last step of less than a doubling counts
    for its fraction."""
    a, b, c = 0.03, 2.0, 0.6
    err = lambda m: a + b * m ** -c              # noqa: E731
    ms = [16384, 32768, 65536]
    gains = [err(ms[0]) - err(ms[1]), err(ms[1]) - err(ms[2])]
    left, rho = pg.gain_left(gains, [0.0, 0.0], ms[-1], 1048576)
    assert rho == pytest.approx(2 ** -c)
    assert left == pytest.approx(err(65536) - err(1048576), rel=1e-9)
    one, _ = pg.gain_left(gains, [0.0, 0.0], ms[-1], 2 * ms[-1])
    assert one == pytest.approx(err(65536) - err(131072), rel=1e-9)
    assert pg.gain_left(gains, [0.0, 0.0], ms[-1], ms[-1])[0] == 0.0
    # one gain only: the prior ratio; the standard error raises the estimate
    first, rho0 = pg.gain_left(gains[:1], [0.0], ms[1], 4 * ms[1])
    assert rho0 == Options().rho_prior
    assert pg.gain_left(gains, [0.0, 0.001], ms[-1], 1048576)[0] > left
    # a doubling that made things worse still leaves its standard error's worth
    assert pg.gain_left([0.01, -0.001], [0.0, 0.002], 100, 800)[0] > 0


def test_gain_left_under_label_noise():
    """Flipping each validation label with probability rho shrinks every
    gain seen on them by (1 - 2 rho): the estimate divides it back out
    (simulated), with the stage's validation error as the bound on rho."""
    assert pg.label_noise(np.r_[np.ones(20), np.zeros(80)]) == pytest.approx(0.2)
    assert pg.label_noise(np.ones(10)) == 0.45
    rng = np.random.default_rng(0)
    n, rho = 400000, 0.2
    y = rng.choice([-1.0, 1.0], n)
    u = rng.random(n)
    preds = [np.where(u < e, -y, y) for e in (0.10, 0.06, 0.045)]   # nested stages
    noisy = np.where(rng.random(n) < rho, -y, y)

    def gains(labels):
        errs = [np.mean(p != labels) for p in preds]
        return [errs[0] - errs[1], errs[1] - errs[2]]
    clean = pg.gain_left(gains(y), [0.0, 0.0], 4, 16)[0]
    seen = pg.gain_left(gains(noisy), [0.0, 0.0], 4, 16)[0]
    fixed = pg.gain_left(gains(noisy), [0.0, 0.0], 4, 16, noise=rho)[0]
    assert seen == pytest.approx((1 - 2 * rho) * clean, rel=0.05)
    assert fixed == pytest.approx(clean, rel=0.05)


def test_progressive_fit_holds_out_its_validation_rows_and_records_the_stages():
    store = _noisy()
    clf = CVMClassifier(train_size=16000, **FIX).fit(store)
    m = clf.machines_[0]
    stages = [h for h in m.history if "stage_validation_error" in h]
    assert [h["stage_rows"] for h in stages] == [4000, 8000, 16000][:len(stages)]
    for h in stages[1:]:
        assert h["fixed"] + h["broken"] > 0
    for h in stages[1:-1]:          # it went on: more than the tolerance was left
        assert h["gain_left"] > clf.stage_tol
    last = stages[-1]
    # it stopped at the last stage, or when too little was left to gain
    assert last["stopped_by"] == ("the whole sample" if len(stages) == 3 else
                                  "gain left below tolerance")
    assert len(stages) == 3 or last["gain_left"] <= clf.stage_tol
    (vid, Xv, yv, _), (tid, _, _, _) = pg.draw_sample(store, (-1.0, 1.0), 2400, 16000, 0)
    assert not set(m.sv_ids.tolist()) & set(vid.tolist())   # never trained on
    assert set(m.sv_ids.tolist()) <= set(tid[:last["stage_rows"]].tolist())
    clf.set_params(compact=False)           # the machine itself (not a compact expansion)
    err = np.mean(clf.predict(Xv) != yv)
    assert err == pytest.approx(last["stage_validation_error"], abs=1e-12)
    clf.set_params(compact="auto")
    full = CVMClassifier(train_size="all", **FIX).fit(store)
    test = _noisy(n=20000, seed=7)
    acc_p = np.mean(clf.predict(test.X) == test.y)
    acc_f = np.mean(full.predict(test.X) == test.y)
    assert acc_p > 0.8 and acc_p > acc_f - 0.01


def test_stop_by_validation_records_every_level():
    store = _noisy()
    clf = CVMClassifier(train_size=16000, stop="validation", **FIX).fit(store)
    assert all("validation_error" in h for h in clf.history_)
    with pytest.raises(ValueError, match="stop must be"):
        CVMClassifier(stop="never").fit(store)


def _killed_in_stage(store, rows, tmp_path, monkeypatch):
    """A checkpointed fit (train_size 16,000) killed at the first exact piece
    of a stage of at least ``rows`` rows: its latest snapshot's manifest."""
    orig = exact_bvm.bvm_exact

    def killing(*a, **kw):
        if a[22] >= rows:
            raise KeyboardInterrupt
        return orig(*a, **kw)
    monkeypatch.setattr(exact_bvm, "bvm_exact", killing)
    with pytest.raises(KeyboardInterrupt):
        CVMClassifier(train_size=16000, **FIX).fit(store, checkpoint_dir=tmp_path,
                                                   checkpoint_every=0.0)
    monkeypatch.setattr(exact_bvm, "bvm_exact", orig)
    return snapshots.latest(tmp_path)[0]


def test_progressive_resume_inside_a_later_stage_is_exact(tmp_path, monkeypatch):
    store = _noisy()
    ref = CVMClassifier(train_size=16000, **FIX).fit(store)
    orig = exact_bvm.bvm_exact
    man = _killed_in_stage(store, 8000, tmp_path, monkeypatch)   # the second stage's first piece
    stage = man["current"]["pool"]["progressive"]["stage"]
    assert stage >= 1, "the kill should land after the first stage"
    seen = []

    def counting(*a, **kw):
        seen.append(a[22])
        return orig(*a, **kw)
    monkeypatch.setattr(exact_bvm, "bvm_exact", counting)
    res = CVMClassifier(train_size=16000, **FIX).fit(store, checkpoint_dir=tmp_path,
                                                     resume=True)
    assert seen and min(seen) >= 8000        # it continued: the first stage was not redone
    a, b = ref.machines_[0], res.machines_[0]
    np.testing.assert_array_equal(a.sv_ids, b.sv_ids)
    np.testing.assert_array_equal(a.coef, b.coef)
    verdicts = [[{k: v for k, v in h.items() if k != "elapsed"} for h in m.history
                 if "stage_validation_error" in h] for m in (a, b)]
    assert verdicts[0] == verdicts[1]


def test_auto_keeps_the_plain_fit_while_its_core_set_stays_small(monkeypatch):
    """train_size="auto": the sampled fit on every row is the model when its
    core set stays under the option probe_core (clean data); noisy data,
    whose core set reaches it, trains progressively."""
    from streamcvm.options import default
    PROBE_CORE = default("probe_core")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((24000, 4)).astype(np.float32)
    clean = streamcvm.as_store(X, np.where(X[:, 0] > 0, 1.0, -1.0), chunk_rows=3000)
    plain = CVMClassifier(**FIX, **SMALL).fit(clean)
    assert plain.core_set_size_ < PROBE_CORE
    assert not any("stage_rows" in h for h in plain.history_)
    assert np.mean(plain.predict(X) == clean.y) > 0.99
    # the probe that reached the cap is thrown away: no pass over every row
    # certifies its eps (one costs rows x PROBE_CORE kernel values)
    from streamcvm.solvers.meb import MEBSolver
    certified = []
    real = MEBSolver.certify
    monkeypatch.setattr(MEBSolver, "certify",
                        lambda self, *a, **k: certified.append(1) or real(self, *a, **k))
    noisy = CVMClassifier(**FIX, **SMALL).fit(_noisy())
    stages = [h["stage_rows"] for h in noisy.history_ if "stage_validation_error" in h]
    assert len(stages) >= 2 and stages[0] < 24000 / 2       # stages on subsamples
    assert noisy.core_set_size_ >= PROBE_CORE / 2
    assert not certified
    # a fit capped by max_core, kept, still certifies its eps
    capped = CVMClassifier(train_size="all", max_core=64, method="bvm", **FIX, **SMALL).fit(clean)
    assert certified and capped.core_set_size_ == 64


# stages of 2,000, 4,000, 8,000 and 16,000 rows (so that a third verdict exists)
FOUR = {"options": {"first_stage_rows": 2000}}


LOOSE = 1.0     # points: _noisy's stages promise 3.0 after their first doubling, 0.6 after the next


def test_the_tolerance_ends_the_stages(monkeypatch):
    store = _noisy()
    free = CVMClassifier(train_size=16000, stage_tol=0.0, **FIX, **FOUR).fit(store)
    loose = CVMClassifier(train_size=16000, stage_tol=LOOSE, **FIX, **FOUR).fit(store)
    stages = [h for h in loose.history_ if "stage_validation_error" in h]
    free_stages = [h for h in free.history_ if "stage_validation_error" in h]
    last = stages[-1]
    assert last["stopped_by"] == "gain left below tolerance", stages
    assert last["gain_left"] <= LOOSE < max(h["gain_left"] for h in free_stages[1:-1])
    assert len(free_stages) == 4 > len(stages)      # tolerance 0: every stage
    assert free_stages[-1]["stopped_by"] == "the whole sample"
    for a, b in zip(stages, free_stages):       # the same stages up to the stop
        assert a["stage_validation_error"] == b["stage_validation_error"]
    assert all("stopped_by" not in h for h in stages[:-1] + free_stages[:-1])


def test_the_model_and_info_say_why_the_stages_stopped(tmp_path, monkeypatch):
    from streamcvm.cli.info import describe_model
    clf = CVMClassifier(train_size=16000, stage_tol=LOOSE, **FIX, **FOUR).fit(_noisy())
    streamcvm.save_model(clf, tmp_path / "m")
    text = describe_model(str(tmp_path / "m"))
    assert "(stopped by: gain left below tolerance)" in text
    assert "estimated gain left from the rest of the sample" in text
    clf = CVMClassifier(train_size=16000, stage_tol=0.0, **FIX, **FOUR).fit(_noisy())
    streamcvm.save_model(clf, tmp_path / "n")
    text = describe_model(str(tmp_path / "n"))
    assert "(stopped by: the whole sample)" in text
    # each stage: its rows, route, steps, core set and validation error
    import json
    mj = json.loads((tmp_path / "n" / "model.json").read_text())["machines"][0]
    verdicts = [h for h in clf.history_ if "stage_validation_error" in h]
    assert [st["rows"] for st in mj["stages"]] == [h["stage_rows"] for h in verdicts]
    assert sum(st["steps"] for st in mj["stages"]) == mj["n_iter"]
    for st, h in zip(mj["stages"], verdicts):
        assert st["core_size"] == h["core_size"] and st["steps"] > 0
        assert st["stage_validation_error"] == h["stage_validation_error"]
        assert st["route"] in ("exact", "sampled", "sampled, then exact")
        assert (f"{st['rows']:,} rows: {st['route']}, {st['steps']:,} steps, core set "
                f"{st['core_size']:,}, validation error "
                f"{100 * st['stage_validation_error']:.2f}%") in text


def test_stage_summary_of_a_history():
    """Levels grouped by stage: the route of each (exact, sampled, or both), its
    own steps (a stage whose solver started again counts from 0), its last
    level's core set and verdict; full-pass records are not levels."""
    from streamcvm.estimators.model import stage_summary
    hist = [{"stage_rows": 100, "iteration": 40, "core_size": 9},
            {"stage_rows": 100, "iteration": 90, "core_size": 12,
             "stage_validation_error": 0.2},
            {"stage_rows": 200, "iteration": 150, "core_size": 20},
            {"stage_rows": 200, "iteration": 260, "core_size": 25, "exact": True,
             "stage_validation_error": 0.1},
            {"stage_rows": 200, "full_pass_violators": 0, "iteration": 999},
            {"stage_rows": 400, "iteration": 70, "core_size": 30, "exact": True,
             "stage_validation_error": 0.05}]
    assert stage_summary(hist) == [
        {"rows": 100, "core_size": 12, "stage_validation_error": 0.2, "route": "sampled",
         "steps": 90},
        {"rows": 200, "core_size": 25, "stage_validation_error": 0.1,
         "route": "sampled, then exact", "steps": 170},
        {"rows": 400, "core_size": 30, "stage_validation_error": 0.05, "route": "exact",
         "steps": 70}]
    assert stage_summary([{"iteration": 5, "core_size": 3}]) == []


def test_a_resumed_fit_keeps_the_gains_for_the_stop_rule(tmp_path, monkeypatch):
    """The stages' gains are in the snapshot: a run killed in a later stage
    stops where the uninterrupted one did."""
    store = _noisy()
    ref = CVMClassifier(train_size=16000, stage_tol=LOOSE, **FIX, **FOUR).fit(store)
    ref_rows = [h["stage_rows"] for h in ref.history_ if "stage_validation_error" in h]
    assert ref_rows[-1] < 16000, ref_rows
    orig = exact_bvm.bvm_exact

    def killing(*a, **kw):
        if a[22] >= ref_rows[-1]:
            raise KeyboardInterrupt
        return orig(*a, **kw)
    monkeypatch.setattr(exact_bvm, "bvm_exact", killing)
    with pytest.raises(KeyboardInterrupt):
        CVMClassifier(train_size=16000, stage_tol=LOOSE, **FIX, **FOUR).fit(
            store, checkpoint_dir=tmp_path, checkpoint_every=0.0)
    monkeypatch.setattr(exact_bvm, "bvm_exact", orig)
    man = snapshots.latest(tmp_path)[0]
    assert man["current"]["pool"]["progressive"]["stage"] == len(ref_rows) - 1
    res = CVMClassifier(train_size=16000, stage_tol=LOOSE, **FIX, **FOUR).fit(
        store, checkpoint_dir=tmp_path, resume=True)
    rows = [h["stage_rows"] for h in res.history_ if "stage_validation_error" in h]
    assert rows == ref_rows
    np.testing.assert_array_equal(ref.machines_[0].sv_ids, res.machines_[0].sv_ids)


# -- regression: stages judged by held-out squared errors ---------------------

def _friedman(n=12000, chunk_rows=1500):
    from streamcvm.data.synthetic import friedman1_block
    X, y = friedman1_block(0, n)
    return streamcvm.as_store(X, y, chunk_rows=chunk_rows)


REG = dict(mu=0.5, gamma=0.5, train_size=8000)


def test_the_squared_verdict_keeps_its_losses_exactly():
    rng = np.random.default_rng(0)
    v = pg.SquaredVerdict()
    loss = rng.random(777) ** 3
    np.testing.assert_array_equal(v.decode(v.encode(loss), 777), loss)   # resume: exact


def test_progressive_regression_holds_out_its_validation_rows_and_records_the_stages():
    from streamcvm import CVMRegressor
    store = _friedman()
    reg = CVMRegressor(**REG).fit(store)
    stages = [h for h in reg.history_ if "validation_rows" in h]
    rows = [h["stage_rows"] for h in stages]
    assert rows == [2000, 4000, 8000][:len(rows)] and len(rows) >= 2
    for h in stages[1:-1]:                  # it went on: more was left than the tolerance
        assert h["gain_left"] > Options().regression_stage_tol
    last = stages[-1]
    assert len(stages) == 3 or last["gain_left"] <= Options().regression_stage_tol or \
        last.get("stopped_by") == "core budget"
    assert reg.C_ == 5.0 * last["stage_rows"]       # C="auto": 5 x the stage's rows
    (vid, Xv, yv, _), (tid, _, _, _) = pg.draw_sample(store, None, 1200, 8000, 0)
    ids = reg.machine_.sv_ids
    assert not set(ids.tolist()) & set(vid.tolist())            # never trained on
    assert set(ids.tolist()) <= set(tid[:last["stage_rows"]].tolist())
    val = np.sqrt(np.mean((reg.predict(Xv) - yv) ** 2))
    assert val == pytest.approx(last["stage_validation_rmse"], rel=1e-6)   # threads: float sums
    from streamcvm.data.synthetic import friedman1_block
    Xt, yt = friedman1_block(99, 5000)
    assert np.sqrt(np.mean((reg.predict(Xt) - yt) ** 2)) < 1.3     # noise sd 1, target sd ~4.9


def test_progressive_regression_stops_before_a_stage_past_the_core_budget():
    from streamcvm import CVMRegressor
    store = _friedman()
    with pytest.warns(RuntimeWarning, match="max_core"):         # its first stage is capped
        reg = CVMRegressor(**dict(REG, max_core=900)).fit(store)
    stages = [h for h in reg.history_ if "validation_rows" in h]
    last = stages[-1]
    assert last["stopped_by"] == "core budget", stages
    assert reg.core_set_size_ * 2 > 900 >= reg.core_set_size_


def test_progressive_regression_resume_inside_a_later_stage_is_exact(tmp_path, monkeypatch):
    from streamcvm import CVMRegressor
    store = _friedman(6000)
    kw = dict(REG, train_size=4000)         # stages of 1,000, 2,000 and 4,000 rows
    orig, searches = meb.MEBSolver.search, []

    def counted(self, *a, **k):
        searches.append(self.ball.core.n)
        return orig(self, *a, **k)
    monkeypatch.setattr(meb.MEBSolver, "search", counted)
    ref = CVMRegressor(**kw).fit(store)
    total = len(searches)
    count = {"n": 0}

    def killing(self, *a, **k):
        count["n"] += 1
        if count["n"] == total - 30:        # in the last stage
            raise KeyboardInterrupt
        return orig(self, *a, **k)
    monkeypatch.setattr(meb.MEBSolver, "search", killing)
    with pytest.raises(KeyboardInterrupt):
        CVMRegressor(**kw).fit(store, checkpoint_dir=tmp_path, checkpoint_every=3600,
                                checkpoint_iters=100)
    man = snapshots.latest(tmp_path)[0]
    assert man["current"]["pool"]["progressive"]["stage"] >= 1, \
        "the kill should land after the first stage"
    searches.clear()
    monkeypatch.setattr(meb.MEBSolver, "search", counted)
    res = CVMRegressor(**kw).fit(store, checkpoint_dir=tmp_path, resume=True)
    assert len(searches) < 300 < total / 3  # it continued: no stage was redone
    np.testing.assert_array_equal(ref.machine_.sv_ids, res.machine_.sv_ids)
    np.testing.assert_array_equal(ref.machine_.coef, res.machine_.coef)
    assert ref.intercept_ == res.intercept_ and ref.epsilon_bar_ == res.epsilon_bar_
    verdicts = [[{k: v for k, v in h.items() if k != "elapsed"} for h in r.history_
                 if "validation_rows" in h] for r in (ref, res)]
    assert verdicts[0] == verdicts[1]


def test_a_progressive_regression_chooses_mu_and_gamma_over_every_pair():
    """In-memory fits try gamma at the middle mu, then mu at that gamma (5
    fits); a progressive one every (mu, gamma) pair (8), and among the
    trials within 1% of the best RMSE the sparsest wins."""
    from streamcvm.solvers.kernels import Kernel
    from streamcvm.problems.regression_defaults import select_params
    store = _friedman(n=1000)
    kw = dict(c=5.0, mu="auto", gamma="auto", base_gamma=0.6, sd=float(store.y.std()),
              method="cvm", eps="auto", options=Options())
    make = lambda g: Kernel("rbf", gamma=g)          # noqa: E731
    mu5, g5, t5 = select_params(store, make, **kw)
    mu8, g8, t8 = select_params(store, make, full_grid=True, **kw)
    assert len(t5) == 5 and len(t8) == 8
    assert {(t["mu"], t["gamma"]) for t in t5} <= {(t["mu"], t["gamma"]) for t in t8}
    assert len({(t["mu"], t["gamma"]) for t in t8}) == 8
    top = min(t["val_rmse"] for t in t8)
    ok = [t for t in t8 if t["val_rmse"] <= (1 + Options().select_slack) * top]
    chosen = next(t for t in t8 if (t["mu"], t["gamma"]) == (mu8, g8))
    assert chosen in ok and chosen["n_support"] == min(t["n_support"] for t in ok)
