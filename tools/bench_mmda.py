#!/usr/bin/env python
"""MMDA benchmark: streamcvm's MMDATransformer against kernel PCA and a
kernel Fisher discriminant as feature extractors (the shape of Tables II-IV
of the mmda paper, sec. V-B) on optdigits, satimage, pendigits and letter.

Protocol. Data come from ``tools/datasets.py`` (``load(name)``, the training
and test files as given; dense float32). Every kernel is the Gaussian RBF
exp(-gamma ||x - z||^2) with ONE gamma per set: MMDATransformer is fitted
with gamma="auto" (1 / beta, beta the mean squared distance between training
rows on 5,000 rows: the paper's beta) and its ``gamma_`` is passed to KPCA
and KFD (without the MMDA extractor, ``datasets.protocol_gamma``, the same
definition, is used and the header says so). Extractors (``--extractors``):

- mmda: ``MMDATransformer(n_components=max(--per-class), C=1, kernel="rbf",
  gamma="auto", eps=1e-3, random_state=0)``, one-vs-rest (N_c x n_components
  features). It is fitted ONCE with the largest count; the k-per-class
  features (k in ``--per-class``, default 1 3 5: N_c, 3N_c, 5N_c features)
  are the columns with ``feature_rank_ < k``, which are exactly what a fit
  with n_components=k gives (features are found sequentially, same seeds).
  Their extraction time is ``feature_seconds_[feature_rank_ < k].sum()``;
  the whole fit is timed too ("fit s" in the resources table).
- kpca: scikit-learn ``KernelPCA(n_components=max(--per-class) * N_c,
  kernel="rbf", gamma, eigen_solver="arpack", random_state=0)`` on float64
  rows, fitted once; the k-per-class features are its first k N_c columns
  (ordered by eigenvalue), so every count has the same extraction time.
  arpack, not "randomized": on letter (15,000 rows, 130 components) arpack
  took 44 s and matches a dense ``eigh`` to 1e-14, randomized took 36 s but
  its last eigenvalues were off by 7e-4 (relative) and its 130-dimensional
  subspace by a principal-angle cosine of 0.993; on optdigits both took
  1.6 s (dense eigh 8.6 s).
- kfd: the multi-class regularized kernel Fisher discriminant (``KFD`` below),
  N_c - 1 features: K the training kernel matrix (float64), m_c the class
  means of K's columns, m their overall mean, A = [sqrt(n_c) (m_c - m)]
  (n x N_c), within-class scatter N = K K - sum_c n_c m_c m_c'; (N + mu I) Z
  = A by Cholesky; v the top N_c - 1 eigenvectors of A'Z (N_c x N_c); the
  directions a = Z v scaled to a'Ka = 1; features K(X, Xtr) a. mu = MU_REL x
  trace(N) / n with MU_REL = 1e-3, a fixed rule. ``--mu-study`` checks it by a
  holdout on optdigits' TRAINING rows only (80/20): 1-NN holdout accuracy
  97.65 / 97.78 / 98.17 / 98.30 / 98.30 / 98.17 / 98.04 % for MU_REL = 1e-1,
  1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8 (linear SVM 97.25 .. 98.17): flat
  below 1e-2 (1e-4 is one holdout row of 765 better), so 1e-3 stays.
  ``--selfcheck`` compares KFD with ``scipy.linalg.eigh(M, N + mu I)`` on
  200 rows.
- none: the raw features.

``--kernel-rows N`` fits KPCA and KFD on a class-balanced random sample of N
training rows (seed 0; N // N_c per class, the remainder to the first
classes; a class too small gives all its rows and the rest is drawn from the
others) instead of all of them (the paper used 3,500 on letter); default 0:
all rows (letter: a 15,000 x 15,000 float64 matrix, 1.8 GB). MMDA always
uses every training row. The classifiers always train on the extracted
features of ALL training rows.

Classifiers on the extracted features (training rows -> test rows): 1-NN
(``KNeighborsClassifier(1)``) and a linear SVM (``StandardScaler`` then
``LinearSVC(C=1)``, one-vs-rest, random_state=0).

Usage::

    python tools/bench_mmda.py --selfcheck
    python tools/bench_mmda.py --quick
    python tools/bench_mmda.py --json /tmp/streamcvm-bench/mmda.json
    python tools/bench_mmda.py --sets letter --kernel-rows 3500
    python tools/bench_mmda.py --mu-study
    python tools/bench_mmda.py --mmda-seeds 3    # MMDA's spread over its sampler's seed

Each (set, extractor) runs in its own fresh Python process (this script with
a hidden ``--child``), one after the other; it loads the data, fits the
extractor, transforms the training and the test rows, then trains and tests
both classifiers on each feature count. This parent imports only the
standard library (a child's ``ru_maxrss`` starts at its parent's peak).
Threads: every child runs with ``--threads`` (default 1) BLAS / OpenMP /
numba threads (the environment variables OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and NUMBA_NUM_THREADS, plus
``threadpoolctl.threadpool_limits`` and ``numba.set_num_threads`` in the
child), so MMDA's numba kernels and KPCA's / KFD's BLAS get the same cores
(MMDA's sampler may add its own prefetch thread).

What each figure is:

- accuracy (Table II): test accuracy in percent of each classifier on each
  extractor's features; "#features" N_c, 3N_c, 5N_c (k per class), N_c - 1
  (KFD) or d (none).
- extraction s (Table III): wall seconds (``time.perf_counter``) of the
  extraction fit: MMDA the k-per-class features' ``feature_seconds_`` sum
  (with ``--threads`` above 1 the classes' features are found side by side
  and their seconds overlap: the sum exceeds the wall time; "fit s" is wall),
  KPCA and KFD their one fit (kernel matrix included). Each child first
  fits a tiny problem with the same extractor and transforms with it, so
  imports, numba's compile / cache load and first BLAS calls are not counted
  ("warm-up s" in the resources table): MMDA WARMUP_ROWS rows of the 3
  largest classes, 2 features per class; KPCA (10 components) and KFD a
  class-balanced sample of WARMUP_ROWS rows (seed 1).
- kernel evaluations per feature (Table IV): MMDA the mean of
  ``kernel_evaluations_`` over the features used (the support rows each
  feature adds; a later feature of a class is its own rows plus a linear
  combination of the earlier features' values); KPCA and KFD the number of
  training rows their features expand over (all of them, or
  ``--kernel-rows``).
- kernel evaluations per transformed row: what ``transform`` evaluates for
  all the features of a count together: MMDA the distinct rows of those
  features' expansions (rows shared by features and classes count once),
  KPCA and KFD their training rows.
- resources: per (set, extractor): the rows the fit used, the features
  fitted, fit s (MMDA: the whole fit of max(--per-class) per class), the
  wall seconds to transform the whole test set into ALL fitted features
  (MMDA 5N_c, KPCA 5N_c, KFD N_c - 1; in blocks of BLOCK rows), peak RSS MB
  (``ru_maxrss``, 10^6 bytes) after the extraction (fit and both transforms,
  before the classifiers) and at the end of the child.

After the tables, one line per set says whether MMDA's best 1-NN accuracy
(over its feature counts) is >= KPCA's at the same count and >= KFD's, and
the same for MMDA's N_c features. ``--quick`` uses QUICK_TRAIN random
training and QUICK_TEST test rows per set (``datasets.subsample_index``,
seed 0) and, unless ``--per-class`` is given, 1 and 3 features per class
(MMDA's time goes with the number of features, hardly with the rows: letter's
130 features take ~25 s even on 500 rows). The header gives the command line
and the git commit ("-dirty": tracked files differ from HEAD).
"""
import os
import sys
import time

