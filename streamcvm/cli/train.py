"""``streamcvm train``: a classifier, one-class model, regressor or ranker from a
store, saved as a model folder."""
import sys

from .common import (add_checkpoint_replace, add_cluster_args, check_checkpoint_dir,
                     checkpoint_arg, num_or_auto, positive_int, runner_of)


def add(sub):
    p = sub.add_parser("train", help="train a classifier, regressor or one-class model "
                                     "from a store",
                       description="Train a kernel L2-SVM or L2-SVR from a store by BVM, CVM "
                                   "or Frank-Wolfe; only the core set is held in memory.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("-o", "--output", required=True, metavar="MODEL", help="model folder to write")
    p.add_argument("--task", choices=["classification", "regression", "ranking", "one-class"],
                   default="classification",
                   help="what to train (default classification; ranking: pairs within the "
                        "store's qid groups)")
    p.add_argument("--method", choices=["bvm", "cvm", "fvm"], default=None,
                   help="bvm (default for classification), cvm (default for one-class, "
                        "regression and ranking), fvm; weights, regression, ranking and "
                        "linear/poly kernels need cvm or fvm")
    p.add_argument("-c", "--C", default=None,
                   help="regularisation (default 1; regression: 'auto' = 5 x rows)")
    p.add_argument("--mu", default=None,
                   help="regression: the mean slack outside the tube, in the target's units; "
                        "'auto' (default): chosen with gamma on held-out rows")
    p.add_argument("--class-weight", default=None, metavar="W",
                   help="'balanced' or LABEL:WEIGHT,... (C of a class's rows times WEIGHT; "
                        "write --class-weight=-1:2,1:1 when a label is negative)")
    p.add_argument("-t", "--kernel", default=None,
                   help="rbf (default), laplacian (L1), exponential (L2: exp(-gamma ||x - z||)), "
                        "npoly; linear, poly (cvm, fvm)")
    p.add_argument("-g", "--gamma", default=None,
                   help="kernel width: 'auto' (default: 1 / mean squared distance) or a number")
    p.add_argument("-e", "--eps", default=None,
                   help="ball tolerance: 'auto' (default; ranking: 1e-4) or a number")
    p.add_argument("-a", "--sample-size", type=positive_int, default=None,
                   help="rows per violator search (default 59)")
    p.add_argument("-f", "--max-core", type=positive_int, default=None,
                   help="cap on core vectors per machine (default: none; ranking 20,000; "
                        "regression 20,000 on every row, 11,000 per progressive stage)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-b", "--probability", type=int, choices=[0, 1], default=0,
                   help="classification: 1 also fits Platt's sigmoid on held-out rows (10%% "
                        "of the rows, at most 50,000, not trained on) for class probabilities "
                        "(predict -b 1), as LIBSVM's -b 1")
    p.add_argument("--scale", action="store_true",
                   help="standardise each feature from one pass over the store (sparse: "
                        "divide by its largest |x|), as svm-scale; saved with the model and "
                        "applied by predict and evaluate")
    p.add_argument("--full-pass", action="store_true",
                   help="finish with passes over every row until none violates")
    p.add_argument("--multi-class", choices=["ovo", "ovr"], default="ovo",
                   help="one-vs-one (default, as LIBSVM) or one-vs-rest")
    p.add_argument("--one-class", action="store_true", help="the same as --task one-class")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the run here (crash-safe; the last 2 are kept)")
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help="seconds between snapshots (default 60; also at each eps level "
                        "and after each machine)")
    p.add_argument("--checkpoint-iters", type=positive_int, default=None, metavar="N",
                   help="also snapshot every N iterations")
    p.add_argument("--checkpoint-keep", type=positive_int, default=2, metavar="K",
                   help="snapshots kept (default 2)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue from the newest snapshot in DIR (and keep writing there); "
                        "DIR must hold one, unless --checkpoint-dir names DIR too (then a "
                        "run with no snapshot yet starts fresh)")
    add_checkpoint_replace(p)
    p.add_argument("--train-size", default="auto", metavar="N",
                   help="classification and regression: 'auto' (default: a machine of "
                        "more than 65,536 rows trains on random samples of 16,384, 32,768, "
                        "... rows while a held-out validation sample says the last doubling "
                        "helped; classification first tries every row while its core set "
                        "stays under 2,048 vectors; regression stops before a stage whose "
                        "core set would pass 11,000), 'all' rows, or at most N rows that way")
    p.add_argument("--no-compact", action="store_true",
                   help="classification and regression: no compact expansion (by default a "
                        "machine trained on sampled rows also gets one over at most 4,096 "
                        "basis points, kept if its validation errors are not significantly "
                        "worse; predict uses it, predict --exact the full one)")
    p.add_argument("--stop", choices=["slack", "validation"], default="slack",
                   help="what ends the eps annealing: the margin slack (default) or, with "
                        "held-out rows (--train-size), the validation error")
    p.add_argument("-j", "--jobs", type=int, default=-1, metavar="N",
                   help="threads of the exact BVM pass (default -1: every core; 1: one); "
                        "the model is the same")
    p.add_argument("--max-classes", type=positive_int, default=100, metavar="K",
                   help="classification: refuse a target with more classes than this "
                        "(default 100; many classes usually mean a regression target)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at MODEL (an existing "
                        "model folder is replaced without it; the input never)")
    add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=run)


