"""The README's and the user guide's code blocks run as written.

Each page's ``python``, ``bash`` and ``console`` blocks run in order in an empty
temporary folder, in one fresh Python process per page: python blocks share one
namespace, bash blocks run under ``bash -euo pipefail``, and a console block runs
its ``$ `` lines. A block preceded by an HTML comment ``<!-- norun: why -->`` is
skipped (it needs a cluster, the network, or public data files, or it installs
packages); every other block must exit 0 and raise nothing."""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs" / "guide").glob("*.md"))]
LANGS = ("python", "bash", "console")
FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NORUN = re.compile(r"<!--\s*norun\b[^>]*-->\s*$")


def blocks(text):
    """``(language, code, line)`` of every block that runs, in page order; a block
    whose preceding line is a ``norun`` comment is left out."""
    out = []
    for m in FENCE.finditer(text):
        lang = m.group(1).lower()
        if lang not in LANGS:
            continue
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if NORUN.search(before):
            continue
        code = m.group(2)
        if lang == "console":
            code = "\n".join(ln[2:] for ln in code.splitlines() if ln.startswith("$ "))
            lang = "bash"
        out.append((lang, code, text.count("\n", 0, m.start()) + 1))
    return out


RUNNER = textwrap.dedent("""
    import json, subprocess, sys, traceback
    blocks = json.load(open(sys.argv[1]))
    ns = {"__name__": "__main__"}
    for lang, code, line in blocks:
        print(f"--- block at line {line} ({lang})", flush=True)
        if lang == "python":
            try:
                exec(compile(code, f"{sys.argv[2]}:{line}", "exec"), ns)
            except BaseException:
                traceback.print_exc()
                sys.exit(f"{sys.argv[2]}: the python block at line {line} raised")
        else:
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", code])
            if r.returncode:
                sys.exit(f"{sys.argv[2]}: the bash block at line {line} exited {r.returncode}")
""")


def test_blocks_are_found():
    # the parser sees the blocks a page shows, and the norun comment leaves one out
    page = ("text\n\n```python\nx = 1\n```\n\n<!-- norun: needs a cluster -->\n"
            "```bash\nexit 3\n```\n\n```console\n$ echo hi\nhi\n```\n\n```text\nno\n```\n")
    assert blocks(page) == [("python", "x = 1\n", 3), ("bash", "echo hi", 12)]
    found = {p.name: blocks(p.read_text()) for p in PAGES}
    assert sum(len(b) for b in found.values()) >= 20, found


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p.read_text())],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_page_blocks_run(page, tmp_path):
    todo = blocks(page.read_text())
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(todo))
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, MPLBACKEND="Agg", STREAMCVM_CACHE_DIR=str(tmp_path / "cache"))
    # the blocks' "streamcvm" is the one beside this interpreter (the package under test)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    r = subprocess.run([sys.executable, "-c", RUNNER, str(spec), page.name], cwd=work,
                       env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, (r.stdout[-4000:] + "\n" + r.stderr[-4000:])
