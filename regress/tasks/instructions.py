"""The user's own paraphrases of a task's instruction: `arc_easy@ins1a2b3c4d` is arc_easy with
its `description` (lm-eval's text before the shots) replaced by the text whose sha256 begins
1a2b3c4d.

A suite lists the texts per task or group (`instructions: {arc_easy: [...]}`); each becomes a
task of its own in a unit of its own, like a prompt format (regress.tasks.variants), and the
run's manifest keeps every text by its hash, so `check` rebuilds exactly the baseline's
prompts. A text that does not end in whitespace is followed by a blank line, as lm-eval's
descriptions are (`"... about anatomy.\\n\\n"`). Built-in multiple-choice tasks use it as
written; a task YAML renders it as it renders its own `description` (Jinja over the document).
Tasks whose prompt has no description to replace (built-in generation sets, golden sets,
conversations, perplexity) refuse it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from regress.core.errors import BadInput
from regress.core.hashes import instruction_key
from regress.tasks.base import DataSource, Example, Task
from regress.tasks.multiple_choice import MultipleChoiceTask
from regress.tasks.variants import TaskVariant
from regress.tasks.yaml_task import YamlTask


def instructed_names(name: str, texts: Sequence[str]) -> list[str]:
    """`name` with each of `texts` as its instruction (`arc_easy@ins1a2b3c4d`, ...)."""
    return [f"{name}@ins{instruction_key(text)}" for text in texts]


# eq=False: a task is an identity, as the tasks it wraps.
@dataclass(frozen=True, eq=False)
class InstructedTask(TaskVariant):
    """`task` with `text` as its instruction; scored exactly as `task`."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.task, MultipleChoiceTask | YamlTask):
            raise BadInput(
                f"{self.task.name}: an instruction replaces a multiple-choice task's or a task "
                "YAML's `description`; this task has none"
            )

    @property
    def key(self) -> str:
        return instruction_key(self.text)

    @property
    def suffix(self) -> str:
        return f"ins{self.key}"

    @property
    def description(self) -> str:
        """The text as it goes before the prompt: a blank line after it unless it ends in
        whitespace."""
        return self.text if self.text[-1:].isspace() else self.text + "\n\n"

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """The task's examples with this instruction before the shots."""
        task = self.task
        if isinstance(task, MultipleChoiceTask):
            described: Task = replace(task, description=self.description)
        else:
            assert isinstance(task, YamlTask)
            described = replace(task, settings={**task.settings, "description": self.description})
        return described.examples(source, num_fewshot, limit)

    def config(self) -> dict[str, Any]:
        """The task's config with this instruction as its `description`, and its key."""
        return {
            **super().config(),
            "description": self.description,
            "regress_instruction": self.key,
        }


def instructions_of(tasks: Iterable[Task]) -> dict[str, str]:
    """Key -> text of every instruction the tasks were run with (formats unwrapped)."""
    found = {}
    for task in tasks:
        while isinstance(task, TaskVariant):
            if isinstance(task, InstructedTask):
                found[task.key] = task.text
            task = task.task
    return dict(sorted(found.items()))


def check_texts(texts: Mapping[str, Sequence[str]], where: str) -> dict[str, str]:
    """Key -> text of a suite's `instructions:` (task or group -> its texts); every mistake is
    a BadInput naming `where`."""
    found: dict[str, str] = {}
    for name, listed in texts.items():
        if not isinstance(listed, list) or not listed:
            raise BadInput(f"{where}.{name}: expected a list of instruction texts")
        for i, text in enumerate(listed):
            if not isinstance(text, str) or not text.strip():
                raise BadInput(f"{where}.{name}[{i}]: expected a non-empty text")
            key = instruction_key(text)
            if found.get(key, text) != text:
                raise BadInput(f"{where}.{name}[{i}]: two texts share the hash {key}; reword one")
            found[key] = text
        if len(set(listed)) < len(listed):
            raise BadInput(f"{where}.{name}: a text is listed twice")
    return found
