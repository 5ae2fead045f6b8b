"""What the commands share: option types and checks (numbers, URLs,
checkpoint folders), the cluster options and the runner they give, and the
progress bar over a store's chunks."""
import argparse
import math
import os
import sys


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def add_cluster_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the passes over every row on this dask.distributed scheduler "
                        "(e.g. tcp://10.0.0.5:8786)")
    g.add_argument("--workers", type=positive_int, metavar="N",
                   help="start a local dask cluster of N worker processes for them "
                        "(default: dask's threaded scheduler in this process)")


def add_options_arg(p, what="a setting of the solvers and samplers"):
    """``--option NAME=VALUE`` (repeatable): fields of
    :class:`streamcvm.options.Options` (or, for surfaces, SurfaceOptions)."""
    p.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help=f"{what}, repeatable (e.g. --option svc_exact_rows=8192; a list as "
                        f"a,b,c); `streamcvm info --options` lists them with their defaults, "
                        f"units and what each trades")


def parse_options(items, command, kind=None):
    """The options of ``--option`` values, or a one-line error (exit 2)."""
    from ..options import Options
    kind = Options if kind is None else kind
    try:
        return kind.parse(items)
    except ValueError as e:
        raise SystemExit(f"streamcvm {command}: error: {e}") from None


def add_checkpoint_replace(p):
    p.add_argument("--checkpoint-replace", action="store_true",
                   help="delete the snapshots of another run (other data or options) found "
                        "in the checkpoint folder; without it such a folder is refused. The "
                        "folder is locked while a run writes there")


def runner_of(args, quiet=False):
    """The :class:`~streamcvm.data.parallel.Runner` of --scheduler / --workers
    (threads without them); announces the cluster and its dashboard."""
    from ..data.parallel import Runner
    try:
        r = Runner(client=args.scheduler, workers=args.workers, use_active=False)
    except (OSError, ValueError) as e:
        raise SystemExit(f"streamcvm {args.command}: error: cannot reach the dask scheduler "
                         f"{args.scheduler}: {e}") from None
    if r.client is not None and not quiet:
        print(f"dask cluster: {r.describe()}", file=sys.stderr, flush=True)
    return r


def chunk_bar(store, what):
    """A progress bar over the chunks of ``store`` (shown on a terminal), as a
    context giving the ``progress(done, total)`` callback the library takes."""
    import contextlib

    from tqdm.auto import tqdm

    @contextlib.contextmanager
    def bar():
        with tqdm(total=store.n_chunks, unit="chunk", desc=what, disable=None,
                  leave=False) as b:
            yield lambda done, total: b.update(1)
    return bar()


def num_or_auto(v, what, command="train"):
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


NUMBERS = (("C", "C", "auto"), ("gamma", "gamma", "auto"), ("eps", "eps", "auto"),
            ("mu", "mu", "auto"), ("checkpoint_every", "checkpoint-every", "seconds"))


def check_numbers(args):
    """Refuse NaN, inf, negatives and non-numbers in the numeric options, in
    one line, before any work."""
    for attr, opt, rule in NUMBERS:
        v = getattr(args, attr, None)
        if v is None:
            continue
        if rule == "auto":
            num_or_auto(v, opt, args.command)
        elif not (math.isfinite(v) and v >= 0):
            raise SystemExit(f"streamcvm {args.command}: error: --{opt} must be a finite "
                             f"number of seconds (0 or more), got {v!r}")


def check_urls(args):
    """``memory://`` lives in this command's own process: an output or a
    checkpoint folder there would be gone when the command exits."""
    for attr, opt in (("output", "-o"), ("save_model", "--save-model"), ("png", "--png"),
                      ("checkpoint_dir", "--checkpoint-dir"), ("resume", "--resume")):
        v = getattr(args, attr, None)
        if isinstance(v, str) and v.lower().startswith("memory://"):
            raise SystemExit(f"streamcvm {args.command}: error: {opt} {v}: memory:// lives "
                             f"inside this command's process and is gone when it exits; give "
                             f"a local path or a lasting URL")


