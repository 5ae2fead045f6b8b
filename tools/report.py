#!/usr/bin/env python
"""The tables of README.md and BENCHMARKS.md, made from the benchmarks' JSON results.

Each file in ``results/`` is what one benchmark command in ``tools/`` wrote; it
names its command, commit and date. This script reads them::

    python tools/report.py check            # each results file: its run, and whether the
                                            # code it measured is this checkout's code
    python tools/report.py tables           # print every generated table
    python tools/report.py tables --write   # and write them into README.md, BENCHMARKS.md

A generated table sits between two comments in a page::

    <!-- results: NAME -->
    ...
    <!-- /results -->

and ``--write`` replaces what is between them with table NAME as made now, so
no figure in a generated table is typed by hand. Every table starts with one
line naming its run (command, commit, date) and, when the code differs, what
differs.

"The code it measured" is streamcvm/, ingest/, tools/benchlib.py,
tools/datasets.py and the benchmark script itself: a results file is
*current* when those files are the same at its commit as in this checkout,
docstrings and comments aside (each Python file is compared as its syntax
tree without docstrings), uncommitted changes included. ``check`` exits 1 when a results file is not
current or its commit was dirty, so a rerun is due.
"""
import argparse
import ast
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RESULTS = os.path.join(ROOT, "results")
PAGES = ("README.md", "BENCHMARKS.md")
MEASURED = ("streamcvm", "ingest", "tools/benchlib.py", "tools/datasets.py")
BLOCK = re.compile(r"(<!-- results: ([\w.-]+) -->\n)(.*?)(<!-- /results -->)", re.S)


# ---------------------------------------------------------------------------
# is a result current?
# ---------------------------------------------------------------------------

def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                          check=True).stdout


def script_of(command):
    """``tools/NAME.py`` of a benchmark's command line (None: not a tools script)."""
    for word in shlex.split(command or ""):
        if word.endswith(".py"):
            name = os.path.basename(word)
            if os.path.exists(os.path.join(ROOT, "tools", name)):
                return f"tools/{name}"
    return None


