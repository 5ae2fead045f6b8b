"""``streamcvm surface``: a mesh from a 3D point set (:mod:`streamcvm.apps.surface`)."""
import math
import os
import sys

from .common import (Default, add_checkpoint_replace, add_cluster_args, check_checkpoint_dir,
                     checkpoint_arg, given, option, positive_int, runner_of,
                     signature_default)


def _surface(name):
    """A getter of ``streamcvm.surface.<name>``, imported when called."""
    def get():
        from ..apps import surface
        return getattr(surface, name)
    return get


_fit, _mesh = _surface("fit"), _surface("mesh")


def _default(name):
    """The default of SurfaceOptions' field ``name``, for the help."""
    def get():
        from ..options import SurfaceOptions
        return getattr(SurfaceOptions(), name)
    return Default(get)


def add(sub):
    p = sub.add_parser(
        "surface", help="reconstruct a surface mesh from a 3D point set (multi-scale CVR)",
        description="Fit f = 1 on the points with Core Vector Regression at kernel widths "
                    "coarse to fine (the cvr paper, sec. 4.2; off-surface rows along the "
                    "normals give f its slope; the finer widths as many local fits), evaluate "
                    "f on a grid near the points and write the level set f = 1 (marching "
                    "cubes) as a mesh. A mesh far from the points is refused.")
    p.add_argument("points", metavar="POINTS",
                   help="a .ply (ascii or binary), .xyz / .txt, .csv point set, a store "
                        "of 3 columns, or a folder holding one point file")
    p.add_argument("-o", "--output", required=True, metavar="MESH",
                   help="the mesh to write: .ply (binary) or .obj")
    p.add_argument("--png", metavar="PNG", help="also render the mesh to this picture")
    p.add_argument("--up", choices=["x", "y", "z"], default="y",
                   help="the axis drawn upwards in --png (default y, as scanned PLY files)")
    option(p, "--grid", type=positive_int, lib=_default("grid"),
           help="grid points along the box's longest side (default: 4 per point spacing, "
                "at most %(lib)s); a grid that cannot fit in memory is refused")
    option(p, "--scales", lib=Default(lambda: ",".join(
               f"{s:g}" for s in _default("scales").read())),
           help="kernel widths, coarse to fine, in box diagonals (default %(lib)s)")
    option(p, "--seed", type=int, lib=signature_default(_fit, "seed"),
           help="seed of each level's row sample (default %(lib)s)")
    p.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help="a surface setting (streamcvm info --options lists them)")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="snapshot the fit here after each level (crash-safe)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the fit after the last level snapshotted in DIR")
    add_checkpoint_replace(p)
    p.add_argument("--keep-far", action="store_true",
                   help="write the mesh even when it lies far from the points (by default "
                        "such a mesh is refused: exit 1, nothing written)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file at MESH or PNG (the points never)")
    add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bars and no summary lines (errors are still printed)")
    p.set_defaults(func=run)


EXTRA = ("plyfile", "skimage", "matplotlib")   # the surface extra's packages, as imported


def check_extra(png=False):
    """A one-line error naming the ``surface`` extra when its packages
    (plyfile for point and mesh files, scikit-image for marching cubes,
    matplotlib for --png) are not installed: before any work."""
    import importlib
    for name in EXTRA if png else EXTRA[:2]:
        try:
            importlib.import_module(name)
        except ImportError:
            pip = "scikit-image" if name == "skimage" else name
            raise SystemExit(f"streamcvm surface: error: needs {pip}, of the surface extra: "
                             f"pip install 'streamcvm[surface]'") from None


def run(args):
    import time
    check_extra(png=getattr(args, "png", None) is not None)
    from tqdm.auto import tqdm
    from ..apps import surface
    from ..apps.meshio import PointsError, read_points, render_png, write_mesh
    from ..data.outputs import check_output
    args.store = args.points            # for the checkpoint-folder checks
    fit_kw = given(args, seed=True)
    if args.scales is not None:
        try:
            fit_kw["scales"] = tuple(float(v) for v in args.scales.split(","))
        except ValueError:
            raise SystemExit(f"streamcvm surface: error: --scales {args.scales}: widths "
                             f"separated by commas, e.g. 0.2,0.06,0.02") from None
        if not fit_kw["scales"] or not all(math.isfinite(v) and v > 0
                                           for v in fit_kw["scales"]):
            raise SystemExit(f"streamcvm surface: error: --scales {args.scales}: widths must "
                             f"be positive finite numbers")
    opts = None
    if args.option:
        from ..options import SurfaceOptions
        try:
            opts = SurfaceOptions.parse(args.option)
        except ValueError as e:
            raise SystemExit(f"streamcvm surface: error: {e}") from None
        fit_kw["options"] = opts
    if args.grid is not None and args.grid < 8:
        raise SystemExit("streamcvm surface: error: --grid must be at least 8")
    if not args.output.lower().endswith((".ply", ".obj")):
        raise SystemExit(f"streamcvm surface: error: {args.output}: the mesh is written as "
                         f".ply or .obj")
    if args.png is not None and not args.png.lower().endswith(".png"):
        raise SystemExit(f"streamcvm surface: error: {args.png}: --png needs a .png name")
    if args.png is not None and os.path.abspath(args.png) == os.path.abspath(args.output):
        raise SystemExit("streamcvm surface: error: --png and -o name the same path")
    ck = checkpoint_arg(args)
    inputs = [args.points, ck]
    mesh_target = check_output(args.output, what="mesh", inputs=inputs,
                               overwrite=args.overwrite)
    png_target = None
    if args.png is not None:
        png_target = check_output(args.png, what="picture", inputs=inputs,
                                  overwrite=args.overwrite)
    check_checkpoint_dir(args, ck)
    try:
        P = read_points(args.points)
    except PointsError as e:
        raise SystemExit(f"streamcvm surface: error: {e}") from None
    try:
        P = surface.check_points(P, opts)
    except ValueError as e:
        raise SystemExit(f"streamcvm surface: error: {args.points}: {e}") from None
    if args.grid is not None:
        try:            # before the fit: a grid that cannot fit is refused at once
            surface.check_grid(*surface.points_box(P, options=opts), args.grid, options=opts)
        except ValueError as e:
            raise SystemExit(f"streamcvm surface: error: {e}") from None
    say = (lambda s: None) if args.quiet else \
        (lambda s: print(s, file=sys.stderr, flush=True))
    say(f"{len(P):,} points from {args.points}")
    t = time.perf_counter()
    with tqdm(total=None, unit="level", desc="fit", disable=True if args.quiet
              else None, leave=False) as bar, runner_of(args, quiet=args.quiet) as runner:
        def levels(done, total):
            bar.total = total
            bar.n = done
            bar.refresh()
        try:
            model = surface.fit(P, **fit_kw,
                                n_jobs=runner.threads if runner.client is None else 1,
                                checkpoint_dir=ck, resume=bool(args.resume),
                                checkpoint_replace=args.checkpoint_replace, log=say,
                                progress=levels)
        except ValueError as e:
            raise SystemExit(f"streamcvm surface: error: {e}") from None
        fit_s = time.perf_counter() - t
        t = time.perf_counter()
        with tqdm(total=1, unit="chunk", desc="grid", disable=True if args.quiet else None,
                  leave=False) as gbar:
            def slabs(done, total):
                gbar.total = total
                gbar.n = done
                gbar.refresh()
            try:
                V, F = surface.mesh(model, P, runner=runner, progress=slabs,
                                    **({"keep_far": True} if args.keep_far else {}),
                                    **given(args, grid=True))
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
