"""Benchmark an OpenAI-compatible server the way vLLM's benchmark_serving does.

Requests go to /completions with `stream: true`; each streamed chunk is one token (TTFT is the
first chunk, ITL the gaps between chunks). Output length is fixed where the server allows:
`ignore_eos` (vLLM, llama.cpp's llama-server) and `min_tokens` (llama-cpp-python's server)
are both sent. Arrivals follow a Poisson process at `request_rate` (inf: all at once, as in
vLLM), at most `concurrency` requests in flight; each concurrency level is a separate run.
Goodput is the rate of requests that meet every SLO (vLLM's --goodput).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from regress.bench.latency import LatencyResult, RequestTiming, summarise
from regress.core.errors import BadInput

_SLO_KEYS = ("ttft", "tpot", "e2el")


def parse_slo(text: str) -> dict[str, float]:
    """`ttft=500ms,tpot=50ms,e2el=2s` as milliseconds by metric."""
    slo = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"(\w+)=([0-9.]+)(ms|s)?", part)
        if not match or match.group(1) not in _SLO_KEYS:
            raise BadInput(f"--slo: expected ttft=500ms,tpot=50ms,e2el=2s, got {part!r}")
        scale = 1000.0 if match.group(3) == "s" else 1.0
        slo[match.group(1)] = float(match.group(2)) * scale
    return slo


@dataclass(frozen=True)
class ServingOptions:
    """One server, one served model, the load to put on it."""

    base_url: str
    """The API root, e.g. http://127.0.0.1:8000/v1."""
    model: str
    prompts: tuple[str, ...]
    output_len: int = 64
    num_requests: int = 32
    concurrency: tuple[int, ...] = (1,)
    request_rate: float = math.inf
    slo_ms: Mapping[str, float] = field(default_factory=dict)
    timeout_s: float = 600.0
    """Seconds each request may take in all, from connecting to its last token."""
    seed: int = 0


@dataclass(frozen=True)
class ServingLevel:
    """One concurrency level's run."""

    concurrency: int
    request_rate: float
    failed: int
    """Requests that ended in an error (not in the latency figures)."""
    errors: tuple[str, ...]
    """The first few error messages."""
    latency: LatencyResult
    goodput: float | None
    """Requests per second meeting every SLO; None without --slo."""
    usage_flagged: int = 0
    """Requests whose reported completion_tokens disagreed with the tokens they streamed: their
    streamed count was used instead (a server's own figures are not taken on trust)."""


MAX_STREAM_BYTES = 8 * 2**20
"""The most one request's stream may send: a token's event is a few hundred bytes, so
thousands of tokens fit; a server sending more is refused rather than held in memory."""
TOKENS_PER_CHUNK = 4
"""The most tokens a streamed chunk is believed to carry: servers send one per chunk, and a
few merge a handful. A reported count beyond that (or below the chunks, less the closing one)
is flagged and replaced by the streamed count."""


def output_tokens(usage: Mapping[str, object], chunks: int) -> tuple[int, bool]:
    """(output tokens, flagged) of a request that streamed `chunks` token chunks, from the
    server's `usage`; RuntimeError (a failed request) for a count that is no whole number >= 0."""
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise RuntimeError(f"the server reported {key} {value!r:.40}")
    reported = usage.get("completion_tokens")
    if not isinstance(reported, int) or reported == 0:
        return chunks, False
    if chunks - 1 <= reported <= TOKENS_PER_CHUNK * chunks:
        return reported, False
    return chunks, True


def meets(request: RequestTiming, slo_ms: Mapping[str, float]) -> bool:
    """Whether one request meets every SLO (vLLM's goodput rule)."""
    values = {"ttft": request.ttft_ms, "tpot": request.tpot_ms, "e2el": request.e2el_ms}
    return all(not values[k] > limit for k, limit in slo_ms.items())


