"""The ``streamcvm`` command line: ingest (text files into a store), info
(a store, a model or a checkpoint folder), train, predict, features (MMDA),
evaluate, demo.

Heavy modules (numba, zarr, dask) are imported inside the commands, so
``streamcvm --help`` answers at once. User mistakes end with one line on
stderr and a non-zero exit status, never a traceback.
"""
import argparse
import math
import os
import sys


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def _add_ingest(sub):
    p = sub.add_parser(
        "ingest", help="ingest svmlight/LIBSVM or CSV/TSV files into a store",
        description="Ingest svmlight/LIBSVM (with qid) or CSV/TSV files, plain, .gz or "
                    ".bz2, into one chunked store. Memory is bounded by the block and "
                    "chunk sizes, not the input. The store is built under a temporary "
                    "name and renamed at the end: an interrupted ingest leaves no store.")
    p.add_argument("sources", nargs="+", metavar="SRC", help="input files, appended in order")
    p.add_argument("-o", "--output", required=True, metavar="STORE",
                   help="store to create (a .zarr directory, or an .h5 file with --format hdf5)")
    p.add_argument("--format", dest="store_format", choices=["zarr", "hdf5"], default=None,
                   help="store format (default: hdf5 for .h5/.hdf5 names, else zarr)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--sparse", dest="sparse", action="store_const", const=True,
                   help="store X as CSR")
    g.add_argument("--dense", dest="sparse", action="store_const", const=False,
                   help="store X dense")
    g.add_argument("--auto", dest="sparse", action="store_const", const="auto",
                   help="dense for CSV; for svmlight, dense if the first block is at least "
                        "25%% nonzero (default)")
    p.set_defaults(sparse="auto")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--one-based", dest="zero_based", action="store_false",
                   help="svmlight feature indices start at 1 (default, as LIBSVM)")
    g.add_argument("--zero-based", dest="zero_based", action="store_true",
                   help="svmlight feature indices start at 0")
    p.set_defaults(zero_based=False)
    p.add_argument("--n-features", type=_positive_int, default=None, metavar="D",
                   help="number of features; a larger svmlight index is an error")
    p.add_argument("--chunk-rows", type=_positive_int, default=None, metavar="N",
                   help="rows per chunk (default: about 4 MB of X per chunk)")
    p.add_argument("--input-format", choices=["auto", "svmlight", "csv"], default="auto",
                   help="input format (default: detected from the first lines)")
    p.add_argument("--delimiter", default=None, metavar="C",
                   help="CSV delimiter: ',', 'tab', ';', 'space' (runs of blanks); "
                        "default: detected")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--header", dest="header", action="store_const", const=True,
                   help="the first CSV line is a header")
    g.add_argument("--no-header", dest="header", action="store_const", const=False,
                   help="the first CSV line is data")
    p.set_defaults(header="auto")
    p.add_argument("--label-col", default="auto", metavar="COL",
                   help="CSV label column: index (negative counts from the end), header "
                        "name, 'none', or 'auto' (default: the column a header names "
                        "label, class, target or y, else column 0)")
    p.add_argument("--qid-col", default=None, metavar="COL", help="CSV query-id column")
    p.add_argument("--weight-col", default=None, metavar="COL", help="CSV sample-weight column")
    p.add_argument("--skip-cols", default=None, metavar="COLS",
                   help="comma-separated CSV columns to ignore")
    p.add_argument("--allow-nan", action="store_true",
                   help="accept NaN/inf values and empty CSV fields (as NaN) into the store; "
                        "train and predict refuse a store while it holds any")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("-j", "--jobs", type=_positive_int, default=None, metavar="N",
                   help="parser threads (default: all cores)")
    p.add_argument("--clevel", type=int, default=1, metavar="L",
                   help="Zstd compression level (default: 1)")
    _add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=cmd_ingest)


def _col(v):
    if v is None:
        return None
    if isinstance(v, str) and v.lower() == "none":
        return None
    try:
        return int(v)
    except ValueError:
        return v