import benchlib as B     # standard library only
from benchlib import log, peak_rss_bytes

B.use_source_tree()

SETS = ["optdigits", "satimage", "pendigits", "letter"]
EXTRACTORS = ["mmda", "kpca", "kfd", "none"]
PER_CLASS = [1, 3, 5]
QUICK_TRAIN, QUICK_TEST = 500, 500
QUICK_PER_CLASS = [1, 3]    # --quick: MMDA's time is per feature, hardly per row
WARMUP_ROWS = 210           # MMDA warm-up: 70 rows of each of 3 classes
BLOCK = 2048                # rows per transform block (KPCA, KFD)
MU_REL = 1e-3               # KFD: mu = MU_REL * trace(N) / n (see --mu-study)
MU_GRID = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8]
NAMES = {"mmda": "MMDA", "kpca": "KPCA", "kfd": "KFD", "none": "none"}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS")


# ---------------------------------------------------------------------------
# kernel Fisher discriminant
# ---------------------------------------------------------------------------

class KFD:
    """Multi-class regularized kernel Fisher discriminant, RBF kernel.

    ``fit(X, y)``: K = rbf_kernel(X, X) (float64, n x n); M_c = K[:, c].mean(1)
    per class, m = K.mean(1); A = [sqrt(n_c) (M_c - m)] (n x N_c); within-class
    scatter N = K K - sum_c n_c M_c M_c' (upper triangle by two BLAS syrk, so
    K K costs n^3 flops); mu = mu_rel * trace(N) / n; (N + mu I) Z = A by
    Cholesky; the top ``n_components`` (default N_c - 1) eigenvectors v of the
    symmetric N_c x N_c matrix A'Z give the directions a = Z v, scaled to
    a'Ka = 1 (``alpha_``, ``eigenvalues_``). These are the leading solutions
    of the generalized problem (A A') a = lambda (N + mu I) a: its nonzero
    eigenvectors lie in the range of Z. Memory: K and N, 2 n^2 float64.
    ``transform(X)`` = rbf_kernel(X, X_fit) @ alpha_, in blocks of ``block`` rows.
    """

    def __init__(self, gamma, mu_rel=MU_REL, n_components=None, block=BLOCK):
        self.gamma, self.mu_rel, self.n_components, self.block = gamma, mu_rel, \
            n_components, block

    def fit(self, X, y):
        import numpy as np
        from scipy.linalg import cho_factor, cho_solve, eigh
        from scipy.linalg.blas import dsyrk
        from sklearn.metrics.pairwise import rbf_kernel
        X = np.ascontiguousarray(X, np.float64)
        self.classes_, codes = np.unique(y, return_inverse=True)
        n, k = len(codes), len(self.classes_)
        counts = np.bincount(codes, minlength=k).astype(np.float64)
        K = rbf_kernel(X, gamma=self.gamma)                 # symmetric, C order
        Y = np.zeros((n, k))
        Y[np.arange(n), codes] = 1.0 / counts[codes]
        Mc = K @ Y                                          # class means of K's columns
        m = Mc @ counts / n
        A = (Mc - m[:, None]) * np.sqrt(counts)
        Bm = Mc * np.sqrt(counts)
        N = dsyrk(1.0, K.T)             # K.T: F-contiguous, no copy; upper of K K
        N = dsyrk(-1.0, Bm, beta=1.0, c=N, overwrite_c=1)  # upper of K K - sum n_c M_c M_c'
        dg = np.arange(n)
        self.trace_N_ = float(N[dg, dg].sum())
        self.mu_ = self.mu_rel * self.trace_N_ / n
        N[dg, dg] += self.mu_
        cf = cho_factor(N, lower=False, overwrite_a=True, check_finite=False)
        Z = cho_solve(cf, A, check_finite=False)
        del cf, N
        S = A.T @ Z
        w, V = eigh((S + S.T) / 2)
        q = k - 1 if self.n_components is None else self.n_components
        top = np.argsort(w)[::-1][:q]
        alpha = Z @ V[:, top]
        alpha /= np.sqrt(np.einsum("ij,ij->j", alpha, K @ alpha))
        self.alpha_, self.eigenvalues_ = alpha, w[top]
        self.X_fit_ = X
        return self

    def transform(self, X):
        import numpy as np
        from sklearn.metrics.pairwise import rbf_kernel
        return np.vstack([rbf_kernel(np.asarray(X[a:a + self.block], np.float64), self.X_fit_,
                                     gamma=self.gamma) @ self.alpha_
                          for a in range(0, X.shape[0], self.block)])


