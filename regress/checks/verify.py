"""`regress baseline verify`: whether a stored baseline is intact and can be trusted.

Its files parse and match their stored sha256 (the store refuses them otherwise), every record
is consistent (answer, target and verdict), the task hashes match the records, a proxy's design
matches its parent, and the pinned model file, where it is present, matches its sha256.
"""

from __future__ import annotations

from dataclasses import dataclass

from regress.backends.models import pinned_file_problem, resolve_model_path
from regress.core.errors import BadInput
from regress.core.hashes import task_hashes
from regress.core.store import Store
from regress.gate.integrity import (
    proxy_parent_problems,
    proxy_problems,
    record_problems,
    strata_problems,
)


@dataclass(frozen=True)
class Verified:
    """A baseline that passed verification."""

    name: str
    tasks: int
    records: int
    model: str
    """What was checked of the model: `model sha256 ok`, `model file not present here`, or
    `no model sha256 pinned` (an imported run)."""

    def summary(self) -> str:
        """The one line `regress baseline verify` prints."""
        return (
            f"baseline {self.name!r} ok: {self.tasks} tasks, {self.records} records, {self.model}"
        )


def verify_baseline(store: Store, name: str) -> Verified:
    """Verify baseline `name` in `store`; raises BadInput naming every problem found."""
    run = store.load(name)  # refuses records that do not match their stored sha256
    problems = []
    unhashed = sorted(set(run.manifest.tasks) - set(run.manifest.records_sha256))
    if unhashed:
        problems.append(
            f"no stored sha256 for the records of {', '.join(unhashed[:5])} (an edit would "
            "pass unseen; promote or recreate the baseline to add them)"
        )
    for task, info in sorted(run.manifest.tasks.items()):
        records = run.records[task]
        inconsistent = [found for r in records if (found := record_problems(r, info))]
        if inconsistent:
            problems.append(
                f"{task}: {len(inconsistent)} inconsistent record(s), first: {inconsistent[0][0]}"
            )
        dataset_hash, prompt_hash = task_hashes(records)
        if dataset_hash != info.dataset_hash:
            problems.append(f"{task}: dataset hash does not match its records")
        if prompt_hash != info.prompt_hash:
            problems.append(f"{task}: prompt hash does not match its records")
    problems += proxy_problems(run)
    design = run.manifest.proxy
    if design is not None and design.parent in store.names():
        parent = store.load(design.parent)
        problems += proxy_parent_problems(run, parent) + strata_problems(run, parent)
    model = run.manifest.model
    try:
        path = resolve_model_path(model.ref)
    except BadInput:
        path = None
    if path is not None and (problem := pinned_file_problem(path, model.sha256)):
        problems.append(f"model {model.ref}: {problem}")
    if problems:
        raise BadInput(f"baseline {name!r} failed verification: " + "; ".join(problems))
    if not model.sha256:  # an lm-eval import: nothing pinned the weights
        checked = "no model sha256 pinned"
    elif path is None:
        checked = "model file not present here"
    else:
        checked = "model sha256 ok"
    n = sum(len(v) for v in run.records.values())
    return Verified(name=name, tasks=len(run.records), records=n, model=checked)
