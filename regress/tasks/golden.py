"""A golden set: a team's own must-pass prompts, one JSON object per line.

```json
{"id": "refund-window", "input": "Q: How many days do customers have to return an item?\\nA:",
 "expected": "30", "match": "contains", "tags": ["policy"], "must_pass": true}
{"id": "capital-fr", "input": "Question: What is the capital of France?\\nAnswer:",
 "choices": ["Paris", "Lyon", "Nice"], "answer": "Paris", "tags": ["geo"]}
```

Every item has an `id` (unique, the name reports use), an `input` (the exact prompt), optional
`tags` (strings) and `must_pass` (default false), and one way to be judged:

- `choices` (two or more) and `answer` (the right choice's text or index): the model's
  log-likelihood of `" " + choice` after the input, as a multiple-choice benchmark scores it;
  the item passes when the right choice scores highest;
- `expected` (a string or a list of acceptable strings) with `match`: `exact` (default),
  `contains`, `startswith` or `regex` (Python `re.search`), and `ignore_case`: the model
  generates greedily up to `max_tokens` (default 64) or a stop string in `until` (default
  `["\\n\\n"]`, a blank line); the answer, stripped of surrounding whitespace, passes when
  it matches any expected string.

Any other key is an error naming the file and line. The item, flags included, is the
document: changing an item or its `must_pass` flag changes its doc_hash, so a baseline made
from the old file is refused until it is recreated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.core import safe_regex
from regress.core.errors import BadInput
from regress.core.requests import (
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RequestKind,
    Result,
)
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.loaders import Doc, read_jsonl
from regress.tasks.metrics import mean_with_stderr
from regress.tasks.multiple_choice import ChoiceScores, argmax_choices

MATCHES = ("exact", "contains", "startswith", "regex")
MAX_TOKENS = 64
UNTIL = ("\n\n",)
"""A blank line ends an answer (a chat model often starts its answer on a new line)."""
_COMMON = {"id", "input", "tags", "must_pass"}
_CHOICE_KEYS = _COMMON | {"choices", "answer"}
_GENERATE_KEYS = _COMMON | {"expected", "match", "ignore_case", "max_tokens", "until"}
METRICS = ("pass", "must_pass")
MAX_SET_BYTES = 8 * 2**20
"""A golden or conversation set's largest file: thousands of hand-written items fit, and
parsed it stays well under a gigabyte however its items are shaped."""


def read_golden(path: Path) -> list[Doc]:
    """The items of a golden-set file, checked and normalised (defaults filled in)."""
    return read_set(path, _item, "golden set")


def read_set(path: Path, parse: Callable[[Any, str], Doc], what: str) -> list[Doc]:
    """A JSONL file of items with unique ids, each checked by `parse(row, where)`."""
    if not path.is_file():
        raise BadInput(f"{what} {path} does not exist")
    items: list[Doc] = []
    seen: dict[str, int] = {}
    for number, row in enumerate(set_rows(path, what), start=1):
        where = f"{path}: item {number}"
        item = parse(row, where)
        if item["id"] in seen:
            raise BadInput(f"{where}: id {item['id']!r} repeats item {seen[item['id']]}")
        seen[item["id"]] = number
        items.append(item)
    if not items:
        raise BadInput(f"{what} {path} has no items")
    return items


def set_rows(path: Path, what: str) -> list[Doc]:
    """The JSON objects of a golden or conversation set, refused above MAX_SET_BYTES: a set
    is parsed whole, into Python objects some 40 times its size."""
    size = path.stat().st_size
    if size > MAX_SET_BYTES:
        raise BadInput(
            f"{what} {path} is {size:,} bytes, more than the {MAX_SET_BYTES:,} a set may be "
            "(split it into several sets)"
        )
    return read_jsonl(path)


def item_flags(row: dict[str, Any], where: str) -> Doc:
    """An item's `tags` (strings) and `must_pass` (a boolean), checked, defaults filled."""
    tags = row.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise BadInput(f"{where}: `tags` must be a list of strings")
    must_pass = row.get("must_pass", False)
    if not isinstance(must_pass, bool):
        raise BadInput(f"{where}: `must_pass` must be true or false")
    return {"tags": tags, "must_pass": must_pass}


