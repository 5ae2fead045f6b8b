"""What the benchmark scripts in tools/ share.

Scripts run as ``python tools/<name>.py``, so tools/ is ``sys.path[0]`` and
``import benchlib`` (and ``import datasets``) work without a package.

Standard library only at import time: a benchmark parent must stay small,
because on Linux a child's ``ru_maxrss`` starts at its parent's peak (it is
carried over fork/exec). Functions that need numpy or streamcvm import them
when called, in the children.

- Measurements in fresh processes: ``run_child`` (parent) re-runs the script
  with a hidden ``--child SPEC`` (JSON) and reads the result back from a
  tagged stdout line (``spawn`` without the error record); ``child_main``
  (child) runs the job the spec's "kind" names and prints that line;
  ``parser`` makes the argument parser with ``--child``; ``use_source_tree``
  puts the checkout first on sys.path.
- Other commands: ``run_timed`` (wall seconds, its own peak RSS from
  ``os.wait4``, a timeout), ``stderr_tail``; ``timed`` for a call.
- Memory and disk: ``peak_rss_bytes``, ``vm_hwm_bytes``, ``mem_available``,
  ``path_bytes``.
- Reports: ``BenchRun`` (command line, git commit, date, header lines, the
  JSON record), ``git_commit`` / ``git_state``, ``table`` (markdown), ``fmt``,
  ``save_json`` / ``load_json``, ``log``, ``add_raw_dir``, ``cache_dir``.
- Protocol data (children): ``load_data`` (with the ``--quick`` rows),
  ``CLASSIFICATION``, ``svc_key`` (bench_classify's and eps_study's SVC cache).
- The generated-store benchmarks (bench_scale_accuracy, bench_regression_scale,
  bench_larger_than_ram): ``human_rows``, ``parse_rows``, ``ensure_store`` /
  ``generated_store``, ``read_rows``, ``run_reference``, ``add_warnings``,
  ``print_sizes``.
- The scikit-learn-intelex (oneDAL) reference: ``sklearnex_missing`` (parent:
  why it cannot run, without importing it), ``sklearnex_estimator`` and
  ``OnedalLog`` (child: the estimator at a thread count, and which backend,
  oneDAL or scikit-learn's fallback, ran each call), ``threads_note``.
"""
import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULT_TAG = "BENCH_RESULT "
QUICK_TRAIN, QUICK_TEST = 3000, 1000        # the classification / regression --quick rows
# the protocol's classification sets (datasets.NAMES; a parent cannot import datasets: numpy)
CLASSIFICATION = ["ijcnn1", "a9a", "w8a", "usps", "letter", "shuttle", "kddcup99"]


def use_source_tree(path=None):
    """Put ``path`` (default: this checkout) first on ``sys.path`` unless it
    is there already, so ``streamcvm`` (and ``streamcvm.ingest``) import from the source
    tree even when not installed (and win over an install of another tree)."""
    path = path or ROOT
    if path not in sys.path:
        sys.path.insert(0, path)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------

def peak_rss_bytes():
    """Peak resident set size of this process (``ru_maxrss``: KB on Linux)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def _proc_kb(path, key):
    """The "key: N kB" figure of a /proc file, in bytes, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def vm_hwm_bytes():
    """Peak RSS of this process image (VmHWM), or None where /proc is missing.

    Unlike ru_maxrss it is not carried over from the parent across fork/exec
    (Linux keeps the larger of the two in ru_maxrss), so it cross-checks it.
    """
    return _proc_kb("/proc/self/status", "VmHWM:")


def mem_available():
    """MemAvailable (bytes) from /proc/meminfo, or None."""
    return _proc_kb("/proc/meminfo", "MemAvailable:")


