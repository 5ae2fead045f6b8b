#!/usr/bin/env python
"""Training on a store larger than the memory the training process may use,
and the time of a pass over a store on 1 and 2 dask workers.

1. Generate (once; reused while its parameters match) a Zarr store of
   ``--rows`` rows of the synthetic Gaussian-blobs task (22 features,
   float32, 2 classes): 75M rows, 7.2 GB raw, about 6 GB on disk. A held-out
   store of 200,000 rows comes from blocks far past the training ones.
2. Train: ``streamcvm train STORE -o MODEL --method cvm -e 1e-4 -q``
   (``--method``, ``--eps``; an ad-hoc probe on a 2M-row store of the same
   generator: cvm 1e-4 6 s, accuracy 0.919; bvm 1e-4 5.6 s, 0.757, AUC
   0.984: its threshold is off; eps "auto" takes minutes for no better
   accuracy) in a child process whose address space is capped at ``--limit-gb``
   (RLIMIT_AS, 1.5 GB: every allocation beyond it fails, so the run cannot
   hold the store in memory). Reported: wall time, the child's peak RSS.
   Then ``streamcvm evaluate`` on the held-out store, under the same cap.
   ``--full-pass`` adds violator passes over all rows to the training.
3. Pass time: prediction over the first ``--pass-chunks`` chunks of the
   training store (one task per chunk: read the chunk, one kernel block
   against the support vectors, as a full violator pass does against the
   core set) on a LocalCluster of 1 worker process and of 2 (one thread
   each), and on the threaded scheduler; each timed after a warm-up pass
   over 4 chunks (worker start, imports, numba cache loads). Also one
   row-statistics pass (read every chunk, its squared norms: I/O and
   decompression only) over the whole store on each.

Usage::

    python tools/bench_larger_than_ram.py                   # ~15 min here
    python tools/bench_larger_than_ram.py --rows 5e6 --pass-chunks 16   # quick

The machine is shared and noisy: compare the 1- and 2-worker times of one
run, not across runs.
"""
import argparse
import json
import os
import resource
import sys
import time

import benchlib as B     # standard library only
from benchlib import git_commit

B.use_source_tree()


def make_stores(folder, rows, seed):
    """The training and held-out stores (generated unless already there
    with the same rows and seed)."""
    train = os.path.join(folder, f"gauss-{rows}-s{seed}.zarr")
    test = os.path.join(folder, f"gauss-test-200000-s{seed}.zarr")
    for path, n, first in ((train, rows, 0), (test, 200_000, 10 ** 6)):
        _, took = B.generated_store(path, "gaussian", n, seed, first, progress=True)
        if took is not None:
            print(f"  generated {path} in {took:.0f} s", flush=True)
    return train, test


