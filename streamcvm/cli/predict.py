"""``streamcvm predict``: every row of a store through a model, to a text file or
a store."""
import sys

from .common import (STORE_SUFFIXES, add_cluster_args, add_exact, chunk_bar, exact_model,
                     fit_to_model, open_input, predictor, runner_of)


def add(sub):
    p = sub.add_parser(
        "predict", help="predict every row of a store (or a text file), chunk by chunk",
        description="Predict every row of a store through a model, chunk by chunk, into a "
                    "text file (one label or value per line, as LIBSVM's svm-predict) or "
                    "a store. A text file (svmlight/LIBSVM or CSV; plain, .gz, .bz2) is "
                    "read as a store: ingested once into a cache folder, reused while it is "
                    "unchanged. Rows of fewer features than the model's are read with "
                    "zeros past their last one, as svm-predict does; more are refused.")
    p.add_argument("store", metavar="STORE",
                   help="the rows to predict: a store (.zarr folder, .h5 file or URL) or a "
                        "text file")
    p.add_argument("model", metavar="MODEL", help="a model folder written by train")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="text file, one prediction per line ('-': standard output); or a "
                        "store (.zarr, .h5): y = the predictions, X = the decision values")
    p.add_argument("-b", "--probability", type=int, choices=[0, 1], default=0,
                   help="1: write the class probabilities too (a model trained with -b 1): "
                        "text: a 'labels ...' header, then the label and one probability per "
                        "class on each line, as LIBSVM; the header lists the classes sorted "
                        "(LIBSVM: in the order the training file first shows them), and the "
                        "columns follow it; store: X = the probabilities")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at OUT (a prediction "
                        "store is replaced without it; the inputs never)")
    add_exact(p)
    add_cluster_args(p)
    p.set_defaults(func=run)


def run(args):
    from ..data.outputs import check_output
    from ..estimators.model import load_model
    to_store = args.output.endswith(STORE_SUFFIXES)
    target = check_output(args.output,
                          what="prediction store" if to_store else "prediction file",
                          own_kind="predictions" if to_store else None,
                          inputs=[args.store, args.model], overwrite=args.overwrite,
                          stream=not to_store)
    mode = target.mode
    est = exact_model(predictor(load_model(args.model), args.model, "predict"), args.exact)
    proba = bool(args.probability)
    if proba and getattr(est, "probA_", None) is None:
        raise SystemExit(f"streamcvm predict: error: {args.model}: -b 1 needs a classifier "
                         "trained with -b 1 (probability estimates)")
    store = fit_to_model(open_input(args.store, "predict"), est, args.store, "predict")
    from ..data.atomic import identity
    before = identity(args.output)
    done = []       # (rows) once the output is complete: a later Ctrl-C keeps it
    try:
        return _write(args, est, store, to_store, mode, proba, target, done)
    except (KeyboardInterrupt, SystemError) as e:   # SystemError: an interrupt in numba
        from . import Interrupted, interrupt_in
        if interrupt_in(e) is None or isinstance(e, Interrupted):
            raise
        if done:        # e.g. while the dask workers shut down: the output stays
            where = "standard output" if mode == "stdout" else args.output
            raise Interrupted(f"{done[0]:,} predictions were written to {where}, "
                              f"complete") from None
        now = identity(args.output)
        if mode not in ("stdout", "special") and now is not None and now != before:
            # published (a whole output is renamed into place) as the interrupt came
            raise Interrupted(f"the predictions were written to {args.output}, "
                              f"complete") from None
        if mode in ("stdout", "special"):      # written straight into: lines went out
            where = "standard output" if mode == "stdout" else args.output
            raise Interrupted(f"the predictions already written to {where} are "
                              f"incomplete") from None
        raise


def _write(args, est, store, to_store, mode, proba, target, done):
    from ..predict import writers
    with runner_of(args) as runner, chunk_bar(store, "predict") as progress:
        if to_store:
            try:
                n = writers.to_store(est, store, args.output, args.model, runner, proba,
                                     target.replace, progress)
            except ValueError as e:         # a store without rows
                raise SystemExit(f"streamcvm predict: error: {e}") from None
            done.append(n)
            print(f"wrote {n:,} predictions (y) and "
                  f"{'class probabilities' if proba else 'decision values'} (X) to the store "
                  f"{args.output}")
            return 0
        n = writers.to_text(est, store, args.output, runner, mode, proba, target.replace,
                            progress)
        done.append(n)
    print(f"wrote {n:,} predictions to {'standard output' if mode == 'stdout' else args.output}",
          file=sys.stderr if mode in ("stdout", "special") else sys.stdout)
    return 0
