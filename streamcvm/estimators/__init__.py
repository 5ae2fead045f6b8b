"""The scikit-learn API, one module per estimator: :class:`CVMClassifier`,
:class:`CVMOneClass`, :class:`CVMRegressor`, :class:`CVMRanker` and the
feature extractor :class:`MMDATransformer`; :mod:`.model` saves and loads
them as model folders. What they share (parameter checks, the fit's set-up)
is in :mod:`.base`.

The classes are imported when first asked for (they import scikit-learn):
the command line reads a model's errors from :mod:`.model` without them.
"""
# the estimators a model file may name (streamcvm.estimators.model), by task
ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker")

__all__ = [*ESTIMATORS, "MMDATransformer"]


def __getattr__(name):
    if name == "CVMClassifier":
        from .classifier import CVMClassifier
        return CVMClassifier
    if name == "CVMOneClass":
        from .oneclass import CVMOneClass
        return CVMOneClass
    if name == "CVMRegressor":
        from .regressor import CVMRegressor
        return CVMRegressor
    if name == "CVMRanker":
        from .ranker import CVMRanker
        return CVMRanker
    if name == "MMDATransformer":
        from .mmda import MMDATransformer
        return MMDATransformer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