def path_bytes(path):
    """Size on disk of a file, or of every file under a directory."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(dp, f))
                   for dp, _, fn in os.walk(path) for f in fn)
    return os.path.getsize(path)


# ---------------------------------------------------------------------------
# one measurement in a fresh child process
# ---------------------------------------------------------------------------

def parser(doc, cls=argparse.ArgumentParser):
    """The script's argument parser: the first paragraph of ``doc`` as its
    description, the docstring's layout kept, and the hidden ``--child``."""
    ap = cls(description=doc.split("\n\n")[0],
             formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap


def _main_script():
    return os.path.abspath(sys.modules["__main__"].__file__)


def spawn(spec, script=None, timeout=None, capture_stderr=True):
    """Run ``script`` (default: the running one) with ``--child SPEC`` and
    wait for it (killed after ``timeout`` s): (the JSON it printed after
    RESULT_TAG or None, exit code, its stderr ("" when not captured: it
    then goes to this process's stderr), whether it timed out)."""
    cmd = [sys.executable, script or _main_script(), "--child", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout,
                           stderr=subprocess.PIPE if capture_stderr else None)
    except subprocess.TimeoutExpired:
        return None, None, "", True
    res = None
    for line in p.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            res = json.loads(line[len(RESULT_TAG):])
    return res, p.returncode, p.stderr or "", False


def run_child(spec, timeout=None, script=None):
    """``spawn`` as a record: the child's result, or {"error": ...} (with
    "timeout": True when killed; the stderr tail is logged); "process_s",
    the child's wall seconds, added either way."""
    t0 = time.perf_counter()
    res, rc, err, timed_out = spawn(spec, script, timeout)
    if timed_out:
        return {"error": f"timeout after {timeout:g} s", "timeout": True,
                "process_s": time.perf_counter() - t0}
    if res is None:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        res = {"error": f"child exited {rc}: {tail[:300]}"}
    if "error" in res:
        tb = "\n    ".join(err.strip().splitlines()[-8:])
        log(f"  ERROR {res['error']}" + (f"\n    {tb}" if tb else ""))
    res["process_s"] = time.perf_counter() - t0
    return res


def child_main(spec, jobs):
    """The child's side of ``run_child``: ``spec`` (the ``--child`` JSON text,
    or a dict) -> ``jobs[spec["kind"]](spec)`` (``jobs(spec)`` when ``jobs`` is
    a function), its result printed as one tagged JSON line. An exception
    prints its traceback to stderr and becomes an error record. Returns the
    exit code (1 after an error)."""
    if isinstance(spec, str):
        spec = json.loads(spec)
    try:
        out = (jobs if callable(jobs) else jobs[spec["kind"]])(spec)
    except Exception as e:  # noqa: BLE001 - reported as an error record
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    print(RESULT_TAG + json.dumps(out), flush=True)
    return 1 if "error" in out else 0


def timed(fn, *args):
    """(``fn(*args)``, its wall seconds)."""
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def run_timed(cmd, timeout=None, preexec_fn=None):
    """Run ``cmd`` (its process group killed after ``timeout`` s): a dict of
    rc, wall s, the process's own peak RSS in bytes (``os.wait4``), stdout,
    stderr and whether it timed out. Output goes to files, not pipes: wait4
    reaps the child, and a full pipe would block it meanwhile."""
    timed_out = []

    def kill(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
            timed_out.append(True)
        except ProcessLookupError:      # it had just finished
            pass

    t = time.perf_counter()
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, start_new_session=True,
                             preexec_fn=preexec_fn)
        timer = threading.Timer(timeout, kill, (p.pid,)) if timeout is not None else None
        if timer is not None:
            timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        if timer is not None:
            timer.cancel()
        p.returncode = rc = os.waitstatus_to_exitcode(status)   # reaped here
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read().decode(), fe.read().decode()
    return {"rc": rc, "wall": wall, "rss": ru.ru_maxrss * 1024, "rss_how": "wait4",
            "stdout": stdout, "stderr": stderr, "timed_out": bool(timed_out)}


def stderr_tail(text, lines=1):
    """The last ``lines`` non-blank lines of ``text``, joined by " | " (300
    characters at most), or "no output"."""
    got = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(got[-lines:])[:300] if got else "no output"


# ---------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------

def git_state(root=ROOT, paths=(), short=True, untracked=False):
    """(commit of HEAD in ``root``, whether its files (under ``paths``,
    default all; untracked ones only if ``untracked``) differ from it);
    (None, None) when git cannot tell."""
    def git(*a):
        return subprocess.run(["git", "-C", root, *a], capture_output=True, text=True,
                              timeout=30)
    try:
        r = git("rev-parse", *(["--short"] if short else []), "HEAD")
        if r.returncode != 0:
            return None, None
        st = git("status", "--porcelain", *([] if untracked else ["--untracked-files=no"]),
                 *(["--", *paths] if paths else []))
        return r.stdout.strip(), bool(st.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def git_commit(root=ROOT, dirty=True):
    """Short commit of this checkout, "-dirty" when tracked files differ
    from HEAD (as ``git describe --dirty``); "unknown" outside git."""
    commit, changed = git_state(root)
    if commit is None:
        return "unknown"
    return commit + ("-dirty" if dirty and changed else "")


def now():
    """The date and time, to the second (ISO 8601)."""
    return datetime.datetime.now().isoformat(timespec="seconds")


def command_line():
    """This run's command line, as a user would type it."""
    return shlex.join([os.path.basename(sys.executable)] + sys.argv)


class BenchRun:
    """A report's identity: ``command``, ``commit``, ``date`` and its first
    lines, logged to stderr when made: "command: `...`", "commit: C, DATE",
    "python V, <package V, ...> N CPUs<details>", then ``more``."""

    def __init__(self, packages=("scikit-learn",), details="", more=()):
        self.command = command_line()
        self.commit = git_commit()
        self.date = now()
        ver = importlib.metadata.version
        self.header = [f"command: `{self.command}`", f"commit: {self.commit}, {self.date}",
                       f"python {platform.python_version()}, "
                       + "".join(f"{p} {ver(p)}, " for p in packages)
                       + f"{os.cpu_count()} CPUs{details}", *more]
        for line in self.header:
            log(line)

    def record(self, **fields):
        """The JSON record: command, commit, date, python, cpus, then ``fields``."""
        return {"command": self.command, "commit": self.commit, "date": self.date,
                "python": platform.python_version(), "cpus": os.cpu_count(), **fields}

    def write(self, path, **fields):
        """Save ``record(**fields)`` as JSON to ``path`` and say so."""
        save_json(path, self.record(**fields))
        log(f"wrote {path}")


def add_raw_dir(ap):
    """The ``--raw-dir`` option of the scripts on the protocol datasets."""
    ap.add_argument("--raw-dir", help="raw data directory (default $STREAMCVM_DATA or "
                                      "../shared/data/raw)")


def svc_key(ds, info, C):
    """The key of an SVC result in bench_classify's --svc-cache (eps_study
    reads and writes that cache too)."""
    return (f"{ds}|n={info['n_train']}/{info['n_test']}|C={C:.10g}|gamma={info['gamma']:.10g}"
            f"|sklearn={importlib.metadata.version('scikit-learn')}")


def parse_param(text):
    """ "key=value" -> (key, value), the value an int or float when it reads as
    one (the ``--params`` of bench_classify and bench_defaults)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--params: expected KEY=VALUE, got {text!r}")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, value


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def table(head, rows, left=(), pad=False):
    """A markdown table: the columns named in ``left`` left-aligned, the
    others right-aligned. A row is a list of cells (``str`` of each) or a
    finished line (a str). ``pad``: cells padded to their column's width,
    for reading as plain text."""
    cells = [r if isinstance(r, str) else [str(c) for c in r] for r in rows]
    is_left = [h in left for h in head]
    if pad:
        w = [max([len(h)] + [len(r[i]) for r in cells if not isinstance(r, str)])
             for i, h in enumerate(head)]
        line = lambda r: "| " + " | ".join(c.ljust(w[i]) if is_left[i] else c.rjust(w[i])
                                           for i, c in enumerate(r)) + " |"
        sep = "|" + "|".join("-" * (w[i] + 2) if is_left[i] else "-" * (w[i] + 1) + ":"
                             for i in range(len(head))) + "|"
    else:
        line = lambda r: "| " + " | ".join(r) + " |"
        sep = "|" + "|".join("---" if lf else "---:" for lf in is_left) + "|"
    return "\n".join([line(head), sep] + [r if isinstance(r, str) else line(r)
                                          for r in cells])


def load_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def save_json(path, obj):
    """Write ``obj`` to ``path`` atomically (a temporary file, then a rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def cache_dir():
    """datasets.cache_dir() (the parent cannot import datasets: numpy)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "streamcvm-bench")


def load_data(spec, train=True):
    """Child side: (Xtr, ytr, Xte, yte) of the protocol dataset
    ``spec["dataset"]`` (``datasets.load``, from ``spec["raw_dir"]``), with
    ``spec["quick"]`` only QUICK_TRAIN / QUICK_TEST random rows (seed 0);
    Xtr None (not read) unless ``train``."""
    import datasets as D
    parts = ("Xtr", "ytr", "Xte", "yte") if train else ("ytr", "Xte", "yte")
    got = D.load_parts(spec["dataset"], spec.get("raw_dir"), parts,
                       quick=(QUICK_TRAIN, QUICK_TEST) if spec["quick"] else None)
    return got.get("Xtr"), got["ytr"], got["Xte"], got["yte"]


# ---------------------------------------------------------------------------
# benchmarks on generated stores
# ---------------------------------------------------------------------------

def human_rows(n):
    """200000 -> "200K", 2000000 -> "2M", 1500 -> "1,500"."""
    for div, unit in ((10 ** 9, "G"), (10 ** 6, "M"), (10 ** 3, "K")):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:,}"


def parse_rows(s):
    """ "200K", "1M", "2e6", "20000" -> a positive int (an argparse type)."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+]?[0-9]+)?)([kKmMgG]?)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a row count: {s!r} (e.g. 200K, 1M, 20000)")
    n = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    if n < 1 or n != int(n):
        raise argparse.ArgumentTypeError(f"not a whole positive row count: {s!r}")
    return int(n)


def generated_store(path, kind, n, seed=0, first_block=0, progress=False, checksums=True):
    """(the store at ``path``, seconds spent generating it or None): a
    ``streamcvm.data.synthetic.write_store`` store of ``n`` rows of ``kind``,
    generated again unless one of ``n`` rows, with chunk checksums or
    without as asked, is there (child side)."""
    from streamcvm import open_store
    from streamcvm.data import synthetic
    try:
        s = open_store(path)
        ok = s.n == n and bool(s.checksums) == bool(checksums)
    except Exception:           # missing or unreadable: generated again
        ok = False
    took = None
    if not ok:
        t = time.perf_counter()
        synthetic.write_store(path, kind, n, seed=seed, first_block=first_block,
                              overwrite=True, progress=progress, checksums=checksums)
        took = time.perf_counter() - t
    return open_store(path), took


def ensure_store(workdir, kind, n, first_block, seed=0, suffix="", **spec):
    """(path, the child's record) of the store of ``n`` rows of ``kind`` in
    ``workdir``, made by the running script's "store" job (a child) from
    the spec {"kind": "store", "data", "path", "n", "first_block", **spec}
    (``suffix``: added to the file name, e.g. for stores of another format)."""
    path = os.path.join(workdir, f"{kind}-{'test' if first_block else 'train'}-{n}-s{seed}"
                                 f"{suffix}.zarr")
    log(f"store {path} ...")
    r = run_child(dict(kind="store", data=kind, path=path, n=n, first_block=first_block,
                       **spec), None)
    if "error" in r:
        raise SystemExit(f"cannot make {path}: {r['error']}")
    if "generate_s" in r:
        log(f"  generated {n:,} rows in {r['generate_s']:.0f} s "
            f"({r['disk_bytes'] / 1e9:.2f} GB on disk)")
    return path, r


def read_rows(store, m, seed=0):
    """(X, y): exactly ``min(m, store.n)`` rows of ``store``, all of them or
    a uniform random subset, read chunk by chunk. Each chunk gets its share
    by a hypergeometric draw (the rows still wanted among the rows still
    unread), then that many random positions: memory stays at the rows kept."""
    import numpy as np
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    m = min(int(m), store.n)
    need, left = m, store.n
    Xd = None if store.sparse else np.empty((m, store.d), np.float32)
    parts, ys, at = [], [], 0
    for c in store:
        r = len(c.y)
        if m == store.n:
            idx = slice(None)
            k = r
        else:
            k = int(rng.hypergeometric(r, left - r, need)) if need else 0
            idx = np.zeros(r, bool)
            idx[rng.choice(r, k, replace=False)] = True
        left -= r
        need -= k
        if k == 0:
            continue
        if Xd is None:
            parts.append(sp.csr_matrix(c.X[idx]))
        else:
            Xd[at:at + k] = c.X[idx]
        ys.append(np.asarray(c.y)[idx])
        at += k
    X = sp.vstack(parts, format="csr") if Xd is None else Xd
    return X, np.concatenate(ys)


def run_reference(spec, limit):
    """A reference child (the running script's ``spec``, killed after
    ``limit`` s). A child killed after its fit reports its fit figures: it
    writes them to ``spec["partial"]`` before predicting."""
    partial = spec["partial"]
    r = run_child(spec, limit)
    if r.get("timeout"):        # killed: while fitting, or after (then its fit time)
        fit = load_json(partial, {})
        r.update(fit, error=f"killed at {limit:g} s while predicting" if fit else
                 f"> {limit:g} s")
    if os.path.exists(partial):
        os.remove(partial)
    return r


def add_warnings(out, caught):
    """``out["warnings"]``: the distinct first lines of the caught warnings
    ("Category: message"), if any."""
    msgs = sorted({f"{w.category.__name__}: {w.message}".splitlines()[0][:200]
                   for w in caught})
    if msgs:
        out["warnings"] = msgs


def print_sizes(title, runs, table, ours):
    """One data set's section of the report: "### <title>, gamma <the runs'
    gammas>", the ``table`` of its ``runs``, then the growth of streamcvm's
    train s and peak RSS from one size to the next (``ours``: its runs)."""
    gam = sorted({f"{r['gamma']:.6g}" for r in runs if r.get("gamma")})
    print(f"\n### {title}, gamma {', '.join(gam) or '-'}\n")
    print(table)
    g = [f"{human_rows(b['rows'])} / {human_rows(a['rows'])}: "
         f"time x{b['train_s'] / a['train_s']:.2f}, RSS x{b['peak_rss'] / a['peak_rss']:.2f}"
         for a, b in zip(ours, ours[1:])]
    if g:
        print("\nstreamcvm growth: " + "; ".join(g))


# ---------------------------------------------------------------------------
# scikit-learn-intelex (oneDAL's SVC / SVR): a reference at equal threads
# ---------------------------------------------------------------------------

SKLEARNEX = "scikit-learn-intelex"


def sklearnex_missing():
    """Parent side: None when scikit-learn-intelex can be imported, else a
    one-line reason (the reference is then skipped). Looks the package up
    without importing it (the parent stays small)."""
    import importlib.util
    try:
        found = importlib.util.find_spec("sklearnex") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return (f"{SKLEARNEX} is not installed (pip install '{SKLEARNEX}'; x86_64 only): "
                f"sklearnex reference skipped")
    return None


def sklearnex_version():
    try:
        return importlib.metadata.version(SKLEARNEX)
    except importlib.metadata.PackageNotFoundError:
        return None


def sklearnex_estimator(kind, threads, **params):
    """Child side: ``sklearnex.svm.SVC`` or ``SVR`` (``kind`` "svc" / "svr")
    with ``params`` and ``n_jobs=threads``: oneDAL's threads (TBB) for fit
    and predict, set by sklearnex around each call (``daal4py.daalinit``)."""
    import sklearnex.svm as skx
    return getattr(skx, kind.upper())(n_jobs=int(threads), **params)


class OnedalLog:
    """Child side: a context that records which backend sklearnex ran for
    each call (its logger "sklearnex" at INFO: "<scope>.<method>: running
    accelerated version on CPU" for oneDAL, "fallback to original
    Scikit-learn" otherwise). ``record()``: {"sklearnex": version,
    "backend": {"fit": "oneDAL", "predict": "oneDAL", ...} ("oneDAL+sklearn"
    when both ran), "onedal": True only if every call ran oneDAL,
    "onedal_default_threads": oneDAL's thread count outside the calls}."""

    def __init__(self):
        import logging
        self.logging, self.calls = logging, []
        outer = self

        class Handler(logging.Handler):
            def emit(self, rec):
                outer.calls.append(rec.getMessage())
        self.handler = Handler(logging.INFO)

    def __enter__(self):
        self.logger = self.logging.getLogger("sklearnex")
        self.level = self.logger.level
        self.logger.addHandler(self.handler)
        if self.logger.getEffectiveLevel() > self.logging.INFO:
            self.logger.setLevel(self.logging.INFO)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)

    def backends(self):
        got = {}
        for msg in self.calls:
            scope, sep, what = msg.partition(": ")
            if not sep or not scope.startswith("sklearn."):
                continue
            method = scope.rsplit(".", 1)[-1]
            kind = ("oneDAL" if what.startswith("running accelerated") else
                    "sklearn" if "fallback to original" in what else None)
            if kind:
                got.setdefault(method, [])
                if kind not in got[method]:
                    got[method].append(kind)
        return {m: "+".join(k) for m, k in got.items()}

    def record(self):
        import daal4py
        b = self.backends()
        return {"sklearnex": sklearnex_version(), "backend": b,
                "onedal": bool(b) and all(v == "oneDAL" for v in b.values()),
                "onedal_default_threads": int(daal4py.num_threads())}


def backend_note(r):
    """The notes cell of a sklearnex row: "oneDAL fit, predict" or what fell
    back to scikit-learn ("FALLBACK ..."), from ``OnedalLog.record``."""
    b = r.get("backend")
    if not b:
        return "backend not logged"
    bad = [f"{m}: {k}" for m, k in b.items() if k != "oneDAL"]
    return ("oneDAL " + ", ".join(b) if not bad else
            "FALLBACK to scikit-learn (" + "; ".join(bad) + ")")


def threads_note(ours, ref):
    """None when the two thread counts agree, else why a ratio is left out."""
    if ours is None or ref is None or int(ours) == int(ref):
        return None
    return f"threads differ ({ours} vs {ref}): no ratio"


def baseline_exe(tree):
    """``streamcvm`` of the source tree ``tree`` (a worktree of --baseline).
    ``-P``: ``python -m`` would put the working directory first on sys.path,
    ahead of PYTHONPATH, so a run from the repository's root imported this
    tree's streamcvm as the baseline (fixed 2026-11-28; earlier --baseline
    rows run from the root, not from tools/, were this tree's code)."""
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return ["env", f"PYTHONPATH={tree}", "PYTHONSAFEPATH=1", sys.executable, *safe,
            "-m", "streamcvm.cli"]


def baseline_worktree(rev):
    """A detached git worktree of ``rev`` (made once, reused): its path."""
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "--short",
                        f"{rev}^{{commit}}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"--baseline: {rev!r} is not a commit of {ROOT}")
    sha = r.stdout.strip()
    path = os.path.join("/tmp/streamcvm-bench", f"baseline-{sha}")
    if not os.path.isdir(os.path.join(path, "streamcvm")):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        r = subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "--force", path,
                            sha], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"--baseline: git worktree add failed: {r.stderr.strip()}")
    return sha, path