async def _one(
    client, options: ServingOptions, index: int, prompt: str
) -> tuple[RequestTiming, bool]:
    payload = {
        "model": options.model,
        "prompt": prompt,
        "max_tokens": options.output_len,
        "min_tokens": options.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    stamps: list[float] = []
    usage: dict[str, object] = {}
    async with client.stream("POST", "/completions", json=payload) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")[:200]
            raise RuntimeError(f"HTTP {response.status_code}: {body}")
        async for line in stream_lines(response):
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if not isinstance(chunk, dict):
                raise RuntimeError(f"the server streamed {line[:40]!r}, not a JSON object")
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
            choice = (chunk.get("choices") or [{}])[0]
            # A token's chunk (its text may be empty: half of a UTF-8 character), not the
            # closing chunk some servers send with only a finish_reason.
            if choice and (choice.get("text") or not choice.get("finish_reason")):
                stamps.append(time.perf_counter())
    if not stamps:
        raise RuntimeError("the server streamed no token")
    ms = [1000.0 * (t - start) for t in stamps]
    gaps = tuple(b - a for a, b in zip(ms, ms[1:], strict=False))
    n_out, flagged = output_tokens(usage, len(ms))
    reported = usage.get("prompt_tokens") or 0
    prompt_tokens = int(reported) if isinstance(reported, int | float | str) else 0
    return RequestTiming(index, prompt_tokens, n_out, ms[0], ms[-1], gaps), flagged


async def stream_lines(response) -> AsyncIterator[str]:
    """The streamed body's lines, failing the request (RuntimeError) once it passes
    MAX_STREAM_BYTES: httpx's own line reader holds a line however long it grows."""
    received, pending = 0, b""
    async for block in response.aiter_bytes():
        received += len(block)
        if received > MAX_STREAM_BYTES:
            raise RuntimeError(f"the server streamed more than {MAX_STREAM_BYTES:,} bytes")
        *lines, pending = (pending + block).split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace").rstrip("\r")
    if pending:
        yield pending.decode("utf-8", errors="replace")


Send = Callable[[Any, ServingOptions, int, str], Awaitable[tuple[RequestTiming, bool]]]
"""One timed request: (client, options, index, prompt) -> its timing, and whether its
reported token count was flagged (an Ollama server's native API has its own)."""


async def serve_level(
    options: ServingOptions, concurrency: int, one: Send | None = None
) -> ServingLevel:
    """One concurrency level: `options.num_requests` requests, `one` sending each."""
    import httpx

    one = one or _one

    rng = np.random.default_rng(options.seed)
    gate = asyncio.Semaphore(concurrency)
    timeout = httpx.Timeout(options.timeout_s)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=options.base_url, timeout=timeout, limits=limits) as c:

        async def send(i: int) -> tuple[RequestTiming, bool] | str:
            async with gate:
                try:
                    # httpx bounds each read; a stream that never ends needs a clock of its own.
                    async with asyncio.timeout(options.timeout_s):
                        prompt = options.prompts[i % len(options.prompts)]
                        return await one(c, options, i, prompt)
                except TimeoutError:
                    return f"timeout: no complete answer within {options.timeout_s:g} s"
                except (httpx.HTTPError, RuntimeError, json.JSONDecodeError) as exc:
                    return f"{type(exc).__name__}: {exc}"

        tasks = []
        start = time.perf_counter()
        for i in range(options.num_requests):
            tasks.append(asyncio.create_task(send(i)))
            if math.isfinite(options.request_rate):
                await asyncio.sleep(rng.exponential(1.0 / options.request_rate))
        done = await asyncio.gather(*tasks)
        duration = time.perf_counter() - start
    ok = [r for r, _ in (d for d in done if not isinstance(d, str))]
    flagged = sum(f for _, f in (d for d in done if not isinstance(d, str)))
    errors = [r for r in done if isinstance(r, str)]
    good = sum(meets(r, options.slo_ms) for r in ok)
    return ServingLevel(
        concurrency=concurrency,
        request_rate=options.request_rate,
        failed=len(errors),
        errors=tuple(errors[:3]),
        latency=summarise(ok, duration),
        goodput=good / duration if options.slo_ms else None,
        usage_flagged=flagged,
    )


def run_serving(options: ServingOptions) -> tuple[ServingLevel, ...]:
    """Each concurrency level in turn, after one untimed warm-up request."""
    asyncio.run(serve_level(replace(options, num_requests=1), 1))
    return tuple(asyncio.run(serve_level(options, n)) for n in options.concurrency)