def cmd_ingest(args):
    from .ingest import ingest
    fmt = args.store_format
    if fmt is None:
        fmt = "hdf5" if args.output.lower().endswith((".h5", ".hdf5")) else "zarr"
    import warnings
    from .ingest.pipeline import IngestWarning, describe_label
    skip = [_col(c) for c in args.skip_cols.split(",")] if args.skip_cols else None
    with _runner(args, args.quiet) as runner, \
            warnings.catch_warnings(record=True, action="always",
                                    category=IngestWarning) as caught:
        res = ingest(args.sources, args.output, store_format=fmt, sparse=args.sparse,
                     zero_based=args.zero_based, n_features=args.n_features,
                     chunk_rows=args.chunk_rows, input_format=args.input_format,
                     delimiter=args.delimiter, header=args.header,
                     label_col=_col(args.label_col), qid_col=_col(args.qid_col),
                     weight_col=_col(args.weight_col), skip_cols=skip,
                     allow_nan=args.allow_nan, overwrite=args.overwrite,
                     progress=not args.quiet and sys.stderr.isatty(),
                     n_jobs=args.jobs if runner.client is None else 2 * runner.n_workers(),
                     clevel=args.clevel, executor=runner.client)
    for w in caught:        # doubtful guesses: one line each, quiet or not
        if issubclass(w.category, IngestWarning):
            print(f"streamcvm ingest: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    if not args.quiet:
        kind = "sparse" if res["sparse"] else "dense"
        print(f"wrote {res['path']}: {res['n']:,} rows x {res['d']:,} features ({kind}) "
              f"in {res['seconds']:.1f} s ({res['n'] / max(res['seconds'], 1e-9):,.0f} rows/s)")
        lab = res["label"]
        head = "" if lab["header"] is None else \
            f"; header: {'found, not read as data' if lab['header'] else 'none (the first line is data)'}"
        print(f"label: {describe_label(lab)}{head}")
    return 0


def _add_info(sub):
    p = sub.add_parser("info", help="describe a store, a model or a checkpoint folder",
                       description="Rows, features, density, classes or target range, "
                                   "chunking and sizes of a store; a model's estimator, "
                                   "kernel, parameters, classes, machines, core sets, eps "
                                   "reached and training; or, for a folder of training "
                                   "checkpoints, the progress each one records.")
    p.add_argument("path", metavar="STORE|MODEL|CHECKPOINT_DIR")
    p.set_defaults(func=cmd_info)


def _human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{nbytes} B"
        nbytes /= 1024.0


def describe_store(path):
    """The text ``streamcvm info`` prints for a store."""
    from .store import open_store
    s = open_store(path)
    stored, raw = s.sizes()
    cells = s.n * s.d
    nnz = s.nnz
    lines = [
        f"store      {s.path} ({s.backend}, format v{s.attrs['streamcvm_format']})",
        f"rows       {s.n:,}",
        f"features   {s.d:,}",
        f"layout     {'sparse (CSR)' if s.sparse else 'dense'}, "
        f"density {nnz / cells if cells else 0:.4f} ({nnz:,} nonzeros)",
        f"chunks     {s.n_chunks:,} x {s.chunk_rows:,} rows",
        f"size       {_human(stored)} on disk, {_human(raw)} raw "
        f"({raw / max(stored, 1):.2f}x compression)",
    ]
    if s.checksums:
        lines.append(f"integrity  {s.checksums} checksum on every chunk, missing chunks "
                     f"refused{', attributes checksummed' if s.attrs_checked else ''}")
    else:
        lines.append("integrity  none: written before stores carried checksums, so damaged "
                     "or missing chunks are not detected (re-ingest to add them)")
    if s.allow_nan:
        lines.append("values     ingested with --allow-nan: NaN / inf cells are refused "
                     "when read for training or prediction")
    extras = [n for n, f in (("qid", s.has_qid), ("weight", s.has_weight)) if f]
    if extras:
        lines.append(f"columns    {', '.join(extras)}")
    if s.has_qid:
        q = s.rows(0, s.n).qid if s.n <= 10_000_000 else None
        if q is not None:
            lines.append(f"queries    {len(set(q.tolist())):,}")
    if s.classes is not None:
        totals = s.attrs.get("class_totals") or []
        names = s.label_names
        parts = []
        for k, (c, t) in enumerate(zip(s.classes, totals)):
            lab = names[int(c)] if names and 0 <= int(c) < len(names) else f"{c:g}"
            parts.append(f"{lab}: {t:,}")
        shown = parts if len(parts) <= 30 else parts[:30] + [f"... ({len(parts) - 30} more)"]
        lines.append(f"classes    {len(parts)}  (" + ", ".join(shown) + ")")
    elif s.attrs.get("y_min") is not None:
        lines.append(f"target     [{s.attrs['y_min']:g}, {s.attrs['y_max']:g}]")
    for src in s.attrs.get("sources") or []:
        lines.append(f"source     {src['path']} ({src['format']}"
                     f"{', ' + src['compression'] if src.get('compression') else ''}, "
                     f"{src['rows']:,} rows, xxh3 {src['xxh3_128'][:16]})")
    if s.attrs.get("generator"):
        g = s.attrs["generator"]
        lines.append(f"generator  {g['kind']} (n={g['n']:,}, d={g['d']}, seed={g['seed']})")
    lines.append(f"fingerprint {s.fingerprint[:32]}")
    s.close()
    return "\n".join(lines)


def describe_model(path):
    """The text ``streamcvm info`` prints for a model folder: its manifest,
    after the whole model is checked (model.json's own checksum and fields,
    every array file's checksum; :func:`streamcvm.model.verify_model`)."""
    from .model import verify_model
    man = verify_model(path)
    k = man["kernel"]
    kern = f"{k['name']} (gamma {k['gamma']:.6g}" + \
        (f", coef0 {k['coef0']:g}, degree {k['degree']}" if k["name"] in ("poly", "npoly")
         else "") + ")"
    params = ", ".join(f"{n}={v!r}" for n, v in sorted(man["params"].items())
                       if n not in ("verbose",))
    lines = [f"model      {os.path.abspath(path)} (format v{man['streamcvm_model_format']}, "
             f"{man.get('created_by', '?')})",
             f"estimator  {man['estimator']}",
             f"kernel     {kern}",
             f"params     {params}",
             f"features   {man['n_features_in']:,}"]
    for name in ("C_", "mu_"):
        if man.get(name) is not None:
            lines.append(f"{name:<10} {man[name]:.6g}")
    cl = man.get("classes")
    if cl is not None:
        shown = ", ".join(str(c) for c in cl[:30]) + (f", ... ({len(cl) - 30} more)"
                                                       if len(cl) > 30 else "")
        lines.append(f"classes    {len(cl)}  ({shown})")
    ms = man["machines"]
    core = [m["core_size"] for m in ms]
    nsv = [m["shape"][0] for m in ms]
    reached = [m.get("eps_reached") for m in ms]
    sets = f"core set {core[0]:,}" if len(ms) == 1 else \
        f"core sets {min(core):,}-{max(core):,} ({sum(core):,} in all)"
    if man["estimator"] == "MMDATransformer":     # a machine per feature
        lines.append(f"output     {len(ms):,} features ({man['params']['n_components']} per "
                     f"class, one-vs-rest beyond two classes): {min(core):,}-{max(core):,} "
                     f"support rows per feature ({sum(core):,} in all)")
    else:
        lines.append(f"machines   {len(ms):,}: {sum(nsv):,} support vectors, {sets}, "
                     f"{sum(m['n_iter'] for m in ms):,} iterations")
    if all(r is not None for r in reached) and reached:
        lines.append(f"eps        reached {min(reached):.3g}" +
                     (f"-{max(reached):.3g}" if max(reached) != min(reached) else "") +
                     f" (asked: {man['params'].get('eps')!r})")
    stages = [m.get("stage_rows") for m in ms if m.get("stage_rows")]
    if stages:
        lines.append(f"sample     progressive: the last stage trained on "
                     f"{min(stages):,}-{max(stages):,} sampled rows per machine")
    comp = [m.get("compact") for m in ms if isinstance(m.get("compact"), dict)]
    kept = [c for c in comp if c.get("intercept") is not None]
    if kept and all(c.get("shared") for c in kept):
        c = kept[0]
        feats = man["estimator"] == "MMDATransformer"
        what = "features are computed" if feats else "machines predict"
        lines.append(f"compact    the {len(ms)} {what} with one basis of B = {c['B']:,} points "
                     f"instead of "
                     f"{c['support_vectors']:,} support rows "
                     f"('{'features' if feats else 'predict'} --exact': the full expansion)")
    elif kept:
        bs = ", ".join(format(c["B"], ",") for c in kept)
        svs = ", ".join(format(c["support_vectors"], ",") for c in kept)
        lines.append(f"compact    {len(kept)} of {len(ms)} machine(s) predict with B = "
                     f"{bs} basis points instead of {svs} support vectors "
                     f"('predict --exact': the full expansion)")
    elif comp:
        lines.append("compact    none: every machine predicts with its full expansion")
    for c in comp[:1] if len({c.get("decision") for c in comp}) == 1 else comp:
        rows = (f"{c['validation_rows']:,} validation rows" if "validation_rows" in c
                else f"{c['check_rows']:,} training rows checked: {c['rule']}"
                if "check_rows" in c else None)
        lines.append(f"           {c.get('decision', '')}" + (f" ({rows})" if rows else ""))
    if ms[0].get("epsilon_bar") is not None and man["estimator"] == "CVMRegressor":
        lines.append(f"tube       half width {ms[0]['epsilon_bar']:.6g}")
    if man.get("scaler"):
        lines.append("scaling    " + ("standardised features ((x - mean) / sd)"
                                     if man["scaler"]["centred"] else "x / max |x| per feature"))
    t = man.get("training")
    if t:
        lines.append(f"training   {t['seconds']:.1f} s on {t['rows']:,} rows x "
                     f"{t['features']:,} features, finished {t.get('finished', '?')}")
        lines.append(f"data       {t.get('store') or '(arrays)'}, fingerprint "
                     f"{(t.get('store_fingerprint') or '?')[:32]}")
        r = t.get("resumed_from")
        if r:
            lines.append(f"resumed    from a snapshot: {r['machines_done']} machine(s) done"
                         + (f", {r['n_iter']:,} iterations into the next" if r.get("n_iter")
                            else ""))
    else:
        lines.append("training   not recorded (a model of an older streamcvm)")
    return "\n".join(lines)


def cmd_info(args):
    from . import checkpoint
    if checkpoint.is_checkpoint_dir(args.path):
        print("\n".join(checkpoint.info(args.path)))
        return 0
    if os.path.isfile(os.path.join(args.path, "model.json")):
        print(describe_model(args.path))
        return 0
    print(describe_store(args.path))
    return 0


def _add_train(sub):
    p = sub.add_parser("train", help="train a classifier, regressor or one-class model "
                                     "from a store",
                       description="Train a kernel L2-SVM or L2-SVR from a store by BVM, CVM "
                                   "or Frank-Wolfe; only the core set is held in memory.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("-o", "--output", required=True, metavar="MODEL", help="model folder to write")
    p.add_argument("--task", choices=["classification", "regression", "ranking", "one-class"],
                   default="classification",
                   help="what to train (default classification; ranking: pairs within the "
                        "store's qid groups)")
    p.add_argument("--method", choices=["bvm", "cvm", "fvm"], default=None,
                   help="bvm (default for classification), cvm (default for one-class, "
                        "regression and ranking), fvm; weights, regression, ranking and "
                        "linear/poly kernels need cvm or fvm")
    p.add_argument("-c", "--C", default=None,
                   help="regularisation (default 1; regression: 'auto' = 5 x rows)")
    p.add_argument("--mu", default=None,
                   help="regression: the mean slack outside the tube, in the target's units; "
                        "'auto' (default): chosen with gamma on held-out rows")
    p.add_argument("--class-weight", default=None, metavar="W",
                   help="'balanced' or LABEL:WEIGHT,... (C of a class's rows times WEIGHT; "
                        "write --class-weight=-1:2,1:1 when a label is negative)")
    p.add_argument("-t", "--kernel", default=None,
                   help="rbf (default), laplacian (L1), exponential (L2: exp(-gamma ||x - z||)), "
                        "npoly; linear, poly (cvm, fvm)")
    p.add_argument("-g", "--gamma", default=None,
                   help="kernel width: 'auto' (default: 1 / mean squared distance) or a number")
    p.add_argument("-e", "--eps", default=None,
                   help="ball tolerance: 'auto' (default; ranking: 1e-4) or a number")
    p.add_argument("-a", "--sample-size", type=_positive_int, default=None,
                   help="rows per violator search (default 59)")
    p.add_argument("-f", "--max-core", type=_positive_int, default=None,
                   help="cap on core vectors per machine (default: none; ranking 20,000; "
                        "regression 20,000 on every row, 11,000 per progressive stage)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-b", "--probability", type=int, choices=[0, 1], default=0,
                   help="classification: 1 also fits Platt's sigmoid on held-out rows (10%% "
                        "of the rows, at most 50,000, not trained on) for class probabilities "
                        "(predict -b 1), as LIBSVM's -b 1")
    p.add_argument("--scale", action="store_true",
                   help="standardise each feature from one pass over the store (sparse: "
                        "divide by its largest |x|), as svm-scale; saved with the model and "
                        "applied by predict and evaluate")
    p.add_argument("--full-pass", action="store_true",
                   help="finish with passes over every row until none violates")
    p.add_argument("--multi-class", choices=["ovo", "ovr"], default="ovo",
                   help="one-vs-one (default, as LIBSVM) or one-vs-rest")
    p.add_argument("--one-class", action="store_true", help="the same as --task one-class")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the run here (crash-safe; the last 2 are kept)")
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help="seconds between snapshots (default 60; also at each eps level "
                        "and after each machine)")
    p.add_argument("--checkpoint-iters", type=_positive_int, default=None, metavar="N",
                   help="also snapshot every N iterations")
    p.add_argument("--checkpoint-keep", type=_positive_int, default=2, metavar="K",
                   help="snapshots kept (default 2)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue from the newest snapshot in DIR (and keep writing there); "
                        "DIR must hold one, unless --checkpoint-dir names DIR too (then a "
                        "run with no snapshot yet starts fresh)")
    _add_checkpoint_replace(p)
    p.add_argument("--train-size", default="auto", metavar="N",
                   help="classification and regression: 'auto' (default: a machine of "
                        "more than 65,536 rows trains on random samples of 16,384, 32,768, "
                        "... rows while a held-out validation sample says the last doubling "
                        "helped; classification first tries every row while its core set "
                        "stays under 2,048 vectors; regression stops before a stage whose "
                        "core set would pass 11,000), 'all' rows, or at most N rows that way")
    p.add_argument("--no-compact", action="store_true",
                   help="classification and regression: no compact expansion (by default a "
                        "machine trained on sampled rows also gets one over at most 4,096 "
                        "basis points, kept if its validation errors are not significantly "
                        "worse; predict uses it, predict --exact the full one)")
    p.add_argument("--stop", choices=["slack", "validation"], default="slack",
                   help="what ends the eps annealing: the margin slack (default) or, with "
                        "held-out rows (--train-size), the validation error")
    p.add_argument("-j", "--jobs", type=int, default=-1, metavar="N",
                   help="threads of the exact BVM pass (default -1: every core; 1: one); "
                        "the model is the same")
    p.add_argument("--max-classes", type=_positive_int, default=100, metavar="K",
                   help="classification: refuse a target with more classes than this "
                        "(default 100; many classes usually mean a regression target)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at MODEL (an existing "
                        "model folder is replaced without it; the input never)")
    _add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_train)


