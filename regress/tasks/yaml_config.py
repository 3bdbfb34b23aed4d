"""Reading lm-evaluation-harness 0.4 task and group YAML files: the common subset, strictly.

A file is either a task (`task: name` plus how to load, prompt and score it) or a group
(`group: name` and a `task:` list). `include:` merges the included file first and the
including file's keys on top, as lm-eval does (paths relative to the including file).

Nothing is silently ignored: a key outside the supported subset is an error naming the key
and the file, and so is `!function` (lm-eval imports and runs the named Python function;
regress runs no code from task files). Keys that change nothing regress computes are
accepted: `metadata`, `task_alias`, `group_alias`, `should_decontaminate` and
`doc_to_decontamination_query` (lm-eval uses the last two only for its separate
decontamination report).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from regress.core import safe_yaml
from regress.core.errors import BadInput
from regress.core.store import validate_task_name

TASK_KEYS = frozenset(
    {
        "task", "task_alias", "tag", "group", "dataset_path", "dataset_name", "dataset_kwargs",
        "training_split", "validation_split", "test_split", "fewshot_split", "doc_to_text",
        "doc_to_target", "doc_to_choice", "description", "target_delimiter",
        "fewshot_delimiter", "fewshot_config", "num_fewshot", "output_type",
        "generation_kwargs", "filter_list", "metric_list", "repeats", "metadata",
        "should_decontaminate", "doc_to_decontamination_query",
    }
)  # fmt: skip
GROUP_KEYS = frozenset({"group", "group_alias", "task", "aggregate_metric_list", "metadata"})
FEWSHOT_KEYS = frozenset({"sampler", "split", "samples"})
SAMPLERS = ("default", "first_n")
OUTPUT_TYPES = ("multiple_choice", "loglikelihood", "loglikelihood_rolling", "generate_until")
MAX_INCLUDE_DEPTH = 20
MAX_INCLUDED_FILES = 200
"""Files one task file may read through its includes, repeats counted: 20 levels of 4
includes each once asked for 4**20 reads."""


class _Refused:
    """A `!function` value: remembered with its line so the error can point at it."""

    def __init__(self, spec: str, line: int) -> None:
        self.spec, self.line = spec, line


class _TaskLoader(yaml.SafeLoader):
    """The safe loader, plus `!function` read as a value that is refused once its key is known."""


def _function(loader: yaml.SafeLoader, node: yaml.Node) -> _Refused:
    return _Refused(str(loader.construct_scalar(node)), node.start_mark.line + 1)  # type: ignore[arg-type]


_TaskLoader.add_constructor("!function", _function)


@dataclass(frozen=True)
class TaskFile:
    """One task YAML file after its includes are merged."""

    path: Path
    config: dict[str, Any]

    @property
    def name(self) -> str:
        """The task's name (`task:`)."""
        return str(self.config["task"])


@dataclass(frozen=True)
class GroupFile:
    """One group YAML file: a name and the tasks, tags or groups it gathers."""

    path: Path
    name: str
    members: tuple[str, ...]


