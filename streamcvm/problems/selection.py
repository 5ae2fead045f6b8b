"""Hyperparameters chosen by held-out rows: successive halving over growing
training rows, on a grid that grows past its edges where the data asks.

What ``C="auto"`` / ``gamma="auto"`` (classification) and ``mu="auto"`` /
``gamma="auto"`` (regression) run. Every candidate of the grid is trained on
the first ``rungs[0]`` rows of a random order of the training rows and
scored on the validation rows (never trained on); the best third
(``eta``, the option ``halving_eta``) goes on to the next rung's rows, and so on; the best candidate of
the last rung is chosen (Jamieson & Talwalkar's successive halving, the
"grid search on a subsample, refined on more rows" of a careful user, at a
fraction of a full grid's fits: the fits on few rows are cheap, and a
kernel machine's ranking of (C, gamma) on a third of the rows mostly holds
on all of them).

The first rung's best candidate on an edge of the grid (the largest C
tried, the smallest gamma ...) means the grid stopped short of what the
data asks: its neighbours beyond the edge join that rung, and again while
the best moves outward (within each axis' limits). Later rungs only
narrow the candidates down (their fits cost more). Every fit is recorded: the
trials are what ``selection_`` and ``streamcvm info`` show.

The search knows nothing of models: ``evaluate(params, rows)`` trains one
candidate on the first ``rows`` training rows and returns its per-row
validation losses (0/1 errors, squared errors) and anything worth keeping
(``n_support``).
"""
import dataclasses
import math
import time

import numpy as np

from ..options import default

@dataclasses.dataclass(frozen=True)
class Axis:
    """One searched parameter: its starting ``values`` (ascending), the
    factor ``step`` between a value and the next one tried beyond an edge,
    and the limits ``lo`` / ``hi`` the grid never grows past."""
    name: str
    values: tuple
    step: float
    lo: float
    hi: float


def rung_sizes(rows, first, eta=default("halving_eta"), levels=3):
    """``levels`` training-row counts growing by ``eta`` up to ``rows``
    (``rows / eta^2, rows / eta, rows`` for 3), none below ``first``
    (fewer rungs when ``rows`` is small)."""
    out = [int(rows)]
    while len(out) < levels and out[0] / eta >= first:
        out.insert(0, int(math.ceil(out[0] / eta)))
    return out


def _key(params, axes):
    return tuple(float(params[a.name]) for a in axes)


def _beyond(best, axes):
    """The neighbours of ``best`` past the starting grid's edges: along each
    axis where it lies on or beyond the edge, the next value out (within
    the axis' limits)."""
    out = []
    for a in axes:
        v = float(best[a.name])
        if v >= max(a.values) and v * a.step <= a.hi * (1 + 1e-9):
            out.append(dict(best, **{a.name: v * a.step}))
        if v <= min(a.values) and v / a.step >= a.lo * (1 - 1e-9):
            out.append(dict(best, **{a.name: v / a.step}))
    return out


def _ranking(names):
    """Trials' order: validation loss, then (a tie) the smoother model, by
    the axes' values in their order (smaller C, then smaller gamma): a tie
    between a point on the grid's edge and one inside does not grow the
    grid."""
    return lambda t: (t["val_loss"],) + tuple(t[n] for n in names)


def tied(trials, best, losses):
    """The trials (of one rung) the validation rows cannot tell from
    ``best``: their summed paired loss difference within one standard
    error of it (``sum d <= sqrt(sum d^2)``, d = their per-row losses less
    the best's; for 0/1 losses, errors added less errors fixed within the
    square root of the rows where the two disagree)."""
    out = []
    lb = losses[id(best)]
    for t in trials:
        d = losses[id(t)] - lb
        if d.sum() <= math.sqrt(float(d @ d)):
            out.append(t)
    return out


