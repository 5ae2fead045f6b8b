"""``streamcvm train``: a classifier, one-class model, regressor or ranker from a
store, saved as a model folder."""
import argparse
import math
import sys

from .common import (TASKS, Default, add_checkpoint_replace, add_cluster_args, add_options_arg,
                     check_checkpoint_dir, checkpoint_arg, estimator_default, given,
                     num_or_auto, option, open_input, parse_options, positive_int, runner_of,
                     signature_default)
from .libsvm import SCALE_KINDS


def add(sub):
    p = sub.add_parser("train", help="train a classifier, one-class model, regressor or "
                                     "ranker from a store (or a text file)",
                       description="Train a kernel L2-SVM, L2-SVR or ranking SVM from a store "
                                   "by BVM, CVM or Frank-Wolfe; only the core set is held in "
                                   "memory. A text file (svmlight/LIBSVM or CSV; plain, .gz, "
                                   ".bz2) is read as a store: ingested once into a cache "
                                   "folder, reused while it is unchanged. svm-train's letters "
                                   "work: -c, -g, -t 0-2, -d, -r, -e (another eps), -b, -wLABEL "
                                   "WEIGHT, -v K, -q. Options not given take the estimator's "
                                   "defaults (streamcvm.CVMClassifier, CVMOneClass, "
                                   "CVMRegressor, CVMRanker), which the help names.")
    p.add_argument("store", metavar="STORE",
                   help="the training rows: a store (.zarr folder, .h5 file or URL) or a "
                        "text file")
    p.add_argument("-o", "--output", metavar="MODEL",
                   help="model folder to write (needed unless -v)")
    p.add_argument("--task", choices=list(TASKS), default="classification",
                   help="what to train (default classification; ranking: pairs within the "
                        "store's qid groups)")
    option(p, "--method", choices=["auto", "bvm", "cvm", "fvm"], lib=estimator_default("method"),
           help="auto (classification: machines of at most 16,384 rows solved exactly "
                "by SMO, larger ones by BVM), bvm, cvm or fvm (default %(lib)s); weights, "
                "regression, ranking and linear/poly kernels need cvm or fvm")
    option(p, "-c", "--C", lib=estimator_default("C"),
           help="regularisation (default %(lib)s; classification's 'auto': chosen with "
                "gamma on held-out rows; regression's 'auto' = 2 x rows solved exactly, "
                "5 x rows by CVM)")
    option(p, "--mu", lib=estimator_default("mu", ("regression",)),
           help="regression: the mean slack outside the tube, in the target's units; "
                "'auto' (default %(lib)s): chosen with gamma on held-out rows")
    option(p, "--class-weight", metavar="W",
           help="'balanced' or LABEL:WEIGHT,... (C of a class's rows times WEIGHT; "
                "write --class-weight=-1:2,1:1 when a label is negative)")
    p.add_argument("-w", dest="weights", action="append", metavar="LABEL:WEIGHT",
                   help="svm-train's -wLABEL WEIGHT, written as there (-w1 5, -w-1 2) or as "
                        "-w 1:5: C of class LABEL's rows times WEIGHT; repeatable, and "
                        "combined with --class-weight (-w wins for a label both name)")
    option(p, "-t", "--kernel", lib=estimator_default("kernel"),
           help="rbf, laplacian (L1), exponential (L2: exp(-gamma ||x - z||)), npoly; "
                "linear, poly (cvm, fvm); or svm-train's numbers: 0 linear, 1 poly, 2 rbf "
                "(3, sigmoid, is not a kernel here) (default %(lib)s)")
    option(p, "-d", "--degree", type=positive_int, lib=estimator_default("degree"),
           help="degree of the poly and npoly kernels, (gamma x'z + coef0)^degree "
                "(default %(lib)s)")
    option(p, "-r", "--coef0", type=float, lib=estimator_default("coef0"),
           help="coef0 of the poly and npoly kernels (default %(lib)s)")
    option(p, "-g", "--gamma", lib=estimator_default("gamma"),
           help="kernel width: 'auto' or a number (default %(lib)s); 'auto': "
                "classification and regression choose it on held-out rows among "
                "multiples of 1 / the mean squared distance between rows, the others "
                "use 1 / that distance")
    option(p, "-e", "--eps", lib=estimator_default("eps"),
           help="the core vector method's ball tolerance: training stops when every "
                "row lies within (1 + eps) times the core set's ball radius; not LIBSVM's "
                "-e, a stopping tolerance on the dual's gradient (LIBSVM's 0.001 is no "
                "equivalent). 'auto' or a number in (0, 1) (default %(lib)s; 'auto': "
                "halved until small against the margin)")
    option(p, "-a", "--sample-size", type=positive_int, lib=estimator_default("sample_size"),
           help="rows per violator search (default %(lib)s)")
    option(p, "-f", "--max-core", type=positive_int, lib=Default(_max_core),
           help="cap on core vectors per machine (default %(lib)s)")
    option(p, "--seed", type=int, lib=estimator_default("random_state"),
           help="seed of the row sampling (default %(lib)s)")
    option(p, "-b", "--probability", type=int, choices=[0, 1],
           lib=estimator_default("probability", ("classification",), fmt=int),
           help="classification: 1 also fits Platt's sigmoid per machine for class "
                "probabilities (predict -b 1), as LIBSVM's -b 1: up to %(cv_rows)s rows "
                "on every row's decision value from %(folds)s-fold cross-validation "
                "(%(folds)s more fits; the model is trained on every row), beyond that on "
                "%(share)s of the rows (%(lo)s to %(hi)s) held out from training "
                "(default %(lib)s)")
    option(p, "--scale", nargs="?", const="standard", choices=list(SCALE_KINDS),
           help="scale each feature from one pass over the store; saved with the model "
                "and applied by predict and evaluate. standard (also a bare --scale): "
                "(x - mean) / sd; range: svm-scale's [-1, 1] from the feature's min and "
                "max. Sparse stores, either: x / max |x| (into [-1, 1], no centring, "
                "which would fill every zero)")
    option(p, "-v", "--cross-validation", type=_folds, metavar="K",
           help="svm-train's -v: K-fold cross-validation instead of a model "
                "(classification: stratified folds, 'Cross Validation Accuracy'; "
                "regression: mean squared error and squared correlation), over the "
                "store's rows read into memory (at most %(cv_max)s); no model is written")
    option(p, "--full-pass", action="store_const", const=True,
           help="finish with passes over every row until none violates")
    option(p, "--multi-class", choices=["ovo", "ovr"],
           lib=estimator_default("multi_class", ("classification",)),
           help="one-vs-one (as LIBSVM) or one-vs-rest (default %(lib)s)")
    p.add_argument("--one-class", action="store_true", help="the same as --task one-class")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the run here (crash-safe; the last few are kept)")
    option(p, "--checkpoint-every", type=float, metavar="SECONDS",
           lib=signature_default(_fit, "checkpoint_every"),
           help="seconds between snapshots (default %(lib)s; also at each eps level "
                "and after each machine)")
    option(p, "--checkpoint-iters", type=positive_int, metavar="N",
           help="also snapshot every N iterations")
    option(p, "--checkpoint-keep", type=positive_int, metavar="K",
           lib=signature_default(_fit, "checkpoint_keep"),
           help="snapshots kept (default %(lib)s)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue from the newest snapshot in DIR (and keep writing there); "
                        "DIR must hold one, unless --checkpoint-dir names DIR too (then a "
                        "run with no snapshot yet starts fresh)")
    add_checkpoint_replace(p)
    option(p, "--train-size", metavar="N",
           lib=estimator_default("train_size", ("classification", "regression")),
           help="classification and regression: 'auto' (a machine of "
                "more than 65,536 rows trains on random samples of 16,384, 32,768, "
                "... rows while the stages' learning curve on held-out validation rows "
                "promises more than --stage-tol from the rest of the sample; "
                "classification first tries every row while its core set "
                "stays under 2,048 vectors; regression stops before a stage whose "
                "core set would pass 11,000), 'all' rows, or at most N rows that way "
                "(default %(lib)s)")
    option(p, "--stage-tol", type=float, metavar="POINTS",
           lib=estimator_default("stage_tol", ("classification",)),
           help="classification: the points of accuracy progressive stages may leave "
                "on the table by stopping early, as their learning curve estimates "
                "them (default %(lib)s; 0: every stage up to the sample)")
    option(p, "--no-compact", dest="compact", action="store_const", const=False,
           help="classification and regression: no compact expansion (by default a "
                "machine trained on sampled rows also gets one over at most 4,096 "
                "basis points, kept if its validation errors are within --stage-tol "
                "points of the full one's; predict uses it, predict --exact the full one)")
    option(p, "--stop", choices=["slack", "validation"],
           lib=estimator_default("stop", ("classification",)),
           help="what ends the eps annealing: the margin slack or, with held-out rows "
                "(--train-size), the validation error (default %(lib)s)")
    option(p, "-j", "--jobs", type=int, metavar="N",
           lib=estimator_default("n_jobs", ("classification",)),
           help="threads of the exact BVM pass (-1: every core; 1: one; default %(lib)s); "
                "the model is the same")
    option(p, "--max-classes", type=positive_int, metavar="K", lib=Default(_many_classes),
           help="classification: refuse a target with more classes than this "
                "(default %(lib)s; many classes usually mean a regression target)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at MODEL (an existing "
                        "model folder is replaced without it; the input never)")
    add_options_arg(p)
    add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar and no summary line (errors, and -v's figures, "
                        "are still printed)")
    p.set_defaults(func=run)
    for a in p._actions:        # the numbers the -b and -v helps name, read when shown
        if a.dest == "probability":
            a.cv_rows, a.folds = _option("probability_cv_rows"), _option("probability_folds")
            a.lo, a.hi = _option("probability_holdout_min"), _option("probability_holdout_max")
            a.share = Default(lambda: f"{_default('probability_holdout') * 100:.0f}%")
        elif a.dest == "cross_validation":
            a.cv_max = _option("cv_max_rows")


