"""tools/datasets.py: the regression sets, prepared as docs/protocol.md says
(target last, 80/20 split, X and y standardised with training statistics).
Skipped when ../shared/data/raw is absent."""
import os
import sys

import numpy as np
import pytest

from conftest import RAW

if not RAW.is_dir():
    pytest.skip(f"real data folder {RAW} is absent", allow_module_level=True)
pytest.importorskip("pandas")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tools"))
import datasets as D  # noqa: E402


@pytest.mark.parametrize("name,n,d", [("cpu_act", 8192, 21), ("elevators", 16599, 18)])
def test_regression_sets_are_standardised_on_the_training_split(name, n, d, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))      # no cache from earlier runs
    Xtr, ytr, Xte, yte = D.load(name, str(RAW))
    assert Xtr.shape == (int(0.8 * n), d) and Xte.shape == (n - int(0.8 * n), d)
    assert Xtr.dtype == np.float32 and ytr.dtype == np.float64
    np.testing.assert_allclose(Xtr.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(Xtr.std(axis=0), 1, rtol=1e-4)
    assert abs(ytr.mean()) < 1e-9 and ytr.std() == pytest.approx(1.0)
    assert abs(yte.mean()) > 1e-6          # the test split uses the training statistics
