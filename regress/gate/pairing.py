"""Pair a candidate run's records with a baseline's: the one place two runs meet.

Pairing is by (task, doc_id) with equal doc_hash. `check` and `drift` both pair through
here, so an example that moved, went missing or changed its document counts the same way in
either command. A gated unit is a task, or a group: every task whose TaskInfo.group is set
belongs to that group's unit (`mmlu_anatomy` to `mmlu`), and the group's members are reported
as subjects, not gated one by one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from regress.core.errors import BadInput
from regress.core.manifest import Manifest, Run, TaskInfo
from regress.core.records import Record

Pair = tuple[Record, Record]
MISMATCH_REFUSED = "--allow-mismatch pairs identical documents only"


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


@dataclass(frozen=True)
class Paired:
    """A candidate run matched with its baseline once, example by example, for every rule."""

    tasks: tuple[TaskInfo, ...]
    """The baseline's tasks that pair, in name order."""
    pairs: dict[str, list[Pair]]
    """Per task name: (baseline, candidate) records, in the baseline's doc_id order."""
    unpaired: int
    warnings: tuple[str, ...]

    @property
    def units(self) -> dict[str, list[TaskInfo]]:
        """The gated units of the paired tasks."""
        return units_of(self.tasks)


def pair(baseline: Run, candidate: Run, allow_mismatch: bool = False) -> Paired:
    """Pair `candidate` with `baseline` for the gate.

    Raises BadInput when a baseline task is missing from the candidate or its dataset or
    prompt hash differs, unless `allow_mismatch` (then only identical documents are paired,
    with a warning).
    """
    warnings: list[str] = []
    tasks = _compatible_tasks(baseline.manifest, candidate.manifest, allow_mismatch, warnings)
    if not tasks:
        raise BadInput("nothing to compare: the baseline and the candidate share no task")
    pairing = pair_runs(baseline, candidate, tasks)
    return Paired(
        tasks=tuple(tasks),
        pairs=pairing.pairs,
        unpaired=pairing.unpaired,
        warnings=(*warnings, *pairing.warnings),
    )


def _compatible_tasks(
    baseline: Manifest, candidate: Manifest, allow_mismatch: bool, warnings: list[str]
) -> list[TaskInfo]:
    """The baseline's tasks that can be paired, in name order; refuse incompatible ones."""
    tasks = []
    for name in sorted(baseline.tasks):
        info, other = baseline.tasks[name], candidate.tasks.get(name)
        if other is None:
            problem = f"task {name}: in the baseline but not in the candidate run"
        else:
            problem = hash_difference(
                info, (other.dataset_hash, other.prompt_hash), other.scoring_hash
            )
        if problem and not allow_mismatch:
            raise BadInput(f"{problem}; {MISMATCH_REFUSED}")
        if problem:
            warnings.append(f"{problem}; pairing identical documents only")
        if other is not None:
            tasks.append(info)
    for name in sorted(set(candidate.tasks) - set(baseline.tasks)):
        warnings.append(f"task {name}: only in the candidate run, not compared")
    return tasks


def hash_difference(base: TaskInfo, candidate: tuple[str, str], scoring: str | None) -> str:
    """How the candidate's (dataset hash, prompt hash) and scoring hash of a task differ from
    the baseline's ("" when they do not). A scoring hash either side lacks (a manifest written
    before it was recorded) is not compared."""
    for label, ours, theirs in (
        ("dataset", base.dataset_hash, candidate[0]),
        ("prompt", base.prompt_hash, candidate[1]),
    ):
        if ours != theirs:
            return (
                f"task {base.name}: {label} hash differs "
                f"(baseline {ours[:12]}, candidate {theirs[:12]})"
            )
    kept = base.scoring_hash
    if kept is not None and scoring is not None and kept != scoring:
        return (
            f"task {base.name}: scoring hash differs (baseline {kept[:12]}, candidate "
            f"{scoring[:12]}): how its answers are scored changed (metric_list, filter_list, "
            "metric options, target, or regress's scorer)"
        )
    return ""


def units_of(tasks: Sequence[TaskInfo]) -> dict[str, list[TaskInfo]]:
    """The gated units of these tasks, by name: a task alone, or its group's members."""
    units: dict[str, list[TaskInfo]] = defaultdict(list)
    for task in tasks:
        units[task.group or task.name].append(task)
    return dict(sorted(units.items()))
