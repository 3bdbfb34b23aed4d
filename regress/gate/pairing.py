"""Pair a candidate run's records with a baseline's: the one place two runs meet.

Pairing is by (task, doc_id) with equal doc_hash. `check` and `drift` both pair through
here, so an example that moved, went missing or changed its document counts the same way in
either command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from regress.core.manifest import Run, TaskInfo
from regress.core.records import Record

Pair = tuple[Record, Record]


@dataclass(frozen=True)
class Pairing:
    """Baseline and candidate records matched example by example."""

    pairs: dict[str, list[Pair]]
    """Per task name: (baseline, candidate) records, in the baseline's doc_id order."""
    unpaired: int
    """Baseline examples without a candidate example of the same doc_id and doc_hash."""
    warnings: tuple[str, ...]
    """One line per task with unpaired examples."""


def pair_runs(baseline: Run, candidate: Run, tasks: Sequence[TaskInfo]) -> Pairing:
    """Pair `tasks` of two runs by (doc_id, doc_hash); count the baseline's leftovers."""
    pairs: dict[str, list[Pair]] = {}
    warnings: list[str] = []
    unpaired = 0
    for task in tasks:
        theirs = {r.doc_id: r for r in candidate.records.get(task.name, [])}
        pairs[task.name] = []
        missing = differing = 0
        for ours in baseline.records.get(task.name, []):
            other = theirs.get(ours.doc_id)
            if other is None:
                missing += 1
            elif other.doc_hash != ours.doc_hash:
                differing += 1
            else:
                pairs[task.name].append((ours, other))
        if missing or differing:
            warnings.append(
                f"task {task.name}: {missing} baseline examples missing from the candidate, "
                f"{differing} with a different doc_hash; left unpaired"
            )
        unpaired += missing + differing
    return Pairing(pairs=pairs, unpaired=unpaired, warnings=tuple(warnings))
