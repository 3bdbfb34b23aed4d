"""Which tasks a run can name: the built-in library plus the user's own task YAML files
(`--include-path`), golden sets and conversation sets (`--golden`).

A loaded task or group may not reuse a built-in name, and two files may not define the same
task: either would make the same name mean two prompts, so both are errors naming the files.
A tag that is already a built-in name (lm-eval's arc files tag `ai2_arc`) keeps its built-in
meaning. A group file's tasks form one gated unit named after the outermost group that lists them
(directly, through a tag, or through a nested group), as MMLU's subjects form `mmlu`.

Every task, built in or loaded, has a scoring hash (`scoring_hash`): what scores its answers,
which a run records beside its dataset and prompt hashes so a changed scoring is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from regress.core.errors import BadInput
from regress.core.hashes import scoring_digest
from regress.tasks import get_tasks, list_tasks, task_groups
from regress.tasks.base import Task
from regress.tasks.conversation import ConversationTask, conversation_task, is_conversation_file
from regress.tasks.formats import FormattedTask, prompt_format
from regress.tasks.golden import GoldenTask, golden_task
from regress.tasks.instructions import InstructedTask
from regress.tasks.variants import TaskVariant, split_format, split_instruction, variant_of
from regress.tasks.yaml_config import GroupFile, TaskFile, scan
from regress.tasks.yaml_task import YamlTask, yaml_task

TASK_FILE_SUFFIXES = (".yaml", ".yml")
GOLDEN_SUFFIXES = (".jsonl",)
SCORER_VERSION = 1
"""The version of regress's scoring code in every scoring hash: raise it when a change to
that code (a metric, a filter, a golden or conversation check) scores the same answers
differently, so baselines scored the old way are refused rather than compared."""


def scoring_hash(task: Task) -> str:
    """The sha256 of what scores `task`'s answers beyond its documents and prompts.

    A built-in task, golden set or conversation set is scored by regress's code, whose checks
    live in its documents (already in the dataset hash): its description is its family, its
    metrics and their directions, its version and SCORER_VERSION. A task YAML adds the
    settings a one-line edit could change (regress.tasks.yaml_task.YamlTask.scoring). A
    format or instruction variant is scored as the task it wraps.
    """
    inner = task
    while isinstance(inner, TaskVariant):
        inner = inner.task
    description: dict[str, Any] = {
        "scorer": SCORER_VERSION,
        "family": _family(inner),
        "output_type": task.output_type,
        "primary_metric": task.primary_metric,
        "higher_is_better": dict(task.higher_is_better),
        "binary": task.binary,
        "version": task.version,
    }
    if isinstance(inner, YamlTask):
        description["settings"] = inner.scoring()
    return scoring_digest(description)


def _family(task: Task) -> str:
    if isinstance(task, YamlTask):
        return "task yaml"
    if isinstance(task, GoldenTask):
        return "golden set"
    if isinstance(task, ConversationTask):
        return "conversation set"
    return "built-in"


@dataclass(frozen=True)
class TaskCatalog:
    """Built-in tasks plus loaded ones; `get` resolves names the way `get_tasks` does."""

    loaded: Mapping[str, Task] = field(default_factory=dict)
    """Task name -> a task from a YAML file or a golden set."""
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Loaded group or tag name -> its member tasks, groups or tags, as listed."""
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Resolved path of a loaded file -> the task or group names it defines."""
    instructions: Mapping[str, str] = field(default_factory=dict)
    """Key -> text of the instructions `TASK@insKEY` may name (regress.tasks.instructions):
    a suite's, and those a baseline was run with."""

    def with_instructions(self, texts: Mapping[str, str]) -> TaskCatalog:
        """This catalog, also knowing `texts` (key -> instruction text)."""
        return replace(self, instructions={**self.instructions, **texts})

    def get(self, names: Sequence[str]) -> list[Task]:
        """Tasks for `names` (tasks, groups, or task/golden files), first mention kept."""
        chosen: dict[str, Task] = {}
        for name in names:
            for task in self._expand(name):
                chosen.setdefault(task.name, task)
        return list(chosen.values())

    def _expand(self, name: str) -> list[Task]:
        formatted = split_format(name)
        if formatted is not None:
            base, index = formatted
            if split_format(base) is not None:
                raise BadInput(f"{name}: one format per task (`{base}` already names one)")
            prompt_format(index)  # a format the grammar has
            # A conversation has no prompt to reformat: it runs once, as it is.
            return [
                task if isinstance(task, ConversationTask) else FormattedTask(task, index)
                for task in self._expand(base)
            ]
        instructed = split_instruction(name)
        if instructed is not None:
            base, key = instructed
            if variant_of(base)[1]:
                raise BadInput(
                    f"{name}: one instruction per task, before its format (TASK@insKEY@fmtN)"
                )
            text = self.instructions.get(key)
            if text is None:
                raise BadInput(
                    f"{name}: no instruction has the key {key} (a suite lists its texts under "
                    "`instructions:`; a baseline keeps those it ran)"
                )
            return [InstructedTask(task, text) for task in self._expand(base)]
        if name in self.loaded:
            return [self.loaded[name]]
        if name in self.groups:
            return [t for member in self.groups[name] for t in self._expand(member)]
        if name.endswith(TASK_FILE_SUFFIXES + GOLDEN_SUFFIXES):
            defined = self.files.get(str(Path(name).expanduser().resolve()))
            if defined is None:
                raise BadInput(f"task file {name} was not loaded (does it exist?)")
            return [t for member in defined for t in self._expand(member)]
        try:
            return get_tasks([name])
        except BadInput as exc:
            if not (self.loaded or self.groups):
                raise
            # The built-in list alone would hide what --include-path and --golden loaded.
            loaded = ", ".join(sorted({*self.loaded, *self.groups}))
            raise BadInput(f"{exc}; loaded: {loaded}") from None

    def names(self) -> list[str]:
        """Every task name: built-in first, then loaded ones in name order."""
        return [*list_tasks(), *sorted(self.loaded)]

    def has(self, name: str) -> bool:
        """Whether `name` is a task here, as it is or in a variant (`arc_easy@fmt2`)."""
        return variant_of(name)[0] in set(self.names())

    def source(self, task: Task) -> str:
        """Where a task is defined: `built-in`, or its file (relative to the working folder)."""
        path = getattr(task, "path", None)
        if path is None:
            return "built-in"
        try:
            return str(Path(path).resolve().relative_to(Path.cwd()))
        except ValueError:  # outside the working folder: the whole path
            return str(path)

    def golden_items(self) -> dict[tuple[str, int], dict[str, Any]]:
        """(task, doc_id) -> every golden-set item, so reports can name items and choices."""
        return {
            (task.name, doc_id): item
            for task in self.loaded.values()
            if isinstance(task, GoldenTask)
            for doc_id, item in enumerate(task.items)
        }


