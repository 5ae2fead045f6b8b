"""Random rows from a store without one chunk decompression per row.

:class:`ChunkPool` keeps a bounded number of decompressed chunks and draws
rows from them. Every ``refresh`` draws one pooled chunk is swapped for
another, which a background thread has already read and decompressed, so
over a run every chunk is visited and the search rarely waits for the disk.
By default ``refresh`` is set so that a chunk serves about a quarter of its
rows' worth of draws (of ``sample_size`` rows) before the next swap, and at
least 16 draws: decompressing is paid for by the rows it makes available.
With 16 draws per swap on kddcup99 (8,886-row chunks, a sub-second BVM run)
decompressing took as long as the search, and the search ran 1.5x slower
from the store than from memory; at 38 it is 1.25x.

Reproducible: the rows drawn come from the caller's
``numpy.random.Generator``; which chunk is swapped in, and where, comes
from a schedule seeded from it at construction, so the prefetch thread's
timing never changes a result. With ``classes`` (a two-class sub-problem)
chunks are scheduled by their per-chunk class counts (the store's
``class_counts``; no O(n) index): pool slots alternate between the classes,
each filled with a chunk drawn in proportion to its count of that class, so
both classes stay in the pool however rare or clustered one of them is, and
chunks with neither class are never read.
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ..options import SAMPLE_SIZE, default


class ChunkPool:
    """``pool_chunks`` chunks of ``store`` held decompressed (None: the
    option ``pool_chunks``'s default), ``rng`` the draws' generator,
    ``classes`` the two sides of a sub-problem; see the module's docstring."""

    def __init__(self, store, rng, classes=None, pool_chunks=None, refresh=None,
                 prefetch=True, sample_size=SAMPLE_SIZE):
        if pool_chunks is None:
            pool_chunks = default("pool_chunks")
        self.store = store
        self.rng = rng
        if refresh is None:
            refresh = max(16, -(-store.chunk_rows // (4 * sample_size)))
        self.refresh = int(refresh)
        self.draws = 0
        self._lanes = self._make_lanes(store, classes)
        self._sched = np.random.default_rng(int(rng.integers(2 ** 63)))
        reachable = np.flatnonzero(np.sum(self._lanes, axis=0) > 0)
        k = min(pool_chunks, len(reachable))
        self.pool_chunks = k
        self._n_reachable = len(reachable)
        self.pool = []
        taken = set()
        for slot in range(k):
            i = self._choose(slot, taken)
            taken.add(i)
            self.pool.append(self._load(i))
        self._next = None
        self._exec = self._executor(prefetch)
        self._schedule()
        self._index()

    # -- checkpoints ----------------------------------------------------------
    def state(self):
        """The sampler's state as JSON-able values: the caller's and the
        schedule's generator states, the draw count, the pooled chunks (in
        slot order) and the pending swap. Exclusion masks are not saved: they
        are rebuilt from the core set on the next draw."""
        return {"rng": self.rng.bit_generator.state, "sched": self._sched.bit_generator.state,
                "draws": self.draws, "refresh": self.refresh,
                "pool": [int(p["chunk"]) for p in self.pool],
                "next": None if self._next is None else [int(self._next[0]), int(self._next[1])]}

    @classmethod
    def from_state(cls, store, rng, state, classes=None, prefetch=True):
        """A pool in the state :meth:`state` saved (``rng``: a Generator of the
        same kind, set to the saved state here)."""
        self = cls.__new__(cls)
        self.store = store
        self.rng = rng
        rng.bit_generator.state = state["rng"]
        self.refresh = int(state["refresh"])
        self.draws = int(state["draws"])
        self._lanes = cls._make_lanes(store, classes)
        self._sched = np.random.default_rng(0)
        self._sched.bit_generator.state = state["sched"]
        reachable = np.flatnonzero(np.sum(self._lanes, axis=0) > 0)
        self._n_reachable = len(reachable)
        self.pool_chunks = len(state["pool"])
        self.pool = [self._load(i) for i in state["pool"]]
        self._exec = self._executor(prefetch)
        if state["next"] is None:
            self._next = None
        else:
            cand, slot = state["next"]
            fut = self._exec.submit(self._load, cand) if self._exec is not None else None
            self._next = (cand, slot, fut)
        self._index()
        return self

    def _executor(self, prefetch):
        """The prefetch thread, when asked for and when chunks will be swapped."""
        return ThreadPoolExecutor(1, thread_name_prefix="chunkpool") \
            if prefetch and self._n_reachable > self.pool_chunks else None

    @staticmethod
    def _make_lanes(store, classes):
        """One chunk distribution per "lane"; pool slot k follows lane k % lanes."""
        nc = store.n_chunks
        lanes = [np.full(nc, 1.0 / nc)]
        counts = store.class_counts if classes is not None else None
        if counts is not None and store.classes is not None:
            # a side is one label value or several (one-vs-rest)
            side = [counts[:, np.searchsorted(store.classes, np.atleast_1d(c))].sum(axis=1)
                    for c in classes]
            # each class keeps chunks of its own in the pool, however rare or
            # clustered it is (stores sorted by label are common)
            lanes = [c / c.sum() for c in side if c.sum() > 0] or lanes
        return lanes

    # -- chunks ---------------------------------------------------------------
    def _load(self, i):
        a, _ = self.store.chunk_bounds(i)
        c = self.store.chunk(i)
        X = c.X.tocsr() if sp.issparse(c.X) else c.X
        y = np.asarray(c.y, np.float64)
        w = None if c.weight is None else np.asarray(c.weight, np.float64)
        qid = None if c.qid is None else np.asarray(c.qid, np.int64)
        return {"chunk": i, "start": a, "X": X, "y": y, "w": w, "qid": qid,
                "excl": np.zeros(len(y), bool), "synced": 0}

    def _choose(self, slot, taken):
        """A chunk for pool slot ``slot`` from its lane, not in ``taken``
        (falls back to any chunk of any lane when its lane is exhausted)."""
        p = self._lanes[slot % len(self._lanes)]
        ok = p > 0
        ok[list(taken)] = False
        if not ok.any():
            ok = np.sum(self._lanes, axis=0) > 0
            ok[list(taken)] = False
            p = ok.astype(np.float64)
        q = np.where(ok, p, 0.0)
        return int(self._sched.choice(len(q), p=q / q.sum()))

    def _schedule(self):
        """Pick the next (chunk, slot) swap and start reading that chunk."""
        if self._n_reachable <= self.pool_chunks:
            return
        slot = int(self._sched.integers(0, len(self.pool)))
        cand = self._choose(slot, {p["chunk"] for p in self.pool})
        fut = self._exec.submit(self._load, cand) if self._exec is not None else None
        self._next = (cand, slot, fut)

    def _maybe_refresh(self):
        self.draws += 1
        if self._next is None or self.draws % self.refresh:
            return
        cand, slot, fut = self._next
        self.pool[slot] = fut.result() if fut is not None else self._load(cand)
        self._schedule()
        self._index()

    def close(self):
        if self._exec is not None:
            self._exec.shutdown(wait=True, cancel_futures=True)
            self._exec = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- index and exclusion --------------------------------------------------
    def _index(self):
        """Flat (slot, row) index of the pooled rows, and per label value."""
        sizes = [len(p["y"]) for p in self.pool]
        self._offs = np.concatenate([[0], np.cumsum(sizes)])
        self._flat_y = np.concatenate([p["y"] for p in self.pool])
        self._flat_w = None if any(p["w"] is None for p in self.pool) else \
            np.concatenate([p["w"] for p in self.pool])
        self._excl = np.concatenate([p["excl"] for p in self.pool])
        for k, p in enumerate(self.pool):
            p["excl"] = self._excl[self._offs[k]:self._offs[k + 1]]   # views
        self._by_class = {}
        self._groups = None                      # query groups of the pool (draw_pairs)
        # a pool that never changes (small stores) is merged once: one fancy
        # index per draw instead of per-chunk gathers
        self._static = None
        if self._next is None and len(self.pool) > 0:
            Xs = [p["X"] for p in self.pool]
            X = Xs[0] if len(Xs) == 1 else \
                sp.vstack(Xs).tocsr() if sp.issparse(Xs[0]) else np.concatenate(Xs)
            gid = np.concatenate([p["start"] + np.arange(len(p["y"]), dtype=np.int64)
                                  for p in self.pool])
            self._static = (gid, X)

    def _sync_exclude(self, exclude):
        """Mark the pooled rows that are members of ``exclude`` (an object
        with ``ids`` and ``n`` that only grows, such as the CoreSet): new
        members are looked up once, a newly pooled chunk once."""
        ids = exclude.ids[:exclude.n]
        for p in self.pool:
            new = ids[p["synced"]:]
            if len(new):
                loc = new - p["start"]
                loc = loc[(loc >= 0) & (loc < len(p["y"]))]
                p["excl"][loc] = True
                p["synced"] = len(ids)

    def _class_index(self, cls):
        """Flat positions of the pooled rows whose label is ``cls`` (a value,
        or a tuple of values for one side of a one-vs-rest problem)."""
        idx = self._by_class.get(cls)
        if idx is None:
            idx = self._by_class[cls] = np.flatnonzero(np.isin(self._flat_y, cls))
        return idx

    def _pick(self, candidates, k, exclude):
        """k random positions of ``candidates`` (flat indices) not excluded."""
        out = []
        need = k
        for _ in range(8):
            if need <= 0 or len(candidates) == 0:
                break
            take = candidates[self.rng.integers(0, len(candidates), 2 * need + 4)]
            if exclude is not None:
                take = take[~self._excl[take]]
            take = take[:need]
            out.append(take)
            need -= len(take)
        return np.concatenate(out) if out else np.empty(0, np.int64)

    def _query_groups(self):
        """Pooled rows ordered by (pooled chunk, qid): (order, group start of
        each position in that order, group end), built once per pool state.
        A query split across two chunks gives two groups (pairs never span
        chunks: a bounded pool cannot promise both halves)."""
        if self._groups is None:
            if any(p["qid"] is None for p in self.pool):
                raise ValueError("ranking needs query ids: the store has no qid column")
            slot = np.repeat(np.arange(len(self.pool)), [len(p["y"]) for p in self.pool])
            q = np.concatenate([p["qid"] for p in self.pool])
            order = np.lexsort((q, slot))
            new = np.r_[True, (np.diff(q[order]) != 0) | (np.diff(slot[order]) != 0)]
            gid = np.cumsum(new) - 1
            starts = np.flatnonzero(new)
            ends = np.r_[starts[1:], len(order)]
            self._groups = (order, starts[gid], ends[gid])
        return self._groups

    def draw_pairs(self, m, rounds=8):
        """``m`` random preference pairs among the pooled rows: two rows of
        the same query (and pooled chunk) with different labels, the higher
        label first. An anchor row is drawn uniformly, its partner uniformly
        in its group; pairs with equal labels are redrawn (``rounds`` times
        at most). Returns (ids of the higher rows, ids of the lower, their
        rows X_hi, X_lo)."""
        self._maybe_refresh()
        order, lo, hi = self._query_groups()
        y = self._flat_y
        got_a, got_b = [], []
        need = m
        for _ in range(rounds):
            if need <= 0:
                break
            k = self.rng.integers(0, len(order), 2 * need + 4)
            partner = lo[k] + (self.rng.random(len(k)) * (hi[k] - lo[k])).astype(np.int64)
            a, b = order[k], order[partner]
            ok = y[a] != y[b]
            a, b = a[ok][:need], b[ok][:need]
            got_a.append(a)
            got_b.append(b)
            need -= len(a)
        a = np.concatenate(got_a) if got_a else np.empty(0, np.int64)
        b = np.concatenate(got_b) if got_b else np.empty(0, np.int64)
        up = y[a] > y[b]
        first, second = np.where(up, a, b), np.where(up, b, a)
        ia, Xa, _ = self._rows_at(first, None, "raw")
        ib, Xb, _ = self._rows_at(second, None, "raw")
        return ia, ib, Xa, Xb

    def all_rows(self, classes=None, target="raw"):
        """(ids, X, y) of every row of ``classes`` when the whole store is
        pooled (a small store), else None."""
        if self._static is None:
            return None
        gid, X = self._static
        pos = np.arange(len(gid)) if classes is None else \
            np.flatnonzero(np.isin(self._flat_y, classes[0]) | np.isin(self._flat_y, classes[1]))
        return gid[pos], X[pos], relabel(self._flat_y[pos], classes, target)

    # -- drawing --------------------------------------------------------------
    def draw(self, m, classes=None, exclude=None, target="raw", with_weight=False):
        """``m`` random rows: (global ids, X rows, y). With ``classes``
        ``(neg, pos)``, each a label value or a tuple of them, half are drawn
        from each side. ``exclude``:
        rows to skip (the core set): an object with ``ids`` and ``n`` whose
        ``ids[:n]`` only grows (a CoreSet), or an array of global row ids.
        ``target``: "raw" labels, "binary" (+1 for ``pos``, -1 for ``neg``)
        or "ones". Rows come grouped by pooled chunk (the order is random
        enough: which rows is what the generator decides). ``with_weight``:
        also return the rows' sample weights (the store's ``weight``, else 1)."""
        self._maybe_refresh()
        if exclude is not None:
            if isinstance(exclude, np.ndarray):
                self._excl[:] = False
                for p in self.pool:
                    p["synced"] = 0
                exclude = _Ids(exclude)
            self._sync_exclude(exclude)
        if classes is None:
            pos = self._pick(np.arange(len(self._flat_y)), m, exclude)
        else:
            pos = np.concatenate([
                self._pick(self._class_index(classes[0]), m - m // 2, exclude),
                self._pick(self._class_index(classes[1]), m // 2, exclude)])
        if self._static is None:
            pos = np.sort(pos)
        out = self._rows_at(pos, classes, target)
        if with_weight:
            out += (np.ones(len(pos)) if self._flat_w is None else self._flat_w[pos],)
        return out

    def _rows_at(self, pos, classes, target):
        """(global ids, X, y) of pooled rows at flat positions ``pos``."""
        if self._static is not None:            # the whole pool in one array
            gid, X = self._static
            return gid[pos], X[pos], relabel(self._flat_y[pos], classes, target)
        slots = np.searchsorted(self._offs, pos, side="right") - 1
        rows = pos - self._offs[slots]
        gid = np.array([self.pool[s]["start"] for s in range(len(self.pool))],
                       np.int64)[slots] + rows
        y = relabel(self._flat_y[pos], classes, target)
        if len(pos) == 0:
            return gid, None, y
        cut = np.flatnonzero(np.diff(slots)) + 1
        parts = [self.pool[int(slots[a])]["X"][rows[a:b]]
                 for a, b in zip(np.r_[0, cut], np.r_[cut, len(pos)])]
        if len(parts) == 1:
            X = parts[0]
        elif sp.issparse(parts[0]):
            X = sp.vstack(parts).tocsr()
        else:
            X = np.concatenate(parts)
        return gid, X, y


class _Ids:
    """An array of ids seen through the CoreSet's (ids, n) protocol."""

    def __init__(self, ids):
        self.ids = np.asarray(ids, np.int64)
        self.n = len(self.ids)


def relabel(y, classes, target):
    """Labels as a sub-problem sees them (see ChunkPool.draw)."""
    if target == "binary":
        return np.where(np.isin(y, classes[1]), 1.0, -1.0)
    if target == "ones":
        return np.ones(len(y))
    return y


def sample_rows(store, m, max_chunks, seed=0, labels=False):
    """``m`` random rows of a store (seed 0: the benchmark protocol's sample),
    read chunk by chunk; ``labels``: (rows, their labels). Stores of more than
    ``max_chunks`` chunks are sampled within ``max_chunks`` random chunks, so
    this never costs a full pass."""
    rng = np.random.default_rng(seed)
    if store.n_chunks > max_chunks:
        chunks = np.sort(rng.choice(store.n_chunks, size=max_chunks, replace=False))
        spans = [store.chunk_bounds(int(i)) for i in chunks]
        sizes = np.array([e - a for a, e in spans])
        pick = np.sort(rng.choice(sizes.sum(), size=min(m, sizes.sum()), replace=False))
        offs = np.concatenate([[0], np.cumsum(sizes)])
        which = np.searchsorted(offs, pick, side="right") - 1
        idx = np.array([spans[w][0] for w in which]) + pick - offs[which]
    else:
        idx = np.sort(rng.choice(store.n, size=min(m, store.n), replace=False))
    parts, ys = [], []
    for i in np.unique(idx // store.chunk_rows):
        a, _ = store.chunk_bounds(int(i))
        sel = idx[(idx >= a) & (idx < a + store.chunk_rows)] - a
        c = store.chunk(int(i))
        parts.append(c.X[sel])
        if labels:
            ys.append(np.asarray(c.y)[sel])
    X = sp.vstack(parts).tocsr() if sp.issparse(parts[0]) else np.concatenate(parts)
    return (X, np.concatenate(ys)) if labels else X


def small_in_memory(store, max_chunks):
    """A store of at most ``max_chunks`` chunks (what one machine's sampler
    pools anyway: the option ``pool_chunks``) read once into memory, so that the machines of a
    multi-class fit do not each decompress it again; larger stores as they are."""
    from .store import DiskStore, as_store
    if not isinstance(store, DiskStore) or store.n_chunks > max_chunks:
        return store
    chunks = list(store)
    X = [c.X for c in chunks]
    X = sp.vstack(X).tocsr() if sp.issparse(X[0]) else np.concatenate(X)
    return as_store(X, np.concatenate([np.asarray(c.y, np.float64) for c in chunks]),
                    chunk_rows=store.chunk_rows)
