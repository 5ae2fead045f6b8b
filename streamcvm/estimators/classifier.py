"""CVMClassifier: kernel L2-SVM classification, binary or multi-class
(one-vs-one or one-vs-rest), over arrays or stores."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..data.parallel import in_order
from ..data.store import DaskStore, as_store, is_dask_array, is_store_like
from ..options import CHECKPOINT_EVERY, CHECKPOINT_KEEP, SAMPLE_SIZE
from ..predict import probability
from ..predict.chunks import class_table
from ..predict.decision import (active_machines, build_union, class_indices, ovo_votes,
                                union_values)
from ..problems import pairs, train_machine
from ..problems.classification import side_by_side
from .base import Checkpoints, FitData, _CVMBase, keep_params, store_classes
from .svc_compat import _labels_at, _weighted_rows, one_vs_rest, support_classes, svc_layout

if TYPE_CHECKING:
    import os
    from typing import Literal

    from distributed import Client
    from numpy.typing import ArrayLike

    from ..data.store import DataLike
    from ..options import OptionsLike


class CVMClassifier(ClassifierMixin, _CVMBase):
    """Kernel L2-SVM classifier, binary or multi-class, trained by SMO, BVM, CVM or Frank-Wolfe.

    The default, ``method="auto"``, solves two-class machines of at most
    16,384 rows held in memory exactly (SMO) and larger ones by BVM; ``C``
    and ``gamma`` are chosen on held-out rows. ``fit`` takes arrays, a
    sparse matrix, a dask array or a store (an opened store, its path or its
    URL), whose rows stay on disk; the other methods stream a store chunk
    by chunk.

    Parameters
    ----------
    method : {"auto", "bvm", "cvm", "fvm"}, default "auto"
        The solver. "auto": a two-class machine of at most 16,384 rows held
        in memory (every one-vs-one pair of most data sets, and every fit of
        the C and gamma search) is solved exactly, by SMO over all its rows
        (streamcvm.solvers.exact.svc.svc_exact: the same dual, to its
        optimum; class and sample weights as a per-row C); larger machines
        by BVM (CVM when weighted). BVM's fixed-radius ball stops at a
        feasible center rather than the optimum: 0.2-0.6 points of accuracy
        on multi-class sets, measured in docs/solvers.md. "fvm": Frank-Wolfe.
    C : float or "auto", default "auto"
        The L2-SVM's regularisation (compare LIBSVM's C with care). "auto":
        chosen on held-out rows with ``gamma`` (see ``gamma``;
        ``selection_`` lists every candidate and its validation error).
    kernel : str, default "rbf"
        "rbf" (exp(-gamma ||x - z||^2); alias "gaussian"), "laplacian" (L1
        distance), "exponential" (L2 distance: exp(-gamma ||x - z||)),
        "linear", "poly" ((gamma x'z + coef0)^degree) or "npoly" (poly
        normalised to k(x, x) = 1). Kernels without a constant k(x, x)
        ("linear", "poly") make a center-constrained MEB (see
        ``class_weight``).
    gamma : float or "auto", default "auto"
        The kernel's width. With ``C`` "auto" or for a distance kernel (rbf,
        laplacian, exponential), "auto" is chosen on held-out rows among
        multiples of 1 / beta (beta: the mean squared distance between rows);
        otherwise it is 1 / beta. The search
        (streamcvm.estimators.search, streamcvm.problems.selection): C in
        {1, 10, 100} x gamma in {0.5, 1, 2, 4, 8} / beta, grown past an edge
        where the best point lies on it, by successive halving: every
        candidate trains on a few thousand random rows, the best third on
        three times as many, and so on up to 8,192 rows, each scored by the
        whole model's error on validation rows (20% of the rows, at most
        20,000, never trained on); a fit on fewer rows than the final one
        trains at C (rows / its rows)^0.5, since the best C of an L2-SVM
        falls as the rows grow. Among the candidates the validation rows
        cannot tell apart (within one standard error), one that trains at
        least twice as fast is preferred. Before a progressive fit (see
        ``train_size``), the search tries no kernel narrower than 1 / beta
        (a narrow kernel's lead on few rows fades as the stages grow) and no
        C above 100 (the stages' BVM steps grow with C), and the default
        point (C 1, gamma 1 / beta) is kept unless the validation rows tell
        a better one apart. The final model trains on every row (or the
        stages) at the chosen point (``C_``, ``gamma_``).
    coef0 : float, default 0.0
        The constant term of the "poly" and "npoly" kernels.
    degree : int, default 3
        The degree of the "poly" and "npoly" kernels.
    eps : float or "auto", default "auto"
        The approximation tolerance of the enclosing ball, in (0, 1): the
        solver stops at a (1 + eps)-approximate ball. "auto": eps is
        annealed until it is small against the margin (docs/solvers.md,
        "eps=auto").
    sample_size : int, default 59
        Rows per violator search (59: a point among the top 5% with 95%
        odds).
    max_core : int, optional
        A cap on the core vectors of each binary machine; a machine that
        reaches it stops growing and certifies the eps it reached. None: no
        cap.
    full_pass : bool, default False
        Finish with passes over all rows until none violates (implies
        ``train_size="all"``).
    multi_class : {"ovo", "ovr"}, default "ovo"
        "ovo": one-vs-one, as LIBSVM (a machine per pair of classes). "ovr":
        one-vs-rest, one machine per class, trained on every row.
    decision_function_shape : {"ovr", "ovo"}, default "ovr"
        The columns of ``decision_function`` of a one-vs-one model of more
        than two classes, as SVC's: "ovr", one per class; "ovo", one per
        machine. It does not change the model.
    class_weight : dict, "balanced" or None, default None
        None, "balanced" (n / (k n_c), as scikit-learn) or a dict {label:
        weight}: class c's rows get C * weight_c (generalized-cvm sec.
        IV-A). Weighted rows, like ``sample_weight`` and kernels without a
        constant k(x, x) ("linear", "poly"), make a center-constrained MEB,
        which "auto" (small machines exactly, larger ones by CVM), "cvm" and
        "fvm" solve ("bvm" refuses it). Not with ``multi_class="ovr"`` on more
        than two classes.
    train_size : "auto", "all" or int, default "auto"
        "auto": a binary machine of more than 65,536 rows first trains on
        every row, sampled, and keeps that model if its core set stays under
        2,048 vectors (clean data); else it trains by progressive
        subsampling: stages on 16,384, 32,768, ... random rows, each
        converged, while the learning curve of the stages' errors on
        held-out validation rows (never trained on) promises more than
        ``stage_tol`` points of accuracy from training on the rest of the
        sample (see streamcvm.problems.progressive). Time and the model's
        size then follow what the data's noise allows, not n. "all": every
        row (the L2-SVM of the whole store; ``full_pass`` implies it). A
        number (at least 1,000): "auto" with the sample capped at that many
        rows.
    stage_tol : float, default 0.02
        The points of accuracy a progressive fit may leave on the table by
        stopping its stages early, as its learning curve estimates them
        (each stage's ``gain_left`` in ``history_``, ``streamcvm info``). 0:
        train every stage up to the sample.
    stop : {"slack", "validation"}, default "slack"
        What ends the eps annealing: the margin slack (``eps="auto"``) or,
        with held-out rows (progressive fits), a validation error that has
        not improved on its best by more than its standard error for two
        levels.
    n_jobs : int, default -1
        Threads of the exact BVM pass (-1: every core; 1: one). The model
        does not depend on it.
    scale : bool or {"standard", "range"}, default False
        True or "standard": standardise each feature (dense data: (x - mean)
        / sd; sparse: x / max abs(x), no centring); "range": map each dense
        feature to [-1, 1] from its min and max, as LIBSVM's svm-scale
        (sparse: x / max abs(x) too). From one streamed pass over the
        training rows; ``scaler_`` keeps the transform, which predict
        applies and a saved model keeps. Use it when raw columns have very
        different ranges (byte counts next to flags): the RBF distance would
        see only the largest.
    probability : bool, default False
        Also fit Platt's sigmoid per machine, for ``predict_proba`` and
        ``predict_log_proba`` (more than two classes: pairwise coupling, as
        LIBSVM). Up to 100,000 rows, as LIBSVM: on 5-fold cross-validated
        decision values of every row, the model itself trained on every row
        (five more fits). Beyond: on rows held out from training (10% of the
        rows, 1,000 to 50,000, a quarter at most), which the model is not
        trained on (streamcvm.predict.probability).
    compact : "auto" or False, default "auto"
        "auto": a machine trained by progressive subsampling also gets a
        compact expansion over B <= 4,096 basis points, B chosen on its
        held-out validation rows (streamcvm.problems.compress.compact_machine);
        predict uses it. False: no compact expansion at fit, and predict
        uses the full one (set it on a fitted or loaded model to predict
        exactly).
    options : Options, dict or None, default None
        A :class:`streamcvm.options.Options` or a dict of its fields: every
        other setting of the solvers, samplers and checks (the exact route's
        limit ``svc_exact_rows``, the progressive stages' sizes, the
        compaction's sizes and rules, the C and gamma grids ...), each
        documented there with its unit and what it trades; ``streamcvm info
        --options`` lists them. None: the defaults. A saved model keeps the
        fields it changes.
    random_state : int or None, default 0
        Seed of the row sampling (None: 0; a fit is deterministic).
    verbose : bool, default False
        Show a progress bar (eps level, core-set size, radius).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    support_ : ndarray of shape (n_SV,)
        Indices of the distinct support rows in the training data (the
        arrays given, rows of weight 0 included; a store's rows), sorted by
        class, then by index. A row several one-vs-one machines share is one
        support vector.
    n_support_ : ndarray of shape (n_classes,)
        Distinct support rows per class, in ``classes_`` order;
        ``n_support_.sum()`` is ``len(support_)``.
    support_vectors_ : ndarray or scipy.sparse.csr_matrix of shape (n_SV, n_features)
        Those rows, in ``support_`` order, as the kernel saw them (after
        ``scaler_``, when it is set).
    dual_coef_ : ndarray
        The support rows' coefficients (alpha_i y_i) in SVC's layout. Two
        classes: shape (1, n_SV), positive for ``classes_[1]``. One-vs-one:
        shape (n_classes - 1, n_SV); the machine of classes i < j counts
        positive for i, as SVC's; a support row of class c has its
        coefficient in machine (c, o) in row o if o < c, else in row o - 1
        (LIBSVM's layout), 0 where it is not a support row of that machine.
        ``multi_class="ovr"`` (no SVC counterpart): shape (n_classes, n_SV),
        row k machine k's coefficients (positive for class k against the
        rest); column k of ``decision_function`` is ``dual_coef_[k] @
        K(support_vectors_, x) + intercept_[k]``.
    intercept_ : ndarray
        One per machine, in the sign above: one-vs-one, shape (n_classes
        (n_classes - 1) / 2,) in the order (0, 1), (0, 2), ..., (1, 2), ...;
        two classes, shape (1,); one-vs-rest, shape (n_classes,).
    kernel_ : Kernel
        The kernel trained with, k(x, z) (for rbf, exp(-``gamma_`` ||x -
        z||^2)).
    machines_ : list of Machine
        The trained machines themselves (one-vs-one, classes i < j in the
        order above, or one per class for "ovr"), each a
        :class:`streamcvm.problems.machine.Machine`: its own support rows
        (``sv``), their indices (``sv_ids``), coefficients (``coef``,
        positive for its second class ``classes[1]``: j, or class k),
        ``intercept`` and compact expansion (``compact``, or None). The
        per-machine view: a row shared by machines appears in each.
    machine_n_support_ : ndarray of shape (n_machines,)
        Support rows per machine (``machines_`` order).
    C_ : float
        The C trained with (chosen on held-out rows when "auto").
    gamma_ : float
        The gamma trained with (chosen on held-out rows when "auto").
    selection_ : dict or None
        The search's record: every candidate (C, gamma) it tried and its
        validation error (``trials``), its rungs and the point ``chosen``;
        None when neither C nor gamma was searched.
    n_iter_ : int
        Solver iterations, summed over the machines.
    core_set_size_ : int
        Core vectors, summed over the machines.
    history_ : list of dict
        Each eps level's record (and each progressive stage's), machine by
        machine.
    probA_, probB_ : ndarray of shape (n_machines,) or None
        Platt's sigmoid per machine (``probability=True``; else None), as
        SVC's: P(class i | x) = 1 / (1 + exp(``probA_`` f + ``probB_``)) for
        f the machine's value in SVC's sign (``decision_function_shape="ovo"``'s
        column; two classes: f = -decision_function, P(``classes_[0]``)).
        One-vs-rest: P(class k | x) before normalising, for f machine k's
        value.
    n_probability_rows_ : int
        The rows the sigmoids were fitted on (``probability=True`` only).
    scaler_ : Scaler or None
        The per-feature transform predict applies (``scale``, and rows read
        times a power of two where the features exceed float32's safe
        range); None when there is none.
    options_ : Options
        The :class:`streamcvm.options.Options` the fit used.
    route_ : {"memory", "sampled", "distributed"}
        How the rows reached the solvers: "memory", "sampled" (from a store
        on disk) or "distributed" (passes on a dask.distributed client).
    training_ : dict
        The fit's record: wall ``seconds``, ``rows``, ``features``, the
        ``store`` path and its ``store_fingerprint``, when it ``finished``
        and the snapshot it ``resumed_from``.
    checkpoint_stats_ : dict or None
        Snapshots written by the fit (``written``) and the ``seconds`` spent
        writing them; None without ``checkpoint_dir``.
    resumed_from_ : dict or None
        What the fit resumed from a snapshot (``machines_done``,
        ``n_iter``); None when it started afresh.
    n_features_in_ : int
        The number of features seen by fit.
    feature_names_in_ : ndarray of str
        The column names of a DataFrame with string column names given to
        fit (only then).

    Notes
    -----
    Where a name is :class:`sklearn.svm.SVC`'s, it means what SVC's means,
    for the full expansion (not the compact one); with
    ``multi_class="ovo"`` (and for two classes) ``decision_function``
    equals, row by row, what SVC computes from ``dual_coef_``,
    ``support_vectors_``, ``intercept_`` and the kernel ``kernel_``.
    """

    task = "classification"  # what `streamcvm train --task` calls it
    auto_C = True

    def __init__(self, *, method: Literal["auto", "bvm", "cvm", "fvm"] = "auto",
                 C: float | Literal["auto"] = "auto", kernel: str = "rbf",
                 gamma: float | Literal["auto"] = "auto", coef0: float = 0.0, degree: int = 3,
                 eps: float | Literal["auto"] = "auto", sample_size: int = SAMPLE_SIZE,
                 max_core: int | None = None, full_pass: bool = False,
                 multi_class: Literal["ovo", "ovr"] = "ovo",
                 decision_function_shape: Literal["ovo", "ovr"] = "ovr",
                 class_weight: Literal["balanced"] | dict[Any, float] | None = None,
                 train_size: Literal["auto", "all"] | int = "auto", stage_tol: float = 0.02,
                 stop: Literal["slack", "validation"] = "slack", n_jobs: int = -1,
                 scale: bool | Literal["standard", "range"] = False, probability: bool = False,
                 compact: Literal["auto", False] = "auto", options: OptionsLike = None,
                 random_state: int | None = 0, verbose: bool = False) -> None:
        keep_params(self, locals())

    def fit(self, X: DataLike, y: ArrayLike | None = None,
            sample_weight: ArrayLike | None = None, *,
            checkpoint_dir: str | os.PathLike[str] | None = None,
            checkpoint_every: float | None = CHECKPOINT_EVERY,
            checkpoint_iters: int | None = None, checkpoint_keep: int = CHECKPOINT_KEEP,
            resume: bool = False, checkpoint_replace: bool = False,
            client: Client | str | None = None) -> CVMClassifier:
        """Fit on arrays (X, y), a sparse matrix, a dask array or a store (y from the store).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The training rows: arrays of shape (n_samples, n_features), a
            sparse matrix, a dask array, or a store (an opened store, its path
            or its URL), read a chunk at a time.
        y : array_like of shape (n_samples,), optional
            The class labels of arrays. None for a store, which brings its own
            (a ``y`` given with a store is refused).
        sample_weight : array_like of shape (n_samples,), optional
            Per-row multipliers of C (arrays only), >= 0; a row of weight 0 is
            dropped, as SVC drops it (``support_`` still indexes the rows
            given), and weights that are all 1 are no weights. A store's
            weight column, when it has one, is used instead.
        checkpoint_dir : str or os.PathLike, optional
            Snapshot the run in this folder every ``checkpoint_every`` seconds
            and / or ``checkpoint_iters`` iterations, at each eps level and
            after each machine. The folder is this run's while it writes
            (locked). None: no snapshots.
        checkpoint_every : float or None, default 60.0
            Seconds between snapshots (None: never by time).
        checkpoint_iters : int, optional
            Iterations between snapshots (None: never by iterations).
        checkpoint_keep : int, default 2
            The snapshots kept (the newest ones).
        resume : bool, default False
            Continue from the newest snapshot in ``checkpoint_dir``: the same
            model as a run that was never interrupted.
        checkpoint_replace : bool, default False
            Delete another run's snapshots in ``checkpoint_dir`` instead of
            refusing them.
        client : distributed.Client or str, optional
            A ``dask.distributed.Client`` (or a scheduler address) on which the
            passes over every row run (row statistics, full violator passes).
            None: the active client if there is one, else dask's threaded
            scheduler. The model does not depend on it.

        Returns
        -------
        self : CVMClassifier
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight=sample_weight, client=client, checkpoints=Checkpoints(
            checkpoint_dir, checkpoint_every, checkpoint_iters, checkpoint_keep, resume,
            checkpoint_replace))

    def _fit_data(self, X, y, sample_weight=None):
        """The training store and its classes (``classes_``); rows of weight 0
        dropped (``extra["kept"]``: the ids of the rows given)."""
        kept = None
        if sample_weight is not None and not (is_store_like(X) or is_dask_array(X)):
            X, y, sample_weight, kept = _weighted_rows(self, X, y, sample_weight)
        store, labels = self._prepare(X, y, sample_weight)
        if store.classes is None:
            raise ValueError("Unknown label type: the store's y has more than 1,000 "
                             "distinct values, a continuous target; train a regressor "
                             "(CVMRegressor, --task regression)")
        self.classes_, classes = store_classes(store, labels, self.options_)
        return FitData(store, labels, extra={"kept": kept, "codes": classes})

    def _train(self, data, run):
        """One machine per sub-problem (:func:`~streamcvm.problems.pairs`),
        side by side where they can be; C and gamma chosen first; then the
        compact expansion and the probabilities."""
        classes, subs = data.extra["codes"], pairs(data.extra["codes"], self.multi_class)
        cw = _class_weights(self.class_weight, data.store, classes, self.classes_)
        if cw is not None and self.multi_class == "ovr" and len(subs) > 1:
            raise ValueError("class_weight with multi_class='ovr' is not supported (the "
                             "'rest' side mixes classes): use multi_class='ovo'")
        weighted = bool(data.store.has_weight)
        store = run.held_whole(data.store) if len(subs) > 1 and not weighted else data.store
        solve = run.solve(n_jobs=self.n_jobs, compact=self.compact)
        kern = self._choose(store, classes, subs, cw, solve.but(compact=False), run)
        store, cv = self._probability_rows(store, run)
        fit_kw = dict(C=self.C_, full_pass=self.full_pass, sample_weight=weighted,
                      train_size=self.train_size, stop=self.stop, stage_tol=self.stage_tol)
        jobs = side_by_side(store, kern, subs, solve, class_weight=cw, **fit_kw)
        # many machines: no basis of their own (a progressive machine's); one basis
        # for all of them after, so a row costs B kernel values, not the union's
        each = solve.but(compact=False) if len(subs) > 1 else solve
        with run.fit(store, kern, len(subs)) as fit:
            def one(k):
                pair = subs[k]
                return train_machine(store, kern, fit.solve(each, run.seed + k, k),
                                     classes=pair, class_weight=None if cw is None else
                                     (cw[pair[0]], cw[pair[1]]), **fit_kw)
            for _, m in zip(fit.todo(), in_order(one, fit.remaining(), jobs)):
                fit.done(m)
            self._finish(fit.machines, store, classes, kern, data.extra["kept"])
            if self.compact == "auto" and not any(m.compact_info for m in fit.machines):
                self._compact_fitted(store, run.seed, solve.but(runner=fit.runner), classes)
            self._fit_probabilities(store, cv, subs, kern, run.seed, cw,
                                    solve.but(runner=fit.runner), fit_kw)
        self.n_iter_ = sum(m.n_iter for m in self.machines_)
        self.core_set_size_ = sum(m.core_size for m in self.machines_)
        self.history_ = [h for m in self.machines_ for h in m.history]

    def _probability_rows(self, store, run):
        """(the store the machines train on, whether the sigmoids come from
        cross-validation): ``probability=True`` on more than the option
        ``probability_cv_rows`` rows holds rows out (never trained on)."""
        if not self.probability:
            return store, False
        opts = run.options
        if store.n <= opts.probability_cv_rows:
            return store, True
        return probability.HoldoutStore(store, run.seed, 0.0,
                                        probability.holdout_fraction(store.n, opts)), False

    def _finish(self, machines, store, classes, kern, kept):
        """The fitted machines kept: one-vs-rest's support rows' classes (from
        the store: "the rest" does not tell), support ids of the rows given
        (``kept``: rows of weight 0 were dropped), the kernel."""
        self._support_classes = None
        if one_vs_rest(machines):
            uniq, cls = support_classes(machines, len(classes), True)
            unknown = np.flatnonzero(cls < 0)
            cls[unknown] = _labels_at(store, uniq[unknown], classes)
            self._support_classes = cls
        if kept is not None:
            for m in machines:
                m.sv_ids = kept[m.sv_ids]
        self._set_machines(machines)
        self.kernel_ = kern

    def _fit_probabilities(self, store, cv, subs, kern, seed, cw, solve, fit_kw):
        """``probA_``, ``probB_`` (None without ``probability``): Platt's
        sigmoids on cross-validated decision values, or on the held-out rows."""
        self.probA_ = self.probB_ = None
        if cv:
            F, y = probability.cv_decisions(store, subs, kern, seed, cw, solve, fit_kw)
            self._set_sigmoids(F, y, subs)
        elif self.probability:
            X, y = store.held_out()
            F = self._ovo_rows(X) if X is not None else np.zeros((0, len(subs)))
            self._set_sigmoids(F, y, subs)

    def _svc(self):
        """The machines in :class:`sklearn.svm.SVC`'s layout (:func:`svc_layout`)."""
        check_is_fitted(self)
        got = self.__dict__.get("_svc_layout")
        if got is None:     # once per set of machines (every SVC attribute reads it)
            got = self._svc_layout = svc_layout(
                self.machines_, len(self.classes_), one_vs_rest(self.machines_),
                getattr(self, "_support_classes", None))
        return got

    @property
    def support_(self) -> np.ndarray:
        """Indices of the distinct support rows in the training data, sorted
        by class (``classes_`` order), then by index, as SVC's."""
        return self._svc().support

    @property
    def n_support_(self) -> np.ndarray:
        """Distinct support rows per class, in ``classes_`` order, as SVC's
        (their sum: the rows the model keeps)."""
        return self._svc().n_support

    @property
    def support_vectors_(self) -> np.ndarray | sp.csr_matrix:
        """The distinct support rows, in ``support_`` order (as trained on:
        scaled when ``scaler_`` is set)."""
        return self._svc().rows

    @property
    def dual_coef_(self) -> np.ndarray:
        """SVC's layout: [n_classes - 1, n_SV] (one-vs-one), [1, n_SV] (two
        classes), [n_classes, n_SV] (``multi_class="ovr"``); see the class
        docstring."""
        return self._svc().dual_coef

    @property
    def intercept_(self) -> np.ndarray:
        """SVC's layout: one per one-vs-one machine (classes i < j, positive
        for i), [1] for two classes (positive for classes_[1]), one per
        class with ``multi_class="ovr"``."""
        return self._svc().intercept

    @property
    def machine_n_support_(self) -> np.ndarray:
        """Support rows of each machine of ``machines_`` (a row shared by
        machines counted in each)."""
        check_is_fitted(self)
        return np.array([len(m.coef) for m in self.machines_])

    def _choose(self, store, classes, subs, cw, solve, run):
        """``C_``, ``gamma_`` and ``selection_``: "auto" ones chosen on held-out
        rows (:func:`streamcvm.estimators.search.search`), the others as
        given. Returns the kernel."""
        from ..problems.progressive import plan
        from ..solvers.kernels import Kernel, kernel_class
        from .base import resolve_gamma
        from .progress import SearchProgress
        from .search import search
        # "auto": 1 / mean squared distance
        base = resolve_gamma(self.gamma, store, run.options)
        self.selection_ = None
        length_scale = kernel_class(self.kernel).length_scale
        if self.C == "auto" or (self.gamma == "auto" and length_scale):
            names = [n for n, auto in (("C", self.C == "auto"),
                                       ("gamma", self.gamma == "auto" and length_scale))
                     if auto]
            # the rows the final fit trains on (a candidate's C is for them):
            # all, or a progressive fit's sample
            sizes = None if self.full_pass else plan(store, None, self.train_size, run.options)
            with run.passes() as runner, SearchProgress(self.verbose, names) as bar:
                C, gamma, self.selection_ = search(
                    self, store, classes, subs, cw, base, solve, runner, bar.update,
                    final_rows=store.n if sizes is None else sizes[1], staged=sizes is not None)
        else:
            C, gamma = float(self.C), base
        self.C_, self.gamma_ = float(C), float(gamma)
        return Kernel(self.kernel, gamma=self.gamma_, coef0=self.coef0, degree=self.degree)

    def _ovo(self, X):
        """Every machine's f(x), one column each. The machines share support
        rows, so kernel blocks are computed once against their union (sorted
        by class); then, per class, one product of its columns with the
        coefficients of the machines that class takes part in (one-vs-one:
        k - 1 of them), i.e. a few small GEMMs instead of a gather per
        (machine, support row)."""
        return self._ovo_rows(self._validate_X(X))

    def _ovo_rows(self, X, n_jobs=1):
        """:meth:`_ovo` of rows already validated (and scaled), on ``n_jobs`` threads."""
        union, intercepts = self._union()
        opts = self._options()
        return union_values(self.kernel_, union, intercepts, X, n_jobs=n_jobs,
                            few_machines=opts.few_machines, tile=opts.union_tile)

    def _model_record(self):
        """(machines, this estimator's fields of the model manifest): what
        :func:`streamcvm.estimators.model.save_model` writes (with :meth:`_model_restore`)."""
        probability = None if getattr(self, "probA_", None) is None else \
            {"A": [float(v) for v in self.probA_],      # B: the machines' own sign
             "B": [float(v) for v in self.probB_ * self._platt_sign()],
             "rows": getattr(self, "n_probability_rows_", None)}
        return self.machines_, {"classes": [c.item() if hasattr(c, "item") else c
                                            for c in self.classes_],
                                "probability": probability, "C_": self.C_,
                                "n_support": [int(v) for v in self.n_support_]}

    def _model_arrays(self):
        """Arrays a saved model keeps besides its machines': one-vs-rest, the
        class of each distinct support row (sorted by row id)."""
        cls = getattr(self, "_support_classes", None)
        return {} if cls is None else {"support_classes": np.asarray(cls, np.int64)}

    def _model_restore(self, machines, man, arrays=None):
        self.classes_ = np.asarray(man["classes"])
        self.C_ = man.get("C_") if man.get("C_") is not None else man["params"]["C"]
        self._support_classes = (arrays or {}).get("support_classes")
        self._set_machines(machines)
        pr = man.get("probability")
        self.probA_ = None if pr is None else np.asarray(pr["A"], np.float64)
        self.probB_ = None if pr is None else \
            np.asarray(pr["B"], np.float64) * self._platt_sign()

    def _set_machines(self, machines):
        """Set ``machines_``; the union of their support rows
        (:func:`~streamcvm.predict.decision.build_union`) is built again
        when predict first needs it."""
        self.machines_ = machines
        self._unions_ = {}
        self._svc_layout = None

    def _labels_of(self, F):
        """Class indices predicted from machine values ``F`` [rows, machines]."""
        return class_indices(F, self.multi_class, len(self.classes_))

    def _compact_fitted(self, store, seed, solve, codes):
        """A compact expansion for machines trained on every row (no held-out
        rows), and for every multi-class model: one k-means basis shared by
        all of them, B chosen by how often its labels equal the full model's
        on training rows the least-squares fit did not use, or, with many
        machines, by the paired rule on those rows too, the largest B first
        when the machines trained by stages
        (:func:`streamcvm.problems.compress.compact_shared`,
        :func:`~streamcvm.problems.compress.paired_labels`); ``codes``: the
        values of the store's y in the order of the class indices."""
        from ..data.parallel import n_threads
        from ..problems.compress import (agreeing_labels, attach_shared, compact_shared,
                                         paired_labels, sample_rows)
        machines = self.machines_
        got, info = None, {"decision": "sparse support rows: not compressed"}
        if not (store.sparse or any(sp.issparse(m.sv) for m in machines)):
            U, _, _, groups, key = build_union(machines, keys=True)
            w = np.zeros(U.shape[0])
            for lo, hi, _, W in groups:
                w[lo:hi] = np.abs(W).sum(axis=1)

            jobs = n_threads(solve.n_jobs)

            many = len(machines) > 1
            # the largest B first where the machines trained by stages (large
            # unions, where a refusal should cost one try); smallest first on a
            # fit of every row, where a small B often passes and the large tries
            # are most of the cost (BENCHMARKS, "Many classes")
            staged = any("stage_rows" in h for m in machines for h in (m.history or []))
            opts = solve.options

            def sample():       # the full model's values there: 16K x |S| kernel values
                Xf, Xc, yc = sample_rows(store, opts, seed, solve.runner, labels=True)
                full = self._labels_of(self._ovo_rows(Xc, jobs))
                at = {float(c): i for i, c in enumerate(codes)}
                truth = np.array([at.get(float(v), -1) for v in yc])
                accept = paired_labels(self._labels_of, full, truth,
                                       opts.compact_agree, opts.compact_error_tol) if many \
                    else agreeing_labels(self._labels_of, full, opts.compact_agree)
                return Xf, self._ovo_rows(Xf, jobs), Xc, accept
            got, info = compact_shared(U, w, key, self.kernel_, sample, options=opts,
                                       seed=seed, n_jobs=jobs,
                                       largest_first=many and staged)
        attach_shared(machines, got, info)
        self._set_machines(machines)


    def _union(self, exact=None):
        """The support rows the active machines share (:meth:`_build_union`)
        and their intercepts, built once per setting of ``compact`` (predict
        calls this for every chunk)."""
        exact = self.compact is False if exact is None else exact
        got = self.__dict__.setdefault("_unions_", {}).get(exact)
        if got is None:
            machines = active_machines(self.machines_, exact)
            got = self._unions_[exact] = (build_union(machines),
                                          np.array([m.intercept for m in machines]))
        return got


    def predict_with_decision(self, X: DataLike) -> tuple[np.ndarray, np.ndarray]:
        """Predict the labels and the decision values from one pass of kernel blocks.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            ``predict(X)``.
        decision : ndarray of shape (n_samples,) or (n_samples, n_columns)
            ``decision_function(X)``.
        """
        got = self._streamed(X)
        if got is not None:
            return got[0], got[1]
        F = self._ovo(X)
        if F.shape[1] == 1:
            return self.classes_[(F[:, 0] > 0).astype(int)], F[:, 0]
        if self.multi_class == "ovr":       # machine k: class k against the rest
            return self.classes_[np.argmax(F, axis=1)], F
        V = ovo_votes(F, len(self.classes_))
        dec = -F if self.decision_function_shape == "ovo" else V   # SVC's: positive for i
        return self.classes_[np.argmax(V, axis=1)], dec

    def decision_function(self, X: DataLike) -> np.ndarray:
        """Compute the decision values of the rows of X.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_columns)
            Binary: f(x), positive for ``classes_[1]``. Multi-class one-vs-one:
            with ``decision_function_shape="ovr"`` (default, as SVC) one column
            per class, the one-vs-one votes plus a confidence below 1/3 that
            breaks ties; with "ovo", one column per machine (classes i < j, in
            the order (0, 1), (0, 2), ..., (1, 2), ...), positive for i, as
            SVC's. Multi-class one-vs-rest (``multi_class="ovr"``): column k is
            machine k's f(x), positive for class k.
        """
        return self.predict_with_decision(X)[1]

    def predict(self, X: DataLike) -> np.ndarray:
        """Predict the class labels of the rows of X.

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples,)
            One of ``classes_`` per row.
        """
        return self.predict_with_decision(X)[0]


    def _platt_sign(self):
        """-1 where ``probB_`` is in SVC's sign (two classes, one-vs-one), the
        negative of the machines' own: their sigmoids give P(second class | f),
        f positive for it; SVC's give P(first class | -f), the same A and -B."""
        return 1.0 if one_vs_rest(self.machines_) else -1.0

    def _set_sigmoids(self, F, y, subs):
        """``probA_``, ``probB_``: Platt's sigmoid per machine
        (:func:`~streamcvm.predict.probability.fit_sigmoids`)."""
        A, B = probability.fit_sigmoids(F, y, subs)
        self.probA_, self.probB_ = A, B * self._platt_sign()
        self.n_probability_rows_ = int(len(y))

    def _proba_rows(self, X):
        return probability.probabilities(self._ovo_rows(X), self.probA_,
                                         self.probB_ * self._platt_sign(),
                                         self.multi_class, len(self.classes_))

    @available_if(lambda self: self.probability)
    def predict_proba(self, X: DataLike) -> np.ndarray:
        """Estimate P(class | x) for the rows of X (needs ``probability=True``).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            One column per ``classes_`` entry, from Platt's sigmoids (more
            than two classes: pairwise coupling, as LIBSVM).
        """
        check_is_fitted(self)
        if getattr(self, "probA_", None) is None:
            raise AttributeError("predict_proba needs a model fitted with probability=True "
                                 "(streamcvm train -b 1)")
        if is_store_like(X) or is_dask_array(X):
            store = as_store(X) if is_store_like(X) else DaskStore(X)
            if store.d != self.n_features_in_:
                raise ValueError(f"{getattr(store, 'path', 'X')}: {store.d} features, the "
                                 f"model expects {self.n_features_in_}")
            out = [self._proba_rows(self._validate_X(c.X)) for c in store]
            return np.concatenate(out) if out else np.zeros((0, len(self.classes_)))
        return self._proba_rows(self._validate_X(X))

    @available_if(lambda self: self.probability)
    def predict_log_proba(self, X: DataLike) -> np.ndarray:
        """Estimate log P(class | x) for the rows of X (needs ``probability=True``).

        Parameters
        ----------
        X : array_like, sparse matrix, dask array, store, str or os.PathLike
            The rows: arrays, a sparse matrix, a dask array, or a store, its
            path or URL (streamed chunk by chunk).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The log of :meth:`predict_proba`.
        """
        return np.log(self.predict_proba(X))

    def score(self, X: DataLike, y: ArrayLike | None = None,
              sample_weight: ArrayLike | None = None) -> float:
        """Give the mean accuracy on rows and their labels.

        Parameters
        ----------
        X : array_like, sparse matrix, store, str or os.PathLike
            The rows: arrays, a sparse matrix, or a store, its path or URL
            (streamed, scored against its own labels; a store none of whose
            labels is a class is refused).
        y : array_like of shape (n_samples,), optional
            The true labels of arrays; None for a store.
        sample_weight : array_like of shape (n_samples,), optional
            Weights of the rows of arrays; None for a store.

        Returns
        -------
        float
            The share of rows predicted right (NaN for an empty store).
        """
        if not is_store_like(X):
            return super().score(X, y, sample_weight)
        if y is not None or sample_weight is not None:
            raise ValueError("score on a store takes its labels from the store: "
                             "pass no y or sample_weight")
        pred, _, yst, store = self._streamed(X)
        table = class_table(self.classes_, store)
        truth = table[np.searchsorted(store.classes, yst)]
        idx = np.searchsorted(self.classes_, pred)     # classes_ is sorted
        return float(np.mean(truth == idx)) if len(pred) else float("nan")


def _class_weights(class_weight, store, codes, labels):
    """{code: weight} for ``class_weight`` (None, "balanced" or {label:
    weight}), or None. "balanced" is scikit-learn's n / (k n_c), from the
    store's per-chunk class counts."""
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, "
                             f"got {class_weight!r}")
        counts = np.asarray(store.class_counts).sum(axis=0).astype(np.float64)
        col = np.searchsorted(store.classes, codes)       # codes may be in label order
        return {c: counts.sum() / (len(codes) * counts[k]) for k, c in zip(col, codes)}
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got "
                         f"{type(class_weight).__name__}")
    index = {(v.item() if hasattr(v, "item") else v): c for v, c in zip(labels, codes)}
    out = {c: 1.0 for c in codes}
    for label, w in class_weight.items():
        key = label.item() if hasattr(label, "item") else label
        if key not in index:
            raise ValueError(f"class_weight: label {label!r} is not among the classes "
                             f"{list(index)}")
        if not isinstance(w, numbers.Real) or not w > 0:
            raise ValueError(f"class_weight[{label!r}] must be a positive number, got {w!r}")
        out[index[key]] = float(w)
    return out
