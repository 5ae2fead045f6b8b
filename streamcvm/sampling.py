"""Random rows from a store without one chunk decompression per row.

:class:`ChunkPool` keeps a bounded number of decompressed chunks, draws rows
from them, and swaps one chunk for a random other one every ``refresh``
draws, so that over a run every chunk is visited. Everything is driven by
the caller's ``numpy.random.Generator``: the same seed draws the same rows.
Class-balanced draws take half of the rows from each of two classes.
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
        self._index()

    def _load(self, i):
        a, _ = self.store.chunk_bounds(i)
        c = self.store.chunk(i)
        X = c.X.tocsr() if sp.issparse(c.X) else c.X
        return {"chunk": i, "start": a, "X": X, "y": np.asarray(c.y, np.float64)}

    def _index(self):
        """Flat (slot, row) index of the pooled rows, and per label value."""
        slots = np.concatenate([np.full(len(p["y"]), k, np.int64) for k, p in enumerate(self.pool)])
        rows = np.concatenate([np.arange(len(p["y"]), dtype=np.int64) for p in self.pool])
        y = np.concatenate([p["y"] for p in self.pool])
        gid = np.concatenate([p["start"] + np.arange(len(p["y"]), dtype=np.int64)
                              for p in self.pool])
        self._flat = (slots, rows, gid, y)
        self._by_class = {}

    def _class_index(self, cls):
        idx = self._by_class.get(cls)
        if idx is None:
            idx = self._by_class[cls] = np.flatnonzero(self._flat[3] == cls)
        return idx

    def _maybe_refresh(self):
        self.draws += 1
        nc = self.store.n_chunks
        if nc <= self.pool_chunks or self.draws % self.refresh:
            return
        pooled = {p["chunk"] for p in self.pool}
        cand = int(self.rng.integers(0, nc))
        while cand in pooled:
            cand = int(self.rng.integers(0, nc))
        slot = int(self.rng.integers(0, len(self.pool)))
        self.pool[slot] = self._load(cand)
        self._index()

    def _pick(self, candidates, k, exclude):
        """k random positions of ``candidates`` (flat indices) not excluded."""
        out = []
        need = k
        for _ in range(8):
            if need <= 0 or len(candidates) == 0:
                break
            take = candidates[self.rng.integers(0, len(candidates), 2 * need + 4)]
            if exclude is not None:
                gid = self._flat[2][take]
                if isinstance(exclude, np.ndarray):
                    keep = ~np.isin(gid, exclude)
                else:       # a container of ids (e.g. the CoreSet): O(1) lookups
                    keep = np.fromiter((int(g) not in exclude for g in gid), bool, len(gid))
                take = take[keep]
            take = take[:need]
            out.append(take)
            need -= len(take)
        return np.concatenate(out) if out else np.empty(0, np.int64)

    def draw(self, m, classes=None, exclude=None, target="raw"):
        """``m`` random rows: (global ids, X rows, y). With ``classes`` (two
        label values ``(neg, pos)``) half are drawn from each. ``exclude``: global
        row ids to skip (the core set): an array, or any container of ids. ``target``: "raw"
        labels, "binary" (+1 for ``pos``, -1 for ``neg``) or "ones"."""
        self._maybe_refresh()
        if classes is None:
            pos = self._pick(np.arange(len(self._flat[0])), m, exclude)
        else:
            pos = np.concatenate([
                self._pick(self._class_index(classes[0]), m - m // 2, exclude),
                self._pick(self._class_index(classes[1]), m // 2, exclude)])
        slots, rows, gid, y = (a[pos] for a in self._flat)
        y = relabel(y, classes, target)
        if len(pos) == 0:
            return gid, None, y
        parts = []
        order = []
        for s in np.unique(slots):
            sel = np.flatnonzero(slots == s)
            parts.append(self.pool[s]["X"][rows[sel]])
            order.append(sel)
        inv = np.argsort(np.concatenate(order), kind="stable")
        if sp.issparse(parts[0]):
            X = sp.vstack(parts).tocsr()[inv]
        else:
            X = np.concatenate(parts)[inv]
        return gid, X, y


def relabel(y, classes, target):
    """Labels as a sub-problem sees them (see ChunkPool.draw)."""
    if target == "binary":
        return np.where(y == classes[1], 1.0, -1.0)
    if target == "ones":
        return np.ones(len(y))
    return y
