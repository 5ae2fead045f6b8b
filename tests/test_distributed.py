"""The O(n) passes on a dask.distributed LocalCluster (2 worker processes):
the same models, predictions and reports as dask's threaded scheduler, and
the same model when a worker dies in the middle of a full pass."""
import json
import os
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from streamcvm import CVMClassifier, CVMRegressor
from streamcvm.data import synthetic  # noqa: E402
from streamcvm.solvers.kernels import Kernel  # noqa: E402
from streamcvm.data.parallel import Runner  # noqa: E402
from streamcvm.predict.chunks import predict_chunks  # noqa: E402
from streamcvm.problems import one_blas_thread, train_machine  # noqa: E402
from streamcvm.problems.driver import Solve  # noqa: E402
from streamcvm.data.store import open_store  # noqa: E402


@pytest.fixture(scope="module")
def client():
    import dask
    from distributed import Client, LocalCluster
    # the scheduler's transition log keeps its last 1,000 transitions by
    # default: the later passes of a test would push out those of the first,
    # where the kill test looks for the tasks computed again
    with dask.config.set({"distributed.admin.low-level-log-length": 200_000}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
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


def _finished(client):
    """{task name (key prefix): results the cluster's workers have computed}:
    the scheduler's count of its tasks that reached memory, reruns included."""
    return client.run_on_scheduler(lambda dask_scheduler: {
        name: p.state_counts["memory"] for name, p in dask_scheduler.task_prefixes.items()})


def _ran_since(client, before):
    """Results computed on the cluster since ``before = _finished(client)``,
    by task name (only names that ran)."""
    now = _finished(client)
    return {k: v - before.get(k, 0) for k, v in now.items() if v > before.get(k, 0)}


def _passes(machine):
    """The number of full passes a machine's fit made (one record each)."""
    return sum("full_pass_violators" in h for h in machine.history)


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
    store = open_store(stores["cls"])
    t0 = _finished(client)
    a = CVMClassifier(**kw).fit(stores["cls"])
    assert _ran_since(client, t0) == {}                 # threads: nothing on the cluster
    t0 = _finished(client)
    b = CVMClassifier(**kw).fit(stores["cls"], client=client)
    # the full passes ran on the cluster: a chunk task per chunk and pass
    ran = _ran_since(client, t0)
    assert _passes(b.machines_[0]) >= 1
    assert ran.get("violator_task") == store.n_chunks * _passes(b.machines_[0]), ran
    _same_machine(a.machines_[0], b.machines_[0])
    assert a.machines_[0].full_pass_violators is not None
    pa = list(predict_chunks(a, store))
    t0 = _finished(client)
    pb = list(predict_chunks(a, store, Runner(client)))
    assert _ran_since(client, t0).get("predict_task") == store.n_chunks
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
    from streamcvm.cli.evaluate import evaluate_text
    from streamcvm.estimators.model import save_model
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


def _transitions(client, name, since):
    """The scheduler's transitions (key, from, to, stimulus) of the tasks
    called ``name`` since ``since`` (``distributed.metrics.time()``)."""
    from distributed.utils import key_split

    def get(dask_scheduler):
        return [(t.key, t.start, t.finish, t.stimulus_id) for t in dask_scheduler.transition_log
                if t.timestamp >= since and key_split(t.key) == name]
    return client.run_on_scheduler(get)


def test_a_worker_killed_mid_pass_gives_the_same_model(client, stores):
    """Two chunks into the first full pass, the worker holding results the
    pass has not taken yet is killed; the pass waits until the scheduler has
    seen it die (so it died with tasks owed), those results are computed
    again on the other worker (the scheduler's transition log), and the
    model is the undisturbed one."""
    from distributed.metrics import time as now
    from distributed.utils import key_split
    store = open_store(stores["cls"])
    kern = Kernel("rbf", gamma=0.2)
    kw = dict(classes=(0.0, 1.0), C=1.0, full_pass=True, train_size="all", stop="slack")
    solve = Solve(method="cvm", eps=1e-3)
    with one_blas_thread():
        ref = train_machine(store, kern, solve.but(runner=Runner(use_active=False)), **kw)
    client.wait_for_workers(2, timeout=60)
    before = set(client.scheduler_info()["workers"])
    killed = {}

    def held(dask_scheduler):       # {worker: results of the pass only it holds}
        return {a: [ts.key for ts in ws.has_what if key_split(ts.key) == "violator_task"
                    and ts.who_wants and len(ts.who_has) == 1]
                for a, ws in dask_scheduler.workers.items()}

    def kill_one(done, total, k):
        if killed or done != 2:
            return
        # the pass waits here: the results it has not taken (8 in flight)
        # gather on the workers; 5, so that the victim holds some beyond the
        # two the pass has let go (their release may not have arrived yet)
        t = time.monotonic()
        while sum(map(len, client.run_on_scheduler(held).values())) < 5 and \
                time.monotonic() - t < 30:
            time.sleep(0.01)
        victim, on_it = max(client.run_on_scheduler(held).items(), key=lambda kv: len(kv[1]))
        client.run(_die, workers=[victim], wait=False)
        t = time.monotonic()
        while victim in client.scheduler_info()["workers"] and time.monotonic() - t < 60:
            time.sleep(0.01)
        killed.update(victim=victim, on_it=on_it, done=done, total=total, k=k,
                      gone=victim not in client.scheduler_info()["workers"])

    since = now()
    runner = Runner(client)
    with one_blas_thread():
        got = train_machine(store, kern, solve.but(runner=runner, pass_progress=kill_one), **kw)
    assert killed, "the pass finished before a worker could be killed"
    # the worker died in the first pass with chunk tasks still owed: its death
    # was seen while the pass waited, two of its 12 chunks taken
    assert killed["gone"] and killed["k"] == 1 and killed["done"] < killed["total"], killed
    assert killed["victim"] in before and killed["on_it"], killed
    _same_machine(ref, got)
    # results lost with it (released from memory: only a lost result is; one
    # the pass had let go just before is then forgotten) were computed again:
    # those tasks reached memory twice, or, when the scheduler cancelled the
    # tasks still owed with a shared input it counted lost, the runner
    # scattered the inputs again and submitted them anew (new keys: the lost
    # ones are then released unrun). With 3 or more on the victim, at least
    # one was beyond the two the pass had let go; a loaded scheduler may have
    # spread them thinner (then the model above is the whole check)
    if len(killed["on_it"]) >= 3:
        log = _transitions(client, "violator_task", since)
        lost = {t[0] for t in log if t[1:3] == ("memory", "released")}
        reran = {key for key in lost
                 if [t[2] for t in log if t[0] == key].count("memory") == 2}
        assert reran & set(killed["on_it"]) or runner.resent > 0, (lost, reran, killed, log)
    # the nanny has started a new worker in the victim's place
    client.wait_for_workers(2, timeout=60)
    assert killed["victim"] not in set(client.scheduler_info()["workers"])


def test_cli_ingest_train_evaluate_on_a_local_cluster(tmp_path, capsys, monkeypatch):
    """--workers 2: ingest parses on the cluster, train and evaluate pass
    over the store there (the tasks each command's cluster ran, by name); the
    store and the model are those of threads."""
    from streamcvm.cli import main
    from streamcvm.estimators.model import load_model
    src = tmp_path / "data.csv"
    X, y = synthetic.gaussian_block(0, 3000, d=5)
    # CSV: every block is a parse task (svmlight's first block is parsed here)
    with open(src, "w") as f:
        for row, lab in zip(X, y):
            f.write(f"{int(lab)}," + ",".join(f"{v:.5g}" for v in row) + "\n")
    ran = []        # per cluster a command started: the tasks it ran, by name
    close = Runner.close

    def closing(self):
        if self.client is not None and self._own:
            ran.append(_finished(self.client))
        close(self)
    monkeypatch.setattr(Runner, "close", closing)
    out = {}
    for name, extra in (("threads", []), ("cluster", ["--workers", "2"])):
        st, mo = str(tmp_path / f"{name}.zarr"), str(tmp_path / f"{name}-model")
        assert main(["ingest", str(src), "-o", st, "--chunk-rows", "500", "-q"] + extra) == 0
        assert main(["train", st, "-o", mo, "--method", "cvm", "-e", "1e-3", "--full-pass",
                     "-q"] + extra) == 0
        out[name] = (open_store(st), load_model(mo))
        assert main(["evaluate", st, mo, "--json"] + extra) == 0
        out[name] += (json.loads(capsys.readouterr().out),)
    # the work ran on the clusters (one per --workers command, none for
    # threads): the parse, a task per chunk and full pass, a task per chunk
    assert len(ran) == 3, ran
    n_chunks = out["cluster"][0].n_chunks
    passes = ran[1].get("violator_task", 0) // n_chunks
    assert ran[0].get("parse_csv_task", 0) >= 1, ran
    assert passes >= 1 and ran[1]["violator_task"] == passes * n_chunks, ran
    assert ran[2].get("predict_task") == n_chunks, ran
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
