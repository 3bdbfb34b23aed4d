"""A task in another wording, and how a task's name says which.

Two kinds of variant exist: a prompt format from the seeded grammar (`arc_easy@fmt2`,
regress.tasks.formats) and the user's own instruction (`arc_easy@ins1a2b3c4d`,
regress.tasks.instructions), and both together, the format last (`arc_easy@ins1a2b3c4d@fmt2`).
A variant is a task of its own in a unit of its own (`UNIT@fmt2`), scored exactly as the task it
wraps; the spread and the pooled test read a unit's variants back from these names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from regress.core.requests import RequestKind, Result
from regress.tasks.base import DataSource, Example, Scored, Task

_FORMAT = re.compile(r"^(?P<base>.+)@fmt(?P<index>[0-9]{1,2})$")
_INSTRUCTION = re.compile(r"^(?P<base>.+)@ins(?P<key>[0-9a-f]{8})$")


def split_format(name: str) -> tuple[str, int] | None:
    """(`arc_easy`, 3) for `arc_easy@fmt3`; None for a name that does not end in a format."""
    match = _FORMAT.match(name)
    return (match["base"], int(match["index"])) if match else None


def split_instruction(name: str) -> tuple[str, str] | None:
    """(`arc_easy`, `1a2b3c4d`) for `arc_easy@ins1a2b3c4d`; None for a name that does not end
    in an instruction."""
    match = _INSTRUCTION.match(name)
    return (match["base"], match["key"]) if match else None


def variant_of(name: str) -> tuple[str, str]:
    """(`arc_easy`, `ins1a2b3c4d@fmt2`) for `arc_easy@ins1a2b3c4d@fmt2`; (`arc_easy`, ``) for
    the task as it is."""
    base, label = name, ""
    if (formatted := split_format(base)) is not None:
        base, label = formatted[0], f"fmt{formatted[1]}"
    if (instructed := split_instruction(base)) is not None:
        base, label = instructed[0], "@".join(filter(None, (f"ins{instructed[1]}", label)))
    return base, label


def label_order(label: str) -> tuple[str, int]:
    """Sorts labels by instruction, then format number (`fmt2` before `fmt10`)."""
    instruction, _, index = label.rpartition("fmt")
    return (instruction, int(index)) if index.isdigit() else (label, -1)


# eq=False: a task is an identity, as the tasks it wraps.
@dataclass(frozen=True, eq=False)
class TaskVariant:
    """`task` worded another way: named `TASK@suffix` in unit `UNIT@suffix`, scored as `task`.
    A kind of variant says its `suffix` and how it rewrites `examples` and `config`."""

    task: Task

    @property
    def suffix(self) -> str:
        raise NotImplementedError

    @property
    def name(self) -> str:
        return f"{self.task.name}@{self.suffix}"

    @property
    def group(self) -> str | None:
        return f"{self.task.group or self.task.name}@{self.suffix}"

    @property
    def output_type(self) -> RequestKind:
        return self.task.output_type

    @property
    def primary_metric(self) -> str:
        return self.task.primary_metric

    @property
    def higher_is_better(self) -> dict[str, bool]:
        return self.task.higher_is_better

    @property
    def binary(self) -> bool:
        return self.task.binary

    @property
    def default_fewshot(self) -> int:
        return self.task.default_fewshot

    @property
    def version(self) -> float:
        return self.task.version

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        raise NotImplementedError

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        return self.task.effective_fewshot(num_fewshot)

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        return self.task.score(example, results)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        return self.task.aggregate(scored)

    def config(self) -> dict[str, Any]:
        return {**self.task.config(), "task": self.name}
