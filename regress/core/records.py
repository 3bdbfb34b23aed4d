"""The per-example record: one JSON object per line in `records/<task>.jsonl`.

A record is everything the gate needs about one example, and nothing that would copy the
benchmark itself (documents are identified by hash, not stored). Records are deterministic:
two runs of the same model and prompts give byte-identical lines, so wall time lives in a
separate timings file (see `store.py`), not here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from regress.core import safe_json
from regress.core.errors import BadInput, RunFailed

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

    @property
    def right(self) -> bool:
        """Right under the primary metric; a failed example counts as wrong (as in the gate)."""
        return bool(self.ok and self.correct == 1)

    @property
    def outcomes(self) -> list[int]:
        """Each sample's 0/1 outcome: `scores["correct"]` when the example was sampled
        repeatedly, else one outcome (wrong when the example failed or is not 0/1)."""
        per_sample = self.scores.get("correct")
        if self.correct is None and isinstance(per_sample, list):
            return [int(c) for c in per_sample]
        return [int(self.right)]

    def to_json(self) -> str:
        """One canonical JSON line (sorted keys) for the records file.

        A NaN or infinite number has no JSON form (Python would write bare `NaN`): RunFailed.
        """
        data = asdict(self)
        data["status"] = str(self.status)
        try:
            return json.dumps(
                data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            )
        except ValueError as exc:
            raise RunFailed(
                f"{self.task} doc {self.doc_id}: non-finite score or metric (NaN or inf), "
                "the model's outputs are broken; not stored"
            ) from exc

    @classmethod
    def from_json(cls, line: str, where: str = "") -> Record:
        """Parse one records line; `where` names file:line for the error message."""
        try:
            data = safe_json.loads(line, parse_constant=_no_constant)
        except (json.JSONDecodeError, ValueError) as exc:
            raise BadInput(f"{where}: not a valid record ({exc})") from exc
        if not isinstance(data, dict):
            kind = _JSON_KINDS.get(type(data), "value")
            raise BadInput(f"{where}: not a valid record (a JSON {kind}, not an object)")
        unknown = set(data) - _FIELDS
        if unknown:
            raise BadInput(f"{where}: not a valid record (unknown fields {sorted(unknown)[:5]})")
        for name, check, expected in _CHECKS:
            if name in data and not check(data[name]):
                value = json.dumps(data[name])[:40]
                raise BadInput(
                    f"{where}: not a valid record ({name} is {value}, expected {expected})"
                )
        try:
            data["status"] = Status(data.get("status", "ok"))
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise BadInput(f"{where}: not a valid record ({exc})") from exc

    @property
    def ok(self) -> bool:
        """Whether the example was scored (a truncated prompt still counts as scored)."""
        return self.status in (Status.OK, Status.TRUNCATED)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
    )


_JSON_KINDS: dict[type, str] = {
    list: "array",
    type(None): "null",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
}
_FIELDS = {f.name for f in fields(Record)}
_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("task", lambda v: isinstance(v, str), "a string"),
    ("doc_id", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    ("doc_hash", lambda v: isinstance(v, str), "a string"),
    ("prompt_hash", lambda v: isinstance(v, str), "a string"),
    ("correct", lambda v: v is None or (_is_int(v) and v in (0, 1)), "0, 1 or null"),
    ("metrics", _is_number_map, "an object of numbers"),
    (
        "scores",
        lambda v: isinstance(v, dict) and all(isinstance(x, list) for x in v.values()),
        "an object of lists",
    ),
    ("status", lambda v: isinstance(v, str), "a string"),
    ("error", lambda v: v is None or isinstance(v, str), "a string or null"),
    (
        "tokens",
        lambda v: isinstance(v, dict) and all(_is_int(x) for x in v.values()),
        "an object of integers",
    ),
)
"""Field types a records line must have: a wrong type is a one-line error naming file:line."""
