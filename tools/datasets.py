"""Benchmark datasets, prepared exactly as ``docs/protocol.md`` says.

``load(name)`` returns ``(Xtr, ytr, Xte, yte)``: X float32 (a dense ndarray,
or a scipy CSR matrix for the sparse svmlight sets a9a and w8a), y float64.

==========  =====================================  ============================================
name        raw files (under the raw dir)           preparation
==========  =====================================  ============================================
ijcnn1      ijcnn1/ijcnn1.trn.bz2, .tst.bz2         as given (already scaled), 22 features
a9a         adult_a9a/a9a, a9a.t                    as given, sparse CSR, 123 features
w8a         w8a/w8a, w8a.t                          as given, sparse CSR, 300 features
usps        usps/zip.train.gz, zip.test.gz          first column the digit, 256 pixels as given
letter      letter/letter.scale, letter.scale.t     as given, 16 features, labels 1..26
optdigits   optdigits/optdigits.tra, .tes           CSV, no header: 64 features as given (0..16),
                                                    the digit last; blank lines skipped
satimage    satimage/satimage.scale, .scale.t       as given, 36 features, labels 1..6
pendigits   pendigits/pendigits, pendigits.t        as given (unscaled 0..100), 16 features
shuttle     shuttle/pmlb_shuttle.tsv.gz             80/20 split, then min-max scaling
kddcup99    kddcup99/kddcup.data_10_percent.gz      "normal." -> -1, any attack -> +1; columns
                                                    1-3 one-hot; 80/20 split; min-max scaling
friedman1   friedman1/pmlb_564_fried.tsv.gz         regression: target last; 80/20 split; X and
cadata      cadata/pmlb_537_houses.tsv.gz           y standardised (z-score with the training
cpu_act     cpu_act/pmlb_197_cpu_act.tsv.gz         mean and standard deviation)
elevators   elevators/elevators.arff                (ARFF: the rows after ``@data``)
pol         pol/pmlb_201_pol.tsv.gz
house_16H   house_16H/pmlb_574_house_16H.tsv.gz
==========  =====================================  ============================================

Details the protocol leaves open, fixed here:

- svmlight files are read with 1-based indices and ``n_features`` fixed, so
  train and test agree (a 0 index would be an error, not a silent shift).
- 80/20 splits: ``np.random.default_rng(0).permutation(n)``, first 80% train.
- Min-max scaling uses the *training* minimum and maximum, applied to train
  and test alike; test values are not clipped (they may fall outside
  [0, 1]); a feature constant on the training set is only shifted.
- kddcup99 one-hot categories are those of the whole file, sorted; each
  symbolic column is replaced in place by its indicator columns (1 + 3 + 66
  + 11 + 37 = 118 features).

The raw directory is ``raw_dir``, else ``$STREAMCVM_DATA``, else
``<repo>/../shared/data/raw``. Prepared arrays are cached (``.npz``; CSR via
``scipy.sparse.save_npz``) in ``$XDG_CACHE_HOME/streamcvm-bench`` (or
``~/.cache/streamcvm-bench``), keyed by name, ``PREP_VERSION`` and each raw
file's size and mtime, so kddcup99 is parsed once.
"""
import hashlib
import os

import numpy as np
import scipy.sparse as sp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREP_VERSION = 1            # bump when a preparation changes: invalidates caches

