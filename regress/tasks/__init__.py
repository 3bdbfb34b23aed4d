"""The task library, named and prompted as lm-evaluation-harness 0.4 names and prompts them.

`get_tasks(["mmlu", "arc_easy"])` gives ready `Task` objects (groups expanded, order kept,
duplicates dropped); `resolve_source(data_dir)` says where their data comes from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from regress.core.errors import BadInput
from regress.tasks.arc import arc_task
from regress.tasks.base import DataSource, Example, Scored, Task, doc_hash
from regress.tasks.boolq import boolq_task
from regress.tasks.builtin import GENERATORS, builtin_task
from regress.tasks.constrained_writing import constrained_writing_task
from regress.tasks.conversation import builtin_conversations
from regress.tasks.gsm8k import Gsm8kTask
from regress.tasks.hellaswag import hellaswag_task
from regress.tasks.json_extraction import json_extraction_task
from regress.tasks.loaders import DATA_DIR_ENV, resolve_source
from regress.tasks.metrics import group_aggregate
from regress.tasks.mmlu import CATEGORIES, SUBJECTS, subject_task
from regress.tasks.open_answers import open_answers_task
from regress.tasks.piqa import piqa_task
from regress.tasks.python_functions import python_functions_task
from regress.tasks.truthfulqa import truthfulqa_task
from regress.tasks.wikitext import WikitextTask

__all__ = [
    "DATA_DIR_ENV",
    "DataSource",
    "Example",
    "Scored",
    "Task",
    "doc_hash",
    "get_tasks",
    "group_aggregate",
    "list_tasks",
    "resolve_source",
    "task_groups",
]

_FACTORIES: dict[str, Callable[[], Task]] = {
    **{f"mmlu_{s}": partial(subject_task, s) for s in SUBJECTS},
    "arc_easy": lambda: arc_task("arc_easy", "ARC-Easy"),
    "arc_challenge": lambda: arc_task("arc_challenge", "ARC-Challenge"),
    "piqa": piqa_task,
    "boolq": boolq_task,
    "hellaswag": hellaswag_task,
    "truthfulqa_mc1": lambda: truthfulqa_task("truthfulqa_mc1"),
    "truthfulqa_mc2": lambda: truthfulqa_task("truthfulqa_mc2"),
    "wikitext": WikitextTask,
    "gsm8k": Gsm8kTask,
    **{f"builtin_{kind}": partial(builtin_task, kind) for kind in GENERATORS},
    "json_extraction": json_extraction_task,
    "constrained_writing": constrained_writing_task,
    "python_functions": python_functions_task,
    "open_answers": open_answers_task,
    "conversations": builtin_conversations,
}

_GROUPS: dict[str, list[str]] = {
    "mmlu": [f"mmlu_{s}" for s in SUBJECTS],
    **{f"mmlu_{c}": [f"mmlu_{s}" for s in sorted(subjects)] for c, subjects in CATEGORIES.items()},
    "ai2_arc": ["arc_easy", "arc_challenge"],
    "truthfulqa": ["truthfulqa_mc1", "truthfulqa_mc2"],
    "builtin": [f"builtin_{kind}" for kind in GENERATORS],
}


def list_tasks() -> list[str]:
    """Every task name, MMLU subjects first."""
    return list(_FACTORIES)


def task_groups() -> dict[str, list[str]]:
    """Group name -> member task names (`mmlu`, its four categories, `builtin`, ...)."""
    return {group: list(members) for group, members in _GROUPS.items()}


def get_tasks(names: Sequence[str]) -> list[Task]:
    """Tasks for `names` (tasks or groups), groups expanded in place, first mention kept."""
    expanded: list[str] = []
    for name in names:
        if name in _GROUPS:
            expanded.extend(_GROUPS[name])
        elif name in _FACTORIES:
            expanded.append(name)
        else:
            known = ", ".join([*_GROUPS, *(t for t in _FACTORIES if not t.startswith("mmlu_"))])
            raise BadInput(f"unknown task {name!r}; known: {known}, mmlu_<subject>")
    return [_FACTORIES[name]() for name in dict.fromkeys(expanded)]
