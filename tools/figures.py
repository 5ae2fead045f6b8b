#!/usr/bin/env python
"""The documentation's figures, drawn from the benchmarks' JSON results.

Each figure reads one results file that a benchmark in tools/ wrote (its
command and commit are in the file, and the figure prints them in its
footer), so a figure is as current as its run:

- ``scale-time-memory.png`` and ``scale-accuracy.png``: train time, peak RSS
  and test accuracy against the training rows, streamcvm against
  scikit-learn-intelex's SVC and Nystroem + LinearSVC
  (``bench_scale_accuracy.py --json results/scale.json``);
- ``stages.png``: the stages' validation error against the rows of the
  largest progressive fit in the same file;
- ``predict-compact.png``: predict time of each model's compact expansion
  against its full one (``bench_predict.py --json results/predict.json``);
- ``surfaces.png``: streamcvm's meshes beside screened Poisson's, one row per
  shape, titled with each mesh's Chamfer distance, time and peak RSS
  (``bench_surface.py --json results/surface.json --out DIR``; the meshes are
  read from that run's ``--out`` folder, or from ``--meshes``).

Usage::

    python tools/figures.py [--results results] [--out docs/figures] [--only NAME ...]
                            [--meshes DIR]

A results file that is missing is reported and its figures are skipped; the
exit status is 1 if any figure asked for could not be drawn.
"""
import argparse
import json
import os
import re
import sys
import textwrap

FIGURES = ("scale-time-memory", "scale-accuracy", "stages", "predict-compact", "surfaces")
SOURCES = {"scale-time-memory": "scale.json", "scale-accuracy": "scale.json",
           "stages": "scale.json", "predict-compact": "predict.json",
           "surfaces": "surface.json"}
SURFACE_UP = {"bunny": "y"}             # the scan is y-up; the generated shapes are z-up
SURFACE_MAX_FACES = 2_000_000           # larger meshes take too long to shade
STYLE = {"streamcvm": dict(color="#1f77b4", marker="o"),
         "sklearnex": dict(color="#d62728", marker="s"),
         "nystroem": dict(color="#2ca02c", marker="^"),
         "nystroem4000": dict(color="#98df8a", marker="v"),
         "svc": dict(color="#ff7f0e", marker="D")}


def family(method):
    """The line a run of ``method`` belongs to (None: not drawn)."""
    m = method.lower()
    if m.startswith("streamcvm") and "@" not in m and "rev" not in m:
        return "streamcvm"
    if m.startswith("sklearnex svc"):
        return "sklearnex" if "subsample" not in m else None
    if m.startswith("nystroem k=1000"):
        return "nystroem"
    if m.startswith("nystroem k=4000"):
        return "nystroem4000"
    return None


LABEL = {"streamcvm": "streamcvm (from a store)", "sklearnex": "sklearnex SVC (all rows)",
         "nystroem": "Nystroem(1000) + LinearSVC", "nystroem4000": "Nystroem(4000) + LinearSVC"}


def human(n, _pos=None):
    """200K, 2M, 20M: a row count as the tables write it."""
    for unit, div in (("M", 1e6), ("K", 1e3)):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{n:.0f}"


