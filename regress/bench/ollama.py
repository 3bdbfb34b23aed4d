"""Benchmark an Ollama server through its native API, with the timings Ollama itself reports.

Each request is a streamed `POST /api/generate` with `raw: true` (the prompt as given, no chat
template) and `options: {num_predict, temperature: 0, seed}`. Every streamed object before the
last is a token (TTFT, ITL and E2EL are timed here as for any server); the last, with
`done: true`, carries the last token's text or none, and Ollama's own figures in
nanoseconds: `load_duration`, `prompt_eval_count` and `prompt_eval_duration`, `eval_count`
and `eval_duration`, `total_duration` (docs/api.md of ollama/ollama, "Generate a
completion"). Ollama's rate is `eval_count / eval_duration * 10^9`, which leaves out the model
load and the prompt.

Ollama has no `ignore_eos`: a request may stop before `num_predict` at the end of sequence, so
output lengths can differ between models, and the figures to compare are rates per token.
A streamed `{"error": ...}` object, a final object without the six figures or with one that is
not a whole number >= 0 fails that request.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import numpy as np

from regress.bench.latency import RequestTiming
from regress.bench.serving import (
    ServingLevel,
    ServingOptions,
    output_tokens,
    serve_level,
    stream_lines,
)
from regress.core.errors import BadInput, RunFailed
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint

FIGURES = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)
"""What Ollama's final streamed object reports, durations in nanoseconds."""


@dataclass(frozen=True)
class EngineTiming:
    """One request's figures as Ollama reported them (nanoseconds and token counts)."""

    total_duration: int
    load_duration: int
    prompt_eval_count: int
    prompt_eval_duration: int
    eval_count: int
    eval_duration: int

    @property
    def prompt_ts(self) -> float:
        """Prompt tokens per second as Ollama timed them (NaN when it timed none)."""
        return _rate(self.prompt_eval_count, self.prompt_eval_duration)

    @property
    def eval_ts(self) -> float:
        """Generated tokens per second, Ollama's `eval_count / eval_duration * 10^9`."""
        return _rate(self.eval_count, self.eval_duration)


def _rate(count: int, ns: int) -> float:
    return count * 1e9 / ns if ns else float("nan")


def engine_timing(final: Mapping[str, object]) -> EngineTiming:
    """The figures of Ollama's final object; RuntimeError (a failed request) when one is
    missing or not a whole number >= 0."""
    values = {}
    for key in FIGURES:
        value = final.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RuntimeError(f"ollama reported {key} {value!r:.40}")
        values[key] = value
    return EngineTiming(**values)


@dataclass(frozen=True)
class RateSummary:
    """Per-request rates summarised as llama-bench does: mean and sample sd (n-1)."""

    n: int
    mean: float
    sd: float

    @classmethod
    def of(cls, rates: list[float]) -> RateSummary:
        """Over the requests that had a timed part (NaN rates left out)."""
        values = np.array([r for r in rates if not math.isnan(r)], dtype=float)
        if not len(values):
            return cls(0, float("nan"), float("nan"))
        sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        return cls(len(values), float(values.mean()), sd)


@dataclass(frozen=True)
class EngineLevel:
    """One concurrency level's figures as Ollama reported them."""

    concurrency: int
    requests: tuple[EngineTiming, ...]
    prompt_ts: RateSummary
    eval_ts: RateSummary


@dataclass(frozen=True)
class EngineFigures:
    """What an Ollama server reported over a bench: the first request's model load (a cold
    load when the model was not in memory yet), and each level's rates."""

    version: str
    first_load_ms: float
    levels: tuple[EngineLevel, ...]


