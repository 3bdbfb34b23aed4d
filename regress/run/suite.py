"""Suite files: which tasks to run, with how many shots, on which documents, with which model
settings. Unknown keys are errors, so a typo never silently changes what is gated.

```yaml
name: proxy
num_fewshot: 0            # default for every task
tasks:
  - arc_easy              # a bare name: all documents, default shots
  - {task: mmlu, num_fewshot: 5, limit: 10}   # limit applies per MMLU subject
  - {task: boolq, docs: [0, 5, 9]}            # an explicit subset
  - tasks/support_faq.yaml                    # an lm-eval task YAML (path from this file)
  - golden/must_pass.jsonl                    # a golden set
backend: llama_cpp
model_args: {n_ctx: 2048}
instructions:             # your own paraphrases: each a task of its own, arc_easy@insKEY
  arc_easy: ["Pick the answer that best completes the question."]
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from regress.core import safe_yaml
from regress.core.errors import BadInput
from regress.run.generation import GenerationSettings, check_gen_kwargs
from regress.tasks.formats import formatted_names
from regress.tasks.instructions import check_texts, instructed_names

_SUITE_KEYS = {
    "name", "tasks", "num_fewshot", "limit", "backend", "model_args", "formats", "instructions",
}  # fmt: skip
_TASK_KEYS = {"task", "num_fewshot", "limit", "docs", "gen_kwargs", "repeats"}
TASK_FILE_SUFFIXES = (".yaml", ".yml", ".jsonl")
"""A `tasks:` entry ending so names a task YAML file or a golden set, not a task."""


@dataclass(frozen=True)
class TaskEntry:
    """One line of a suite: a task or group name and what to evaluate of it."""

    task: str
    num_fewshot: int | None = None
    limit: int | float | None = None
    """First n documents (an int), or a fraction of them (0 < x < 1), as lm-eval's --limit."""
    docs: tuple[int, ...] | None = None
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    """`gen_kwargs:` and `repeats:` for a generate_until task."""


@dataclass(frozen=True)
class Suite:
    """A named list of task entries plus default model settings."""

    name: str
    tasks: tuple[TaskEntry, ...]
    backend: str | None = None
    model_args: dict[str, Any] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    """Key -> text of the instructions its `TASK@insKEY` entries name
    (regress.tasks.instructions)."""

    def in_formats(self, k: int) -> Suite:
        """Each task entry in prompt formats 0..k-1 (`arc_easy@fmt0`, ...; regress.tasks.
        formats); golden sets stay as they are, run whole."""
        entries = [
            replace(entry, task=name)
            for entry in self.tasks
            for name in (
                [entry.task] if entry.task.endswith(".jsonl") else formatted_names([entry.task], k)
            )
        ]
        return replace(self, tasks=tuple(entries))

    def task_files(self) -> list[Path]:
        """Entries that name a task YAML file (resolved against the suite file)."""
        return [Path(e.task) for e in self.tasks if e.task.endswith((".yaml", ".yml"))]

    def golden_files(self) -> list[Path]:
        """Entries that name a golden set (.jsonl)."""
        return [Path(e.task) for e in self.tasks if e.task.endswith(".jsonl")]


