"""``streamcvm evaluate``: a model's figures on a labelled store."""
from .common import (add_cluster_args, add_exact, chunk_bar, exact_model, fit_to_model,
                     open_input, predictor, runner_of)


def add(sub):
    p = sub.add_parser(
        "evaluate", help="accuracy, balanced loss, AUC, confusion matrix; regression: RMSE, "
                         "normalised RMSE, MRE, R^2; ranking: NDCG@10, pairwise accuracy",
        description="A model's figures on a labelled store (or text file), streamed chunk "
                    "by chunk: classification and one-class: accuracy, balanced loss, AUC, "
                    "confusion matrix; regression: RMSE, RMSE / max y, MRE, R^2; ranking: "
                    "NDCG@10 and pairwise accuracy within the qid groups. A text file is "
                    "read as predict reads it (ingested once into a cache folder); rows of "
                    "fewer features than the model's get zeros past their last one.")
    p.add_argument("store", metavar="STORE",
                   help="the labelled rows: a store (.zarr folder, .h5 file or URL) or a "
                        "text file")
    p.add_argument("model", metavar="MODEL", help="a model folder written by train")
    p.add_argument("--json", action="store_true",
                   help="print the figures as one JSON object instead of the report")
    add_exact(p)
    add_cluster_args(p)
    p.set_defaults(func=run)


def run(args):
    import json
    with runner_of(args) as runner:
        lines, figures = evaluate_report(args.store, args.model, runner, exact=args.exact)
    print(json.dumps(figures) if args.json else "\n".join(lines))
    return 0


def evaluate_text(store_path, model_path, runner=None):
    """The report ``streamcvm evaluate`` prints."""
    return "\n".join(evaluate_report(store_path, model_path, runner)[0])


def evaluate_report(store_path, model_path, runner=None, exact=False):
    """(report lines, figures as a JSON-able dict) of ``streamcvm evaluate``
    (:func:`streamcvm.predict.evaluate.evaluate`); a store that does not fit
    the model ends the command in one line."""
    from ..estimators.model import load_model
    from ..predict.evaluate import evaluate
    est = exact_model(predictor(load_model(model_path), model_path, "evaluate"), exact)
    store = fit_to_model(open_input(store_path, "evaluate"), est, store_path, "evaluate")
    with chunk_bar(store, "evaluate") as progress:
        try:
            return evaluate(est, store, runner, progress, name=store_path)
        except ValueError as e:
            raise SystemExit(f"streamcvm evaluate: error: {e}") from None