def _train_size(text):
    if text in ("auto", "all"):
        return text
    try:
        return int(float(text))
    except ValueError:
        raise SystemExit(f"streamcvm train: error: --train-size must be 'auto', 'all' or a "
                         f"number of rows, got {text!r}") from None


def _class_weight(text):
    """--class-weight: 'balanced' or LABEL:WEIGHT,... (labels as numbers when
    they parse as numbers)."""
    if text is None or text == "balanced":
        return text
    out = {}
    for part in text.split(","):
        label, sep, w = part.rpartition(":")
        try:
            if not sep:
                raise ValueError
            weight = float(w)
        except ValueError:
            raise SystemExit(f"streamcvm train: error: --class-weight must be 'balanced' or "
                             f"LABEL:WEIGHT,..., got {part!r}") from None
        try:
            label = float(label)
            label = int(label) if label.is_integer() else label
        except ValueError:
            pass
        out[label] = weight
    return out


def run(args):
    import time

    task = "one-class" if args.one_class else args.task
    if task != "classification" and args.class_weight is not None:
        raise SystemExit("streamcvm train: error: --class-weight is for classification")
    if task != "classification" and args.probability:
        raise SystemExit("streamcvm train: error: -b 1 (probabilities) is for classification")
    if task != "regression" and args.mu is not None:
        raise SystemExit("streamcvm train: error: --mu is for regression")
    if task not in ("classification", "regression") and args.train_size != "auto":
        raise SystemExit("streamcvm train: error: --train-size is for classification and "
                         "regression")
    if task not in ("classification", "regression") and args.no_compact:
        raise SystemExit("streamcvm train: error: --no-compact is for classification and "
                         "regression")
    if task != "classification" and args.stop != "slack":
        raise SystemExit("streamcvm train: error: --stop is for classification")
    _check_train_paths(args)        # before the heavy imports, and before any work
    import numpy as np
    from ..data import snapshots
    from ..estimators import CVMClassifier, CVMOneClass, CVMRanker, CVMRegressor
    from ..estimators.model import save_model
    from ..data.store import open_store
    store = open_store(args.store)
    if task == "classification":
        _check_classes(store, args)
    C = None if args.C is None else num_or_auto(args.C, "C")
    if C == "auto" and task != "regression":
        raise SystemExit("streamcvm train: error: --C auto is for regression")
    # the options given; the rest are the estimator's own defaults (one place)
    given = dict(method=args.method, C=C, kernel=args.kernel,
                 gamma=None if args.gamma is None else num_or_auto(args.gamma, "gamma"),
                 eps=None if args.eps is None else num_or_auto(args.eps, "eps"),
                 sample_size=args.sample_size, max_core=args.max_core)
    kw = {k: v for k, v in given.items() if v is not None}
    kw.update(scale=args.scale, full_pass=args.full_pass, random_state=args.seed,
              verbose=not args.quiet)
    if task == "one-class":
        est = CVMOneClass(**kw)
    elif task == "regression":
        if args.mu is not None:
            kw["mu"] = num_or_auto(args.mu, "mu")
        est = CVMRegressor(train_size=_train_size(args.train_size),
                           compact=False if args.no_compact else "auto", **kw)
    elif task == "ranking":
        est = CVMRanker(**kw)
    else:
        est = CVMClassifier(multi_class=args.multi_class, probability=bool(args.probability),
                            class_weight=_class_weight(args.class_weight),
                            train_size=_train_size(args.train_size), stop=args.stop,
                            n_jobs=args.jobs, compact=False if args.no_compact else "auto",
                            **kw)
    resume = bool(args.resume)
    if resume and not snapshots.is_checkpoint_dir(args.resume):   # --checkpoint-dir DIR too
        resume = False
        if not args.quiet:
            print(f"no snapshot in {args.resume} yet: starting a fresh run", file=sys.stderr)
    t = time.perf_counter()
    try:
        import warnings
        with runner_of(args, args.quiet) as runner, warnings.catch_warnings():
            # --max-classes already judged the number of classes
            warnings.filterwarnings("ignore", message="streamcvm: the store's y has")
            est.fit(store, checkpoint_dir=args.resume or args.checkpoint_dir,
                    checkpoint_every=args.checkpoint_every,
                    checkpoint_iters=args.checkpoint_iters,
                    checkpoint_keep=args.checkpoint_keep, resume=resume,
                    checkpoint_replace=args.checkpoint_replace, client=runner.client)
    except ValueError as e:     # parameters the estimator refuses (checked before training)
        raise SystemExit(f"streamcvm train: error: {e}") from None
    dt = time.perf_counter() - t
    save_model(est, args.output, overwrite=args.overwrite, target=args.model_target)
    if not args.quiet:
        nsv = int(np.sum(est.n_support_)) if task != "one-class" else len(est.machine_.coef)
        extra = f", mu {est.mu_:.4g}, tube half width {est.epsilon_bar_:.4g}" \
            if task == "regression" else ""
        print(f"trained {type(est).__name__} ({est.method}) on {store.n:,} rows in {dt:.1f} s: "
              f"{est.core_set_size_:,} core vectors, {nsv:,} support vectors, "
              f"gamma {est.gamma_:.4g}{extra} -> {args.output}")
        ck = est.checkpoint_stats_
        if ck is not None:
            print(f"checkpoints: {ck['written']} written in {ck['seconds']:.2f} s "
                  f"({100 * ck['seconds'] / max(dt, 1e-9):.1f}% of the training time)")
    return 0


