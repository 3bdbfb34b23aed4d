"""The shape shared by the built-in generation sets judged by code (json_extraction,
constrained_writing, python_functions): items from a JSON Lines file shipped in
`regress/tasks/data/`, one greedy `generate_until` request per item, and a pure `judge` of one
generation.

`score` judges ONE generation: with `--repeats k` the engine calls it once per sample and
computes pass@k, maj@k and failure classes itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from regress.core.errors import BadInput
from regress.core.requests import GenerateRequest, GenerateResult, RequestKind, Result
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.loaders import Doc, read_jsonl
from regress.tasks.metrics import mean_with_stderr


def data_path(name: str) -> Path:
    """A data file shipped inside the package (`regress/tasks/data/<name>`)."""
    return Path(str(resources.files("regress.tasks") / "data" / name))


def read_items(path: Path, fields: dict[str, type | tuple[type, ...]]) -> list[Doc]:
    """Rows of a JSON Lines file, each with `fields` of the given types (BadInput otherwise)."""
    rows = read_jsonl(path)
    ids: set[str] = set()
    for number, row in enumerate(rows, start=1):
        for name, kind in fields.items():
            if not isinstance(row.get(name), kind):
                raise BadInput(f"{path}:{number}: field {name!r} is missing or not {kind}")
        if row["id"] in ids:
            raise BadInput(f"{path}:{number}: duplicate id {row['id']!r}")
        ids.add(row["id"])
    return rows


Judge = Callable[[Doc, str], Scored]
"""(item, generated text) -> the verdict on that one generation."""


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class GenerativeTask:
    """A built-in generation set judged by code."""

    name: str
    load: Callable[[], list[Doc]]
    render: Callable[[Doc], str]
    """The whole prompt of one item (few-shot exemplars included)."""
    judge: Judge
    until: tuple[str, ...]
    max_tokens: int
    primary_metric: str
    metric_names: tuple[str, ...]
    description: str
    group: str | None = None
    output_type: RequestKind = "generate_until"
    binary: bool = True
    default_fewshot: int = 0
    version: float = 1.0
    higher_is_better: dict[str, bool] = field(init=False)

    def __post_init__(self) -> None:
        # Every metric of these sets is a success rate.
        object.__setattr__(self, "higher_is_better", dict.fromkeys(self.metric_names, True))

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """Always 0: the exemplars are part of the fixed prompt, not sampled shots."""
        if num_fewshot:
            raise BadInput(f"{self.name}: its exemplars are fixed; num_fewshot must be 0")
        return 0

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """One greedy generation request per item."""
        self.effective_fewshot(num_fewshot)
        examples = []
        for doc_id, doc in enumerate(self.load()[:limit]):
            request = GenerateRequest(
                self.render(doc), until=self.until, max_tokens=self.max_tokens
            )
            examples.append(Example(doc_id, doc, (request,), doc["id"]))
        return examples

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """The judge's verdict on the one generation."""
        (result,) = results
        if not isinstance(result, GenerateResult):
            raise ValueError(f"{self.name}: expected a generation result")
        return self.judge(example.doc, result.text)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Mean and stderr of every metric."""
        out: dict[str, float] = {}
        for metric in self.metric_names:
            out |= mean_with_stderr(metric, [s.metrics[metric] for s in scored])
        return out

    def config(self) -> dict[str, Any]:
        """The task's settings, shaped like an entry of lm-eval's results `configs`."""
        return {
            "task": self.name,
            "tag": ["generative"],
            "dataset_path": f"regress/tasks/data/{self.name}.jsonl",
            "test_split": "test",
            "description": self.description,
            "num_fewshot": 0,
            "output_type": self.output_type,
            "generation_kwargs": {
                "until": list(self.until),
                "do_sample": False,
                "temperature": 0.0,
                "max_gen_toks": self.max_tokens,
            },
            "metric_list": [
                {"metric": m, "aggregation": "mean", "higher_is_better": True}
                for m in self.metric_names
            ],
            "metadata": {"version": self.version},
        }
