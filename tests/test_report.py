"""The generated tables of README.md and BENCHMARKS.md are the ones
tools/report.py makes from results/, and its staleness check sees a change."""
import importlib.util
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")),
    reason="report.py compares commits: needs git and the repository")


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location(
        "report", os.path.join(ROOT, "tools", "report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("page", ["README.md", "BENCHMARKS.md"])
def test_generated_tables_match_their_results(report, page):
    with open(os.path.join(ROOT, page)) as f:
        text = f.read()
    blocks = list(report.BLOCK.finditer(text))
    if page == "README.md":
        assert len(blocks) >= 2        # the scale and surface comparisons are generated
    for m in blocks:
        name = m.group(2)
        assert name in report.TABLES, f"{page}: unknown table {name!r}"
        assert m.group(3) == "\n" + report.make(name) + "\n", (
            f"{page}: table {name!r} is not what results/{report.TABLES[name][0]} gives; "
            f"run `python tools/report.py tables --write`")


def test_a_result_of_other_code_is_not_current(report):
    first = subprocess.run(["git", "-C", ROOT, "rev-list", "--max-parents=0", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.split()[0]
    current, words = report.status({"commit": first, "command": "python tools/x.py"})
    assert not current and "streamcvm" in words
    current, words = report.status({"commit": "0" * 40, "command": ""})
    assert not current and "not in this repository" in words
    current, words = report.status({"commit": first + "-dirty", "command": ""})
    assert not current and "not known" in words


def test_docstrings_and_comments_do_not_make_a_result_stale(report):
    a = 'def f(x):\n    """One."""\n    return x + 1  # a\n'
    b = 'def f(x):\n    """Two, longer."""\n    # b\n    return x + 1\n'
    assert report._strip(a) == report._strip(b)
    assert report._strip(a) != report._strip(a.replace("x + 1", "x + 2"))
