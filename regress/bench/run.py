"""`regress bench` as a library: options in, frozen results out, no CLI."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil

from regress import __version__
from regress.backends import load_backend
from regress.backends.models import resolve_model
from regress.bench.latency import LatencyResult, latency_bench
from regress.bench.micro import micro_bench
from regress.bench.ollama import EngineFigures, ollama_fingerprint, run_ollama
from regress.bench.prompts import BUILTIN_PROMPTS
from regress.bench.resources import Resources, ResourceSampler
from regress.bench.serving import ServingLevel, ServingOptions, run_serving
from regress.bench.summary import RateStat
from regress.core.errors import BadInput, RunFailed
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint
from regress.core.manifest import ModelInfo

SCHEMA = "regress-bench/1"
TIMED_BACKENDS = ("llama_cpp", "hf")
"""In-process backends with the timed paths bench needs (prompt and generation tests,
streaming); `openai` servers are measured over HTTP (regress.bench.serving)."""
SERVED = ("openai", "ollama")
"""Servers measured over HTTP: any OpenAI-compatible one, and Ollama's native API
(regress.bench.ollama), whose own timings are kept beside the client's."""


@dataclass(frozen=True)
class BenchOptions:
    """What to measure. Defaults are llama-bench's (pp512, tg128, 5 repetitions)."""

    models: tuple[str, ...]
    backend: str = "llama_cpp"
    model_args: Mapping[str, Any] = field(default_factory=dict)
    n_prompt: tuple[int, ...] = (512,)
    """Prompt-processing tests (ppN); empty for none."""
    n_gen: tuple[int, ...] = (128,)
    """Generation tests (tgN); empty for none."""
    runs: int = 5
    """Timed repetitions of each micro test, and rounds over the prompts."""
    warmup: int = 1
    """Untimed repetitions before each test (llama-bench: 1)."""
    prompts: tuple[str, ...] = BUILTIN_PROMPTS
    prompt_source: str = "builtin"
    output_len: int = 64
    """Tokens generated per request (end of sequence ignored); 0 skips the latency run."""
    sample_interval_s: float = 0.01
    seed: int = 0
    concurrency: tuple[int, ...] = (1,)
    """openai: concurrency levels, each a separate run."""
    request_rate: float = math.inf
    """openai: Poisson arrival rate, requests/s (inf: all at once)."""
    num_requests: int = 32
    """openai: requests per concurrency level."""
    slo_ms: Mapping[str, float] = field(default_factory=dict)
    """openai: goodput SLOs by metric (ttft, tpot, e2el), milliseconds."""
    server_pid: int | None = None
    """openai: the server's process, whose tree the resource sampler watches."""

    def __post_init__(self) -> None:
        if not self.models:
            raise BadInput("bench needs at least one model")
        if self.backend not in (*TIMED_BACKENDS, *SERVED):
            raise BadInput(
                f"regress bench times {', '.join(TIMED_BACKENDS)} in-process and "
                f"{', '.join(SERVED)} servers; {self.backend} has no timed path yet"
            )
        if self.runs < 1 or self.warmup < 0 or self.output_len < 0:
            raise BadInput("bench: --runs must be >= 1, --warmup and --output-len >= 0")
        if not (self.n_prompt or self.n_gen or self.output_len) and self.backend not in SERVED:
            raise BadInput("bench: nothing to measure (-p 0 -n 0 --output-len 0)")
        if any(n < 1 for n in (*self.n_prompt, *self.n_gen)):
            raise BadInput("bench: -p and -n sizes must be >= 1")
        if not 0 < self.sample_interval_s <= 0.01:
            raise BadInput("bench: the sampling interval must be in (0, 10 ms]")


@dataclass(frozen=True)
class ModelBench:
    """Everything measured for one model."""

    model: ModelInfo
    """Registry facts and the model file's sha256 (a server: model_sha256 if given)."""
    fingerprint: RuntimeFingerprint
    load_s: float | None
    """Wall time to load the model (backend construction); None for a server."""
    micro: tuple[RateStat, ...]
    latency: LatencyResult | None
    resources: Resources
    serving: tuple[ServingLevel, ...] = ()
    """openai, ollama: one run per concurrency level."""
    engine: EngineFigures | None = None
    """ollama: the server's own timings of the same requests."""