def rows_axis(ax, ticks=None):
    """A log axis of rows, labelled 200K, 2M, ... (at ``ticks``, the runs' rows)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    ax.set_xscale("log")
    if ticks:
        ax.set_xticks(sorted(set(ticks)))
    ax.xaxis.set_major_formatter(FuncFormatter(human))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plain_log_y(ax):
    from matplotlib.ticker import FuncFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"
                                               if str(int(v))[0] in "25" else ""))


def footer(fig, res, source):
    """The run's command and commit under the figure, wrapped to its width; returns
    the fraction of the height it takes (the bottom of tight_layout's rect)."""
    text = textwrap.fill(f"{source}: {res.get('command', '?')} at {res.get('commit', '?')}",
                         width=int(fig.get_figwidth() * 19))
    fig.text(0.01, 0.005, text, fontsize=6, color="0.4", ha="left", va="bottom")
    return (0.01 + 0.1 * (text.count("\n") + 1)) / fig.get_figheight()


def scale_runs(res):
    """``{family: [(rows, run), ...]}`` of the first dataset in a bench_scale_accuracy
    result, runs that failed left out, sorted by rows."""
    ds = next(iter(res["datasets"].values()))
    out = {}
    for r in ds["runs"]:
        fam = family(r.get("method", ""))
        if fam is None or "error" in r or r.get("train_s") is None:
            continue
        out.setdefault(fam, []).append((r["rows"], r))
    return {k: sorted(v, key=lambda t: t[0]) for k, v in out.items()}


def scale_timeouts(res):
    """``[(family, rows, seconds)]``: the runs of the first dataset killed at their
    time budget before their fit was done ("> T s (timeout)")."""
    ds = next(iter(res["datasets"].values()))
    out = []
    for r in ds["runs"]:
        fam = family(r.get("method", ""))
        m = re.match(r"> ([\d.]+) s \(timeout\)", r.get("error") or "")
        if fam is not None and m:
            out.append((fam, r["rows"], float(m.group(1))))
    return out


def draw_scale_time_memory(plt, res, source):
    runs = scale_runs(res)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    for fam, n, limit in scale_timeouts(res):   # killed at the budget: an x at the budget
        a.plot([n], [limit], linestyle="none", marker="x", color=STYLE[fam]["color"])
        a.annotate(f"not done in {limit:g} s", (n, limit), textcoords="offset points",
                   xytext=(4, 4), fontsize=6, color=STYLE[fam]["color"])
    for fam, rs in runs.items():
        x = [n for n, _ in rs]
        a.plot(x, [r["train_s"] for _, r in rs], label=LABEL.get(fam, fam), **STYLE[fam])
        for n, r in rs:         # a reference fitted on a subsample says so
            if r.get("fit_rows") and r["fit_rows"] < n:
                a.annotate(f"fit on {human(r['fit_rows'])}", (n, r["train_s"]),
                           textcoords="offset points", xytext=(4, -9), fontsize=6,
                           color=STYLE[fam]["color"])
        pts = [(n, r["peak_rss"] / 2 ** 20) for n, r in rs if r.get("peak_rss")]
        if pts:
            b.plot(*zip(*pts), label=LABEL.get(fam, fam), **STYLE[fam])
    ticks = [n for rs in runs.values() for n, _ in rs] + [n for _, n, _ in scale_timeouts(res)]
    for ax, what in ((a, "train time (s)"), (b, "peak RSS (MiB)")):
        rows_axis(ax, ticks)
        plain_log_y(ax)
        ax.set_xlabel("training rows")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=7)
    fig.suptitle("Train time and memory against the rows (2 threads each)", fontsize=10)
    fig.tight_layout(rect=(0, footer(fig, res, source), 1, 1))
    return fig


def draw_scale_accuracy(plt, res, source):
    runs = scale_runs(res)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for fam, rs in runs.items():
        pts = [(r.get("fit_rows") or n, 100 * r["accuracy"]) for n, r in rs
               if r.get("accuracy") is not None]
        if pts:
            ax.plot(*zip(*pts), label=LABEL.get(fam, fam), **STYLE[fam])
    rows_axis(ax)
    ax.set_xlabel("rows the model was fitted on")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Accuracy against the rows, 500,000 held-out rows", fontsize=10)
    fig.tight_layout(rect=(0, footer(fig, res, source), 1, 1))
    return fig


