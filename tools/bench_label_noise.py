"""Label noise: streamcvm's defaults trained on a clean set and on the same
rows with a share of their labels flipped, both scored on clean test labels.

The data are ``streamcvm.data.synthetic``'s "boundary" set (x ~ U(-1, 1)^4,
labelled by the sign of a smooth function: no Bayes error), so the clean test
error measures how close a model trained on noisy labels comes to the true
boundary. The flips come from a random stream of their own: the noisy stores
hold the clean store's rows. Each training run is ``streamcvm train`` in its
own process (its wall time and peak RSS), then ``streamcvm evaluate`` on the
clean test store.

    python tools/bench_label_noise.py --rows 1M --flips 0 0.2 --json out.json
    python tools/bench_label_noise.py --rows 1M --flips 0 --baseline d160963

``--baseline REV``: each training run is repeated, in the same run, by the
streamcvm of the git revision REV (a worktree of it), on the same stores;
``train / baseline`` is this tree's train seconds over the baseline's. Each
code first trains once, untimed, on 20,000 rows (numba's compile is not in
the timed runs).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import bench_scale_accuracy as S  # noqa: E402  (its Nystroem reference)

KIND = "boundary"
TEST_ROWS = 200_000
WARMUP_ROWS = 20_000


def child_store(spec):
    """Generate one store (child side): {"path", "n", "first_block", "flip"}."""
    from streamcvm.data import synthetic
    import time
    if os.path.exists(spec["path"]):
        return {"path": spec["path"]}
    t = time.perf_counter()
    synthetic.write_store(spec["path"], KIND, spec["n"], first_block=spec["first_block"],
                          flip=spec["flip"])
    return {"path": spec["path"], "generate_s": time.perf_counter() - t}


def train_eval(train, test, model, extra, timeout, exe=None):
    exe = exe or [sys.executable, "-m", "streamcvm"]
    out = {"command": " ".join(["streamcvm", "train", train, "-o", model] + extra)}
    r = B.run_timed(exe + ["train", train, "-o", model, "-q", "--overwrite"] + extra, timeout)
    if r["rc"] != 0:
        out["error"] = "timeout" if r["timed_out"] else B.stderr_tail(r["stderr"])
        return out
    out.update(train_s=r["wall"], peak_rss=r["rss"])
    ev = B.run_timed(exe + ["evaluate", test, model], timeout)
    if ev["rc"] != 0:
        out["error"] = "evaluate: " + B.stderr_tail(ev["stderr"])
        return out
    out["predict_s"] = ev["wall"]
    out["test_rows"] = int(next(ln.split()[1] for ln in ev["stdout"].splitlines()
                                if ln.startswith("rows")).replace(",", ""))
    acc = next(float(ln.split()[1]) for ln in ev["stdout"].splitlines()
               if ln.startswith("accuracy"))
    out["clean_test_error"] = 100.0 * (1.0 - acc)
    with open(os.path.join(model, "model.json")) as f:
        mj = json.load(f)
    m = mj["machines"][0]
    out.update(n_sv=int(m["shape"][0]), stage_rows=m.get("stage_rows"),
               gamma=mj["kernel"]["gamma"],
               compact=(m.get("compact") or {}).get("decision"))
    return out


def nystroem(train, test, K, gamma, n, a):
    """One Nystroem(K) + LinearSVC reference (bench_scale_accuracy.py's child)
    on at most ``--memory-gb`` of features, predicting the test store."""
    rows = min(n, int(a.memory_gb * 1e9 // (K * 8)))
    B.log(f"  Nystroem K={K} + LinearSVC ({rows:,} fit rows) ...")
    spec = dict(kind="reference", method="nystroem", train=train, test=test, gamma=gamma,
                fit_rows=rows, K=K, partial=os.path.join(a.workdir, f"partial-{os.getpid()}"))
    r = B.run_reference(spec, a.timeout)
    r.setdefault("fit_rows", rows)
    return r


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--rows", type=B.parse_rows, default=[1_000_000], nargs="+",
                    help="training rows (default 1M)")
    ap.add_argument("--flips", type=float, nargs="+", default=[0.0, 0.2],
                    help="shares of training labels flipped (default 0 0.2; 0 is the "
                         "clean reference the others are compared with)")
    ap.add_argument("--workdir", default=os.path.join(B.cache_dir(), "label_noise"))
    ap.add_argument("--streamcvm-args", default="", help='appended to "streamcvm train"')
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--baseline", metavar="REV", default=None,
                    help="also train with the streamcvm of this git revision, same stores")
    ap.add_argument("--test-rows", type=B.parse_rows, default=TEST_ROWS,
                    help=f"clean test rows (default {TEST_ROWS:,})")
    ap.add_argument("--nystroem", type=int, nargs="+", default=[1000], metavar="K",
                    help="Nystroem + LinearSVC references with these K (default 1000)")
    ap.add_argument("--no-nystroem", action="store_true", help="skip the Nystroem references")
    ap.add_argument("--memory-gb", type=float, default=5.0,
                    help="GB of Nystroem features (K * 8 bytes a row; default 5)")
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, {"store": child_store, "reference": S.child_reference})
    if any(not 0 <= f < 0.5 for f in a.flips):
        ap.error("--flips must be in [0, 0.5)")
    flips = sorted(set([0.0] + list(a.flips)))
    os.makedirs(a.workdir, exist_ok=True)
    bench_run = B.BenchRun(packages=("numba",))
    test = os.path.join(a.workdir, f"{KIND}-test-{a.test_rows}.zarr")
    B.run_child({"kind": "store", "path": test, "n": a.test_rows, "first_block": 10 ** 6,
                 "flip": 0.0})
    codes = [("this tree", None)]
    if a.baseline:
        sha, tree = B.baseline_worktree(a.baseline)
        codes.append((sha, B.baseline_exe(tree)))
    extra = a.streamcvm_args.split()
    warm = os.path.join(a.workdir, f"{KIND}-warmup-{WARMUP_ROWS}.zarr")
    B.run_child({"kind": "store", "path": warm, "n": WARMUP_ROWS, "first_block": 2 * 10 ** 6,
                 "flip": 0.0})
    for code, exe in codes:
        B.log(f"{code}: warm-up train on {WARMUP_ROWS:,} rows (untimed) ...")
        train_eval(warm, warm, os.path.join(a.workdir, "model-warmup"), extra, a.timeout, exe)
    runs = []
    for n in a.rows:
        clean = {}
        for f in flips:
            train = os.path.join(a.workdir, f"{KIND}-train-{n}-flip{f:g}.zarr")
            B.run_child({"kind": "store", "path": train, "n": n, "first_block": 0, "flip": f})
            for code, exe in codes:
                model = os.path.join(a.workdir, f"model-{n}-flip{f:g}"
                                     + ("" if exe is None else f"-{code}"))
                B.log(f"{n:,} rows, {100 * f:g}% flipped: {code}: streamcvm train ...")
                r = dict(rows=n, flip=f, code=code,
                         **train_eval(train, test, model, extra, a.timeout, exe))
                if f == 0:
                    clean[code] = r
                elif code in clean and "error" not in r and "error" not in clean[code]:
                    c = clean[code]
                    r["error_minus_clean_pp"] = r["clean_test_error"] - c["clean_test_error"]
                    r["time_vs_clean"] = r["train_s"] / c["train_s"]
                if exe is not None and "error" not in r:
                    ours = next((q for q in runs if q["rows"] == n and q["flip"] == f
                                 and q["code"] == "this tree" and "error" not in q), None)
                    if ours is not None:
                        ours["train_vs_baseline"] = ours["train_s"] / r["train_s"]
                        ours["predict_vs_baseline"] = ours["predict_s"] / r["predict_s"]
                runs.append(r)
                B.log(f"  {r}")
                if a.json:
                    bench_run.write(a.json, runs=runs)
            ours = next((q for q in runs if q["rows"] == n and q["flip"] == f
                         and q["code"] == "this tree" and "gamma" in q), None)
            for K in ([] if a.no_nystroem or ours is None else a.nystroem):
                r = dict(rows=n, flip=f, code=f"Nystroem K={K} + LinearSVC",
                         **nystroem(train, test, K, ours["gamma"], n, a))
                if "error" not in r:
                    r["clean_test_error"] = 100.0 * (1.0 - r["accuracy"])
                    r["streamcvm_predict_vs_this"] = ours["predict_s"] / r["predict_s"]
                    r["test_rows"] = r.get("test_rows", ours.get("test_rows"))
                runs.append(r)
                B.log(f"  {r}")
                if a.json:
                    bench_run.write(a.json, runs=runs)
    head = ["code", "rows", "flipped %", "train s", "peak RSS MB", "predict s",
            "clean test error %", "#SV", "last stage rows", "error - clean pp", "time / clean",
            "train / baseline", "predict / baseline", "streamcvm predict / this"]
    rows = [[r["code"], f"{r['rows']:,}", f"{100 * r['flip']:g}", B.fmt(r.get("train_s"), ".1f"),
             B.fmt(r.get("peak_rss") and r["peak_rss"] / 2 ** 20, ".0f"),
             B.fmt(r.get("predict_s"), ".1f"), B.fmt(r.get("clean_test_error"), ".3f"),
             B.fmt(r.get("n_sv"), ",d"), B.fmt(r.get("stage_rows"), ""),
             B.fmt(r.get("error_minus_clean_pp"), "+.3f"), B.fmt(r.get("time_vs_clean"), ".2f"),
             B.fmt(r.get("train_vs_baseline"), ".2f"), B.fmt(r.get("predict_vs_baseline"), ".2f"),
             B.fmt(r.get("streamcvm_predict_vs_this"), ".2f")]
            for r in runs]
    print("\n".join(bench_run.header))
    print(B.table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
