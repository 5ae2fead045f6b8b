"""svm-train's habits in ``streamcvm train``: ``-wLABEL WEIGHT`` written as
svm-train writes it, ``-t 0..3`` for the kernels by number, a bare
``--scale`` before the store, and ``-v K`` (k-fold cross-validation, its
figures printed as svm-train prints them)."""
import re
import sys

SCALE_KINDS = ("standard", "range")
# svm-train's -t numbers; 3 (sigmoid) has no kernel here
KERNEL_NUMBERS = {"0": "linear", "1": "poly", "2": "rbf", "3": None}
_WEIGHT = re.compile(r"^-w(-?[^\s-][^\s]*)$")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def rewrite_argv(argv):
    """``argv`` with svm-train's spellings of ``streamcvm train`` made
    argparse's: ``-w1 5`` / ``-w-1 2`` (svm-train's -wLABEL WEIGHT) become
    ``-w1:5`` / ``-w-1:2`` (-w with the value LABEL:WEIGHT), and a ``--scale`` followed by something other
    than a scaling kind (the store, say) becomes ``--scale=standard``. Other
    commands' arguments are left as they are."""
    argv = list(argv)
    if not argv or argv[0] != "train":
        return argv
    out, i = [argv[0]], 1
    while i < len(argv):
        tok = argv[i]
        m = _WEIGHT.match(tok)
        if m and i + 1 < len(argv) and _NUMBER.match(argv[i + 1]):
            out.append(f"-w{m.group(1)}:{argv[i + 1]}")     # one token: "-w-1:2" too
            i += 2
            continue
        if tok == "--scale" and (i + 1 == len(argv) or argv[i + 1] not in SCALE_KINDS):
            out.append("--scale=standard")
        elif tok == "--":
            out += argv[i:]
            break
        else:
            out.append(tok)
        i += 1
    return out


def kernel_name(text):
    """--kernel / -t: a name, or svm-train's number (0 linear, 1 poly, 2 rbf;
    3, sigmoid, refused in one line)."""
    if text not in KERNEL_NUMBERS:
        return text
    name = KERNEL_NUMBERS[text]
    if name is None:
        raise SystemExit("streamcvm train: error: -t 3 (sigmoid) is not a kernel of "
                         "streamcvm: its CVM needs a kernel of a feature space (sigmoid is "
                         "not positive semi-definite); choose rbf (-t 2, the default), "
                         "linear (-t 0), poly (-t 1), laplacian, exponential or npoly")
    return name


def class_weights(text, weights, parse):
    """--class-weight (``text``, read by ``parse``) and svm-train's -w
    LABEL:WEIGHT entries (``weights``), as one class_weight; -w wins for a
    label both name. 'balanced' with -w is refused."""
    cw = parse(text)
    if not weights:
        return cw
    if cw == "balanced":
        raise SystemExit("streamcvm train: error: --class-weight balanced sets every class's "
                         "weight; drop it or the -w options")
    out = dict(cw or {})
    out.update(parse(",".join(weights)))
    return out


def cross_validate(store, make, task, k, seed, quiet, max_rows):
    """svm-train -v K: the K-fold cross-validation of the estimator ``make()``
    gives, over the store's rows in memory (stratified folds for
    classification; at most ``max_rows``, the option ``cv_max_rows``);
    prints svm-train's lines. Returns the exit status."""
    import numpy as np
    import scipy.sparse as sp
    from sklearn.model_selection import KFold, StratifiedKFold

    from ..data.store import as_store
    if store.n > max_rows:
        raise SystemExit(f"streamcvm train: error: -v reads every row into memory: the store "
                         f"has {store.n:,} rows, more than {max_rows:,} (--option "
                         f"cv_max_rows); hold out a test store instead (train, then evaluate)")
    if not 2 <= k <= store.n:
        raise SystemExit(f"streamcvm train: error: -v needs 2 to {store.n:,} folds (the "
                         f"rows), got {k}")
    chunks = [store.chunk(i) for i in range(store.n_chunks)]
    X = sp.vstack([c.X for c in chunks], format="csr") if store.sparse else \
        np.concatenate([c.X for c in chunks])
    y = np.concatenate([c.y for c in chunks])
    w = np.concatenate([c.weight for c in chunks]) if store.has_weight else None
    classify = task == "classification"
    folds = KFold(k, shuffle=True, random_state=seed)
    if classify and np.unique(y, return_counts=True)[1].min() >= k:
        folds = StratifiedKFold(k, shuffle=True, random_state=seed)
    pred = np.empty(len(y))
    for f, (tr, te) in enumerate(folds.split(np.zeros(len(y)), y)):
        est = make()
        try:
            est.fit(as_store(X[tr], y[tr], weight=None if w is None else w[tr]))
        except ValueError as e:
            raise SystemExit(f"streamcvm train: error: fold {f + 1}: {e}") from None
        pred[te] = est.predict(X[te])
        if not quiet:
            what = f"accuracy {100 * np.mean(pred[te] == y[te]):.4g}%" if classify else \
                f"mean squared error {np.mean((pred[te] - y[te]) ** 2):.6g}"
            print(f"fold {f + 1}/{k}: trained on {len(tr):,} rows, {what} on {len(te):,}",
                  file=sys.stderr, flush=True)
    if classify:
        print(f"Cross Validation Accuracy = {100 * np.mean(pred == y):g}%")
        return 0
    n = len(y)
    sv, sy, svv, syy, svy = pred.sum(), y.sum(), pred @ pred, y @ y, pred @ y
    den = (n * svv - sv * sv) * (n * syy - sy * sy)
    r2 = (n * svy - sv * sy) ** 2 / den if den > 0 else float("nan")
    print(f"Cross Validation Mean squared error = {np.mean((pred - y) ** 2):g}")
    print(f"Cross Validation Squared correlation coefficient = {r2:g}")
    return 0
