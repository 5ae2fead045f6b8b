#!/usr/bin/env python
"""Memory against n: train on generated stores of growing size, same eps.

Generates (once, cached in ``--workdir``) Gaussian-mixture stores of each
size in ``--rows`` (22 features, the same generator and seed, so the small
store is the first rows of the big one's distribution), then trains on
each with ``streamcvm train STORE -o MODEL -e EPS --method M`` in a fresh
child process and reports the child's peak RSS (``os.wait4``'s
``ru_maxrss``, the child alone), its wall time, the core-set size and the
ratio of each peak RSS to the smallest store's. The store is never loaded
whole: training reads random chunks through the ChunkPool, and ``gamma``
comes from a sample of at most 64 chunks.

``--task regression``: Friedman #1 stores (10 features) instead, trained
by ``streamcvm train --task regression -c C --mu MU`` (CVMRegressor, cvm);
each model is then scored by ``streamcvm evaluate`` on a held-out generated
store (100,000 rows, seed 12345: another random stream of the same
distribution), for its RMSE and R^2.

Usage::

    python tools/bench_scale.py --task regression --rows 1e6 1e7 --C 1e4 --mu 0.02
    python tools/bench_scale.py                          # 1M and 100M rows (~8 GB on disk)
    python tools/bench_scale.py --rows 1e6 1e7 --eps 1e-3 --json out.json
"""
import argparse
import json
import os
import sys

import benchlib as B     # standard library only
from benchlib import HERE


def run_measured(cmd):
    """Run ``cmd``: (wall s, peak RSS bytes of that child alone, stdout)."""
    r = B.run_timed(cmd)
    if r["rc"] != 0:
        raise SystemExit(f"failed ({r['rc']}): {' '.join(cmd)}\n{r['stderr']}")
    return r["wall"], r["rss"], r["stdout"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", type=float, default=[1e6, 1e8])
    ap.add_argument("--eps", default="1e-4", help="the same for every size (default 1e-4)")
    ap.add_argument("--method", default=None, help="default: bvm (classification), cvm")
    ap.add_argument("--task", choices=["classification", "regression"], default="classification")
    ap.add_argument("--C", default=None, help="regression: C (default 1e4)")
    ap.add_argument("--mu", default="0.02", help="regression: mu (default 0.02)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/scale")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    reg = a.task == "regression"
    a.method = a.method or ("cvm" if reg else "bvm")
    kind = "friedman1" if reg else "gaussian"
    os.makedirs(a.workdir, exist_ok=True)
    py = sys.executable
    commit = B.git_commit(dirty=False)
    print(f"command: `python tools/bench_scale.py {' '.join(sys.argv[1:])}`  commit {commit}")
    res = []
    tag = "friedman1_d10" if reg else "gaussian_d22"

    def make(n, seed, path):
        if not os.path.exists(path):
            print(f"generating {n:,} rows -> {path} ...", flush=True)
            run_measured([py, os.path.join(HERE, "make_synthetic.py"), kind, "-n", str(n),
                          "-o", path, "--seed", str(seed), "-q"])
    test = os.path.join(a.workdir, f"{tag}_s12345_100000.zarr")
    if reg:
        make(100_000, 12345, test)
    for n in (int(r) for r in a.rows):
        store = os.path.join(a.workdir, f"{tag}_s{a.seed}_{n}.zarr")
        make(n, a.seed, store)
        model = os.path.join(a.workdir, f"model_{tag}_{n}_{a.method}_{a.eps}")
        cli = [py, "-c", "import sys; from streamcvm.cli import main; sys.exit(main())"]
        cmd = cli + ["train", store, "-o", model, "-e", a.eps, "--method", a.method,
                     "--seed", str(a.seed)]
        if reg:
            cmd += ["--task", "regression", "-c", a.C or "1e4", "--mu", a.mu]
        run_measured(cmd[:3] + ["info", store])      # warm the page cache of the imports
        wall, rss, out = run_measured(cmd)
        line = out.strip().splitlines()[-1] if out.strip() else ""
        core = int(line.split(" s: ")[1].split(" core")[0].replace(",", ""))
        du = B.path_bytes(store)
        r = {"rows": n, "store_bytes": du, "wall_s": wall, "peak_rss": rss, "core": core,
             "out": line}
        if reg:
            _, _, ev = run_measured(cli + ["evaluate", test, model])
            got = {ln.split()[0]: ln.split()[1] for ln in ev.splitlines() if ln.strip()}
            r["rmse"], r["r2"] = float(got["RMSE"]), float(got["R^2"])
        res.append(r)
        print(f"  {n:>13,} rows  store {du / 2**30:6.2f} GiB  train {wall:7.1f} s  "
              f"peak RSS {rss / 2**20:7.1f} MiB  core {core}"
              + (f"  test RMSE {r['rmse']:.4f} R^2 {r['r2']:.4f}" if reg else ""), flush=True)
    base = res[0]["peak_rss"]
    extra = " held-out RMSE | R^2 |" if reg else ""
    print(f"\n| rows | store GiB | train s (wall, incl. start-up) | core set | peak RSS MiB | "
          f"RSS / smallest |{extra}")
    print("|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if reg else ""))
    for r in res:
        print(f"| {r['rows']:,} | {r['store_bytes'] / 2**30:.2f} | {r['wall_s']:.1f} | {r['core']:,} "
              f"| {r['peak_rss'] / 2**20:.1f} | {r['peak_rss'] / base:.3f} |"
              + (f" {r['rmse']:.4f} | {r['r2']:.4f} |" if reg else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"commit": commit, "argv": sys.argv[1:], "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
