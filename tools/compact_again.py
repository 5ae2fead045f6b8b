#!/usr/bin/env python
"""The shared compaction of a saved multi-class model, run again with other
options: would a larger B, more fit rows or more check rows pass?

A classifier with many machines gets one basis for all of them after its
fit (``CVMClassifier._compact_fitted``, docs/solvers.md "Compact
expansions"). This script loads a ``streamcvm train`` model folder, drops
whatever compact basis it has, and runs that step again on its training
store with the options given (``--option NAME=VALUE``, a value in JSON:
``compact_sizes=[4096,8192]``, ``compact_check_rows=50000``). It prints
each B tried (labels equal to the full model's, rows the basis fixed and
broke, passed or not), the decision, the seconds and the peak RSS of the
process. The model folder is not changed.

Usage::

    python tools/compact_again.py MODEL TRAIN.zarr --option compact_check_rows=50000 \\
        --option compact_fit_rows=16384 --json /tmp/streamcvm-bench/compact_again.json
"""
import argparse
import json
import resource
import sys
import time

import benchlib as B

B.use_source_tree()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a streamcvm train model folder of a classifier")
    ap.add_argument("store", help="its training store")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="an option of streamcvm.options.Options (JSON value); repeatable")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    changes = {}
    for item in a.option:
        name, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--option {item!r}: expected NAME=VALUE")
        try:
            v = json.loads(value)
        except json.JSONDecodeError:
            ap.error(f"--option {item!r}: the value is not JSON")
        changes[name] = tuple(v) if isinstance(v, list) else v
    from streamcvm import CVMClassifier, open_store
    from streamcvm.estimators.model import load_model
    from streamcvm.options import Options
    from streamcvm.problems.driver import Solve
    bench_run = B.BenchRun(packages=("numba", "numpy"))
    est = load_model(a.model)
    if not isinstance(est, CVMClassifier):
        raise SystemExit(f"compact_again.py: {a.model} is a {type(est).__name__}, not a "
                         "CVMClassifier")
    store = open_store(a.store)
    try:
        opts = Options().but(**changes)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"compact_again.py: {e}")
    for m in est.machines_:
        m.compact, m.compact_info = None, None
    solve = Solve(method="bvm", eps="auto", n_jobs=a.threads, options=opts)
    t = time.perf_counter()
    est._compact_fitted(store, a.seed, solve, est.classes_)
    seconds = time.perf_counter() - t
    info = dict(est.machines_[0].compact_info)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("\n".join(bench_run.header))
    print(f"options: {changes or 'the defaults'}")
    for tr in info.get("tried", []):
        print(f"  B = {tr['B']:,}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float)
                                                 else f"{k} {v}" for k, v in tr.items()
                                                 if k != "B"))
    print(f"decision: {info.get('decision')}")
    print(f"{seconds:.1f} s, peak RSS {peak / 2 ** 20:,.0f} MB, "
          f"{info.get('check_rows', 0):,} check rows, {info['support_vectors']:,} support rows")
    if a.json:
        shown = {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}
        bench_run.write(a.json, model=a.model, store=a.store, options=shown, seconds=seconds,
                      peak_rss=peak, record=info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
