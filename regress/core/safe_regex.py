"""Regular expressions from files a user or a pull request can hand us, with a deadline.

Python's `re` cannot be interrupted: a golden set's `^(\\w+\\s?)+$` on a 41-character answer
ran for more than a minute (catastrophic backtracking). The `regex` package, whose syntax is
`re`'s, takes a timeout; a pattern that runs past it is bad input naming the pattern, never a
hung gate or a verdict decided by a timeout.
"""

from __future__ import annotations

import regex

from regress.core.errors import BadInput

SECONDS = 1.0
"""Per search or substitution: ample for any sane pattern on a model's answer."""


def check(pattern: object, where: str) -> None:
    """BadInput naming `where` (e.g. "item 2: regex") when `pattern` is no regular expression."""
    try:
        regex.compile(pattern)  # type: ignore[arg-type]
    except (regex.error, TypeError) as exc:
        raise BadInput(f"{where} {pattern!r:.80} is not a regex ({exc})") from exc


def search(pattern: str, text: str, ignore_case: bool = False) -> regex.Match[str] | None:
    """`re.search`, bounded by SECONDS."""
    flags = regex.IGNORECASE if ignore_case else 0
    try:
        return regex.search(pattern, text, flags, timeout=SECONDS)
    except TimeoutError as exc:
        raise _slow(pattern, len(text)) from exc


def sub(pattern: str, repl: str, text: str, count: int = 0) -> str:
    """`re.sub`, bounded by SECONDS."""
    try:
        return regex.sub(pattern, repl, text, count=count, timeout=SECONDS)
    except TimeoutError as exc:
        raise _slow(pattern, len(text)) from exc


def _slow(pattern: str, length: int) -> BadInput:
    return BadInput(
        f"pattern {pattern!r:.80} ran past {SECONDS:g} s on a {length}-character text "
        "(catastrophic backtracking: rewrite it without nested repeats)"
    )
