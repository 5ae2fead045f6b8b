"""Bad input: one line on stderr naming FILE:LINE, exit status 1, nothing left.

Every case writes a small input in its own folder and runs
``streamcvm ingest bad.txt -o out.zarr -q`` in a subprocess. It must exit 1
with exactly one line on stderr (``streamcvm ingest: error: FILE:LINE: what``),
leave no ``out.zarr`` and no ``.out.zarr.partial-*`` debris. The bad line is
line 3 (after two good lines) unless the case says otherwise, so the line
number is checked for real.

The CLI cases are independent processes, so a module fixture runs them all
at once (a few at a time) and each case's test checks its own result.
"""
import bz2
import gzip
import io
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from conftest import partials, read_all, run_cli
from streamcvm.ingest import IngestError, ingest
from streamcvm import StoreError, open_store
from streamcvm.data.synthetic import write_text

ONE_LINE_PREFIX = "streamcvm ingest: error: "


def svm_rows(n, seed=0, d=10):
    """``n`` valid one-based svmlight lines (bytes), labels +-1."""
    rng = np.random.default_rng(seed)
    a = np.column_stack([rng.integers(0, 2, n) * 2 - 1,
                         rng.standard_normal((n, d)).round(6)])
    buf = io.StringIO()
    np.savetxt(buf, a, fmt=["%d"] + [f"{j + 1}:%.6f" for j in range(d)], delimiter=" ")
    return buf.getvalue().encode()


def truncated(data, module):
    """A valid compressed stream of ``data`` with its last ~30% of bytes cut off."""
    comp = module.compress(data, compresslevel=1)
    return comp[: int(len(comp) * 0.7)]


@dataclass
class Case:
    id: str
    files: dict                        # name -> bytes (or str); "bad.txt" unless told
    line: object = 3                   # expected line number, None: no line applies
    phrase: str = ""                   # regex the message must match
    args: list = field(default_factory=list)
    srcs: list = field(default_factory=lambda: ["bad.txt"])
    bad: str = "bad.txt"               # file the message must name
    kwargs: object = field(default_factory=dict)   # same case through ingest(); None: CLI only
    cli: bool = True                   # False: Python API only (see API_ONLY)


GOOD2_SVM = "1 1:0.5 3:1\n-1 2:1.25\n"
GOOD2_CSV = "1,0.5,3\n0,4,5\n"