def _num_or_auto(v, what, command="train"):
    """--C, --gamma, --eps, --mu: 'auto' or a positive finite number (eps:
    below 1); anything else, NaN and inf included, is refused in one line."""
    if v == "auto":
        return v
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or x <= 0 or (what == "eps" and x >= 1):
        rule = "in (0, 1)" if what == "eps" else "a positive finite number"
        raise SystemExit(f"streamcvm {command}: error: --{what} must be 'auto' or {rule}, "
                         f"got {v!r}")
    return x


# every numeric option that is not an integer: (attribute, option, rule)
_NUMBERS = (("C", "C", "auto"), ("gamma", "gamma", "auto"), ("eps", "eps", "auto"),
            ("mu", "mu", "auto"), ("checkpoint_every", "checkpoint-every", "seconds"))


def _check_numbers(args):
    """Refuse NaN, inf, negatives and non-numbers in the numeric options, in
    one line, before any work."""
    for attr, opt, rule in _NUMBERS:
        v = getattr(args, attr, None)
        if v is None:
            continue
        if rule == "auto":
            _num_or_auto(v, opt, args.command)
        elif not (math.isfinite(v) and v >= 0):
            raise SystemExit(f"streamcvm {args.command}: error: --{opt} must be a finite "
                             f"number of seconds (0 or more), got {v!r}")


def _check_urls(args):
    """``memory://`` lives in this command's own process: an output or a
    checkpoint folder there would be gone when the command exits."""
    for attr, opt in (("output", "-o"), ("save_model", "--save-model"), ("png", "--png"),
                      ("checkpoint_dir", "--checkpoint-dir"), ("resume", "--resume")):
        v = getattr(args, attr, None)
        if isinstance(v, str) and v.lower().startswith("memory://"):
            raise SystemExit(f"streamcvm {args.command}: error: {opt} {v}: memory:// lives "
                             f"inside this command's process and is gone when it exits; give "
                             f"a local path or a lasting URL")


def _train_size(text):
    if text in ("auto", "all"):
        return text
    try:
        return int(float(text))
    except ValueError:
        raise SystemExit(f"streamcvm train: error: --train-size must be 'auto', 'all' or a "
                         f"number of rows, got {text!r}") from None


