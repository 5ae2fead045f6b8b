"""The scikit-learn API, one module per estimator: :class:`CVMClassifier`,
:class:`CVMOneClass`, :class:`CVMRegressor`, :class:`CVMRanker` and the
feature extractor :class:`MMDATransformer`; :mod:`.model` saves and loads
them as model folders. What they share (parameter checks, the fit's set-up)
is in :mod:`.base`."""
from .classifier import CVMClassifier
from .mmda import MMDATransformer
from .oneclass import CVMOneClass
from .ranker import CVMRanker
from .regressor import CVMRegressor

# the estimators a model file may name (streamcvm.estimators.model), by task
ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker")

__all__ = [*ESTIMATORS, "MMDATransformer"]
