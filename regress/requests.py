"""Typed requests a task sends to a backend, and the typed results that come back.

The vocabulary is lm-evaluation-harness's: `loglikelihood`, `loglikelihood_rolling`,
`generate_until`. Nothing here knows about tasks or backends.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Literal

RequestKind = Literal["loglikelihood", "loglikelihood_rolling", "generate_until"]


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """log P(continuation | context), summed over the continuation's tokens."""

    context: str
    continuation: str
    kind: RequestKind = field(default="loglikelihood", init=False)


@dataclass(frozen=True)
class RollingLoglikelihoodRequest:
    """log P(text) over the whole text, in rolling windows of the model's context."""

    text: str
    kind: RequestKind = field(default="loglikelihood_rolling", init=False)


@dataclass(frozen=True)
class GenerateRequest:
    """Generate from `context` until a stop string or `max_tokens` (greedy unless temperature>0)."""

    context: str
    until: tuple[str, ...] = ()
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 1234
    kind: RequestKind = field(default="generate_until", init=False)


Request = LoglikelihoodRequest | RollingLoglikelihoodRequest | GenerateRequest


@dataclass(frozen=True)
class LoglikelihoodResult:
    """Summed log-prob of the continuation, and whether greedy decoding reproduces it."""

    logprob: float
    is_greedy: bool
    n_tokens: int
    """Continuation tokens scored."""
    n_context_tokens: int = 0
    truncated: bool = False
    """The context was cut on the left to fit the model's window (lm-eval does the same)."""


@dataclass(frozen=True)
class RollingResult:
    """Summed log-prob of every token of the text."""

    logprob: float
    n_tokens: int


@dataclass(frozen=True)
class GenerateResult:
    """Generated text (stop string removed) and its token count."""

    text: str
    n_tokens: int
    n_context_tokens: int = 0


Result = LoglikelihoodResult | RollingResult | GenerateResult


def request_hash(request: Request) -> str:
    """sha256 of a request's exact content: the identity of a prompt across runs."""
    payload = json.dumps(asdict(request), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FailedResult:
    """A request the backend could not answer; the example becomes a record with a status."""

    status: str
    """One of records.Status's values except ok: error, timeout, truncated, refused."""
    message: str


AnyResult = Result | FailedResult