def _class_weight(text):
    """--class-weight: 'balanced' or LABEL:WEIGHT,... (labels as numbers when
    they parse as numbers)."""
    if text is None or text == "balanced":
        return text
    out = {}
    for part in text.split(","):
        label, sep, w = part.rpartition(":")
        try:
            if not sep:
                raise ValueError
            weight = float(w)
        except ValueError:
            raise SystemExit(f"streamcvm train: error: --class-weight must be 'balanced' or "
                             f"LABEL:WEIGHT,..., got {part!r}") from None
        try:
            label = float(label)
            label = int(label) if label.is_integer() else label
        except ValueError:
            pass
        out[label] = weight
    return out


def cmd_train(args):
    import time

    task = "one-class" if args.one_class else args.task
    if task != "classification" and args.class_weight is not None:
        raise SystemExit("streamcvm train: error: --class-weight is for classification")
    if task != "classification" and args.probability:
        raise SystemExit("streamcvm train: error: -b 1 (probabilities) is for classification")
    if task != "regression" and args.mu is not None:
        raise SystemExit("streamcvm train: error: --mu is for regression")
    if task not in ("classification", "regression") and args.train_size != "auto":
        raise SystemExit("streamcvm train: error: --train-size is for classification and "
                         "regression")
    if task not in ("classification", "regression") and args.no_compact:
        raise SystemExit("streamcvm train: error: --no-compact is for classification and "
                         "regression")
    if task != "classification" and args.stop != "slack":
        raise SystemExit("streamcvm train: error: --stop is for classification")
    _check_train_paths(args)        # before the heavy imports, and before any work
    import numpy as np
    from . import checkpoint
    from .estimators import CVMClassifier, CVMOneClass, CVMRanker, CVMRegressor
    from .model import save_model
    from .store import open_store
    store = open_store(args.store)
    if task == "classification":
        _check_classes(store, args)
    C = None if args.C is None else _num_or_auto(args.C, "C")
    if C == "auto" and task != "regression":
        raise SystemExit("streamcvm train: error: --C auto is for regression")
    # the options given; the rest are the estimator's own defaults (one place)
    given = dict(method=args.method, C=C, kernel=args.kernel,
                 gamma=None if args.gamma is None else _num_or_auto(args.gamma, "gamma"),
                 eps=None if args.eps is None else _num_or_auto(args.eps, "eps"),
                 sample_size=args.sample_size, max_core=args.max_core)
    kw = {k: v for k, v in given.items() if v is not None}
    kw.update(scale=args.scale, full_pass=args.full_pass, random_state=args.seed,
              verbose=not args.quiet)
    if task == "one-class":
        est = CVMOneClass(**kw)
    elif task == "regression":
        if args.mu is not None:
            kw["mu"] = _num_or_auto(args.mu, "mu")
        est = CVMRegressor(train_size=_train_size(args.train_size),
                           compact=False if args.no_compact else "auto", **kw)
    elif task == "ranking":
        est = CVMRanker(**kw)
    else:
        est = CVMClassifier(multi_class=args.multi_class, probability=bool(args.probability),
                            class_weight=_class_weight(args.class_weight),
                            train_size=_train_size(args.train_size), stop=args.stop,
                            n_jobs=args.jobs, compact=False if args.no_compact else "auto",
                            **kw)
    resume = bool(args.resume)
    if resume and not checkpoint.is_checkpoint_dir(args.resume):   # --checkpoint-dir DIR too
        resume = False
        if not args.quiet:
            print(f"no snapshot in {args.resume} yet: starting a fresh run", file=sys.stderr)
    t = time.perf_counter()
    try:
        import warnings
        with _runner(args, args.quiet) as runner, warnings.catch_warnings():
            # --max-classes already judged the number of classes
            warnings.filterwarnings("ignore", message="streamcvm: the store's y has")
            est.fit(store, checkpoint_dir=args.resume or args.checkpoint_dir,
                    checkpoint_every=args.checkpoint_every,
                    checkpoint_iters=args.checkpoint_iters,
                    checkpoint_keep=args.checkpoint_keep, resume=resume,
                    checkpoint_replace=args.checkpoint_replace, client=runner.client)
    except ValueError as e:     # parameters the estimator refuses (checked before training)
        raise SystemExit(f"streamcvm train: error: {e}") from None
    dt = time.perf_counter() - t
    save_model(est, args.output, overwrite=args.overwrite, target=args.model_target)
    if not args.quiet:
        nsv = int(np.sum(est.n_support_)) if task != "one-class" else len(est.machine_.coef)
        extra = f", mu {est.mu_:.4g}, tube half width {est.epsilon_bar_:.4g}" \
            if task == "regression" else ""
        print(f"trained {type(est).__name__} ({est.method}) on {store.n:,} rows in {dt:.1f} s: "
              f"{est.core_set_size_:,} core vectors, {nsv:,} support vectors, "
              f"gamma {est.gamma_:.4g}{extra} -> {args.output}")
        ck = est.checkpoint_stats_
        if ck is not None:
            print(f"checkpoints: {ck['written']} written in {ck['seconds']:.2f} s "
                  f"({100 * ck['seconds'] / max(dt, 1e-9):.1f}% of the training time)")
    return 0


def _check_train_paths(args):
    """Before any work: the model folder may not replace the store, the
    checkpoints or another user's data (streamcvm.outputs); snapshots go
    outside the store; --resume names a folder that holds a snapshot."""
    from .outputs import check_output
    ck = _checkpoint_arg(args)
    args.model_target = check_output(args.output, what="model folder", own_kind="model",
                                     inputs=[args.store, ck], overwrite=args.overwrite,
                                     url_ok=True)
    _check_checkpoint_dir(args, ck)


def _checkpoint_arg(args):
    """The checkpoint folder of --checkpoint-dir / --resume (or None): --resume
    DIR writes there too, and holds a snapshot unless --checkpoint-dir DIR."""
    from . import checkpoint
    if args.resume and args.checkpoint_dir and \
            os.path.abspath(args.resume) != os.path.abspath(args.checkpoint_dir):
        raise SystemExit(f"streamcvm {args.command}: error: --resume DIR writes its snapshots "
                         f"to DIR; drop --checkpoint-dir or give the same folder")
    if args.resume and not args.checkpoint_dir and not checkpoint.is_checkpoint_dir(args.resume):
        raise SystemExit(f"streamcvm {args.command}: error: --resume {args.resume}: no "
                         f"checkpoint there (to start a run that snapshots there, pass "
                         f"--checkpoint-dir {args.resume} instead)")
    return args.resume or args.checkpoint_dir


def _check_checkpoint_dir(args, ck):
    """The checkpoint folder ``ck`` (or None) is not, and does not contain
    or lie inside, the input store; it holds snapshots or nothing yet."""
    from .outputs import OutputError
    if ck is not None and "://" not in ck and "://" not in args.store:
        real, store = os.path.realpath(ck), os.path.realpath(args.store)
        if real == store or real.startswith(store + os.sep) or store.startswith(real + os.sep):
            raise OutputError(ck, f"the checkpoint folder may not be, contain or lie inside "
                                  f"the input store {args.store}")
        from .outputs import streamcvm_kind
        kind = streamcvm_kind(ck) if os.path.exists(ck) else None
        if kind not in (None, "checkpoints"):
            raise OutputError(ck, f"is a streamcvm {kind}, not a checkpoint folder")


