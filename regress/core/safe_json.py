"""JSON from files a user or a pull request can hand us, with bounded nesting.

Python's json parser recurses once per nested array or object, so a few hundred kilobytes of
`[[[[...` raise RecursionError, an unexpected crash (exit 3) instead of bad input (exit 2); and a
value nested just under the interpreter's limit still breaks whatever walks it later (the
report, `json.dumps`). `loads` refuses anything nested deeper than `MAX_DEPTH` with
`JsonTooDeep`, a `json.JSONDecodeError`, so every reader that already turns a JSON error into a
one-line BadInput naming its file and line handles it too. Every reader of user files parses
through here.

Two more things json accepts or fails on in its own way are refused the same way: an integer
longer than Python converts (a 5,001-digit `doc_id` raised a bare ValueError, exit 3), and an
object that repeats a key (json keeps the last, so a labelling form saying both "A" and "B"
was read as whichever came second).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from regress.core.errors import BadInput

MAX_DEPTH = 100
"""Arrays and objects inside one another. Manifests, records, reports and benchmark rows nest a
handful of levels; nothing regress reads comes near this."""

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
"""A JSON string (skipped whole: brackets inside it do not nest) or a bracket."""


MAX_DIGITS = 4300
"""Digits of the longest integer read: Python converts no longer one (sys.int_info)."""


class JsonTooDeep(json.JSONDecodeError):
    """Arrays and objects nested deeper than MAX_DEPTH (a JSONDecodeError: see the module)."""


class _Refused(Exception):
    """Raised inside the parser's hooks; `loads` turns it into a JSONDecodeError placed at
    the `occurrence`-th place `token` appears in the text."""

    def __init__(self, message: str, token: str, occurrence: int) -> None:
        super().__init__(message)
        self.message, self.token, self.occurrence = message, token, occurrence

    def position(self, text: str) -> int:
        """Where in `text` the error is (the hooks see values, not positions): near enough."""
        found = -1
        for _ in range(self.occurrence):
            found = text.find(self.token, found + 1)
        return max(found, 0)


def loads(text: str, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads(text)` refusing nesting deeper than MAX_DEPTH (JsonTooDeep), an integer
    of more than MAX_DIGITS digits and an object that repeats a key (JSONDecodeError).

    Other errors are json's own: `json.JSONDecodeError`, or the ValueError `parse_constant`
    raises (records refuse a bare NaN that way)."""
    try:
        value = json.loads(
            text, parse_constant=parse_constant, parse_int=_integer, object_pairs_hook=_object
        )
    except RecursionError:
        raise _too_deep(text) from None
    except _Refused as exc:
        raise json.JSONDecodeError(exc.message, text, exc.position(text)) from None
    if _depth(value) > MAX_DEPTH:
        raise _too_deep(text)
    return value


def load_file(path: Path) -> Any:
    """A whole JSON file; BadInput naming the file (and the line) when it cannot be read,
    is not UTF-8, is not JSON or nests too deeply."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise _Refused(f"an integer of {len(digits):,} digits (at most {MAX_DIGITS:,})", digits, 1)
    return int(digits)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            token = json.dumps(key, ensure_ascii=False)
            raise _Refused(f"key {token:.40} repeated", token, 2)
        seen.add(key)
    return dict(pairs)


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed value (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:  # deeper is refused anyway: no need to walk further
            stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return deepest


def _too_deep(text: str) -> JsonTooDeep:
    """The error, placed at the bracket that goes past MAX_DEPTH (found only on failure)."""
    depth, pos = 0, 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                pos = match.start()
                break
        elif token in "]}":
            depth -= 1
    return JsonTooDeep(f"nested deeper than {MAX_DEPTH} levels", text, pos)
