"""Where the O(n) work runs: a :class:`Runner` maps a pure task over the
chunks of a store, on dask's threaded scheduler (the default) or on a
``dask.distributed`` cluster, and hands the results back in chunk order.

The core set is small and stays with the driver. What touches every row
(full violator passes, row statistics, prediction, evaluation) is one task
per store chunk, ``fn(i, *shared)``: the task opens the store (by path, in
the worker) and reads only chunk ``i``. ``shared`` objects (the store
handle, a snapshot of the center, a model) are sent to the cluster once
per :meth:`Runner.map` (``Client.scatter(..., broadcast=True)``), not once
per task. Tasks are pure, so a task rerun after a worker died returns the
same bytes, and the reduction, done by the driver in chunk order, gives the
same result on any scheduler and any number of workers.
"""
import os
from collections import deque
from itertools import islice

WINDOW_PER_WORKER = 4   # tasks in flight per worker thread: bounded memory, full pipes
_CONTROLLER = [None, -1]    # threadpoolctl's controller, len(sys.modules) when made


def n_threads(n_jobs):
    """The thread count of an ``n_jobs`` option (None or -1: every core)."""
    return (os.cpu_count() or 1) if n_jobs in (None, -1) else max(1, int(n_jobs))


def thread_limits(limits=1, user_api="blas"):
    """threadpoolctl's ``threadpool_limits(limits, user_api)`` context, from
    one controller kept while no module is imported. Making a controller
    inspects every loaded library: ~7 ms in a fit process, which the
    per-call ``threadpool_limits`` paid at every use (~35 ms of an ijcnn1
    fit, 5% of cpu_act's). An import may bring a new BLAS or OpenMP, so a
    changed ``sys.modules`` makes it again."""
    import sys
    from threadpoolctl import ThreadpoolController
    ctl, seen = _CONTROLLER
    if ctl is None or seen != len(sys.modules):
        ctl = ThreadpoolController()
        _CONTROLLER[:] = [ctl, len(sys.modules)]
    return ctl.limit(limits=limits, user_api=user_api)


def active_client():
    """The ``dask.distributed`` client dask would use by default (the last
    one created, unless made with ``set_as_default=False``), or None. A
    process that has not imported distributed has no client: it is not
    imported here for the question (0.3 s on a first fit)."""
    import sys
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import default_client
    except ImportError:                     # pragma: no cover - a dependency
        return None
    try:
        return default_client()
    except ValueError:
        return None


