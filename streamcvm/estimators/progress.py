"""The progress bar of a fit: one tqdm bar over the machines, with the
running machine's eps level, core-set size, radius and iterations, and the
full passes' chunk tasks."""
import numpy as np


class FitProgress:
    """A tqdm bar over the machines (``verbose``), showing the running
    machine's eps level, core-set size, radius and iterations."""

    def __init__(self, verbose, total, method, unit="machine", verb="train"):
        self.bar = None
        if verbose:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, unit=unit, desc=f"{verb} {method}",
                            mininterval=0.5)
        self.k = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.update(self.k - self.bar.n)
            self.bar.close()

    def next(self):
        """Before each machine: count the finished ones."""
        if self.bar is not None and self.k:
            self.bar.update(1)
        self.k += 1
        return True

    def note(self, text):
        """A line of the running machine's state."""
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def passes(self, done, total, k=1):
        """Full pass ``k``'s progress: chunk tasks done of total."""
        if self.bar is not None:
            self.bar.set_postfix_str(f"full pass {k}: chunk {done:,}/{total:,}",
                                     refresh=done == total)

    def update(self, solver):
        if self.bar is not None:
            eps = solver.level_eps if solver.level_eps is not None else solver.eps
            note = getattr(solver, "note", None)
            self.bar.set_postfix_str(
                (f"{note}  " if note else "") + f"eps {eps:.1e}  core {solver.core_size:,}  "
                f"radius {np.sqrt(max(solver.radius2 - solver.ball.ce2, 0)):.5f}  "
                f"iter {solver.n_iter:,}")


class SearchProgress:
    """A tqdm bar over the fits of a hyperparameter search (``verbose``):
    each fit's parameters and validation error, and the best so far."""

    def __init__(self, verbose, names):
        self.names, self.bar = names, None
        if verbose:
            from tqdm.auto import tqdm
            self.bar = tqdm(unit="fit", desc=f"choose {', '.join(names)}", mininterval=0.5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()

    def _point(self, t):
        return " ".join(f"{n} {t[n]:.3g}" + ("/beta" if n == "gamma" else "")
                        for n in self.names)

    def update(self, trial, best):
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(
                f"{trial['rows']:,} rows: {self._point(trial)} error {trial['val_loss']:.2%}"
                f"  best {self._point(best)} {best['val_loss']:.2%}")