def halving(axes, rungs, evaluate, *, eta=default("halving_eta"),
            cost_ratio=default("halving_cost_ratio"), fixed=None, callback=None, cost=None,
            anchor=None):
    """Successive halving over ``rungs`` (ascending training-row counts) on
    the grid of ``axes`` (:class:`Axis`), growing past its edges.

    ``evaluate(params, rows)`` -> ``{"losses": per validation row, ...}``
    (other keys are kept in the trial). ``fixed``: parameters every
    candidate gets as they are. ``callback(trial, best)`` after each fit.
    ``cost``: the key of what ``evaluate`` returns that measures a fit's
    cost (deterministic, e.g. solver steps). Where costs differ by
    ``cost_ratio`` (the option ``halving_cost_ratio``) they count: after the
    first rung (whose fits are cheap and whose ranking is the noisiest), a
    candidate that ranks below a survivor ``cost_ratio`` times cheaper does
    not go on (it is worse and costlier; the next one in rank does), and the
    last rung chooses, among the candidates :func:`tied` with its best and
    at most 1 / ``cost_ratio``
    of its cost, the best (the validation rows cannot tell them apart, and
    the final fit at the chosen point costs in proportion). ``anchor``: a
    point of the grid (its axes' values) that goes on to every rung and is
    chosen whenever the last rung finds it tied with its best: a default
    is left only on the validation rows' evidence. Returns (the chosen
    params, the trials: one dict per fit with the params, ``rung``,
    ``rows``, ``val_loss`` (mean), ``val_se`` (its standard error),
    ``seconds``, what ``evaluate`` added, and ``tied``: whether the last
    rung found it tied with its best)."""
    fixed = dict(fixed or {})
    names = tuple(a.name for a in axes)
    _rank = _ranking(names)
    alive = [dict(fixed, **dict(zip([a.name for a in axes], vals)))
             for vals in _product([a.values for a in axes])]
    trials = []
    best = None
    for r, rows in enumerate(rungs):
        done, kept = {}, {}

        def run(p, r=r, rows=rows, done=done, kept=kept):
            t0 = time.perf_counter()
            got = dict(evaluate(p, rows))
            losses = np.asarray(got.pop("losses"), np.float64)
            if not len(losses):     # every candidate would score 0 +- NaN: no ranking
                raise ValueError("halving needs validation rows: evaluate returned no "
                                 "losses, so the candidates cannot be ranked")
            n = len(losses)
            t = dict(p, rung=r, rows=int(rows), val_loss=float(losses.sum() / n),
                     val_se=float(losses.std() / math.sqrt(n)),
                     seconds=round(time.perf_counter() - t0, 4), **got)
            trials.append(t)
            kept[id(t)] = losses
            done[_key(p, axes)] = t
            if callback is not None:
                callback(t, min(done.values(), key=_rank))
        for p in alive:
            run(p)
        while r == 0:   # the best on an edge: the grid grows past it (on the cheap rung)
            new = [p for p in _beyond(min(done.values(), key=_rank), axes)
                   if _key(p, axes) not in done]
            if not new:
                break
            for p in new:
                run(p)
        best = min(done.values(), key=_rank)
        ranked = sorted(done.values(), key=_rank)
        keep = max(1, int(math.ceil(len(ranked) / eta)))
        goes = []
        for t in ranked:
            if len(goes) == keep:
                break
            if cost is None or r == 0 or all(t[cost] < cost_ratio * g[cost] for g in goes):
                goes.append(t)
        if anchor is not None and _key(anchor, axes) in done and \
                all(_key(t, axes) != _key(anchor, axes) for t in goes):
            goes.append(done[_key(anchor, axes)])
        alive = [{k: t[k] for k in list(fixed) + [a.name for a in axes]} for t in goes]
    ties = tied(list(done.values()), best, kept)
    for t in ties:
        t["tied"] = True
    home = [t for t in ties if anchor is not None and _key(t, axes) == _key(anchor, axes)]
    cheap = [t for t in ties if cost is not None and cost_ratio * t[cost] <= best[cost]]
    if home:
        best = home[0]
    elif cheap:
        best = min(cheap, key=_rank)
    chosen = {k: best[k] for k in list(fixed) + [a.name for a in axes]}
    return chosen, trials


def _product(lists):
    out = [()]
    for vals in lists:
        out = [o + (float(v),) for o in out for v in vals]
    return out
