"""lm-eval's answer filters: named pipelines that turn a task's generations into one answer.

A task's `filter_list` holds pipelines `{name, filter: [{function, ...kwargs}]}`; each step
maps the list of an example's generations (one per repeat) to a new list, as lm-eval's
filters do. Supported functions: regex (regex_pattern, group_select, fallback), take_first,
take_first_k (k), majority_vote, lowercase, uppercase, remove_whitespace and map
(mapping_dict, default_value). Without a `filter_list` a task has lm-eval's default
pipeline `none`: take_first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.core.errors import BadInput

Step = Callable[[list[Any]], list[Any]]
INVALID = "[invalid]"


def _regex(regex_pattern: str = r"#### (\-?[0-9\.\,]+)", group_select: int = 0,
           fallback: str = INVALID) -> Step:  # fmt: skip
    pattern = re.compile(regex_pattern)

    def step(answers: list[Any]) -> list[Any]:
        out = []
        for answer in answers:
            matches = pattern.findall(answer if isinstance(answer, str) else "")
            if not matches:
                out.append(fallback)
                continue
            match = matches[group_select]
            if isinstance(match, tuple):
                match = next((group for group in match if group), fallback)
            out.append(match.strip())
        return out

    return step


def _take_first() -> Step:
    return lambda answers: answers[:1]


def _take_first_k(k: int) -> Step:
    return lambda answers: answers[:k]


def _majority_vote() -> Step:
    # Counter keeps first-seen order among equal counts, as lm-eval's most_common does.
    return lambda answers: [Counter(answers).most_common(1)[0][0]] if answers else []


def _lowercase() -> Step:
    return lambda answers: [a.lower() for a in answers]


def _uppercase() -> Step:
    return lambda answers: [a.upper() for a in answers]


def _remove_whitespace() -> Step:
    return lambda answers: [a.strip() for a in answers]


def _map(mapping_dict: dict[Any, Any] | None = None, default_value: Any = None) -> Step:
    mapping = dict(mapping_dict or {})
    return lambda answers: [mapping.get(a, default_value) for a in answers]


FUNCTIONS: dict[str, tuple[Callable[..., Step], frozenset[str]]] = {
    "regex": (_regex, frozenset({"regex_pattern", "group_select", "fallback"})),
    "take_first": (_take_first, frozenset()),
    "take_first_k": (_take_first_k, frozenset({"k"})),
    "majority_vote": (_majority_vote, frozenset()),
    "lowercase": (_lowercase, frozenset()),
    "uppercase": (_uppercase, frozenset()),
    "remove_whitespace": (_remove_whitespace, frozenset()),
    "map": (_map, frozenset({"mapping_dict", "default_value"})),
}


@dataclass(frozen=True)
class Pipeline:
    """One named filter pipeline."""

    name: str
    steps: tuple[Step, ...]

    def apply(self, generations: Sequence[str], where: str) -> Any:
        """The example's single answer after every step."""
        answers: list[Any] = list(generations)
        for step in self.steps:
            answers = step(answers)
        if len(answers) != 1:
            raise BadInput(
                f"{where}: filter {self.name!r} leaves {len(answers)} answers per example; "
                "end it with take_first or majority_vote"
            )
        return answers[0]


DEFAULT = Pipeline("none", (_take_first(),))


def pipelines(spec: Any, where: str) -> tuple[Pipeline, ...]:
    """A task's `filter_list` as pipelines (lm-eval's default when it has none)."""
    if spec is None:
        return (DEFAULT,)
    if not isinstance(spec, list) or not spec:
        raise BadInput(f"{where}: filter_list must be a list of {{name, filter}} pipelines")
    built = []
    for i, entry in enumerate(spec):
        if not isinstance(entry, dict) or set(entry) != {"name", "filter"}:
            raise BadInput(f"{where}: filter_list[{i}] needs exactly `name` and `filter`")
        steps = []
        for j, function in enumerate(entry["filter"] or []):
            key = f"filter_list[{i}].filter[{j}]"
            if not isinstance(function, dict) or "function" not in function:
                raise BadInput(f"{where}: {key} needs a `function`")
            name = function["function"]
            if name not in FUNCTIONS:
                raise BadInput(
                    f"{where}: {key}: filter function {name!r} is not supported "
                    f"({', '.join(FUNCTIONS)})"
                )
            factory, allowed = FUNCTIONS[name]
            kwargs = {k: v for k, v in function.items() if k != "function"}
            unknown = sorted(set(kwargs) - allowed)
            if unknown:
                raise BadInput(f"{where}: {key}: {name} has no option {unknown[0]!r}")
            try:
                steps.append(factory(**kwargs))
            except (re.error, TypeError) as exc:
                raise BadInput(f"{where}: {key}: {exc}") from exc
        built.append(Pipeline(str(entry["name"]), tuple(steps)))
    return tuple(built)
