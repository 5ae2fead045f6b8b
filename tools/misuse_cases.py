#!/usr/bin/env python
"""Rerun the misuse and fault cases against the command line, as
a user meets them: each case in fresh ``streamcvm`` processes, on small
generated stores (at most 5,000 rows), checked for

- a non-zero exit status,
- exactly one line on stderr, and no traceback,
- nothing deleted or replaced: every protected path (the other run's
  checkpoints, the inputs, an existing output) has the same bytes after,
- an answer within 60 s.

A case that should succeed (the winner of a race) is checked for exit 0.
Prints one row per case and a summary; exits 1 if any case fails.

Usage::

    python tools/misuse_cases.py                 # every case (~3 minutes on 2 cores)
    python tools/misuse_cases.py --only surface  # the cases whose name holds 'surface'
    python tools/misuse_cases.py --keep /tmp/mc  # keep the work folder for a look
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 60.0


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def cli(*args, cwd=None, user=None):
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user else []
    cmd = pre + [sys.executable, "-m", "streamcvm.cli", *map(str, args)]
    e = env()
    if user:
        e["HOME"] = "/nonexistent"
        e.pop("NUMBA_CACHE_DIR", None)
    return cmd, e, cwd


def run(spec, timeout=LIMIT * 2):
    cmd, e, cwd = spec
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=e, cwd=cwd, capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, r.stderr, time.perf_counter() - t
    except subprocess.TimeoutExpired:
        return None, "(timed out)", time.perf_counter() - t


def tree(path):
    p = Path(path)
    if not p.exists():
        return None
    if p.is_file():
        return hashlib.sha1(p.read_bytes()).hexdigest()
    return {str(f.relative_to(p)): hashlib.sha1(f.read_bytes()).hexdigest()
            for f in sorted(p.rglob("*")) if f.is_file() and f.name != ".lock"}


# ---------------------------------------------------------------------------
# the data
# ---------------------------------------------------------------------------

def setup(w):
    sys.path.insert(0, str(REPO))
    import numpy as np
    from streamcvm.data import synthetic
    synthetic.write_store(w / "train.zarr", "gaussian", 5000, seed=0, chunk_rows=1000)
    synthetic.write_store(w / "train.h5", "gaussian", 5000, seed=0, chunk_rows=1000)
    rc, err, _ = run(cli("train", w / "train.zarr", "-o", w / "model", "-q"))
    assert rc == 0, err
    # a classifier run's 4 snapshots, the folder other runs must not touch
    rc, err, _ = run(cli("train", w / "train.zarr", "-o", w / "ckmodel", "-q", "-e", "1e-4",
                         "--checkpoint-dir", w / "ck", "--checkpoint-iters", "1",
                         "--checkpoint-keep", "4"))
    assert rc == 0, err
    rng = np.random.default_rng(0)
    P = rng.normal(size=(2000, 3))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    np.savetxt(w / "ball.xyz", P)
    np.savetxt(w / "ten.xyz", P[:10])
    Q = P.copy()
    Q[:, 2] = 0
    np.savetxt(w / "plane.xyz", Q)
    Q = P.copy()
    Q[0, 0] = 1e30
    np.savetxt(w / "far.xyz", Q)
    rows = [f"{1 if i % 2 else -1}," + ",".join(["0.5"] * 22) for i in range(2000)]
    rows[7] = "1," + ",".join(["0.5"] * 3 + [""] + ["0.5"] * 18)
    (w / "nan.csv").write_text("\n".join(rows) + "\n")
    rc, err, _ = run(cli("ingest", w / "nan.csv", "-o", w / "nan.zarr", "--allow-nan",
                         "--no-header", "--label-col", "0"))
    assert rc == 0, err
    (w / "mixed1.csv").write_text("cat,1\ndog,2\n1,3\n2,4\n")
    (w / "mixed2.csv").write_text("1,3\n2,4\ncat,1\ndog,2\n")
    (w / "one.svm").write_text("1 1:0.5\n-1 1:0.25\n")


def copy(w, src, name):
    dst = w / name
    if dst.exists():
        shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
    (shutil.copytree if Path(src).is_dir() else shutil.copy)(src, dst)
    return dst


def damage_zarr(w, how):
    s = copy(w, w / "train.zarr", f"{how}.zarr")
    f = sorted((s / "X" / "c").rglob("*"))
    f = [p for p in f if p.is_file()][1]
    if how == "delete":
        f.unlink()
    elif how == "truncate":
        f.write_bytes(f.read_bytes()[:100])
    else:
        b = bytearray(f.read_bytes())
        b[len(b) // 2] ^= 0x10
        f.write_bytes(bytes(b))
    return s


def flip_hdf5(w):
    import h5py
    s = copy(w, w / "train.h5", "flip.h5")
    with h5py.File(s, "r") as f:
        c = f["X"].id.get_chunk_info(1)
    b = bytearray(s.read_bytes())
    b[c.byte_offset + c.size // 2] ^= 0x10
    s.write_bytes(bytes(b))
    return s


def edit_model(w, name, change):
    m = copy(w, w / "model", name)
    if change == "truncate":
        b = (m / "model.json").read_bytes()
        (m / "model.json").write_bytes(b[: len(b) // 2])
        return m
    meta = json.loads((m / "model.json").read_text())
    change(meta)
    (m / "model.json").write_text(json.dumps(meta))
    return m


# ---------------------------------------------------------------------------
# the cases: (name, make) where make(w) -> (specs, protected paths, expect)
# ---------------------------------------------------------------------------

def cases():
    ck_train = lambda w, *o: cli("train", w / "train.zarr", "-o", w / "other.model", "-q",
                                 "--checkpoint-dir", w / "ck", *o)
    out = [
        ("checkpoint: train, other options, foreign folder",
         lambda w: ([ck_train(w, "-c", "2")], [w / "ck"])),
        ("checkpoint: train, another eps, foreign folder",
         lambda w: ([ck_train(w, "-e", "1e-3")], [w / "ck"])),
        ("checkpoint: features on a classifier's folder",
         lambda w: ([cli("features", w / "train.zarr", "-o", w / "f.zarr", "-q",
                         "--checkpoint-dir", w / "ck")], [w / "ck"])),
        ("checkpoint: surface on a classifier's folder",
         lambda w: ([cli("surface", w / "ball.xyz", "-o", w / "s.ply", "-q",
                         "--checkpoint-dir", w / "ck")], [w / "ck"])),
    ]
    for how, done in (("delete", "deleted"), ("truncate", "truncated"), ("flip", "flipped")):
        for cmd in ("train", "predict", "evaluate"):
            out.append((f"zarr chunk {done}: {cmd}", _store_case(how, cmd)))
    for cmd in ("train", "evaluate"):
        out.append((f"hdf5 chunk flipped: {cmd}", _hdf5_case(cmd)))
    for cmd in ("train", "predict", "evaluate"):
        out.append((f"NaN cell in an --allow-nan store: {cmd}", _nan_case(cmd)))
    for argv in (("train", "-g", "nan"), ("train", "-g", "inf"), ("train", "-c", "nan"),
                 ("train", "-e", "nan"), ("train", "--mu", "inf"), ("features", "-g", "nan"),
                 ("features", "-c", "nan"), ("features", "-e", "inf")):
        out.append((f"{argv[0]} {argv[1]} {argv[2]}", _param_case(*argv)))
    for scales in ("nan", "0.2,nan"):
        out.append((f"surface --scales {scales}",
                    lambda w, s=scales: ([cli("surface", w / "ball.xyz", "-o", w / "s.ply",
                                              "--scales", s)], [w / "ball.xyz"])))
    for pts in ("ten", "plane", "far"):
        for q in ((), ("-q",)):
            out.append((f"surface on {pts}.xyz {' '.join(q)}".strip(),
                        lambda w, p=pts, q=q: ([cli("surface", w / f"{p}.xyz", "-o",
                                                    w / "s.ply", *q)], [w / f"{p}.xyz"])))
    for cmd in ("ingest", "features", "predict", "train"):
        out.append((f"{cmd} -o memory://", _url_case(cmd)))
    out += [
        ("info on a truncated model.json",
         lambda w: ([cli("info", edit_model(w, "m1", "truncate"))], [w / "m1"])),
        ("info on a model.json without kernel",
         lambda w: ([cli("info", edit_model(w, "m2", lambda m: m.pop("kernel")))], [w / "m2"])),
        ("predict with a model.json without kernel",
         lambda w: ([cli("predict", w / "train.zarr", edit_model(w, "m3", lambda m: m.pop(
             "kernel")), "-o", w / "p.txt")], [w / "m3", w / "train.zarr"])),
        ("info on a non-integer n_features_in",
         lambda w: ([cli("info", edit_model(w, "m4", lambda m: m.__setitem__(
             "n_features_in", 2.5)))], [w / "m4"])),
        ("info on a negative gamma",
         lambda w: ([cli("info", edit_model(w, "m5", lambda m: m["kernel"].__setitem__(
             "gamma", -1.0)))], [w / "m5"])),
        ("ingest: text labels, then numbers",
         lambda w: ([cli("ingest", w / "mixed1.csv", "-o", w / "mx.zarr", "--no-header")],
                    [w / "mixed1.csv"])),
        ("ingest: number labels, then text",
         lambda w: ([cli("ingest", w / "mixed2.csv", "-o", w / "mx.zarr", "--no-header")],
                    [w / "mixed2.csv"])),
        ("ingest: the same file twice",
         lambda w: ([cli("ingest", w / "one.svm", w / "one.svm", "-o", w / "tw.zarr")],
                    [w / "one.svm"])),
    ]
    if os.geteuid() == 0 and shutil.which("setpriv"):
        out.append(("start-up as nobody, no writable HOME: --version (exit 0)",
                    lambda w: ([cli("--version", user=True)], [], 0)))
    return out


def _store_case(how, cmd):
    def make(w):
        s = damage_zarr(w, how)
        argv = {"train": ("train", s, "-o", w / "dm.model", "-q"),
                "predict": ("predict", s, w / "model", "-o", w / "p.txt"),
                "evaluate": ("evaluate", s, w / "model")}[cmd]
        return [cli(*argv)], [w / "model"]
    return make


def _hdf5_case(cmd):
    def make(w):
        s = flip_hdf5(w)
        argv = {"train": ("train", s, "-o", w / "dm.model", "-q"),
                "evaluate": ("evaluate", s, w / "model")}[cmd]
        return [cli(*argv)], [w / "model"]
    return make


def _nan_case(cmd):
    def make(w):
        s = w / "nan.zarr"
        argv = {"train": ("train", s, "-o", w / "nm.model", "-q"),
                "predict": ("predict", s, w / "model", "-o", w / "p.txt"),
                "evaluate": ("evaluate", s, w / "model")}[cmd]
        return [cli(*argv)], [s, w / "model"]
    return make


def _param_case(cmd, opt, value):
    def make(w):
        return [cli(cmd, w / "train.zarr", "-o", w / "pm.out", opt, value, "-q")], \
            [w / "train.zarr"]
    return make


def _url_case(cmd):
    def make(w):
        argv = {"ingest": ("ingest", w / "one.svm", "-o", "memory://x.zarr"),
                "features": ("features", w / "train.zarr", "-o", "memory://x.zarr", "-q"),
                "predict": ("predict", w / "train.zarr", w / "model", "-o", "memory://x.zarr"),
                "train": ("train", w / "train.zarr", "-o", "memory://m.model", "-q")}[cmd]
        spec = cli(*argv)
        return [(spec[0], spec[1], w)], [w / "memory:"]
    return make


def race_train(w, tries=3):
    """Two concurrent ``train -o M``: one exits 0, the other exits 1 in one
    line, and M is the winner's whole model."""
    rows = []
    for t in range(tries):
        out = w / f"race{t}.model"
        specs = [cli("train", w / "train.zarr", "-o", out, "-q", "--seed", str(s))
                 for s in (1, 2)]
        rows.append(_race(specs, out))
    return rows