# name -> (raw files, sparse)
FILES = {
    "ijcnn1": (["ijcnn1/ijcnn1.trn.bz2", "ijcnn1/ijcnn1.tst.bz2"], False),
    "a9a": (["adult_a9a/a9a", "adult_a9a/a9a.t"], True),
    "w8a": (["w8a/w8a", "w8a/w8a.t"], True),
    "usps": (["usps/zip.train.gz", "usps/zip.test.gz"], False),
    "letter": (["letter/letter.scale", "letter/letter.scale.t"], False),
    "optdigits": (["optdigits/optdigits.tra", "optdigits/optdigits.tes"], False),
    "satimage": (["satimage/satimage.scale", "satimage/satimage.scale.t"], False),
    "pendigits": (["pendigits/pendigits", "pendigits/pendigits.t"], False),
    "shuttle": (["shuttle/pmlb_shuttle.tsv.gz"], False),
    "kddcup99": (["kddcup99/kddcup.data_10_percent.gz"], False),
    "friedman1": (["friedman1/pmlb_564_fried.tsv.gz"], False),
    "cadata": (["cadata/pmlb_537_houses.tsv.gz"], False),
    "cpu_act": (["cpu_act/pmlb_197_cpu_act.tsv.gz"], False),
    "elevators": (["elevators/elevators.arff"], False),
    "pol": (["pol/pmlb_201_pol.tsv.gz"], False),
    "house_16H": (["house_16H/pmlb_574_house_16H.tsv.gz"], False),
    # held-out classification sets: no default was chosen on them (tools/bench_defaults.py)
    "dna": (["dna/dna.scale", "dna/dna.scale.t"], False),
    "svmguide1": (["svmguide1/svmguide1", "svmguide1/svmguide1.t"], False),
    "phishing": (["phishing/phishing_cfnpm_split", "phishing/phishing_cfnpm_split.t"], False),
    "mushrooms": (["mushrooms/mushrooms"], False),
    "german": (["german/german.numer_scale"], False),
    "magic": (["magic/pmlb_magic.tsv.gz"], False),
    "twonorm": (["twonorm/pmlb_twonorm.tsv.gz"], False),
    "ring": (["ring/pmlb_ring.tsv.gz"], False),
    "splice": (["splice/pmlb_splice.tsv.gz"], False),
    "higgs": (["higgs_subset_lightgbm/binary.train", "higgs_subset_lightgbm/binary.test"],
              False),
    "mnist10k": (["mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz"],
                 False),
    "skin": (["skin_nonskin/Skin_NonSkin.txt"], False),
}
REGRESSION = ("friedman1", "cadata", "cpu_act", "elevators", "pol", "house_16H")
SVMLIGHT_FEATURES = {"ijcnn1": 22, "a9a": 123, "w8a": 300, "letter": 16, "satimage": 36,
                     "pendigits": 16, "dna": 180, "phishing": 68}
SVMLIGHT_ZERO_BASED = ("phishing",)
# held-out classification sets (see FILES): binary and multi-class sets of other sources,
# sizes and scalings than the protocol's seven
HELD_OUT = ("dna", "svmguide1", "phishing", "mushrooms", "german", "magic", "twonorm", "ring",
            "splice", "higgs", "mnist10k", "satimage", "pendigits", "optdigits", "skin")
NAMES = tuple(FILES)


def raw_dir(path=None):
    return path or os.environ.get("STREAMCVM_DATA") or \
        os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "raw"))


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "streamcvm-bench")


def raw_paths(name, raw=None):
    """Absolute paths of the raw files of ``name``; a one-line error if one is missing."""
    if name not in FILES:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(NAMES)}")
    paths = [os.path.join(raw_dir(raw), f) for f in FILES[name][0]]
    for p in paths:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{name}: raw data file {p} is missing "
                                    "(set STREAMCVM_DATA or pass raw_dir)")
    return paths


