"""Files as they come: a UTF-8 BOM, lines longer than the sniff window (wide
CSV tables, long svmlight rows), ';' tables with decimal commas, NaN query
ids. Each is read as a plain file would be, or refused in one line."""
import bz2
import gzip

import numpy as np
import pytest

from conftest import read_all, run_cli
from streamcvm import open_store
from streamcvm.ingest import IngestError, ingest
from streamcvm.ingest.sources import Source

BOM = b"\xef\xbb\xbf"


def _store(path):
    return read_all(open_store(str(path)))


def _same(a, b):
    Xa, ya, qa = a
    Xb, yb, qb = b
    Xa = Xa.toarray() if hasattr(Xa, "toarray") else Xa
    Xb = Xb.toarray() if hasattr(Xb, "toarray") else Xb
    np.testing.assert_array_equal(Xa, Xb)
    np.testing.assert_array_equal(ya, yb)
    assert (qa is None) == (qb is None)
    if qa is not None:
        np.testing.assert_array_equal(qa, qb)


# -- a UTF-8 byte order mark is read as if it were absent ---------------------

BOM_CASES = {
    "csv-header-label-named": (b"label,a,b\n1,0.5,2\n0,1,3\n1,2,4\n", {"label_col": "label"}),
    "csv-header-label-last": (b"a,b,label\n0.5,2,1\n1,3,0\n2,4,1\n", {"label_col": "label"}),
    "csv-no-header": (b"1,0.5,2\n0,1,3\n1,2,4\n", {}),
    "csv-no-header-given": (b"1,0.5,2\n0,1,3\n1,2,4\n", {"header": False}),
    "svmlight": (b"1 1:0.5 2:2\n-1 2:3\n1 1:2\n", {}),
    "svmlight-given": (b"1 1:0.5 2:2\n-1 2:3\n1 1:2\n", {"input_format": "svmlight"}),
}


@pytest.mark.parametrize("comp", [None, "gz", "bz2"])
@pytest.mark.parametrize("case", sorted(BOM_CASES))
def test_bom_is_read_as_if_absent(tmp_path, case, comp):
    text, kw = BOM_CASES[case]
    pack = {None: lambda b: b, "gz": gzip.compress, "bz2": bz2.compress}[comp]
    plain, bom = tmp_path / "plain.txt", tmp_path / "bom.txt"
    plain.write_bytes(pack(text))
    bom.write_bytes(pack(BOM + text))
    a = ingest(str(plain), str(tmp_path / "a.zarr"), **kw)
    b = ingest(str(bom), str(tmp_path / "b.zarr"), **kw)
    assert a["n"] == b["n"] == 3 and a["d"] == b["d"]
    assert a["label"] == b["label"]
    _same(_store(tmp_path / "a.zarr"), _store(tmp_path / "b.zarr"))


def test_bom_with_tiny_blocks(tmp_path):
    """A block smaller than the BOM itself: it is still dropped whole."""
    text = b"label,a\n1,0.5\n0,1\n"
    (tmp_path / "bom.csv").write_bytes(BOM + text)
    (tmp_path / "plain.csv").write_bytes(text)
    for name in ("bom", "plain"):
        ingest(str(tmp_path / f"{name}.csv"), str(tmp_path / f"{name}.zarr"),
               label_col="label", block_size=2)
    _same(_store(tmp_path / "bom.zarr"), _store(tmp_path / "plain.zarr"))


def test_bom_label_col_by_name_cli(tmp_path):
    (tmp_path / "bom.csv").write_bytes(BOM + b"label,a\n1,0.5\n0,1\n")
    r = run_cli("ingest", "bom.csv", "-o", "out.zarr", "-q", "--label-col", "label",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    X, y, _ = _store(tmp_path / "out.zarr")
    np.testing.assert_array_equal(y, [1, 0])
    np.testing.assert_array_equal(X.ravel(), [0.5, 1])


# -- sniffing reads whole lines ------------------------------------------------

def test_head_holds_whole_lines(tmp_path):
    line = b",".join(b"%d" % k for k in range(30000)) + b"\n"     # ~170 KB
    (tmp_path / "w.csv").write_bytes(line * 4)
    head = Source(tmp_path / "w.csv").head()
    assert head == line * 3            # three whole lines, no cut one
    assert Source(tmp_path / "w.csv").head(lines=1) == line
    (tmp_path / "short.csv").write_bytes(b"1,2\n3,4")             # no final newline
    assert Source(tmp_path / "short.csv").head() == b"1,2\n3,4"


def test_head_refuses_a_first_line_over_the_cap(tmp_path):
    (tmp_path / "w.csv").write_bytes(b"1," * 4000 + b"1\n")
    with pytest.raises(IngestError, match=r"first line is longer than"):
        Source(tmp_path / "w.csv").head(nbytes=1024, cap=4096)


def _wide(n, d, seed=0, density=0.1):
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((n, d)) < density, rng.integers(1, 1000, (n, d)) / 8, 0.0)
    y = rng.integers(0, 2, n) * 2 - 1
    return X, y


