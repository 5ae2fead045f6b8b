"""Sphinx configuration of the streamcvm documentation.

Build: ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (warnings are
errors; ``pip install ".[docs]"`` first). The API reference (api.rst) is generated
by autosummary into api/generated/ (not committed) from this checkout's docstrings,
which numpydoc renders and checks (``numpydoc_validation_checks``).
"""
from __future__ import annotations

import os
import shutil
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# this checkout's code first, ahead of any installed streamcvm: the reference
# documents the docstrings of the tree it is built from
sys.path.insert(0, ROOT)

import streamcvm  # noqa: E402
import streamcvm.apps.surface  # noqa: E402

# ``streamcvm.surface`` is streamcvm.apps.surface, given by the package's
# __getattr__; as a module of its own name, autodoc imports it as users name it
sys.modules.setdefault("streamcvm.surface", streamcvm.apps.surface)

project = "streamcvm"
author = "the streamcvm authors"
copyright = "the streamcvm authors"
release = streamcvm.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinxcontrib.bibtex",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]

# -- Markdown (MyST) ----------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3            # [text](page.md#a-heading) links resolve

# -- API reference --------------------------------------------------------------
# the stubs are made anew by every build: a page of a name no longer listed in
# api.rst would otherwise stay behind (a "not in any toctree" warning)
shutil.rmtree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "api", "generated"),
              ignore_errors=True)
autosummary_generate = True
autosummary_generate_overwrite = True
autosummary_imported_members = False
autodoc_typehints = "none"          # the numpydoc sections say the types
autodoc_class_signature = "mixed"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "inherited-members": True}

numpydoc_show_class_members = False     # the class pages list their own methods (autodoc)
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
# what a docstring must have: a summary, every parameter documented (and no
# unknown one), each with a description, and a Returns section, with a
# description, for what returns something; style checks are left out
numpydoc_validation_checks = {"GL08", "SS01", "PR01", "PR02", "PR07", "RT01", "RT03"}
numpydoc_validation_exclude = {
    r"(^|\.)_[^.]*$",           # private names, dunders included
    r"\.__init__$",
}


def _skip_member(app, what, name, obj, skip, options):
    """Which members a class page documents: the public methods and properties
    that streamcvm itself defines (inherited ones too), documented or not (a
    missing docstring is then a numpydoc GL08 warning); not what scikit-learn,
    tuples or exceptions bring, not the fitted attributes (``name_``: the
    class's Attributes section), not data fields (the Parameters section)."""
    if what not in ("class", "exception") or name.startswith("_"):
        return None
    func = obj.fget if isinstance(obj, property) else \
        obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
    module = getattr(func, "__module__", None) or ""
    if not callable(func) or not module.startswith("streamcvm"):
        return True
    return name.endswith("_")


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)


# -- Bibliography -------------------------------------------------------------
bibtex_bibfiles = ["references.bib"]
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"

# -- HTML -----------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"streamcvm {release}"
html_static_path: list[str] = []
html_theme_options = {
    "icon_links": [],
    "navbar_end": ["navbar-icon-links"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_show_sourcelink = False