def balanced_sample(y, n, seed=0):
    """Sorted indices of a class-balanced random sample of ``n`` rows of
    ``y`` (all rows when n <= 0 or n >= len(y)): n // N_c per class, the
    remainder one each to the first classes; a class with fewer rows gives
    them all and the shortfall is drawn at random from the rows left."""
    import numpy as np
    if n <= 0 or n >= len(y):
        return np.arange(len(y))
    rng = np.random.default_rng(seed)
    cls = np.unique(y)
    share = [n // len(cls) + (i < n % len(cls)) for i in range(len(cls))]
    take = [rng.permutation(np.flatnonzero(y == c))[:s] for c, s in zip(cls, share)]
    idx = np.concatenate(take)
    if len(idx) < n:
        rest = np.setdiff1d(np.arange(len(y)), idx)
        idx = np.concatenate([idx, rng.choice(rest, n - len(idx), replace=False)])
    return np.sort(idx)


# ---------------------------------------------------------------------------
# children
# ---------------------------------------------------------------------------

def _limit_threads(n):
    """``threadpool_limits(n)`` (kept open for the child's life) and numba's."""
    from threadpoolctl import threadpool_limits
    import numba
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    return threadpool_limits(n)


def _load(spec):
    import datasets as D
    got = D.load_parts(spec["dataset"], spec.get("raw_dir"),
                       quick=(QUICK_TRAIN, QUICK_TEST) if spec["quick"] else None)
    return got["Xtr"], got["ytr"], got["Xte"], got["yte"]


def _classify(Ftr, ytr, Fte, yte):
    """{"1nn": %, "svm": %, "1nn_s", "svm_s", "svm_warnings"} on these features."""
    import warnings
    import numpy as np
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC
    out = {}
    t = time.perf_counter()
    pred = KNeighborsClassifier(1).fit(Ftr, ytr).predict(Fte)
    out["1nn"], out["1nn_s"] = 100.0 * float(np.mean(pred == yte)), time.perf_counter() - t
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svm = make_pipeline(StandardScaler(), LinearSVC(C=1.0, random_state=0))
        pred = svm.fit(Ftr, ytr).predict(Fte)
    out["svm"], out["svm_s"] = 100.0 * float(np.mean(pred == yte)), time.perf_counter() - t
    msgs = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:120]}"
                   for w in caught})
    if msgs:
        out["svm_warnings"] = msgs
    return out


