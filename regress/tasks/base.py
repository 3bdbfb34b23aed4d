"""What a task is: data plus small pure functions that render requests and score results.

A task turns documents into `Example`s (each with its typed requests), and turns a backend's
results for one example into a `Scored` outcome. It never calls a backend itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from regress.core.requests import Request, RequestKind, Result


@dataclass(frozen=True)
class DataSource:
    """Where task data comes from: a local folder of original files, or the Hub via `datasets`.

    The built-in generated suite needs neither.
    """

    data_dir: Path | None = None
    """Folder laid out like ../shared/data (mmlu/, arc/, piqa/, ...)."""
    hf: bool = False
    """Load through `datasets` using lm-eval's dataset paths (needs network)."""


@dataclass(frozen=True)
class Example:
    """One evaluation document rendered into the requests that score it."""

    doc_id: int
    doc: dict[str, Any]
    """The source document as loaded (used for doc_hash and lm-eval samples, never stored)."""
    requests: tuple[Request, ...]
    target: Any
    """Gold answer: a choice index, a string, or None for perplexity."""


@dataclass(frozen=True)
class Scored:
    """A task's verdict on one example."""

    pred: Any
    correct: int | None
    metrics: dict[str, float]
    scores: dict[str, list[Any]] = field(default_factory=dict)


class Task(Protocol):
    """A benchmark task named as lm-eval names it."""

    # Read-only properties, so frozen dataclasses and plain classes both satisfy the protocol.
    @property
    def name(self) -> str: ...

    @property
    def group(self) -> str | None:
        """Group the task belongs to (`mmlu` for `mmlu_anatomy`), or None."""
        ...

    @property
    def output_type(self) -> RequestKind: ...

    @property
    def primary_metric(self) -> str:
        """The metric the gate pairs on (`acc`, `acc_norm`, `exact_match`, `word_perplexity`)."""
        ...

    @property
    def higher_is_better(self) -> dict[str, bool]: ...

    @property
    def binary(self) -> bool:
        """Whether the primary metric is 0/1 per example (the paired McNemar test needs that)."""
        ...

    @property
    def default_fewshot(self) -> int: ...

    @property
    def version(self) -> float: ...

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """Load the evaluation split and render each document's requests (few-shot included)."""
        ...

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """Shots actually used when `num_fewshot` is asked for (None: the default)."""
        ...

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """Score one example from its requests' results (same order as `example.requests`)."""
        ...

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Task-level metrics from per-example outcomes (means, or corpus-level perplexity)."""
        ...

    def config(self) -> dict[str, Any]:
        """The task's settings, as lm-eval's results JSON lists them under `configs`."""
        ...


def doc_hash(doc: dict[str, Any]) -> str:
    """sha256 of a document's canonical JSON: identifies it across runs and machines."""
    payload = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