CASES = [
    # -- svmlight values and indices
    Case("svm-not-a-number", {"bad.txt": GOOD2_SVM + "1 1:abc\n"}, 3, r"'abc' is not a number"),
    Case("svm-garbage-after-number", {"bad.txt": GOOD2_SVM + "1 1:2.5x 2:1\n"}, 3,
         r"'2\.5x' is not a number"),
    Case("svm-indices-out-of-order", {"bad.txt": GOOD2_SVM + "1 3:1 2:1\n"}, 3,
         r"'2:1' is not greater than the previous one"),
    Case("svm-duplicate-index", {"bad.txt": GOOD2_SVM + "1 2:1 2:1\n"}, 3,
         r"'2:1' is not greater than the previous one .*sorted and unique"),
    Case("svm-index-beyond-n-features", {"bad.txt": "1 1:1\n1 4:1\n1 9:1\n"}, 3,
         r"'9:1' is beyond the number of features \(--n-features 5\)",
         args=["--n-features", "5"], kwargs={"n_features": 5}),
    Case("svm-index-zero-one-based", {"bad.txt": GOOD2_SVM + "1 0:1 2:1\n"}, 3,
         r"feature index 0 in '0:1' but indices are one-based.*--zero-based",
         args=["--one-based"], kwargs={"zero_based": False}),
    Case("svm-index-zero-default", {"bad.txt": GOOD2_SVM + "1 0:1 2:1\n"}, 3,
         r"feature index 0 in '0:1' but indices are one-based",
         kwargs=None),
    Case("svm-not-a-pair", {"bad.txt": GOOD2_SVM + "1 1:1 7\n"}, 3,
         r"'7' is not an index:value pair"),
    Case("svm-no-label", {"bad.txt": GOOD2_SVM + "abc 1:1\n"}, 3,
         r"does not start with a numeric label \(found 'abc'\)"),
    Case("svm-multilabel", {"bad.txt": GOOD2_SVM + "1,2 1:1\n"}, 3, r"multilabel"),
    Case("svm-nan-value", {"bad.txt": GOOD2_SVM + "1 1:nan\n"}, 3,
         r"non-finite value 'nan'.*--allow-nan"),
    Case("svm-inf-value", {"bad.txt": GOOD2_SVM + "1 1:1 2:-inf\n"}, 3,
         r"non-finite value '-inf'.*--allow-nan"),
    Case("svm-infinity-value", {"bad.txt": GOOD2_SVM + "1 1:Infinity\n"}, 3,
         r"non-finite value 'Infinity'"),
    Case("svm-nan-label", {"bad.txt": GOOD2_SVM + "NaN 1:1\n"}, 3, r"non-finite value 'NaN'"),
    Case("svm-float32-overflow", {"bad.txt": GOOD2_SVM + "1 1:1e39\n"}, 3,
         r"value '1e39' overflows float32"),
    Case("svm-float32-overflow-negative", {"bad.txt": GOOD2_SVM + "1 2:-3.5e38\n"}, 3,
         r"value '-3\.5e38' overflows float32"),
    Case("svm-qid-missing-on-a-row", {"bad.txt": "1 qid:1 1:1\n0 qid:1 2:1\n1 1:1\n"}, 3,
         r"qid on some rows but not on others"),
    Case("svm-qid-appears-late", {"bad.txt": GOOD2_SVM + "1 qid:4 1:1\n"}, 3,
         r"qid on some rows but not on others"),
    Case("svm-bad-qid", {"bad.txt": "1 qid:1 1:1\n0 qid:1 2:1\n1 qid:x 1:1\n"}, 3,
         r"bad qid 'qid:x'"),
    Case("svm-crlf-line-endings", {"bad.txt": "1 1:1\r\n-1 2:1\r\n1 1:abc\r\n"}, 3,
         r"'abc' is not a number"),
    Case("svm-blank-and-comment-lines-counted",
         {"bad.txt": "# comment\n\n1 1:1\n   \n1 2:1 # trailing\n1 1:zz\n"}, 6,
         r"'zz' is not a number"),
    # -- CSV
    Case("csv-not-a-number", {"bad.txt": GOOD2_CSV + "1,x7,6\n"}, 3,
         r"field 2: 'x7' is not a number"),
    Case("csv-empty-field", {"bad.txt": GOOD2_CSV + "1,,6\n"}, 3,
         r"field 2: empty value \(use --allow-nan"),
    Case("csv-nan", {"bad.txt": GOOD2_CSV + "1,NaN,6\n"}, 3,
         r"field 2: non-finite value 'NaN'"),
    Case("csv-inf", {"bad.txt": GOOD2_CSV + "1,2,-inf\n"}, 3,
         r"field 3: non-finite value '-inf'"),
    Case("csv-float32-overflow", {"bad.txt": GOOD2_CSV + "1,2,1e39\n"}, 3,
         r"field 3: value '1e39' overflows float32"),
    Case("csv-too-many-fields", {"bad.txt": GOOD2_CSV + "1,2,3,4\n"}, 3,
         r"different number of fields than the first row"),
    Case("csv-too-few-fields", {"bad.txt": GOOD2_CSV + "1,2\n"}, 3,
         r"different number of fields than the first row \(2 fields"),
    Case("csv-trailing-delimiter", {"bad.txt": GOOD2_CSV + "1,2,3,\n"}, 3,
         r"different number of fields"),
    Case("whitespace-too-many-fields", {"bad.txt": "1 2 3\n0 4 5  \n1 2 3 4\n"}, 3,
         r"different number of fields"),
    Case("tsv-too-few-fields", {"bad.txt": "1\t2\t3\n0\t4\t5\n1\t2\n"}, 3,
         r"different number of fields"),
    Case("csv-header-then-bad-row", {"bad.txt": "y,a,b\n" + GOOD2_CSV + "1,2,oops\n"}, 4,
         r"field 3: 'oops' is not a number"),
    Case("csv-text-label-unterminated-quote",
         {"bad.txt": 'a,b,label\n1,2,"x"\n3,4,"y\n'}, 3, r"field 3: unterminated quoted field",
         args=["--label-col", "-1"], kwargs={"label_col": -1}),
    Case("csv-inconsistent-feature-counts",
         {"good.csv": "1,2,3\n4,5,6\n", "bad.txt": "1,2\n3,4\n"}, None,
         r"1 feature columns, but good\.csv gives 2 \(inconsistent feature counts\)",
         srcs=["good.csv", "bad.txt"]),
    Case("csv-inconsistent-feature-counts-wider",
         {"good.csv": "1,2,3\n4,5,6\n", "bad.txt": "1,2,3,4\n5,6,7,8\n"}, None,
         r"3 feature columns, but good\.csv gives 2 \(inconsistent feature counts\)",
         srcs=["good.csv", "bad.txt"]),
    Case("csv-vs-n-features", {"bad.txt": GOOD2_CSV}, None,
         r"2 feature columns, but --n-features gives 7",
         args=["--n-features", "7"], kwargs={"n_features": 7}),
    Case("text-then-numeric-labels",
         {"good.csv": "1,2,cat\n3,4,dog\n", "bad.txt": "1,2,1\n3,4,0\n"}, None,
         r"labels are numeric here but text in the inputs before",
         args=["--label-col", "-1"], srcs=["good.csv", "bad.txt"],
         kwargs={"label_col": -1}),
    Case("qid-in-second-file-only",
         {"good.txt": GOOD2_SVM, "bad.txt": "1 qid:1 1:1\n1 qid:1 1:2\n"}, 1,
         r"qid on some rows but not on others", srcs=["good.txt", "bad.txt"]),
    # -- empty input
    Case("empty-file", {"bad.txt": b""}, None, r"empty input \(no data rows\)"),
    Case("only-blank-lines", {"bad.txt": "\n\n   \n\t\n"}, None, r"empty input"),
    Case("only-comments", {"bad.txt": "# nothing\n\n# here either\n"}, None, r"empty input"),
    Case("svm-only-comments-after-blank", {"bad.txt": "\n# 1 1:1\n"}, None, r"empty input"),
    Case("empty-gz", {"bad.txt.gz": gzip.compress(b"")}, None, r"empty input",
         srcs=["bad.txt.gz"], bad="bad.txt.gz"),
    # -- compressed streams cut short
    Case("truncated-gz", {"bad.txt.gz": truncated(svm_rows(30_000), gzip)}, None,
         r"truncated gzip stream.*end-of-stream marker", srcs=["bad.txt.gz"], bad="bad.txt.gz"),
    Case("truncated-bz2", {"bad.txt.bz2": truncated(svm_rows(30_000), bz2)}, None,
         r"truncated bz2 stream.*end-of-stream marker", srcs=["bad.txt.bz2"],
         bad="bad.txt.bz2"),
    Case("truncated-gz-named-txt", {"bad.txt": truncated(svm_rows(30_000, seed=1), gzip)},
         None, r"truncated gzip stream"),
    Case("corrupt-gz", {"bad.txt.gz": gzip.compress(svm_rows(2_000))[:40] + b"\x00" * 4000},
         None, r"(corrupt|cannot decompress|truncated).*gzip|gzip.*(corrupt|decompress)",
         srcs=["bad.txt.gz"], bad="bad.txt.gz"),
    # -- files
    Case("missing-file", {}, None, r"no such file"),
    Case("directory-as-input", {"bad.txt/x": "1 1:1\n"}, None, r"is a directory"),
]
CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS)