def cache_key(name, raw=None):
    h = hashlib.sha1(f"{name}|v{PREP_VERSION}".encode())
    for p in raw_paths(name, raw):
        st = os.stat(p)
        h.update(f"|{os.path.basename(p)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return f"{name}-{h.hexdigest()[:12]}"


# ---------------------------------------------------------------------------
# preparation
# ---------------------------------------------------------------------------

def _split80(n):
    perm = np.random.default_rng(0).permutation(n)
    k = int(0.8 * n)
    return perm[:k], perm[k:]


def _minmax(Xtr, Xte):
    """Scale with the training min/max (no clipping); float32 out."""
    lo, hi = Xtr.min(axis=0), Xtr.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return ((Xtr - lo) / span).astype(np.float32), ((Xte - lo) / span).astype(np.float32)


def load_ranking(name, raw=None):
    """(X, y, qid, Xt, yt, qt) of a ranking set, min-max scaled on the
    training rows: rank_lightgbm (query ids from its group-size files: one
    size per line, in row order) or mq2008_subset (qid: in the files)."""
    from sklearn.datasets import load_svmlight_file
    raw = raw_dir(raw)
    if name == "rank_lightgbm":
        d = os.path.join(raw, "rank_lightgbm")
        X, y = load_svmlight_file(os.path.join(d, "rank.train"))
        Xt, yt = load_svmlight_file(os.path.join(d, "rank.test"), n_features=X.shape[1])
        g = np.loadtxt(os.path.join(d, "rank.train.query"), dtype=int)
        q = np.repeat(np.arange(len(g)), g)
        g = np.loadtxt(os.path.join(d, "rank.test.query"), dtype=int)
        qt = np.repeat(np.arange(len(g)), g)
    else:
        d = os.path.join(raw, "mq2008_subset")
        X, y, q = load_svmlight_file(os.path.join(d, "val.txt"), query_id=True)
        Xt, yt, qt = load_svmlight_file(os.path.join(d, "test.txt"), query_id=True,
                                        n_features=X.shape[1])
    X, Xt = _minmax(X.toarray(), Xt.toarray())
    return X, y, q, Xt, yt, qt


def _prepare(name, paths):
    sparse = FILES[name][1]
    if name in SVMLIGHT_FEATURES:
        from sklearn.datasets import load_svmlight_files
        Xtr, ytr, Xte, yte = load_svmlight_files(paths, n_features=SVMLIGHT_FEATURES[name],
                                                 dtype=np.float32,
                                                 zero_based=name in SVMLIGHT_ZERO_BASED)
        if not sparse:
            Xtr, Xte = Xtr.toarray(), Xte.toarray()
        return Xtr, ytr, Xte, yte
    import pandas as pd
    if name == "optdigits":     # CSV, no header, the digit last; blank lines skipped
        out = []
        for p in paths:
            a = pd.read_csv(p, header=None, dtype=np.float64).to_numpy()
            out += [a[:, :-1].astype(np.float32), a[:, -1]]
        return tuple(out)
    if name == "usps":
        out = []
        for p in paths:
            a = pd.read_csv(p, sep=r"\s+", header=None, dtype=np.float64).to_numpy()
            out += [a[:, 1:].astype(np.float32), a[:, 0]]
        return tuple(out)
    if name in REGRESSION:
        X, y = _regression_rows(name, paths, pd)
        tr, te = _split80(len(y))
        mu, sd = X[tr].mean(axis=0), X[tr].std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        ym, ys = y[tr].mean(), y[tr].std()
        return (((X[tr] - mu) / sd).astype(np.float32), (y[tr] - ym) / ys,
                ((X[te] - mu) / sd).astype(np.float32), (y[te] - ym) / ys)
    if name in HELD_OUT:
        got = _prepare_held_out(name, paths, pd)
        if len(got) == 4:
            return got
        X, y = got
    elif name == "shuttle":
        a = pd.read_csv(paths[0], sep="\t").to_numpy(np.float64)    # header row, target last
        X, y = a[:, :-1], a[:, -1]
    else:   # kddcup99
        df = pd.read_csv(paths[0], header=None)
        y = np.where(df[41].astype(str).str.strip() == "normal.", -1.0, 1.0)
        cols = [df[[0]].to_numpy(np.float64)]
        for c in (1, 2, 3):
            cols.append(pd.get_dummies(df[c].astype(str), dtype=np.float64).to_numpy())
        cols.append(df[list(range(4, 41))].to_numpy(np.float64))
        X = np.hstack(cols)
    tr, te = _split80(len(y))
    Xtr, Xte = _minmax(X[tr], X[te])
    return Xtr, y[tr], Xte, y[te]


def _regression_rows(name, paths, pd):
    """(X, y) of a regression set as its raw file holds them (float64)."""
    if name == "elevators":     # ARFF: the CSV rows after the @data line
        with open(paths[0]) as f:
            skip = next(i for i, line in enumerate(f) if line.strip().lower() == "@data")
        a = pd.read_csv(paths[0], skiprows=skip + 1, header=None,
                        comment="%").to_numpy(np.float64)
    else:
        a = pd.read_csv(paths[0], sep="\t").to_numpy(np.float64)
    return a[:, :-1], a[:, -1]


def target_moments(name, raw_dir=None):
    """(mean, sd) of a regression set's raw targets on its training rows:
    the z-score ``load`` applies, so the raw targets are ``mean + sd * y``
    (``load(..., raw_targets=True)``). Read from the raw file (never cached)."""
    import pandas as pd
    if name not in REGRESSION:
        raise ValueError(f"{name} is not a regression set ({', '.join(REGRESSION)})")
    _, y = _regression_rows(name, raw_paths(name, raw_dir), pd)
    tr, _ = _split80(len(y))
    return float(y[tr].mean()), float(y[tr].std())


def _prepare_held_out(name, paths, pd):
    """A held-out set: (Xtr, ytr, Xte, yte) where the files give the split (as
    given), else (X, y) for the 80/20 split and min-max scaling of the caller."""
    if name == "svmguide1":         # CSV with a header, the label first; as given
        out = []
        for p in paths:
            a = pd.read_csv(p).to_numpy(np.float64)
            out += [a[:, 1:].astype(np.float32), a[:, 0]]
        return tuple(out)
    if name == "higgs":             # TSV, the label first, no header
        out = []
        for p in paths:
            a = pd.read_csv(p, sep="\t", header=None).to_numpy(np.float64)
            out += [a[:, 1:], a[:, 0]]
        Xtr, Xte = _minmax(out[0], out[2])
        return Xtr, out[1], Xte, out[3]
    if name in ("mushrooms", "german"):     # LIBSVM, already scaled / binary: 80/20 only
        from sklearn.datasets import load_svmlight_file
        X, y = load_svmlight_file(paths[0], dtype=np.float64)
        X = X.toarray()
        tr, te = _split80(len(y))
        return X[tr].astype(np.float32), y[tr], X[te].astype(np.float32), y[te]
    if name == "mnist10k":          # the 10,000 test images, 80/20, pixels / 255
        import gzip
        with gzip.open(paths[0]) as f:
            X = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
        with gzip.open(paths[1]) as f:
            y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.float64)
        tr, te = _split80(len(y))
        X = X.astype(np.float32) / np.float32(255.0)
        return X[tr], y[tr], X[te], y[te]
    if name == "skin":              # B G R label, tab-separated
        a = pd.read_csv(paths[0], sep="\t", header=None).to_numpy(np.float64)
        return a[:, :-1], a[:, -1]
    a = pd.read_csv(paths[0], sep="\t").to_numpy(np.float64)    # PMLB: header, target last
    return a[:, :-1], a[:, -1]


