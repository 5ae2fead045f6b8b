"""Synthetic data, generated chunk by chunk with memory bounded by the chunk.

Every generator yields ``(X, y)`` blocks; block ``i`` depends only on
``(seed, i)``, so a block can be regenerated alone and blocks can be made in
parallel. Writers turn the blocks into a store (:func:`write_store`) or into
svmlight / CSV text files (:func:`write_text`, for ingest benchmarks and the
demo).

- ``gaussian``: a mixture of Gaussian blobs per class (classification).
- ``friedman1``: Friedman #1 regression, ``y = 10 sin(pi x1 x2) +
  20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + N(0, 1)`` with ``x ~ U(0, 1)^d``.
- ``text``: sparse bag-of-words rows (Zipf word frequencies, log tf-idf,
  unit length), labelled by a sparse linear rule plus noise.
- ``boundary``: clean low-dimensional classification, ``x ~ U(-1, 1)^d``
  labelled by the sign of a smooth function (no Bayes error): with ``flip``,
  the label-noise benchmark's data.

``flip`` (any two-class kind): each label is flipped with this probability,
from a random stream of its own, so the same seed gives the same rows with
and without the flips.
"""
import gzip
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

KINDS = ("gaussian", "friedman1", "text", "boundary")
DEFAULT_D = {"gaussian": 22, "friedman1": 10, "text": 20000, "boundary": 4}


def _rng(seed, i):
    return np.random.default_rng([int(seed), int(i)])


def _gaussian_centers(d, n_classes, blobs, seed):
    r = np.random.default_rng([int(seed), 2**31 - 1])
    return r.standard_normal((n_classes, blobs, d)) * (1.5 / np.sqrt(max(d, 1)))


def gaussian_block(i, rows, d=22, n_classes=2, blobs=4, seed=0, noise=2.0):
    """Block ``i``: each class a mixture of ``blobs`` Gaussians in ``d`` dims.

    Centers ~ N(0, 1.5^2 / d) per coordinate, noise ~ N(0, noise^2 / d): with
    the default noise=2 the classes overlap (an RBF SVM reaches about 96%)."""
    centers = _gaussian_centers(d, n_classes, blobs, seed)
    r = _rng(seed, i)
    cls = r.integers(0, n_classes, rows)
    blob = r.integers(0, blobs, rows)
    X = r.standard_normal((rows, d), dtype=np.float32)
    X *= np.float32(noise / np.sqrt(d))
    X += centers[cls, blob].astype(np.float32)
    y = (2.0 * cls - 1.0) if n_classes == 2 else cls.astype(np.float64)
    return X, y


def friedman1_block(i, rows, d=10, seed=0, noise=1.0):
    """Block ``i`` of Friedman #1 (needs ``d >= 5``; extra features are noise)."""
    if d < 5:
        raise ValueError("friedman1 needs at least 5 features")
    r = _rng(seed, i)
    X = r.random((rows, d), dtype=np.float32)
    x = X.astype(np.float64)
    y = (10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2
         + 10 * x[:, 3] + 5 * x[:, 4] + noise * r.standard_normal(rows))
    return X, y


def boundary_block(i, rows, d=4, seed=0):
    """Block ``i`` of ``x ~ U(-1, 1)^d`` labelled ``sign(g(x))`` with
    ``g = sin(3 x1) cos(2 x2) + 0.6 x3 - 0.5 x4^2 + 0.2`` (needs ``d >= 4``;
    extra features are noise): a curved boundary with no label noise, which
    an RBF machine learns to well under 1% error from 1M rows."""
    if d < 4:
        raise ValueError("boundary needs at least 4 features")
    r = _rng(seed, i)
    X = (2.0 * r.random((rows, d), dtype=np.float32) - 1.0).astype(np.float32)
    x = X.astype(np.float64)
    g = np.sin(3 * x[:, 0]) * np.cos(2 * x[:, 1]) + 0.6 * x[:, 2] - 0.5 * x[:, 3] ** 2 + 0.2
    return X, np.where(g > 0, 1.0, -1.0)


def flip_labels(y, i, seed, flip):
    """``y`` (+-1) with each label flipped with probability ``flip``, by a
    stream of (seed, block ``i``) apart from the rows'."""
    if not 0.0 <= flip < 0.5:
        raise ValueError(f"flip must be in [0, 0.5), got {flip}")
    if flip == 0:
        return y
    u = np.random.default_rng([int(seed), int(i), 0x5EED]).random(len(y))
    return np.where(u < flip, -y, y)


def text_block(i, rows, d=20000, words_per_row=60, seed=0, zipf_s=1.1):
    """Block ``i`` of sparse text-like rows as a CSR triple ``(indptr, indices, data)``."""
    import scipy.sparse as sp
    rank = np.arange(1, d + 1, dtype=np.float64)
    p = rank ** -zipf_s
    cdf = np.cumsum(p / p.sum())
    idf = np.log1p(rank).astype(np.float32)
    wr = np.random.default_rng([int(seed), 2**31 - 2])
    w = np.zeros(d)
    top = wr.choice(min(d, 2000), size=min(d, 200), replace=False)
    w[top] = wr.standard_normal(len(top))
    r = _rng(seed, i)
    lens = r.poisson(words_per_row, rows) + 1
    T = int(lens.sum())
    words = np.minimum(np.searchsorted(cdf, r.random(T)), d - 1)
    row_of = np.repeat(np.arange(rows, dtype=np.int64), lens)
    keys, counts = np.unique(row_of * d + words, return_counts=True)
    rr = keys // d
    cols = (keys % d).astype(np.int32)
    vals = (np.log1p(counts).astype(np.float32) * idf[cols])
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(np.bincount(rr, minlength=rows), out=indptr[1:])
    X = sp.csr_matrix((vals, cols, indptr), shape=(rows, d))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags((1.0 / np.maximum(norms, 1e-12)).astype(np.float32)) @ X
    X = X.tocsr()
    X.sort_indices()
    score = X @ w
    score = score - np.median(score) + 0.1 * r.standard_normal(rows)
    y = np.where(score > 0, 1.0, -1.0)
    return (X.indptr.astype(np.int64), X.indices.astype(np.int32),
            X.data.astype(np.float32)), y