def limited_child(cmd, limit_bytes):
    """Run ``cmd`` with RLIMIT_AS = ``limit_bytes``; (returncode, wall s,
    peak RSS MiB of that process, stdout, stderr)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    r = B.run_timed(cmd, preexec_fn=cap)
    return r["rc"], r["wall"], r["rss"] / 2 ** 20, r["stdout"], r["stderr"]


class Head:
    """The first ``k`` chunks of a store, as a store (pickles by value with
    cloudpickle; the store inside pickles as its path)."""

    def __init__(self, store, k):
        self.store, self.k = store, min(k, store.n_chunks)
        self.d = store.d

    @property
    def n_chunks(self):
        return self.k

    def chunk(self, i):
        return self.store.chunk(i)


def time_passes(train, model_path, pass_chunks, layouts):
    from streamcvm.estimators.model import load_model
    from streamcvm.data.parallel import Runner
    from streamcvm.predict.chunks import predict_chunks
    from streamcvm.problems.driver import row_stats
    from streamcvm.data.store import open_store
    est = load_model(model_path)
    store = open_store(train)
    head = Head(store, pass_chunks)
    rows = sum(store.chunk_bounds(i)[1] - store.chunk_bounds(i)[0] for i in range(head.k))
    out = []
    for name, kw in layouts:
        with Runner(**kw) as r:
            for _ in predict_chunks(est, Head(store, 4), r):      # warm-up
                pass
            t = time.perf_counter()
            n = sum(len(p.pred) for p in predict_chunks(est, head, r))
            t_pred = time.perf_counter() - t
            assert n == rows
            t = time.perf_counter()
            row_stats(store, runner=r)
            t_stats = time.perf_counter() - t
        out.append({"layout": name, "predict_pass_s": t_pred, "pass_rows": rows,
                    "chunks": head.k, "stats_pass_s": t_stats, "store_chunks": store.n_chunks})
        print(f"  {name:<22} prediction pass over {head.k} chunks ({rows:,} rows): "
              f"{t_pred:.1f} s ({t_pred / head.k * 1000:.0f} ms/chunk); row-statistics pass "
              f"over all {store.n_chunks:,} chunks: {t_stats:.1f} s", flush=True)
    return out


def train_and_evaluate(train, test, model, method, eps, limit, full_pass=False):
    res = {"method": method, "eps": eps, "full_pass": full_pass}
    exe = [sys.executable, "-m", "streamcvm.cli"]
    rc, dt, rss, out, err = limited_child(
        exe + ["train", train, "-o", model, "--method", method, "-e", eps, "-q"]
        + (["--full-pass"] if full_pass else []), limit)
    if rc != 0:
        print(err[-3000:], file=sys.stderr)
        raise SystemExit(f"training failed under the cap (exit {rc})")
    res.update(train_s=dt, train_peak_rss_mib=rss)
    print(f"train: {dt:.1f} s, peak RSS {rss:,.0f} MiB (cap {limit / 2 ** 20:,.0f} MiB)",
          flush=True)
    rc, dt, rss2, out, err = limited_child(exe + ["evaluate", test, model], limit)
    if rc != 0:
        print(err[-3000:], file=sys.stderr)
        raise SystemExit(f"evaluation failed under the cap (exit {rc})")
    acc = next(float(ln.split()[1]) for ln in out.splitlines() if ln.startswith("accuracy"))
    res.update(evaluate_s=dt, evaluate_peak_rss_mib=max(rss, rss2), test_accuracy=acc)
    print(f"evaluate (held-out 200,000 rows): accuracy {acc:.4f}, {dt:.1f} s\n{out}",
          flush=True)
    with open(os.path.join(model, "model.json")) as f:
        recs = json.load(f)["machines"]
    res["model"] = [{k: r.get(k) for k in ("core_size", "n_iter")} for r in recs]
    print(f"model: {res['model']}", flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=float, default=75e6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=os.path.join(B.cache_dir(), "big"),
                    help="where the stores are generated (kept for reruns)")
    ap.add_argument("--limit-gb", type=float, default=1.5,
                    help="address-space cap of the training and evaluation processes")
    ap.add_argument("--method", default="cvm", choices=["bvm", "cvm", "fvm"])
    ap.add_argument("--eps", default="1e-4", help="training eps (default 1e-4)")
    ap.add_argument("--full-pass", action="store_true",
                    help="train with --full-pass: violator passes over every row until one "
                         "finds none (threads; use a coarser --eps, e.g. 1e-3)")
    ap.add_argument("--pass-chunks", type=int, default=128)
    ap.add_argument("--steps", nargs="+", choices=["train", "passes"],
                    default=["train", "passes"],
                    help="what to run (default both; the store is generated either way)")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    rows = int(a.rows)
    os.makedirs(a.dir, exist_ok=True)
    print(f"command: `python tools/bench_larger_than_ram.py {' '.join(sys.argv[1:])}`  "
          f"commit {git_commit()}", flush=True)
    train, test = make_stores(a.dir, rows, a.seed)
    from streamcvm.data.store import open_store
    s = open_store(train)
    disk, raw = s.sizes()
    limit = int(a.limit_gb * 1e9)
    print(f"store {train}: {s.n:,} rows x {s.d} features, {s.n_chunks:,} chunks of "
          f"{s.chunk_rows:,}; {disk / 1e9:.2f} GB on disk, {raw / 1e9:.2f} GB raw; "
          f"training under RLIMIT_AS = {limit / 1e9:.2f} GB", flush=True)
    res = {"rows": s.n, "d": s.d, "chunks": s.n_chunks, "chunk_rows": s.chunk_rows,
           "disk_bytes": disk, "raw_bytes": raw, "limit_bytes": limit, "commit": git_commit()}

    model = os.path.join(a.dir, f"model-{a.method}-{a.eps}" + ("-fullpass" if a.full_pass else ""))
    if "train" in a.steps or not os.path.exists(model):
        res.update(train_and_evaluate(train, test, model, a.method, a.eps, limit, a.full_pass))

    if "passes" not in a.steps:
        return _dump(res, a.json)
    print("pass time (model's support vectors: a full pass costs the same per chunk):",
          flush=True)
    res["passes"] = time_passes(train, model, a.pass_chunks, [
        ("threads (2)", {"use_active": False}),
        ("LocalCluster 1 worker", {"workers": 1}),
        ("LocalCluster 2 workers", {"workers": 2}),
    ])
    p = {r["layout"]: r for r in res["passes"]}
    one, two = p["LocalCluster 1 worker"], p["LocalCluster 2 workers"]
    r_pred = two["predict_pass_s"] / one["predict_pass_s"]
    r_stats = two["stats_pass_s"] / one["stats_pass_s"]
    print(f"2 workers / 1 worker: prediction pass {r_pred:.2f}x the time, row-statistics "
          f"pass {r_stats:.2f}x", flush=True)
    _dump(res, a.json)


def _dump(res, path):
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
