#!/usr/bin/env python
"""Compare the models and predictions of two versions of streamcvm, exactly.

The acceptance check of a refactoring: the same data and parameters must
give identical saved models and identical predictions before and after.
For each side, the library of a git revision (a detached ``git worktree``
under the work folder, made once and reused) or the current working tree,
each (estimator, dataset, method) is fitted in a fresh child process whose
``PYTHONPATH`` is that side's tree (so it imports that side's ``streamcvm``;
the child checks it did), the model saved with ``streamcvm.save_model`` and
the test-set predictions and decision values with ``np.save``. Then the two
sides' outputs are compared and one line printed per (estimator, dataset,
method): "identical", or the first differences (which file or key, the
largest absolute difference).

Usage::

    python tools/compare_models.py --baseline HEAD~1 --quick
    python tools/compare_models.py --baseline becdcf6 --against HEAD --quick --datasets usps letter
    python tools/compare_models.py --baseline v0.1 --datasets ijcnn1 a9a --methods bvm
    python tools/compare_models.py --baseline HEAD --estimators classifier --workdir /tmp/cmp

Exit status: 0 when everything is identical, 1 when anything differs or a
fit failed, 2 on a usage error (e.g. a revision that is not a commit).

What is fitted (all with the library defaults except what is listed):

- classifier: ``CVMClassifier(method=M, C=1, gamma=G, random_state=0)`` for
  each ``--methods`` (bvm cvm fvm) on each ``--datasets`` (default: the
  bench_classify sets ijcnn1 a9a w8a usps letter shuttle kddcup99). The data
  are those of ``tools/bench_classify.py``: ``tools/datasets.py`` prepares
  them from the raw files (``--raw-dir``, else ``$STREAMCVM_DATA``, else
  ``../shared/data/raw``); G is the protocol's gamma (``protocol_gamma`` of
  the training rows: 1 / mean squared distance, 5,000 rows, seed 0).
  ``--quick``: 3,000 training / 1,000 test rows (``subsample_index``, seed
  0), gamma from those rows, as ``bench_classify.py --quick``; default: the
  full sets (kddcup99 then trains progressively, as in the benchmark).
- regressor: ``CVMRegressor(method=M, gamma=G, random_state=0)`` (C and mu
  "auto": the mu selection is compared too), M in cvm fvm, on cadata (the
  bench_regression set; 1,500 training / 1,000 test rows, seed 0: method
  fvm with the mu search takes ~50 s there, ~170 s on 3,000 rows).
- oneclass: ``CVMOneClass(method=M, C=1, gamma=G, random_state=0)``, M in
  cvm bvm, on the normal training rows of kddcup99 (as
  ``bench_oneclass.py``; 3,000 of them / 1,000 test rows, seed 0).
- ranker: ``CVMRanker(method=M, C=1, gamma=G, random_state=0)`` (eps its
  default), M in cvm fvm, on rank_lightgbm (as ``bench_ranking.py``: min-max
  scaled on the training rows; the first 30 queries, 410 rows, to train and
  all 768 test rows), when the side's ``streamcvm`` has CVMRanker.
- mmda: ``MMDATransformer(n_components=2, C=1, gamma=G, random_state=0)`` on
  optdigits (1,500 training / 1,000 test rows, seed 0): the saved model and
  ``transform`` of the test rows.
- surface: ``streamcvm.surface.reconstruct(P, grid=64, n_jobs=1)`` on 6,000
  of the bunny's points (seed 0): each level's coefficients, support rows
  and scalars (a local level: its node grid and blocks), the mesh's vertices
  and faces, and f at 2,000 points near the surface.
  ``--estimators`` chooses among the six (default: all).

The data are prepared once, by a child of the current tree, into
``WORKDIR/data`` (.npy, CSR as its three arrays; reused while the raw files
do not change), with gamma; both sides load those same arrays and get that
same gamma. Children run one after the other, never concurrently, with
``PYTHONHASHSEED=0``; this parent imports only the standard library.
Results are in ``WORKDIR/runs/<side>/<estimator>-<dataset>-<method>-<quick|full>/``
(``model/``, ``predict.npy``, ``decision.npy``, ``score_samples.npy``,
``info.json``), rewritten on every run.

The comparison, per (estimator, dataset, method):

- every ``.npy`` of the model folder (coefficients, support rows or their CSR
  arrays, support row ids, scaler) and the saved predictions / decision
  values: the same set of files; per array the same dtype and shape, and
  ``np.array_equal(a, b, equal_nan=True)`` (bit-for-bit values; NaN equals
  NaN). A difference reports the largest absolute difference and how many
  elements differ.
- ``model.json``: every leaf (estimator, params, kernel, classes, offset,
  C_, mu_, target type, machine records: intercept, radius2, c2, n_iter,
  core_size, eps reached, shapes, ...; training rows / features / store
  fingerprint) by exact equality (NaN equals NaN; 1 equals 1.0), and keys
  present on one side only. Ignored, because they legitimately differ
  between two runs or versions: ``created_by`` (the streamcvm version
  string), ``library_versions``, ``files`` (the per-file XXH3 checksums:
  the arrays themselves are compared), ``manifest_xxh3_128`` (model.json's
  checksum of itself, which covers the fit's wall time), and any key named ``seconds``,
  ``elapsed``, ``elapsed_s``, ``wall_s``, ``time_s``, ``finished``,
  ``date``, ``created``, ``path``, ``store``, ``feature_seconds`` (MMDA's per-feature
  fit times), ``resumed_from``, ``git``,
  ``commit``, ``revision`` (in today's format: ``training.seconds``, the fit's
  wall time, ``training.finished``, its date, ``training.store`` and
  ``training.resumed_from``, paths).
- a fit that fails on a side is an error (exit status 1); an estimator absent
  from both sides' ``streamcvm`` is reported as skipped.

The worktrees are kept under ``WORKDIR`` for the next run (and their numba
caches with them); remove one with ``git worktree remove WORKDIR/rev-<sha>``.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THIS = os.path.abspath(__file__)
TAG = "COMPARE_RESULT "
DATASETS = ["ijcnn1", "a9a", "w8a", "usps", "letter", "shuttle", "kddcup99"]
METHODS = ["bvm", "cvm", "fvm"]
ESTIMATORS = ["classifier", "regressor", "oneclass", "ranker", "mmda", "surface"]
QUICK_TRAIN, QUICK_TEST = 3000, 1000        # as bench_classify --quick
SMALL = {"regressor": (1500, 1000),         # training / test rows of the small sets
         "oneclass": (3000, 1000),          # (fvm regression: ~50 s on 1,500 rows)
         "mmda": (1500, 1000)}
SURFACE_POINTS, SURFACE_QUERIES, SURFACE_GRID = 6000, 2000, 64
RANKER_QUERIES = 30                         # training queries of rank_lightgbm
# (estimator, dataset, methods) of the other estimators, on small data
EXTRAS = {"regressor": ("cadata", ["cvm", "fvm"]),
          "oneclass": ("kddcup99", ["cvm", "bvm"]),
          "ranker": ("rank_lightgbm", ["cvm", "fvm"]),
          "mmda": ("optdigits", ["mmda"]),
          "surface": ("bunny", ["cvm"])}
CLASS_NAMES = {"classifier": "CVMClassifier", "regressor": "CVMRegressor",
               "oneclass": "CVMOneClass", "ranker": "CVMRanker",
               "mmda": "MMDATransformer", "surface": "surface"}
PREP_VERSION = 1            # bump when a preparation below changes
# model.json: top-level keys and key names (at any depth) not compared
IGNORED_TOP = ("created_by", "library_versions", "files", "manifest_xxh3_128")
IGNORED_NAMES = ("seconds", "feature_seconds", "elapsed", "elapsed_s", "wall_s", "time_s",
                 "finished", "date", "created", "path", "store", "resumed_from", "git",
                 "commit", "revision")
MAX_SHOWN = 3               # differences printed per line


# ---------------------------------------------------------------------------
# children (numpy, scipy, streamcvm are imported here only)
# ---------------------------------------------------------------------------

def _save_arrays(folder, **arrays):
    import numpy as np
    import scipy.sparse as sp
    for name, a in arrays.items():
        if sp.issparse(a):
            a = a.tocsr()
            np.save(os.path.join(folder, f"{name}.data.npy"), a.data)
            np.save(os.path.join(folder, f"{name}.indices.npy"), a.indices)
            np.save(os.path.join(folder, f"{name}.indptr.npy"), a.indptr)
            np.save(os.path.join(folder, f"{name}.shape.npy"), np.asarray(a.shape, np.int64))
        else:
            np.save(os.path.join(folder, f"{name}.npy"), np.ascontiguousarray(a))


def _load_array(folder, name):
    import numpy as np
    p = os.path.join(folder, f"{name}.npy")
    if os.path.exists(p):
        return np.load(p, allow_pickle=False)
    if not os.path.exists(os.path.join(folder, f"{name}.data.npy")):
        return None
    import scipy.sparse as sp
    get = lambda part: np.load(os.path.join(folder, f"{name}.{part}.npy"), allow_pickle=False)
    return sp.csr_matrix((get("data"), get("indices"), get("indptr")),
                         shape=tuple(int(v) for v in get("shape")))


def _data_key(spec):
    """A name for the prepared arrays: changes with the raw files."""
    import hashlib
    from tools import datasets as D
    est, ds = spec["estimator"], spec["dataset"]
    size = (f"quick{QUICK_TRAIN}-{QUICK_TEST}" if spec["quick"] else "full") \
        if est == "classifier" else f"q{RANKER_QUERIES}" if est == "ranker" \
        else f"p{SURFACE_POINTS}-{SURFACE_QUERIES}" if est == "surface" \
        else "n{}-{}".format(*SMALL[est])
    if est == "surface":
        p = _bunny_path(spec)
        st = os.stat(p)
        key = f"bunny-{hashlib.sha1(f'{st.st_size}:{st.st_mtime_ns}'.encode()).hexdigest()[:12]}"
    elif est == "ranker":
        d = os.path.join(D.raw_dir(spec.get("raw_dir")), "rank_lightgbm")
        h = hashlib.sha1(b"rank_lightgbm")
        for f in ("rank.train", "rank.test", "rank.train.query", "rank.test.query"):
            st = os.stat(os.path.join(d, f))
            h.update(f"|{f}:{st.st_size}:{st.st_mtime_ns}".encode())
        key = f"rank_lightgbm-{h.hexdigest()[:12]}"
    else:
        key = D.cache_key(ds, spec.get("raw_dir"))
    return f"{est}-{key}-{size}-p{PREP_VERSION}"


def _bunny_path(spec):
    from tools import datasets as D
    return os.path.join(D.raw_dir(spec.get("raw_dir")), "bunny", "bun_zipper.ply")


def child_prepare(spec):
    """The arrays of one (estimator, dataset) as .npy in WORKDIR/data/<key>
    (reused when present) and gamma; run with the current tree's tools/."""
    sys.path.insert(0, ROOT)
    from tools import datasets as D
    folder = os.path.join(spec["datadir"], _data_key(spec))
    info_path = os.path.join(folder, "info.json")
    if os.path.exists(info_path):
        with open(info_path) as f:
            return dict(json.load(f), dir=folder, reused=True)
    t0 = time.perf_counter()
    est, ds = spec["estimator"], spec["dataset"]
    qtr = qte = None
    if est == "classifier":         # as bench_classify._data
        Xtr, ytr, Xte, yte = D.load(ds, spec.get("raw_dir"))
        if spec["quick"]:
            tr, te = D.subsample_index(len(ytr), len(yte), QUICK_TRAIN, QUICK_TEST)
            Xtr, ytr, Xte, yte = Xtr[tr], ytr[tr], Xte[te], yte[te]
    elif est == "regressor":
        Xtr, ytr, Xte, yte = D.load(ds, spec.get("raw_dir"))
        tr, te = D.subsample_index(len(ytr), len(yte), *SMALL[est])
        Xtr, ytr, Xte, yte = Xtr[tr], ytr[tr], Xte[te], yte[te]
    elif est == "mmda":             # as bench_mmda (a subsample)
        Xtr, ytr, Xte, yte = D.load(ds, spec.get("raw_dir"))
        tr, te = D.subsample_index(len(ytr), len(yte), *SMALL[est])
        Xtr, ytr, Xte, yte = Xtr[tr], ytr[tr], Xte[te], yte[te]
    elif est == "surface":          # the bunny's points (a subsample); queries near them
        import numpy as np
        from plyfile import PlyData
        v = PlyData.read(_bunny_path(spec))["vertex"]
        P = np.column_stack([np.asarray(v[c], np.float64) for c in "xyz"])
        rng = np.random.default_rng(0)
        Xtr = P[np.sort(rng.choice(len(P), SURFACE_POINTS, replace=False))]
        diag = float(np.linalg.norm(P.max(0) - P.min(0)))
        Xte = P[rng.choice(len(P), SURFACE_QUERIES, replace=False)] + \
            rng.normal(0, 0.01 * diag, (SURFACE_QUERIES, 3))
        ytr = yte = None
    elif est == "oneclass":         # as bench_oneclass: the normal training rows
        Xtr, ytr, Xte, yte = D.load(ds, spec.get("raw_dir"))
        Xtr = Xtr[ytr == -1]
        tr, te = D.subsample_index(len(Xtr), len(yte), *SMALL[est])
        Xtr, Xte, yte = Xtr[tr], Xte[te], yte[te]
        ytr = None
    else:                           # ranker
        Xtr, ytr, qtr, Xte, yte, qte = D.load_ranking("rank_lightgbm", spec.get("raw_dir"))
        keep = qtr < RANKER_QUERIES
        Xtr, ytr, qtr = Xtr[keep], ytr[keep], qtr[keep]
    arrays = {"Xtr": Xtr, "Xte": Xte}
    for k, v in (("ytr", ytr), ("yte", yte), ("qtr", qtr), ("qte", qte)):
        if v is not None:
            arrays[k] = v
    import scipy.sparse as sp
    info = {"estimator": est, "dataset": ds, "n_train": int(Xtr.shape[0]),
            "n_test": int(Xte.shape[0]), "d": int(Xtr.shape[1]), "sparse": sp.issparse(Xtr),
            "gamma": float(D.protocol_gamma(Xtr)) if est != "surface" else 0.0}
    tmp = f"{folder}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    _save_arrays(tmp, **arrays)
    with open(os.path.join(tmp, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    shutil.rmtree(folder, ignore_errors=True)
    os.rename(tmp, folder)
    return dict(info, dir=folder, reused=False, prepare_s=time.perf_counter() - t0)


def child_fit(spec):
    """Fit one (estimator, method) with the streamcvm of spec["tree"]; save the
    model, predictions and decision values into spec["out"]."""
    tree = os.path.realpath(spec["tree"])
    sys.path.insert(0, tree)
    import numpy as np
    import streamcvm
    got = os.path.realpath(streamcvm.__file__)
    if not got.startswith(tree + os.sep):
        raise RuntimeError(f"imported streamcvm from {got}, not from {tree}")
    name = CLASS_NAMES[spec["estimator"]]
    if name == "surface":
        return _fit_surface(spec, tree)
    try:
        cls = getattr(streamcvm, name)
    except AttributeError:
        return {"skipped": f"streamcvm of {tree} has no {name}"}
    try:
        save_model = streamcvm.save_model
    except AttributeError:              # older trees: not exported at the top
        from streamcvm.model import save_model
    d = spec["data"]
    Xtr, ytr, qtr = _load_array(d, "Xtr"), _load_array(d, "ytr"), _load_array(d, "qtr")
    Xte = _load_array(d, "Xte")
    kw = dict(method=spec["method"], gamma=spec["gamma"], random_state=0)
    if spec["estimator"] == "mmda":     # MMDATransformer has no method
        kw = dict(n_components=2, gamma=spec["gamma"], random_state=0)
    if spec["estimator"] != "regressor":
        kw["C"] = 1.0
    est = cls(**kw)
    t = time.perf_counter()
    if spec["estimator"] == "ranker":
        est.fit(Xtr, ytr, qtr)
    elif spec["estimator"] == "oneclass":
        est.fit(Xtr)
    else:
        est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t
    out = spec["out"]
    save_model(est, os.path.join(out, "model"))
    if hasattr(est, "transform"):
        np.save(os.path.join(out, "transform.npy"), np.asarray(est.transform(Xte)))
    if hasattr(est, "predict"):
        np.save(os.path.join(out, "predict.npy"), np.asarray(est.predict(Xte)))
    if hasattr(est, "decision_function"):
        np.save(os.path.join(out, "decision.npy"), np.asarray(est.decision_function(Xte)))
    if hasattr(est, "score_samples"):
        np.save(os.path.join(out, "score_samples.npy"), np.asarray(est.score_samples(Xte)))
    info = {"library": os.path.dirname(os.path.dirname(got)), "fit_s": fit_s,
            "n_iter": int(getattr(est, "n_iter_", -1)),
            "core_set_size": int(getattr(est, "core_set_size_", -1))}
    with open(os.path.join(out, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def _flatten(obj, prefix=()):
    """{path tuple: leaf} of a JSON value."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(_flatten(v, prefix + (str(k),)))
        return out if out or not prefix else {prefix: {}}
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(_flatten(v, prefix + (i,)))
        return out if out or not prefix else {prefix: []}
    return {prefix: obj}


def _ignored(path):
    if path and path[0] in IGNORED_TOP:
        return True
    return any(isinstance(k, str) and k in IGNORED_NAMES for k in path)


def _path_str(path):
    s = ""
    for k in path:
        s += f"[{k}]" if isinstance(k, int) else (f".{k}" if s else k)
    return s


def _same_leaf(a, b):
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True                     # NaN, NaN
    return a == b and isinstance(a, bool) == isinstance(b, bool)     # 1 == 1.0, not True


def _compare_json(pa, pb, diffs):
    with open(pa) as f:
        ja = _flatten(json.load(f))
    with open(pb) as f:
        jb = _flatten(json.load(f))
    for path in sorted(set(ja) | set(jb), key=lambda p: [str(k) for k in p]):
        if _ignored(path):
            continue
        name = "model.json " + _path_str(path)
        if path not in ja or path not in jb:
            diffs.append(f"{name} only in {'against' if path not in ja else 'baseline'}")
            continue
        a, b = ja[path], jb[path]
        if _same_leaf(a, b):
            continue
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
                not isinstance(a, bool) and not isinstance(b, bool):
            diffs.append(f"{name}: {a!r} vs {b!r} (abs diff {abs(a - b):.3g})")
        else:
            diffs.append(f"{name}: {str(a)[:60]!r} vs {str(b)[:60]!r}")


def _npy_files(folder):
    out = {}
    for sub, label in (("", ""), ("model", "model/")):
        d = os.path.join(folder, sub)
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".npy"):
                    out[label + f[:-4]] = os.path.join(d, f)
    return out


def _compare_arrays(name, a, b, diffs):
    import numpy as np
    if a.dtype != b.dtype:
        diffs.append(f"{name}: dtype {a.dtype} vs {b.dtype}")
        if a.shape != b.shape or a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
            return
    if a.shape != b.shape:
        diffs.append(f"{name}: shape {a.shape} vs {b.shape}")
        return
    try:
        same = np.array_equal(a, b, equal_nan=True)
    except TypeError:                   # no NaN in this dtype
        same = np.array_equal(a, b)
    if same:
        return
    if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
        x, y = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(x) & np.isnan(y)
        ne = (x != y) & ~both_nan
        with np.errstate(invalid="ignore"):
            dev = np.abs(x - y)[ne]
        top = np.nanmax(dev) if dev.size and not np.all(np.isnan(dev)) else float("nan")
        diffs.append(f"{name}: max abs diff {top:.3g} ({int(ne.sum()):,} of {a.size:,} "
                     f"differ, first at {int(np.flatnonzero(ne.ravel())[0])})")
    else:
        diffs.append(f"{name}: {int((a != b).sum()):,} of {a.size:,} differ")


def _fit_surface(spec, tree):
    """streamcvm.surface.reconstruct on the prepared points: each level's
    machine (arrays and scalars, in model/ as for an estimator), the mesh, and
    f at the query points."""
    import numpy as np
    from streamcvm import surface as S       # both layouts: streamcvm.surface is public
    d, out = spec["data"], spec["out"]
    P, Q = _load_array(d, "Xtr"), _load_array(d, "Xte")
    t = time.perf_counter()
    V, F, model = S.reconstruct(P, grid=SURFACE_GRID, n_jobs=1)
    fit_s = time.perf_counter() - t
    folder = os.path.join(out, "model")
    os.makedirs(folder)
    rec = {"center": model.center.tolist(), "scale": model.scale, "params": model.params,
           "levels": []}
    for i, level in enumerate(model.levels):
        if isinstance(level, tuple):        # a global level: (kernel, machine)
            k, m = level
            rec["levels"].append({"kernel": [k.name, k.gamma, k.coef0, k.degree],
                                  "intercept": float(m.intercept),
                                  "radius2": float(m.radius2), "c2": float(m.c2),
                                  "n_iter": int(m.n_iter), "core_size": int(m.core_size)})
            arrays = {"coef": m.coef, "sv": m.sv, "ids": m.sv_ids}
        else:                               # a local level: blocks over a node grid
            rec["levels"].append({"local": {"sigma": level.sigma, "L": level.L,
                                            "origin": level.origin.tolist()}})
            arrays = {n: getattr(level, n) for n in ("node_block", "bptr", "sv", "coef",
                                                     "intercept")}
        for name, arr in arrays.items():
            np.save(os.path.join(folder, f"level{i}_{name}.npy"), np.asarray(arr))
    with open(os.path.join(folder, "model.json"), "w") as f:
        json.dump(rec, f, indent=1, default=str)
    np.save(os.path.join(out, "mesh_vertices.npy"), V)
    np.save(os.path.join(out, "mesh_faces.npy"), F)
    np.save(os.path.join(out, "f.npy"), model.f(Q))
    info = {"library": os.path.dirname(os.path.dirname(os.path.realpath(S.__file__))),
            "fit_s": fit_s, "n_iter": int(sum(lv[1].n_iter for lv in model.levels
                                              if isinstance(lv, tuple))),
            "core_set_size": int(model.n_support)}
    with open(os.path.join(out, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def child_compare(spec):
    import numpy as np
    a, b = spec["a"], spec["b"]
    diffs = []
    fa, fb = _npy_files(a), _npy_files(b)
    for k in sorted(set(fa) | set(fb)):
        if k not in fa or k not in fb:
            diffs.append(f"{k}.npy only in {'against' if k not in fa else 'baseline'}")
            continue
        _compare_arrays(k, np.load(fa[k], allow_pickle=False), np.load(fb[k], allow_pickle=False),
                        diffs)
    ma, mb = os.path.join(a, "model", "model.json"), os.path.join(b, "model", "model.json")
    if os.path.exists(ma) and os.path.exists(mb):
        _compare_json(ma, mb, diffs)
    else:
        diffs.append("model.json missing on " + ("both sides" if not os.path.exists(ma) and
                                                  not os.path.exists(mb) else
                                                  "baseline" if not os.path.exists(ma)
                                                  else "against"))
    return {"diffs": diffs, "n_arrays": len(set(fa) & set(fb))}


def child_main(spec):
    here = os.path.dirname(THIS)        # tools/ (its datasets.py etc.): not a top-level path
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        out = {"prepare": child_prepare, "fit": child_fit,
               "compare": child_compare}[spec["kind"]](spec)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    print(TAG + json.dumps(out), flush=True)


# ---------------------------------------------------------------------------
# parent (standard library only)
# ---------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_child(spec, timeout, pythonpath=ROOT, cwd=None):
    """This script with ``--child SPEC`` in a fresh process whose PYTHONPATH
    starts with ``pythonpath``: the JSON it prints after TAG, or an error."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join([pythonpath] + ([env["PYTHONPATH"]]
                                                        if env.get("PYTHONPATH") else []))
    cmd = [sys.executable, THIS, "--child", json.dumps(spec)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g} s", "process_s": time.perf_counter() - t0}
    res = None
    for line in p.stdout.splitlines():
        if line.startswith(TAG):
            res = json.loads(line[len(TAG):])
    if res is None:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        res = {"error": f"child exited {p.returncode}: {tail[:300]}"}
    if "error" in res:
        tb = "\n    ".join(p.stderr.strip().splitlines()[-8:])
        log(f"  ERROR {res['error']}" + (f"\n    {tb}" if tb else ""))
    res["process_s"] = time.perf_counter() - t0
    return res


def die(msg):
    """A usage / setup error: the message and exit status 2."""
    print(f"compare_models: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                          timeout=120)


def resolve(rev):
    r = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if r.returncode != 0:
        die(f"{rev!r} is not a commit of {ROOT}")
    return r.stdout.strip()


def worktree(rev, workdir):
    """(label, key, tree path) of a detached worktree of ``rev`` under ``workdir``,
    made once and reused."""
    sha = resolve(rev)
    path = os.path.join(workdir, f"rev-{sha[:12]}")
    if not os.path.isdir(os.path.join(path, "streamcvm")):
        if os.path.exists(path):
            die(f"{path} exists but is not a worktree of {sha[:12]}; remove it or choose "
                "another --workdir")
        os.makedirs(workdir, exist_ok=True)
        log(f"git worktree add --detach {path} {sha[:12]}")
        r = git("worktree", "add", "--detach", path, sha)
        if r.returncode != 0:
            die(f"git worktree add failed: {r.stderr.strip()}")
    else:
        head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        if head != sha:
            die(f"{path} is at {head[:12]}, not {sha[:12]}")
        if subprocess.run(["git", "-C", path, "status", "--porcelain", "--untracked-files=no"],
                          capture_output=True, text=True).stdout.strip():
            log(f"WARNING: the worktree {path} has local changes")
    return f"{rev} = {sha[:12]}", f"rev-{sha[:12]}", path


def current_tree():
    sha = git("rev-parse", "--short=12", "HEAD").stdout.strip() or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return f"working tree {ROOT} ({sha}{'-dirty' if dirty else ''})", "worktree", ROOT


def format_line(est, ds, m, status):
    return f"{est:<10} {ds:<13} {m:<4} {status}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", metavar="REV", help="git revision before (required)")
    ap.add_argument("--against", metavar="REV2",
                    help="git revision after (default: the current working tree)")
    ap.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS, metavar="NAME",
                    help=f"classifier datasets (default: {' '.join(DATASETS)})")
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS,
                    help="classifier methods (default: bvm cvm fvm)")
    ap.add_argument("--estimators", nargs="+", default=ESTIMATORS, choices=ESTIMATORS,
                    help="which estimators (default: all)")
    ap.add_argument("--quick", action="store_true",
                    help=f"classifier: {QUICK_TRAIN:,} training / {QUICK_TEST:,} test rows "
                         "(seed 0) instead of the full sets")
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/compare",
                    help="worktrees, prepared data and results (default %(default)s)")
    ap.add_argument("--raw-dir", help="raw data directory (default $STREAMCVM_DATA or "
                                      "../shared/data/raw)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child (3600)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep a git revision's results from an earlier run in WORKDIR "
                         "(same prepared data) instead of fitting again: a commit's fits "
                         "are deterministic. Run e.g. --baseline X --against X --reuse "
                         "first to fit the baseline alone")
    a = ap.parse_args(argv)
    if a.child:
        child_main(json.loads(a.child))
        return 0
    if not a.baseline:
        ap.error("--baseline REV is required")
    t_start = time.perf_counter()
    workdir = os.path.abspath(a.workdir)
    os.makedirs(workdir, exist_ok=True)
    sides = [worktree(a.baseline, workdir),
             worktree(a.against, workdir) if a.against else current_tree()]
    if sides[0][2] == sides[1][2]:
        log("note: both sides are the same tree")
    for what, (label, _, path) in zip(("baseline", "against"), sides):
        print(f"{what}: {label}  [{path}]")
    if "classifier" in a.estimators:
        print(f"classifier: {'QUICK (3,000 train / 1,000 test rows)' if a.quick else 'full sets'}"
              f" of {' '.join(a.datasets)}, methods {' '.join(a.methods)}")
    print(f"workdir: {workdir}", flush=True)
    jobs = []           # (estimator, dataset, methods)
    if "classifier" in a.estimators:
        jobs += [("classifier", ds, a.methods) for ds in a.datasets]
    jobs += [(e, *EXTRAS[e]) for e in ESTIMATORS[1:] if e in a.estimators]
    mode = "quick" if a.quick else "full"
    counts = {"identical": 0, "different": 0, "error": 0, "skipped": 0}
    for est, ds, methods in jobs:
        log(f"{est} {ds}: preparing data ...")
        prep = run_child(dict(kind="prepare", estimator=est, dataset=ds, quick=a.quick,
                              raw_dir=a.raw_dir, datadir=os.path.join(workdir, "data")),
                         a.timeout)
        if "error" in prep:
            for m in methods:
                print(format_line(est, ds, m, f"ERROR preparing data: {prep['error']}"),
                      flush=True)
                counts["error"] += 1
            continue
        log(f"  {prep['n_train']:,} train / {prep['n_test']:,} test rows, d={prep['d']}, "
            f"gamma={prep['gamma']:.6g}{' (cached)' if prep.get('reused') else ''}")
        for m in methods:
            res, outs = [], []
            for label, key, tree in sides:
                out = os.path.join(workdir, "runs", key,
                                   f"{est}-{ds}-{m}-{mode if est == 'classifier' else 'small'}")
                done = os.path.join(out, "info.json")
                if a.reuse and key != "worktree" and os.path.exists(done):
                    with open(os.path.join(out, "spec.json")) as f:
                        same = json.load(f).get("data") == prep["dir"]
                    if same:
                        log(f"  {m} with {label}: reused {out}")
                        with open(done) as f:
                            res.append(json.load(f))
                        outs.append(out)
                        continue
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                with open(os.path.join(out, "spec.json"), "w") as f:
                    json.dump({"data": prep["dir"], "gamma": prep["gamma"]}, f)
                log(f"  {m} with {label} ...")
                r = run_child(dict(kind="fit", tree=tree, estimator=est, method=m,
                                   data=prep["dir"], gamma=prep["gamma"], out=out),
                              a.timeout, pythonpath=tree, cwd=out)
                if "fit_s" in r:
                    log(f"    fit {r['fit_s']:.2f} s (process {r['process_s']:.1f} s), "
                        f"core {r['core_set_size']}, {r['n_iter']} iterations")
                res.append(r)
                outs.append(out)
            errs = [f"{w}: {r['error']}" for w, r in zip(("baseline", "against"), res)
                    if "error" in r]
            skipped = [w for w, r in zip(("baseline", "against"), res) if "skipped" in r]
            if errs:
                status, kind = "ERROR " + "; ".join(errs), "error"
            elif len(skipped) == 2:
                status, kind = f"skipped ({res[0]['skipped']})", "skipped"
            elif skipped:
                status, kind = f"DIFFERENT: {CLASS_NAMES[est]} missing in {skipped[0]}", \
                    "different"
            else:
                c = run_child(dict(kind="compare", a=outs[0], b=outs[1]), a.timeout)
                if "error" in c:
                    status, kind = f"ERROR comparing: {c['error']}", "error"
                elif not c["diffs"]:
                    status, kind = f"identical ({c['n_arrays']} arrays + model.json)", \
                        "identical"
                else:
                    d = c["diffs"]
                    more = f"; ... {len(d) - MAX_SHOWN} more" if len(d) > MAX_SHOWN else ""
                    status, kind = "DIFFERENT: " + "; ".join(d[:MAX_SHOWN]) + more, "different"
            counts[kind] += 1
            print(format_line(est, ds, m, status), flush=True)
    total = time.perf_counter() - t_start
    print(f"\n{counts['identical']} identical, {counts['different']} different, "
          f"{counts['error']} errors, {counts['skipped']} skipped; {total:.0f} s")
    return 1 if counts["different"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
