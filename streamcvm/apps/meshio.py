"""Point sets in, meshes out, for surface reconstruction: read 3D
points from PLY (ascii or binary, through plyfile), XYZ, CSV or a store;
write triangle meshes as PLY (binary) or OBJ, atomically; and the symmetric
Chamfer distance that judges a mesh against points.

Bad input gets one line naming the file (and the line for text files):
:class:`PointsError`.
"""
import os

import numpy as np

class PointsError(ValueError):
    """A point file that cannot be read as 3D points (one-line message)."""


POINT_SUFFIXES = (".ply", ".xyz", ".txt", ".csv")


def read_points(path):
    """The points of ``path`` as a float64 array [n, 3]: a PLY file's vertex
    x, y, z; an XYZ / TXT file's first three whitespace-separated columns; a
    CSV file's x, y, z columns (by header name, else the first three); a
    store's X (3 columns); or a folder (not a store) holding exactly one
    point file, as a downloaded scan often comes. Rows with a non-finite
    coordinate are refused."""
    path = os.fspath(path)
    low = path.lower()
    if os.path.isdir(path) and not low.endswith(".zarr") and not any(
            os.path.exists(os.path.join(path, m)) for m in ("zarr.json", ".zgroup", ".zarray")):
        found = sorted(f for f in os.listdir(path) if f.lower().endswith(POINT_SUFFIXES)
                       and os.path.isfile(os.path.join(path, f)))
        if len(found) != 1:
            raise PointsError(f"{path}: a folder with {len(found)} point files "
                              f"({', '.join(found[:5]) or 'none'}); name one")
        return read_points(os.path.join(path, found[0]))
    if os.path.isdir(path) or low.endswith((".zarr", ".h5", ".hdf5")):
        from ..data.store import open_store
        s = open_store(path)
        if s.d != 3:
            raise PointsError(f"{path}: a store of {s.d} features, not 3D points")
        P = np.concatenate([np.asarray(c.X.toarray() if hasattr(c.X, "toarray") else c.X,
                                       np.float64) for c in s])
    elif not os.path.isfile(path):
        raise PointsError(f"{path}: no such file")
    elif low.endswith(".ply"):
        P = _read_ply(path)
    elif low.endswith(".csv"):
        P = _read_text(path, ",")
    elif low.endswith((".xyz", ".txt")):
        P = _read_text(path, None)
    else:
        raise PointsError(f"{path}: unknown point format (use .ply, .xyz, .txt, .csv or a "
                          f"store)")
    if len(P) == 0:
        raise PointsError(f"{path}: no points")
    bad = ~np.isfinite(P).all(axis=1)
    if bad.any():
        raise PointsError(f"{path}: point {int(np.argmax(bad)) + 1} has a non-finite "
                          f"coordinate")
    return P


def _read_ply(path):
    from plyfile import PlyData
    try:
        ply = PlyData.read(path)
    except Exception as e:     # plyfile raises several kinds: one line either way
        raise PointsError(f"{path}: not a readable PLY file ({str(e).splitlines()[0]})") \
            from None
    if "vertex" not in ply:
        raise PointsError(f"{path}: no 'vertex' element")
    v = ply["vertex"]
    names = v.data.dtype.names or ()
    missing = [c for c in "xyz" if c not in names]
    if missing:
        raise PointsError(f"{path}: the vertex element has no {', '.join(missing)} property")
    return np.column_stack([np.asarray(v[c], np.float64) for c in "xyz"])


def _read_text(path, sep):
    """Whitespace- (``sep`` None) or comma-separated rows, '#' comments. The
    first line may be a header (then a CSV's x, y, z columns are found by
    name); any other line that is not three numbers is an error."""
    cols = (0, 1, 2)
    rows = []
    first = True
    with open(path) as f:
        for no, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = [p.strip() for p in (text.split(sep) if sep else text.split())]
            try:
                rows.append([float(parts[c]) for c in cols])
            except (ValueError, IndexError):
                if not first or any(_number(p) for p in parts):    # a header has no numbers
                    raise PointsError(f"{path}:{no}: expected three numbers (x y z), got "
                                      f"{text[:60]!r}") from None
                low = [p.lower() for p in parts]
                if all(c in low for c in "xyz"):
                    cols = tuple(low.index(c) for c in "xyz")
            first = False
    return np.asarray(rows, np.float64).reshape(-1, 3)


