"""The per-example record: one JSON object per line in `records/<task>.jsonl`.

A record is everything the gate needs about one example, and nothing that would copy the
benchmark itself (documents are identified by hash, not stored). Records are deterministic:
two runs of the same model and prompts give byte-identical lines, so wall time lives in a
separate timings file (see `store.py`), not here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from regress.errors import BadInput

RECORD_SCHEMA_VERSION = 1


class Status(StrEnum):
    """What happened to one example. A failed example is a data point, never dropped."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    TRUNCATED = "truncated"
    """The prompt was cut on the left to fit the model's context; still scored."""
    REFUSED = "refused"


@dataclass(frozen=True)
class Record:
    """One example's outcome under one model."""

    task: str
    """Task name, as lm-eval names it (`arc_easy`, `mmlu_anatomy`, ...)."""
    doc_id: int
    """Index of the example in the task's evaluation split."""
    doc_hash: str
    """sha256 of the source document (canonical JSON)."""
    prompt_hash: str
    """sha256 of the exact rendered request(s), few-shot block included."""
    target: Any
    """Gold answer: choice index for multiple choice, string for generation, None for perplexity."""
    pred: Any
    """Model answer: argmax choice index, extracted string, or None."""
    correct: int | None
    """1/0 under the task's primary metric; None for continuous metrics (perplexity)."""
    metrics: dict[str, float]
    """Every per-example metric (acc, acc_norm, exact_match, loglik, n_words, n_bytes, ...)."""
    scores: dict[str, list[Any]] = field(default_factory=dict)
    """Multiple choice: `loglik` (summed per choice), `is_greedy`, `chars` (for acc_norm)."""
    status: Status = Status.OK
    error: str | None = None
    """Why the example failed, when status is not ok."""
    tokens: dict[str, int] = field(default_factory=dict)
    """`prompt` and `completion` token counts over the example's requests."""

    def to_json(self) -> str:
        """One canonical JSON line (sorted keys) for the records file."""
        data = asdict(self)
        data["status"] = str(self.status)
        return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str, where: str = "") -> Record:
        """Parse one records line; `where` names file:line for the error message."""
        try:
            data = json.loads(line)
            data["status"] = Status(data.get("status", "ok"))
            return cls(**data)
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise BadInput(f"{where}: not a valid record ({exc})") from exc

    @property
    def ok(self) -> bool:
        """Whether the example was scored (a truncated prompt still counts as scored)."""
        return self.status in (Status.OK, Status.TRUNCATED)