# ---------------------------------------------------------------------------
# cache
# ---------------------------------------------------------------------------

def _cache_paths(name, raw=None):
    stem = os.path.join(cache_dir(), cache_key(name, raw))
    return stem + ".npz", stem + ".Xtr.npz", stem + ".Xte.npz"


def _atomic(path, write):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def _save(name, raw, Xtr, ytr, Xte, yte):
    main, ptr, pte = _cache_paths(name, raw)
    os.makedirs(os.path.dirname(main), exist_ok=True)
    if sp.issparse(Xtr):
        _atomic(ptr, lambda f: sp.save_npz(f, Xtr.tocsr(), compressed=False))
        _atomic(pte, lambda f: sp.save_npz(f, Xte.tocsr(), compressed=False))
        arrays = {}
    else:
        arrays = {"Xtr": Xtr, "Xte": Xte}
    _atomic(main, lambda f: np.savez(f, ytr=ytr, yte=yte, **arrays))   # written last


def _load_cached(name, raw, parts):
    main, ptr, pte = _cache_paths(name, raw)
    if not os.path.exists(main):
        return None
    with np.load(main) as z:
        out = []
        for part in parts:
            if part in z.files:
                out.append(z[part])
            else:   # a sparse X, saved apart
                out.append(sp.load_npz(ptr if part == "Xtr" else pte).tocsr())
    return out


def load(name, raw_dir=None, parts=("Xtr", "ytr", "Xte", "yte"), raw_targets=False):
    """Prepared ``(Xtr, ytr, Xte, yte)`` of a benchmark dataset (from the cache
    when present). ``parts`` selects and orders what is returned, e.g.
    ``parts=("Xte", "yte", "ytr")`` reads no training rows from the cache.
    ``raw_targets``: a regression set's y in its file's units (the prepared,
    standardised y un-standardised by :func:`target_moments`; X as prepared)."""
    out = _load(name, raw_dir, parts)
    if raw_targets:
        mean, sd = target_moments(name, raw_dir)
        out = tuple(mean + sd * v if p in ("ytr", "yte") else v for p, v in zip(parts, out))
    return out