def _number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def write_mesh(path, vertices, faces, replace=True):
    """Write a triangle mesh: ``.ply`` (binary little-endian, int32 faces)
    or ``.obj`` (text, 1-based indices), under a temporary name renamed into
    place (:func:`streamcvm.data.atomic.atomic_file`; ``replace``: what may
    be at ``path``, :func:`streamcvm.data.atomic.publish`). The vertices are
    float32 (PLY) or 7 digits (OBJ) when that keeps them to ``1e-5`` of the
    mesh's size, else float64 (PLY) or 17 digits (OBJ): a scan far from the
    origin (coordinates of 1e6 in metres) would otherwise be rounded to
    centimetres."""
    from ..data.atomic import atomic_file
    path = os.fspath(path)
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int32)
    wide = _needs_double(V)
    low = path.lower()
    if low.endswith(".ply"):
        from plyfile import PlyData, PlyElement
        t = "f8" if wide else "f4"
        vert = np.empty(len(V), dtype=[("x", t), ("y", t), ("z", t)])
        vert["x"], vert["y"], vert["z"] = V[:, 0], V[:, 1], V[:, 2]
        face = np.empty(len(F), dtype=[("vertex_indices", "i4", (3,))])
        face["vertex_indices"] = F
        data = PlyData([PlyElement.describe(vert, "vertex"), PlyElement.describe(face, "face")],
                       text=False, byte_order="<")
        with atomic_file(path, mode="wb", replace=replace) as f:
            data.write(f)
    elif low.endswith(".obj"):
        with atomic_file(path, replace=replace) as f:
            f.write("# streamcvm surface\n")
            np.savetxt(f, V, fmt="v %.17g %.17g %.17g" if wide else "v %.7g %.7g %.7g")
            np.savetxt(f, F + 1, fmt="f %d %d %d")
    else:
        raise ValueError(f"{path}: a mesh is written as .ply or .obj")
    return path


def _needs_double(V):
    """True when float32 (or 7 digits) would move a vertex of ``V`` by more
    than 1e-5 of the mesh's size."""
    if len(V) == 0:
        return False
    size = float((V.max(0) - V.min(0)).max())
    # 7 significant digits err by up to 5e-7 of the largest coordinate
    return 5e-7 * float(np.abs(V).max()) > 1e-5 * size


def chamfer(A, B):
    """Symmetric Chamfer distance between point sets A and B: the mean of
    (mean distance from each point of A to its nearest in B) and the same
    from B to A. Also returns the two one-sided means."""
    from scipy.spatial import cKDTree
    ab = cKDTree(B).query(A)[0].mean()
    ba = cKDTree(A).query(B)[0].mean()
    return 0.5 * (ab + ba), ab, ba


def render_png(path, vertices, faces, *, size=800, elev=20.0, azim=-60.0, title=None, up="z",
               replace=True):
    """A shaded picture of a triangle mesh, headless (matplotlib's Agg):
    each face lit by its normal against one light, written atomically.
    ``up``: the axis drawn upwards ("x", "y" or "z"; scanned PLY files are
    often y-up)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection
    from ..data.atomic import atomic_file
    V = np.asarray(vertices, np.float64)
    if up not in ("x", "y", "z"):
        raise ValueError(f"up must be 'x', 'y' or 'z', got {up!r}")
    # a rotation (no mirror) taking the up axis to z
    V = {"z": V, "y": V[:, [2, 0, 1]], "x": V[:, [1, 2, 0]]}[up]
    F = np.asarray(faces, np.int64)
    tri = V[F]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    light = np.array([0.3, -0.5, 0.8])
    shade = 0.25 + 0.75 * np.abs(n @ (light / np.linalg.norm(light)))
    fig = Figure(figsize=(size / 100, size / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(projection="3d")
    col = np.column_stack([0.75 * shade, 0.72 * shade, 0.65 * shade, np.ones_like(shade)])
    ax.add_collection3d(Poly3DCollection(tri, facecolors=col, edgecolors="none"))
    lo, hi = V.min(0), V.max(0)
    c, r = (lo + hi) / 2, (hi - lo).max() / 2
    ax.set_xlim(c[0] - r, c[0] + r)
    ax.set_ylim(c[1] - r, c[1] + r)
    ax.set_zlim(c[2] - r, c[2] + r)
    ax.set_box_aspect((1, 1, 1))
    ax.view_init(elev=elev, azim=azim)
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    with atomic_file(os.fspath(path), mode="wb", replace=replace) as f:
        fig.savefig(f, format="png")
    return path
