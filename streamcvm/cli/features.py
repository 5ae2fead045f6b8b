"""``streamcvm features``: MMDA features of a store (fitted, or from a saved
model) written to a new store."""
import os
import sys

from .common import (STORE_SUFFIXES, add_checkpoint_replace, add_cluster_args, add_options_arg,
                     check_checkpoint_dir, checkpoint_arg, estimator_default, given,
                     num_or_auto, option, parse_options, positive_int, runner_of,
                     signature_default)


def mmda(name):
    """The default of MMDATransformer's parameter ``name``."""
    return estimator_default(name, cls="MMDATransformer")


def _fit():
    from ..estimators import MMDATransformer
    return MMDATransformer.fit


def add(sub):
    p = sub.add_parser(
        "features", help="extract large-margin features (MMDA) from a store into a new store",
        description="Maximum margin discriminant analysis by the core vector method: fit "
                    "orthogonal large-margin directions on the store's labelled rows (or "
                    "load them with --model), then write every row's features to a new "
                    "store, chunk by chunk (X = the features, y and qid as in STORE).")
    p.add_argument("store", metavar="STORE",
                   help="the rows: a store (.zarr folder, .h5 file or URL); to fit, labelled")
    p.add_argument("-o", "--output", required=True, metavar="FEATURE_STORE",
                   help="store to write (.zarr, or .h5 / .hdf5)")
    option(p, "-k", "--n-components", type=positive_int, metavar="K", lib=mmda("n_components"),
           help="features per class (one-vs-rest: K x classes features; two "
                "classes: K); default %(lib)s")
    p.add_argument("--model", metavar="MODEL",
                   help="a saved MMDA model (--save-model) to transform with, instead of "
                        "fitting on STORE")
    p.add_argument("--save-model", metavar="MODEL",
                   help="also save the fitted directions as a model folder, to transform "
                        "other stores with (--model)")
    option(p, "-c", "--C", type=float, lib=mmda("C"), help="the L2-SVM's C (default %(lib)s)")
    p.add_argument("--exact", action="store_true",
                   help="the full kernel expansions (by default, where it keeps every "
                        "feature's R^2 >= 0.999, one compact basis of at most 4,096 points "
                        "computes them; see 'streamcvm info MODEL')")
    option(p, "-t", "--kernel", choices=["rbf", "laplacian", "exponential"], lib=mmda("kernel"),
           help="rbf, laplacian or exponential (default %(lib)s)")
    option(p, "-g", "--gamma", lib=mmda("gamma"),
           help="kernel width: 'auto' (1 / mean squared distance) or a number "
                "(default %(lib)s)")
    option(p, "-e", "--eps", type=float, lib=mmda("eps"),
           help="ball tolerance (default %(lib)s, the paper's)")
    option(p, "-a", "--sample-size", type=positive_int, lib=mmda("sample_size"),
           help="rows per violator search (default %(lib)s)")
    option(p, "-f", "--max-core", type=positive_int, lib=mmda("max_core"),
           help="cap on core vectors per feature (default %(lib)s: none)")
    option(p, "--seed", type=int, lib=mmda("random_state"),
           help="seed of the row sampling (default %(lib)s)")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the fit here after each feature (crash-safe)")
    option(p, "--checkpoint-every", type=float, metavar="SECONDS",
           lib=signature_default(_fit, "checkpoint_every"),
           help="at most one snapshot per this many seconds, and one after the "
                "last feature (default %(lib)s; 0: after every feature)")
    option(p, "--checkpoint-keep", type=positive_int, metavar="K",
           lib=signature_default(_fit, "checkpoint_keep"),
           help="snapshots kept (default %(lib)s)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the fit from the newest snapshot in DIR (and keep "
                        "writing there): the same features as a run never interrupted")
    add_checkpoint_replace(p)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at FEATURE_STORE or "
                        "MODEL (a feature store or model folder is replaced without it; "
                        "the inputs never)")
    add_options_arg(p, "a setting of the MMDA solver (fitting only)")
    add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bars and no summary lines (errors are still printed)")
    p.set_defaults(func=run)