def race_checkpoint(w, tries=5):
    """The same, with one checkpoint folder shared: the second is refused by
    the folder's lock (or loses the output race), in one line."""
    rows = []
    for t in range(tries):
        out, ck = w / f"rc{t}.model", w / f"rc{t}.ck"
        specs = [cli("train", w / "train.zarr", "-o", out, "-q", "-e", "1e-4",
                     "--checkpoint-dir", ck, "--checkpoint-iters", "1") for _ in (1, 2)]
        rows.append(_race(specs, out))
    return rows


def _race(specs, out):
    t = time.perf_counter()
    ps = [subprocess.Popen(cmd, env=e, cwd=cwd, stderr=subprocess.PIPE, text=True)
          for cmd, e, cwd in specs]
    res = [(p.wait(LIMIT * 2), p.stderr.read()) for p in ps]
    dt = time.perf_counter() - t
    codes = sorted(rc for rc, _ in res)
    loser = [e for rc, e in res if rc != 0]
    lines = loser[0].strip().splitlines() if loser else []
    ok = codes == [0, 1] and len(lines) == 1 and "Traceback" not in loser[0] \
        and (out / "model.json").is_file() and dt < LIMIT
    return ok, f"exit {codes}", lines[0] if lines else "(no loser)", dt


def check(w, make):
    made = make(w)
    specs, protect = made[0], made[1]
    expect = made[2] if len(made) > 2 else 1
    before = {str(p): tree(p) for p in protect}
    rc, err, dt = run(specs[0])
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    after = {str(p): tree(p) for p in protect}
    problems = []
    if expect == 0:
        if rc != 0:
            problems.append(f"exit {rc}")
    else:
        if rc in (0, None):
            problems.append(f"exit {rc}")
        if len(lines) != 1:
            problems.append(f"{len(lines)} stderr lines")
    if "Traceback" in err:
        problems.append("traceback")
    changed = [p for p in before if before[p] != after[p]]
    if changed:
        problems.append("changed: " + ", ".join(Path(p).name for p in changed))
    if dt > LIMIT:
        problems.append(f"{dt:.0f} s")
    return not problems, f"exit {rc}", (lines[0] if lines else "") if not problems \
        else "; ".join(problems) + " | " + " / ".join(lines[:3]), dt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="run the cases whose name holds this")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="work in DIR (created) and keep it")
    a = ap.parse_args(argv)
    w = Path(a.keep or tempfile.mkdtemp(prefix="misuse-"))
    w.mkdir(parents=True, exist_ok=True)
    os.chmod(w, 0o755)
    try:
        print(f"setting up in {w} ...", file=sys.stderr)
        setup(w)
        rows = []
        for name, make in cases():
            if a.only and a.only not in name:
                continue
            rows.append((name, *check(w, make)))
            print(f"{'ok ' if rows[-1][1] else 'BAD'} {name} ({rows[-1][4]:.1f} s)",
                  file=sys.stderr)
        if not a.only or "race" in a.only:
            for k, r in enumerate(race_train(w)):
                rows.append((f"race: two train -o M, try {k + 1}", *r))
            for k, r in enumerate(race_checkpoint(w)):
                rows.append((f"race: two train -o M, one checkpoint folder, try {k + 1}", *r))
        print("| case | ok | exit | stderr (one line) | s |")
        print("|---|---|---|---|---:|")
        for name, ok, code, line, dt in rows:
            line = line.replace("|", "\\|")
            print(f"| {name} | {'yes' if ok else '**NO**'} | {code} | {line[:160]} | {dt:.1f} |")
        bad = [r for r in rows if not r[1]]
        print(f"\n{len(rows) - len(bad)} of {len(rows)} cases handled well "
              f"(one line, non-zero exit, nothing changed, under {LIMIT:.0f} s)")
        return 1 if bad else 0
    finally:
        if not a.keep:
            shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
