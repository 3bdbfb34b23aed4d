"""The gate's verdicts, and which of several decides."""

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
