"""The marked blocks of the README and the documentation pages: a ``<!-- KIND: NAME -->`` line
right above a fenced block of one language. Read alike by the docs build (run_examples.py runs
each ``python-example`` and compares its ``python-output``) and by tests/python (test_readme.py
runs them against the installed package; other tests compare a command's output with its page's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator


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