def _write_csv(path, X, y, header=False):
    with open(path, "w") as f:
        if header:
            f.write(",".join(["label"] + [f"f{j}" for j in range(X.shape[1])]) + "\n")
        for yi, row in zip(y, X):
            f.write(",".join([str(int(yi))] + ["%g" % v for v in row]) + "\n")


def _write_svm(path, X, y):
    with open(path, "w") as f:
        for yi, row in zip(y, X):
            nz = np.flatnonzero(row)
            f.write(" ".join([str(int(yi))] + ["%d:%g" % (j + 1, row[j]) for j in nz]) + "\n")


@pytest.mark.parametrize("kw", [{}, {"delimiter": ",", "header": False},
                                {"input_format": "csv"}])
def test_wide_csv_is_read(tmp_path, kw):
    """12,000 columns: each line is over the 64 KB a sniff used to read."""
    X, y = _wide(6, 12000, density=0.9)
    _write_csv(tmp_path / "w.csv", X, y)
    assert (tmp_path / "w.csv").stat().st_size / 6 > 1 << 16
    res = ingest(str(tmp_path / "w.csv"), str(tmp_path / "w.zarr"), **kw)
    assert (res["n"], res["d"]) == (6, 12000)
    Xs, ys, _ = _store(tmp_path / "w.zarr")
    np.testing.assert_array_equal(Xs, X.astype(np.float32))
    np.testing.assert_array_equal(ys, y)


def test_wide_csv_with_header(tmp_path):
    X, y = _wide(4, 12000, density=0.9)
    _write_csv(tmp_path / "w.csv", X, y, header=True)
    assert len((tmp_path / "w.csv").read_bytes().split(b"\n")[0]) > 1 << 16
    res = ingest(str(tmp_path / "w.csv"), str(tmp_path / "w.zarr"))
    assert (res["n"], res["d"], res["label"]["name"]) == (4, 12000, "label")
    np.testing.assert_array_equal(_store(tmp_path / "w.zarr")[1], y)


@pytest.mark.parametrize("comp", [None, "gz"])
def test_long_svmlight_line_is_sniffed_whole(tmp_path, comp):
    """A row of 200,000 pairs (~2 MB): sniffed as svmlight, not as a CSV
    ("':0.5' is not a number"). The blanks after the label put the 64 KB
    mark inside an index, where a cut line would end in a token without ':'."""
    pairs = b" ".join(b"%d:0.5" % (j + 1) for j in range(200000))
    for pad in range(1, 16):
        line = b"1" + b" " * pad + pairs + b"\n"
        if b":" not in line[:1 << 16].rsplit(b" ", 1)[1]:
            break
    data = line + b"-1 3:1\n"
    path = tmp_path / ("long.svm" + (".gz" if comp else ""))
    path.write_bytes(gzip.compress(data, compresslevel=1) if comp else data)
    res = ingest(str(path), str(tmp_path / "l.zarr"), sparse=True)
    assert (res["n"], res["d"]) == (2, 200000)
    X, y, _ = _store(tmp_path / "l.zarr")
    assert X.nnz == 200001 and list(y) == [1, -1]


def test_wide_csv_and_svmlight_give_the_same_store(tmp_path):
    """20,000 columns, the same data as CSV and as svmlight: the same X and y."""
    X, y = _wide(40, 20000, seed=3, density=0.5)
    _write_csv(tmp_path / "w.csv", X, y)
    _write_svm(tmp_path / "w.svm", X, y)
    for name in ("w.csv", "w.svm"):     # every line longer than 64 KB
        assert min(map(len, (tmp_path / name).read_bytes().split(b"\n")[:-1])) > 1 << 16
    a = ingest(str(tmp_path / "w.csv"), str(tmp_path / "c.zarr"),
               delimiter=",", header=False)
    b = ingest(str(tmp_path / "w.svm"), str(tmp_path / "s.zarr"), sparse=False)
    assert (a["n"], a["d"]) == (b["n"], b["d"]) == (40, 20000)
    _same(_store(tmp_path / "c.zarr"), _store(tmp_path / "s.zarr"))
    np.testing.assert_array_equal(_store(tmp_path / "c.zarr")[0], X.astype(np.float32))
    ingest(str(tmp_path / "w.csv"), str(tmp_path / "c2.zarr"))     # all sniffed
    _same(_store(tmp_path / "c.zarr"), _store(tmp_path / "c2.zarr"))


