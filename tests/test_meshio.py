"""Point files in, meshes out: PLY (ascii, binary), XYZ,
CSV with a header, a store; one-line errors naming the file and line; PLY
and OBJ meshes written atomically; the symmetric Chamfer distance."""
import numpy as np
import pytest
from plyfile import PlyData, PlyElement

from streamcvm.apps.meshio import PointsError, chamfer, read_points, write_mesh

P = np.array([[0.0, 0.5, 1.0], [-1.25, 2.0, 3.5], [4.0, -5.0, 6.0e-3]])


def _ply(path, text):
    v = np.empty(len(P), dtype=[("x", "f4"), ("y", "f4"), ("z", "f4"), ("confidence", "f4")])
    v["x"], v["y"], v["z"], v["confidence"] = P[:, 0], P[:, 1], P[:, 2], 1.0
    PlyData([PlyElement.describe(v, "vertex")], text=text).write(str(path))


@pytest.mark.parametrize("text", [True, False])
def test_ply_ascii_and_binary(tmp_path, text):
    _ply(tmp_path / "p.ply", text)
    np.testing.assert_allclose(read_points(tmp_path / "p.ply"), P, rtol=1e-6)


def test_xyz_csv_and_store(tmp_path):
    (tmp_path / "p.xyz").write_text("# scanner output\n" + "\n".join(
        " ".join(repr(float(v)) for v in row) + " 0.9" for row in P) + "\n\n")
    np.testing.assert_array_equal(read_points(tmp_path / "p.xyz"), P)
    (tmp_path / "p.csv").write_text("id,z,y,x\n" + "\n".join(
        f"{i},{float(z)!r},{float(y)!r},{float(x)!r}" for i, (x, y, z) in enumerate(P)) + "\n")
    np.testing.assert_array_equal(read_points(tmp_path / "p.csv"), P)
    from streamcvm.data.writer import StoreWriter
    with StoreWriter(str(tmp_path / "p.zarr"), 3) as w:
        w.append(P.astype(np.float32), np.zeros(3))
        w.close()
    np.testing.assert_allclose(read_points(tmp_path / "p.zarr"), P, rtol=1e-6)


def test_bad_points_name_the_file_and_line(tmp_path):
    (tmp_path / "first.xyz").write_text("1 2 three\n4 5 6\n")      # not a header: a number
    with pytest.raises(PointsError, match=r"first.xyz:1: expected three numbers"):
        read_points(tmp_path / "first.xyz")
    (tmp_path / "bad.xyz").write_text("1 2 3\n4 5 six\n")
    with pytest.raises(PointsError, match=r"bad.xyz:2: expected three numbers"):
        read_points(tmp_path / "bad.xyz")
    (tmp_path / "nan.xyz").write_text("1 2 3\n4 nan 6\n")
    with pytest.raises(PointsError, match="point 2 has a non-finite"):
        read_points(tmp_path / "nan.xyz")
    (tmp_path / "x.ply").write_text("not a ply\n")
    with pytest.raises(PointsError, match="not a readable PLY"):
        read_points(tmp_path / "x.ply")
    with pytest.raises(PointsError, match="no such file"):
        read_points(tmp_path / "missing.ply")


def test_meshes_written_as_ply_and_obj(tmp_path):
    V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    F = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])
    write_mesh(tmp_path / "m.ply", V, F)
    ply = PlyData.read(str(tmp_path / "m.ply"))
    np.testing.assert_array_equal(np.column_stack([ply["vertex"][c] for c in "xyz"]), V)
    np.testing.assert_array_equal(np.vstack(ply["face"]["vertex_indices"]), F)
    write_mesh(tmp_path / "m.obj", V, F)
    lines = (tmp_path / "m.obj").read_text().splitlines()
    assert [ln for ln in lines if ln.startswith("f ")][0] == "f 1 2 3"
    assert sum(ln.startswith("v ") for ln in lines) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.obj", "m.ply"]   # no temporaries


def test_vertices_far_from_the_origin_are_written_as_doubles(tmp_path):
    # a 1 cm tetrahedron at 1e6: float32 (or 7 digits) would round it to 6 cm
    # steps; near the origin the vertices stay float32
    V = 1e6 + 0.01 * np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    F = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])
    write_mesh(tmp_path / "m.ply", V, F)
    ply = PlyData.read(str(tmp_path / "m.ply"))
    assert ply["vertex"].data.dtype["x"] == np.dtype("<f8")
    np.testing.assert_array_equal(read_points(tmp_path / "m.ply"), V)
    write_mesh(tmp_path / "m.obj", V, F)
    O = np.array([[float(t) for t in ln.split()[1:]] for ln in
                  (tmp_path / "m.obj").read_text().splitlines() if ln.startswith("v ")])
    np.testing.assert_array_equal(O, V)
    write_mesh(tmp_path / "n.ply", V - 1e6, F)
    assert PlyData.read(str(tmp_path / "n.ply"))["vertex"].data.dtype["x"] == np.dtype("<f4")


def test_chamfer():
    A = np.zeros((1, 3))
    B = np.array([[1.0, 0, 0], [3.0, 0, 0]])
    d, ab, ba = chamfer(A, B)
    assert (ab, ba) == (1.0, 2.0) and d == 1.5


def test_a_folder_of_one_point_file(tmp_path):
    (tmp_path / "scan").mkdir()
    _ply(tmp_path / "scan" / "p.ply", False)
    (tmp_path / "scan" / "README").write_text("not points")
    np.testing.assert_allclose(read_points(tmp_path / "scan"), P, rtol=1e-6)
    _ply(tmp_path / "scan" / "q.ply", True)
    with pytest.raises(PointsError, match="2 point files"):
        read_points(tmp_path / "scan")
