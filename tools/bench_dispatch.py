"""The exact / sampled choice of ``run_solver`` against the alternatives,
in one process, on generated data held in memory.

For each data set and size, the defaults of ``CVMClassifier`` are fitted
with the choice made four ways, in turn (``--reps`` rounds, interleaved, so
that the load of a shared machine falls on all of them alike):

- ``model``: the cost model (``streamcvm.problems.dispatch``, the default);
- ``fixed``: the rule it replaced (exact from the start on at most 16,384
  rows, or 65,536 rows of at most 2M values; else hand over at |S| >= m / 100);
- ``sampled``: never the exact pass;
- ``exact``: the exact pass at once wherever it applies;
- ``default``: whatever the library imported does, unpatched (to time
  another revision: ``PYTHONPATH=<its tree> python tools/bench_dispatch.py
  --ways default``).

It prints each fit's time, its error on held-out rows (clean labels), its
core-set size and, per solve, the path taken, the core-set size it was
chosen at (``dispatch`` in ``history_``) and the solver's clock at the
solve's end (a warm chain of stages shares one clock), then the median time
per way.

    python tools/bench_dispatch.py                      # the sets below, 1M rows
    python tools/bench_dispatch.py --sets clean4 --rows 200K 2M --reps 3 --json out.json

Sets: ``clean4``: the 4-feature Gaussian mixture, noise 0.8 (1.7% Bayes-ish
error, a few thousand support vectors); ``boundary``: the 4-feature curved
boundary without label noise (``make_synthetic.py boundary``); ``mixture``:
the 22-feature noisy mixture of ``bench_scale_accuracy.py``.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

# after PYTHONPATH and the installed package: --ways default times the library
# PYTHONPATH names
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SETS = {"clean4": ("gaussian", 4, {"noise": 0.8}),
        "boundary": ("boundary", 4, {}),
        "mixture": ("gaussian", 22, {})}
WAYS = ("model", "fixed", "sampled", "exact", "default")


def rows_arg(text):
    t = text.upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(t[-1], 1)
    return int(float(t[:-1] if t[-1] in "KM" else t) * mult)


def choose(way):
    """Set the dispatch rule of ``way``; returns the function restoring it."""
    if way == "default":
        return lambda: None
    from streamcvm.problems import dispatch
    model = dispatch.StepCosts.exact_cheaper

    def fixed(self, core):
        cells = self.values * self.rows
        return core * 100 >= self.rows or (core == 0 and (
            self.rows <= 16384 or (self.rows <= 65536 and cells <= 2_000_000)))
    dispatch.StepCosts.exact_cheaper = {"model": model, "fixed": fixed,
                                        "sampled": lambda self, core: False,
                                        "exact": lambda self, core: True}[way]

    def restore():
        dispatch.StepCosts.exact_cheaper = model
    return restore


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", choices=sorted(SETS), default=list(SETS))
    ap.add_argument("--rows", type=rows_arg, nargs="+", default=[1_000_000])
    ap.add_argument("--test-rows", type=rows_arg, default=100_000)
    ap.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS[:4]))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    from streamcvm import CVMClassifier
    from streamcvm.data.synthetic import blocks
    import subprocess
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        rev = "?"
    print(f"command: python tools/bench_dispatch.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    import streamcvm
    print(f"commit: {rev} (tools), library from {os.path.dirname(os.path.dirname(streamcvm.__file__))}, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%S')}, {os.cpu_count()} CPUs", flush=True)
    out = []
    for name in a.sets:
        kind, d, kw = SETS[name]
        for n in a.rows:
            parts = list(blocks(kind, n + a.test_rows, d=d, seed=3, **kw))
            X = np.concatenate([p[0] for p in parts])
            y = np.concatenate([p[1] for p in parts])
            Xt, yt, X, y = X[n:], y[n:], X[:n], y[:n]
            CVMClassifier().fit(X[:3000], y[:3000])         # compile outside the timings
            for r in range(a.reps):
                for way in a.ways:
                    restore = choose(way)
                    try:
                        t = time.perf_counter()
                        m = CVMClassifier().fit(X, y)
                        sec = time.perf_counter() - t
                    finally:
                        restore()
                    err = float(np.mean(m.predict(Xt) != yt))
                    h = m.machines_[0].history
                    paths = [(r_.get("stage_rows", n), r_["dispatch"]["path"],
                              r_["dispatch"]["core_size"], round(r_.get("elapsed", 0.0), 1))
                             for r_ in h if "dispatch" in r_]
                    rec = {"set": name, "rows": n, "way": way, "rep": r, "fit_s": sec,
                           "test_error": err, "core": int(m.machines_[0].core_size),
                           "paths": paths}
                    out.append(rec)
                    print(f"{name} {n:,} {way:>7}: fit {sec:6.1f} s, error {100 * err:.3f}%, "
                          f"core {rec['core']:,}, paths {paths}", flush=True)
            for way in a.ways:
                ts = [o["fit_s"] for o in out if o["set"] == name and o["rows"] == n
                      and o["way"] == way]
                es = [o["test_error"] for o in out if o["set"] == name and o["rows"] == n
                      and o["way"] == way]
                print(f"  {name} {n:,} {way:>7}: median {np.median(ts):.1f} s "
                      f"({', '.join(f'{t:.1f}' for t in ts)}), error {100 * np.mean(es):.3f}%",
                      flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
