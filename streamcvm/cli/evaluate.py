"""``streamcvm evaluate``: a model's figures on a labelled store."""
from .common import add_cluster_args, add_exact, chunk_bar, exact_model, runner_of


def add(sub):
    p = sub.add_parser("evaluate", help="accuracy, balanced loss, AUC, confusion matrix; "
                                        "regression: RMSE, normalised RMSE, MRE, R^2")
    p.add_argument("store", metavar="STORE")
    p.add_argument("model", metavar="MODEL")
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
    from ..data.store import open_store
    from ..estimators.model import load_model
    from ..predict.evaluate import evaluate
    est = exact_model(load_model(model_path), exact)
    store = open_store(store_path)
    with chunk_bar(store, "evaluate") as progress:
        try:
            return evaluate(est, store, runner, progress, name=store_path)
        except ValueError as e:
            raise SystemExit(f"streamcvm evaluate: error: {e}") from None