def _mmda_warmup(X, y, make):
    """Fit and transform a tiny 3-class problem of the same data (numba)."""
    import numpy as np
    cls, cnt = np.unique(y, return_counts=True)
    idx = np.sort(np.concatenate([np.flatnonzero(y == c)[:WARMUP_ROWS // 3]
                                  for c in cls[np.argsort(-cnt)[:3]]]))
    t = time.perf_counter()
    make(2).fit(X[idx], y[idx]).transform(X[idx])
    return time.perf_counter() - t


def child_run(spec):
    import numpy as np
    limits = _limit_threads(spec["threads"])
    Xtr, ytr, Xte, yte = _load(spec)
    n_c = len(np.unique(ytr))
    ext, per_class = spec["extractor"], sorted(spec["per_class"])
    kmax = per_class[-1]
    out = {"n_train": int(len(ytr)), "n_test": int(len(yte)), "d": int(Xtr.shape[1]),
           "n_classes": n_c, "rss_before_fit": peak_rss_bytes()}
    feats = []          # (label, n features, columns, extraction s, kernel evals per feature)
    if ext == "none":
        Ftr, Fte = Xtr, Xte
        out.update(fit_rows=0, n_fitted=int(Xtr.shape[1]), fit_s=0.0, transform_test_s=0.0)
        feats.append(("d", Xtr.shape[1], slice(None), None, None, None))
    elif ext == "mmda":
        from streamcvm import MMDATransformer

        def make(k):
            return MMDATransformer(n_components=k, C=1.0, kernel="rbf", gamma="auto",
                                   eps=1e-3, random_state=spec.get("seed", 0))

        out["warmup_s"] = _mmda_warmup(Xtr, ytr, make)
        est = make(kmax)
        _, out["fit_s"] = B.timed(est.fit, Xtr, ytr)
        Fte, out["transform_test_s"] = B.timed(est.transform, Xte)
        Ftr, out["transform_train_s"] = B.timed(est.transform, Xtr)
        rank, kev = np.asarray(est.feature_rank_), np.asarray(est.kernel_evaluations_)
        secs = np.asarray(est.feature_seconds_)
        out.update(gamma=float(est.gamma_), fit_rows=int(len(ytr)), n_fitted=int(len(rank)),
                   feature_class=np.asarray(est.feature_class_).tolist(),
                   feature_rank=rank.tolist(), kernel_evaluations=kev.tolist(),
                   feature_seconds=secs.tolist())
        for k in per_class:
            cols = rank < k
            feats.append((f"{k}N_c" if k > 1 else "N_c", int(cols.sum()), cols,
                          float(secs[cols].sum()), float(kev[cols].mean()),
                          len(np.unique(np.concatenate([m.sv_ids for m, c in
                                                        zip(est.machines_, cols) if c])))))
    else:
        idx = balanced_sample(ytr, spec.get("kernel_rows", 0), seed=0)
        Xfit = np.asarray(Xtr[idx], np.float64)
        out["fit_rows"] = int(len(idx))
        w = balanced_sample(ytr, WARMUP_ROWS, seed=1)      # imports, first BLAS calls
        if ext == "kpca":
            from sklearn.decomposition import KernelPCA

            def make(q):
                return KernelPCA(n_components=q, kernel="rbf", gamma=spec["gamma"],
                                 eigen_solver="arpack", random_state=0)

            def tf(X):      # in float64 blocks of BLOCK rows
                return np.vstack([est.transform(np.asarray(X[a:a + BLOCK], np.float64))
                                  for a in range(0, X.shape[0], BLOCK)])

            t = time.perf_counter()
            make(10).fit(np.asarray(Xtr[w], np.float64)).transform(Xte[:BLOCK])
            out["warmup_s"] = time.perf_counter() - t
            est = make(min(kmax * n_c, len(idx) - 1))
            _, out["fit_s"] = B.timed(est.fit, Xfit)
            del Xfit
            out["eigenvalues"] = est.eigenvalues_.tolist()
        else:
            t = time.perf_counter()
            KFD(spec["gamma"]).fit(Xtr[w], ytr[w]).transform(Xte[:BLOCK])
            out["warmup_s"] = time.perf_counter() - t
            est = KFD(spec["gamma"], mu_rel=spec.get("mu_rel", MU_REL))
            _, out["fit_s"] = B.timed(est.fit, Xfit, ytr[idx])
            tf = est.transform
            out.update(mu=est.mu_, mu_rel=est.mu_rel, eigenvalues=est.eigenvalues_.tolist())
        Fte, out["transform_test_s"] = B.timed(tf, Xte)
        Ftr, out["transform_train_s"] = B.timed(tf, Xtr)
        out["n_fitted"] = int(Fte.shape[1])
        if ext == "kpca":
            for k in per_class:
                q = min(k * n_c, Fte.shape[1])
                feats.append((f"{k}N_c" if k > 1 else "N_c", q, slice(0, q), out["fit_s"],
                              float(len(idx)), len(idx)))
        else:
            feats.append(("N_c-1", Fte.shape[1], slice(None), out["fit_s"], float(len(idx)),
                          len(idx)))
    if not (np.all(np.isfinite(Ftr)) and np.all(np.isfinite(Fte))):
        raise FloatingPointError(f"{ext}: non-finite features")
    out["rss_after_extraction"] = peak_rss_bytes()
    out["features"] = []
    for lab, q, cols, ext_s, kev, rows in feats:
        r = {"label": lab, "n_features": int(q), "extract_s": ext_s, "kevals_per_feature": kev,
             "kevals_per_row": rows}
        r.update(_classify(Ftr[:, cols], ytr, Fte[:, cols], yte))
        out["features"].append(r)
    out["peak_rss"] = peak_rss_bytes()
    out["vm_hwm"] = B.vm_hwm_bytes()
    del limits
    return out


def child_gamma(spec):
    """``datasets.protocol_gamma`` of the training rows (when MMDA does not run)."""
    import datasets as D
    Xtr, ytr, _, _ = _load(spec)
    return {"gamma": float(D.protocol_gamma(Xtr))}


CHILD_JOBS = {"run": child_run, "gamma": child_gamma}


# ---------------------------------------------------------------------------
# --selfcheck and --mu-study (in this process)
# ---------------------------------------------------------------------------

def selfcheck(raw_dir=None):
    """KFD against scipy.linalg.eigh(M, N + mu I) on 200 optdigits rows (the
    straightforward dense formulas); the four sets' row counts; the balanced
    sampler. Returns the number of failures."""
    import numpy as np
    from scipy.linalg import eigh
    from sklearn.metrics.pairwise import rbf_kernel
    import datasets as D
    fails = 0

    def check(ok, what):
        nonlocal fails
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}")

    want = {"optdigits": (3823, 1797, 64, 10), "satimage": (4435, 2000, 36, 6),
            "pendigits": (7494, 3498, 16, 10), "letter": (15000, 5000, 16, 26)}
    data = {}
    for name, (ntr, nte, d, k) in want.items():
        Xtr, ytr, Xte, yte = D.load(name, raw_dir)
        data[name] = Xtr, ytr
        got = (Xtr.shape[0], Xte.shape[0], Xtr.shape[1], len(np.unique(ytr)))
        check(got == (ntr, nte, d, k) and Xtr.dtype == np.float32
              and isinstance(Xtr, np.ndarray) and Xte.shape[1] == d,
              f"{name}: train/test rows, d, classes {got} (want {(ntr, nte, d, k)}), "
              f"{Xtr.dtype} {type(Xtr).__name__}")
    Xtr, ytr = data["optdigits"]
    idx = np.sort(np.random.default_rng(0).choice(len(ytr), 200, replace=False))
    X, y = Xtr[idx].astype(np.float64), ytr[idx]
    gamma = D.protocol_gamma(Xtr)
    kfd = KFD(gamma).fit(X, y)
    # the dense reference
    K = rbf_kernel(X, gamma=gamma)
    n, cls = len(y), np.unique(y)
    m = K.mean(axis=1)
    M = np.zeros((n, n))
    N = K @ K
    for c in cls:
        mc = K[:, y == c].mean(axis=1)
        nc = np.sum(y == c)
        M += nc * np.outer(mc - m, mc - m)
        N -= nc * np.outer(mc, mc)
    mu = MU_REL * np.trace(N) / n
    check(abs(kfd.mu_ / mu - 1) < 1e-10, f"KFD mu {kfd.mu_:.6g} = {MU_REL:g} trace(N)/n "
                                         f"{mu:.6g}")
    w, V = eigh(M, N + mu * np.eye(n))
    top = np.argsort(w)[::-1][:len(cls) - 1]
    w, V = w[top], V[:, top]
    V = V / np.sqrt(np.einsum("ij,ij->j", V, K @ V))
    rel = np.max(np.abs(kfd.eigenvalues_ / w - 1))
    check(rel < 1e-6, f"KFD {len(w)} eigenvalues match eigh(M, N + mu I): max relative "
                      f"difference {rel:.2e} (values {w[0]:.4g} .. {w[-1]:.4g})")
    cos = np.abs(np.einsum("ij,ij->j", kfd.alpha_, K @ V))   # both a'Ka = 1
    check(np.min(cos) > 1 - 1e-6, f"KFD directions match (|a'K v|, unit in the feature "
                                  f"space): min {np.min(cos):.10f}")
    F = kfd.transform(X)
    check(np.allclose(F, K @ kfd.alpha_, rtol=1e-10, atol=1e-10),
          "KFD transform = K(X, Xtr) a (blocks)")
    Xb = X[:50]
    check(np.allclose(KFD(gamma, block=7).fit(X, y).transform(Xb), kfd.transform(Xb)),
          "KFD transform independent of the block size")
    s = balanced_sample(ytr, 3500)
    cnt = np.unique(ytr[s], return_counts=True)[1]
    check(len(s) == len(np.unique(s)) == 3500 and cnt.max() - cnt.min() <= 1,
          f"balanced_sample(3500) on optdigits: {len(s)} distinct rows, per class "
          f"{cnt.min()}..{cnt.max()}")
    y2 = np.repeat([0, 1, 2], [5, 100, 100])
    s = balanced_sample(y2, 90)
    check(len(s) == len(np.unique(s)) == 90 and np.sum(y2[s] == 0) == 5,
          "balanced_sample: a small class gives all its rows, the rest drawn from the others")
    print(f"selfcheck: {fails} failure(s)")
    return fails