def run(args):
    import time
    from ..data import snapshots
    from ..data.outputs import check_output
    fit_opts = ("n_components", "C", "kernel", "gamma", "eps", "sample_size", "max_core",
                "seed", "checkpoint_dir", "checkpoint_every", "checkpoint_keep", "resume",
                "save_model", "option")
    if args.model is not None:
        fit_given = [o for o in fit_opts if getattr(args, o) is not None]
        if fit_given:
            opt = "--" + fit_given[0].replace("_", "-")
            raise SystemExit(f"streamcvm features: error: {opt} is for fitting; --model "
                             f"{args.model} is already fitted")
    ck = checkpoint_arg(args)
    if args.save_model is not None and \
            os.path.abspath(args.save_model) == os.path.abspath(args.output):
        raise SystemExit("streamcvm features: error: --save-model and -o name the same path")
    if not args.output.endswith(STORE_SUFFIXES):
        raise SystemExit(f"streamcvm features: error: {args.output}: the feature store's "
                         f"name must end in {', '.join(STORE_SUFFIXES)}")
    inputs = [args.store, args.model, ck]
    target = check_output(args.output, what="feature store", own_kind="features",
                          inputs=inputs, overwrite=args.overwrite)
    model_target = None
    if args.save_model is not None:
        model_target = check_output(args.save_model, what="model folder", own_kind="model",
                                    inputs=inputs, overwrite=args.overwrite, url_ok=True)
    check_checkpoint_dir(args, ck)
    from ..predict.features import write_features
    from ..estimators.model import load_model
    from ..data.store import open_store
    from ..estimators.mmda import MMDATransformer
    store = open_store(args.store)
    if args.model is not None:
        est = load_model(args.model)
        if not isinstance(est, MMDATransformer):
            raise SystemExit(f"streamcvm features: error: {args.model}: a "
                             f"{type(est).__name__} model, not MMDA features")
        if args.exact:
            est.set_params(compact=False)
    else:
        kw = given(args, n_components=True, C=True, kernel=True, eps=True, sample_size=True,
                   max_core=True, random_state="seed")
        if args.gamma is not None:
            kw["gamma"] = num_or_auto(args.gamma, "gamma", "features")
        if args.exact:
            kw["compact"] = False
        if args.option:
            kw["options"] = parse_options(args.option, "features")
        est = MMDATransformer(verbose=not args.quiet, **kw)
        resume = bool(args.resume) and snapshots.is_checkpoint_dir(args.resume)
        t = time.perf_counter()
        try:
            est.fit(store, checkpoint_dir=ck, resume=resume,
                    checkpoint_replace=args.checkpoint_replace,
                    **given(args, checkpoint_every=True, checkpoint_keep=True))
        except ValueError as e:
            raise SystemExit(f"streamcvm features: error: {e}") from None
        if not args.quiet:
            k = len(est.kernel_evaluations_)
            print(f"fitted {k:,} MMDA features on {store.n:,} rows in "
                  f"{time.perf_counter() - t:.1f} s: {est.kernel_evaluations_.mean():.0f} "
                  f"support rows per feature, {est.expansion_rows_:,} distinct in all, "
                  f"gamma {est.gamma_:.4g}", file=sys.stderr)
        if args.save_model is not None:
            from ..estimators.model import save_model
            save_model(est, args.save_model, overwrite=args.overwrite, target=model_target)
    done = []
    try:
        with runner_of(args, args.quiet) as runner:
            n = write_features(est, store, args.output, runner=runner, progress=not args.quiet,
                               model_path=args.model or args.save_model, target=target)
            done.append(n)
    except (KeyboardInterrupt, SystemError) as e:   # SystemError: an interrupt in numba
        # say what exists: the store once complete (the interrupt came as the
        # workers shut down), or the model --save-model wrote before it
        from . import Interrupted, interrupt_in
        if interrupt_in(e) is None or isinstance(e, Interrupted):
            raise
        if done:
            raise Interrupted(f"the feature store {args.output} is complete") from None
        if args.save_model is not None:
            raise Interrupted(f"the model {args.save_model} is complete; no feature store "
                              f"was written") from None
        raise
    if not args.quiet:
        print(f"wrote {n:,} rows x {len(est.kernel_evaluations_):,} features to "
              f"{args.output}", file=sys.stderr)
    return 0