def _strip(source):
    """A Python file's syntax tree without docstrings, as text (None: not Python)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


def _files(rev, paths):
    """``{path: blob id}`` of the tracked files under ``paths`` at ``rev``."""
    out = git("ls-tree", "-r", rev, "--", *paths)
    return {ln.split("\t", 1)[1]: ln.split()[2] for ln in out.splitlines() if ln}


def code_differences(commit, command):
    """The measured files (module docstring's list) that differ between ``commit``
    and this checkout (HEAD, and uncommitted changes), docstrings and comments aside."""
    paths = list(MEASURED) + ([script_of(command)] if script_of(command) else [])
    then, now = _files(commit, paths), _files("HEAD", paths)
    differ = sorted(set(then) ^ set(now))
    for path in sorted(set(then) & set(now)):
        if then[path] == now[path]:
            continue
        a, b = (git("cat-file", "-p", then[path]), git("cat-file", "-p", now[path]))
        if path.endswith(".py") and _strip(a) is not None and _strip(a) == _strip(b):
            continue
        differ.append(path)
    dirty = git("status", "--porcelain", "--", *paths).splitlines()
    differ += [f"{ln[3:]} (uncommitted)" for ln in dirty if ln[3:] not in differ]
    return differ


def load(name):
    path = os.path.join(RESULTS, name)
    with open(path) as f:
        return json.load(f)


def status(res):
    """(current, words): whether ``res`` measured this checkout's code."""
    commit = res.get("commit", "unknown")
    if commit.endswith("-dirty") or commit == "unknown":
        return False, f"commit {commit}: the code it ran is not known"
    try:
        differ = code_differences(commit, res.get("command"))
    except subprocess.CalledProcessError:
        return False, f"commit {commit} is not in this repository"
    if not differ:
        return True, "the code it measured is this checkout's"
    shown = ", ".join(differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
    return False, f"the code differs from this checkout's in {shown}"


def run_line(res, where=None):
    """The one line above a table: its run, and whether it is current."""
    current, words = status(res)
    line = f"One run: `{res.get('command', '?')}` at {res.get('commit', '?')}, " \
           f"{res.get('date', '?')[:10]}"
    if where:
        line += f"; {where}"
    return line + ("." if current else f". **Not current**: {words}.")


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

def human(n):
    for unit, div in (("M", 1e6), ("K", 1e3)):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.3g}{unit}"
    return f"{n:,}"


def md(head, rows, right=()):
    align = ["---:" if i in right else "---" for i in range(len(head))]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def t_defaults(res):
    rows = []
    for r in res["runs"]:
        if r.get("tag"):
            continue
        info = res["datasets"].get(r["dataset"], {})
        what = [f"{human(r['n_train'])} rows"]
        if info.get("sparse"):
            what.append("sparse")
        if r.get("classes", 2) > 2:
            what.append(f"{r['classes']} classes")
        ours, tuned = r["ours"], r.get("tuned") or {}
        if "error" in ours:
            rows.append([f"{r['dataset']} ({', '.join(what)})", "", f"failed: {ours['error']}",
                         "", ""])
            continue
        ok = tuned and "error" not in tuned
        rows.append([f"{r['dataset']} ({', '.join(what)})",
                     (f"{100 * tuned['accuracy']:.2f}%" + (
                         f" ({len(tuned['failed'])} of the "
                         f"{len(tuned['failed']) + len(tuned.get('grid', []))} grid points "
                         "did not finish)"
                         if tuned.get("failed") else "")) if ok else (
                         ("its refit: " if "grid" in tuned else "") + tuned.get("error", "-")),
                     f"{100 * ours['accuracy']:.2f}%",
                     f"{r['d_acc']:+.2f} points" if "d_acc" in r else "-",
                     f"{ours['fit_s']:.1f} s / {tuned['grid_s']:.1f} s" if ok else "-"])
    return md(["data", "tuned SVC", "streamcvm defaults", "accuracy difference",
               "streamcvm fit / SVC's grid search"], rows, right=(1, 2, 3, 4))


def t_defaults_detail(res):
    """The defaults run in full: both sides' choices, times, predict, support rows."""
    rows = []
    for r in res["runs"]:
        if r.get("tag"):
            continue
        info = res["datasets"].get(r["dataset"], {})
        ours, t = r["ours"], r.get("tuned") or {}
        ok, mine = t and "error" not in t, "error" not in ours
        notes = []
        if t.get("failed"):
            notes.append("SVC points that did not finish in "
                         f"{res.get('args', {}).get('fit_timeout', 0):g} s: " + ", ".join(
                             f"C={f['C']:g} gamma={f['gamma_x']:g}" for f in t["failed"]))
        if t and not ok:
            notes.append(f"SVC: {t['error']}")
        if not mine:
            notes.append(f"streamcvm: {ours['error']}")
        rows.append([
            r["dataset"], f"{r['n_train']:,}", f"{info.get('n_test', 0):,}", str(r["classes"]),
            f"{100 * t['accuracy']:.2f}" if ok else "-",
            f"{t['C']:g}, {t['gamma_x']:g}" if ok else "-",
            f"{t['grid_s']:.1f}" if ok else "-", f"{t['refit_s']:.1f}" if ok else "-",
            f"{100 * ours['accuracy']:.2f}" if mine else "-",
            f"{ours['C']:.3g}, {ours['gamma_x']:.3g}" if mine and ours.get("gamma_x") else "-",
            f"{ours['fit_s']:.2f}" if mine else "-",
            f"{r['d_acc']:+.2f}" if "d_acc" in r else "-",
            f"{r['fit_ratio']:.3f}" if "fit_ratio" in r else "-",
            (f"{ours['predict_s']:.3f} ({t['predict_s']:.3f})" if ok else
             f"{ours['predict_s']:.3f}") if mine else "-",
            (f"{ours['n_sv']:,} ({t['n_sv']:,})" if ok else f"{ours['n_sv']:,}") if mine else "-",
            f"{ours['peak_rss'] / 2**20:,.0f}" if mine else "-", "; ".join(notes)])
    return md(["dataset", "rows", "test rows", "classes", "tuned SVC %",
               "its C, gamma x 1/beta", "grid s", "its refit s", "streamcvm %",
               "chosen C, gamma x 1/beta", "fit s", "d acc pt", "fit / grid",
               "predict s (SVC's)", "support rows (SVC's)", "peak RSS MiB", "notes"],
              rows, right=tuple(range(1, 16)))


def _scale_label(r):
    m = r["method"]
    if m.startswith("streamcvm"):
        return "streamcvm"
    if m.startswith("sklearnex SVC"):
        return None if "subsample" in m else "sklearnex SVC"
    if m.startswith("Nystroem K=1000"):
        return "Nystroem(1000) + LinearSVC"
    return None


def t_scale(res):
    ds = next(iter(res["datasets"].values()))
    test = ds.get("test_rows")
    rows = []
    for r in ds["runs"]:
        label = _scale_label(r)
        if label is None or "@" in r["method"]:
            continue
        n, fit = r["rows"], r.get("fit_rows")
        if fit and fit != n and label != "streamcvm":
            label += f", on {human(fit)} of the rows"
        if "error" in r or r.get("train_s") is None:
            why = r.get("error", "failed")
            why = re.sub(r"^> ([\d.]+) s \(timeout\)$",
                         lambda m: f"did not finish in {float(m.group(1)):g} s", why)
            rows.append([human(n), label, why, "", "", ""])
            continue
        rows.append([human(n), label, f"{r['train_s']:.1f} s", f"{r['predict_s']:.1f} s",
                     f"{100 * r['accuracy']:.2f}%", f"{r['peak_rss'] / 2**20:,.0f} MiB"])
    return md(["training rows", "model", "train",
               f"predict {human(test)} rows" if test else "predict", "accuracy", "peak RSS"],
              rows, right=(0, 2, 3, 4, 5))


def t_surfaces(res):
    by = {}
    for r in res["runs"]:
        by.setdefault(r["shape"], {})[r["method"]] = r
    names = {"bunny": "the Stanford bunny", "torus-200k": "torus", "torus-2m": "torus",
             "noisy-1": "torus, noise 1%, uneven, 3 holes",
             "noisy-0.5": "torus, noise 0.5%, uneven, 3 holes"}

    def cell(r):
        if r is None:
            return "-"
        if "error" in r:
            return f"failed: {r['error']}"
        return (f"{r['seconds']:.1f} / {r['chamfer']:.4f} / "
                f"{'yes' if r['watertight'] else 'no'}")
    rows = []
    for shape, got in by.items():
        pts = next((r["points"] for r in got.values() if "points" in r), None)
        rows.append([f"{names.get(shape, shape)}, {pts:,} points" if pts else shape,
                     cell(got.get("streamcvm")), cell(got.get("poisson-9"))])
    return md(["points", "streamcvm: s / Chamfer / closed",
               "Poisson depth 9: s / Chamfer / closed"], rows)


def t_predict(res):
    rows = []
    for r in res["runs"]:
        if r.get("exact_s") is None or r.get("case") is None:
            continue
        B, comp, ours = r.get("B"), r.get("compact_s"), r["exact_s"]
        acc = f"{100 * r['exact_accuracy']:.2f}"
        if B and comp is not None:
            ours, acc = comp, f"{100 * r['compact_accuracy']:.2f} / {acc}"
        nys = r.get("nys1000") or {}
        rows.append([r["case"], f"{r['n_test']:,}", f"{r['n_sv']:,}", f"{B:,}" if B else "-",
                     f"{r['exact_s']:.3f}", f"{comp:.3f}" if B and comp is not None else "-",
                     f"{nys['predict_s']:.3f}" if nys.get("predict_s") else "-",
                     f"{ours / nys['predict_s']:.2f}" if nys.get("predict_s") else "-", acc,
                     f"{100 * nys['accuracy']:.2f}" if nys.get("accuracy") else "-"])
    return md(["model", "test rows", "support rows", "B", "full s", "compact s",
               "Nystroem(1000) s", "streamcvm / Nystroem", "accuracy % (compact / full)",
               "Nystroem accuracy %"], rows, right=tuple(range(1, 10)))


def t_multiclass(res):
    rows = []
    for r in res["runs"]:
        code = r.get("code")
        label = {"streamcvm": f"streamcvm, {r.get('classes')} classes" if r.get("classes") != 2
                 else "streamcvm, binary twin", "sklearnex": "sklearnex SVC",
                 "nystroem": "Nystroem(1000) + LinearSVC"}.get(code, code)
        if r.get("largest"):
            label += ", largest in the budget"
        if "error" in r:
            rows.append([label, f"{r.get('fit_rows', 0):,}", r["error"], "", "", "", ""])
            continue
        rows.append([label, f"{r.get('fit_rows', r['rows']):,}", f"{r['train_s']:.1f}",
                     f"{r['peak_rss'] / 2**20:,.0f}", f"{r['predict_s']:.1f}",
                     f"{100 * r['accuracy']:.2f}", f"{r.get('n_sv', 0):,}"])
    return md(["model", "fit rows", "train s", "peak RSS MiB",
               f"predict {human(res['test_rows'])} s", "accuracy %", "support rows"],
              rows, right=(1, 2, 3, 4, 5, 6))


# name: (results file, renderer, where the full section is)
TABLES = {
    "readme-defaults": ("defaults.json", t_defaults, 'BENCHMARKS.md, "Classification"'),
    "readme-scale": ("scale.json", t_scale, 'BENCHMARKS.md, "Scale"'),
    "readme-surfaces": ("surface.json", t_surfaces, 'BENCHMARKS.md, "Surfaces"'),
    "defaults": ("defaults.json", t_defaults_detail, None),
    "scale": ("scale.json", t_scale, None),
    "surfaces": ("surface.json", t_surfaces, None),
    "predict": ("predict.json", t_predict, None),
    "multiclass-1m": ("multiclass-1m.json", t_multiclass, None),
    "multiclass-10m": ("multiclass-10m.json", t_multiclass, None),
}


def make(name):
    source, render, where = TABLES[name]
    res = load(source)
    return f"{run_line(res, where)}\n\n{render(res)}\n"


def cmd_check(_a):
    bad = 0
    for name in sorted(os.listdir(RESULTS)):
        if not name.endswith(".json"):
            continue
        res = load(name)
        current, words = status(res)
        bad += not current
        print(f"{'current' if current else 'STALE  '}  results/{name}: "
              f"`{res.get('command', '?')}` at {res.get('commit', '?')}, "
              f"{res.get('date', '?')[:10]}" + ("" if current else f"; {words}"))
    return 1 if bad else 0


def cmd_tables(a):
    if not a.write:
        for n in (a.names or TABLES):
            if n not in TABLES:
                raise SystemExit(f"unknown table {n!r} (known: {', '.join(TABLES)})")
            if not os.path.exists(os.path.join(RESULTS, TABLES[n][0])):
                print(f"{n}: no results/{TABLES[n][0]}", file=sys.stderr)
                continue
            print(f"### {n}\n\n{make(n)}")
        return 0
    made = {}
    for page in PAGES:
        path = os.path.join(ROOT, page)
        with open(path) as f:
            text = f.read()
        names = [m.group(2) for m in BLOCK.finditer(text)]
        for n in names:
            if n not in TABLES:
                raise SystemExit(f"{page}: unknown generated table {n!r} "
                                 f"(known: {', '.join(TABLES)})")
            if not os.path.exists(os.path.join(RESULTS, TABLES[n][0])):
                raise SystemExit(f"{page}: table {n!r} needs results/{TABLES[n][0]}, "
                                 f"which is missing; nothing written")
        for n in names:
            made.setdefault(n, make(n))
        new = BLOCK.sub(lambda m: m.group(1) + "\n" + made[m.group(2)] + "\n" + m.group(4), text)
        if new != text:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(new)
            os.replace(tmp, path)
        print(f"{page}: {len(names)} generated table(s)"
              + (" rewritten" if new != text else " unchanged"), file=sys.stderr)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check", help="is each results file current?").set_defaults(f=cmd_check)
    t = sub.add_parser("tables", help="print (or --write) the generated tables")
    t.add_argument("names", nargs="*", help="tables to print (default: all)")
    t.add_argument("--write", action="store_true",
                   help="rewrite the generated blocks of README.md and BENCHMARKS.md")
    t.set_defaults(f=cmd_tables)
    a = ap.parse_args(argv)
    return a.f(a)


if __name__ == "__main__":
    sys.exit(main())
