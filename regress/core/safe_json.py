"""JSON from files a user or a pull request can hand us, with bounded nesting.

Python's json parser recurses once per nested array or object, so a few hundred kilobytes of
`[[[[...` raise RecursionError, an unexpected crash (exit 3) instead of bad input (exit 2); and a
value nested just under the interpreter's limit still breaks whatever walks it later (the
report, `json.dumps`). `loads` refuses anything nested deeper than `MAX_DEPTH` with
`JsonTooDeep`, a `json.JSONDecodeError`, so every reader that already turns a JSON error into a
one-line BadInput naming its file and line handles it too. Every reader of user files parses
through here.
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


class JsonTooDeep(json.JSONDecodeError):
    """Arrays and objects nested deeper than MAX_DEPTH (a JSONDecodeError: see the module)."""


def loads(text: str, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads(text)` refusing nesting deeper than MAX_DEPTH (JsonTooDeep).

    Other errors are json's own: `json.JSONDecodeError`, or the ValueError `parse_constant`
    raises (records refuse a bare NaN that way)."""
    try:
        value = json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        raise _too_deep(text) from None
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