def _check_classes(store, args):
    """Classification needs discrete labels: refuse a target that looks
    continuous (too many distinct values, non-integers), with a hint."""
    import numpy as np
    hint = "; for a continuous target use --task regression"
    if store.classes is None:
        raise SystemExit(f"streamcvm train: error: {args.store}: y has more than "
                         f"1,000 distinct values, not classes{hint}")
    k = len(store.classes)
    if not store.label_names and not np.all(store.classes == np.round(store.classes)):
        raise SystemExit(f"streamcvm train: error: {args.store}: y has {k:,} distinct values, "
                         f"some not integers: not classes{hint}")
    if k > args.max_classes:
        raise SystemExit(f"streamcvm train: error: {args.store}: y has {k:,} classes, more "
                         f"than --max-classes {args.max_classes}{hint} (or raise "
                         f"--max-classes)")


def _add_checkpoint_replace(p):
    p.add_argument("--checkpoint-replace", action="store_true",
                   help="delete the snapshots of another run (other data or options) found "
                        "in the checkpoint folder; without it such a folder is refused. The "
                        "folder is locked while a run writes there")


def _add_cluster_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the passes over every row on this dask.distributed scheduler "
                        "(e.g. tcp://10.0.0.5:8786)")
    g.add_argument("--workers", type=_positive_int, metavar="N",
                   help="start a local dask cluster of N worker processes for them "
                        "(default: dask's threaded scheduler in this process)")


def _runner(args, quiet=False):
    """The :class:`~streamcvm.parallel.Runner` of --scheduler / --workers
    (threads without them); announces the cluster and its dashboard."""
    from .parallel import Runner
    try:
        r = Runner(client=args.scheduler, workers=args.workers, use_active=False)
    except (OSError, ValueError) as e:
        raise SystemExit(f"streamcvm {args.command}: error: cannot reach the dask scheduler "
                         f"{args.scheduler}: {e}") from None
    if r.client is not None and not quiet:
        print(f"dask cluster: {r.describe()}", file=sys.stderr, flush=True)
    return r


def _predict_chunks(est, store, runner=None, what="predict", proba=False):
    """(chunk outputs, predictions, decision values, or the class
    probabilities with ``proba``) per chunk, in order, computed on
    ``runner``; a progress bar over the chunks on a terminal."""
    from tqdm.auto import tqdm
    from .predict import predict_chunks
    with tqdm(total=store.n_chunks, unit="chunk", desc=what, disable=None, leave=False) as bar:
        for r in predict_chunks(est, store, runner, progress=lambda d, t: bar.update(1),
                                proba=proba):
            yield r, r.pred, (r.proba if proba else r.dec)


def _add_predict(sub):
    p = sub.add_parser("predict", help="predict every row of a store, chunk by chunk")
    p.add_argument("store", metavar="STORE")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="text file, one prediction per line ('-': standard output); or a "
                        "store (.zarr, .h5): y = the predictions, X = the decision values")
    p.add_argument("-b", "--probability", type=int, choices=[0, 1], default=0,
                   help="1: write the class probabilities too (a model trained with -b 1): "
                        "text: a 'labels ...' header, then the label and one probability per "
                        "class on each line, as LIBSVM; store: X = the probabilities")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at OUT (a prediction "
                        "store is replaced without it; the inputs never)")
    p.add_argument("--exact", action="store_true",
                   help="predict with the full kernel expansion even where the model has a "
                        "compact one (see 'streamcvm info MODEL')")
    _add_cluster_args(p)
    p.set_defaults(func=cmd_predict)


STORE_SUFFIXES = (".zarr", ".h5", ".hdf5")


def label_codes(classes, labels):
    """Positions in ``classes`` of each of ``labels`` (all among them),
    vectorised; ``classes`` need not be sorted (models of older versions)."""
    import numpy as np
    classes = np.asarray(classes)
    order = np.argsort(classes, kind="stable")
    return order[np.searchsorted(classes[order], np.asarray(labels))]


def _predict_to_store(est, store, out, model_path, runner=None, proba=False, replace=True):
    """Predictions as a store: X = the decision values (one column, or one per
    class / machine; ``proba``: the class probabilities, one column per
    class), y = the predicted label (codes + label map when the labels are
    not numbers). Written under a temporary name, then renamed."""
    import numpy as np
    from .ingest.writer import StoreWriter
    classes = getattr(est, "classes_", None)
    numeric = classes is None or np.issubdtype(np.asarray(classes).dtype, np.number)
    w = None
    n = 0
    try:
        for _, pred, dec in _predict_chunks(est, store, runner, proba=proba):
            dec = np.asarray(dec, np.float32).reshape(len(pred), -1)
            if w is None:     # the path was checked before: replace what was there
                w = StoreWriter(out, dec.shape[1], overwrite=replace,
                                fmt="zarr" if out.endswith(".zarr") else "hdf5")
            y = np.asarray(pred, np.float64) if numeric else \
                label_codes(classes, pred).astype(np.float64)
            w.append(dec, y)
            n += len(pred)
        if w is None:
            raise SystemExit("streamcvm predict: error: the store has no rows")
        attrs = {"predictions": {"model": os.path.abspath(model_path),
                                 "source": getattr(store, "path", None),
                                 "X": "predict_proba" if proba else "decision_function",
                                 "y": "predict"}}
        if not numeric:
            attrs["label_names"] = [str(c) for c in classes]
        w.close(attrs)
    except BaseException:
        if w is not None:
            w.abort()
        raise
    return n


def cmd_predict(args):
    from .model import load_model
    from .outputs import check_output
    from .store import open_store
    to_store = args.output.endswith(STORE_SUFFIXES)
    target = check_output(args.output,
                          what="prediction store" if to_store else "prediction file",
                          own_kind="predictions" if to_store else None,
                          inputs=[args.store, args.model], overwrite=args.overwrite,
                          stream=not to_store)
    mode = target.mode
    est = _exact(load_model(args.model), args.exact)
    proba = bool(args.probability)
    if proba and getattr(est, "probA_", None) is None:
        raise SystemExit(f"streamcvm predict: error: {args.model}: -b 1 needs a classifier "
                         "trained with -b 1 (probability estimates)")
    store = open_store(args.store)
    with _runner(args) as runner:
        if to_store:
            n = _predict_to_store(est, store, args.output, args.model, runner, proba,
                                  target.replace)
            print(f"wrote {n:,} predictions (y) and "
                  f"{'class probabilities' if proba else 'decision values'} (X) to the store "
                  f"{args.output}")
            return 0
        n = _predict_text(est, store, args.output, runner, mode, proba, target.replace)
    print(f"wrote {n:,} predictions to {'standard output' if mode == 'stdout' else args.output}",
          file=sys.stderr if mode in ("stdout", "special") else sys.stdout)
    return 0


def _label_text(values):
    """Labels as LIBSVM writes them: integers without '.0'."""
    import numpy as np
    v = np.asarray(values)
    if v.dtype.kind == "f" and np.all(v == np.round(v)) and np.all(np.abs(v) < 2.0 ** 53):
        v = v.astype(np.int64)
    return [str(x.item() if hasattr(x, "item") else x) for x in v]


def _predict_text(est, store, output, runner, mode="new", proba=False, replace=True):
    """One prediction per line (``proba``: then the class probabilities,
    after a 'labels ...' header, as LIBSVM's svm-predict -b 1): to standard
    output (mode "stdout"), straight into a special file such as a pipe
    ("special"), or under a temporary name renamed into place when complete."""
    import numpy as np
    from .atomic import atomic_file
    labels = est.task in ("classification", "one-class")

    def write(f):
        n = 0
        if proba:
            f.write("labels " + " ".join(_label_text(est.classes_)) + "\n")
        for _, pred, P in _predict_chunks(est, store, runner, proba=proba):
            pred = np.asarray(pred)
            text = _label_text(pred) if labels else [str(v.item() if hasattr(v, "item") else v)
                                                     for v in pred]
            if proba:
                text = [t + " " + " ".join(f"{p:.6g}" for p in row) for t, row in zip(text, P)]
            f.write("\n".join(text))
            f.write("\n")
            n += len(pred)
        f.flush()
        return n
    if mode == "stdout":
        return write(sys.stdout)
    if mode == "special":
        with open(output, "w") as f:
            return write(f)
    with atomic_file(output, replace=replace) as f:
        return write(f)


