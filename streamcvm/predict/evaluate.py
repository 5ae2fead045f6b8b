"""A model's figures on a labelled store, streamed chunk by chunk, in memory
independent of the rows: accuracy, balanced loss, the AUC (a histogram of the
scores) and the confusion counts for classifiers and one-class models; RMSE,
normalised RMSE, MRE and R^2 for regressors; NDCG@10 and pairwise accuracy
for rankers (:mod:`.metrics`). :func:`evaluate` returns the report's lines and
the figures as a JSON-able dict. A store whose labels do not fit the model
(text classes for a regressor, no class of the model, no query ids for a
ranker) is a ValueError in one line."""
import numpy as np

from .chunks import class_table, predict_chunks
from .metrics import ClassTotals, RankingTotals, RegressionTotals
from .writers import label_codes


def evaluate(est, store, runner=None, progress=None, name=None):
    """(report lines, figures) of ``est`` on ``store``; the chunks'
    predictions are computed on ``runner`` (default: threads);
    ``progress(done, total)`` after each chunk; ``name``: the store as the
    messages call it (default: its path)."""
    name = name or getattr(store, "path", "the store")
    if est.task == "regression":
        _check_regression_store(est, store, name)
        return _regression_report(est, store, runner, progress)
    if est.task == "ranking":
        return _ranking_report(est, store, runner, progress)
    one_class = est.task == "one-class"
    classes = np.array([-1, 1]) if one_class else est.classes_
    table = _class_table(est, store, name, one_class)     # store label -> class index
    tot = ClassTotals(len(classes))
    for r in predict_chunks(est, store, runner, progress=progress):
        t = table[np.searchsorted(store.classes, r.y)]
        p = (np.asarray(r.pred) == 1).astype(np.int64) if one_class else \
            label_codes(classes, r.pred)
        tot.add(t, p, r.dec)
    r = tot.result()
    names = [f"{c:g}" if isinstance(c, (float, np.floating)) else str(c) for c in classes]
    figures = {"task": "one-class" if one_class else "classification", "rows": r["rows"],
               "unknown_label_rows": r["unknown_label_rows"], "accuracy": r["accuracy"],
               "balanced_loss": r["balanced_loss"], "classes": names,
               "confusion": r["confusion"]}
    lines = [f"rows        {r['rows']:,}"]
    if r["unknown_label_rows"]:
        lines[0] += (f"  (and {r['unknown_label_rows']:,} rows of labels the model does "
                     f"not know, not counted)")
    lines += [f"accuracy    {r['accuracy']:.4f}",
              f"balanced loss {figures['balanced_loss']:.4f}  (1 - mean per-class recall)"]
    if "auc" in r:
        figures["auc"] = r["auc"]
        lines.append(f"AUC         {figures['auc']:.4f}")
    lines.append("confusion   rows: true class, columns: predicted")
    cm = tot.cm
    w = max(max(len(n) for n in names), len(f"{cm.max():,}")) + 2
    lines.append(" " * w + "".join(f"{n:>{w}}" for n in names))
    for n, row in zip(names, cm):
        lines.append(f"{n:>{w}}" + "".join(f"{v:>{w},}" for v in row))
    return lines, figures


def _class_table(est, store, name, one_class):
    """:func:`~streamcvm.predict.chunks.class_table`, its message naming the
    store as ``name`` and the model by its estimator."""
    try:
        return class_table(None if one_class else est.classes_, store, one_class)
    except ValueError as e:
        msg = str(e).replace(getattr(store, "path", name), name, 1)
        raise ValueError(msg.replace("the model is a classifier",
                                     f"the model is a {type(est).__name__}")) from None


def _check_regression_store(est, store, name):
    """A regressor is refused on a store of class labels: text labels, or
    integer classes when it was trained on a continuous target."""
    if store.label_names:
        raise ValueError(f"{name}: y holds text class labels, but the model is a regressor")
    if getattr(est, "target_type_", None) == "continuous" and store.classes is not None \
            and np.all(store.classes == np.round(store.classes)):
        raise ValueError(f"{name}: y holds {len(store.classes):,} integer classes, but the "
                         f"model is a regressor trained on a continuous target")


def _ranking_report(est, store, runner=None, progress=None):
    """NDCG@10 and pairwise accuracy, streamed query by query."""
    if not store.has_qid:
        raise ValueError("a ranking model needs a store with query ids (qid)")
    tot = RankingTotals(k=10)
    n = 0
    for r in predict_chunks(est, store, runner, progress=progress):
        tot.add(r.y, r.pred, r.qid)
        n += len(r.pred)
    ndcg, acc, nq, npairs = tot.result()
    return ([f"rows        {n:,}",
             f"NDCG@10     {ndcg:.6g}  (mean over {nq:,} queries with a relevant row)",
             f"pairwise    {acc:.6g}  (accuracy over {npairs:,} preference pairs)"],
            {"task": "ranking", "rows": n, "ndcg@10": float(ndcg), "queries": int(nq),
             "pairwise_accuracy": float(acc), "pairs": int(npairs)})


def _regression_report(est, store, runner=None, progress=None):
    """RMSE, the cvr paper's normalised RMSE (RMSE / max y) and MRE (mean
    |(f - y) / y| over rows with y != 0), and R^2 (:class:`~.metrics.RegressionTotals`)."""
    tot = RegressionTotals()
    for r in predict_chunks(est, store, runner, progress=progress):
        tot.add(r.y, r.pred)
    if tot.n == 0:
        raise ValueError("the store has no rows")
    figures = {"task": "regression", **tot.result()}
    nrel = figures.pop("rows_nonzero_y")
    lines = [f"rows        {figures['rows']:,}",
             f"RMSE        {figures['rmse']:.6g}",
             f"nRMSE       {figures['nrmse']:.6g}  (RMSE / max y, cvr paper)"
             if figures["nrmse"] is not None else "nRMSE       -  (max y <= 0)",
             f"MRE         {figures['mre']:.6g}  (mean |(f - y) / y| over {nrel:,} rows with "
             f"y != 0)" if nrel else "MRE         -  (every y is 0)",
             f"R^2         {figures['r2']:.6g}" if figures["r2"] is not None else
             "R^2         -  (constant y)"]
    return lines, figures