def _item(row: dict[str, Any], where: str) -> Doc:
    kind = "choices" if "choices" in row else "expected" if "expected" in row else None
    if kind is None:
        raise BadInput(f"{where}: needs `choices` and `answer`, or `expected`")
    allowed = _CHOICE_KEYS if kind == "choices" else _GENERATE_KEYS
    unknown = sorted(set(row) - allowed)
    if unknown:
        raise BadInput(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )
    for key in ("id", "input"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise BadInput(f"{where}: `{key}` must be a non-empty string")
    item: Doc = {"id": row["id"], "input": row["input"], **item_flags(row, where)}
    if kind == "choices":
        return item | _choice_item(row, where)
    return item | _generate_item(row, where)


def _choice_item(row: dict[str, Any], where: str) -> Doc:
    choices, answer = row["choices"], row.get("answer")
    if (
        not isinstance(choices, list)
        or len(choices) < 2
        or not all(isinstance(c, str) and c for c in choices)
    ):
        raise BadInput(f"{where}: `choices` must be two or more non-empty strings")
    if isinstance(answer, str) and answer in choices:
        answer = choices.index(answer)
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(choices):
        raise BadInput(f"{where}: `answer` must be one of the choices or its index")
    return {"choices": choices, "answer": answer}


def match_rule(row: dict[str, Any], where: str) -> Doc:
    """`expected` (as a list), `match` and `ignore_case` of an item, checked, defaults filled."""
    expected = row["expected"]
    expected = [expected] if isinstance(expected, str) else expected
    if (
        not isinstance(expected, list)
        or not expected
        or not all(isinstance(e, str) for e in expected)
    ):
        raise BadInput(f"{where}: `expected` must be a string or a list of strings")
    match = row.get("match", "exact")
    if match not in MATCHES:
        raise BadInput(f"{where}: `match` must be one of {', '.join(MATCHES)}")
    if match == "regex":
        for pattern in expected:
            safe_regex.check(pattern, f"{where}: regex")
    ignore_case = row.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise BadInput(f"{where}: `ignore_case` must be true or false")
    return {"expected": expected, "match": match, "ignore_case": ignore_case}


def generation_limits(row: dict[str, Any], where: str, until: Sequence[str]) -> Doc:
    """`max_tokens` and `until` of an item, checked, defaults (MAX_TOKENS, `until`) filled."""
    max_tokens = row.get("max_tokens", MAX_TOKENS)
    stops = row.get("until", list(until))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadInput(f"{where}: `max_tokens` must be a whole number >= 1")
    if not isinstance(stops, list) or not all(isinstance(u, str) and u for u in stops):
        raise BadInput(f"{where}: `until` must be a list of non-empty strings")
    return {"max_tokens": max_tokens, "until": stops}


def _generate_item(row: dict[str, Any], where: str) -> Doc:
    return match_rule(row, where) | generation_limits(row, where, UNTIL)


def must_pass_rate(scored: Sequence[Scored], metric: str) -> dict[str, float]:
    """`must_pass_rate`: the mean of `metric` over the must-pass items (none: empty)."""
    must = [s.metrics[metric] for s in scored if s.metrics.get("must_pass")]
    return {"must_pass_rate": sum(must) / len(must)} if must else {}


def matches(answer: str, item: Doc) -> bool:
    """Whether a generated answer (stripped) satisfies the item's `expected` under `match`."""
    text = answer.strip()
    fold = (lambda s: s.lower()) if item["ignore_case"] else (lambda s: s)
    for expected in item["expected"]:
        if item["match"] == "regex":
            if safe_regex.search(expected, text, item["ignore_case"]):
                return True
        elif item["match"] == "contains":
            if fold(expected) in fold(text):
                return True
        elif item["match"] == "startswith":
            if fold(text).startswith(fold(expected)):
                return True
        elif fold(text) == fold(expected):
            return True
    return False


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class GoldenTask:
    """A golden-set file as a task: metric `pass`, and `must_pass` recorded per item."""

    name: str
    path: Path
    items: tuple[Doc, ...]
    group: str | None = None
    primary_metric: str = "pass"
    higher_is_better: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(METRICS, True))
    binary: bool = True
    default_fewshot: int = 0
    version: float = 1.0

    @property
    def output_type(self) -> RequestKind:
        """generate_until when any item generates, else loglikelihood (choices only)."""
        generates = any("expected" in item for item in self.items)
        return "generate_until" if generates else "loglikelihood"

    @property
    def must_pass(self) -> dict[int, str]:
        """doc_id -> id of every must-pass item."""
        return {i: item["id"] for i, item in enumerate(self.items) if item["must_pass"]}

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """Always 0: an item's input is its whole prompt, so a suite's default shots are
        ignored, as for a task YAML that pins `num_fewshot: 0`."""
        return 0

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """One example per item: a request per choice, or one greedy generation."""
        examples = []
        for doc_id, item in enumerate(self.items[:limit]):
            if "choices" in item:
                requests: tuple[Any, ...] = tuple(
                    LoglikelihoodRequest(item["input"], " " + c) for c in item["choices"]
                )
                target: Any = item["answer"]
            else:
                requests = (
                    GenerateRequest(item["input"], tuple(item["until"]), item["max_tokens"]),
                )
                target = item["expected"][0] if len(item["expected"]) == 1 else item["expected"]
            examples.append(Example(doc_id, dict(item), requests, target))
        return examples

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """pass (0/1) and must_pass (the item's flag, so the gate needs no file)."""
        item = example.doc
        must = float(item["must_pass"])
        if "choices" in item:
            if not all(isinstance(r, LoglikelihoodResult) for r in results):
                raise ValueError(f"{self.name}: expected loglikelihood results")
            scores = ChoiceScores(
                loglik=[r.logprob for r in results],  # type: ignore[union-attr]
                is_greedy=[r.is_greedy for r in results],  # type: ignore[union-attr]
                chars=[len(c) for c in item["choices"]],
            )
            pred, _ = argmax_choices(scores)
            passed = float(pred == item["answer"])
            metrics = {"pass": passed, "must_pass": must}
            return Scored(pred=pred, correct=int(passed), metrics=metrics, scores=scores.as_dict())
        (result,) = results
        if not isinstance(result, GenerateResult):
            raise ValueError(f"{self.name}: expected a generation result")
        passed = float(matches(result.text, item))
        metrics = {"pass": passed, "must_pass": must}
        return Scored(pred=result.text.strip(), correct=int(passed), metrics=metrics)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Pass rate over all items, and over the must-pass ones."""
        return mean_with_stderr("pass", [s.metrics["pass"] for s in scored]) | must_pass_rate(
            scored, "pass"
        )

    def config(self) -> dict[str, Any]:
        """The golden set's settings, shaped like an lm-eval results `configs` entry."""
        return {
            "task": self.name,
            "dataset_path": str(self.path),
            "output_type": self.output_type,
            "num_fewshot": 0,
            "metric_list": [{"metric": "pass", "aggregation": "mean", "higher_is_better": True}],
            "metadata": {"version": self.version, "format": "regress golden set"},
        }


def golden_task(path: Path) -> GoldenTask:
    """The golden set in `path`, named `golden` or `golden_<file stem>`."""
    stem = re.sub(r"\W+", "_", path.stem).strip("_").lower() or "set"
    name = stem if stem.startswith("golden") else f"golden_{stem}"
    return GoldenTask(name=name, path=path, items=tuple(read_golden(path)))