def _default(name):
    from ..options import default
    return default(name)


def _option(name):
    """An option's default, as a help text names it (read when shown)."""
    return Default(lambda: _default(name))


def _folds(text):
    k = positive_int(text)
    if k < 2:
        raise argparse.ArgumentTypeError(f"needs at least 2 folds, got {k}")
    return k


def _fit():
    from ..estimators import CVMClassifier
    return CVMClassifier.fit


def _max_core():
    from ..estimators import CVMRanker
    return (f"none; ranking: {CVMRanker().max_core:,}; regression: "
            f"{_default('regression_max_core'):,} on every row, "
            f"{_default('regression_stage_core'):,} per progressive stage")


def _many_classes():
    return _default("many_classes")


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


# options of some tasks only: (option as the user writes it, those tasks)
TASK_OPTIONS = {"class_weight": ("--class-weight", ("classification",)),
                "weights": ("-w", ("classification",)),
                "probability": ("-b", ("classification",)),
                "multi_class": ("--multi-class", ("classification",)),
                "stop": ("--stop", ("classification",)),
                "stage_tol": ("--stage-tol", ("classification",)),
                "jobs": ("-j", ("classification",)),
                "mu": ("--mu", ("regression",)),
                "train_size": ("--train-size", ("classification", "regression")),
                "compact": ("--no-compact", ("classification", "regression")),
                "cross_validation": ("-v", ("classification", "regression"))}


