"""Exact BVM over every row of a problem held in memory (docs/design.md,
section 3): the driver around the compiled loop :func:`.bvm_loop.bvm_exact`.

The sampled methods find violators in random samples; a small problem, whose
rows the sampler holds whole, can afford (K~a) of every row instead, so no
violator is missed. :class:`ExactBVM` runs that loop for an
:class:`~streamcvm.solvers.meb.MEBSolver` with method BVM: from the start,
or warm from the solver's sampled center (a run that found the exact pass
cheaper), in pieces of about 0.1 s so that it checkpoints, shows progress
and resumes; then it hands the center back to the solver's ball.
"""
import time

import numpy as np
import scipy.sparse as sp

from ..bvm_average import half_last_step
from ..kernels import kernel_sums, sq_norms
from .bvm_loop import (
    bvm_exact,
    hist_from_floats,
    hist_to_floats,
    new_hist,
    new_state,
    state_from_floats,
    state_to_floats,
)


def dense_columns(X, opts):
    """Whether the exact pass should hold the sparse rows ``X`` (CSR) dense.

    Sparse rows whose matrix columns are long (few, frequent features: a9a's
    one-hot fields) go to the pass dense when that fits in the option
    ``exact_dense_columns_mb``: a step's dot products then cost its own
    nonzeros per row, in vectorised passes shared by the threads, rather than
    a serial scatter over the rows of every column it touches (sum_f nnz_f^2 /
    rows adds a step on average, 6.2 rows' worth on a9a). So: when they fit,
    and a step's serial scatter (the summed squared column counts over the
    rows) costs more than its dense dot products (the mean nonzeros of a row)
    at ``exact_scatter_ratio`` (how many contiguous multiply-adds cost what
    one scattered add does: measured on a9a and w8a, tools/bench_classify.py)."""
    n, d = X.shape
    if n == 0 or 4.0 * n * d > opts.exact_dense_columns_mb << 20:
        return False
    counts = np.bincount(X.indices, minlength=d).astype(np.float64)
    scatter = float(counts @ counts) / n          # scattered adds a step
    dense = X.nnz / n * n / opts.exact_scatter_ratio    # multiply-adds a step, scattered units
    return scatter > dense


class _Threads:
    """How many tasks :func:`bvm_exact`'s passes run as, piece by piece of
    the run: the faster of one and ``most`` by the seconds per pass and step
    of their last ``exact_thread_keep`` pieces (the median: one piece slowed
    by something else on the machine does not flip the choice), so a machine
    busy with other work falls back to one thread rather than wait at every
    step for a descheduled one. The count not chosen is retried every
    ``exact_thread_retry`` pieces, and one thread is first measured, on a
    probe: a piece of ``exact_thread_probe`` of the usual steps (on two cores
    one thread is ~1.3x slower a pass, so a full-length probe costs a few
    percent of the run). Passes of fewer than ``exact_thread_rows`` rows run
    on one thread (too short to share). The model is the same either way:
    each row's arithmetic does not depend on the count, nor on where the
    pieces end."""

    def __init__(self, most, n_rows, opts):
        self.most = most if n_rows >= opts.exact_thread_rows else 1
        self.retry, self.keep, self.probe = (opts.exact_thread_retry, opts.exact_thread_keep,
                                             opts.exact_thread_probe)
        self.seen = {}
        self.pieces = 0

    def cost(self, tasks):
        return float(np.median(self.seen[tasks]))

    def pick(self):
        """(tasks, share): the count for the next piece and the share of a
        piece's steps it runs (``PROBE`` when it measures the other count)."""
        self.pieces += 1
        if self.most == 1:
            return 1, 1.0
        if self.most not in self.seen:
            return self.most, 1.0
        if 1 not in self.seen:
            return 1, self.probe
        best = min(self.seen, key=self.cost)
        if self.pieces % self.retry == 0:
            return (self.most if best == 1 else 1), self.probe
        return best, 1.0

    def took(self, tasks, seconds_per_unit):
        self.seen[tasks] = (self.seen.get(tasks, []) + [seconds_per_unit])[-self.keep:]


