"""Typed requests a task sends to a backend, and the typed results that come back.

The vocabulary is lm-evaluation-harness's: `loglikelihood`, `loglikelihood_rolling`,
`generate_until`. Nothing here knows about tasks or backends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

RequestKind = Literal["loglikelihood", "loglikelihood_rolling", "generate_until"]

Message = tuple[str, str]
"""(role, content) of one chat message; role is system, user or assistant."""


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
    """Generate from `context` until a stop string, end of sequence or `max_tokens`.

    Greedy at temperature 0; otherwise sampled with top-k (0: off), top-p (1: off) and min-p
    (0: off) applied before the temperature, from a random stream seeded by `seed`: the same
    request gives the same text on the same machine, whatever ran before it.

    With `messages` (a conversation) the prompt is those messages in the model's chat
    template, rendered by the backend, and `context` is empty.
    """

    context: str
    until: tuple[str, ...] = ()
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 1234
    top_k: int = 0
    min_p: float = 0.0
    messages: tuple[Message, ...] = ()
    kind: RequestKind = field(default="generate_until", init=False)

    @property
    def greedy(self) -> bool:
        """Whether the request is decoded greedily (then the seed plays no part)."""
        return self.temperature <= 0.0


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


Finish = Literal["stop", "eos", "length", "unknown"]
"""Why a generation ended: a stop string, the model's end of sequence, `max_tokens`, or a
server that does not say which of the first two."""


@dataclass(frozen=True)
class GenerateResult:
    """Generated text (stop string removed), its token count and why it ended."""

    text: str
    n_tokens: int
    n_context_tokens: int = 0
    finish: Finish = "unknown"
    truncated: bool = False
    """The prompt was cut on the left to leave room for `max_tokens` (lm-eval does the same)."""


Result = LoglikelihoodResult | RollingResult | GenerateResult


def cut_at_stop(text: str, until: Sequence[str]) -> tuple[str, bool]:
    """`text` before the first occurrence of any stop string, and whether one occurred."""
    cut = min((i for stop in until if stop and (i := text.find(stop)) >= 0), default=None)
    return (text, False) if cut is None else (text[:cut], True)


_LATER_FIELDS: dict[str, object] = {"top_k": 0, "min_p": 0.0, "messages": ()}
"""Fields added after prompt hashes were first stored: left out of the hash at their default,
so existing baselines keep their prompt hashes."""


def request_hash(request: Request) -> str:
    """sha256 of a request's exact content: the identity of a prompt across runs."""
    content = asdict(request)
    for name, default in _LATER_FIELDS.items():
        if content.get(name, default) == default:
            content.pop(name, None)
    payload = json.dumps(content, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FailedResult:
    """A request the backend could not answer; the example becomes a record with a status."""

    status: str
    """One of records.Status's values except ok: error, timeout, truncated, refused."""
    message: str


AnyResult = Result | FailedResult
