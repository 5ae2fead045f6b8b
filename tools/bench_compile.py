"""First-use cost of each entry point: numba's compile on a fresh install.

Every ``@njit`` kernel of streamcvm is cached on disk (``cache=True``), so
what a user waits for once, after ``pip install``, is the compile of the
kernels the first run needs. For each entry point this runs a child process
with an empty numba cache (``NUMBA_CACHE_DIR`` set to a new folder: *cold*,
as on a fresh install), then a second child on the same folder (*warm*), and
reports the entry point's wall time in both, their difference (the first-use
overhead) and the CPU seconds numba spent compiling in the cold child (from
numba's ``numba:compile`` events, top-level compiles only, thread CPU time:
a busy machine inflates it less than wall time).

Entry points (data prepared in a separate setup child, so its own kernels do
not count): ``train-memory`` (``CVMClassifier().fit(X, y)``), ``train-store``
(the same from a Zarr store), ``predict`` (a saved model on the test rows),
``features`` (``MMDATransformer(n_components=2)`` fit and transform),
``surface`` (``surface.reconstruct`` on a 5,000-point torus), ``ingest``
(an svmlight file into a store). Data: ijcnn1 with ``--raw-dir``, else a
generated 50,000 x 22 Gaussian mixture.

``--baseline REV`` runs the same children on another commit's tree (a git
worktree), one after the other with this tree's, so the two columns come
from one run.

    python tools/bench_compile.py --raw-dir ../shared/data/raw --baseline HEAD~3
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib

ENTRIES = ("train-memory", "train-store", "predict", "features", "surface", "ingest")


# -- the child ---------------------------------------------------------------

def _compile_meter():
    """Thread CPU seconds of numba's top-level compiles, by function."""
    from numba.core import event
    starts, top, depth = {}, {}, [0]

    class Meter(event.Listener):
        def on_start(self, ev):
            depth[0] += 1
            starts[id(ev.data["dispatcher"]), str(ev.data["args"])] = time.thread_time()

        def on_end(self, ev):
            depth[0] -= 1
            d = ev.data["dispatcher"]
            t0 = starts.pop((id(d), str(ev.data["args"])), None)
            if t0 is not None and depth[0] == 0:
                name = f"{d.py_func.__module__}.{d.py_func.__qualname__}"
                top[name] = top.get(name, 0.0) + time.thread_time() - t0

    event.register("numba:compile", Meter())
    return top


