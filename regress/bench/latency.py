"""Request-level latency, with vLLM benchmark_serving's definitions.

For each request, timed from the moment it is submitted (tokenising included): TTFT is the
time to the first output token, E2EL the time to the last, ITL each gap between consecutive
tokens, and TPOT = (E2EL - TTFT) / (output tokens - 1). Output length is fixed (end of
sequence is ignored), so two models or two runs make the same number of tokens per request.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from regress.bench.summary import Summary


class StreamingBackend(Protocol):
    """A backend that streams a fixed number of greedy tokens per prompt."""

    def count_tokens(self, text: str) -> int: ...

    def stream(self, prompt: str, max_tokens: int) -> Iterator[int]: ...


@dataclass(frozen=True)
class RequestTiming:
    """One request's timings, milliseconds."""

    prompt_index: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float
    e2el_ms: float
    itl_ms: tuple[float, ...]

    @property
    def tpot_ms(self) -> float:
        """Time per output token after the first (NaN for a one-token output)."""
        if self.output_tokens < 2:
            return math.nan
        return (self.e2el_ms - self.ttft_ms) / (self.output_tokens - 1)


@dataclass(frozen=True)
class LatencyResult:
    """All requests of a latency run and vLLM's summaries of them."""

    requests: tuple[RequestTiming, ...]
    duration_s: float
    ttft: Summary
    tpot: Summary
    itl: Summary
    e2el: Summary
    request_throughput: float
    """Requests per second over the run."""
    output_throughput: float
    """Output tokens per second over the run."""
    total_token_throughput: float
    """Prompt and output tokens per second over the run."""


def time_request(backend: StreamingBackend, index: int, prompt: str, n: int) -> RequestTiming:
    """Send one prompt and time its tokens as they arrive."""
    start = time.perf_counter()
    stamps = [time.perf_counter() for _ in backend.stream(prompt, n)]
    ms = [1000.0 * (t - start) for t in stamps]
    return RequestTiming(
        prompt_index=index,
        prompt_tokens=backend.count_tokens(prompt),
        output_tokens=len(ms),
        ttft_ms=ms[0],
        e2el_ms=ms[-1],
        itl_ms=tuple(b - a for a, b in zip(ms, ms[1:], strict=False)),
    )


def summarise(requests: Sequence[RequestTiming], duration_s: float) -> LatencyResult:
    """vLLM's summaries over `requests` that took `duration_s` in all."""
    output = sum(r.output_tokens for r in requests)
    total = output + sum(r.prompt_tokens for r in requests)
    return LatencyResult(
        requests=tuple(requests),
        duration_s=duration_s,
        ttft=Summary.of([r.ttft_ms for r in requests]),
        tpot=Summary.of([r.tpot_ms for r in requests if r.output_tokens > 1]),
        itl=Summary.of([gap for r in requests for gap in r.itl_ms]),
        e2el=Summary.of([r.e2el_ms for r in requests]),
        request_throughput=len(requests) / duration_s,
        output_throughput=output / duration_s,
        total_token_throughput=total / duration_s,
    )


def latency_bench(
    backend: StreamingBackend, prompts: Sequence[str], output_len: int, runs: int, warmup: int
) -> LatencyResult:
    """Each prompt `runs` times, in rounds over the prompt list, after `warmup` untimed
    requests; one request at a time."""
    for i in range(warmup):
        for _ in backend.stream(prompts[i % len(prompts)], output_len):
            pass
    start = time.perf_counter()
    requests = [
        time_request(backend, i, prompt, output_len)
        for _ in range(runs)
        for i, prompt in enumerate(prompts)
    ]
    return summarise(requests, time.perf_counter() - start)
