"""``streamcvm ingest``: text files (svmlight, CSV; plain, .gz, .bz2) into a store
(:func:`streamcvm.ingest`)."""
import sys

from .common import add_cluster_args, given, option, positive_int, runner_of, signature_default


def _ingest():
    from ..ingest.pipeline import ingest
    return ingest


def add(sub):
    p = sub.add_parser(
        "ingest", help="ingest svmlight/LIBSVM or CSV/TSV files into a store",
        description="Ingest svmlight/LIBSVM (with qid) or CSV/TSV files, plain, .gz or "
                    ".bz2, into one chunked store. Memory is bounded by the block and "
                    "chunk sizes, not the input. The store is built under a temporary "
                    "name and renamed at the end: an interrupted ingest leaves no store.")
    p.add_argument("sources", nargs="+", metavar="SRC", help="input files, appended in order")
    p.add_argument("-o", "--output", required=True, metavar="STORE",
                   help="store to create (a .zarr directory, or an .h5 file with --format hdf5)")
    option(p, "--format", dest="store_format", choices=["zarr", "hdf5"],
           help="store format (default: hdf5 for .h5/.hdf5 names, else zarr)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--sparse", dest="sparse", action="store_const", const=True,
                   help="store X as CSR")
    g.add_argument("--dense", dest="sparse", action="store_const", const=False,
                   help="store X dense")
    g.add_argument("--auto", dest="sparse", action="store_const", const="auto",
                   help="dense for CSV; for svmlight, dense if the first block is at least "
                        "25%% nonzero (the default)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--one-based", dest="zero_based", action="store_const", const=False,
                   help="svmlight feature indices start at 1 (the default, as LIBSVM)")
    g.add_argument("--zero-based", dest="zero_based", action="store_const", const=True,
                   help="svmlight feature indices start at 0")
    p.add_argument("--n-features", type=positive_int, default=None, metavar="D",
                   help="number of features; a larger svmlight index is an error")
    p.add_argument("--chunk-rows", type=positive_int, default=None, metavar="N",
                   help="rows per chunk (default: about 4 MB of X per chunk)")
    option(p, "--input-format", choices=["auto", "svmlight", "csv"],
           help="input format (default auto: detected from the first lines)")
    p.add_argument("--delimiter", default=None, metavar="C",
                   help="CSV delimiter: ',', 'tab', ';', 'space' (runs of blanks); "
                        "default: detected")
    option(p, "--decimal", choices=[".", ","], metavar="C",
           help="decimal mark of CSV numbers: '.' (the default) or ',' (decimal commas, "
                "as in '1;0,5;2,25'; the delimiter is then not ',')")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--header", dest="header", action="store_const", const=True,
                   help="the first CSV line is a header")
    g.add_argument("--no-header", dest="header", action="store_const", const=False,
                   help="the first CSV line is data (default: detected)")
    option(p, "--label-col", metavar="COL",
           help="CSV label column: index (negative counts from the end), header "
                "name, 'none', or 'auto' (default: the column a header names "
                "label, class, target or y, else column 0)")
    option(p, "--qid-col", metavar="COL", help="CSV query-id column")
    option(p, "--weight-col", metavar="COL", help="CSV sample-weight column")
    p.add_argument("--skip-cols", default=None, metavar="COLS",
                   help="comma-separated CSV columns to ignore")
    option(p, "--allow-nan", action="store_const", const=True,
                   help="accept NaN/inf values and empty CSV fields (as NaN) into the store; "
                        "train and predict refuse a store while it holds any")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("-j", "--jobs", type=positive_int, default=None, metavar="N",
                   help="parser threads (default: all cores)")
    option(p, "--clevel", type=int, metavar="L", lib=signature_default(_ingest, "clevel"),
           help="Zstd compression level (default %(lib)s)")
    add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)


def _col(v):
    if v is None:
        return None
    if isinstance(v, str) and v.lower() == "none":
        return None
    try:
        return int(v)
    except ValueError:
        return v


def run(args):
    import warnings

    from ..ingest import ingest
    from ..ingest.pipeline import IngestWarning, describe_label
    # the options given; the rest are ingest()'s own defaults
    kw = given(args, store_format=True, sparse=True, zero_based=True, n_features=True,
               chunk_rows=True, input_format=True, delimiter=True, header=True, clevel=True,
               allow_nan=True, decimal=True)
    for name in ("label_col", "qid_col", "weight_col"):     # "none": no such column
        if getattr(args, name) is not None:
            kw[name] = _col(getattr(args, name))
    if args.skip_cols:
        kw["skip_cols"] = [_col(c) for c in args.skip_cols.split(",")]
    with runner_of(args, args.quiet) as runner, \
            warnings.catch_warnings(record=True, action="always",
                                    category=IngestWarning) as caught:
        if runner.client is not None:
            kw["n_jobs"] = 2 * runner.n_workers()
        elif args.jobs is not None:
            kw["n_jobs"] = args.jobs
        res = ingest(args.sources, args.output, overwrite=args.overwrite,
                     progress=not args.quiet and sys.stderr.isatty(),
                     executor=runner.client, **kw)
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
