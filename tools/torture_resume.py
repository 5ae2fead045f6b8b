#!/usr/bin/env python
"""Kill a training run with SIGKILL again and again; resume until it finishes.

The run must always be resumable and end with the model of an uninterrupted
run, bit for bit.

1. Generate (once, cached in ``--workdir``) a Gaussian-mixture store of ``--rows``
   rows (default 3,000,000 x 22).
2. Train it uninterrupted, ``streamcvm train STORE -o ref -e EPS``, and time it.
3. Train it again with ``--checkpoint-dir`` at the default interval, uninterrupted.
   The CLI reports how many snapshots it wrote and the seconds spent writing them:
   that is the overhead at the default interval.
4. The torture. Start the run with ``--checkpoint-dir DIR --checkpoint-every
   --torture-every`` (default 0.5 s, so kills land between snapshots and while one
   is being written). SIGKILL it at a uniformly random moment in [0.2 s, ``--max-kill``]
   after its start (default 4 s: the start-up, ~1.5 s of imports and numba cache,
   plus a little training, so that all the kills land before the run is done). Rerun
   it with ``--resume DIR``. Repeat ``--kills`` times (default 20), then let it
   finish.
5. Compare every coefficient and support-row id with the reference, and report.

Usage::

    python tools/torture_resume.py                       # 3M rows, eps 1e-5, 20 kills
    python tools/torture_resume.py --rows 1e6 --kills 5 --eps 1e-4
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

import benchlib as B
from benchlib import ROOT


def train(store, out, eps, *extra):
    return [sys.executable, "-m", "streamcvm.cli", "train", store, "-o", out, "-e", str(eps),
            *extra]


def same_model(a, b):
    """(identical?, detail) for two model folders: every array and the manifest's
    machine records (intercepts, radii)."""
    import numpy as np
    with open(os.path.join(a, "model.json")) as f:
        ma = json.load(f)
    with open(os.path.join(b, "model.json")) as f:
        mb = json.load(f)
    for ra, rb in zip(ma["machines"], mb["machines"]):
        for k in ("intercept", "radius2", "c2", "n_iter", "core_size"):
            if ra[k] != rb[k]:
                return False, f"machine record {k}: {ra[k]} != {rb[k]}"
    for name in ma["files"]:
        x = np.load(os.path.join(a, name))
        y = np.load(os.path.join(b, name))
        if x.shape != y.shape or not np.array_equal(x, y):
            return False, f"{name} differs"
    return True, f"{len(ma['files'])} arrays identical"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=float, default=3e6)
    ap.add_argument("--eps", default="1e-5")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--torture-every", type=float, default=0.5,
                    help="--checkpoint-every during the torture (seconds)")
    ap.add_argument("--max-kill", type=float, default=4.0,
                    help="latest kill moment after a start, seconds (default 4)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill times")
    ap.add_argument("--workdir", default="/tmp/streamcvm-bench/torture")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    n = int(a.rows)
    os.makedirs(a.workdir, exist_ok=True)
    B.use_source_tree()
    store = os.path.join(a.workdir, f"gaussian_d22_s0_{n}.zarr")
    if not os.path.isdir(store):
        from streamcvm.data import synthetic
        print(f"generating {n:,} rows -> {store}", flush=True)
        synthetic.write_store(store, "gaussian", n, seed=0, progress=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = lambda cmd, **kw: subprocess.run(cmd, env=env, **kw)

    ref = os.path.join(a.workdir, "ref.model")
    t = time.perf_counter()
    run(train(store, ref, a.eps, "-q"), check=True)
    t_ref = time.perf_counter() - t
    print(f"uninterrupted: {t_ref:.1f} s (wall, incl. start-up)", flush=True)

    ck_default = os.path.join(a.workdir, "ck-default")
    subprocess.run(["rm", "-rf", ck_default])
    r = run(train(store, os.path.join(a.workdir, "default.model"), a.eps,
                  "--checkpoint-dir", ck_default), check=True, capture_output=True, text=True)
    line = [s for s in r.stdout.splitlines() if s.startswith("checkpoints:")]
    print(f"default interval (60 s): {line[0] if line else r.stdout.strip()}", flush=True)
    same_default, _ = same_model(ref, os.path.join(a.workdir, "default.model"))

    ck = os.path.join(a.workdir, "ck-torture")
    out = os.path.join(a.workdir, "torture.model")
    subprocess.run(["rm", "-rf", ck, out])
    rnd = random.Random(a.seed)
    kills, resumes, t_total = [], 0, time.perf_counter()
    for k in range(a.kills + 1):
        extra = ["--resume", ck] if k else ["--checkpoint-dir", ck]
        p = subprocess.Popen(train(store, out, a.eps, "-q", "--checkpoint-every",
                                   str(a.torture_every), *extra), env=env,
                             stderr=subprocess.PIPE, text=True)
        resumes += bool(k)
        if k == a.kills:
            _, err = p.communicate()
            if p.returncode != 0:
                sys.exit(f"torture: the final resume failed ({p.returncode}): {err}")
            break
        when = rnd.uniform(0.2, a.max_kill)
        try:
            p.wait(timeout=when)
            # finished before the kill: start over from the checkpoints anyway
            kills.append({"at_s": when, "finished_first": True, "rc": p.returncode})
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills.append({"at_s": when, "finished_first": False})
        if p.returncode not in (0, -signal.SIGKILL):
            sys.exit(f"torture: run {k} failed ({p.returncode}): {p.stderr.read()}")
        snaps = sorted(e for e in os.listdir(ck) if e.startswith("ckpt-")) \
            if os.path.isdir(ck) else []
        print(f"kill {k + 1:2d} at {when:5.2f} s: "
              f"{'finished before the kill' if kills[-1]['finished_first'] else 'killed'}, "
              f"newest snapshot {snaps[-1] if snaps else '-'}", flush=True)
    same, detail = same_model(ref, out)
    res = {"rows": n, "eps": a.eps, "uninterrupted_s": t_ref, "kills": kills,
           "resumes": resumes, "torture_wall_s": time.perf_counter() - t_total,
           "identical": same, "detail": detail, "default_interval": line[0] if line else None,
           "default_interval_identical": same_default}
    print(f"final model after {len(kills)} kills and {resumes} resumes: "
          f"{'IDENTICAL to the uninterrupted one' if same else 'DIFFERENT'} ({detail})")
    print(f"checkpointing at the default interval changed the model: {not same_default}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if same and same_default else 1


if __name__ == "__main__":
    sys.exit(main())
