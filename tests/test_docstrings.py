"""The public API's docstrings are complete numpydoc: what the documentation's
API reference (docs/api.rst) renders, checked without Sphinx.

- every name of ``streamcvm.__all__`` has a docstring of its own;
- each estimator's Parameters section names exactly its ``__init__``
  parameters, in order, and its Attributes section every public attribute
  ending in ``_`` that a small fit sets (and each such property);
- every function, class and public method of the reference passes the
  numpydoc checks docs/conf.py enables (``numpydoc_validation_checks``): a
  summary, every parameter documented with a description and none unknown, a
  Returns section with a description where something is returned.
"""
import inspect
import warnings

import numpy as np
import pytest

docscrape = pytest.importorskip("numpydoc.docscrape")
validate = pytest.importorskip("numpydoc.validate")

import streamcvm  # noqa: E402
import streamcvm.apps.surface as surface_module  # noqa: E402
from streamcvm import options as options_module  # noqa: E402

# the checks of docs/conf.py's numpydoc_validation_checks
CHECKS = {"GL08", "SS01", "PR01", "PR02", "PR07", "RT01", "RT03"}

ESTIMATORS = ("CVMClassifier", "CVMOneClass", "CVMRegressor", "CVMRanker", "MMDATransformer")


def _names(section):
    """The names a numpydoc section documents ("a, b : type" documents two)."""
    return [n.strip() for p in section for n in p.name.split(",") if n.strip()]


def _small_fit(name):
    """The estimator ``name`` fitted on a few hundred generated rows, with the
    fast settings (fixed C and gamma: no search)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 4))
    y2 = (X[:, 0] + X[:, 1] > 0).astype(int)
    fits = {
        "CVMClassifier": lambda: streamcvm.CVMClassifier(C=1.0, gamma=0.5, probability=True)
        .fit(X, y2),
        "CVMOneClass": lambda: streamcvm.CVMOneClass().fit(X),
        "CVMRegressor": lambda: streamcvm.CVMRegressor(C=100.0, mu=0.1, gamma=0.5)
        .fit(X, X[:, 0] + 0.1 * rng.normal(size=len(X))),
        "CVMRanker": lambda: streamcvm.CVMRanker(gamma=0.5)
        .fit(X, np.digitize(X[:, 0], [-0.5, 0.5]), np.arange(len(X)) // 24),
        "MMDATransformer": lambda: streamcvm.MMDATransformer(gamma=0.5).fit(X, y2),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fits[name]()


def _fitted_attributes(est):
    """The public names ending in ``_`` that the fit set, and the class's
    properties of such names (``support_vectors_`` ...)."""
    own = {n for n in vars(est) if n.endswith("_") and not n.startswith("_")}
    props = {n for n in dir(type(est)) if n.endswith("_") and not n.startswith("_")
             and isinstance(inspect.getattr_static(type(est), n), property)}
    return own | props


@pytest.mark.parametrize("name", [n for n in streamcvm.__all__ if n != "__version__"])
def test_every_public_name_has_a_docstring(name):
    obj = getattr(streamcvm, name)
    doc = obj.__doc__ if inspect.ismodule(obj) else inspect.getdoc(obj)
    own = vars(obj).get("__doc__") if inspect.isclass(obj) else doc
    assert own and own.strip(), f"streamcvm.{name} has no docstring of its own"


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_parameters_are_the_init_parameters(name):
    cls = getattr(streamcvm, name)
    documented = _names(docscrape.ClassDoc(cls)["Parameters"])
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    assert len(documented) == len(set(documented)), f"{name}: a parameter documented twice"
    assert documented == params, (
        f"{name}: Parameters section {documented}, __init__ takes {params} "
        f"(missing {sorted(set(params) - set(documented))}, "
        f"unknown {sorted(set(documented) - set(params))})")
    undescribed = [p.name for p in docscrape.ClassDoc(cls)["Parameters"] if not p.desc]
    assert not undescribed, f"{name}: parameters without a description: {undescribed}"


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_attributes_name_every_fitted_attribute(name):
    cls = getattr(streamcvm, name)
    est = _small_fit(name)
    documented = set(_names(docscrape.ClassDoc(cls)["Attributes"]))
    missing = sorted(_fitted_attributes(est) - documented)
    assert not missing, f"{name}: fitted attributes not in its Attributes section: {missing}"


def _own_members(cls):
    """The public methods and properties of ``cls`` that streamcvm defines (as
    docs/conf.py's class pages list them), fitted attributes (``name_``) left
    to the Attributes section."""
    out = []
    for n in dir(cls):
        if n.startswith("_") or n.endswith("_"):
            continue
        raw = inspect.getattr_static(cls, n)
        func = raw.fget if isinstance(raw, property) else \
            raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        if callable(func) and (getattr(func, "__module__", None) or "").startswith("streamcvm"):
            out.append(n)
    return out


def _reference():
    """Every object docs/api.rst documents, by the name it is documented under."""
    names = [f"streamcvm.{n}" for n in streamcvm.__all__
             if n not in ("__version__", "ingest", "surface")]
    names += ["streamcvm.ingest.ingest", "streamcvm.options.Options",
              "streamcvm.options.SurfaceOptions"]
    names += [f"streamcvm.apps.surface.{n}" for n, obj in vars(surface_module).items()
              if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
              and obj.__module__ == surface_module.__name__]
    out = []
    for path in names:
        out.append(path)
        obj = validate.Validator._load_obj(path)
        if inspect.isclass(obj):
            out += [f"{path}.{m}" for m in _own_members(obj)]
    return out


def test_reference_names_are_found():
    names = _reference()
    assert "streamcvm.CVMClassifier.fit" in names and "streamcvm.surface" not in names
    assert "streamcvm.apps.surface.reconstruct" in names
    assert "streamcvm.options.Options.but" in names
    assert options_module.Options.__doc__.count("\nParameters\n") == 1


@pytest.mark.parametrize("path", _reference())
def test_numpydoc_checks(path):
    result = validate.validate(path)
    errors = [f"{code}: {msg}" for code, msg in result["errors"] if code in CHECKS]
    assert not errors, f"{path}:\n  " + "\n  ".join(errors)
