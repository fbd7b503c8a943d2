"""The marked blocks of the README and the documentation pages: a ``<!-- KIND: NAME -->`` line
right above a fenced block of one language. Read alike by the docs build (run_examples.py runs
each ``python-example`` and compares its ``python-output``) and by tests/python (test_readme.py
runs them against the installed package; other tests compare a command's output with its page's).

Every Python block of a page either runs as pasted (``python-example``) or is an excerpt of a file
of the repository, marked ``<!-- python-excerpt: PATH -->``: each of its lines but ``...`` lines
(the cuts) is a line of PATH, in PATH's order, compared without the indentation, so an excerpt
cannot drift from the code it is cut from (``excerpt_problems``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

_MARKER = re.compile(r"<!-- (python-example(?:: [\w.-]+)?|python-excerpt: ([\w./-]+)) -->")


def block_pattern(kind: str, language: str, name: str | None = None) -> re.Pattern[str]:
    """The blocks ``<!-- KIND: NAME -->`` of LANGUAGE (of any name when ``name`` is None): group 1
    is the name, group 2 the block's text."""
    label = r"[\w.-]+" if name is None else re.escape(name)
    return re.compile(rf"<!-- {re.escape(kind)}: ({label}) -->\n```{re.escape(language)}\n(.*?)```", re.S)


def blocks(text: str, kind: str, language: str) -> Iterator[tuple[str, str, int]]:
    """``(name, text, offset)`` of each KIND block of LANGUAGE in ``text``, in order."""
    for match in block_pattern(kind, language).finditer(text):
        yield match.group(1), match.group(2), match.start()


def block(text: str, kind: str, language: str, name: str) -> str | None:
    """The text of the block ``<!-- KIND: NAME -->`` of LANGUAGE in ``text``, or None."""
    match = block_pattern(kind, language, name).search(text)
    return None if match is None else match.group(2)


def python_blocks(text: str) -> Iterator[tuple[str | None, str, int]]:
    """``(excerpt path or None, text, offset)`` of each Python block in ``text`` marked as runnable
    (None) or as an excerpt; a block with neither marker raises ``ValueError`` naming its line."""
    for match in re.finditer(r"```python\n(.*?)```", text, re.S):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.fullmatch(before.strip())
        if marker is None:
            line = text.count("\n", 0, match.start()) + 1
            raise ValueError(f"the Python block at line {line} is marked neither <!-- python-example: NAME --> "
                             "(it runs as pasted) nor <!-- python-excerpt: PATH --> (it is cut from PATH)")
        yield marker.group(2), match.group(1), match.start()


def excerpt_problems(excerpt: str, path: Path) -> list[str]:
    """What keeps ``excerpt`` from being a cut of the file at ``path`` (nothing when it is one):
    the first of its lines, ``...`` lines aside, not found in order among the file's lines."""
    if not path.is_file():
        return [f"{path} does not exist"]
    lines = [line.strip() for line in path.read_text().splitlines()]
    at = 0
    for wanted in (line.strip() for line in excerpt.splitlines()):
        if wanted in ("", "..."):
            continue
        try:
            at = lines.index(wanted, at) + 1
        except ValueError:
            return [f"{wanted!r} is not a line of {path.name} after line {at}"]
    return []
