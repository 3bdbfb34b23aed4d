"""Regular expressions from files a user or a pull request can hand us, bounded in time and
memory.

Python's `re` cannot be interrupted: a golden set's `^(\\w+\\s?)+$` on a 41-character answer
ran for more than a minute (catastrophic backtracking). The `regex` package, whose syntax is
`re`'s, takes a timeout; a pattern that runs past it is bad input naming the pattern, never a
hung gate or a verdict decided by a timeout.

The timeout covers matching, not compiling, and `regex` compiles a counted repeat by copying
its body: `(?:(?:a{1000}){1000}){1000}`, 27 characters, asks for 10^9 copies (5.6 GB before
it failed). So a pattern is measured before it is compiled (`program_size`: its atoms with
every counted repeat multiplied out) and refused above `MAX_PROGRAM`. A linear-time engine
(RE2) would bound both, but it reads `\\w`, `\\d` and `\\b` as ASCII and has no lookaround or
backreferences, so patterns users already write would match differently or not at all.
"""

from __future__ import annotations

import functools

import regex

from regress.core.errors import BadInput

SECONDS = 1.0
"""Per search or substitution: ample for any sane pattern on a model's answer."""
MAX_PROGRAM = 20_000
"""Atoms a pattern may hold once its counted repeats are multiplied out. `regex` takes about
300 bytes per copied atom (1 KB under full case folding), so a pattern at the limit compiles
in 6-22 MB and a few hundredths of a second; the patterns tasks
use (`\\b(yes|no)\\b`, `#### (\\-?[0-9\\.\\,]+)`) hold a few dozen, and a literal
alternation of 2,000 words about 20,000."""
_CACHED = 32
"""Compiled patterns kept. regex's own cache holds 500, and a pattern at MAX_PROGRAM can take
20 MB (`(?fi)` expands each `ß` to `ss`): 10 GB where these 32 take at most 700 MB."""
_REPEAT = regex.compile(r"\{(\d*)(?:,(\d*))?\}")
"""A counted repeat `{m}`, `{m,}`, `{,n}` or `{m,n}`; any other `{` is a literal."""


def check(pattern: object, where: str) -> None:
    """BadInput naming `where` (e.g. "item 2: regex") when `pattern` is no regular expression
    or one too large to compile."""
    if not isinstance(pattern, str):
        raise BadInput(f"{where} {pattern!r:.80} is not a regex (not a string)")
    try:
        _compiled(pattern, 0)
    except regex.error as exc:
        raise BadInput(f"{where} {pattern!r:.80} is not a regex ({exc})") from exc
    except BadInput as exc:
        raise BadInput(f"{where} {exc}") from exc


def search(pattern: str, text: str, ignore_case: bool = False) -> regex.Match[str] | None:
    """`re.search`, bounded by SECONDS (and MAX_PROGRAM)."""
    try:
        return _compiled(pattern, regex.IGNORECASE if ignore_case else 0).search(
            text, timeout=SECONDS
        )
    except TimeoutError as exc:
        raise _slow(pattern, len(text)) from exc
    except regex.error as exc:
        raise _invalid(pattern, exc) from exc


def sub(pattern: str, repl: str, text: str, count: int = 0) -> str:
    """`re.sub`, bounded by SECONDS (and MAX_PROGRAM)."""
    try:
        return str(_compiled(pattern, 0).sub(repl, text, count=count, timeout=SECONDS))
    except TimeoutError as exc:
        raise _slow(pattern, len(text)) from exc
    except regex.error as exc:
        raise _invalid(pattern, exc) from exc


def program_size(pattern: str) -> int:
    """An upper bound on the atoms `regex` compiles `pattern` to: each literal, escape, class
    or group counts one, and a counted repeat multiplies what it repeats by its largest count.

    A scan, not a parse: what it misreads (a `{` inside a class, a comment in verbose mode)
    only makes the bound larger. Counting stops past MAX_PROGRAM."""
    frames = [[0, 0]]  # per open group: [atoms so far, atoms of the last item]
    i = 0
    while i < len(pattern):
        char, atoms = pattern[i], 1
        if char == "\\":
            i += 2
        elif char == "[":
            i = _class_end(pattern, i)
        elif char == "(":
            frames.append([0, 0])
            i += 1
            continue
        elif char == ")" and len(frames) > 1:
            atoms = frames.pop()[0] + 1
            i += 1
        elif char == "{" and (repeat := _REPEAT.match(pattern, i)):
            low, high = repeat[1], repeat[2]
            times = int(high) if high else int(low or 0)
            frame = frames[-1]
            grown = frame[1] * min(times, MAX_PROGRAM + 1)
            frame[0], frame[1] = frame[0] - frame[1] + grown, grown
            i = repeat.end()
            if frame[0] > MAX_PROGRAM:
                return frame[0]
            continue
        else:
            i += 1
        frames[-1][0] += atoms
        frames[-1][1] = atoms
        if frames[-1][0] > MAX_PROGRAM:
            return frames[-1][0]
    return sum(frame[0] for frame in frames)


def _class_end(pattern: str, start: int) -> int:
    """The index after the `]` that closes the class opening at `start` (a `]` first in the
    class is a member); the pattern's end when none does."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


@functools.lru_cache(maxsize=_CACHED)
def _compiled(pattern: str, flags: int) -> regex.Pattern[str]:
    """The compiled pattern; BadInput when it is too large, regex.error when it is none."""
    if program_size(pattern) > MAX_PROGRAM:
        raise BadInput(
            f"pattern {pattern!r:.80} is too large to compile: its repeats multiply out to "
            f"more than {MAX_PROGRAM:,} atoms (write a smaller count, or `+` or `*`)"
        )
    return regex.compile(pattern, flags, cache_pattern=False)


def _invalid(pattern: str, exc: regex.error) -> BadInput:
    return BadInput(f"pattern {pattern!r:.80} is not a regex ({exc})")


def _slow(pattern: str, length: int) -> BadInput:
    return BadInput(
        f"pattern {pattern!r:.80} ran past {SECONDS:g} s on a {length}-character text "
        "(catastrophic backtracking: rewrite it without nested repeats)"
    )