def _show(value: Any) -> str:
    """A short rendering of a value for an error message (a YAML value may be huge)."""
    scalar = isinstance(value, str | int | float | bool | None)
    text = repr(value) if scalar else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _int(value: Any, where: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BadInput(f"{where}: expected an integer >= {minimum}, got {_show(value)}")
    return value


def parse_limit(value: Any, where: str) -> int | float:
    """A limit: a whole number of documents >= 1, or lm-eval's fraction of them (0 < x < 1)."""
    if isinstance(value, float) and 0 < value < 1:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 1:
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadInput(
            f"{where}: expected a number of documents >= 1 or a fraction between 0 and 1, "
            f"got {_show(value)}"
        )
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadInput(f"{where}: expected a name, got {_show(value)}")
    return value


def _generation(item: dict[str, Any], where: str) -> GenerationSettings:
    kwargs = item.get("gen_kwargs", {})
    if not isinstance(kwargs, dict):
        raise BadInput(f"{where}.gen_kwargs: expected a mapping such as {{temperature: 0.8}}")
    return GenerationSettings(
        gen_kwargs=check_gen_kwargs(kwargs, f"{where}.gen_kwargs"),
        repeats=_int(item.get("repeats", 1), f"{where}.repeats", 1),
    )


def inline_suite(
    tasks: str,
    num_fewshot: int | None = None,
    limit: int | float | None = None,
    name: str = "inline",
) -> Suite:
    """A suite from `--tasks a,b --num-fewshot k --limit n`."""
    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if not names:
        raise BadInput("--tasks: give at least one task name")
    return Suite(name=name, tasks=tuple(TaskEntry(t, num_fewshot, limit) for t in names))


def load_suite(path: Path) -> Suite:
    """Parse a suite YAML file; every mistake is a BadInput naming the file and key."""
    path = Path(path)
    try:
        data = safe_yaml.load(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise BadInput(f"{path}: cannot read suite ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: not valid YAML ({_yaml_problem(exc)})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a suite is a mapping with a `tasks:` list")
    unknown = sorted(_show(k) for k in set(data) - _SUITE_KEYS)
    if unknown:
        raise BadInput(f"{path}: unknown key(s) {unknown[:10]}; allowed: {sorted(_SUITE_KEYS)}")
    default_shots = data.get("num_fewshot")
    default_limit = data.get("limit")
    entries = []
    listed = data.get("tasks") or []
    if not isinstance(listed, list):
        raise BadInput(f"{path}: `tasks:` must be a list, got {_show(listed)}")
    for i, item in enumerate(listed):
        where = f"{path}: tasks[{i}]"
        if isinstance(item, str):
            item = {"task": item}
        if not isinstance(item, dict) or "task" not in item:
            raise BadInput(f"{where}: expected a task name or a mapping with `task:`")
        unknown = sorted(_show(k) for k in set(item) - _TASK_KEYS)
        if unknown:
            raise BadInput(f"{where}: unknown key(s) {unknown[:10]}; allowed: {sorted(_TASK_KEYS)}")
        shots = item.get("num_fewshot", default_shots)
        limit = item.get("limit", default_limit)
        docs = item.get("docs")
        if docs is not None and not (isinstance(docs, list) and docs):
            raise BadInput(f"{where}: `docs` must be a non-empty list of document indices")
        name = _str(item["task"], f"{where}.task")
        if name.endswith(TASK_FILE_SUFFIXES):
            name = str((path.parent / Path(name).expanduser()).resolve())
        entries.append(
            TaskEntry(
                task=name,
                num_fewshot=None if shots is None else _int(shots, f"{where}.num_fewshot"),
                limit=None if limit is None else parse_limit(limit, f"{where}.limit"),
                docs=None if docs is None else tuple(_int(d, f"{where}.docs") for d in docs),
                generation=_generation(item, where),
            )
        )
    if not entries:
        raise BadInput(f"{path}: `tasks:` is empty")
    model_args = data.get("model_args") or {}
    if not isinstance(model_args, dict):
        raise BadInput(f"{path}: `model_args` must be a mapping")
    backend = data.get("backend")
    entries, instructions = _instructed(entries, data.get("instructions"), path)
    suite = Suite(
        name=_str(data.get("name", path.stem), f"{path}: name"),
        tasks=tuple(entries),
        backend=None if backend is None else _str(backend, f"{path}: backend"),
        model_args=model_args,
        instructions=instructions,
    )
    formats = data.get("formats")
    return suite if formats is None else suite.in_formats(_int(formats, f"{path}: formats", 1))


def _instructed(
    entries: list[TaskEntry], listed: Any, path: Path
) -> tuple[list[TaskEntry], dict[str, str]]:
    """The entries with each listed instruction's variant after its task's entry, and the
    texts by key."""
    if listed is None:
        return entries, {}
    if not isinstance(listed, dict):
        raise BadInput(f"{path}: `instructions:` maps a task or group to a list of texts")
    texts = check_texts(listed, f"{path}: instructions")
    named = {entry.task for entry in entries}
    missing = sorted(_show(name) for name in listed if name not in named)
    if missing:
        raise BadInput(
            f"{path}: instructions: {', '.join(missing[:5])} not in `tasks:` (name them as listed)"
        )
    out = []
    for entry in entries:
        out.append(entry)
        names = instructed_names(entry.task, listed.get(entry.task, []))
        out.extend(replace(entry, task=name) for name in names)
    return out, texts


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint and its line, on one line (never the document's values)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"line {mark.line + 1}: {problem}" if mark is not None else str(problem)
