"""ChunkPool: reproducible draws, exclusion, class-aware chunk scheduling."""
import numpy as np

import streamcvm
from streamcvm.data.sampling import ChunkPool


def _store(n=4000, chunk_rows=250):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, 3)).astype(np.float32)
    y = np.zeros(n)
    y[n // 2:] = 1.0
    y[-chunk_rows:] = 2.0          # class 2 lives in the last chunk only
    return streamcvm.as_store(X, y, chunk_rows=chunk_rows), X, y


class _Members:
    def __init__(self, ids):
        self.ids, self.n = np.asarray(ids, np.int64), len(ids)


def _run(prefetch, seed=5, draws=60):
    store, X, y = _store()
    pool = ChunkPool(store, np.random.default_rng(seed), classes=(0.0, 1.0), pool_chunks=3,
                     refresh=4, prefetch=prefetch)
    out = [pool.draw(20, classes=(0.0, 1.0), target="binary")[0] for _ in range(draws)]
    pool.close()
    return out


def test_same_seed_same_rows_with_or_without_prefetch():
    a, b, c = _run(True), _run(True), _run(False)
    for u, v, w in zip(a, b, c):
        np.testing.assert_array_equal(u, v)
        np.testing.assert_array_equal(u, w)
    assert not all(np.array_equal(u, v) for u, v in zip(a, _run(True, seed=6)))


def test_rows_match_the_store_and_classes_are_balanced():
    store, X, y = _store()
    pool = ChunkPool(store, np.random.default_rng(0), classes=(0.0, 1.0), pool_chunks=4, refresh=2)
    seen = set()
    for _ in range(200):
        ids, Xs, ys = pool.draw(20, classes=(0.0, 1.0), target="binary")
        np.testing.assert_array_equal(Xs, X[ids])
        np.testing.assert_array_equal(ys, np.where(y[ids] == 1.0, 1.0, -1.0))
        assert (ys > 0).sum() == 10
        seen.update(int(i) // 250 for i in ids)
    pool.close()
    # scheduled by class counts: the class-2-only chunk is never read,
    # every other chunk is visited
    assert seen == set(range(15))


def test_excluded_rows_are_never_drawn():
    store, X, y = _store()
    pool = ChunkPool(store, np.random.default_rng(0), pool_chunks=16)
    members = _Members(np.arange(0, 4000, 2))           # every even row
    for _ in range(50):
        ids, _, _ = pool.draw(30, exclude=members)
        assert len(ids) == 30 and (ids % 2 == 1).all()
    ids, _, _ = pool.draw(30, exclude=np.arange(1, 4000, 2))   # an array works too
    assert (ids % 2 == 0).all()
