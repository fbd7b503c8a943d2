"""The public names chunksampler promises to document, in both languages.

Python: ``__all__`` of ``chunksampler`` and of its integrations' modules (``PYTHON_MODULES``).
C++: every class, struct, enum and concept that a header of
``include/chunksampler/`` declares at namespace scope in ``chunksampler``, ``chunksampler::dist`` or
``chunksampler::torch`` — read from the headers themselves, not from Doxygen, so a name without a
``///`` comment is still found.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON_MODULES = (
    "chunksampler",
    "chunksampler.torch",
    "chunksampler.lightning",
    "chunksampler.accelerate",
    "chunksampler.transformers",
    "chunksampler.scvi",
    "chunksampler.grain",
    "chunksampler.reader",
)

_OPEN = re.compile(r"^namespace ([\w:]+) \{")
_CLOSE = re.compile(r"^\}  // namespace ([\w:]+)")
# A declaration at column 0 (clang-format's layout at namespace scope): a class, struct, enum or
# concept, possibly after its template head on the same line, or a type alias; `class X;` alone is
# a forward declaration.
_DECLARATION = re.compile(r"^(?:template <.*> )?(?:(?:class|struct|concept|enum class) ([\w:]+)|using (\w+) =)")


def python_names() -> list[str]:
    """Fully qualified public Python names (``chunksampler.RandomSampler``), ``__version__`` aside."""
    names = []
    for module in PYTHON_MODULES:
        for name in importlib.import_module(module).__all__:
            if not name.startswith("__"):
                names.append(f"{module}.{name}")
    return names


def _header_names(path: Path) -> list[str]:
    names = []
    scopes: list[str] = []
    for line in path.read_text().splitlines():
        if m := _OPEN.match(line):
            scopes.append(m.group(1))
        elif m := _CLOSE.match(line):
            scopes.pop()
        elif (m := _DECLARATION.match(line)) and scopes and "detail" not in "::".join(scopes).split("::"):
            forward = m.group(1) and line.rstrip().endswith(";") and "{" not in line and " = " not in line
            if not forward:
                names.append("::".join([*scopes, m.group(1) or m.group(2)]))
    return names


def cpp_names() -> list[str]:
    """Fully qualified public C++ types and concepts (``chunksampler::RandomSampler``)."""
    headers = sorted((ROOT / "include" / "chunksampler").glob("*.hpp"))
    names: list[str] = []
    for header in headers:
        names.extend(n for n in _header_names(header) if n not in names)
    return names


if __name__ == "__main__":
    print("\n".join(python_names()))
    print("\n".join(cpp_names()))
