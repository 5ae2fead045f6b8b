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

Usage::

    python tools/bench_scale.py                          # 1M and 100M rows (~8 GB on disk)
    python tools/bench_scale.py --rows 1e6 1e7 --eps 1e-3 --json out.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_measured(cmd):
    """Run ``cmd``: (wall s, peak RSS bytes of that child alone, stdout)."""
    t = time.perf_counter()
    # output to files, not pipes: wait4 (which gives this child's own rusage)
    # must reap the child, and a full pipe would block it meanwhile
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = status          # reaped here; keep Popen from waiting again
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(), fe.read().decode()
    wall = time.perf_counter() - t
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}\n{err}")
    return wall, ru.ru_maxrss * 1024, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", type=float, default=[1e6, 1e8])
    ap.add_argument("--eps", default="1e-4", help="the same for every size (default 1e-4)")
    ap.add_argument("--method", default="bvm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/scale")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    py = sys.executable
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"command: `python tools/bench_scale.py {' '.join(sys.argv[1:])}`  commit {commit}")
    res = []
    for n in (int(r) for r in a.rows):
        store = os.path.join(a.workdir, f"gaussian_d22_s{a.seed}_{n}.zarr")
        if not os.path.exists(store):
            print(f"generating {n:,} rows -> {store} ...", flush=True)
            run_measured([py, os.path.join(HERE, "make_synthetic.py"), "gaussian", "-n", str(n),
                          "-o", store, "--seed", str(a.seed), "-q"])
        model = os.path.join(a.workdir, f"model_{n}_{a.method}_{a.eps}")
        cmd = [py, "-c", "import sys; from streamcvm.cli import main; sys.exit(main())", "train", store, "-o", model, "-e", a.eps,
               "--method", a.method, "--seed", str(a.seed)]
        run_measured(cmd[:3] + ["info", store])      # warm the page cache of the imports
        wall, rss, out = run_measured(cmd)
        line = out.strip().splitlines()[-1] if out.strip() else ""
        core = int(line.split(" s: ")[1].split(" core")[0].replace(",", ""))
        du = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(store) for f in fs)
        res.append({"rows": n, "store_bytes": du, "wall_s": wall, "peak_rss": rss, "core": core,
                    "out": line})
        print(f"  {n:>13,} rows  store {du / 2**30:6.2f} GiB  train {wall:7.1f} s  "
              f"peak RSS {rss / 2**20:7.1f} MiB  core {core}", flush=True)
    base = res[0]["peak_rss"]
    print("\n| rows | store GiB | train s (wall, incl. start-up) | core set | peak RSS MiB | RSS / smallest |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in res:
        print(f"| {r['rows']:,} | {r['store_bytes'] / 2**30:.2f} | {r['wall_s']:.1f} | {r['core']:,} "
              f"| {r['peak_rss'] / 2**20:.1f} | {r['peak_rss'] / base:.3f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"commit": commit, "argv": sys.argv[1:], "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