def blocks(kind, n, block_rows=65536, d=None, seed=0, n_jobs=None, first_block=0, flip=0.0,
           **kw):
    """Yield ``(X, y)`` blocks of ``kind`` covering ``n`` rows, in order.
    ``first_block``: start at that block index (same distribution, other
    rows: e.g. a held-out test set far past the training blocks). ``flip``:
    the share of labels flipped (two-class kinds; :func:`flip_labels`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    if flip and (kind == "friedman1" or (kind == "gaussian" and kw.get("n_classes", 2) != 2)):
        raise ValueError(f"flip needs two-class labels; {kind!r} here has none")
    d = DEFAULT_D[kind] if d is None else int(d)
    fn = {"gaussian": gaussian_block, "friedman1": friedman1_block, "text": text_block,
          "boundary": boundary_block}[kind]
    nb = -(-int(n) // block_rows)

    def make(i):
        rows = min(block_rows, n - i * block_rows)
        X, y = fn(first_block + i, rows, d=d, seed=seed, **kw)
        return X, flip_labels(y, first_block + i, seed, flip)

    n_jobs = n_jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=n_jobs) as ex:
        # a sliding window keeps at most 2 * n_jobs blocks in memory
        window = []
        for i in range(nb):
            window.append(ex.submit(make, i))
            if len(window) > 2 * n_jobs:
                yield window.pop(0).result()
        for f in window:
            yield f.result()


def write_store(path, kind, n, *, d=None, seed=0, chunk_rows=None, fmt=None,
                overwrite=False, progress=False, checksums=True, **kw):
    """Generate ``n`` rows of ``kind`` straight into a store; returns the path.
    ``fmt``: "zarr" or "hdf5" (default: hdf5 for a .h5 / .hdf5 name, as ingest);
    ``checksums=False`` writes a store as versions before checksums did
    (benchmarks against them)."""
    from ..writer import StoreWriter
    if fmt is None:
        fmt = "hdf5" if os.fspath(path).lower().endswith((".h5", ".hdf5")) else "zarr"
    d = DEFAULT_D[kind] if d is None else int(d)
    sparse = kind == "text"
    nnz_row = kw.get("words_per_row", 60) * 0.9 if sparse else None
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=n, unit="rows", unit_scale=True, desc=f"generate {kind}")
    with StoreWriter(path, d, sparse=sparse, chunk_rows=chunk_rows, fmt=fmt,
                     overwrite=overwrite, nnz_per_row=nnz_row, checksums=checksums) as w:
        for X, y in blocks(kind, n, d=d, seed=seed, **kw):
            w.append(X, y)
            if bar is not None:
                bar.update(len(y))
        gen = {"kind": kind, "n": int(n), "d": d, "seed": int(seed)}
        if kw.get("flip"):
            gen["flip"] = float(kw["flip"])
        if kw.get("n_classes", 2) != 2:
            gen["n_classes"] = int(kw["n_classes"])
        if kw.get("noise") is not None:
            gen["noise"] = float(kw["noise"])
        out = w.close({"generator": gen})
    if bar is not None:
        bar.close()
    return out


def write_text(path, kind, n, *, text_format="svmlight", d=None, seed=0, decimals=6,
               delimiter=",", compress=None, progress=False, **kw):
    """Generate ``n`` rows of ``kind`` as an svmlight or CSV text file.

    ``compress``: None, "gzip" or "bz2" (or inferred from a .gz / .bz2 name).
    Dense rows written as svmlight keep their nonzero values only; CSV rows
    put the label first. Written atomically (:func:`streamcvm.data.atomic.atomic_file`).
    """
    from ._textfmt import format_csv, format_svmlight
    from ..atomic import atomic_file
    if text_format not in ("svmlight", "csv"):
        raise ValueError(f"unknown text format {text_format!r}")
    d = DEFAULT_D[kind] if d is None else int(d)
    path = os.fspath(path)
    if compress is None:
        compress = "gzip" if path.endswith(".gz") else "bz2" if path.endswith(".bz2") else None
    if compress == "gzip":
        opener, okw = gzip.open, {"compresslevel": 1}
    elif compress == "bz2":
        import bz2
        opener, okw = bz2.open, {"compresslevel": 1}
    else:
        opener, okw = open, {"buffering": 1 << 20}
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=n, unit="rows", unit_scale=True, desc=f"write {os.path.basename(path)}")
    try:
        with atomic_file(path, "wb", opener, **okw) as f:
            for X, y in blocks(kind, n, d=d, seed=seed, **kw):
                if text_format == "svmlight":
                    if isinstance(X, tuple):
                        ip, ind, dat = X
                    else:
                        import scipy.sparse as sp
                        C = sp.csr_matrix(X)
                        ip, ind, dat = C.indptr.astype(np.int64), C.indices, C.data
                    buf = format_svmlight(y, ip, ind, dat, decimals, True)
                else:
                    if isinstance(X, tuple):
                        raise ValueError("sparse data cannot be written as CSV")
                    buf = format_csv(y, X, decimals, ord(delimiter))
                f.write(buf.data)
                if bar is not None:
                    bar.update(len(y))
    finally:
        if bar is not None:
            bar.close()
    return path