def mu_study(raw_dir=None, threads=1):
    """KFD's mu rule by a holdout on optdigits' TRAINING rows only: an 80/20
    split (default_rng(0) permutation), gamma = protocol_gamma of the 80%,
    1-NN and linear-SVM accuracy on the 20% for mu = r trace(N) / n, r in
    MU_GRID."""
    import numpy as np
    import datasets as D
    limits = _limit_threads(threads)
    Xtr, ytr, _, _ = D.load("optdigits", raw_dir)
    perm = np.random.default_rng(0).permutation(len(ytr))
    a, b = perm[:int(0.8 * len(ytr))], perm[int(0.8 * len(ytr)):]
    gamma = D.protocol_gamma(Xtr[a])
    print(f"optdigits training rows: fit {len(a):,}, holdout {len(b):,}; gamma {gamma:.6g}\n")
    rows = []
    for r in MU_GRID:
        kfd, s = B.timed(KFD(gamma, mu_rel=r).fit, Xtr[a], ytr[a])
        acc = _classify(kfd.transform(Xtr[a]), ytr[a], kfd.transform(Xtr[b]), ytr[b])
        rows.append([f"{r:g}" + (" (used)" if r == MU_REL else ""), f"{kfd.mu_:.4g}",
                     f"{acc['1nn']:.2f}", f"{acc['svm']:.2f}", f"{s:.1f}"])
    print(B.table(["mu / (trace(N)/n)", "mu", "holdout 1-NN %", "holdout SVM %", "fit s"],
                  rows, left=("mu / (trace(N)/n)",)))
    del limits
    return 0


