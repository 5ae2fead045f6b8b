"""The O(n) passes on a dask.distributed LocalCluster (2 worker processes):
the same models, predictions and reports as dask's threaded scheduler, and
the same model when a worker dies in the middle of a full pass."""
import json
import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from streamcvm import CVMClassifier, CVMRegressor, synthetic  # noqa: E402
from streamcvm.kernels import Kernel  # noqa: E402
from streamcvm.parallel import Runner  # noqa: E402
from streamcvm.predict import predict_chunks  # noqa: E402
from streamcvm.problems import one_blas_thread, train_machine  # noqa: E402
from streamcvm.problems.driver import Solve  # noqa: E402
from streamcvm.store import open_store  # noqa: E402


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("dist")
    return {
        "cls": synthetic.write_store(str(d / "cls.zarr"), "gaussian", 6000, d=6, seed=3,
                                     chunk_rows=500),
        "cls_h5": synthetic.write_store(str(d / "cls.h5"), "gaussian", 3000, d=6, seed=4,
                                        chunk_rows=500, fmt="hdf5"),
        "reg": synthetic.write_store(str(d / "reg.zarr"), "friedman1", 3000, seed=1,
                                     chunk_rows=250),
    }


def _same_machine(a, b):
    np.testing.assert_array_equal(a.sv_ids, b.sv_ids)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.intercept == b.intercept
    assert a.full_pass_violators == b.full_pass_violators


def test_runner_yields_in_chunk_order(client):
    def task(i, base):
        return base + i
    threads = list(Runner(use_active=False).map(task, 23, 100, window=4))
    seen = []
    cluster = list(Runner(client).map(task, 23, 100, window=3,
                                      progress=lambda d, t: seen.append((d, t))))
    assert threads == cluster == list(range(100, 123))
    assert seen[-1] == (23, 23) and len(seen) == 23


def test_classifier_fit_predict_evaluate_match_threads(client, stores):
    kw = dict(method="cvm", eps=1e-3, full_pass=True, random_state=0)
    a = CVMClassifier(**kw).fit(stores["cls"])
    b = CVMClassifier(**kw).fit(stores["cls"], client=client)
    _same_machine(a.machines_[0], b.machines_[0])
    assert a.machines_[0].full_pass_violators is not None
    store = open_store(stores["cls"])
    pa = list(predict_chunks(a, store))
    pb = list(predict_chunks(a, store, Runner(client)))
    assert len(pa) == store.n_chunks
    for x, y in zip(pa, pb):
        np.testing.assert_array_equal(x.pred, y.pred)
        np.testing.assert_array_equal(x.dec, y.dec)
        np.testing.assert_array_equal(x.y, y.y)
    X = np.concatenate([store.chunk(i).X for i in range(store.n_chunks)])
    np.testing.assert_array_equal(np.concatenate([p.dec for p in pa]), a.decision_function(X))


def test_regressor_with_full_pass_matches_threads(client, stores):
    kw = dict(C=1000.0, mu=0.05, eps=1e-3, full_pass=True, max_core=None)
    a = CVMRegressor(**kw).fit(stores["reg"])
    b = CVMRegressor(**kw).fit(stores["reg"], client=client)
    _same_machine(a.machine_, b.machine_)
    assert a.epsilon_bar_ == b.epsilon_bar_


def test_evaluate_report_on_cluster_hdf5_and_url(client, stores, tmp_path):
    from streamcvm.cli import evaluate_text
    from streamcvm.model import save_model
    est = CVMClassifier(method="cvm", eps=1e-3).fit(stores["cls_h5"])
    model = str(tmp_path / "m")
    save_model(est, model)
    url = "file://" + os.path.abspath(stores["cls"])
    for path in (stores["cls_h5"], url):
        threads = evaluate_text(path, model, Runner(use_active=False))
        cluster = evaluate_text(path, model, Runner(client))
        assert threads == cluster
        assert "accuracy" in cluster and "AUC" in cluster
    # training from the URL gives the model training from the path gives
    kw = dict(method="cvm", eps=1e-3, full_pass=True)
    _same_machine(CVMClassifier(**kw).fit(url, client=client).machines_[0],
                  CVMClassifier(**kw).fit(stores["cls"]).machines_[0])


async def _die():
    os._exit(1)         # the worker process dies at once, tasks and data with it