def _add_features(sub):
    p = sub.add_parser(
        "features", help="extract large-margin features (MMDA) from a store into a new store",
        description="Maximum margin discriminant analysis by the core vector method: fit "
                    "orthogonal large-margin directions on the store's labelled rows (or "
                    "load them with --model), then write every row's features to a new "
                    "store, chunk by chunk (X = the features, y and qid as in STORE).")
    p.add_argument("store", metavar="STORE")
    p.add_argument("-o", "--output", required=True, metavar="FEATURE_STORE",
                   help="store to write (.zarr, or .h5 / .hdf5)")
    p.add_argument("-k", "--n-components", type=_positive_int, default=None, metavar="K",
                   help="features per class (one-vs-rest: K x classes features; two "
                        "classes: K); default 1")
    p.add_argument("--model", metavar="MODEL",
                   help="a saved MMDA model (--save-model) to transform with, instead of "
                        "fitting on STORE")
    p.add_argument("--save-model", metavar="MODEL",
                   help="also save the fitted directions as a model folder, to transform "
                        "other stores with (--model)")
    p.add_argument("-c", "--C", type=float, default=None, help="the L2-SVM's C (default 1)")
    p.add_argument("--exact", action="store_true",
                   help="the full kernel expansions (by default, where it keeps every "
                        "feature's R^2 >= 0.999, one compact basis of at most 4,096 points "
                        "computes them; see 'streamcvm info MODEL')")
    p.add_argument("-t", "--kernel", choices=["rbf", "laplacian", "exponential"], default=None,
                   help="rbf (default), laplacian or exponential")
    p.add_argument("-g", "--gamma", default=None,
                   help="kernel width: 'auto' (default: 1 / mean squared distance) or a number")
    p.add_argument("-e", "--eps", type=float, default=None,
                   help="ball tolerance (default 1e-3, the paper's)")
    p.add_argument("-a", "--sample-size", type=_positive_int, default=None,
                   help="rows per violator search (default 59)")
    p.add_argument("-f", "--max-core", type=_positive_int, default=None,
                   help="cap on core vectors per feature (default: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the fit here after each feature (crash-safe)")
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help="at most one snapshot per this many seconds, and one after the "
                        "last feature (default 60; 0: after every feature)")
    p.add_argument("--checkpoint-keep", type=_positive_int, default=2, metavar="K",
                   help="snapshots kept (default 2)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the fit from the newest snapshot in DIR (and keep "
                        "writing there): the same features as a run never interrupted")
    _add_checkpoint_replace(p)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file or streamcvm output at FEATURE_STORE or "
                        "MODEL (a feature store or model folder is replaced without it; "
                        "the inputs never)")
    _add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_features)


def cmd_features(args):
    import time
    from . import checkpoint
    from .outputs import check_output
    fit_opts = ("n_components", "C", "kernel", "gamma", "eps", "sample_size", "max_core",
                "checkpoint_dir", "resume", "save_model")
    if args.model is not None:
        given = [o for o in fit_opts if getattr(args, o) is not None]
        if given or args.seed != 0:
            opt = "--" + (given[0] if given else "seed").replace("_", "-")
            raise SystemExit(f"streamcvm features: error: {opt} is for fitting; --model "
                             f"{args.model} is already fitted")
    ck = _checkpoint_arg(args)
    if args.save_model is not None and \
            os.path.abspath(args.save_model) == os.path.abspath(args.output):
        raise SystemExit("streamcvm features: error: --save-model and -o name the same path")
    if not args.output.endswith(STORE_SUFFIXES):
        raise SystemExit(f"streamcvm features: error: {args.output}: the feature store's "
                         f"name must end in {', '.join(STORE_SUFFIXES)}")
    inputs = [args.store, args.model, ck]
    target = check_output(args.output, what="feature store", own_kind="features",
                          inputs=inputs, overwrite=args.overwrite)
    model_target = None
    if args.save_model is not None:
        model_target = check_output(args.save_model, what="model folder", own_kind="model",
                                    inputs=inputs, overwrite=args.overwrite, url_ok=True)
    _check_checkpoint_dir(args, ck)
    from .features import write_features
    from .model import load_model
    from .store import open_store
    from .transformers import MMDATransformer
    store = open_store(args.store)
    if args.model is not None:
        est = load_model(args.model)
        if not isinstance(est, MMDATransformer):
            raise SystemExit(f"streamcvm features: error: {args.model}: a "
                             f"{type(est).__name__} model, not MMDA features")
        if args.exact:
            est.set_params(compact=False)
    else:
        given = dict(n_components=args.n_components, C=args.C, kernel=args.kernel,
                     gamma=None if args.gamma is None else _num_or_auto(args.gamma, "gamma",
                                                                         "features"),
                     eps=args.eps, sample_size=args.sample_size, max_core=args.max_core)
        est = MMDATransformer(**{k: v for k, v in given.items() if v is not None},
                              compact=False if args.exact else "auto",
                              random_state=args.seed, verbose=not args.quiet)
        resume = bool(args.resume) and checkpoint.is_checkpoint_dir(args.resume)
        t = time.perf_counter()
        try:
            est.fit(store, checkpoint_dir=ck, checkpoint_every=args.checkpoint_every,
                    checkpoint_keep=args.checkpoint_keep, resume=resume,
                    checkpoint_replace=args.checkpoint_replace)
        except ValueError as e:
            raise SystemExit(f"streamcvm features: error: {e}") from None
        if not args.quiet:
            k = len(est.kernel_evaluations_)
            print(f"fitted {k:,} MMDA features on {store.n:,} rows in "
                  f"{time.perf_counter() - t:.1f} s: {est.kernel_evaluations_.mean():.0f} "
                  f"support rows per feature, {est.expansion_rows_:,} distinct in all, "
                  f"gamma {est.gamma_:.4g}", file=sys.stderr)
        if args.save_model is not None:
            from .model import save_model
            save_model(est, args.save_model, overwrite=args.overwrite, target=model_target)
    with _runner(args, args.quiet) as runner:
        n = write_features(est, store, args.output, runner=runner, progress=not args.quiet,
                           model_path=args.model or args.save_model, target=target)
    if not args.quiet:
        print(f"wrote {n:,} rows x {len(est.kernel_evaluations_):,} features to "
              f"{args.output}", file=sys.stderr)
    return 0