def run(args):
    task = "one-class" if args.one_class else args.task
    for attr, (opt, tasks) in TASK_OPTIONS.items():
        v = getattr(args, attr)
        if v is not None and task not in tasks and not (attr == "probability" and v == 0):
            what = "-b 1 (probabilities)" if attr == "probability" else opt
            raise SystemExit(f"streamcvm train: error: {what} is for {' and '.join(tasks)}")
    cv = args.cross_validation
    if cv is not None:
        _check_cross_validation(args)
    elif args.output is None:
        raise SystemExit("streamcvm train: error: -o MODEL is needed (the model folder to "
                         "write), unless -v K (cross-validation, no model)")
    else:
        _check_train_paths(args)        # before the heavy imports, and before any work
    kw = _params(args, task)
    from .. import estimators
    store = open_input(args.store, "train", args.quiet)
    if task == "classification":
        _check_classes(store, args)
    cls = getattr(estimators, TASKS[task])
    if cv is not None:
        from .libsvm import cross_validate
        from ..options import resolve
        return cross_validate(store, lambda: cls(**kw), task, cv,
                              0 if args.seed is None else args.seed, args.quiet,
                              resolve(kw.get("options")).cv_max_rows)
    return _train(args, task, store, cls(verbose=not args.quiet, **kw))