# More of the same error kinds: checked through the Python API only, to keep
# the number of (~1 s) CLI processes down. The CLI prints str(IngestError),
# which the API test checks is one line.
API_ONLY = {
    "svm-garbage-after-number", "svm-not-a-pair", "svm-no-label", "svm-multilabel",
    "svm-infinity-value", "svm-nan-label", "svm-float32-overflow-negative", "svm-bad-qid",
    "svm-blank-and-comment-lines-counted", "csv-empty-field", "csv-float32-overflow",
    "csv-trailing-delimiter", "whitespace-too-many-fields", "tsv-too-few-fields",
    "csv-inconsistent-feature-counts-wider", "csv-vs-n-features",
    "svm-only-comments-after-blank", "empty-gz", "truncated-gz-named-txt",
}
assert API_ONLY <= set(CASE_IDS)
for _c in CASES:
    _c.cli = _c.id not in API_ONLY
    assert _c.cli or _c.kwargs is not None


def write_case(folder, case):
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in case.files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return folder


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """Run every CLI case (in parallel); id -> (CompletedProcess, folder)."""
    base = tmp_path_factory.mktemp("cli_cases")

    def one(case):
        folder = write_case(base / case.id, case)
        return case.id, (run_cli("ingest", *case.srcs, "-o", "out.zarr", "-q", *case.args,
                                 cwd=folder, timeout=120), folder)

    with ThreadPoolExecutor(max_workers=4) as ex:
        return dict(ex.map(one, [c for c in CASES if c.cli]))