def test_a_worker_killed_mid_pass_gives_the_same_model(client, stores):
    store = open_store(stores["cls"])
    kern = Kernel("rbf", gamma=0.2)
    kw = dict(classes=(0.0, 1.0), C=1.0, full_pass=True)
    solve = Solve(method="cvm", eps=1e-3)
    with one_blas_thread():
        ref = train_machine(store, kern, solve.but(runner=Runner(use_active=False)), **kw)
    before = set(client.scheduler_info()["workers"])
    killed = []

    def kill_one(done, total, k):
        if not killed and done == 2:        # two chunks in: the rest are in flight
            victim = sorted(client.scheduler_info()["workers"])[0]
            client.run(_die, workers=[victim], wait=False)
            killed.append(victim)

    with one_blas_thread():
        got = train_machine(store, kern, solve.but(runner=Runner(client), pass_progress=kill_one),
                            **kw)
    assert killed, "the pass finished before a worker could be killed"
    _same_machine(ref, got)
    # the victim is gone (its death may be noticed after the pass) and the
    # nanny has started a new worker in its place
    import time
    t = time.monotonic()
    while killed[0] in client.scheduler_info()["workers"] and time.monotonic() - t < 60:
        time.sleep(0.1)
    client.wait_for_workers(2, timeout=60)
    now = set(client.scheduler_info()["workers"])
    assert killed[0] in before and killed[0] not in now, (before, now)


def test_cli_ingest_train_evaluate_on_a_local_cluster(tmp_path, capsys):
    """--workers 2: ingest parses on the cluster, train and evaluate pass
    over the store there; the store and the model are those of threads."""
    from streamcvm.cli import main
    from streamcvm.model import load_model
    src = tmp_path / "data.svm"
    X, y = synthetic.gaussian_block(0, 3000, d=5)
    with open(src, "w") as f:
        for row, lab in zip(X, y):
            f.write(f"{int(lab)} " + " ".join(f"{j + 1}:{v:.5g}" for j, v in enumerate(row)) + "\n")
    out = {}
    for name, extra in (("threads", []), ("cluster", ["--workers", "2"])):
        st, mo = str(tmp_path / f"{name}.zarr"), str(tmp_path / f"{name}-model")
        assert main(["ingest", str(src), "-o", st, "--chunk-rows", "500", "-q"] + extra) == 0
        assert main(["train", st, "-o", mo, "--method", "cvm", "-e", "1e-3", "--full-pass",
                     "-q"] + extra) == 0
        out[name] = (open_store(st), load_model(mo))
        assert main(["evaluate", st, mo, "--json"] + extra) == 0
        out[name] += (json.loads(capsys.readouterr().out),)
    (s1, m1, e1), (s2, m2, e2) = out["threads"], out["cluster"]
    assert s1.fingerprint == s2.fingerprint and s1.n == 3000
    _same_machine(m1.machines_[0], m2.machines_[0])
    # evaluate's figures from the cluster's chunk tasks are the threads' figures
    assert e1["rows"] == e2["rows"] == 3000 and e1["confusion"] == e2["confusion"]
    assert e1["auc"] == pytest.approx(e2["auc"], abs=1e-9)    # BLAS threads differ
    rows = s1.rows(0, s1.n)
    assert e1["accuracy"] == np.mean(m1.predict(rows.X) == rows.y)


def test_cli_refuses_a_malformed_scheduler_address_in_one_line():
    from streamcvm.cli import main
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "no.zarr", "no-model", "--scheduler", "nonsense"])
    assert str(e.value).startswith("streamcvm evaluate: error: cannot reach the dask "
                                   "scheduler nonsense")


def test_runner_sends_shared_data_again_when_every_worker_holding_it_died():
    """Both workers die two tasks into a map: the scattered argument is lost
    with them (dask cannot recover scattered data); the runner scatters it
    again and the results are those of an undisturbed map."""
    import time
    from distributed import Client, LocalCluster

    def task(i, arr):
        time.sleep(0.2)
        return float(arr.sum()) + i

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as c:
        killed = []

        def kill_all(done, total):
            if done == 2 and not killed:
                c.run(_die, wait=False)
                killed.append(done)
        r = Runner(c)
        out = list(r.map(task, 12, np.ones(1000), progress=kill_all))
    assert killed and r.resent >= 1
    assert out == [1000.0 + i for i in range(12)]


def test_top_rows_streamed_equal_one_merge():
    from streamcvm.solvers.passes import TopRows, merge
    rng = np.random.default_rng(0)
    parts = []
    for k in range(30):
        n = int(rng.integers(0, 50))
        ids = rng.choice(10 ** 6, n, replace=False)
        d2 = rng.integers(0, 20, n).astype(float)      # ties: broken by id
        parts.append(None if n == 0 else (ids, rng.random((n, 3)).astype(np.float32),
                                          rng.random(n), None, d2))
    top = TopRows(40)
    for p in parts:
        top.add(p)
    got, want = top.result(), merge(parts, 40)
    for a, b in zip(got, want):
        if a is None:
            assert b is None
        else:
            np.testing.assert_array_equal(a, b)
    assert len(got[0]) == 40 and np.all(np.diff(got[4]) <= 0)
