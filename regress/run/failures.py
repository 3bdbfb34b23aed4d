"""Failure classes of one generation: why a sample that did not succeed failed (seed 002:
failures are data, never dropped).

Every generation gets exactly one class, checked in this order:

- `crash`: the backend returned an error or timed out instead of text;
- `reasoning_cap`: thinking ran past the reasoning cap, or never closed before the token
  limit (seed 002's "Timeout/Loop");
- `unterminated_think`: thinking opened and the generation ended (stop string, end of
  sequence) without closing it;
- `truncated`: the answer was cut at the output cap or token limit ("Incomplete");
- `empty_after_think`: thinking closed and nothing followed it;
- `refusal`: the answer matches a refusal pattern (configurable);
- `no_answer`: the task could extract no answer from it;
- `answered`: none of these: an answer was extracted (right or wrong).

A conversation's turn that fails its check after an earlier turn failed is `propagated`
instead of `answered` or `no_answer` (`regress.run.conversation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from regress.core import safe_regex
from regress.core.records import Record
from regress.run.generation import DEFAULT_REFUSALS, ReadAnswer

NO_ANSWER = (None, "", "[invalid]")
"""Predictions that mean the task found no answer (lm-eval's regex filters say [invalid])."""


class FailureClass(StrEnum):
    """Why one generation ended where it did, as a failure mode."""

    CRASH = "crash"
    REASONING_CAP = "reasoning_cap"
    UNTERMINATED_THINK = "unterminated_think"
    TRUNCATED = "truncated"
    EMPTY_AFTER_THINK = "empty_after_think"
    REFUSAL = "refusal"
    NO_ANSWER = "no_answer"
    ANSWERED = "answered"
    PROPAGATED = "propagated"


FAILURES = tuple(c for c in FailureClass if c is not FailureClass.ANSWERED)


@dataclass(frozen=True)
class Generation:
    """What the classifier needs about one generation."""

    read: ReadAnswer
    finish: str
    """The backend's finish: stop, eos, length or unknown."""
    n_tokens: int
    reasoning_tokens: int | None
    """Tokens of the thinking span; None when they could not be counted."""
    pred: Any
    """What the task extracted from the answer."""


def classify(
    generation: Generation,
    reasoning_cap: int | None,
    output_cap: int | None,
    refusals: Sequence[str] = DEFAULT_REFUSALS,
) -> FailureClass:
    """The one failure class of a generation (see the module doc for the order)."""
    read, hit_limit = generation.read, generation.finish == "length"
    over_cap = (
        reasoning_cap is not None
        and generation.reasoning_tokens is not None
        and generation.reasoning_tokens > reasoning_cap
    )
    if read.think_opened and (over_cap or (not read.think_closed and hit_limit)):
        return FailureClass.REASONING_CAP
    if read.think_opened and not read.think_closed:
        return FailureClass.UNTERMINATED_THINK
    final_tokens = generation.n_tokens - (generation.reasoning_tokens or 0)
    if hit_limit or (output_cap is not None and final_tokens > output_cap):
        return FailureClass.TRUNCATED
    if read.think_closed and not read.answer.strip():
        return FailureClass.EMPTY_AFTER_THINK
    if any(safe_regex.search(p, read.answer, ignore_case=True) for p in refusals):
        return FailureClass.REFUSAL
    if generation.pred in NO_ANSWER:
        return FailureClass.NO_ANSWER
    return FailureClass.ANSWERED


def failure_summary(records: Sequence[Record], primary: str | None) -> dict[str, float]:
    """Per failure class, its share of all generations (an example the backend failed on
    counts once, as crash); with a 0/1 `primary` metric, accuracy with truncated
    generations counted wrong and with them left out (absent when all were truncated)."""
    classes: list[str] = []
    for record in records:
        if record.ok:
            classes += record.scores.get("failure", [])
        else:
            classes.append(FailureClass.CRASH)
    total = max(len(classes), 1)
    # propagated only exists in conversations: other tasks' summaries stay as they were.
    shown = [c for c in FailureClass if c is not FailureClass.PROPAGATED or c in classes]
    out = {f"failure_{c}": classes.count(c) / total for c in shown}
    if primary is None:
        return out
    truncated = [FailureClass.TRUNCATED in r.scores.get("failure", []) for r in records]
    right = [float(r.right) for r in records]
    out[f"{primary}_truncated_wrong"] = sum(
        x for x, cut in zip(right, truncated, strict=True) if not cut
    ) / max(len(records), 1)
    kept = [x for x, cut in zip(right, truncated, strict=True) if not cut]
    if kept:
        out[f"{primary}_excluding_truncated"] = sum(kept) / len(kept)
    return out