def read_yaml(path: Path) -> dict[str, Any]:
    """One YAML file as a mapping: bounded, safe tags only, `!function` refused by key."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        data = safe_yaml.load(text, _TaskLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise BadInput(f"{path}: not valid YAML ({line}{problem})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a task file is a mapping of keys (task:, dataset_path:, ...)")
    _refuse_functions(data, path, "")
    return data


def _refuse_functions(value: Any, path: Path, key: str) -> None:
    if isinstance(value, _Refused):
        raise BadInput(
            f"{path}:{value.line}: {key}: !function {value.spec} refused: regress runs no code "
            "from task files; write the step as a Jinja template or prepare the data file"
        )
    if isinstance(value, dict):
        for k, v in value.items():
            _refuse_functions(v, path, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _refuse_functions(v, path, f"{key}[{i}]")


def resolve_includes(path: Path) -> dict[str, Any]:
    """The file's keys over those of its `include:` files (a name or a list, in order), each
    relative to the including file or absolute (an override of lm-eval's installed YAML);
    at most MAX_INCLUDED_FILES reads in all."""
    return _resolve(path, 0, [MAX_INCLUDED_FILES])


def _resolve(path: Path, depth: int, budget: list[int]) -> dict[str, Any]:
    if depth > MAX_INCLUDE_DEPTH:
        raise BadInput(f"{path}: include chain deeper than {MAX_INCLUDE_DEPTH} (a cycle?)")
    budget[0] -= 1
    if budget[0] < 0:
        raise BadInput(f"{path}: includes read more than {MAX_INCLUDED_FILES} files")
    data = read_yaml(path)
    included = data.pop("include", None)
    if included is None:
        return data
    names = included if isinstance(included, list) else [included]
    merged: dict[str, Any] = {}
    for name in names:
        if not isinstance(name, str) or not name:
            raise BadInput(f"{path}: include must be a file name or a list of them")
        target = Path(name).expanduser()
        target = target if target.is_absolute() else path.parent / target
        if not target.is_file():
            raise BadInput(f"{path}: included file {target} does not exist")
        merged.update(_resolve(target, depth + 1, budget))
    merged.update(data)
    return merged


def check_task_keys(config: dict[str, Any], path: Path) -> None:
    """Every key of a task config is in the supported subset, and the task's name is one safe
    file name (it names the records file), before anything runs (BadInput naming the first)."""
    validate_task_name(config["task"], str(path))
    for key in config:
        if key not in TASK_KEYS:
            raise BadInput(
                f"{path}: key {key!r} is not supported by regress's task YAML (supported: "
                f"{', '.join(sorted(TASK_KEYS))})"
            )
    fewshot = config.get("fewshot_config")
    if fewshot is not None:
        if not isinstance(fewshot, dict):
            raise BadInput(f"{path}: fewshot_config must be a mapping")
        for key in fewshot:
            if key not in FEWSHOT_KEYS:
                raise BadInput(f"{path}: key 'fewshot_config.{key}' is not supported")
        samples = fewshot.get("samples")
        if samples is not None and (
            not isinstance(samples, list)
            or not samples
            or not all(isinstance(s, dict) for s in samples)
        ):
            raise BadInput(f"{path}: fewshot_config.samples must be a non-empty list of documents")
        if fewshot.get("sampler", "default") not in SAMPLERS:
            raise BadInput(
                f"{path}: fewshot_config.sampler {fewshot['sampler']!r} is not supported "
                f"({', '.join(SAMPLERS)})"
            )
    output_type = config.get("output_type", "generate_until")
    if output_type not in OUTPUT_TYPES:
        raise BadInput(
            f"{path}: output_type {output_type!r} is not one of {', '.join(OUTPUT_TYPES)}"
        )


def scan(include_paths: Iterable[Path]) -> tuple[list[TaskFile], list[GroupFile]]:
    """Every task and group file under the folders (recursively) or files given, by path.

    A file that is neither a task nor a group (no `task:` name, or only an `include:` base
    such as lm-eval's `_default_template_yaml`, which has no .yaml suffix) is skipped.
    """
    files: list[Path] = []
    for root in include_paths:
        root = Path(root).expanduser()
        if root.is_file():
            files.append(root)
        elif root.is_dir():
            files.extend(sorted(p for p in root.rglob("*.yaml") if p.is_file()))
            files.extend(sorted(p for p in root.rglob("*.yml") if p.is_file()))
        else:
            raise BadInput(f"--include-path {root} does not exist")
    tasks, groups = [], []
    for path in dict.fromkeys(p.resolve() for p in files):
        config = resolve_includes(path)
        if "group" in config and isinstance(config.get("task"), list):
            groups.append(_group(config, path))
        elif isinstance(config.get("task"), str):
            check_task_keys(config, path)
            tasks.append(TaskFile(path, config))
    return tasks, groups


def _group(config: dict[str, Any], path: Path) -> GroupFile:
    for key in config:
        if key not in GROUP_KEYS:
            raise BadInput(f"{path}: group key {key!r} is not supported ({sorted(GROUP_KEYS)})")
    members = config["task"]
    if not all(isinstance(m, str) and m for m in members):
        raise BadInput(
            f"{path}: group {config['group']!r}: list its tasks by name (inline task "
            "definitions in a group file are not supported: give each its own file)"
        )
    for entry in config.get("aggregate_metric_list") or []:
        if not isinstance(entry, dict) or entry.get("weight_by_size", True) is not True:
            raise BadInput(f"{path}: aggregate_metric_list: only size-weighted means are supported")
    return GroupFile(path, str(config["group"]), tuple(members))