def _add_surface(sub):
    from . import surface
    p = sub.add_parser(
        "surface", help="reconstruct a surface mesh from a 3D point set (multi-scale CVR)",
        description="Fit f = 1 on the points with Core Vector Regression at three kernel "
                    "widths, coarse to fine (the cvr paper, sec. 4.2; off-surface rows along "
                    "the normals give f its slope), evaluate f on a grid chunk by chunk and "
                    "write the level set f = 1 (marching cubes) as a mesh.")
    p.add_argument("points", metavar="POINTS",
                   help="a .ply (ascii or binary), .xyz / .txt, .csv point set, a store "
                        "of 3 columns, or a folder holding one point file")
    p.add_argument("-o", "--output", required=True, metavar="MESH",
                   help="the mesh to write: .ply (binary) or .obj")
    p.add_argument("--png", metavar="PNG", help="also render the mesh to this picture")
    p.add_argument("--up", choices=["x", "y", "z"], default="y",
                   help="the axis drawn upwards in --png (default y, as scanned PLY files)")
    p.add_argument("--grid", type=_positive_int, default=surface.GRID,
                   help=f"grid points along the box's longest side (default {surface.GRID})")
    p.add_argument("--scales", default=",".join(f"{s:g}" for s in surface.SCALES),
                   help="kernel widths, coarse to fine, in box diagonals (default "
                        f"{','.join(f'{s:g}' for s in surface.SCALES)})")
    p.add_argument("-t", "--kernel", choices=["rbf", "exponential"], default=surface.KERNEL,
                   help="rbf (default) or exponential (the paper's Laplacian, "
                        "exp(-||x - z|| / width))")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the fit here after each level (crash-safe)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the fit after the last level snapshotted in DIR")
    _add_checkpoint_replace(p)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file at MESH or PNG (the points never)")
    _add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_surface)


def cmd_surface(args):
    import time
    from tqdm.auto import tqdm
    from . import surface
    from .meshio import PointsError, read_points, render_png, write_mesh
    from .outputs import check_output
    args.store = args.points            # for the checkpoint-folder checks
    try:
        scales = tuple(float(v) for v in args.scales.split(","))
    except ValueError:
        raise SystemExit(f"streamcvm surface: error: --scales {args.scales}: widths separated "
                         f"by commas, e.g. 0.2,0.06,0.02") from None
    if not scales or not all(math.isfinite(v) and v > 0 for v in scales):
        raise SystemExit(f"streamcvm surface: error: --scales {args.scales}: widths must be "
                         f"positive finite numbers")
    if args.grid < 8:
        raise SystemExit("streamcvm surface: error: --grid must be at least 8")
    if not args.output.lower().endswith((".ply", ".obj")):
        raise SystemExit(f"streamcvm surface: error: {args.output}: the mesh is written as "
                         f".ply or .obj")
    if args.png is not None and not args.png.lower().endswith(".png"):
        raise SystemExit(f"streamcvm surface: error: {args.png}: --png needs a .png name")
    if args.png is not None and os.path.abspath(args.png) == os.path.abspath(args.output):
        raise SystemExit("streamcvm surface: error: --png and -o name the same path")
    ck = _checkpoint_arg(args)
    inputs = [args.points, ck]
    mesh_target = check_output(args.output, what="mesh", inputs=inputs,
                               overwrite=args.overwrite)
    png_target = None
    if args.png is not None:
        png_target = check_output(args.png, what="picture", inputs=inputs,
                                  overwrite=args.overwrite)
    _check_checkpoint_dir(args, ck)
    try:
        P = read_points(args.points)
    except PointsError as e:
        raise SystemExit(f"streamcvm surface: error: {e}") from None
    try:
        P = surface.check_points(P)
    except ValueError as e:
        raise SystemExit(f"streamcvm surface: error: {args.points}: {e}") from None
    say = (lambda s: None) if args.quiet else \
        (lambda s: print(s, file=sys.stderr, flush=True))
    say(f"{len(P):,} points from {args.points}")
    t = time.perf_counter()
    with tqdm(total=len(scales), unit="level", desc="fit", disable=True if args.quiet
              else None, leave=False) as bar, _runner(args, quiet=args.quiet) as runner:
        def levels(done, total):
            bar.n = done
            bar.refresh()
        try:
            model = surface.fit(P, scales=scales, kernel=args.kernel, seed=args.seed,
                                n_jobs=runner.threads if runner.client is None else 1,
                                checkpoint_dir=ck, resume=bool(args.resume),
                                checkpoint_replace=args.checkpoint_replace, log=say,
                                progress=levels)
        except ValueError as e:
            raise SystemExit(f"streamcvm surface: error: {e}") from None
        fit_s = time.perf_counter() - t
        t = time.perf_counter()
        with tqdm(total=1, unit="slab", desc="grid", disable=True if args.quiet else None,
                  leave=False) as gbar:
            def slabs(done, total):
                gbar.total = total
                gbar.n = done
                gbar.refresh()
            try:
                V, F = surface.mesh(model, P, grid=args.grid, runner=runner, progress=slabs)
            except ValueError as e:
                raise SystemExit(f"streamcvm surface: error: {e}") from None
    write_mesh(args.output, V, F, replace=mesh_target.replace)
    if args.png is not None:
        render_png(args.png, V, F, up=args.up, replace=png_target.replace)
    say(f"wrote {args.output}: {len(V):,} vertices, {len(F):,} faces"
        f"{'' if surface.is_closed(F) else ' (not closed)'}; {model.n_support:,} support "
        f"vectors; fit {fit_s:.1f} s, grid and mesh {time.perf_counter() - t:.1f} s"
        + (f"; picture {args.png}" if args.png else ""))
    return 0


def _add_evaluate(sub):
    p = sub.add_parser("evaluate", help="accuracy, balanced loss, AUC, confusion matrix; "
                                        "regression: RMSE, normalised RMSE, MRE, R^2")
    p.add_argument("store", metavar="STORE")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--json", action="store_true",
                   help="print the figures as one JSON object instead of the report")
    p.add_argument("--exact", action="store_true",
                   help="predict with the full kernel expansion even where the model has a "
                        "compact one (see 'streamcvm info MODEL')")
    _add_cluster_args(p)
    p.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args):
    import json
    with _runner(args) as runner:
        lines, figures = evaluate_report(args.store, args.model, runner, exact=args.exact)
    print(json.dumps(figures) if args.json else "\n".join(lines))
    return 0


def evaluate_text(store_path, model_path, runner=None):
    """The report ``streamcvm evaluate`` prints."""
    return "\n".join(evaluate_report(store_path, model_path, runner)[0])


def _exact(est, exact):
    """``est`` set to predict with its full expansions (``--exact``)."""
    if exact and "compact" in est.get_params():
        est.set_params(compact=False)
    return est


def evaluate_report(store_path, model_path, runner=None, exact=False):
    """(report lines, figures as a JSON-able dict) of ``streamcvm evaluate``,
    in memory independent of the rows (confusion counts and the AUC's score
    histogram stream); the chunks' predictions are computed on ``runner``
    (default: threads). A model of another task than the store's labels is
    refused in one line."""
    import numpy as np
    from .metrics import ClassTotals
    from .model import load_model
    from .store import open_store
    est = _exact(load_model(model_path), exact)
    store = open_store(store_path)
    if est.task == "regression":
        _check_regression_store(est, store, store_path)
        return _regression_report(est, store, runner)
    if est.task == "ranking":
        return _ranking_report(est, store, runner)
    one_class = est.task == "one-class"
    classes = np.array([-1, 1]) if one_class else est.classes_
    table = _class_table(est, store, store_path, one_class)     # store label -> class index
    tot = ClassTotals(len(classes))
    for c, pred, dec in _predict_chunks(est, store, runner, "evaluate"):
        t = table[np.searchsorted(store.classes, c.y)]
        p = (np.asarray(pred) == 1).astype(np.int64) if one_class else \
            label_codes(classes, pred)
        tot.add(t, p, dec)
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