class Runner:
    """Runs chunk tasks. ``client``: a ``distributed.Client`` (or its
    scheduler address); ``workers``: start a ``LocalCluster`` of that many
    single-threaded worker processes (closed with the runner); neither: the
    active client if there is one, else dask's threaded scheduler with
    ``threads`` threads (default: the machine's cores)."""

    def __init__(self, client=None, workers=None, threads=None, use_active=True):
        self.client = None
        self._own = []
        if client is None and workers is not None:
            from distributed import Client, LocalCluster
            cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1,
                                   processes=True, dashboard_address=":0")
            self.client = Client(cluster, set_as_default=False)
            self._own = [self.client, cluster]
        elif isinstance(client, str):
            from distributed import Client
            from distributed.comm import resolve_address
            resolve_address(client)             # ValueError on a malformed address
            self.client = Client(client, set_as_default=False, timeout=10)
            self._own = [self.client]
        elif client is not None:
            self.client = client
        elif use_active:
            self.client = active_client()
        self.threads = int(threads or os.cpu_count() or 1)
        self.resent = 0         # times shared objects were scattered again (all copies lost)

    @property
    def dashboard_link(self):
        return None if self.client is None else self.client.dashboard_link

    def n_workers(self):
        if self.client is None:
            return self.threads
        return max(1, sum(w.get("nthreads", 1) for w in
                          self.client.scheduler_info()["workers"].values()))

    def close(self):
        for obj in self._own:
            obj.close()
        self._own = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def describe(self):
        if self.client is None:
            return f"dask threaded scheduler, {self.threads} threads"
        return (f"dask.distributed at {self.client.scheduler.address}, "
                f"{self.n_workers()} worker threads, dashboard {self.dashboard_link}")

    def map(self, fn, n, *shared, progress=None, window=None):
        """``fn(i, *shared)`` for ``i`` in ``range(n)``, yielded in order of
        ``i``. At most ``window`` tasks are in flight or held (default 4 per
        worker thread), so memory is bounded however many chunks there are.
        ``progress(done, n)`` is called after each result."""
        window = int(window or WINDOW_PER_WORKER * self.n_workers())
        if self.client is None:
            yield from self._map_threads(fn, n, shared, progress, window)
        else:
            yield from self._map_distributed(fn, n, shared, progress, window)

    def _map_threads(self, fn, n, shared, progress, window):
        if n == 1:
            # one task (a store in memory of one chunk): run here, without a
            # scheduler, whose first import costs 0.24 s (a quarter of SVR()'s
            # whole fit on cpu_act); the same BLAS threads as a task thread
            with thread_limits(1, "blas"):
                r = fn(0, *shared)
            if progress is not None:
                progress(1, 1)
            yield r
            return
        import dask
        import dask.threaded
        from dask import delayed
        task = delayed(fn, pure=False)
        done = 0
        for a in range(0, n, window):
            ids = range(a, min(a + window, n))
            # one BLAS thread per task thread: OpenBLAS's own threads would
            # oversubscribe the cores (dask's worker processes are set so too)
            with thread_limits(1, "blas"):
                # the threaded scheduler as a function: named ("threads"), dask
                # imports distributed to look for a client (0.2 s, once)
                out = dask.compute(*[task(i, *shared) for i in ids],
                                   scheduler=dask.threaded.get, num_workers=self.threads)
            for r in out:
                done += 1
                if progress is not None:
                    progress(done, n)
                yield r

    def _map_distributed(self, fn, n, shared, progress, window):
        from concurrent.futures import CancelledError
        client = self.client
        refs = [client.scatter(s, broadcast=True, hash=False) for s in shared]
        pending = deque()
        todo = iter(range(n))
        done, retries = 0, 0

        def submit(i):
            pending.append((i, client.submit(fn, i, *refs, pure=False)))

        for i in islice(todo, window):
            submit(i)
        try:
            while pending:
                i, fut = pending[0]
                try:
                    r = fut.result()
                except CancelledError:
                    # every copy of a shared object was lost with its workers:
                    # send them again and redo the tasks still owed (pure tasks,
                    # so the results are those the first attempt would have given)
                    retries += 1
                    if retries > 3:
                        raise
                    self.resent += 1
                    refs = [client.scatter(s, broadcast=True, hash=False) for s in shared]
                    owed = [j for j, _ in pending]
                    for _, f in pending:
                        f.release()
                    pending.clear()
                    for j in owed:
                        submit(j)
                    continue
                pending.popleft()
                fut.release()
                for j in islice(todo, 1):
                    submit(j)
                done += 1
                if progress is not None:
                    progress(done, n)
                yield r
        finally:
            for _, f in pending:
                f.release()
            for r in refs:
                r.release()


def as_runner(runner=None):
    """``runner`` itself, or a new default :class:`Runner` (the active
    client's, else threads)."""
    return runner if isinstance(runner, Runner) else Runner(client=runner)


def in_order(fn, items, n_jobs=1):
    """``fn(item)`` for every item on ``n_jobs`` threads (one BLAS thread
    each; calls that release the GIL run side by side), the results yielded
    in the items' order as they are ready (at most ``2 n_jobs`` ahead); one
    thread: in order, here. On an interrupt the calls not started are
    dropped."""
    items = list(items)
    jobs = max(1, min(int(n_jobs), len(items)))
    if jobs == 1:
        for it in items:
            yield fn(it)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor
    ex = ThreadPoolExecutor(jobs)
    try:
        with thread_limits(1, "blas"):
            ahead = deque()
            rest = iter(items)
            for it in rest:
                ahead.append(ex.submit(fn, it))
                if len(ahead) >= 2 * jobs:
                    break
            while ahead:
                got = ahead.popleft().result()
                nxt = next(rest, ahead)
                if nxt is not ahead:
                    ahead.append(ex.submit(fn, nxt))
                yield got
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
