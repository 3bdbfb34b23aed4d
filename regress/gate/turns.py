"""A conversation unit's pass rate at each turn, baseline beside candidate: reported, not gated.

The gate's unit is the conversation (did every checked turn pass?). Turns of one conversation
are not independent, so the per-turn rates are shown to say where a change bit, never tested
on their own. A turn counts the conversations that reached it with a check on both sides; a
sampled conversation counts the share of its samples that passed the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from regress.core.records import Record
from regress.gate.pairing import Pair


@dataclass(frozen=True)
class TurnChange:
    """One turn position of one conversation unit on both sides."""

    unit: str
    turn: int
    """1-based."""
    n: int
    """Paired conversations checked at this turn."""
    baseline: float
    candidate: float
    broke: int
    """Conversations whose turn passed on the baseline and failed on the candidate."""
    fixed: int


def _per_turn(record: Record) -> list[float | None] | None:
    """Each turn's pass share (None: not checked); None when the record has no turns."""
    turns: Any = record.scores.get("turn_pass") if record.ok else None
    if not isinstance(turns, list) or not turns:
        return None
    if not isinstance(turns[0], list):
        return [None if p is None else float(p) for p in turns]
    shares: list[float | None] = []
    for column in zip(*turns, strict=True):  # repeated: samples x turns
        checked = [float(p) for p in column if p is not None]
        shares.append(sum(checked) / len(checked) if checked else None)
    return shares


def turn_changes(unit: str, pairs: Sequence[Pair]) -> tuple[TurnChange, ...]:
    """Each turn position's pass rate on both sides, over the pairs where both ran."""
    table: dict[int, list[tuple[float, float]]] = {}
    for base, cand in pairs:
        before, after = _per_turn(base), _per_turn(cand)
        if before is None or after is None:
            continue
        for turn, (b, c) in enumerate(zip(before, after, strict=True), start=1):
            if b is not None and c is not None:
                table.setdefault(turn, []).append((b, c))
    return tuple(
        TurnChange(
            unit=unit,
            turn=turn,
            n=len(rows),
            baseline=sum(b for b, _ in rows) / len(rows),
            candidate=sum(c for _, c in rows) / len(rows),
            broke=sum(b == 1 and c == 0 for b, c in rows),
            fixed=sum(b == 0 and c == 1 for b, c in rows),
        )
        for turn, rows in sorted(table.items())
    )