# ---------------------------------------------------------------------------
# parent (standard library only: a child's ru_maxrss starts at the parent's)
# ---------------------------------------------------------------------------

def _row_labels(extractors, per_class):
    """(extractor, feature label) rows of the tables, in order."""
    rows = []
    for e in extractors:
        if e in ("mmda", "kpca"):
            rows += [(e, f"{k}N_c" if k > 1 else "N_c") for k in sorted(per_class)]
        elif e == "kfd":
            rows.append((e, "N_c-1"))
        else:
            rows.append((e, "d"))
    return rows


def _feat(runs, ds, e, lab):
    r = runs.get((ds, e))
    if r is None or "error" in r:
        return None
    return next((f for f in r["features"] if f["label"] == lab), None)


def tables(sets, extractors, per_class, runs):
    rows = _row_labels(extractors, per_class)
    acc = []
    for e, lab in rows:
        cells = [NAMES[e], lab]
        for ds in sets:
            f = _feat(runs, ds, e, lab)
            cells += ["err" if f is None else f"{f['1nn']:.2f}",
                      "err" if f is None else f"{f['svm']:.2f}"]
        acc.append(cells)
    head = ["extractor", "#features"] + [f"{ds} {c}" for ds in sets for c in ("1-NN", "SVM")]
    out = ["### Test accuracy (%) (Table II)\n",
           B.table(head, acc, left=("extractor", "#features"))]
    sec, kev, per_row = [], [], []
    for e, lab in rows:
        if e == "none":
            continue
        fs = [_feat(runs, ds, e, lab) for ds in sets]
        sec.append([NAMES[e], lab] + ["err" if f is None else f"{f['extract_s']:.2f}"
                                      for f in fs])
        kev.append([NAMES[e], lab] + ["err" if f is None else f"{f['kevals_per_feature']:,.0f}"
                                      for f in fs])
        per_row.append([NAMES[e], lab] + ["err" if f is None or f.get("kevals_per_row") is None
                                          else f"{f['kevals_per_row']:,}" for f in fs])
    head = ["extractor", "#features"] + sets
    if sec:
        out += ["\n### Extraction (fit) seconds (Table III)\n",
                B.table(head, sec, left=("extractor", "#features")),
                "\n### Kernel evaluations per feature (Table IV)\n",
                B.table(head, kev, left=("extractor", "#features")),
                "\n### Kernel evaluations per transformed row, all the features together\n",
                B.table(head, per_row, left=("extractor", "#features"))]
    res = []
    for ds in sets:
        for e in extractors:
            r = runs.get((ds, e))
            if r is None:
                continue
            if "error" in r:
                res.append([ds, NAMES[e]] + [""] * 5 + [r["error"]])
                continue
            res.append([ds, NAMES[e], f"{r['fit_rows']:,}", str(r["n_fitted"]),
                        f"{r['fit_s']:.2f}", f"{r['transform_test_s']:.2f}",
                        f"{r['rss_after_extraction'] / 1e6:,.0f}",
                        f"{r['peak_rss'] / 1e6:,.0f}" +
                        (f"; warm-up {r['warmup_s']:.1f} s" if "warmup_s" in r else "")])
    out += ["\n### Resources per (set, extractor)\n",
            B.table(["set", "extractor", "fit rows", "features fitted", "fit s",
                     "transform test s", "peak RSS MB after extraction",
                     "peak RSS MB at end; notes"], res,
                    left=("set", "extractor", "peak RSS MB at end; notes"))]
    return "\n".join(out)


