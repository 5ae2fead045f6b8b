"""Feature extraction: :class:`MMDATransformer`, maximum margin discriminant
analysis by the core vector method (mmda paper; the solver is
:class:`streamcvm.solvers.mmda.MMDASolver`).

Work in progress (issue 16): arrays and in-memory stores, the RBF and
Laplacian kernels; no checkpoints, no streamed transform to a store yet.
"""
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .kernels import Kernel
from .sampling import ChunkPool
from .solvers.mmda import MMDASolver
from .store import as_store


class MMDATransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Large-margin features: a sequence of orthogonal directions in the
    kernel's feature space, each the weight vector of an L2-SVM (C) in the
    subspace orthogonal to the ones before (mmda paper, eqs. 1-3).

    Two classes: ``n_components`` directions. More: one-vs-rest as in the
    paper, ``n_components`` directions **per class** (``N_c x n_components``
    features in all, class by class). A feature is a kernel expansion over
    its direction's rows: ``kernel_evaluations_`` holds their number per
    feature (the paper's Table IV).

    Parameters: ``C`` (the L2-SVM's), ``kernel`` ("rbf" or "laplacian"),
    ``gamma`` ("auto": 1 / the mean squared distance between rows, on 5,000
    rows, as the paper's beta), ``eps`` (the MEB tolerance), ``sample_size``,
    ``max_core``, ``random_state`` (the sampler's seed).
    """

    def __init__(self, n_components=1, *, C=1.0, kernel="rbf", gamma="auto", eps=1e-3,
                 sample_size=59, max_core=None, random_state=0):
        self.n_components = n_components
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.eps = eps
        self.sample_size = sample_size
        self.max_core = max_core
        self.random_state = random_state

    def fit(self, X, y):
        from .estimators import _resolve_gamma
        if not (isinstance(self.n_components, (int, np.integer)) and self.n_components >= 1):
            raise ValueError(f"n_components must be a positive integer, got "
                             f"{self.n_components!r}")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float32, reset=True)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError("MMDATransformer needs at least two classes in y")
        store = as_store(X, codes.astype(np.float64))
        self.gamma_ = _resolve_gamma(self.gamma, store)
        kern = Kernel(self.kernel, gamma=self.gamma_)
        k = len(self.classes_)
        sides = [(0.0, 1.0)] if k == 2 else \
            [(tuple(float(c) for c in range(k) if c != j), float(j)) for j in range(k)]
        seed = 0 if self.random_state is None else int(self.random_state)
        self.directions_ = []
        cls, rank, secs = [], [], []
        for j, side in enumerate(sides):
            found = []
            for s in range(self.n_components):
                t0 = time.perf_counter()
                pool = ChunkPool(store, np.random.default_rng([seed, j, s]), classes=side)
                try:
                    solver = MMDASolver(kern, C=self.C, eps=self.eps, directions=found,
                                        sample_size=self.sample_size,
                                        max_core=self.max_core).fit(pool, side)
                finally:
                    pool.close()
                found.append(solver.unit_direction())
                cls.append(j)
                rank.append(s)
                secs.append(time.perf_counter() - t0)
            self.directions_ += found
        self.kernel_ = kern
        self.kernel_evaluations_ = np.array([len(d.coef) for d in self.directions_])
        self.feature_class_ = np.array(cls)
        self.feature_rank_ = np.array(rank)
        self.feature_seconds_ = np.array(secs)
        self._n_features_out = len(self.directions_)
        return self

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=False)
        return np.column_stack([d.project(self.kernel_, X) for d in self.directions_])