class ExactBVM:
    """The exact pass of one solver (``solver.exact``). ``run``: the loop's
    state while it runs (or restored from a snapshot, to resume); ``ended_Ka``:
    ``(ids, (K~a))`` where the last run ended, reused by a warm start on a
    superset of those rows (a progressive fit's next stage)."""

    def __init__(self, solver):
        self.s = solver
        self.run = None
        self.ended_Ka = None

    @property
    def running(self):
        return self.run is not None

    def ok(self, X):
        """Whether :meth:`fit` applies to the rows ``X`` (dense or CSR): the
        plain MEB, a kernel the compiled pass knows (``has("exact_bvm")``: the RBF), no core cap, and rows that fit the exact
        pass's memory (stored values, rows x features or nnz, at most the
        option ``exact_max_cells``). Whether it is cheaper than sampling is
        :func:`~streamcvm.problems.driver.run_solver`'s call."""
        ball = self.s.ball
        cells = X.nnz if sp.issparse(X) else X.shape[0] * X.shape[1]
        return (ball.plain and ball.kernel.has("exact_bvm") and self.s.max_core is None
                and cells <= self.s.options.exact_max_cells)

    def core_size(self):
        return int(self.run["state"][0]["core"])

    def state(self, levels):
        """(meta, arrays) of a paused run (see :meth:`MEBSolver.state`): the
        loop's state and per-level record as the float64 arrays ``ex_state``
        (16 values) and ``ex_hist`` (levels x 9) the snapshots store."""
        s, st = self.s, self.run["state"][0]
        flat = {"state": state_to_floats, "hist": hist_to_floats}
        return ({"exact": True, "elapsed": time.perf_counter() - s.t0,
                 "n_iter": int(st["steps"]), "core_size": int(st["core"]),
                 "level_eps": levels[min(int(st["level"]), len(levels) - 1)],
                 "history": s.history, "warm": self.run.get("warm", False),
                 "dispatch": s.dispatch},
                {"ex_" + k: flat[k](v) if k in flat else v
                 for k, v in self.run.items() if k != "warm"})

    def restore(self, meta, arrays):
        self.run = {k[3:]: np.array(v) for k, v in arrays.items() if k.startswith("ex_")}
        self.run["state"] = state_from_floats(self.run["state"])
        self.run["hist"] = hist_from_floats(self.run["hist"])
        self.run["elapsed"] = meta["elapsed"]
        self.run["warm"] = meta.get("warm", False)
        self.s.history = meta.get("history", [])
        self.s.dispatch = meta.get("dispatch")

    def fit(self, ids, X, y, checkpoint=None, warm=False, callback=None):
        """BVM on every row of a small in-memory problem (:func:`bvm_exact`):
        ``ids``, dense ``X`` and labels ``y`` of all its rows. Same schedule,
        same stopping rule; no sampling, so no violator is missed. The
        held-out rows of :meth:`MEBSolver.set_validation` ride along: their margins are
        kept each step, so every level records its validation error.
        ``warm``: continue from this solver's current center (a sampled
        :meth:`MEBSolver.fit` that stopped because the exact pass became cheaper; its
        core vectors are among ``ids``).
        ``checkpoint(solver, position)``: as in :meth:`MEBSolver.fit`; the compiled loop
        then runs in pieces of about 0.1 s, and a state :meth:`MEBSolver.restore` d from
        such a snapshot continues where it was. ``callback(solver)``: after
        each piece of about 0.1 s (progress). The center ends in the solver's
        ball, its history and counters in the solver."""
        s, ball, opts = self.s, self.s.ball, self.s.options
        resumed = self.run
        n_cand = len(ids)
        if s.val is not None:            # validation rows after the candidates
            Xv, yv = s.val
            X = sp.vstack([sp.csr_matrix(X), sp.csr_matrix(Xv)]).tocsr() if sp.issparse(X) \
                else np.concatenate([np.asarray(X, np.float32), np.asarray(Xv, np.float32)])
            y = np.concatenate([np.asarray(y, np.float64), np.asarray(yv, np.float64)])
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float32)
            X.sum_duplicates()
        if sp.issparse(X) and dense_columns(X, opts):
            # the pass reads the rows dense (the rest of the solver keeps them sparse)
            XT = np.ascontiguousarray(X.T.toarray())
            ip = ind = cp = ri = np.zeros(0, np.int64)
            dat = cv = np.zeros(0, np.float32)
        elif sp.issparse(X):
            XT = np.zeros((X.shape[1], 0), np.float32)
            ip, ind, dat = X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data
            Xc = X.tocsc()
            cp, ri, cv = Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64), Xc.data
        else:
            X = np.ascontiguousarray(X, np.float32)
            XT = X.T.copy()     # its own: the shrinking moves its rows
            ip = ind = cp = ri = np.zeros(0, np.int64)
            dat = cv = np.zeros(0, np.float32)
        levels = np.array(s.levels())
        n = X.shape[0]
        sq, yv = sq_norms(X), np.asarray(y, np.float64)
        if resumed:
            st, Ka, alpha, hist = (resumed[k] for k in ("state", "Ka", "alpha", "hist"))
            perm = resumed.get("perm")      # (a snapshot of before the shrinking: none)
            s.t0 = time.perf_counter() - resumed["elapsed"]
        elif warm:
            st, Ka, alpha, hist = self.warm_state(np.asarray(ids), X, sq, yv, levels)
            perm = None
        else:
            s.t0 = time.perf_counter()
            st, Ka, alpha = new_state(), np.zeros(n), np.zeros(n)
            hist = new_hist(len(levels))
            perm = None
        # the pass's own rows, norms and labels, in the order of positions
        # (``perm``: a paused run's shrinking may have moved them)
        perm = np.arange(n, dtype=np.int64) if perm is None else perm.astype(np.int64)
        sq32, yp = sq.astype(np.float32), yv.copy()
        if not np.array_equal(perm, np.arange(n)):
            sq32, yp = sq32[perm], yp[perm]
            if XT.shape[1]:
                XT = np.ascontiguousarray(XT[:, perm])
        self.run = {"state": st, "Ka": Ka, "alpha": alpha, "hist": hist, "perm": perm,
                    "warm": bool(warm or (resumed and resumed.get("warm")))}
        # (a warm start's sampled steps count too)
        max_steps = opts.exact_steps_per_row * n_cand + opts.exact_steps_extra
        per_call = max(16, int(opts.exact_piece_values // max(n, 1)))  # ~5 ns a row-step
        threads = _Threads(s.n_tasks(), n, opts)
        cur = st[0]         # the record: a view, what the loop writes
        while True:
            if checkpoint is not None:
                checkpoint(s, (int(cur["level"]), 0))
            t, work0 = time.perf_counter(), cur["passes"] + cur["steps"]
            tasks, share = threads.pick()
            last = bvm_exact(XT, ip, ind, dat, cp, ri, cv, sq32, yp, ball.kernel.gamma, ball.b,
                             1.0 / ball.C, levels, s.margin_tol if s.auto_eps else 0.0,
                             max_steps, alpha, hist, True, st, Ka,
                             int(cur["steps"]) + max(16, int(per_call * share)), tasks, n_cand,
                             s.val_rule, options=opts, perm=perm)
            if last >= 0:
                break
            # per pass and step (a pass costs ~ rows x (1 + its steps)): per pass alone
            # would favour whichever count ran the passes of fewer steps
            threads.took(tasks, (time.perf_counter() - t)
                         / max(cur["passes"] + cur["steps"] - work0, 1.0))
            if callback is not None:
                s.n_iter, s.level_eps = int(cur["steps"]), float(levels[int(cur["level"])])
                callback(s)
        self.run = None
        end = hist[last]
        Ka = self.averaged_Ka(X, sq, yv, cur, Ka, end["steps"])[:n_cand]
        self.ended_Ka = (np.array(ids), Ka)
        alpha = alpha[:n_cand]
        keep = np.flatnonzero(alpha > 0)
        # the sampled path may go on from here (a progressive fit's next stage):
        # (K~a) of the core vectors, and no step of its own to halve
        ball.Ka = Ka[keep].copy()
        s.method.last = None
        Xk = X[keep]
        if sp.issparse(Xk) and not ball.core.sparse:
            Xk = Xk.toarray()   # the core set keeps sparse rows dense up to DENSE_MAX_D
        ball.core.clear()
        ball.core.add_many(np.asarray(ids)[keep], Xk, yv[keep], alpha[keep], ball.kernel,
                           1.0 / ball.C, ball.kt)
        s.eps = s.level_eps = float(levels[last])
        s.n_iter = int(end["steps"])
        for h in hist[:last + 1]:
            e, it, c2, ce2, core, verr = (h["eps"], h["steps"], h["c2"], h["ce2"], h["core"],
                                          h["val_error"])
            if np.isnan(e):
                continue        # a level the sampled run before a warm start recorded
            ball.c2, ball.ce2 = float(c2), float(ce2)
            rec = {"iteration": int(it), "core_size": int(core),
                   "radius": float(np.sqrt(ball.r2)), "eps": float(e),
                   "elapsed": time.perf_counter() - s.t0, "c2": float(c2),
                   "ce2": float(ce2), "margin_slack": float(s.margin_slack(e)),
                   "exact": True}
            if s.val is not None:
                rec["validation_error"] = float(verr)
            s.history.append(rec)
        s.cert_eps = float(end["cert_eps"])
        ball.c2, ball.ce2 = float(end["c2_out"]), float(end["ce2_out"])
        s.history[-1]["certified_eps"] = s.cert_eps
        # every row was checked at the last level, unless the step cap cut it short
        capped = end["steps"] >= max_steps
        s.full_pass_violators = None if capped else 0
        if capped:
            s.history[-1]["stopped"] = "max_steps"

    def averaged_Ka(self, X, sq, y, st, Ka, steps):
        """:func:`bvm_exact` keeps ``(K~a)`` of its last center ``c_T``; it
        returns the mean of the last two (:func:`half_last_step`; ``st``: the
        state's record, its last step). ``(K~a)``
        of that mean, from one kernel column (the last step's row ``z``):
        ``Ka_{T-1} = (Ka_T - (1 - beta) col_z) / beta``, then the step at
        ``beta'``. Kept for a warm start on a superset of these rows."""
        ball = self.s.ball
        if steps <= 1:
            return Ka.copy()
        z, beta = int(st["last_z"]), float(st["last_beta"])
        bp = half_last_step(beta, st["last_c2"], st["last_ce2"], st["last_bd"], ball.kt)[0]
        k = ball.kernel.block(X, X[z:z + 1], sq, sq[z:z + 1])[:, 0]
        col = y * y[z] * (k + ball.b)
        col[z] += 1.0 / ball.C
        return bp * (Ka - (1.0 - beta) * col) / beta + (1.0 - bp) * col

    def warm_state(self, ids, X, sq, y, levels):
        """:func:`bvm_exact`'s state continuing from this solver's sampled
        run: its weights placed on the rows ``ids`` (the candidates, first in
        ``X``), ``(K~a)`` of every row (one kernel block against the core),
        the level it was on and its last step (for the final averaging)."""
        s, ball = self.s, self.s.ball
        cs = ball.core
        nc = cs.n
        n = X.shape[0]
        order = np.argsort(ids, kind="stable")
        pos = order[np.searchsorted(ids, cs.ids[:nc], sorter=order)]
        alpha = np.zeros(n)
        alpha[pos] = cs.alpha[:nc]
        ay = cs.alpha[:nc] * cs.y[:nc]
        # rows where the last exact run ended keep its (K~a) (the first rows
        # of a progressive fit's next stage): only the others need kernel values
        prev, r = self.ended_Ka, 0
        if prev is not None and len(prev[0]) <= len(ids) \
                and np.array_equal(prev[0], ids[:len(prev[0])]):
            r = len(prev[0])
        Ka = np.empty(n)
        Ka[:r] = prev[1] if r else 0.0
        Ka[r:] = y[r:] * (kernel_sums(ball.kernel, X[r:], cs.rows(), ay, sq[r:], cs.sq[:nc],
                                      BT=cs.rows_t(), n_jobs=s.n_tasks()) + ball.b * ay.sum())
        new = pos >= r
        Ka[pos[new]] += cs.alpha[:nc][new] * cs.ic[:nc][new]
        kt = ball.kt
        cand = Ka[:len(ids)]
        best = int(np.argmin(cand))
        state = new_state()
        st = state[0]
        li = int(np.flatnonzero(levels <= s.level_eps * (1 + 1e-9))[0])
        st["level"], st["steps"], st["core"] = li, max(s.n_iter, 1), nc
        st["c2"], st["ce2"], st["scale"] = ball.c2, ball.ce2, 1.0
        st["best"], st["bd"] = best, ball.distances(cand[best], kt)
        last = ("last_c2", "last_ce2", "last_bd", "last_z", "last_beta")
        if s.method.last is not None:
            slot, beta, c2p, ce2p, d2 = s.method.last
            values = (c2p, ce2p, d2, pos[slot], beta)
        else:       # no step to halve: the averaging step is then the identity
            values = (ball.c2, ball.ce2, st["bd"], pos[0], 1.0)
        for k, v in zip(last, values):
            st[k] = v
        st["val_best"], st["val_stale"] = s._val_best, s._val_stale
        return state, Ka, alpha, new_hist(len(levels))