@dataclass(frozen=True)
class BenchRun:
    """One `regress bench` invocation."""

    created: str
    regress_version: str
    options: BenchOptions
    results: tuple[ModelBench, ...]
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; each rate test also lists its per-repetition tokens/s."""
        data = dataclasses.asdict(self)
        for model, result in zip(data["results"], self.results, strict=True):
            for row, stat in zip(model["micro"], result.micro, strict=True):
                row["samples_ts"] = list(stat.samples_ts)
            latencies = [(model["latency"], result.latency)] if result.latency else []
            latencies += [
                (row["latency"], level.latency)
                for row, level in zip(model["serving"], result.serving, strict=True)
            ]
            for row, latency in latencies:
                for request, timing in zip(row["requests"], latency.requests, strict=True):
                    request["tpot_ms"] = timing.tpot_ms
        data["options"]["model_args"] = dict(self.options.model_args)
        return json_safe(data)


def json_safe(value: Any) -> Any:
    """Strict JSON: infinity as "inf" (vLLM's request rate), NaN (a summary of nothing) as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


Progress = Callable[[str], None]


def bench_model(ref: str, options: BenchOptions, progress: Progress) -> ModelBench:
    """Load one model and run every test on it, sampling resources throughout."""
    model = resolve_model(ref)
    info = model.info
    rng = np.random.default_rng(options.seed)
    with ResourceSampler(options.sample_interval_s) as sampler:
        sampler.mark("load")
        progress(f"{ref}: load")
        start = time.perf_counter()
        backend: Any = load_backend(options.backend, model, dict(options.model_args))
        load_s = time.perf_counter() - start
        try:
            micro = []
            tests = [(n, 0) for n in options.n_prompt] + [(0, n) for n in options.n_gen]
            for n_prompt, n_gen in tests:
                label = f"pp{n_prompt}" if n_prompt else f"tg{n_gen}"
                sampler.mark(label)
                progress(f"{ref}: {label} x{options.runs}")
                micro.append(
                    micro_bench(backend, n_prompt, n_gen, options.runs, options.warmup, rng)
                )
            latency = None
            if options.output_len:
                sampler.mark("requests")
                progress(f"{ref}: {len(options.prompts)} prompts x{options.runs}")
                latency = latency_bench(
                    backend, options.prompts, options.output_len, options.runs, options.warmup
                )
            fingerprint = backend.fingerprint()
        finally:
            backend.close()
    return ModelBench(info, fingerprint, load_s, tuple(micro), latency, sampler.result())


def _timeout(args: dict[str, object]) -> float:
    """`timeout=` of --model-args, as the openai backend reads it: seconds per request."""
    try:
        timeout = float(str(args.get("timeout", 600.0)))
    except ValueError:
        timeout = math.nan
    if not 0 < timeout < math.inf:
        raise BadInput(f"openai: timeout={args.get('timeout')} is not a positive number of seconds")
    return timeout


def bench_server(name: str, options: BenchOptions, progress: Progress) -> ModelBench:
    """A served model: vLLM-style runs per concurrency level, sampling the server's tree;
    an Ollama server through its native API, with its own timings too."""
    args = dict(options.model_args)
    if not args.get("base_url"):
        raise BadInput(f"{options.backend}: --model-args needs base_url=http://HOST:PORT/v1")
    serving = ServingOptions(
        base_url=str(args["base_url"]),
        model=str(args.get("model_name", name)),
        prompts=options.prompts,
        output_len=max(1, options.output_len),
        num_requests=options.num_requests,
        concurrency=options.concurrency,
        request_rate=options.request_rate,
        slo_ms=options.slo_ms,
        timeout_s=_timeout(args),
        seed=options.seed,
    )
    try:
        sampler = ResourceSampler(options.sample_interval_s, options.server_pid)
    except psutil.NoSuchProcess as exc:
        raise BadInput(f"--server-pid {options.server_pid}: no such process") from exc
    engine = None
    with sampler:
        progress(f"{name}: concurrency {', '.join(map(str, options.concurrency))}")
        if options.backend == "ollama":
            levels, engine = run_ollama(serving)
        else:
            levels = run_serving(serving)
    for level in levels:
        if not level.latency.requests:
            # No figure to report: a table of 0.00 t/s and nan would read as a measurement.
            raise RunFailed(
                f"{name}: every request at concurrency {level.concurrency} failed "
                f"({level.failed} of {level.failed}), first: {level.errors[0]}"
            )
    if engine is not None:
        fingerprint = ollama_fingerprint(engine.version, serving)
    else:
        fingerprint = RuntimeFingerprint(
            name="openai",
            version="server",
            params={"base_url": serving.base_url, "model_name": serving.model},
            hardware=HardwarePath(kernels="server"),
        )
    info = ModelInfo(ref=name, sha256=str(args.get("model_sha256", "")))
    return ModelBench(info, fingerprint, None, (), None, sampler.result(), levels, engine)


def run_bench(options: BenchOptions, progress: Progress = lambda _: None) -> BenchRun:
    """Benchmark each model in turn (one model in memory at a time)."""
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    measure = bench_server if options.backend in SERVED else bench_model
    results = tuple(measure(ref, options, progress) for ref in options.models)
    return BenchRun(created, __version__, options, results)
