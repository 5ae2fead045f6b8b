"""``streamcvm ingest``: text files (svmlight, CSV; plain, .gz, .bz2) into a store
(:func:`streamcvm.ingest`)."""
import sys

from .common import add_cluster_args, positive_int, runner_of


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
    p.add_argument("--n-features", type=positive_int, default=None, metavar="D",
                   help="number of features; a larger svmlight index is an error")
    p.add_argument("--chunk-rows", type=positive_int, default=None, metavar="N",
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
    p.add_argument("-j", "--jobs", type=positive_int, default=None, metavar="N",
                   help="parser threads (default: all cores)")
    p.add_argument("--clevel", type=int, default=1, metavar="L",
                   help="Zstd compression level (default: 1)")
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
    from ..ingest import ingest
    fmt = args.store_format
    if fmt is None:
        fmt = "hdf5" if args.output.lower().endswith((".h5", ".hdf5")) else "zarr"
    import warnings
    from ..ingest.pipeline import IngestWarning, describe_label
    skip = [_col(c) for c in args.skip_cols.split(",")] if args.skip_cols else None
    with runner_of(args, args.quiet) as runner, \
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