# -- decimal commas -------------------------------------------------------------

SEMI = b"y;a;b\n1;0,5;2\n0;3;1,25\n1;-2,5e1;1e-1\n"


def test_decimal_comma(tmp_path):
    (tmp_path / "d.csv").write_bytes(SEMI)
    res = ingest(str(tmp_path / "d.csv"), str(tmp_path / "d.zarr"), decimal=",")
    assert (res["n"], res["d"], res["label"]["name"]) == (3, 2, "y")
    X, y, _ = _store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, np.float32([[0.5, 2], [3, 1.25], [-25, 0.1]]))
    np.testing.assert_array_equal(y, [1, 0, 1])


def test_decimal_comma_exact_slow_path(tmp_path):
    """Tokens past the fast path (over 18 digits) are rounded as float() does."""
    tok = "0,12345678901234567890123"
    (tmp_path / "d.csv").write_bytes(f"1;{tok};1,5e-30\n0;2;3\n".encode())
    ingest(str(tmp_path / "d.csv"), str(tmp_path / "d.zarr"), decimal=",", header=False)
    X, _, _ = _store(tmp_path / "d.zarr")
    assert X[0, 0] == np.float32(float(tok.replace(",", ".")))
    assert X[0, 1] == np.float32(1.5e-30)


def test_decimal_comma_without_option_names_the_cause(tmp_path):
    (tmp_path / "d.csv").write_bytes(SEMI)
    with pytest.raises(IngestError, match=r"d\.csv:2: field 2: .*decimal commas\? "
                                          r"pass --decimal ,"):
        ingest(str(tmp_path / "d.csv"), str(tmp_path / "d.zarr"))
    with pytest.raises(IngestError, match=r"decimal commas\? pass --decimal ,"):
        ingest(str(tmp_path / "d.csv"), str(tmp_path / "d.zarr"), delimiter=";")


def test_decimal_comma_with_comma_delimiter_refused(tmp_path):
    (tmp_path / "d.csv").write_bytes(b"1,2\n3,4\n")
    with pytest.raises(IngestError, match=r"decimal commas need a delimiter other than"):
        ingest(str(tmp_path / "d.csv"), str(tmp_path / "d.zarr"), decimal=",")


def test_decimal_comma_cli(tmp_path):
    (tmp_path / "d.csv").write_bytes(SEMI)
    r = run_cli("ingest", "d.csv", "-o", "d.zarr", "-q", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "streamcvm ingest: error: d.csv:2: field 2: '0' is not a number "
        "(decimal commas? pass --decimal ,)"]
    r = run_cli("ingest", "d.csv", "-o", "d.zarr", "-q", "--decimal", ",", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(_store(tmp_path / "d.zarr")[0][1], [3, 1.25])


# -- NaN query ids are refused, naming file:line ---------------------------------

@pytest.mark.parametrize("text,kw,line,what", [
    (b"1 qid:1 1:1\n0 qid:nan 1:2\n", {}, 2, r"bad qid 'qid:nan' \(expected qid:"),
    (b"1 qid:1 1:1\n0 qid:NaN 1:2\n", {"allow_nan": True}, 2, r"bad qid 'qid:NaN'"),
    (b"1,1,0.5\n0,nan,2\n", {"qid_col": 1}, 2,
     r"field 2: bad qid 'nan' \(the qid column holds non-negative integers\)"),
    (b"1,1,0.5\n0,nan,2\n", {"qid_col": 1, "allow_nan": True}, 2, r"field 2: bad qid 'nan'"),
    (b"1,1,0.5\n0,,2\n", {"qid_col": 1, "allow_nan": True}, 2, r"field 2: bad qid ''"),
    (b"1;1;0,5\n0;nan;2\n", {"qid_col": 1, "decimal": ","}, 2, r"field 2: bad qid 'nan'"),
])
def test_nan_qid_refused(tmp_path, text, kw, line, what):
    (tmp_path / "q.txt").write_bytes(text)
    with pytest.raises(IngestError, match=what) as e:
        ingest(str(tmp_path / "q.txt"), str(tmp_path / "q.zarr"), **kw)
    assert e.value.line == line and e.value.path.endswith("q.txt")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "q.zarr").exists()