def api_root(base_url: str) -> str:
    """Ollama's API root: the OpenAI-compatible `/v1` (what generation uses) dropped."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def _generate(
    client: Any, options: ServingOptions, index: int, prompt: str
) -> tuple[RequestTiming, bool, EngineTiming]:
    payload = {
        "model": options.model,
        "prompt": prompt,
        "raw": True,
        "stream": True,
        "options": {"num_predict": options.output_len, "temperature": 0, "seed": options.seed},
    }
    start = time.perf_counter()
    stamps: list[float] = []
    final: dict[str, Any] | None = None
    async with client.stream("POST", "/api/generate", json=payload) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")[:200]
            raise RuntimeError(f"HTTP {response.status_code}: {body}")
        async for line in stream_lines(response):
            if not line.strip():
                continue
            chunk = json.loads(line)
            if not isinstance(chunk, dict):
                raise RuntimeError(f"ollama streamed {line[:40]!r}, not a JSON object")
            if "error" in chunk:
                raise RuntimeError(f"ollama: {str(chunk['error'])[:200]}")
            # A token's object; the final one may carry the last token's text too
            # (docs/api/streaming.mdx) or none (docs/api.md).
            if chunk.get("response") or chunk.get("done") is not True:
                stamps.append(time.perf_counter())
            if chunk.get("done") is True:
                final = chunk
                break
    if final is None:
        raise RuntimeError("ollama's stream ended without its final object (done: true)")
    engine = engine_timing(final)
    if not stamps:
        raise RuntimeError("ollama streamed no token")
    ms = [1000.0 * (t - start) for t in stamps]
    gaps = tuple(b - a for a, b in zip(ms, ms[1:], strict=False))
    usage = {"prompt_tokens": engine.prompt_eval_count, "completion_tokens": engine.eval_count}
    n_out, flagged = output_tokens(usage, len(ms))
    return (
        RequestTiming(index, engine.prompt_eval_count, n_out, ms[0], ms[-1], gaps),
        flagged,
        engine,
    )


def _version(root: str, timeout: float) -> str:
    """`GET /api/version`; BadInput when no Ollama answers there."""
    try:
        answer = httpx.get(f"{root}/api/version", timeout=timeout)
        version = answer.json().get("version") if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise BadInput(f"ollama: no server answers {root}/api/version ({exc})") from exc
    if not isinstance(version, str):
        raise BadInput(f"ollama: {root}/api/version did not name a version: is this Ollama?")
    return version


def run_ollama(options: ServingOptions) -> tuple[tuple[ServingLevel, ...], EngineFigures]:
    """A warm-up request (its load is Ollama's first `load_duration`), then each concurrency
    level; the client's latencies and Ollama's own figures of every request."""
    root = api_root(options.base_url)
    options = replace(options, base_url=root)
    version = _version(root, options.timeout_s)
    found: list[EngineTiming] = []

    async def one(
        client: Any, opts: ServingOptions, index: int, prompt: str
    ) -> tuple[RequestTiming, bool]:
        timing, flagged, engine = await _generate(client, opts, index, prompt)
        found.append(engine)
        return timing, flagged

    warm = asyncio.run(serve_level(replace(options, num_requests=1), 1, one))
    if not found:
        raise RunFailed(f"ollama at {root}: the first request failed: {warm.errors[0]}")
    first_load_ms = found[0].load_duration / 1e6
    levels, engine_levels = [], []
    for concurrency in options.concurrency:
        found.clear()
        level = asyncio.run(serve_level(options, concurrency, one))
        levels.append(level)
        engine_levels.append(
            EngineLevel(
                concurrency,
                tuple(found),
                RateSummary.of([t.prompt_ts for t in found]),
                RateSummary.of([t.eval_ts for t in found]),
            )
        )
    return tuple(levels), EngineFigures(version, first_load_ms, tuple(engine_levels))


def ollama_fingerprint(version: str, options: ServingOptions) -> RuntimeFingerprint:
    """What computed the figures: Ollama's version, where it ran and the model name."""
    return RuntimeFingerprint(
        name="ollama",
        version=version,
        params={"base_url": api_root(options.base_url), "model_name": options.model},
        hardware=HardwarePath(kernels="server"),
    )
