"""Exact or sampled BVM steps: the cost model behind
:func:`~streamcvm.problems.driver.run_solver`'s choice.

A problem whose rows are held whole in memory (a small store, a progressive
stage) can take its BVM steps two ways (docs/solvers.md, "Exact or sampled,
by cost"):

- sampled (:meth:`MEBSolver.fit`): draw ``sample_size`` rows, their kernel
  values against the |S| core vectors, step on the furthest: a fixed cost
  (drawing, Python) plus ``sample_size x |S|`` kernel values;
- exact (:meth:`MEBSolver.fit_exact`): one kernel value per held row and
  step, on the pass's threads.

:class:`StepCosts` predicts both per step, from the problem's shape (rows,
values per row, threads) and the core set's size, with constants measured
by ``tools/calibrate_dispatch.py`` (the options ``dispatch_*``), and the
problem takes the cheaper. The constants are fixed, not timed during the fit, and the thread count is not
an input: a choice made by a clock would make the model depend on the
machine's load (and a resumed run would not give the uninterrupted one's
model), one made by ``n_jobs`` would make it depend on the thread count.
Each choice is recorded in the solver's history (``dispatch``: the path,
the core-set size it was made at, both predicted step costs).
"""
import dataclasses

from ..options import SAMPLE_SIZE, Options

# The constants (the options dispatch_*): tools/calibrate_dispatch.py, one thread, the
# 20th percentile of repeats (2026-11-28; dense d = 4 / 22 / 64, text-like sparse rows
# of 43 nonzeros): a sampled step 0.16 / - / 0.84 / 9 ms + 1.7 / 12.5 / 38 / 10 ns a
# kernel value, an exact step 3.2 / 13-17 / 34-39 / 14-29 ns a row. The machine was
# busy: the absolute figures are ~2x a quiet one's, their ratios what counts. The exact
# pass on two cores against one (it is bound by memory traffic beyond) is assumed
# whatever n_jobs, which the model does not depend on.


@dataclasses.dataclass
class StepCosts:
    """The predicted cost of one step of each path on a problem of ``rows``
    held rows with ``values`` stored values per row (features, or nonzeros)
    and samples of ``sample_size`` rows; ``options``: the cost model's
    constants (:class:`~streamcvm.options.Options`' ``dispatch_*``)."""

    rows: int
    values: float
    sample_size: int = SAMPLE_SIZE
    options: Options = dataclasses.field(default_factory=Options)

    @classmethod
    def of(cls, X, sample_size, options):
        """The costs of a problem over the rows ``X`` (dense or CSR)."""
        m = X.shape[0]
        cells = X.nnz if hasattr(X, "nnz") else m * X.shape[1]
        return cls(int(m), cells / max(m, 1), int(sample_size), options)

    def _value_s(self):
        a, b = self.options.dispatch_kernel_value_s
        return a + b * self.values

    def sampled(self, core):
        """Seconds of a sampled step against ``core`` core vectors."""
        return self.options.dispatch_sampled_fixed_s + self.sample_size * core * self._value_s()

    def exact(self):
        """Seconds of an exact step over every held row."""
        a, b = self.options.dispatch_exact_row_s
        return self.rows * (a + b * self.values) / self.options.dispatch_exact_speedup

    def exact_cheaper(self, core):
        """Whether an exact step costs at most a sampled one at ``core``."""
        return self.exact() <= self.sampled(core)

    def first_core(self):
        """The smallest core-set size at which the exact step is the cheaper."""
        kv = self._value_s()
        gap = self.exact() - self.options.dispatch_sampled_fixed_s
        return 0 if gap <= 0 else int(-(-gap // (self.sample_size * kv)))

    def record(self, path, core):
        """What the history keeps of a choice made at ``core`` core vectors."""
        return {"path": path, "rows": self.rows, "core_size": int(core),
                "sampled_step_s": float(self.sampled(core)),
                "exact_step_s": float(self.exact())}
