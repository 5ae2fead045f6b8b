"""Random rows from a store without one chunk decompression per row.

:class:`ChunkPool` keeps a bounded number of decompressed chunks, draws rows
from them, and swaps one chunk for a random other one every ``refresh``
draws, so that over a run every chunk is visited. Everything is driven by
the caller's ``numpy.random.Generator``: the same seed draws the same rows.
Class-balanced draws take half of the rows from each class of the pooled
chunks.
"""
import numpy as np
import scipy.sparse as sp


class ChunkPool:
    def __init__(self, store, rng, pool_chunks=8, refresh=16):
        self.store = store
        self.rng = rng
        nc = store.n_chunks
        self.pool_chunks = min(pool_chunks, nc)
        self.refresh = refresh
        self.draws = 0
        first = rng.choice(nc, size=self.pool_chunks, replace=False) if nc > 1 else [0]
        self.pool = [self._load(int(i)) for i in first]

    def _load(self, i):
        a, b = self.store.chunk_bounds(i)
        c = self.store.chunk(i)
        X = c.X.tocsr() if sp.issparse(c.X) else c.X
        return {"chunk": i, "start": a, "X": X, "y": np.asarray(c.y, np.float64)}

    def _maybe_refresh(self):
        self.draws += 1
        nc = self.store.n_chunks
        if nc <= self.pool_chunks or self.draws % self.refresh:
            return
        pooled = {p["chunk"] for p in self.pool}
        cand = self.rng.integers(0, nc)
        while cand in pooled:
            cand = self.rng.integers(0, nc)
        slot = self.rng.integers(0, len(self.pool))
        self.pool[slot] = self._load(int(cand))

    def draw(self, m, classes=None, exclude=None):
        """``m`` random rows: (global ids, X rows, y). With ``classes`` (a
        pair of label values) half are drawn from each class present.
        Rows in ``exclude`` (a container of ids) are skipped."""
        self._maybe_refresh()
        sizes = np.array([len(p["y"]) for p in self.pool])
        picks = []
        if classes is None:
            want = [(None, m)]
        else:
            want = [(classes[0], m - m // 2), (classes[1], m // 2)]
        for cls, k in want:
            got = 0
            tries = 0
            while got < k and tries < 20 * k + 20:
                tries += 1
                p = int(self.rng.choice(len(self.pool), p=sizes / sizes.sum()))
                r = int(self.rng.integers(0, sizes[p]))
                if cls is not None and self.pool[p]["y"][r] != cls:
                    continue
                gid = self.pool[p]["start"] + r
                if exclude is not None and gid in exclude:
                    continue
                picks.append((p, r))
                got += 1
        if not picks:
            return np.empty(0, np.int64), None, np.empty(0)
        ids = np.array([self.pool[p]["start"] + r for p, r in picks], np.int64)
        y = np.array([self.pool[p]["y"][r] for p, r in picks])
        if sp.issparse(self.pool[0]["X"]):
            X = sp.vstack([self.pool[p]["X"][r] for p, r in picks]).tocsr()
        else:
            X = np.stack([self.pool[p]["X"][r] for p, r in picks])
        return ids, X, y
