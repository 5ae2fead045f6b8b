"""The ``streamcvm`` command line, one module per command: ingest (text files
into a store), info (a store, a model or a checkpoint folder), train,
predict, features (MMDA), surface, evaluate, demo. Each module has
``add(subparsers)`` (its options) and ``run(args)``.

``train``, ``predict`` and ``evaluate`` also read a text file where a store
is expected (ingested once into a cache folder), and ``train`` takes
svm-train's option letters (:mod:`.libsvm`).

Heavy modules (numba, zarr, dask, scikit-learn) are imported inside the
commands, so ``streamcvm --help`` answers at once. User mistakes end with one
line on stderr and a non-zero exit status, never a traceback. Options not
given are not passed: the defaults are the library's own.
"""
import argparse
import sys

from . import demo, evaluate, features, info, ingest, predict, surface, train
from .common import check_numbers, check_urls

COMMANDS = (ingest, info, train, predict, features, surface, evaluate, demo)


def build_parser():
    from .. import __version__
    ap = argparse.ArgumentParser(
        prog="streamcvm",
        description="Core Vector Machines trained from chunked stores larger than RAM.")
    ap.add_argument("--version", action="version", version=f"streamcvm {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.add(sub)
    return ap


def _sigterm(signum, frame):
    raise KeyboardInterrupt  # unwind: partial stores are removed on the way out


class Interrupted(KeyboardInterrupt):
    """An interrupt after something was written: ``note`` says what is there
    (an output that is complete, lines already sent to a pipe), and the one
    line says it instead of "nothing was written"."""

    def __init__(self, note):
        super().__init__(note)
        self.note = note


def interrupt_in(e):
    """The KeyboardInterrupt behind ``e``, or None. Ctrl-C (or SIGTERM, through
    :func:`_sigterm`) that lands while compiled numba code is calling back into
    Python (unpickling a constant, the parallel layer's hooks) reaches the
    caller as ``SystemError: ... returned a result with an exception set``
    with the KeyboardInterrupt as its cause or context."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _interrupted(command, e):
    # An interrupt inside zarr's sync-over-async wrapper leaves its write
    # coroutine unawaited; Python would warn about it when the traceback is
    # released. Nothing is lost (the partial store is removed), so keep the
    # promised one line.
    # Its event loop's pending tasks are destroyed at exit too, which asyncio
    # logs ("Task was destroyed but it is pending!", several lines on stderr):
    # their writes went to the partial store, which is removed.
    import logging
    import warnings
    warnings.filterwarnings("ignore", message="coroutine .* was never awaited",
                            category=RuntimeWarning)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    note = getattr(e, "note", None) or "nothing was written"
    who = f"streamcvm {command}" if command else "streamcvm"
    print(f"{who}: interrupted ({note})", file=sys.stderr)
    return 130


def main(argv=None):
    # an interrupt anywhere, the imports of a command's modules included, is
    # one line and exit status 130
    seen = {}
    try:
        rc = _main(argv, seen)
    except KeyboardInterrupt as e:
        rc = _interrupted(seen.get("command"), e)
    except SystemError as e:
        ki = interrupt_in(e)
        if ki is None:
            raise
        rc = _interrupted(seen.get("command"), ki)
    return rc


def _main(argv, seen):
    from .libsvm import rewrite_argv
    ap = build_parser()
    args = ap.parse_args(rewrite_argv(sys.argv[1:] if argv is None else argv))
    seen["command"] = args.command
    from .._numba_cache import ensure
    moved = ensure()        # (a command compiles kernels: where numba caches them)
    if moved and not getattr(args, "quiet", False):
        print(f"streamcvm: note: compiled kernels are cached in {moved} (neither "
              f"the package folder nor ~/.cache is writable; NUMBA_CACHE_DIR chooses)",
              file=sys.stderr)
    import signal
    import warnings
    # a warning is one line on stderr, as the errors are (not Python's file:line form)
    warnings.formatwarning = lambda message, category, *rest, **kw: \
        f"{message}\n" if str(message).startswith("streamcvm") else \
        f"streamcvm {args.command}: warning: {message}\n"
    signal.signal(signal.SIGTERM, _sigterm)
    from ..ingest.errors import IngestError
    from ..estimators.model import ModelError
    from ..data.snapshots import CheckpointError
    from ..data.outputs import OutputError
    from ..data.store import StoreError
    try:
        check_numbers(args)
        check_urls(args)
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


if __name__ == "__main__":
    sys.exit(main())