def _load(name, raw_dir, parts):
    out = _load_cached(name, raw_dir, parts)
    if out is None:
        Xtr, ytr, Xte, yte = _prepare(name, raw_paths(name, raw_dir))
        ytr, yte = np.asarray(ytr, np.float64), np.asarray(yte, np.float64)
        if not sp.issparse(Xtr):
            Xtr, Xte = np.ascontiguousarray(Xtr, np.float32), np.ascontiguousarray(Xte, np.float32)
        else:
            Xtr, Xte = Xtr.astype(np.float32).tocsr(), Xte.astype(np.float32).tocsr()
        _save(name, raw_dir, Xtr, ytr, Xte, yte)
        d = {"Xtr": Xtr, "ytr": ytr, "Xte": Xte, "yte": yte}
        out = [d[p] for p in parts]
    return tuple(out)


def load_parts(name, raw_dir=None, parts=("Xtr", "ytr", "Xte", "yte"), quick=None,
               raw_targets=False):
    """``load`` as a dict {part: array}. ``quick``: None, or (max_train,
    max_test): only those rows of each split (``quick_rows``)."""
    got = dict(zip(parts, load(name, raw_dir, parts=parts, raw_targets=raw_targets)))
    return quick_rows(got, *quick) if quick else got


def quick_rows(got, max_train, max_test):
    """The ``subsample_index`` rows (seed 0) of a dict of parts ("...tr"
    training, "...te" test; it must hold "ytr" and "yte")."""
    tr, te = subsample_index(len(got["ytr"]), len(got["yte"]), max_train, max_test)
    return {k: v[tr if k.endswith("tr") else te] for k, v in got.items()}


def subsample_index(n_train, n_test, max_train=3000, max_test=1000, seed=0):
    """Sorted row indices of a random subsample (``--quick``): ``max_train``
    training and ``max_test`` test rows, one ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    tr = np.sort(rng.choice(n_train, size=min(n_train, max_train), replace=False))
    te = np.sort(rng.choice(n_test, size=min(n_test, max_test), replace=False))
    return tr, te


def protocol_gamma(Xtr, n_sample=5000, seed=0):
    """1 / beta, beta the mean squared distance between two distinct training
    rows, on ``n_sample`` rows drawn without replacement by ``default_rng(seed)``.

    Uses mean_{i != j} ||x_i - x_j||^2 = 2 m / (m - 1) (mean_i ||x_i||^2 - ||mean x||^2),
    in float64; dense or CSR.
    """
    n = Xtr.shape[0]
    idx = np.random.default_rng(seed).choice(n, size=min(n, n_sample), replace=False)
    S = Xtr[idx]
    m = S.shape[0]
    if sp.issparse(S):
        S = S.astype(np.float64)
        sq = np.asarray(S.multiply(S).sum(axis=1)).ravel()
        mu = np.asarray(S.mean(axis=0)).ravel()
    else:
        S = np.asarray(S, np.float64)
        sq = np.einsum("ij,ij->i", S, S)
        mu = S.mean(axis=0)
    beta = 2.0 * m / (m - 1) * (sq.mean() - mu @ mu)
    return 1.0 / beta


def label_counts(y):
    """{label ("%g"): rows}."""
    return {f"{k:g}": int(c) for k, c in zip(*np.unique(y, return_counts=True))}


def warmup_rows(X, y, m=200):
    """Up to ``m`` rows of the two most frequent classes, in order: a tiny
    problem of the same data (a benchmark child fits it first, so numba's
    compile / cache load is not timed)."""
    cls, cnt = np.unique(y, return_counts=True)
    idx = np.sort(np.concatenate([np.flatnonzero(y == c)[:m // 2]
                                  for c in cls[np.argsort(-cnt)[:2]]]))
    return X[idx], y[idx]


def summary(Xtr, ytr, Xte, yte):
    """Shapes, label counts and ``protocol_gamma`` of a classification split."""
    return {"n_train": Xtr.shape[0], "n_test": Xte.shape[0], "d": Xtr.shape[1],
            "sparse": sp.issparse(Xtr), "gamma": protocol_gamma(Xtr),
            "train_labels": label_counts(ytr), "test_labels": label_counts(yte)}


def describe(name, raw_dir=None):
    """Shapes and label counts of a prepared dataset (a small dict)."""
    Xtr, ytr, Xte, yte = load(name, raw_dir)
    return {"name": name, "n_train": Xtr.shape[0], "n_test": Xte.shape[0], "d": Xtr.shape[1],
            "sparse": sp.issparse(Xtr), "train_labels": label_counts(ytr),
            "test_labels": label_counts(yte)}
