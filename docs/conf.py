"""Sphinx configuration of chunksampler's documentation site (built by scripts/docs.sh).

The pages are MyST Markdown. The Python API pages are generated from the installed package's
docstrings (autodoc, autosummary); the C++ API pages from the headers' ``///`` comments (Doxygen XML,
read by breathe). scripts/docs.sh builds with ``-W --keep-going -n``: every warning, a broken cross
reference included, fails the build.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "tools"))  # the local extension run_examples

project = "chunksampler"
author = "the chunksampler developers"
copyright = "the chunksampler developers"
# One version for both languages: the C++ header's, which the package reports too.
_header = (ROOT / "include" / "chunksampler" / "version.hpp").read_text()
version = release = ".".join(
    re.search(rf"CHUNKSAMPLER_VERSION_{part}\s+(\d+)", _header).group(1) for part in ("MAJOR", "MINOR", "PATCH")
)

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "breathe",
    "run_examples",  # docs/tools/run_examples.py: the pages' Python examples run, their output checked
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
templates_path = ["_templates"]

# MyST: headings get anchors down to ### so that pages link to sections as `page.md#section`, and
# the HTML comments that mark runnable blocks (<!-- python-example: NAME -->) stay comments.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# Python API: one page per public name, type hints in the signature and the description.
autosummary_generate = True
autodoc_typehints = "both"
autodoc_member_order = "groupwise"
autodoc_default_options = {"members": True, "show-inheritance": True}
add_module_names = False

# C++ API: breathe reads the XML that scripts/docs.sh has Doxygen write (docs/Doxyfile).
breathe_projects = {"chunksampler": os.environ.get("CHUNKSAMPLER_DOXYGEN_XML", str(ROOT / "build" / "docs" / "xml"))}
breathe_default_project = "chunksampler"
breathe_default_members = ("members",)
cpp_index_common_prefix = ["chunksampler::"]

nitpicky = True
# Names outside this project that a signature or a docstring refers to. With no network but the
# package registries, the site cannot fetch other projects' inventories (intersphinx), so these
# would be unresolved references; they are named here one by one instead of silencing the check.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|torch|lightning|accelerate|transformers|ray|pandas|pd|jax|grain|anndata|annbatch|scvi|collections\.abc|typing|os)\..*"),
    ("py:class", r"(NDArray|ArrayLike|Generator|Iterator|Iterable|Callable|Mapping|Sequence|Any|Literal)"),
    ("cpp:identifier", r"(::)?(std|fmt|pcg_extras|torch|c10)(::.*)?"),
    ("cpp:identifier", r"MPI_Comm|MPI_COMM_WORLD"),
    # The library's internals (base classes, plans) are in chunksampler::detail, which is not API.
    ("cpp:identifier", r"(chunksampler::)?detail(::.*)?"),
    # Namespaces, which the C++ domain has no objects for.
    ("cpp:identifier", r"chunksampler(::dist|::torch)?"),
    # Private aliases of unions in the integrations' signatures; each docstring says what it takes.
    ("py:class", r"AnySampler|_SamplerArg|_Base|DistInfo|chunksampler\.scvi\._Epochs"),
]



def _public_bases(app, name, obj, options, bases):
    """Shows a class's public ancestors: a private base (``_MaskedSampler``) is replaced by its own
    bases, so the page says ``RandomSampler`` is an ``object``-derived sampler, not an internal name."""
    public = []
    pending = list(bases)
    while pending:
        base = pending.pop(0)
        if base.__name__.startswith("_"):
            pending[:0] = [b for b in base.__bases__ if b is not object or not public]
        elif base not in public:
            public.append(base)
    bases[:] = public


def setup(app):
    app.connect("autodoc-process-bases", _public_bases)


html_theme = "furo"
html_title = f"chunksampler {release}"
