"""Whether a server's answers depend on which requests it batches them with.

A server that batches concurrent requests can compute one prompt's log-probs differently beside
others: a batch's shape changes how kernels split and sum (lm-eval issues 704, 1645 and 1751;
vLLM's batch-invariant mode exists for it). So before a run that sends requests concurrently,
a few probe prompts of different lengths go to the server alone, one at a time, and again all
at once in a full batch (filled up to the run's concurrency); a probe whose log-probs differ
marks the server batch-dependent, and the run records its concurrency as part of its compute
path (docs/backends.md, "vLLM").
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PROBES = (
    "The capital of France is",
    "Question: Which gas do plants take in from the air to make their food?\nAnswer:",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Once upon a time, in a small village at the edge of a great forest, there lived an old "
    "woodcutter and his three daughters. Every morning the eldest",
)
"""Probe prompts of several lengths: a batch of unequal rows is where layouts differ."""
FILLER = "A list of the colours of the rainbow, in order:"
MAX_TOKENS = 3
"""Tokens generated per probe: their log-probs are what is compared."""

Send = Callable[[dict[str, Any]], object]
"""Posts one completions body; returns the parsed reply (or anything else on failure)."""


def batch_dependent(send: Send, model: str, concurrency: int) -> bool | None:
    """True when a probe's log-probs differ alone and inside a batch of `concurrency`
    requests; False when every probe's are identical; None when the server gave none to
    compare (a failed request, or a reply without log-probs)."""
    probes = PROBES[: max(2, min(len(PROBES), concurrency))]
    alone = [_logprobs(send(_body(model, prompt))) for prompt in probes]
    batch = [_body(model, p) for p in probes]
    batch += [_body(model, FILLER)] * max(0, concurrency - len(probes))
    with ThreadPoolExecutor(len(batch)) as pool:
        together = [_logprobs(reply) for reply in pool.map(send, batch)][: len(probes)]
    if any(answer is None for answer in alone + together):
        return None
    return alone != together


def _body(model: str, prompt: str) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "logprobs": 1,
    }


def _logprobs(reply: object) -> tuple[Any, ...] | None:
    """The generated tokens and their log-probs, exactly as the server sent them."""
    try:
        logprobs = reply["choices"][0]["logprobs"]  # type: ignore[index]
        tokens, values = logprobs["tokens"], logprobs["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    if not values or any(v is None for v in values):
        return None
    return (tuple(tokens), tuple(values))