def draw_stages(plt, res, source):
    runs = scale_runs(res).get("streamcvm", [])
    staged = [(n, r) for n, r in runs if r.get("stages") and r["stages"][0]]
    if not staged:
        raise LookupError("no streamcvm run in it recorded stages")
    n, r = staged[-1]
    st = r["stages"][0]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot([s["rows"] for s in st], [100 * s["stage_validation_error"] for s in st],
            **STYLE["streamcvm"])
    for s in st:
        ax.annotate(f"{s['core_size']:,} SV", (s["rows"], 100 * s["stage_validation_error"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=6)
    rows_axis(ax)
    ax.set_xlabel("rows of the stage's sample")
    ax.set_ylabel("validation error (%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"The stages of one fit on {n:,} rows: where the learning curve flattens",
                 fontsize=9)
    fig.tight_layout(rect=(0, footer(fig, res, source), 1, 1))
    return fig


def draw_predict_compact(plt, res, source):
    runs = [r for r in res["runs"] if r.get("exact_s") and r.get("compact_s") and r.get("B")]
    if not runs:
        raise LookupError("no model in it kept a compact expansion")
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.45 * len(runs)))
    y = range(len(runs))
    ax.barh([i + 0.2 for i in y], [r["exact_s"] for r in runs], height=0.4,
            label="full expansion (--exact)", color="0.7")
    ax.barh([i - 0.2 for i in y], [r["compact_s"] for r in runs], height=0.4,
            label="compact expansion", color=STYLE["streamcvm"]["color"])
    ax.set_yticks(list(y))
    ax.set_yticklabels([f"{r['case']}: {r.get('n_test', 0):,} rows\n{r['n_sv']:,} SV, "
                        f"B = {r['B']:,}" for r in runs], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("predict time (s)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout(rect=(0, footer(fig, res, source), 1, 1))
    return fig


def surface_meshes_dir(res, meshes=None):
    """The folder of a bench_surface run's meshes: ``meshes``, else its ``--out``."""
    if meshes:
        return meshes
    m = re.search(r"--out[ =](\S+)", res.get("command", ""))
    if not m:
        raise LookupError("the run wrote no meshes (no --out in its command); pass --meshes")
    return m.group(1)


def crop_white(img, pad=4):
    """An RGB(A) image cut to the box of its pixels that are not white."""
    import numpy as np
    ink = np.argwhere((img[..., :3] < 0.98).any(axis=-1))
    if not len(ink):
        return img
    (y0, x0), (y1, x1) = ink.min(0), ink.max(0)
    return img[max(y0 - pad, 0):y1 + pad + 1, max(x0 - pad, 0):x1 + pad + 1]


def draw_surfaces(plt, res, source, meshes=None):
    import tempfile
    import trimesh
    from streamcvm.apps.meshio import render_png
    folder = surface_meshes_dir(res, meshes)
    runs = [r for r in res["runs"] if "error" not in r]
    methods = sorted({r["method"] for r in runs}, key=lambda m: (m != "streamcvm", m))
    shapes = []
    for s in dict.fromkeys(r["shape"] for r in runs):
        missing = [m for m in methods if not os.path.exists(os.path.join(folder, f"{s}-{m}.ply"))]
        faces = max(r["faces"] for r in runs if r["shape"] == s)
        if missing or faces > SURFACE_MAX_FACES:
            why = (f"no mesh of {', '.join(missing)} in {folder}" if missing
                   else f"{faces:,} faces, above {SURFACE_MAX_FACES:,}")
            print(f"figures: surfaces: {s} left out ({why})", file=sys.stderr)
            continue
        shapes.append(s)
    if not shapes:
        raise LookupError(f"no shape has every method's mesh in {folder}")
    fig, axes = plt.subplots(len(shapes), len(methods), squeeze=False,
                             figsize=(3.2 * len(methods), 3.4 * len(shapes)))
    with tempfile.TemporaryDirectory() as tmp:
        for i, shape in enumerate(shapes):
            for j, method in enumerate(methods):
                r = next(r for r in runs if r["shape"] == shape and r["method"] == method)
                mesh = trimesh.load(os.path.join(folder, f"{shape}-{method}.ply"), process=False)
                png = render_png(os.path.join(tmp, "m.png"), mesh.vertices, mesh.faces,
                                 size=500, up=SURFACE_UP.get(shape, "z"))
                ax = axes[i][j]
                ax.imshow(crop_white(plt.imread(png)))
                ax.set_axis_off()
                closed = "closed" if r.get("watertight") else "not closed"
                ax.set_title(f"{shape}, {method}: {r['points']:,} points\n"
                             f"Chamfer {r['chamfer']:.3f}%, {closed}\n"
                             f"{r['seconds']:.0f} s, {r['peak_mib']:,.0f} MiB", fontsize=7)
    fig.suptitle("Surfaces: streamcvm beside screened Poisson "
                 f"({res.get('threads', '?')} threads each)", fontsize=10)
    fig.tight_layout(rect=(0, footer(fig, res, source), 1, 1))
    return fig


DRAW = {"scale-time-memory": draw_scale_time_memory, "scale-accuracy": draw_scale_accuracy,
        "stages": draw_stages, "predict-compact": draw_predict_compact,
        "surfaces": draw_surfaces}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="folder of the JSON results")
    ap.add_argument("--out", default=os.path.join("docs", "figures"))
    ap.add_argument("--only", nargs="+", choices=FIGURES)
    ap.add_argument("--meshes", help="folder of bench_surface's meshes (default: its --out)")
    a = ap.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for name in a.only or FIGURES:
        source = os.path.join(a.results, SOURCES[name])
        try:
            with open(source) as f:
                res = json.load(f)
            extra = {"meshes": a.meshes} if name == "surfaces" else {}
            fig = DRAW[name](plt, res, os.path.basename(source), **extra)
        except (OSError, ImportError, LookupError, KeyError, ValueError) as e:
            print(f"figures: {name}: not drawn ({source}: {e})", file=sys.stderr)
            failed += 1
            continue
        path = os.path.join(a.out, name + ".png")
        fig.savefig(path, dpi=150)
        plt.close(fig)
        print(f"wrote {path} from {source} ({res.get('commit', '?')})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
