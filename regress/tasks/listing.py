"""What tasks a run can name, described: `regress tasks`.

Built-in tasks, and the user's own task YAML and golden sets, each with where it is defined,
lm-eval's output type, its metrics (the gated one first) and its size (documents in the
evaluation split, when the data is at hand).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from regress.core.errors import BadInput
from regress.tasks.base import DataSource, Task
from regress.tasks.catalog import TaskCatalog
from regress.tasks.yaml_task import YamlTask


@dataclass(frozen=True)
class ListOptions:
    """Which tasks to describe, and where their data is."""

    names: tuple[str, ...] = ()
    """Tasks or groups to describe (empty: every task)."""
    source: DataSource = DataSource()
    sizes: bool = True
    """Count each task's documents (loads its data); False lists without reading data."""


@dataclass(frozen=True)
class TaskDescription:
    """One task as `regress tasks` shows it."""

    name: str
    unit: str
    """The gated unit it belongs to (its group, or itself)."""
    source: str
    """`built-in`, or the file that defines it."""
    output_type: str
    """lm-eval's: multiple_choice, loglikelihood, loglikelihood_rolling or generate_until."""
    metrics: tuple[str, ...]
    """Primary (gated) metric first."""
    size: int | None
    """Documents in the evaluation split; None when not counted or the data is missing."""
    note: str = ""
    """Why the size is missing (the data error, shortened)."""


def describe(task: Task, catalog: TaskCatalog, options: ListOptions) -> TaskDescription:
    """One task's description (its size counted only when asked)."""
    config = task.config()
    metrics = [task.primary_metric, *(m for m in task.higher_is_better if m != task.primary_metric)]
    size, note = None, ""
    if options.sizes:
        try:
            # A task file's rows are counted, not rendered: a million rows in a second.
            if isinstance(task, YamlTask):
                size = task.size(options.source)
            else:
                size = len(task.examples(options.source, 0))
        except BadInput as exc:
            note = str(exc)
    return TaskDescription(
        name=task.name,
        unit=task.group or task.name,
        source=catalog.source(task),
        output_type=str(config.get("output_type", task.output_type)),
        metrics=tuple(metrics),
        size=size,
        note=note,
    )


def list_tasks(catalog: TaskCatalog, options: ListOptions) -> list[TaskDescription]:
    """Every task the catalog knows (or those `options.names` select), described."""
    names: Sequence[str] = options.names or catalog.names()
    return [describe(task, catalog, options) for task in catalog.get(list(names))]