def seed_table(sets, runs, seeds):
    """MMDA's 1-NN accuracy per feature count over the seeds run (seed 0 from
    ``runs``), next to KPCA's (same count) and KFD's, as a markdown table."""
    import statistics
    rows = []
    for ds in sets:
        got = [r for r in [runs.get((ds, "mmda"))] + seeds.get(ds, [])
               if r is not None and "error" not in r]
        if not got:
            continue
        for f0 in got[0]["features"]:
            acc = [f["1nn"] for r in got for f in r["features"] if f["label"] == f0["label"]]
            kp = _feat(runs, ds, "kpca", f0["label"])
            kfd = _feat(runs, ds, "kfd", "N_c-1")
            rows.append([ds, f0["label"], str(len(acc)),
                         f"{statistics.mean(acc):.2f} ({statistics.pstdev(acc):.2f}; "
                         f"{min(acc):.2f} - {max(acc):.2f})",
                         "-" if kp is None else f"{kp['1nn']:.2f}",
                         "-" if kfd is None else f"{kfd['1nn']:.2f}"])
    return B.table(["set", "#features", "seeds", "MMDA 1-NN", "KPCA 1-NN", "KFD 1-NN"], rows,
                   left=("set", "#features"))


def verdicts(sets, per_class, runs):
    """One line per set: MMDA's best and N_c 1-NN accuracy against KPCA's
    (same number of features) and KFD's."""
    lines = []
    labs = [f"{k}N_c" if k > 1 else "N_c" for k in sorted(per_class)]
    for ds in sets:
        mm = [f for f in (_feat(runs, ds, "mmda", lab) for lab in labs) if f]
        if not mm:
            continue
        kfd = _feat(runs, ds, "kfd", "N_c-1")
        parts = []
        best = max(mm, key=lambda f: f["1nn"])
        for what, f in (("best", best), ("N_c", _feat(runs, ds, "mmda", "N_c"))):
            if f is None:
                continue
            s = f"MMDA {what} 1-NN {f['1nn']:.2f} ({f['label']})"
            kp = _feat(runs, ds, "kpca", f["label"])
            if kp:
                s += f" {'>=' if f['1nn'] >= kp['1nn'] else '<'} KPCA {kp['1nn']:.2f}"
            if kfd:
                s += f", {'>=' if f['1nn'] >= kfd['1nn'] else '<'} KFD {kfd['1nn']:.2f}"
            parts.append(s)
        lines.append(f"- {ds}: " + "; ".join(parts))
    return "\n".join(lines)


