"""The gate's verdicts, which of several decides, and how an undecided one's next check is
worded."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum


class Verdict(StrEnum):
    """The gate's judgement of one unit, of one rule, and of the whole comparison."""

    PASS = "PASS"
    REGRESSION = "REGRESSION"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"


def worst(verdicts: Sequence[Verdict]) -> Verdict | None:
    """The verdict that decides among several: ERROR, then REGRESSION, INCONCLUSIVE, PASS."""
    for verdict in (Verdict.ERROR, Verdict.REGRESSION, Verdict.INCONCLUSIVE, Verdict.PASS):
        if verdict in verdicts:
            return verdict
    return None


TESTS_TWICE = "rerunning this one on more would test twice"
"""Why an undecided check's n names a new check: a superset of the same examples read again
is a second test of the same question, at alpha each time (issue 50)."""


def rerun_words(about: str, like: str = "an unchanged model") -> str:
    """How an INCONCLUSIVE fixed check's rule could still be shown within its limit, `about`
    the examples that would take for a candidate `like` this: by a new sequential check,
    never by rerunning this one."""
    return (
        f"a new sequential check over about {about} or more examples "
        f"(`regress check --sequential`) could show {like} within it; {TESTS_TWICE}"
    )


def detect_words(about: str, effect: str) -> str:
    """The n that would detect `effect` (a planned drop, in words), said as a new check's."""
    return f"a new check over about {about} examples would detect a {effect}"
