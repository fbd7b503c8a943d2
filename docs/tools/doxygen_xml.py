"""Mends Doxygen 1.9.4's XML (Debian 12's) before breathe reads it; run by scripts/docs.sh.

- ``<includes>``: Doxygen lists a class's or concept's header even with SHOW_INCLUDE_FILES = NO, and
  breathe links it to a page per header, which the site does not have (the API pages are grouped
  by topic and name the header in the prose).
- ``std::span< constSlice >``: Doxygen drops the space after ``const`` in a template argument of a
  nested type (``std::span<const Slice>::iterator``), which the C++ domain then reads as a type
  named ``constSlice``.
- derived classes in ``chunksampler::detail``: the internals are not API, so the pages of their
  public bases do not list them (and could not link them).

    python3 docs/tools/doxygen_xml.py XML_DIR
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_INCLUDES = re.compile(r"^\s*<includes [^>]*>[^<]*</includes>\n", re.M)
_CONST = re.compile(r"\bconst(?=[A-Z_][A-Za-z_]*\b)")
_DETAIL_DERIVED = re.compile(r"^\s*<derivedcompoundref refid=\"[^\"]*_1_1detail_1_1[^\"]*\"[^>]*>[^<]*</derivedcompoundref>\n", re.M)
# The collaboration and inheritance graphs' nodes name detail classes as well.
_DETAIL_NODE = re.compile(r"<node id=\"\d+\">\s*<label>chunksampler::detail::.*?</node>\n", re.S)


def mend(text: str) -> str:
    text = _INCLUDES.sub("", text)
    text = _CONST.sub("const ", text)
    text = _DETAIL_DERIVED.sub("", text)
    return _DETAIL_NODE.sub("", text)


def main(xml_dir: Path) -> None:
    for path in sorted(xml_dir.glob("*.xml")):
        text = path.read_text()
        mended = mend(text)
        if mended != text:
            path.write_text(mended)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