def assert_one_line_error(r, bad, line, phrase):
    """Exit 1 and exactly one line ``streamcvm ingest: error: BAD[:LINE]: msg``."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and r.stderr.endswith("\n"), r.stderr
    msg = lines[0]
    assert msg.startswith(ONE_LINE_PREFIX), msg
    where = f"{bad}:{line}: " if line is not None else f"{bad}: "
    assert where in msg, (where, msg)
    assert re.search(phrase, msg), (phrase, msg)
    assert r.stdout == ""


def assert_nothing_left(folder, name="out.zarr"):
    assert not (Path(folder) / name).exists()
    assert partials(folder, name) == []


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id) for c in CASES if c.cli])
def test_cli_bad_input(case, cli_results):
    r, folder = cli_results[case.id]
    assert_one_line_error(r, case.bad, case.line, case.phrase)
    assert_nothing_left(folder)


# ---------------------------------------------------------------------------
# the same cases through the Python API: IngestError with .line set

API_CASES = [c for c in CASES if c.kwargs is not None]


@pytest.mark.parametrize("case", API_CASES, ids=[c.id for c in API_CASES])
def test_api_raises_ingest_error(case, tmp_path):
    write_case(tmp_path, case)
    out = tmp_path / "out.zarr"
    with pytest.raises(IngestError) as ei:
        ingest([tmp_path / s for s in case.srcs], out, **case.kwargs)
    e = ei.value
    assert e.line == case.line
    assert Path(e.path).name == case.bad
    assert re.search(case.phrase, e.message), e.message
    where = e.path if case.line is None else f"{e.path}:{case.line}"
    assert str(e) == f"{where}: {e.message}"
    assert "\n" not in str(e)
    assert_nothing_left(tmp_path)


# ---------------------------------------------------------------------------
# a bad line deep in a file bigger than one parse block

N_DEEP, BAD_AT = 5_000, 4_321


def deep_file(path, kind):
    """~5,000 good lines with one bad line at line 4321 (1-based)."""
    rng = np.random.default_rng(7)
    lines = []
    if kind == "csv-header":
        lines.append("label,f1,f2,f3")
    while len(lines) < N_DEEP:
        k = len(lines) + 1
        v = rng.standard_normal(3).round(5)
        if kind.startswith("csv"):
            text = f"{k % 2},{v[0]},{v[1]},{v[2]}"
        elif kind == "svm-qid":
            text = f"{k % 3} qid:{k // 10} 1:{v[0]} 2:{v[1]} 5:{v[2]}"
        else:
            text = f"{2 * (k % 2) - 1} 1:{v[0]} 2:{v[1]} 5:{v[2]}  # row {k}"
        if k == BAD_AT:
            text = {"svm": "1 1:0.5 2:bad 3:1",
                    "svm-crlf": "1 1:0.5 2:bad 3:1",
                    "svm-qid": "1 1:0.5 2:1.5",          # the only row without a qid
                    "csv": "1,0.5,bad,2",
                    "csv-header": "1,0.5,bad,2"}[kind]
        elif k % 97 == 0:
            lines.append("")                              # blank lines count too
            continue
        lines.append(text)
    eol = "\r\n" if kind.endswith("crlf") else "\n"
    Path(path).write_text(eol.join(lines) + eol, newline="")
    assert len(Path(path).read_bytes()) > 3 * 4096
    return path


@pytest.mark.parametrize("n_jobs", [1, 3])
@pytest.mark.parametrize("kind", ["svm", "svm-crlf", "svm-qid", "csv", "csv-header"])
def test_bad_line_deep_in_many_blocks(tmp_path, kind, n_jobs):
    src = deep_file(tmp_path / "bad.txt", kind)
    out = tmp_path / "out.zarr"
    with pytest.raises(IngestError) as ei:
        ingest(src, out, block_size=4096, n_jobs=n_jobs, chunk_rows=500)
    assert ei.value.line == BAD_AT, str(ei.value)
    assert str(ei.value).startswith(f"{src}:{BAD_AT}: ")
    phrase = "qid on some rows" if kind == "svm-qid" else "'bad' is not a number"
    assert phrase in ei.value.message
    assert_nothing_left(tmp_path)


def test_cli_bad_line_after_chunks_were_written(tmp_path):
    """A bad line after several chunks (and parse blocks) were written: the
    partial store is removed and the line number is exact."""
    src = tmp_path / "bad.txt"
    write_text(str(src), "gaussian", 60_000, seed=3)      # ~12 MB, > 1 parse block
    n_good = sum(1 for _ in open(src, "rb"))
    with open(src, "ab") as f:
        f.write(b"1 1:0.5 2:0.25\n\n1 1:0.5 2:12..5\n")
    r = run_cli("ingest", "bad.txt", "-o", "out.zarr", "-q", "--chunk-rows", "1000",
                cwd=tmp_path)
    assert_one_line_error(r, "bad.txt", n_good + 3, r"'12\.\.5' is not a number")
    assert_nothing_left(tmp_path)


def test_truncated_streams_remove_partial_store(tmp_path, monkeypatch):
    """Small parse blocks: rows were appended (a partial store existed) before
    the truncation is found; abort removes it."""
    import streamcvm.data.writer as W
    seen = []
    orig = W.StoreWriter.abort

    def spy(self):
        seen.append(os.path.isdir(self.tmp))
        return orig(self)

    monkeypatch.setattr(W.StoreWriter, "abort", spy)
    data = svm_rows(30_000, seed=5)
    for ext, mod in (("gz", gzip), ("bz2", bz2)):
        src = tmp_path / f"bad.txt.{ext}"
        cut = truncated(data, mod)
        src.write_bytes(cut)
        # lines that can still be decompressed from what is left
        dec = zlib.decompressobj(31) if ext == "gz" else bz2.BZ2Decompressor()
        readable = dec.decompress(cut).count(b"\n")
        assert 0 < readable < 30_000
        with pytest.raises(IngestError) as ei:
            ingest(src, tmp_path / "out.zarr", block_size=1 << 16, chunk_rows=1000)
        assert ei.value.line is None
        assert f"truncated {'gzip' if ext == 'gz' else 'bz2'} stream" in ei.value.message
        assert "end-of-stream marker" in ei.value.message
        # rows were read before the cut: the message says after which line
        m = re.search(r"\(after line (\d+)\)$", ei.value.message)
        assert m, ei.value.message
        assert 0 < int(m.group(1)) <= readable
        assert_nothing_left(tmp_path)
    assert seen == [True, True]


# ---------------------------------------------------------------------------
# --allow-nan

def test_cli_allow_nan_svmlight(tmp_path):
    (tmp_path / "nan.txt").write_text(GOOD2_SVM + "1 1:nan 2:inf 3:-inf\nnan 2:NaN\n")
    r = run_cli("ingest", "nan.txt", "-o", "out.zarr", "-q", "--allow-nan", "--one-based",
                "--dense", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # as stored when asked for; by default a read refuses them (training needs finite X)
    with pytest.raises(StoreError, match=r"row 2 \(0-based\), feature 0 is nan: the store "
                                         r"was ingested with --allow-nan"):
        read_all(open_store(tmp_path / "out.zarr"))
    s = open_store(tmp_path / "out.zarr", check_finite=False)
    X, y, _ = read_all(s)
    assert X.shape == (4, 3)
    np.testing.assert_array_equal(X[:2], [[0.5, 0, 1], [0, 1.25, 0]])
    assert np.isnan(X[2, 0]) and X[2, 1] == np.inf and X[2, 2] == -np.inf
    assert np.isnan(X[3, 1]) and X[3, 0] == 0 and X[3, 2] == 0
    np.testing.assert_array_equal(y[:3], [1, -1, 1])
    assert np.isnan(y[3])
    # NaN labels are not a class
    np.testing.assert_array_equal(s.classes, [-1, 1])
    assert s.class_counts.sum() == 3
    assert partials(tmp_path) == []


def test_cli_allow_nan_csv(tmp_path):
    (tmp_path / "nan.csv").write_text(GOOD2_CSV + "1,nan,6\n0,,7\n1,8,\n1,-Inf,NAN\n")
    r = run_cli("ingest", "nan.csv", "-o", "out.zarr", "-q", "--allow-nan", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    X, y, _ = read_all(open_store(tmp_path / "out.zarr", check_finite=False))
    np.testing.assert_array_equal(y, [1, 0, 1, 0, 1, 1])
    expect = np.array([[0.5, 3], [4, 5], [np.nan, 6], [np.nan, 7], [8, np.nan],
                       [-np.inf, np.nan]], np.float32)
    np.testing.assert_array_equal(X, expect)       # NaN == NaN in assert_array_equal


def test_api_allow_nan_sparse(tmp_path):
    (tmp_path / "nan.txt").write_text(GOOD2_SVM + "1 1:nan\n")
    ingest(tmp_path / "nan.txt", tmp_path / "out.zarr", allow_nan=True, sparse=True)
    with pytest.raises(StoreError, match=r"row 2 \(0-based\), feature 0 is nan"):
        read_all(open_store(tmp_path / "out.zarr"))
    X, _, _ = read_all(open_store(tmp_path / "out.zarr", check_finite=False))
    assert np.isnan(X[2, 0]) and X[2].nnz == 1


# ---------------------------------------------------------------------------
# the output path

def make_store(folder, name="out.zarr", rows=3):
    src = folder / f"orig{rows}.txt"
    src.write_text("".join(f"{(-1) ** k} 1:{k + 1}\n" for k in range(rows)))
    ingest(src, folder / name)
    return open_store(folder / name)


def snapshot(path):
    return sorted((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in Path(path).rglob("*"))


def test_cli_output_exists(tmp_path):
    orig = make_store(tmp_path)
    before = snapshot(tmp_path / "out.zarr")
    (tmp_path / "new.txt").write_text(GOOD2_SVM * 5)
    r = run_cli("ingest", "new.txt", "-o", "out.zarr", "-q", cwd=tmp_path)
    assert_one_line_error(r, "out.zarr", None, r"already exists \(pass --overwrite")
    assert snapshot(tmp_path / "out.zarr") == before
    s = open_store(tmp_path / "out.zarr")
    assert s.n == 3 and s.fingerprint == orig.fingerprint
    assert partials(tmp_path) == []


def test_cli_output_exists_as_file(tmp_path):
    (tmp_path / "out.zarr").write_text("precious")
    (tmp_path / "new.txt").write_text(GOOD2_SVM)
    r = run_cli("ingest", "new.txt", "-o", "out.zarr", "-q", cwd=tmp_path)
    assert_one_line_error(r, "out.zarr", None, r"already exists")
    assert (tmp_path / "out.zarr").read_text() == "precious"


def test_cli_overwrite_replaces(tmp_path):
    make_store(tmp_path)
    (tmp_path / "new.txt").write_text(GOOD2_SVM * 5)
    r = run_cli("ingest", "new.txt", "-o", "out.zarr", "-q", "--overwrite", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    s = open_store(tmp_path / "out.zarr")
    assert s.n == 10
    _, y, _ = read_all(s)
    np.testing.assert_array_equal(y, [1, -1] * 5)
    assert partials(tmp_path) == []            # no .out.zarr.partial-PID(.old) left


def test_cli_overwrite_hdf5_replaces(tmp_path):
    (tmp_path / "a.txt").write_text(GOOD2_SVM)
    (tmp_path / "b.txt").write_text(GOOD2_SVM * 3)
    assert run_cli("ingest", "a.txt", "-o", "out.h5", "-q", cwd=tmp_path).returncode == 0
    r = run_cli("ingest", "b.txt", "-o", "out.h5", "-q", cwd=tmp_path)
    assert_one_line_error(r, "out.h5", None, "already exists")
    r = run_cli("ingest", "b.txt", "-o", "out.h5", "-q", "--overwrite", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = open_store(tmp_path / "out.h5")
    assert s.backend == "hdf5" and s.n == 6
    s.close()
    assert partials(tmp_path, "out.h5") == []


def test_cli_overwrite_with_bad_input_keeps_original(tmp_path):
    orig = make_store(tmp_path)
    before = snapshot(tmp_path / "out.zarr")
    (tmp_path / "bad.txt").write_text(GOOD2_SVM + "1 1:abc\n")
    r = run_cli("ingest", "bad.txt", "-o", "out.zarr", "-q", "--overwrite", cwd=tmp_path)
    assert_one_line_error(r, "bad.txt", 3, "'abc' is not a number")
    assert snapshot(tmp_path / "out.zarr") == before
    assert open_store(tmp_path / "out.zarr").fingerprint == orig.fingerprint
    assert partials(tmp_path) == []


def test_api_output_exists(tmp_path):
    make_store(tmp_path)
    (tmp_path / "new.txt").write_text(GOOD2_SVM)
    with pytest.raises(IngestError, match="already exists"):
        ingest(tmp_path / "new.txt", tmp_path / "out.zarr")
    assert open_store(tmp_path / "out.zarr").n == 3


def test_cli_info_not_a_store(tmp_path):
    r = run_cli("info", tmp_path / "nothing.zarr")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "no such store" in r.stderr
    (tmp_path / "plain.zarr").mkdir()
    r = run_cli("info", tmp_path / "plain.zarr")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "streamcvm info: error: " in r.stderr


# ---------------------------------------------------------------------------
# regressions: bugs found by these tests, fixed

def test_line_number_with_blank_lines_before_header(tmp_path):
    (tmp_path / "bad.txt").write_text("\na,b,c\n1,2,3\n1,x,3\n")
    with pytest.raises(IngestError) as ei:
        ingest(tmp_path / "bad.txt", tmp_path / "out.zarr")
    assert ei.value.line == 4


@pytest.mark.parametrize("text", ["3.4028235e+38", "-3.4028235e38"])
def test_float32_max_is_not_an_overflow(tmp_path, text):
    f32max = np.finfo(np.float32).max
    assert abs(np.float32(float(text))) == f32max      # finite in float32
    (tmp_path / "max.txt").write_text(f"1 1:{text}\n1 2:1\n")
    ingest(tmp_path / "max.txt", tmp_path / "out.zarr", sparse=False)
    X, _, _ = read_all(open_store(tmp_path / "out.zarr"))
    assert X[0, 0] == np.float32(float(text))


def test_no_debris_when_writer_construction_fails(tmp_path, monkeypatch):
    import streamcvm.data.formats as F
    orig = F.ZarrFormat.create

    def create(self, name, *a, **k):
        if name == "y":
            raise KeyboardInterrupt          # what Ctrl-C at that moment does
        return orig(self, name, *a, **k)

    monkeypatch.setattr(F.ZarrFormat, "create", create)
    (tmp_path / "ok.txt").write_text(GOOD2_SVM)
    with pytest.raises(KeyboardInterrupt):
        ingest(tmp_path / "ok.txt", tmp_path / "out.zarr")
    assert_nothing_left(tmp_path)