def checkpoint_arg(args):
    """The checkpoint folder of --checkpoint-dir / --resume (or None): --resume
    DIR writes there too, and holds a snapshot unless --checkpoint-dir DIR."""
    from ..data import snapshots
    if args.resume and args.checkpoint_dir and \
            os.path.abspath(args.resume) != os.path.abspath(args.checkpoint_dir):
        raise SystemExit(f"streamcvm {args.command}: error: --resume DIR writes its snapshots "
                         f"to DIR; drop --checkpoint-dir or give the same folder")
    if args.resume and not args.checkpoint_dir and not snapshots.is_checkpoint_dir(args.resume):
        raise SystemExit(f"streamcvm {args.command}: error: --resume {args.resume}: no "
                         f"checkpoint there (to start a run that snapshots there, pass "
                         f"--checkpoint-dir {args.resume} instead)")
    return args.resume or args.checkpoint_dir


def check_checkpoint_dir(args, ck):
    """The checkpoint folder ``ck`` (or None) is not, and does not contain
    or lie inside, the input store; it holds snapshots or nothing yet."""
    from ..data.outputs import OutputError
    if ck is not None and "://" not in ck and "://" not in args.store:
        real, store = os.path.realpath(ck), os.path.realpath(args.store)
        if real == store or real.startswith(store + os.sep) or store.startswith(real + os.sep):
            raise OutputError(ck, f"the checkpoint folder may not be, contain or lie inside "
                                  f"the input store {args.store}")
        from ..data.outputs import streamcvm_kind
        kind = streamcvm_kind(ck) if os.path.exists(ck) else None
        if kind not in (None, "checkpoints"):
            raise OutputError(ck, f"is a streamcvm {kind}, not a checkpoint folder")


def add_exact(p):
    """predict's and evaluate's --exact (see :func:`exact_model`)."""
    p.add_argument("--exact", action="store_true",
                   help="predict with the full kernel expansion even where the model has a "
                        "compact one (see 'streamcvm info MODEL')")


def exact_model(est, exact):
    """``est`` set to predict with its full expansions (``--exact``)."""
    if exact and "compact" in est.get_params():
        est.set_params(compact=False)
    return est


STORE_SUFFIXES = (".zarr", ".h5", ".hdf5")


# ---------------------------------------------------------------------------
# defaults: the library's, never a copy
# ---------------------------------------------------------------------------

TASKS = {"classification": "CVMClassifier", "one-class": "CVMOneClass",
         "regression": "CVMRegressor", "ranking": "CVMRanker"}


class Default:
    """A default as the library has it, for an option's help (``%(lib)s``):
    read when the help is shown, so that ``streamcvm --help`` does not import
    the estimators (scikit-learn, numba). ``read()`` returns the value, or
    {text: [tasks]} when it differs by task."""

    def __init__(self, read):
        self.read = read

    def __str__(self):
        v = self.read()
        if isinstance(v, dict):
            if len(v) == 1:
                return next(iter(v))
            return "; ".join(f"{', '.join(ts)}: {t}" for t, ts in v.items())
        return _text(v)


def _text(v):
    return f"{v:g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) \
        and not isinstance(v, bool) else str(v)


def estimator_default(name, tasks=tuple(TASKS), cls=None, fmt=None):
    """The default of estimator parameter ``name``, per task (``cls``: one
    estimator class name instead, e.g. "MMDATransformer"); ``fmt(value)``:
    how the option writes it."""
    fmt = fmt or (lambda v: v)

    def read():
        from .. import estimators
        if cls is not None:
            return fmt(getattr(estimators, cls)().get_params()[name])
        out = {}
        for task in tasks:
            v = fmt(getattr(estimators, TASKS[task])().get_params()[name])
            out.setdefault(_text(v), []).append(task)
        return out
    return Default(read)


def signature_default(func, name):
    """The default of parameter ``name`` of ``func()`` (a callable giving the
    function: imported when the help is shown)."""
    import inspect
    return Default(lambda: inspect.signature(func()).parameters[name].default)


def option(p, *flags, lib=None, **kw):
    """``p.add_argument(*flags, **kw)`` with no default of its own: an option
    not given is not passed on, so the library's default holds. ``lib``: that
    default (a :class:`Default`), which the help names as ``%(lib)s``."""
    action = p.add_argument(*flags, default=None, **kw)
    action.lib = lib
    return action