def _check_train_paths(args):
    """Before any work: the model folder may not replace the store, the
    checkpoints or another user's data (streamcvm.data.outputs); snapshots go
    outside the store; --resume names a folder that holds a snapshot."""
    from ..data.outputs import check_output
    ck = checkpoint_arg(args)
    args.model_target = check_output(args.output, what="model folder", own_kind="model",
                                     inputs=[args.store, ck], overwrite=args.overwrite,
                                     url_ok=True)
    check_checkpoint_dir(args, ck)


def _check_classes(store, args):
    """Classification needs discrete labels: refuse a target that looks
    continuous (too many distinct values, non-integers), with a hint."""
    import numpy as np
    hint = "; for a continuous target use --task regression"
    if store.classes is None:
        raise SystemExit(f"streamcvm train: error: {args.store}: y has more than "
                         f"1,000 distinct values, not classes{hint}")
    k = len(store.classes)
    if not store.label_names and not np.all(store.classes == np.round(store.classes)):
        raise SystemExit(f"streamcvm train: error: {args.store}: y has {k:,} distinct values, "
                         f"some not integers: not classes{hint}")
    if k > args.max_classes:
        raise SystemExit(f"streamcvm train: error: {args.store}: y has {k:,} classes, more "
                         f"than --max-classes {args.max_classes}{hint} (or raise "
                         f"--max-classes)")
