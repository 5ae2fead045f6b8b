"""``streamcvm surface``: a mesh from a 3D point set (:mod:`streamcvm.apps.surface`)."""
import math
import os
import sys

from .common import (add_checkpoint_replace, add_cluster_args, check_checkpoint_dir,
                     checkpoint_arg, positive_int, runner_of)


def add(sub):
    from ..apps import surface
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
    p.add_argument("--grid", type=positive_int, default=surface.GRID,
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
    add_checkpoint_replace(p)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing file at MESH or PNG (the points never)")
    add_cluster_args(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args):
    import time
    from tqdm.auto import tqdm
    from ..apps import surface
    from ..apps.meshio import PointsError, read_points, render_png, write_mesh
    from ..data.outputs import check_output
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
        P = surface.check_points(P)
    except ValueError as e:
        raise SystemExit(f"streamcvm surface: error: {args.points}: {e}") from None
    say = (lambda s: None) if args.quiet else \
        (lambda s: print(s, file=sys.stderr, flush=True))
    say(f"{len(P):,} points from {args.points}")
    t = time.perf_counter()
    with tqdm(total=len(scales), unit="level", desc="fit", disable=True if args.quiet
              else None, leave=False) as bar, runner_of(args, quiet=args.quiet) as runner:
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
