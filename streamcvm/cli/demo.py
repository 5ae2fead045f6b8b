"""``streamcvm demo``: generated data through ingest, train and evaluate."""
import os

from .common import positive_int
from .evaluate import evaluate_text
from .info import describe_store


def add(sub):
    p = sub.add_parser(
        "demo", help="generate data, ingest, train and evaluate (end to end)",
        description="Runs the pipeline on generated data: writes a Gaussian-mixture "
                    "svmlight file (gzip), ingests it into a Zarr store, trains a "
                    "classifier and evaluates it on a held-out generated store. Needs "
                    "nothing but the package.")
    p.add_argument("--dir", default="streamcvm-demo", help="working folder (default: ./streamcvm-demo)")
    p.add_argument("--rows", type=positive_int, default=200_000, help="rows to generate (default: 200,000)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the generated data (default: 0)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the demo's files (mixture.*) already in --dir; without it "
                        "an existing one is refused before any work")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bars (the step lines and the evaluation are still printed)")
    p.set_defaults(func=run)


def run(args):
    import time
    from ..data import synthetic
    from ..estimators import CVMClassifier
    from ..estimators.model import save_model
    from ..data.store import open_store
    from ..ingest import ingest
    src = os.path.join(args.dir, "mixture.svm.gz")
    store = os.path.join(args.dir, "mixture.zarr")
    test = os.path.join(args.dir, "mixture-test.zarr")
    model = os.path.join(args.dir, "mixture.model")
    there = [p for p in (src, store, test, model) if os.path.lexists(p)]
    if there and not args.overwrite:        # a command never replaces what it did not write
        raise SystemExit(f"streamcvm demo: error: {there[0]} exists: pass --overwrite to "
                         "replace the demo's files, or choose another --dir")
    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise SystemExit(f"streamcvm demo: error: --dir {args.dir} is a file, not a folder")
    os.makedirs(args.dir, exist_ok=True)
    show = not args.quiet
    print(f"[1/5] generating {args.rows:,} rows x 22 features -> {src}")
    synthetic.write_text(src, "gaussian", args.rows, seed=args.seed, progress=show)
    print(f"[2/5] ingesting -> {store}")
    res = ingest([src], store, overwrite=True, progress=show)
    print(f"      {res['n']:,} rows in {res['seconds']:.1f} s")
    print(describe_store(store))
    est = CVMClassifier(verbose=show)
    p = est.get_params()
    print(f"[3/5] training CVMClassifier with its defaults (method={p['method']}, "
          f"C={p['C']}, gamma={p['gamma']}, eps={p['eps']}) -> {model}")
    t = time.perf_counter()
    est.fit(open_store(store))
    save_model(est, model, overwrite=args.overwrite)
    print(f"      {time.perf_counter() - t:.1f} s: C {est.C_:.3g} and gamma {est.gamma_:.3g} "
          f"chosen on held-out rows, {est.core_set_size_:,} core vectors")
    n_test = max(args.rows // 4, 1000)
    print(f"[4/5] generating a held-out test store ({n_test:,} rows, same mixture) -> {test}")
    synthetic.write_store(test, "gaussian", n_test, seed=args.seed, overwrite=True,
                          first_block=10**6)
    print("[5/5] streamcvm evaluate")
    print(evaluate_text(test, model))
    return 0