def main(argv=None):
    ap = B.parser(__doc__)
    ap.add_argument("--sets", nargs="+", default=SETS, choices=SETS)
    ap.add_argument("--extractors", nargs="+", default=EXTRACTORS, choices=EXTRACTORS)
    ap.add_argument("--per-class", nargs="+", type=int,
                    help="MMDA / KPCA features per class (default 1 3 5; with --quick 1 3)")
    ap.add_argument("--kernel-rows", type=int, default=0,
                    help="fit KPCA and KFD on a class-balanced random sample of this many "
                         "training rows (default 0: all)")
    ap.add_argument("--mmda-seeds", type=int, default=1, metavar="S",
                    help="also fit MMDA with random_state 1 .. S-1 and report its 1-NN "
                         "accuracy over the S seeds (default 1: seed 0 only)")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS / OpenMP / numba threads of every child (default 1)")
    ap.add_argument("--json", metavar="OUT", help="write all raw numbers here")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child (3600)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_TRAIN:,} training / {QUICK_TEST:,} test rows per set (seed 0)")
    ap.add_argument("--selfcheck", action="store_true",
                    help="check KFD against scipy.linalg.eigh on 200 rows, the data, exit")
    ap.add_argument("--mu-study", action="store_true",
                    help="KFD's mu rule on an 80/20 split of optdigits' training rows, exit")
    B.add_raw_dir(ap)
    a = ap.parse_args(argv)
    if a.child:
        return B.child_main(a.child, CHILD_JOBS)
    if a.selfcheck:
        return 1 if selfcheck(a.raw_dir) else 0
    if a.mu_study:
        return mu_study(a.raw_dir, a.threads)
    if a.per_class is None:
        a.per_class = QUICK_PER_CLASS if a.quick else PER_CLASS
    if min(a.per_class) < 1:
        ap.error("--per-class: positive integers")
    for v in THREAD_VARS:           # inherited by the children
        os.environ[v] = str(a.threads)
    fit_rows = "all training rows" if a.kernel_rows <= 0 else \
        f"a class-balanced sample of {a.kernel_rows:,} training rows (seed 0)"
    bench_run = B.BenchRun(
        details=(f", {a.threads} thread(s) per child (BLAS, OpenMP, numba)"
                 + (f", QUICK ({QUICK_TRAIN:,} train / {QUICK_TEST:,} test rows per set, "
                    f"seed 0)" if a.quick else "")),
        more=[f"KPCA / KFD fit on {fit_rows}; KFD mu = {MU_REL:g} trace(N) / n; KPCA "
              f"eigen_solver arpack; MMDA C=1, eps=1e-3, all training rows"])
    runs, info, seeds = {}, {}, {}
    for ds in a.sets:
        base = {"kind": "run", "dataset": ds, "quick": a.quick, "raw_dir": a.raw_dir,
                "per_class": sorted(a.per_class), "kernel_rows": a.kernel_rows,
                "threads": a.threads}
        gamma, gamma_how = None, None
        order = [e for e in EXTRACTORS if e in a.extractors]
        for e in order:
            if e in ("kpca", "kfd") and gamma is None:
                r = B.run_child(dict(base, kind="gamma"), a.timeout)
                if "error" in r:
                    log(f"{ds}: no gamma: {r['error']}")
                    break
                gamma, gamma_how = r["gamma"], "datasets.protocol_gamma (MMDA did not run)"
            log(f"{ds}: {NAMES[e]} ...")
            r = B.run_child(dict(base, extractor=e, gamma=gamma), a.timeout)
            runs[(ds, e)] = r
            if "error" in r:
                continue
            if e == "mmda":
                gamma, gamma_how = r["gamma"], "MMDATransformer gamma_ (gamma='auto')"
            info[ds] = {k: r[k] for k in ("n_train", "n_test", "d", "n_classes")}
            log(f"  fit {r['fit_s']:.2f} s, transform test {r['transform_test_s']:.2f} s, "
                f"peak RSS {r['peak_rss'] / 1e6:,.0f} MB; 1-NN "
                + ", ".join(f"{f['label']} {f['1nn']:.2f}" for f in r["features"]))
        if ds in info:
            info[ds].update(gamma=gamma, gamma_how=gamma_how)
        for seed in range(1, a.mmda_seeds if "mmda" in a.extractors else 1):
            log(f"{ds}: MMDA random_state={seed} ...")
            seeds.setdefault(ds, []).append(B.run_child(dict(base, extractor="mmda",
                                                             seed=seed), a.timeout))
    print("\n".join(bench_run.header) + "\n")
    for ds in a.sets:
        i = info.get(ds)
        if i:
            print(f"- {ds}: {i['n_train']:,} training / {i['n_test']:,} test rows, "
                  f"d={i['d']}, N_c={i['n_classes']}, gamma "
                  + (f"{i['gamma']:.6g} ({i['gamma_how']})" if i["gamma"] else "-"))
    print()
    print(tables(a.sets, [e for e in EXTRACTORS if e in a.extractors], a.per_class, runs))
    v = verdicts(a.sets, a.per_class, runs)
    if v:
        print("\nMMDA against KPCA (same number of features) and KFD, 1-NN accuracy %:\n")
        print(v)
    if seeds:
        print(f"\nMMDA 1-NN accuracy % over random_state 0 .. {a.mmda_seeds - 1}: mean "
              f"(sd; min - max)\n")
        print(seed_table(a.sets, runs, seeds))
    warned = sorted({f"{ds} {NAMES[e]} {f['label']}" for (ds, e), r in runs.items()
                     if "error" not in r for f in r["features"] if f.get("svm_warnings")})
    if warned:
        print(f"\nLinearSVC warned (e.g. not converged) on: {', '.join(warned)}")
    if a.json:
        bench_run.write(a.json, args=vars(a), data=info,
                      runs=[dict(r, dataset=ds, extractor=e) for (ds, e), r in runs.items()],
                      mmda_seeds={ds: rs for ds, rs in seeds.items()})
    return 0 if all("error" not in r for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