BUILTIN = TaskCatalog()
"""Only the built-in tasks."""


def load_catalog(
    include_paths: Iterable[str | Path] = (), golden: Iterable[str | Path] = ()
) -> TaskCatalog:
    """The catalog with every task and group file under `include_paths` and the golden sets.

    A path may be a folder (searched recursively for *.yaml and *.yml) or one file.
    """
    task_files, group_files = scan(Path(p) for p in include_paths)
    files: dict[str, tuple[str, ...]] = {}
    for file in task_files:
        files[str(file.path)] = (*files.get(str(file.path), ()), file.name)
    for group_file in group_files:
        files[str(group_file.path)] = (*files.get(str(group_file.path), ()), group_file.name)
    builtin_names = set(list_tasks()) | set(task_groups())
    by_name: dict[str, TaskFile] = {}
    for file in task_files:
        _claim(file.name, file.path, builtin_names, {n: f.path for n, f in by_name.items()})
        by_name[file.name] = file
    groups = _groups(group_files, by_name, builtin_names)
    units = _units(groups, group_files)
    loaded: dict[str, Task] = {
        name: yaml_task(file, units.get(name)) for name, file in by_name.items()
    }
    for path in golden:
        jsonl = Path(path)
        task = conversation_task(jsonl) if is_conversation_file(jsonl) else golden_task(jsonl)
        owners = {n: getattr(t, "path", Path("?")) for n, t in loaded.items()}
        _claim(task.name, jsonl, builtin_names, owners)
        loaded[task.name] = task
        files[str(jsonl.expanduser().resolve())] = (task.name,)
    return TaskCatalog(loaded=loaded, groups=groups, files=files)


def _claim(name: str, path: Path, builtin: set[str], taken: Mapping[str, Path]) -> None:
    if name in builtin:
        raise BadInput(f"{path}: task {name!r} is a built-in task; give yours another `task:` name")
    if name in taken:
        raise BadInput(f"task {name!r} is defined twice: in {taken[name]} and in {path}")


def _groups(
    group_files: Sequence[GroupFile], tasks: Mapping[str, TaskFile], builtin: set[str]
) -> dict[str, tuple[str, ...]]:
    """Group and tag name -> member names as listed (tasks, tags or groups)."""
    groups: dict[str, tuple[str, ...]] = {}
    for name, file in tasks.items():
        tags = file.config.get("tag") or file.config.get("group") or ()
        for tag in [tags] if isinstance(tags, str) else tags:
            if str(tag) in tasks:
                raise BadInput(f"{file.path}: tag {tag!r} is also a task name")
            # lm-eval's own files tag built-in names (ai2_arc): the built-in meaning stays.
            if str(tag) not in builtin:
                groups[str(tag)] = (*groups.get(str(tag), ()), name)
    for group in group_files:
        if group.name in builtin or group.name in tasks:
            raise BadInput(f"{group.path}: group {group.name!r} is already a task or group name")
        groups[group.name] = group.members
    for group_name, members in groups.items():
        for member in members:
            if member not in groups and member not in tasks and member not in builtin:
                raise BadInput(f"group {group_name!r} lists {member!r}, which no file defines")
    return groups


def _units(groups: Mapping[str, tuple[str, ...]], files: Sequence[GroupFile]) -> dict[str, str]:
    """Task name -> the outermost group file that contains it (tags are not units)."""
    real = {g.name for g in files}
    nested = {m for g in real for m in groups[g] if m in real}
    units: dict[str, str] = {}

    def members(name: str, seen: frozenset[str]) -> list[str]:
        if name in seen:
            raise BadInput(f"group {name!r} contains itself")
        if name not in groups:
            return [name]
        return [t for m in groups[name] for t in members(m, seen | {name})]

    for root in sorted(real - nested):
        for task in members(root, frozenset()):
            units.setdefault(task, root)
    return units