def _fail(command, message):
    raise SystemExit(f"streamcvm {command}: error: {message}")


def _class_table(est, store, store_path, one_class):
    """:func:`streamcvm.predict.class_table`, its refusal as one line."""
    from .predict import class_table
    try:
        return class_table(None if one_class else est.classes_, store, one_class)
    except ValueError as e:
        msg = str(e).replace(getattr(store, "path", store_path), store_path, 1)
        _fail("evaluate", msg.replace("the model is a classifier",
                                      f"the model is a {type(est).__name__}"))


def _check_regression_store(est, store, store_path):
    """A regressor is refused on a store of class labels: text labels, or
    integer classes when it was trained on a continuous target."""
    import numpy as np
    if store.label_names:
        _fail("evaluate", f"{store_path}: y holds text class labels, but the model is a "
                          f"regressor")
    if getattr(est, "target_type_", None) == "continuous" and store.classes is not None \
            and np.all(store.classes == np.round(store.classes)):
        _fail("evaluate", f"{store_path}: y holds {len(store.classes):,} integer classes, but "
                          f"the model is a regressor trained on a continuous target")


def _ranking_report(est, store, runner=None):
    """NDCG@10 and pairwise accuracy, streamed query by query."""
    from .metrics import RankingTotals
    if not store.has_qid:
        raise SystemExit("streamcvm evaluate: error: a ranking model needs a store with "
                         "query ids (qid)")
    tot = RankingTotals(k=10)
    n = 0
    for c, f, _ in _predict_chunks(est, store, runner, "evaluate"):
        tot.add(c.y, f, c.qid)
        n += len(f)
    ndcg, acc, nq, npairs = tot.result()
    return ([f"rows        {n:,}",
             f"NDCG@10     {ndcg:.6g}  (mean over {nq:,} queries with a relevant row)",
             f"pairwise    {acc:.6g}  (accuracy over {npairs:,} preference pairs)"],
            {"task": "ranking", "rows": n, "ndcg@10": float(ndcg), "queries": int(nq),
             "pairwise_accuracy": float(acc), "pairs": int(npairs)})


def _regression_report(est, store, runner=None):
    """RMSE, the cvr paper's normalised RMSE (RMSE / max y) and MRE (mean
    |(f - y) / y| over rows with y != 0), and R^2 (:class:`~streamcvm.metrics.RegressionTotals`)."""
    from .metrics import RegressionTotals
    tot = RegressionTotals()
    for c, f, _ in _predict_chunks(est, store, runner, "evaluate"):
        tot.add(c.y, f)
    if tot.n == 0:
        raise SystemExit("streamcvm evaluate: error: the store has no rows")
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


def _add_demo(sub):
    p = sub.add_parser(
        "demo", help="generate data, ingest, train and evaluate (end to end)",
        description="Runs the pipeline on generated data: writes a Gaussian-mixture "
                    "svmlight file (gzip), ingests it into a Zarr store, trains a BVM "
                    "classifier and evaluates it on a held-out generated store. Needs "
                    "nothing but the package.")
    p.add_argument("--dir", default="streamcvm-demo", help="working folder (default: ./streamcvm-demo)")
    p.add_argument("--rows", type=_positive_int, default=200_000, help="rows to generate (default: 200,000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true",
                   help="replace the demo's files (mixture.*) already in --dir; without it "
                        "an existing one is refused before any work")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args):
    import time
    from . import synthetic
    from .estimators import CVMClassifier
    from .model import save_model
    from .store import open_store
    from .ingest import ingest
    src = os.path.join(args.dir, "mixture.svm.gz")
    store = os.path.join(args.dir, "mixture.zarr")
    test = os.path.join(args.dir, "mixture-test.zarr")
    model = os.path.join(args.dir, "mixture.model")
    there = [p for p in (src, store, test, model) if os.path.lexists(p)]
    if there and not args.overwrite:        # a command never replaces what it did not write
        raise SystemExit(f"streamcvm demo: error: {there[0]} exists: pass --overwrite to "
                         "replace the demo's files, or choose another --dir")
    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise SystemExit(f"streamcvm demo: error: --dir {args.dir} is a file, not a folder")
    os.makedirs(args.dir, exist_ok=True)
    show = not args.quiet
    print(f"[1/5] generating {args.rows:,} rows x 22 features -> {src}")
    synthetic.write_text(src, "gaussian", args.rows, seed=args.seed, progress=show)
    print(f"[2/5] ingesting -> {store}")
    res = ingest([src], store, overwrite=True, progress=show)
    print(f"      {res['n']:,} rows in {res['seconds']:.1f} s")
    print(describe_store(store))
    print(f"[3/5] training BVM (defaults: C=1, gamma=auto, eps=auto) -> {model}")
    t = time.perf_counter()
    est = CVMClassifier(method="bvm", verbose=show).fit(open_store(store))
    save_model(est, model, overwrite=args.overwrite)
    print(f"      {time.perf_counter() - t:.1f} s, {est.core_set_size_:,} core vectors, "
          f"eps reached {est.machines_[0].history[-1]['eps']:.2g}")
    n_test = max(args.rows // 4, 1000)
    print(f"[4/5] generating a held-out test store ({n_test:,} rows, same mixture) -> {test}")
    synthetic.write_store(test, "gaussian", n_test, seed=args.seed, overwrite=True,
                          first_block=10**6)
    print("[5/5] streamcvm evaluate")
    print(evaluate_text(test, model))
    return 0


def build_parser():
    from . import __version__
    ap = argparse.ArgumentParser(
        prog="streamcvm",
        description="Core Vector Machines trained from chunked stores larger than RAM.")
    ap.add_argument("--version", action="version", version=f"streamcvm {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_ingest(sub)
    _add_info(sub)
    _add_train(sub)
    _add_predict(sub)
    _add_features(sub)
    _add_surface(sub)
    _add_evaluate(sub)
    _add_demo(sub)
    return ap


def _sigterm(signum, frame):
    raise KeyboardInterrupt  # unwind: partial stores are removed on the way out


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    from . import numba_cache_moved
    if numba_cache_moved and not getattr(args, "quiet", False):
        print(f"streamcvm: note: compiled kernels are cached in {numba_cache_moved} (neither "
              f"the package folder nor ~/.cache is writable; NUMBA_CACHE_DIR chooses)",
              file=sys.stderr)
    import signal
    signal.signal(signal.SIGTERM, _sigterm)
    from .ingest.errors import IngestError
    from .model import ModelError
    from .checkpoint import CheckpointError
    from .outputs import OutputError
    from .store import StoreError
    try:
        _check_numbers(args)
        _check_urls(args)
        return args.func(args)
    except (IngestError, StoreError, ModelError, CheckpointError, OutputError,
            FileExistsError) as e:
        print(f"streamcvm {args.command}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:        # no such folder, no permission, disk full ... : one line
        if isinstance(e, BrokenPipeError):
            return 141
        where = f"{e.filename}: " if e.filename else ""
        print(f"streamcvm {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # An interrupt inside zarr's sync-over-async wrapper leaves its write
        # coroutine unawaited; Python would warn about it when the traceback is
        # released. Nothing is lost (the partial store is removed), so keep the
        # promised one line.
        import warnings
        warnings.filterwarnings("ignore", message="coroutine .* was never awaited",
                                category=RuntimeWarning)
        print(f"streamcvm {args.command}: interrupted (nothing was written)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 141


if __name__ == "__main__":
    sys.exit(main())