def given(args, **names):
    """{parameter: value} of the options given on the command line; ``names``
    maps each parameter to its option's attribute (the same name when
    ``True``)."""
    out = {}
    for param, attr in names.items():
        v = getattr(args, param if attr is True else attr, None)
        if v is not None:
            out[param] = v
    return out


# ---------------------------------------------------------------------------
# inputs: a store, or a text file read as LIBSVM's tools read it
# ---------------------------------------------------------------------------

def open_input(path, command, quiet=False):
    """The store at ``path``. A text file (svmlight/LIBSVM or CSV; plain,
    .gz, .bz2) is ingested into a store in the cache folder first, or its
    store there is reused (:func:`streamcvm.ingest.cache.cached_store`), in
    one line on stderr (the reuse line not with ``quiet``). Another file
    that is no store is one line naming ``streamcvm ingest`` (:func:`neither`),
    as is a Zarr array or group that is not a streamcvm store
    (:func:`~streamcvm.data.store.open_store`'s message)."""
    from ..data.store import open_store
    if "://" not in path and os.path.isfile(path) and not _hdf5(path):
        from ..ingest.cache import ENV, cached_store, text_format
        fmt = text_format(path)
        if fmt is not None:
            out, res = cached_store(path, progress=not quiet and sys.stderr.isatty())
            if res is not None:
                print(f"streamcvm {command}: {path} is a text file ({fmt}): ingested it "
                      f"({res['n']:,} rows x {res['d']:,} features, {res['seconds']:.1f} s) "
                      f"into the cache store {out}, reused while the file is unchanged "
                      f"({ENV} moves the cache; `streamcvm ingest` takes options)",
                      file=sys.stderr)
            elif not quiet:
                print(f"streamcvm {command}: {path} is a text file ({fmt}): reading the store "
                      f"ingested from it earlier, {out}", file=sys.stderr)
            return open_store(out)
        raise neither(path)
    return open_store(path)


def neither(path):
    """The one line for a file that is no store and no text file of data."""
    from ..data.store import StoreError
    return StoreError(f"{path}: neither a store (a Zarr folder, an HDF5 file) nor a text file "
                      f"of data (svmlight/LIBSVM, CSV; plain, .gz, .bz2): stores are made "
                      f"with `streamcvm ingest`")


def _hdf5(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x89HDF"
    except OSError:
        return False


def predictor(est, model_path, command):
    """``est``, a model that predicts; an MMDA feature model is refused in
    one line naming ``streamcvm features``."""
    if getattr(est, "task", None) == "features":
        raise SystemExit(f"streamcvm {command}: error: {model_path}: an MMDA feature model "
                         f"(MMDATransformer), which transforms rows and predicts nothing: "
                         f"write its features with `streamcvm features STORE -o "
                         f"FEATURES.zarr --model {model_path}`, then train and {command} "
                         f"on those")
    return est


def fit_to_model(store, est, name, command):
    """``store`` as the model ``est`` reads it: a store of fewer features is
    read with zeros past its last one, as LIBSVM's svm-predict reads a test
    file whose largest index is below the model's (one note on stderr); CSV
    columns, matched by position, and more features than the model's are
    refused in one line."""
    d, want = store.d, est.n_features_in_
    if d == want:
        return store
    if d > want:
        raise SystemExit(
            f"streamcvm {command}: error: {name}: {d:,} features, the model expects "
            f"{want:,}: the model knows nothing of features past {want:,}. If those columns "
            f"are empty (a store ingested with a larger --n-features), ingest the file again "
            f"with `streamcvm ingest FILE --n-features {want} -o STORE.zarr`")
    formats = {s.get("format") for s in (getattr(store, "attrs", {}).get("sources") or [])}
    if "csv" in formats:
        raise SystemExit(
            f"streamcvm {command}: error: {name}: {d:,} features, the model expects {want:,}: "
            f"its rows come from CSV columns, matched by position, so which ones are missing "
            f"cannot be told; give it the training file's columns")
    from ..data.scaling import PaddedStore
    missing = f"feature {want:,} is" if d + 1 == want else f"features {d + 1:,}-{want:,} are"
    print(f"streamcvm {command}: note: {name} has {d:,} features, the model {want:,}: "
          f"{missing} read as 0 (as svm-predict does)", file=sys.stderr)
    return PaddedStore(store, want)