def _params(args, task):
    """The estimator parameters of the options given; the rest are the
    estimator's own defaults (one place)."""
    from .libsvm import class_weights, kernel_name
    kw = given(args, method=True, sample_size=True, max_core=True, random_state="seed",
               scale=True, full_pass=True, multi_class=True, stop=True, n_jobs="jobs",
               compact=True, stage_tol=True, degree=True, coef0=True)
    if args.kernel is not None:
        kw["kernel"] = kernel_name(args.kernel)
    for name in ("degree", "coef0"):
        if name in kw and kw.get("kernel") not in ("poly", "npoly"):
            opt = "-d/--degree" if name == "degree" else "-r/--coef0"
            raise SystemExit(f"streamcvm train: error: {opt} is for the poly and npoly "
                             f"kernels (-t poly, -t 1, -t npoly)")
    if "coef0" in kw and not math.isfinite(kw["coef0"]):
        raise SystemExit(f"streamcvm train: error: -r/--coef0 must be a finite number, got "
                         f"{kw['coef0']!r}")
    for name in ("C", "gamma", "eps", "mu"):
        if getattr(args, name) is not None:
            kw[name] = num_or_auto(getattr(args, name), name)
    if kw.get("C") == "auto" and task not in ("regression", "classification"):
        raise SystemExit("streamcvm train: error: --C auto is for classification and "
                         "regression")
    if kw.get("method") == "auto" and task != "classification":
        raise SystemExit("streamcvm train: error: --method auto is for classification")
    if args.probability:
        kw["probability"] = True
    cw = class_weights(args.class_weight, args.weights, _class_weight)
    if cw is not None:
        kw["class_weight"] = cw
    if args.train_size is not None:
        kw["train_size"] = _train_size(args.train_size)
    if args.option:
        kw["options"] = parse_options(args.option, "train")
    return kw


def _train(args, task, store, est):
    """Fit ``est`` on ``store``, write the model, print the summary."""
    import time

    from ..data import snapshots
    from ..estimators.model import save_model
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
            est.fit(store, checkpoint_dir=args.resume or args.checkpoint_dir, resume=resume,
                    checkpoint_replace=args.checkpoint_replace, client=runner.client,
                    **given(args, checkpoint_every=True, checkpoint_iters=True,
                            checkpoint_keep=True))
    except ValueError as e:     # parameters the estimator refuses (checked before training)
        raise SystemExit(f"streamcvm train: error: {e}") from None
    dt = time.perf_counter() - t
    from ..estimators.feature_range import check_finite, uniform_factor
    try:        # a model that predicts NaN is never written
        check_finite(est)
    except ValueError as e:
        raise SystemExit(f"streamcvm train: error: {e}") from None
    save_model(est, args.output, overwrite=args.overwrite, target=args.model_target)
    if not args.quiet:
        extra = f", mu {est.mu_:.4g}, tube half width {est.epsilon_bar_:.4g}" \
            if task == "regression" else ""
        if task == "classification":
            chosen = " and ".join(n for n, v in (("C", args.C), ("gamma", args.gamma))
                                  if v in (None, "auto"))     # not given: searched for
            how = "" if not (est.selection_ and chosen) else \
                f" ({chosen} chosen on held-out rows: streamcvm info)" \
                if est.selection_.get("trials") else \
                f" ({chosen}: the default point, too few rows to hold out: streamcvm info)"
            extra = f", C {est.C_:.4g}{how}"
        print(f"trained {type(est).__name__} ({est.method}) on {store.n:,} rows in {dt:.1f} s: "
              f"{est.core_set_size_:,} core vectors, {_support(est)}, "
              f"gamma {est.gamma_:.4g}{_scaled(uniform_factor(est))}{extra} -> "
              f"{args.output}")
        ck = est.checkpoint_stats_
        if ck is not None:
            print(f"checkpoints: {ck['written']} written in {ck['seconds']:.2f} s "
                  f"({100 * ck['seconds'] / max(dt, 1e-9):.1f}% of the training time)")
    return 0


def _support(est):
    """The summary's support count: distinct support rows (classifier,
    regressor), the machine's support rows (one-class; ranking: the rows of
    its support pairs, one coefficient each)."""
    import numpy as np
    n = int(np.sum(est.n_support_)) if hasattr(type(est), "n_support_") else \
        len(est.machine_.coef)
    return f"{n:,} support vectors"


def _check_cross_validation(args):
    """-v K writes no model and no snapshot, and fits in this process: the
    options that would do otherwise are refused, not ignored."""
    for attr, opt, why in (("output", "-o", "writes no model"),
                           ("checkpoint_dir", "--checkpoint-dir", "writes no snapshot"),
                           ("resume", "--resume", "writes no snapshot"),
                           ("scheduler", "--scheduler", "fits in this process"),
                           ("workers", "--workers", "fits in this process")):
        if getattr(args, attr) is not None:
            raise SystemExit(f"streamcvm train: error: -v K runs a cross-validation in "
                             f"memory and {why}: drop {opt}")


def _scaled(s):
    """How the summary line names a fit's uniform scale (None: none)."""
    if s is None:
        return ""
    import math
    return f" (on the features times 2^{int(math.log2(s))}, which the model applies)"


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
    most = _many_classes() if args.max_classes is None else args.max_classes
    if k > most:
        raise SystemExit(f"streamcvm train: error: {args.store}: y has {k:,} classes, more "
                         f"than --max-classes {most}{hint} (or raise --max-classes)")
