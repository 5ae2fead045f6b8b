"""Every setting that steers the solvers, samplers and fits, in one place.

:class:`Options` is one frozen dataclass of every tunable of a fit: how the
sampler draws, when an eps level ends, which problems are solved exactly,
how a progressive fit stages its rows, when a compact model is kept, how C
and gamma are searched, what the regressor and MMDA try, and the memory
budgets of each. Each field says its default, its unit and what it trades.
A fit takes them with the estimators' ``options=`` (an :class:`Options`, or
a dict of the fields to change), the command line with ``--option
NAME=VALUE``, and passes them down with the call (``Solve.options``): no
solver reads a module-level setting. ``streamcvm info --options`` lists
them; ``streamcvm info MODEL`` shows those a model was trained with.
:class:`SurfaceOptions` does the same for ``streamcvm.surface``.

The defaults are what the benchmarks measured best (BENCHMARKS.md); a
model trained with changed options records them (``model.json``'s
``params.options``), and a checkpoint's run identity includes them, so a
run resumes only with the options it started with.

What is not here, on purpose: the parameters of the estimators themselves
(``C``, ``eps``, ``sample_size``, ``stage_tol`` ...: scikit-learn's
contract, set on the estimator), and the constants compiled into the numba
loops (vector lanes, tile and batch widths: :data:`COMPILED`), which change
no result and would need a recompile.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import numbers
import textwrap
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import ClassVar, TypeAlias, TypeVar

    _F = TypeVar("_F", bound="_Fields")

# the defaults of fit arguments and estimator parameters that several
# estimators share (each estimator's signature names them)
SAMPLE_SIZE = 59        # rows per violator search: the best of 59 random rows is in the
                        # top 5% with probability 1 - 0.95^59 > 95% (cvm paper, sec. 4.1)
CHECKPOINT_EVERY = 60.0     # seconds between a fit's snapshots
CHECKPOINT_KEEP = 2         # snapshots of a run kept

# Constants of the compiled loops, named here so that they are found: they set the
# shape of vectorised code (lanes, blocks, tiles) and change no value it computes.
COMPILED = {
    "solvers/exact/reduce.py: BLOCK, LANES": "rows per block and running extrema per "
    "block of the exact SMO solvers' argmin / argmax (vector lanes)",
    "solvers/exact/rowcache.py: RBF_BATCH": "kernel rows computed together, X read "
    "once per batch (each row's values are the same in any batch)",
    "solvers/kernels/rows.py: RBF_TILE": "columns per tile of a batch of kernel rows",
    "solvers/kernels/expf.py: EXP_MIN and the polynomial": "the float32 exp "
    "approximation's constants (Cephes' expf)",
}


def _opt(default, unit, doc, *, low=0.0, high=None, strict=False):
    """A field of :class:`Options`: its default, unit and documentation
    (what it is and what it trades), and its valid range (``low`` <= value,
    or < with ``strict``; ``high`` inclusive)."""
    return dataclasses.field(default=default, metadata={
        "unit": unit, "doc": doc, "low": low, "high": high, "strict": strict})


class _Fields:
    """What :class:`Options` and :class:`SurfaceOptions` share: validation
    on construction, changed fields, dicts for JSON and the command line."""

    if TYPE_CHECKING:       # a dataclass, as its subclasses are (for the type checker)
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _checked(f, getattr(self, f.name)))

    def __repr__(self):
        """The fields that differ from the defaults only: ``Options()``,
        ``Options(svc_exact_rows=8192)``."""
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.changed())
        return f"{type(self).__name__}({args})"

    def but(self: _F, **changes: Any) -> _F:
        """Give a copy with some fields changed.

        Parameters
        ----------
        **changes
            New values of fields, by name (an unknown name is a ValueError,
            as a value out of range).

        Returns
        -------
        Options or SurfaceOptions
            The copy (of the same class).
        """
        return type(self).from_dict(dict(self.changed(), **changes))

    def changed(self) -> dict[str, Any]:
        """Give the fields that differ from the defaults.

        Returns
        -------
        dict
            ``{name: value}`` of those fields, in JSON types (tuples as
            lists).
        """
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v != f.default:
                out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_dict(cls: type[_F], values: _F | dict[str, Any]) -> _F:
        """Make options from the fields to change.

        Parameters
        ----------
        values : dict or Options or SurfaceOptions
            ``{name: value}`` of the fields that differ from the defaults
            (lists for tuples are accepted); an instance of the class is
            returned as it is.

        Returns
        -------
        Options or SurfaceOptions
            The options (of the class it is called on).

        Raises
        ------
        ValueError
            ``values`` is of another type, names an unknown field (the
            message names the nearest known ones) or holds a value out of
            range.
        """
        if isinstance(values, cls):
            return values
        if not isinstance(values, dict):
            raise ValueError(f"options must be {cls.__name__}, a dict or None, got "
                             f"{type(values).__name__}")
        names = {f.name: f for f in dataclasses.fields(cls)}
        kw: dict[str, Any] = {}
        for k, v in values.items():
            if k not in names:
                near = difflib.get_close_matches(str(k), names, n=3)
                hint = f" (did you mean {', '.join(near)}?)" if near else \
                    " (`streamcvm info --options` lists them)"
                raise ValueError(f"unknown option {k!r}{hint}")
            kw[k] = tuple(v) if isinstance(names[k].default, tuple) and \
                isinstance(v, list) else v
        return cls(**kw)

    @classmethod
    def parse(cls: type[_F], items: Iterable[str]) -> _F:
        """Make options from ``NAME=VALUE`` strings (the command line's ``--option``).

        Parameters
        ----------
        items : iterable of str
            ``NAME=VALUE`` strings: numbers as numbers, ``a,b,c`` as a tuple,
            true / false (or 1 / 0) for a switch; ``-`` in a name reads as
            ``_``.

        Returns
        -------
        Options or SurfaceOptions
            The options (of the class it is called on).

        Raises
        ------
        ValueError
            An item that is not ``NAME=VALUE``, an unknown name, or a value
            of the wrong kind or out of range.
        """
        names = {f.name: f for f in dataclasses.fields(cls)}
        kw: dict[str, Any] = {}
        for item in items:
            name, eq, text = str(item).partition("=")
            name = name.strip().replace("-", "_")
            if not eq or not text.strip():
                raise ValueError(f"--option {item!r}: expected NAME=VALUE")
            f = names.get(name)
            if f is None:
                cls.from_dict({name: None})             # the unknown-name message
            assert f is not None        # (from_dict raised)
            try:
                if isinstance(f.default, tuple):
                    kw[name] = tuple(float(t) for t in text.split(",") if t.strip())
                elif isinstance(f.default, bool):
                    kw[name] = {"true": True, "false": False, "1": True,
                                "0": False}[text.strip().lower()]
                elif isinstance(f.default, int):
                    kw[name] = int(float(text)) if float(text) == int(float(text)) \
                        else float(text)
                else:
                    kw[name] = float(text)
            except (ValueError, KeyError):
                raise ValueError(f"--option {name}={text}: not a {_kind(f.default)}") \
                    from None
        return cls.from_dict(kw)

    @classmethod
    def describe(cls, options: _Fields | None = None
                 ) -> list[tuple[str, Any, Any, str, str]]:
        """Describe every field, in declaration order.

        Parameters
        ----------
        options : Options or SurfaceOptions, optional
            Whose values to list. None: the defaults.

        Returns
        -------
        list of tuple
            One ``(name, value, default, unit, doc)`` row per field.
        """
        options = cls() if options is None else options
        return [(f.name, getattr(options, f.name), f.default, f.metadata["unit"],
                 f.metadata["doc"]) for f in dataclasses.fields(cls)]


def _kind(default):
    if isinstance(default, tuple):
        return "comma-separated list of numbers"
    if isinstance(default, bool):
        return "true or false"
    return "whole number" if isinstance(default, int) else "number"


def _checked(f, v):
    """``v`` for the field ``f``, or a ValueError (one line) naming it."""
    m, default = f.metadata, f.default
    bad = f"option {f.name}={v!r}: "
    if isinstance(default, bool):
        if not isinstance(v, bool):
            raise ValueError(bad + "must be True or False")
        return v
    values = v if isinstance(default, tuple) else (v,)
    if isinstance(default, tuple):
        if not isinstance(v, (tuple, list)) or not v:
            raise ValueError(bad + "must be a non-empty list of numbers")
        values = tuple(v)
    for x in values:
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
            raise ValueError(bad + "must be a finite number" if not isinstance(default, tuple)
                             else bad + "must hold finite numbers")
        if isinstance(default, int) and not isinstance(x, numbers.Integral):
            raise ValueError(bad + "must be a whole number")
        low, high = m["low"], m["high"]
        if low is not None and (x < low or (m["strict"] and x == low)):
            raise ValueError(bad + f"must be {'>' if m['strict'] else '>='} {low:g}")
        if high is not None and x > high:
            raise ValueError(bad + f"must be <= {high:g}")
    if isinstance(default, tuple):
        return tuple(float(x) if isinstance(default[0], float) else int(x) for x in values)
    return float(v) if isinstance(default, float) else int(v)


def _documented(cls: type[_F]) -> type[_F]:
    """``cls`` with a numpydoc Parameters section appended to its docstring,
    one entry per field, written from the field's default, unit, valid range
    and text (:func:`_opt`: the one place each is written)."""
    lines = ["Parameters", "----------"]
    for f in dataclasses.fields(cls):
        m, d = f.metadata, f.default
        kind = "bool" if isinstance(d, bool) else \
            f"tuple of {'float' if isinstance(d[0], float) else 'int'}" \
            if isinstance(d, tuple) else "int" if isinstance(d, int) else "float"
        lines.append(f"{f.name} : {kind}, default {d!r}")
        bounds = []
        if m["low"] is not None and m["low"] > -1e300:
            bounds.append(f"{'>' if m['strict'] else '>='} {m['low']:g}")
        if m["high"] is not None:
            bounds.append(f"<= {m['high']:g}")
        text = m["doc"] if m["doc"].endswith(".") else m["doc"] + "."
        unit = "" if isinstance(d, bool) else f" Unit: {m['unit']}"
        limits = f"{'; ' if unit else ' Valid: '}{' and '.join(bounds)}" if bounds else ""
        text = (f"{text}{unit}{limits}." if unit or limits else text).replace("|", "\\|")
        lines += textwrap.wrap(text, 88, initial_indent="    ", subsequent_indent="    ",
                               break_on_hyphens=False)
    cls.__doc__ = inspect.cleandoc(cls.__doc__ or "") + "\n\n" + "\n".join(lines) + "\n"
    return cls


# -- the sections of Options (mixins, as Falkon's FalkonOptions) ---------------

@dataclasses.dataclass(frozen=True, repr=False)
class SamplerOptions:
    """How the sampled solvers (CVM, BVM, FVM) draw and anneal."""

    pool_chunks: int = _opt(
        8, "chunks", "decompressed chunks a sampler holds; a store of at most this many "
        "chunks is held whole (its problems may take the exact paths, and a multi-class fit "
        "reads it into memory once). More: more memory, fewer chunk swaps", low=1)
    init_size: int = _opt(
        20, "rows", "rows of the first core set, drawn alternately from the two sides",
        low=1)
    init_draws: int = _opt(
        256, "draws", "draws tried for a first sample holding a point (ranking: a "
        "pair) before the fit gives up", low=1)
    patience_cvm: int = _opt(
        7, "samples", "CVM: violator-free samples that end an eps level. More: fewer "
        "violators missed, more draws per level", low=1)
    patience_bvm: int = _opt(10, "samples", "BVM: as patience_cvm", low=1)
    patience_fvm: int = _opt(7, "samples", "Frank-Wolfe: as patience_cvm", low=1)
    eps_start: float = _opt(
        0.1, "eps", "the first eps level of the annealing (halved down to the target)",
        low=0.0, high=1.0, strict=True)
    eps_floor: float = _opt(
        1e-7, "eps", 'eps="auto": the smallest level it may reach', low=0.0, strict=True)
    margin_tol: float = _opt(
        0.3, "ratio", 'eps="auto" stops at the first level whose margin slack (the '
        "violation test's shortfall against ||c||^2) is at most this. Smaller: tighter "
        "models, more levels", low=0.0, strict=True)
    smo_tol: float = _opt(
        1.0, "eps R^2", "CVM's core QP is solved until its gradient gap is this times "
        "eps R^2 (the violation test's own scale). Smaller: more SMO steps, the same "
        "(1 + eps) guarantee", low=0.0, strict=True)
    smo_max_iter: int = _opt(100000, "steps", "CVM: SMO steps per core QP, at most", low=1)
    bvm_refine_steps: int = _opt(
        20, "steps", "BVM: steps on the furthest core violator after each search",
        low=0)
    settle_max_steps: int = _opt(
        100000, "steps", "steps on one block of a full pass's violators (or the core "
        "set's at a level's end), at most", low=1)


@dataclasses.dataclass(frozen=True, repr=False)
class PassOptions:
    """Full passes over every row, and the core set's memory."""

    pass_per_chunk: int = _opt(
        1024, "rows", "a full pass: the furthest rows a chunk task returns, at most. More: "
        "fewer passes, more memory per task", low=1)
    pass_per_pass: int = _opt(
        65536, "rows", "a full pass: the furthest rows of all chunks the driver keeps",
        low=1)
    pass_mb: int = _opt(
        256, "MB", "a full pass: memory for the dense rows it keeps (at most "
        "pass_per_pass of them)", low=1)
    pass_max_passes: int = _opt(
        50, "passes", "full_pass=True: passes until one finds no violator, at most", low=1)
    pass_block_rows: int = _opt(
        4096, "rows", "rows per kernel block against the core set in a pass", low=1)
    dense_max_features: int = _opt(
        2048, "features", "sparse rows of at most this many features are kept dense in "
        "the core set (faster kernel blocks, d floats a core vector)", low=0)
    core_reserve: int = _opt(
        4096, "vectors", "the core set's kernel cache grows in doublings up to this "
        "many vectors, then is allocated whole (lazily zeroed) up to its cap", low=1)
    few_machines: int = _opt(
        4, "machines", "kernel sums over at most this many machines' weights are summed "
        "over the float32 block in place, more by a float64 GEMM (the faster for each)",
        low=0)
    union_tile: int = _opt(
        4096, "rows", "predict: a union of more support rows than this is cut into tiles "
        "of at most this many within each class (a kernel block stays in cache)", low=1)


@dataclasses.dataclass(frozen=True, repr=False)
class ExactOptions:
    """Problems held whole in memory: the exact BVM pass, exact SMO, and the
    cost model that chooses between sampled and exact steps."""

    exact_max_cells: int = _opt(
        64_000_000, "values", "the exact BVM pass holds at most this many stored values "
        "(rows x features, or nonzeros; 4 bytes each)", low=0)
    exact_dense_columns_mb: int = _opt(
        256, "MB", "sparse rows with long matrix columns go to the exact pass dense when "
        "they fit in this", low=0)
    exact_scatter_ratio: float = _opt(
        4.0, "ratio", "contiguous multiply-adds that cost what one scattered add does "
        "(the dense-or-sparse choice of the exact pass)", low=0.0, strict=True)
    exact_block_rows: int = _opt(
        1024, "rows", "rows per block of an exact pass (its buffers stay in cache)", low=1)
    exact_batch: int = _opt(
        16, "steps", "steps an exact pass applies at once, from one read of every row. "
        "More: less memory traffic, steps chosen on older distances", low=1)
    exact_candidates: int = _opt(
        128, "rows", "furthest rows of each class an exact pass keeps as the next "
        "batch's candidates", low=1)
    exact_min_candidates: int = _opt(
        16, "rows", "... at least (rows / 32 between the two)", low=1)
    exact_small_cells: int = _opt(
        1 << 20, "values", "problems of at most this many values take one step per "
        "exact pass (they fit in cache: batching saves nothing)", low=0)
    exact_piece_values: float = _opt(
        2e7, "row-steps", "an exact pass runs in pieces of about this many row-steps "
        "(~0.1 s) between checkpoints and progress", low=1.0)
    exact_steps_per_row: int = _opt(
        200, "steps", "an exact BVM run stops after this many steps per row (plus "
        "exact_steps_extra), reported as stopped", low=1)
    exact_steps_extra: int = _opt(10000, "steps", "... plus this many", low=0)
    exact_shrink: bool = _opt(
        True, "switch", "rows far inside the ball leave the exact passes until the level ends, "
        "when they are checked again (the same certificate; the steps may differ)")
    exact_shrink_margin: float = _opt(
        0.25, "ratio", "... those whose (K~a) exceeds the violation threshold by this many "
        "times the boundary's. Less: more rows leave, more may come back violating",
        low=0.0)
    exact_shrink_share: float = _opt(
        0.0625, "share", "... the rows move only when at least this share of those in the "
        "passes would leave", low=0.0, high=1.0)
    exact_thread_rows: int = _opt(
        8192, "rows", "exact passes of fewer rows run on one thread", low=1)
    exact_thread_retry: int = _opt(
        16, "pieces", "the thread count not chosen is measured again every this many "
        "pieces", low=1)
    exact_thread_keep: int = _opt(
        3, "pieces", "pieces whose median time chooses the thread count", low=1)
    exact_thread_probe: float = _opt(
        0.25, "share", "the share of a piece's steps a probe of the other thread count "
        "runs", low=0.0, high=1.0, strict=True)
    dispatch_sampled_fixed_s: float = _opt(
        0.3e-3, "s", "the cost model: a sampled step's cost without its kernel values "
        "(tools/calibrate_dispatch.py)", low=0.0)
    dispatch_kernel_value_s: tuple = _opt(
        (0.0, 0.6e-9), "s", "... plus (a + b x values per row) per kernel value")
    dispatch_exact_row_s: tuple = _opt(
        (1.0e-9, 0.55e-9), "s", "an exact step's cost: (a + b x values per row) per row")
    dispatch_exact_speedup: float = _opt(
        1.7, "ratio", "the exact pass on every core against one, as the cost model "
        "assumes (not measured on the run: the model must not depend on the machine's "
        "load)", low=0.0, strict=True)
    svc_exact_rows: int = _opt(
        16384, "rows", 'method="auto": two-class machines of at most this many rows are '
        "solved exactly (SMO over every row), larger ones sampled", low=0)
    svc_exact_dense_mb: int = _opt(
        512, "MB", "... whose rows, dense, fit in this", low=0)
    svc_exact_matrix_mb: int = _opt(
        512, "MB", "... and, for kernels whose rows SMO cannot compute as it needs them "
        "(not the RBF), whose whole kernel matrix fits in this", low=0)
    svc_tol: float = _opt(
        2e-3, "||c||^2", "exact SMO (classification) stops when every row's margin is "
        "right within svc_tol / 2 of the margin (LIBSVM's eps 1e-3)", low=0.0, strict=True)
    svc_start: int = _opt(
        32, "rows", "exact SMO starts from equal weights on this many rows of each class",
        low=1)
    kernel_cache_mb: int = _opt(
        2000, "MB", "the exact SMO solvers' cache of kernel rows (LIBSVM's cache_size)",
        low=1)
    kernel_rows_blas: int = _opt(
        4096, "rows", "exact SMO (classification): up to this many rows, the whole "
        "kernel matrix is computed first by BLAS", low=0)


@dataclasses.dataclass(frozen=True, repr=False)
class ProgressiveOptions:
    """``train_size="auto"``: when a fit trains on every row, and how a
    progressive fit stages its sample."""

    progressive_min_rows: int = _opt(
        65536, "rows", 'train_size="auto": machines of more rows train progressively',
        low=1000)
    probe_core: int = _opt(
        2048, "vectors", 'train_size="auto": a machine first trains on every row, '
        "sampled, and keeps that model if its core set stays below this (clean data)",
        low=1)
    first_stage_rows: int = _opt(
        16384, "rows", "the first stage's training rows (doubling after)", low=1000)
    sample_mb: int = _opt(
        256, "MB", "memory of a progressive fit's training sample (rows x features x 4, or "
        "nonzeros x 8)", low=1)
    stage_cap_rows: int = _opt(
        262144, "rows", 'train_size="auto" trains on at most max(stage_cap_rows, '
        "stage_cap_sqrt x sqrt(rows)) rows", low=1000)
    stage_cap_sqrt: float = _opt(185.0, "rows", "... (see stage_cap_rows)", low=0.0)
    validation_share: float = _opt(
        0.1, "share", "a progressive fit's validation rows: this share of the machine's "
        "rows (never trained on) ...", low=0.0, high=0.25, strict=True)
    validation_min: int = _opt(1000, "rows", "... at least this many ...", low=1)
    validation_max: int = _opt(50000, "rows", "... at most this many (and a quarter)",
                               low=1)
    rho_prior: float = _opt(
        0.7, "ratio", "the learning curve: a doubling's gain over the last one's before "
        "two gains are seen (0.7: error ~ m^-0.5)", low=0.0, high=1.0, strict=True)
    rho_min: float = _opt(0.25, "ratio", "... the measured ratio, at least", low=0.0,
                          high=1.0)
    rho_max: float = _opt(0.9, "ratio", "... at most", low=0.0, high=1.0)


@dataclasses.dataclass(frozen=True, repr=False)
class CompactOptions:
    """``compact="auto"``: the compact expansion over B basis points, and the
    rule that keeps it."""

    compact_sizes: tuple = _opt(
        (256, 512, 1024, 2048, 4096), "points", "the basis sizes B tried: the largest "
        "that pays first, then halves of it while they pass")
    compact_pays: float = _opt(
        4.0, "ratio", "B is tried only where the model has more than this many times B "
        "support rows", low=1.0)
    compact_fit_rows: int = _opt(
        8192, "rows", "training rows the basis's least-squares fit uses (at least 2 B)",
        low=1)
    compact_kmeans: bool = _opt(
        True, "switch", "the basis points: k-means centres of the support rows weighted by "
        "abs(a) (true) or support rows drawn in proportion to abs(a) (false)")
    compact_check_rows: int = _opt(
        8192, "rows", "training rows that check B when no rows are held out", low=1)
    compact_sample_chunks: int = _opt(
        64, "chunks", "... drawn from at most this many random chunks", low=1)
    compact_error_tol: float = _opt(
        0.02, "points", "classification: B is kept when its validation error is within "
        "this many points of the full model's (paired)", low=0.0)
    compact_rmse_tol: float = _opt(
        0.005, "share", "regression: B is kept when its validation RMSE is within this "
        "share of the full model's", low=0.0)
    compact_agree: float = _opt(
        0.999, "share", "no held-out rows: B is kept when its labels equal the full "
        "model's on this share of the check rows", low=0.0, high=1.0)
    compact_r2_min: float = _opt(
        0.999, "R^2", "MMDA: B is kept when every feature keeps this R^2 on the check rows",
        low=0.0, high=1.0)
    kmeans_iters: int = _opt(
        5, "iterations", "Lloyd iterations after the k-means++ seeding of the basis", low=0)


@dataclasses.dataclass(frozen=True, repr=False)
class SearchOptions:
    """``C="auto"`` / ``gamma="auto"`` (CVMClassifier): successive halving
    on held-out rows over a grid that grows past its edges."""

    search_rows: int = _opt(
        8192, "rows", "fit rows of the search's last rung, at most", low=1)
    search_first_rows: int = _opt(400, "rows", "the smallest rung's rows, at least", low=1)
    search_val_early: int = _opt(
        5000, "rows", "validation rows of the rungs before the last, at most", low=1)
    search_whole_rows: int = _opt(
        131072, "rows", "a store on disk of at most this many rows is read whole for the "
        "search", low=0)
    search_val_share: float = _opt(
        0.2, "share", "validation rows of a store read whole", low=0.0, high=0.5,
        strict=True)
    search_val_max: int = _opt(20000, "rows", "validation rows of a larger store", low=1)
    search_min_validation_rows: int = _opt(
        10, "rows", "fewer held-out rows than this: no search (the default point)", low=1)
    search_c_grid: tuple = _opt((1.0, 10.0, 100.0), "C", "the first C candidates")
    search_c_step: float = _opt(10.0, "ratio", "the grid grows past its edges by this factor")
    search_c_bounds: tuple = _opt((1e-3, 1000.0), "C", "... within these")
    search_gamma_grid: tuple = _opt(
        (0.5, 1.0, 2.0, 4.0, 8.0), "1/beta", "the first gamma candidates, in units of 1 / "
        "the rows' mean squared distance")
    search_gamma_step: float = _opt(2.0, "ratio", "the grid grows past its edges by this")
    search_gamma_bounds: tuple = _opt((1.0 / 64, 64.0), "1/beta", "... within these")
    staged_c_grid: tuple = _opt(
        (1.0, 10.0, 100.0), "C", "before a progressive fit: the C candidates (a stage's "
        "BVM steps grow with C)")
    staged_c_bounds: tuple = _opt((1e-3, 100.0), "C", "... within these")
    staged_gamma_grid: tuple = _opt(
        (0.25, 0.5, 1.0), "1/beta", "before a progressive fit: the gamma candidates (a "
        "narrow kernel's lead on few rows fades as the stages grow)")
    staged_gamma_bounds: tuple = _opt((1.0 / 64, 1.0), "1/beta", "... within these")
    search_c_rows_exp: float = _opt(
        0.5, "exponent", "a rung on fewer rows than the final fit trains at C (rows / rung "
        "rows)^this (the best C of an L2-SVM falls as the rows grow)", low=0.0, high=1.0)
    halving_eta: int = _opt(
        3, "ratio", "each rung keeps the best 1 / this of its candidates", low=2)
    halving_cost_ratio: float = _opt(
        2.0, "ratio", "among candidates within a standard error, one at least this much "
        "faster is preferred", low=1.0)


@dataclasses.dataclass(frozen=True, repr=False)
class RegressionOptions:
    """CVMRegressor: its exact path, its C, its stages and its mu / gamma trials."""

    svr_exact_rows: int = _opt(
        32768, "rows", "fits of at most this many in-memory rows are solved exactly "
        "(SMO over every signed point; no max_core, checkpoints or stages)", low=0)
    svr_exact_tol: float = _opt(
        0.3, "sd(y)", 'the exact path with eps="auto": every point\'s KKT violation within '
        "this many standard deviations of the target", low=0.0, strict=True)
    svr_exact_c_per_row: float = _opt(
        2.0, "per row", 'C="auto" on the exact path: this times the rows', low=0.0,
        strict=True)
    svr_init_share: float = _opt(
        0.5, "share", "exact SVR starts from the rows of the largest |t|, this share",
        low=0.0, high=1.0, strict=True)
    svr_check_every: int = _opt(
        1000, "steps", "exact SVR: SMO steps between two checks of the relative "
        "stopping rule", low=1)
    regression_c_per_row: float = _opt(
        5.0, "per row", 'C="auto" (sampled CVM): this times the training rows', low=0.0,
        strict=True)
    regression_max_core: int = _opt(
        20000, "vectors", "max_core=None on every row: the core set's cap (a 1.6 GB "
        "kernel cache)", low=1)
    regression_stage_tol: float = _opt(
        0.02, "% of MSE", "progressive fits train the next stage only while the learning "
        "curve promises more than this (percent of the validation mean squared error)",
        low=0.0)
    regression_stage_core: int = _opt(
        11000, "vectors", "progressive fits stop before a stage whose core set would "
        "pass this (0.5 GB)", low=1)
    mu_grid: tuple = _opt(
        (0.03, 0.1, 0.3, 1.0), "sd(y)", 'mu="auto": the candidates, in standard '
        "deviations of the target")
    mu_first: int = _opt(2, "index", "gamma is chosen at mu_grid[mu_first], then mu", low=0)
    regression_gamma_grid: tuple = _opt(
        (1.0, 2.0), "1/beta", 'gamma="auto": the candidates')
    select_fit_rows: int = _opt(2000, "rows", "rows each mu / gamma trial fits", low=1)
    select_val_rows: int = _opt(2000, "rows", "rows that score the trials", low=1)
    select_fit_exact: int = _opt(
        1000, "rows", "trial rows before an exact final fit on at least "
        "select_exact_min_rows rows (each trial an O(rows^2) SMO)", low=1)
    select_exact_min_rows: int = _opt(5000, "rows", "(see select_fit_exact)", low=0)
    select_min_rows: int = _opt(
        200, "rows", "fewer rows: no trials (mu = 0.1 sd, gamma x 1)", low=0)
    select_slack: float = _opt(
        0.01, "share", "the trial with the fewest support vectors within this share of "
        "the best RMSE wins", low=0.0)
    tube_warn: float = _opt(
        0.95, "share", "a warning when the tube holds more than this share of the rows",
        low=0.0, high=1.0)
    bias_warn: float = _opt(
        0.25, "sd(y)", "a warning when the residuals' mean is further from 0 than this",
        low=0.0)


@dataclasses.dataclass(frozen=True, repr=False)
class MMDAOptions:
    """MMDATransformer's solver and its in-memory route."""

    mmda_patience: int = _opt(7, "samples", "violator-free samples that end an eps level",
                              low=1)
    mmda_sor_tol: float = _opt(
        1e-8, "1'a", "SOR's steps stop below this times 1'a", low=0.0, strict=True)
    mmda_sor_omega: float = _opt(
        1.0, "factor", "SOR's extrapolation factor omega (1: Gauss-Seidel)", low=0.0,
        high=2.0, strict=True)
    mmda_loose: float = _opt(
        0.1, "eps 1'a", "the in-memory route: solves while the core set grows stop at "
        "steps below this times eps 1'a (the last one at mmda_sor_tol)", low=0.0)
    mmda_memory_rows: int = _opt(
        65536, "rows", "the compiled in-memory route for stores held whole of at most "
        "this many rows (its time grows with the rows, the sampled route's does not)",
        low=0)
    mmda_memory_mb: int = _opt(1024, "MB", "... and dense rows of at most this", low=0)
    mmda_row_cache_mb: int = _opt(
        256, "MB", "the in-memory route's cache of kernel columns (split between "
        "threads)", low=1)
    mmda_side_by_side_mb: int = _opt(
        64, "MB", "classes side by side on threads only for rows of at most this (each "
        "thread holds a copy)", low=0)


@dataclasses.dataclass(frozen=True, repr=False)
class CheckOptions:
    """The checks around a fit: features at any scale, the finite model,
    many classes, probabilities and cross-validation."""

    range_sample_rows: int = _opt(
        5000, "rows", "rows drawn once per fit for the features' range and gamma='auto'",
        low=2)
    range_sample_chunks: int = _opt(
        64, "chunks", "... from at most this many random chunks (never a full pass)", low=1)
    gamma_pair_rows: int = _opt(
        512, "rows", "of them, the rows whose pairwise distances judge a given gamma",
        low=2)
    finite_check_rows: int = _opt(
        256, "rows", "support rows whose decision values a model must have finite", low=1)
    float32_tol: float = _opt(
        1e-5, "share", "a float64 column float32 would move by more than this share of "
        "its range is centred (or named in a warning)", low=0.0)
    float32_block_rows: int = _opt(
        8192, "rows", "rows whose float32 rounding error is measured at a time", low=1)
    many_classes: int = _opt(
        100, "classes", "a warning beyond this many classes (k (k - 1) / 2 machines)",
        low=2)
    probability_cv_rows: int = _opt(
        100000, "rows", "probability=True: up to this many rows, Platt's sigmoids from "
        "5-fold cross-validation; beyond, from rows held out", low=0)
    probability_folds: int = _opt(5, "folds", "... that many folds", low=2)
    probability_holdout: float = _opt(
        0.1, "share", "... beyond: this share of the rows held out ...", low=0.0,
        high=0.25, strict=True)
    probability_holdout_min: int = _opt(1000, "rows", "... at least this many ...", low=1)
    probability_holdout_max: int = _opt(50000, "rows", "... at most this many", low=1)
    cv_max_rows: int = _opt(
        1_000_000, "rows", "streamcvm train -v K: the store's rows read into memory, at "
        "most", low=1)


@_documented
@dataclasses.dataclass(frozen=True, repr=False)
class Options(CheckOptions, MMDAOptions, RegressionOptions, SearchOptions, CompactOptions,
              ProgressiveOptions, ExactOptions, PassOptions, SamplerOptions, _Fields):
    """Every tunable of a fit (see the module's docstring); the sections
    are its base classes: :class:`SamplerOptions`, :class:`PassOptions`,
    :class:`ExactOptions`, :class:`ProgressiveOptions`,
    :class:`CompactOptions`, :class:`SearchOptions`,
    :class:`RegressionOptions`, :class:`MMDAOptions`, :class:`CheckOptions`.
    ``Options()`` is the defaults; ``Options(svc_exact_rows=8192)`` or
    ``opts.but(svc_exact_rows=8192)`` changes one. Its repr names only the
    fields that differ from the defaults."""

    def patience(self, method: str) -> int:
        """Give the violator-free samples that end an eps level of a method.

        Parameters
        ----------
        method : {"cvm", "bvm", "fvm"}
            The sampled solver.

        Returns
        -------
        int
            ``patience_cvm``, ``patience_bvm`` or ``patience_fvm``.
        """
        return {"cvm": self.patience_cvm, "bvm": self.patience_bvm,
                "fvm": self.patience_fvm}[method]


@_documented
@dataclasses.dataclass(frozen=True, repr=False)
class SurfaceOptions(_Fields):
    """Every setting of ``streamcvm.surface`` (implicit surfaces from 3D
    points): the levels of the fit, the normals and off-surface rows, the
    local blocks, the grid and the mesh's checks."""

    scales: tuple = _opt(
        (0.2, 0.06, 0.02, 0.01), "box diagonals", "the levels' kernel widths sigma")
    mu: float = _opt(0.1, "mu", "the first level's mean slack (CVR's mu)", low=0.0,
                     strict=True)
    local_mu: float = _opt(0.3, "mu", "the local levels'", low=0.0, strict=True)
    c_per_row: float = _opt(5.0, "per row", "C = this x the rows fitted", low=0.0,
                            strict=True)
    eps: float = _opt(1e-6, "eps", "the first level's CVM eps", low=0.0, high=1.0,
                      strict=True)
    max_rows: int = _opt(4000, "rows", "rows the first level is fitted on", low=1)
    cap: int = _opt(150, "rows", "rows a local block is fitted on, at most ...", low=1)
    cap_width: float = _opt(
        0.02, "box diagonals", "... up to 4x more on a scan whose finest width (10 noise "
        "widths) is wider than this: they average the noise", low=0.0)
    max_points: int = _opt(
        100_000, "points", "points the normals and rows come from, at most (means of the "
        "points in small cells on a larger scan)", low=1)
    noise_widths: float = _opt(10.0, "noise widths", "no level narrower than this many "
                               "noise widths ...", low=0.0)
    spacings: float = _opt(0.5, "spacings", "... or this many point spacings", low=0.0)
    project: int = _opt(2, "steps", "Newton steps of the mesh's vertices onto f = 1", low=0)
    band: int = _opt(2, "grid steps", "around the points where f is evaluated exactly",
                     low=0)
    far_steps: float = _opt(4.0, "grid steps", "a point further than this many grid "
                            "steps ...", low=0.0)
    far_noise: float = _opt(4.0, "noise widths", "... and noise widths from the mesh is "
                            "far", low=0.0)
    max_far: float = _opt(0.05, "share", "a mesh with more than this share of far points "
                          "is refused", low=0.0, high=1.0)
    held: float = _opt(0.05, "share", "of the points, held out to judge each local level "
                       "...", low=0.0, high=0.5)
    min_held: int = _opt(200, "points", "... at least this many (or a tenth) ...", low=0)
    min_gain: float = _opt(0.05, "share", "... which must cut their mean |1 - f| by this "
                           "share", low=-1e300)
    thin: int = _opt(4, "points", "a scan too noisy for its normals takes them from one "
                     "point in this many ...", low=1)
    min_thinned: int = _opt(5000, "points", "... while this many are left", low=1)
    flat: float = _opt(1e-6, "ratio", "spread across / along below this: points on a "
                       "plane", low=0.0)
    neighbours: int = _opt(16, "points", "the smallest neighbourhood of a normal", low=3)
    largest: int = _opt(128, "points", "the largest, for noisy scans", low=3)
    flatness: float = _opt(0.1, "ratio", "a neighbourhood's thickness over its radius, at "
                           "most", low=0.0)
    offset: float = _opt(0.01, "box diagonals", "off-surface rows at this distance ...",
                         low=0.0)
    step: float = _opt(0.5, "target", "... with targets 1 -+ this (outside / inside)",
                       low=0.0)
    noise_offsets: float = _opt(3.0, "noise widths", "... or at this many noise widths, if "
                                "further", low=0.0)
    block: int = _opt(65536, "rows", "rows per block of neighbour work", low=1)
    block_sigmas: float = _opt(3.0, "widths", "local blocks: node spacing, in kernel "
                               "widths", low=0.0, strict=True)
    block_min_rows: int = _opt(24, "rows", "a node with fewer rows in its support gets no "
                               "block", low=1)
    block_tol: float = _opt(3e-2, "|target|", "a block's SMO stops at this, in units of "
                            "its largest |target|", low=0.0, strict=True)
    block_on_share: float = _opt(0.6, "share", "of a block's rows, at most, the points' "
                                 "(the rest off-surface)", low=0.0, high=1.0)
    block_max_iter: int = _opt(200_000, "steps", "SMO iterations per block, at most",
                               low=1)
    cut: float = _opt(16.0, "gamma d^2", "a support vector further than this (exp(-16) = "
                      "1.1e-7) adds nothing to f", low=0.0, strict=True)
    grid: int = _opt(192, "points", "grid points along the longest side, at most "
                     "(default grid) ...", low=2)
    min_grid: int = _opt(32, "points", "... and at least", low=2)
    grid_per_spacing: float = _opt(4.0, "steps", "grid steps per point spacing (default "
                                   "grid)", low=0.0, strict=True)
    grid_bytes: int = _opt(16, "bytes", "a grid node's memory while meshing", low=1)
    outlier_quantile: float = _opt(0.02, "quantile", "the central box: these quantiles per "
                                   "axis ...", low=0.0, high=0.5)
    outlier_reach: float = _opt(1.0, "box sides", "... grown by this many of its longest "
                                "sides: beyond is far", low=0.0)


@overload
def resolve(options: Options | dict[str, Any] | None) -> Options: ...
@overload
def resolve(options: _F | dict[str, Any] | None, kind: type[_F]) -> _F: ...


def resolve(options: _Fields | dict[str, Any] | None, kind: type[_Fields] = Options
            ) -> _Fields:
    """``options`` as a ``kind`` (:class:`Options` or :class:`SurfaceOptions`):
    None is the defaults, a dict the fields it changes. A ValueError (one
    line) for anything else, an unknown field or a value out of range."""
    if options is None:
        return kind()
    return kind.from_dict(options)


def recorded(params):
    """An estimator's parameters (``get_params()``) as a model and a
    checkpoint's run identity record them: ``options`` as the fields it
    changes (JSON), and left out when it is None (the defaults), so a model
    trained with the defaults records what it always did."""
    params = dict(params)
    opts = params.pop("options", None)
    if opts is not None:
        params["options"] = resolve(opts).changed()
    return params


def default(name: str, kind: type[_Fields] = Options) -> Any:
    """The default of the option ``name``: for a low-level utility (a
    sampler, a core set) called without options (tests, tools)."""
    return kind.__dataclass_fields__[name].default


if TYPE_CHECKING:
    # what the estimators' ``options=`` takes (resolved by :func:`resolve`)
    OptionsLike: TypeAlias = Options | dict[str, Any] | None