def _torus(n, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    u, v = rng.uniform(0, 2 * np.pi, (2, n))
    R, r = 1.0, 0.35
    return np.column_stack([(R + r * np.cos(v)) * np.cos(u), (R + r * np.cos(v)) * np.sin(u),
                            r * np.sin(v)]).astype(np.float64)


def child(spec):
    sys.path.insert(0, spec["tree"])
    import numpy as np
    work = spec["work"]
    entry = spec["entry"]
    if entry == "setup":
        import streamcvm
        from streamcvm import CVMClassifier
        X, y = _data(spec)
        from streamcvm.data import synthetic
        synthetic.write_text(os.path.join(work, "train.svm"), "gaussian", 20000)
        np.save(os.path.join(work, "X.npy"), X)
        np.save(os.path.join(work, "y.npy"), y)
        _write_store(X, y, os.path.join(work, "train.zarr"))
        streamcvm.save_model(CVMClassifier().fit(X, y), os.path.join(work, "model"))
        return {}
    X = np.load(os.path.join(work, "X.npy"))
    y = np.load(os.path.join(work, "y.npy"))
    top = _compile_meter()
    t0 = time.perf_counter()
    import streamcvm
    if entry == "train-memory":
        streamcvm.CVMClassifier().fit(X, y)
    elif entry == "train-store":
        streamcvm.CVMClassifier().fit(os.path.join(work, "train.zarr"))
    elif entry == "predict":
        streamcvm.load_model(os.path.join(work, "model")).predict(X)
    elif entry == "features":
        streamcvm.MMDATransformer(n_components=2).fit(X[:20000], y[:20000]).transform(X)
    elif entry == "surface":
        from streamcvm.apps import surface
        surface.reconstruct(_torus(5000))
    elif entry == "ingest":
        out = os.path.join(work, f"ingest-{os.getpid()}.zarr")
        streamcvm.ingest([os.path.join(work, "train.svm")], out)
        shutil.rmtree(out, ignore_errors=True)
    wall = time.perf_counter() - t0
    return {"wall": wall, "compile_cpu": sum(top.values()),
            "top": sorted(((round(v, 2), k) for k, v in top.items()), reverse=True)[:5]}


def _data(spec):
    import numpy as np
    if spec.get("raw_dir"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import datasets
        Xtr, ytr, _, _ = datasets.load("ijcnn1", spec["raw_dir"])
        return np.asarray(Xtr, np.float32), np.asarray(ytr)
    from streamcvm.data import synthetic
    X, y = synthetic.gaussian_block(0, 50000)
    return np.asarray(X, np.float32), np.asarray(y)


def _write_store(X, y, path):
    from streamcvm.data.writer import StoreWriter
    with StoreWriter(path, X.shape[1], sparse=False, fmt="zarr") as w:
        for i in range(0, len(y), 8192):
            w.append(X[i:i + 8192], y[i:i + 8192])
        w.close({})


# -- the parent --------------------------------------------------------------

def run_child(spec, cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=spec["tree"])
    env.pop("NUMBA_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{spec['entry']} ({spec['tree']}): {benchlib.stderr_tail(r.stderr, 5)}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(tree, label, entries, raw_dir, root):
    work = tempfile.mkdtemp(prefix=f"compile-{label}-", dir=root)
    base = {"tree": tree, "work": work, "raw_dir": raw_dir}
    run_child(dict(base, entry="setup"), os.path.join(work, "cache-setup"))
    rows = []
    for entry in entries:
        cache = os.path.join(work, f"cache-{entry}")
        cold = run_child(dict(base, entry=entry), cache)
        warm = run_child(dict(base, entry=entry), cache)
        rows.append({"tree": label, "entry": entry, "cold": cold["wall"], "warm": warm["wall"],
                     "first_use": cold["wall"] - warm["wall"],
                     "compile_cpu": cold["compile_cpu"], "top": cold["top"]})
        benchlib.log(f"{label} {entry}: cold {cold['wall']:.1f} s, warm {warm['wall']:.1f} s, "
                     f"compile CPU {cold['compile_cpu']:.1f} s  {cold['top'][:3]}")
    shutil.rmtree(work, ignore_errors=True)
    return rows


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    ap = benchlib.parser(__doc__)
    ap.add_argument("--raw-dir", default=None, help="the public datasets (ijcnn1); "
                    "default: a generated 50,000 x 22 mixture")
    ap.add_argument("--entries", nargs="+", default=list(ENTRIES), choices=ENTRIES)
    ap.add_argument("--baseline", default=None, help="also measure this commit's tree")
    ap.add_argument("--report", default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="streamcvm-compile-")
    trees = [(benchlib.ROOT, benchlib.git_commit())]
    if a.baseline:
        sha, path = benchlib.baseline_worktree(a.baseline)
        trees.append((path, sha))
    rows = []
    for tree, label in trees:
        rows += measure(tree, label, a.entries, a.raw_dir, root)
    shutil.rmtree(root, ignore_errors=True)
    head = ["tree", "entry point", "cold s", "warm s", "first use s", "compile CPU s",
            "largest compiles (CPU s)"]
    print(benchlib.table(head, [[r["tree"], r["entry"], f"{r['cold']:.1f}", f"{r['warm']:.1f}",
                                 f"{r['first_use']:.1f}", f"{r['compile_cpu']:.1f}",
                                 ", ".join(f"{k.split('.')[-1]} {v}" for v, k in r["top"][:3])]
                                for r in rows], left=("tree", "entry point", "largest compiles (CPU s)")))
    print(f"\n{benchlib.command_line()}  # {benchlib.git_commit()}, {benchlib.now()}")
    if a.report:
        benchlib.save_json(a.report, rows)


if __name__ == "__main__":
    main()
