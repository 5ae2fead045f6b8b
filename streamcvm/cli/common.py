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
