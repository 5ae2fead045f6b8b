"""CVMRegressor: kernel L2-SVR as a center-constrained MEB (Core Vector
Regression), with the (mu, gamma) defaults chosen on held-out rows."""
from __future__ import annotations

import numbers
import warnings
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..data.store import is_store_like
from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, SAMPLE_SIZE
from ..problems.progressive import plan
from ..problems.regression import exact_fit, train_regressor
from ..problems.regression_defaults import fit_warnings, prepare_fit
from ..solvers.kernels import Kernel, kernel_class
from ..solvers.methods import method_class
from .base import (METHODS, Checkpoints, FitData, _OneMachine, check_options, keep_params, log,
                   positive_number, resolve_eps)

if TYPE_CHECKING:
    import os
    from typing import Literal

    from distributed import Client
    from numpy.typing import ArrayLike

    from ..data.store import DataLike
    from ..options import OptionsLike


class CVMRegressor(RegressorMixin, _OneMachine):
    """Kernel L2-SVR trained as a center-constrained MEB: Core Vector Regression.

    The cvr paper's eqs. 6-10, solved by CVM (default) or Frank-Wolfe.

    Targets of any scale: the fit standardises them, ``(y - mean) / sd``,
    and reports everything in the targets' own units. So y, 1000 y and
    y + 1e6 give the same model up to that scale and shift: ``predict``,
    ``score``, ``dual_coef_`` and ``intercept_`` (f(x) = sum ``dual_coef_``
    k(sv, x) + ``intercept_``), ``epsilon_bar_``, ``mu_``, the ``selection_``
    trials (``val_rmse``), the progressive stages' validation RMSE and the
    warnings are in y's units, as is a saved model (which records the mean
    and sd: ``streamcvm info``). Prices in dollars, counts or salaries need
    no scaling first. sd is measured once per fit, in float64: on every row
    (from the arrays, or the pass of row statistics over a store), or for a
    progressive fit (``train_size``), which reads no such pass, on its
    4,000 held-out rows; every solve of the fit (the mu / gamma trials, each
    progressive stage, the final fit) divides by it, centred on the mean of
    the rows it trains on. A sample's mean and sd move with y as the whole
    set's do, so the model is the same up to the scale either way.

    The tube's half width is not a parameter: ``mu``, the mean slack outside
    the tube in the target's units (at the optimum the slacks sum to mu m,
    whatever C), sets it, and ``epsilon_bar_`` reports the width found:
    larger mu, narrower tube and more support vectors; a mu above the
    residuals' size gives a negative width, i.e. a kernel ridge regression
    regularised by mu / (C / m). The bias is penalised, as in the paper,
    which is one reason the fit is centred on the targets' mean (added back
    in ``intercept_``).

    Parameters
    ----------
    method : {"cvm", "fvm"}, default "cvm"
        The solver: CVM or Frank-Wolfe (BVM solves only the plain MEB).
    C : float or "auto", default "auto"
        The regularisation. "auto": the option ``regression_c_per_row`` (5)
        times the number of training rows, or ``svr_exact_c_per_row`` (2)
        times on the exact path (see Notes). In the primal ``||w||^2 + b^2 +
        C/(mu m) sum xi^2 + 2 C epsbar`` one row's squared slack weighs C/(mu
        m), so C should grow with m to keep a fit as tight (``C_`` holds the
        value used). C weighs the standardised problem, so a C means the same
        at any scale of y.
    mu : float or "auto", default "auto"
        Positive, in the targets' units (the fit uses mu / sd on the
        standardised targets), or "auto": chosen by the RMSE on 2,000
        held-out rows of fits on 2,000 others, among 0.03, 0.1, 0.3 and 1
        times the targets' standard deviation, after gamma="auto" is chosen
        at 0.3; a progressive fit (``train_size``) tries every (mu, gamma)
        pair instead (``selection_`` lists the trials; docs/solvers.md,
        "Regression defaults"). ``mu_`` holds the value used.
    kernel : str, default "rbf"
        The kernel, as :class:`CVMClassifier`'s.
    gamma : float or "auto", default "auto"
        The kernel's width. "auto": 1 / or 2 / the mean squared distance
        between rows, whichever validates better (with a given mu too).
    coef0 : float, default 0.0
        The constant term of the "poly" and "npoly" kernels.
    degree : int, default 3
        The degree of the "poly" and "npoly" kernels.
    eps : float or "auto", default "auto"
        The ball's approximation tolerance, in (0, 1). "auto" asks for a
        tolerance that shrinks as the rows grow (one row's weight in the
        loss is C/(mu m)); on the exact path it stops when every point's KKT
        violation is within 0.3 standard deviations of the target.
    sample_size : int, default 59
        Rows per violator search (59: a point among the top 5% with 95%
        odds).
    max_core : int, optional
        A cap on the core points. None: the exact path (see Notes) when it
        applies, else the option ``regression_max_core`` (20,000: a 1.6 GB
        kernel cache) on a fit on every row, and progressive stages (see
        ``train_size``) that stop before a stage whose core set would pass
        ``regression_stage_core`` (11,000: 0.5 GB). A number caps both. An
        L2-SVR keeps most rows outside its tube as support vectors, so the
        core set grows like the rows trained on; a fit that reaches the cap
        warns.
    full_pass : bool, default False
        Finish with passes over all rows until none violates (no
        progressive stages).
    train_size : "auto", "all" or int, default "auto"
        "auto": a store of more than 65,536 rows (the option
        ``progressive_min_rows``) trains by progressive subsampling
        (streamcvm.problems.progressive): fits on random samples of 16,384,
        32,768, ... rows (C="auto" scaled to each), the next only while the
        stages' learning curve on held-out rows (10% of the rows, at most
        50,000) promises more than ``regression_stage_tol`` (0.02) percent of
        the validation squared error from the rest of the sample, and its
        core set would stay within the budget of ``max_core``. The stages are
        in ``history_`` (``stage_rows``, ``stage_validation_rmse``). "all":
        every row. A number (at least 1,000): at most that many rows, the
        same way.
    scale : bool or {"standard", "range"}, default False
        Per-feature scaling, as :class:`CVMClassifier`'s ``scale``.
    compact : "auto" or False, default "auto"
        As :class:`CVMClassifier`'s; a compact expansion is kept when its
        validation RMSE is within 0.5% of the full model's (the option
        ``compact_rmse_tol``).
    options : Options, dict or None, default None
        The solvers' other settings, as :class:`CVMClassifier`'s.
    random_state : int or None, default 0
        Seed of the row sampling (None: 0).
    verbose : bool, default False
        Show a progress bar (and the mu / gamma trials' lines).

    Attributes
    ----------
    C_ : float
        The C used (the last progressive stage's with C="auto").
    mu_ : float
        The mu used, in the targets' units.
    gamma_ : float
        The gamma used.
    selection_ : list of dict
        The mu / gamma trials (``mu``, ``gamma``, ``val_rmse`` ...).
    epsilon_bar_ : float
        The tube's half width found, in the targets' units (negative: a
        kernel ridge regression, see above).
    intercept_ : float
        The bias b of f(x) = sum ``dual_coef_`` k(sv, x) + b, in the targets'
        units (the targets' mean added back).
    dual_coef_ : ndarray of shape (n_SV,)
        The support rows' coefficients in the targets' units.
    support_vectors_ : ndarray or scipy.sparse.csr_matrix of shape (n_SV, n_features)
        The support rows, as the kernel saw them (after ``scaler_``).
    n_support_ : int
        The number of support rows.
    machine_ : Machine
        The trained machine (:class:`streamcvm.problems.machine.Machine`).
    kernel_ : Kernel
        The kernel trained with.
    target_type_ : {"continuous", "integer"}
        Whether the training targets held non-integer values.
    n_iter_ : int
        Solver iterations.
    core_set_size_ : int
        Core points.
    history_ : list of dict
        Each eps level's record (and each progressive stage's).
    scaler_ : Scaler or None
        The per-feature transform predict applies, or None.
    options_ : Options
        The :class:`streamcvm.options.Options` the fit used.
    route_ : {"memory", "sampled", "distributed"}
        How the rows reached the solver.
    training_ : dict
        The fit's record (seconds, rows, features, store, fingerprint).
    checkpoint_stats_ : dict or None
        Snapshots written by the fit and the seconds spent; None without
        ``checkpoint_dir``.
    resumed_from_ : dict or None
        What the fit resumed from a snapshot, or None.
    n_features_in_ : int
        The number of features seen by fit.
    feature_names_in_ : ndarray of str
        The column names of a DataFrame with string column names given to
        fit (only then).

    Notes
    -----
    The exact path: a fit on at most 32,768 rows (``svr_exact_rows``) with
    method "cvm", no ``max_core``, no ``full_pass``, no checkpoints and not
    progressive is solved by SMO over every signed point over a cache of
    kernel rows (at most 2,000 MB; ``streamcvm.solvers.exact.svr``; the same
    dual), as are the mu / gamma trials; ``eps="auto"`` then stops when
    every point's KKT violation is within 0.3 standard deviations of the
    target (docs/solvers.md).

    After ``fit``, a warning says when the tube holds more than 95% of the
    rows (a few extreme rows set the fit), the residuals' mean is far from 0,
    or the fit is worse than predicting the mean, measured on up to 2,000
    random training rows.
    """

    task = "regression"  # what `streamcvm train --task` calls it
    # in every snapshot's run identity (problems.checkpoint.for_fit): the
    # solver's state is that of the standardised targets, so a snapshot of a
    # fit on raw targets (an older streamcvm) is another run
    run_identity = {"targets": "standardised"}

    def __init__(self, *, method: Literal["cvm", "fvm"] = "cvm",
                 C: float | Literal["auto"] = "auto", mu: float | Literal["auto"] = "auto",
                 kernel: str = "rbf", gamma: float | Literal["auto"] = "auto",
                 coef0: float = 0.0, degree: int = 3, eps: float | Literal["auto"] = "auto",
                 sample_size: int = SAMPLE_SIZE, max_core: int | None = None,
                 full_pass: bool = False, train_size: Literal["auto", "all"] | int = "auto",
                 scale: bool | Literal["standard", "range"] = False,
                 compact: Literal["auto", False] = "auto", options: OptionsLike = None,
                 random_state: int | None = 0, verbose: bool = False) -> None:
        keep_params(self, locals())

    def _check_params(self):
        check_options(self.options)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.C, str) and self.C == "auto") and not positive_number(self.C):
            raise ValueError(f"C must be 'auto' or a positive finite number, got {self.C!r}")
        method_class(self.method, plain=False, problem="regression (a linear term)")
        if not (isinstance(self.mu, str) and self.mu == "auto") and \
                not positive_number(self.mu):
            raise ValueError(f"mu must be 'auto' or a positive finite number, got {self.mu!r}")
        if self.compact not in ("auto", False):
            raise ValueError(f"compact must be 'auto' or False, got {self.compact!r}")
        ts = self.train_size
        if not (ts in ("auto", "all") or (isinstance(ts, numbers.Integral) and ts >= 1000)):
            raise ValueError(f"train_size must be 'auto', 'all' or a number of rows of at "
                             f"least 1,000, got {ts!r}")

    def fit(self, X: DataLike, y: ArrayLike | None = None, *,
            checkpoint_dir: str | os.PathLike[str] | None = None,
            checkpoint_every: float | None = CHECKPOINT_EVERY,
            checkpoint_iters: int | None = None, checkpoint_keep: int = CHECKPOINT_KEEP,
            resume: bool = False, checkpoint_replace: bool = False,
            client: Client | str | None = None) -> CVMRegressor:
        """Fit on arrays (X, y), a sparse matrix, a dask array or a store (targets from its y).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The training rows: arrays of shape (n_samples, n_features), a
            sparse matrix, a dask array, or a store (an opened store, its path
            or its URL), read a chunk at a time.
        y : array_like of shape (n_samples,), optional
            The targets of arrays. None for a store, which brings its own.
        checkpoint_dir : str or os.PathLike, optional
            A folder for snapshots of the run, as :meth:`CVMClassifier.fit`'s.
        checkpoint_every : float or None, default 60.0
            Seconds between snapshots (None: never by time).
        checkpoint_iters : int, optional
            Iterations between snapshots (None: never by iterations).
        checkpoint_keep : int, default 2
            The snapshots kept.
        resume : bool, default False
            Continue from the newest snapshot in ``checkpoint_dir``.
        checkpoint_replace : bool, default False
            Delete another run's snapshots in ``checkpoint_dir`` instead of
            refusing them.
        client : distributed.Client or str, optional
            A dask client (or a scheduler address) for the passes over every
            row, as :meth:`CVMClassifier.fit`'s.

        Returns
        -------
        self : CVMRegressor
            The fitted estimator.
        """
        return self._fit(X, y, client=client, checkpoints=Checkpoints(
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume,
            checkpoint_replace))

    def _fit_data(self, X, y):
        store, _ = self._prepare(X, y, regression=True)
        cl = store.classes      # None: more than MAX_CLASSES distinct values
        self.target_type_ = "continuous" if cl is None or not np.all(cl == np.round(cl)) \
            else "integer"
        return FitData(store)

    def _train(self, data, run):
        """mu and gamma chosen on held-out rows, then the L2-SVR
        (:func:`~streamcvm.problems.regression.train_regressor`): exactly on
        a small store, else by CVM, progressive beyond ``progressive_min_rows``."""
        store, o = data.store, run.options
        progressive = not self.full_pass and plan(store, None, self.train_size, o) is not None
        # solved exactly over every row (problems.regression.exact_fit), or by CVM
        exact = self.max_core is None and exact_fit(store, self.method, self.full_pass,
                                                    run.checkpoints.dir is not None,
                                                    progressive, o)
        auto_c = isinstance(self.C, str)
        c_row = o.svr_exact_c_per_row if exact else o.regression_c_per_row
        self.C_ = c_row * store.n if auto_c else float(self.C)
        pre = self._choose(store, run, progressive, exact)
        kern = self._make_kernel(self.gamma_)
        solve = run.solve(max_core=o.regression_max_core if self.max_core is None
                          else self.max_core, compact=self.compact)
        self._fit_one(run, store, kern, solve, lambda s: train_regressor(
            store, kern, s, C=self.C_, mu=self.mu_,
            stage_core=o.regression_stage_core if self.max_core is None else self.max_core,
            full_pass=self.full_pass, stats=pre["stats"], train_size=self.train_size,
            c_per_row=o.regression_c_per_row if auto_c else None, exact=exact,
            scale=pre["scale"]))
        stages = [h["stage_rows"] for h in self.history_ if "stage_rows" in h]
        if stages and auto_c:               # a progressive fit: its last stage's C
            self.C_ = o.regression_c_per_row * stages[-1]
        self.epsilon_bar_ = self.machine_.epsilon_bar
        Xv, yv = pre["check"]
        for w in fit_warnings(self.machine_.decision(kern, Xv) if len(yv) else [], yv,
                              self.epsilon_bar_, pre["sd"], o):
            warnings.warn(f"streamcvm: {w}", RuntimeWarning, stacklevel=4)

    def _choose(self, store, run, progressive, exact):
        """``mu_``, ``gamma_`` and ``selection_`` (the trials) by
        :func:`~streamcvm.problems.regression_defaults.prepare_fit`; returns its record."""
        auto_gamma = isinstance(self.gamma, str) and self.gamma == "auto"
        base = self._kernel(store).gamma        # gamma, or gamma="auto"'s 1/beta
        with run.passes() as runner:
            pre = prepare_fit(store, self._make_kernel, c=self.C_ / store.n, mu=self.mu,
                              gamma="auto" if auto_gamma and kernel_class(self.kernel)
                              .length_scale else base, base_gamma=base,
                              method=self.method, eps=resolve_eps(self.eps),
                              options=run.options, seed=run.seed, runner=runner,
                              log=log if self.verbose else None,
                              # a progressive fit: every (mu, gamma) pair, since the SV
                              # share sets how many rows its core budget reaches; no
                              # row-statistics pass (the stages use their samples')
                              progressive=progressive,
                              # an exact final fit: trials on select_fit_exact rows
                              exact=exact)
        self.mu_, self.selection_ = pre["mu"], pre["trials"]
        self.gamma_ = float(pre["gamma"])
        return pre

    def _make_kernel(self, gamma):
        return Kernel(self.kernel, gamma=gamma, coef0=self.coef0, degree=self.degree)

    @property
    def intercept_(self) -> float:
        """The bias of f(x) = sum ``dual_coef_`` k(sv, x) + ``intercept_``, in the targets' units."""
        check_is_fitted(self)
        return self.machine_.intercept

    @property
    def dual_coef_(self) -> np.ndarray:
        """The support rows' coefficients in the targets' units: sd x C
        (lambda_i - lambda*_i) (cvr eq. 9 on the standardised targets), so
        that f(x) = sum ``dual_coef_`` k(sv, x) + ``intercept_``."""
        check_is_fitted(self)
        return self.machine_.coef

    @property
    def n_support_(self) -> int:
        """The number of support rows."""
        check_is_fitted(self)
        return len(self.machine_.coef)

    def _model_record(self):
        # the C and mu used (C="auto", mu="auto"); "continuous" or "integer"
        # targets (evaluate refuses class stores)
        return [self.machine_], {"C_": self.C_, "mu_": self.mu_,
                                 "target_type": getattr(self, "target_type_", None)}

    def _model_restore(self, machines, man):
        self.machine_ = machines[0]
        self.epsilon_bar_ = machines[0].epsilon_bar
        self.C_ = man.get("C_")
        self.mu_ = man.get("mu_")
        self.target_type_ = man.get("target_type")

    def predict(self, X: DataLike) -> np.ndarray:
        """Predict f(x) for the rows of X, in the targets' units.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted targets.
        """
        return self._values(X)

    def predict_with_decision(self, X: DataLike) -> tuple[np.ndarray, np.ndarray]:
        """Predict f(x) for the rows of X, twice (the interface the classifiers share).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        predictions, decision : ndarray of shape (n_samples,)
            ``predict(X)``, and the same array as the decision values.
        """
        f = self.predict(X)
        return f, f

    def score(self, X: DataLike, y: ArrayLike | None = None,
              sample_weight: ArrayLike | None = None) -> float:
        """Give the coefficient of determination R^2 of the predictions.

        Parameters
        ----------
        X : array_like, sparse matrix, store, str or os.PathLike
            The rows: arrays, a sparse matrix, or a store, its path or URL
            (scored against its own targets, from sums kept chunk by chunk).
        y : array_like of shape (n_samples,), optional
            The true targets of arrays; None for a store.
        sample_weight : array_like of shape (n_samples,), optional
            Weights of the rows of arrays; None for a store.

        Returns
        -------
        float
            R^2 (NaN for a store whose targets are all equal).
        """
        if not is_store_like(X):
            return super().score(X, y, sample_weight)
        if y is not None or sample_weight is not None:
            raise ValueError("score on a store takes its targets from the store: "
                             "pass no y or sample_weight")
        f, _, t, _ = self._streamed(X)
        t = np.asarray(t, np.float64)
        sst = float(((t - t.mean()) ** 2).sum())
        return 1.0 - float(((t - f) ** 2).sum()) / sst if sst > 0 else float("nan")
