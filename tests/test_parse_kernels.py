"""The numba parse kernels: capacity guesses, the E_FULL retry, text labels."""
import numpy as np
import pytest

from streamcvm.ingest import _parse as P
from streamcvm.ingest.pipeline import _parse_csv_task, _parse_svmlight_task


def _buf(text):
    return np.frombuffer(text.encode(), dtype=np.uint8)


@pytest.mark.parametrize("n", [1, 7, 5000])
def test_svmlight_more_rows_than_the_first_guess(n):
    # 6-byte lines and 4-byte pairs: more rows and pairs than the first
    # capacity guess (bytes / 16 rows, bytes / 6 pairs) allows
    text = "".join(f"{k % 3} 1:{k % 7 + 1} 2:1 3:2 4:3\n" if k % 2 else f"{k % 3} 1:1\n"
                   for k in range(n))
    if n == 5000:
        guess = P.svmlight_bounds(len(text))
        assert P.parse_svmlight(_buf(text), False, -1, False, -1, *guess)[9] == P.E_FULL
    r = _parse_svmlight_task(text.encode(), False, -1, False, -1)
    assert r["err"] == P.OK
    nrow, labels, indptr, indices, data = r["n"], r["y"], r["indptr"], r["indices"], r["data"]
    assert nrow == n and r["n_lines"] == n
    assert indptr[nrow] == sum(4 if k % 2 else 1 for k in range(n))
    np.testing.assert_array_equal(labels[:n], [k % 3 for k in range(n)])
    k = n - 1
    s, e = indptr[k], indptr[k + 1]
    if k % 2:
        assert indices[s:e].tolist() == [0, 1, 2, 3]
        assert data[s:e].tolist() == [k % 7 + 1, 1, 2, 3]
    else:
        assert indices[s:e].tolist() == [0] and data[s:e].tolist() == [1]


@pytest.mark.parametrize("n", [1, 3000])
def test_csv_more_rows_than_the_first_guess(n):
    text = "".join(f"{k % 2},{k % 10}\n" for k in range(n))      # 4 bytes a row
    roles = np.array([P.ROLE_LABEL, 0], np.int64)
    if n == 3000:
        guess = P.csv_bound(len(text), 2)
        assert P.parse_csv(_buf(text), 44, roles, 1, False, False, guess)[9] == P.E_FULL
    r = _parse_csv_task(text.encode(), 44, roles, 1, False, False)
    nrow, X, labels = r["n"], r["X"], r["y"]
    assert r["err"] == P.OK and nrow == n
    np.testing.assert_array_equal(X[:n, 0], np.arange(n, dtype=np.float32) % 10)
    np.testing.assert_array_equal(labels[:n], np.arange(n) % 2)


def test_csv_text_labels_hash_and_span():
    text = "a,1\nbb,2\na,3\n"
    roles = np.array([P.ROLE_LABEL, 0], np.int64)
    res = P.parse_csv(_buf(text), 44, roles, 1, True, False, 100)
    n, X, _, h, span = res[:5]
    assert n == 3
    assert h[0] == h[2] != h[1]
    assert [text[a:b] for a, b in span[:3]] == ["a", "bb", "a"]


def test_a_first_ingest_compiles_only_its_formats_kernels(tmp_path):
    """On a cold numba cache, ingesting svmlight compiles the svmlight parser
    (and the dense conversion), not the CSV one: a first ingest waits for
    the kernels it uses only. The cold cache is a fresh NUMBA_CACHE_DIR."""
    import glob
    import subprocess

    from conftest import cli_cmd, cli_env
    src = tmp_path / "a.svm"
    src.write_text("".join(f"{k % 2} 1:{k} 2:0.5\n" for k in range(50)))
    cache = tmp_path / "numba-cache"
    env = dict(cli_env(), NUMBA_CACHE_DIR=str(cache))
    r = subprocess.run(cli_cmd("ingest", src, "-o", tmp_path / "a.zarr"), env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def cached(kernel):
        return glob.glob(str(cache / "**" / f"_parse.{kernel}-*.nbi"), recursive=True)
    assert cached("parse_svmlight") and cached("csr_to_dense")
    assert not cached("parse_csv")
