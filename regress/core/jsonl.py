"""JSON Lines, read one way by every reader: records, history files, task data, golden and
prompt sets, lm-eval samples.

A line ends at "\\n" only: JSON text holds no raw newline, while U+2028, a form feed or a lone
"\\r" inside a string would cut a line for `str.splitlines`. Line numbers count every line,
blank ones included, so a message names the line an editor shows.

The one torn-line rule: only the last line can lack its newline, and it is torn when it is
not one whole JSON value (a writer killed mid-line). What a file does with its last line is
its `Tail`: a hand-written file's last line is read like any other (a torn one is then bad
JSON), an append-only log skips a torn tail (the next append removes it) and reads a whole
one, and a file written whole refuses any line without its newline (it was cut short).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from regress.core import safe_json
from regress.core.errors import BadInput


class Tail(Enum):
    """What a file's last line without a newline means (see the module)."""

    READ = "read"
    """Hand-written files (task data, golden sets, prompts, lm-eval's samples)."""
    SKIP_TORN = "skip_torn"
    """Append-only logs (history files): a killed append's part is skipped."""
    REFUSE = "refuse"
    """Files written whole (records): a missing newline is a file cut short."""


@dataclass(frozen=True)
class Line:
    """One line of a JSON Lines file, without its newline."""

    number: int
    text: str
    where: str
    """`name:number`, for messages."""

    @property
    def blank(self) -> bool:
        """Whether the line holds only whitespace."""
        return not self.text.strip()


def decode(data: bytes, name: str) -> str:
    """`data` as UTF-8 text; BadInput naming the line and byte where it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInput(f"{name}:{line}: not UTF-8 text (byte {exc.start})") from exc


def read_lines(
    path: Path, name: str | None = None, *, tail: Tail = Tail.READ, blank: bool = False
) -> list[Line]:
    """The lines of the file at `path` (OSError propagates for the caller to word);
    messages name it `name` (default: the path)."""
    return split_lines(
        path.read_bytes(), str(path) if name is None else name, tail=tail, blank=blank
    )


def split_lines(
    data: bytes, name: str, *, tail: Tail = Tail.READ, blank: bool = False
) -> list[Line]:
    """The lines of `data` (UTF-8) under the one torn-line rule; blank lines kept only with
    `blank`."""
    cut = data.rfind(b"\n") + 1
    if cut < len(data):  # a last line without its newline
        if tail is Tail.REFUSE:
            number = data.count(b"\n") + 1
            raise BadInput(f"{name}:{number}: truncated line (no newline at end)")
        if tail is Tail.SKIP_TORN and is_torn(data[cut:]):
            data = data[:cut]
    parts = decode(data, name).split("\n")
    if not parts[-1]:  # the file ended with its newline (or is empty)
        parts.pop()
    return [
        Line(number, text, f"{name}:{number}")
        for number, text in enumerate(parts, 1)
        if blank or text.strip()
    ]


def is_torn(last: bytes) -> bool:
    """Whether a last line without its newline is torn: not one whole JSON value (a writer
    killed mid-line, even mid-character, never leaves one)."""
    try:
        safe_json.loads(last.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError both are
        return True
    return False


def json_object(line: Line) -> dict[str, Any]:
    """The line's JSON object; BadInput naming the line when it is not JSON or not an object."""
    try:
        value = safe_json.loads(line.text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{line.where}: not valid JSON ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise BadInput(f"{line.where}: expected a JSON object")
    return value
