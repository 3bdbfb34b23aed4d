"""Bench results as Markdown (llama-bench's table, vLLM's latency lines) and JSON Lines."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from regress.bench.run import BenchRun, ModelBench, json_safe
from regress.bench.speed_gate import SpeedGateResult
from regress.bench.summary import Summary


def size_text(n_bytes: int) -> str:
    """llama-bench's model size: MiB below 1 GiB, GiB above."""
    if n_bytes >= 1 << 30:
        return f"{n_bytes / (1 << 30):.2f} GiB"
    return f"{n_bytes / (1 << 20):.2f} MiB"


def params_text(n: int | None) -> str:
    """Parameter count as llama-bench prints it (M below a billion)."""
    if not n:
        return "?"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"


def model_label(result: ModelBench) -> str:
    """`architecture quantization` (llama-bench's model column), or the reference."""
    info = result.model
    parts = [p for p in (info.architecture, info.quantization) if p]
    return " ".join(parts) or info.ref


def _ms(summary: Summary, *stats: str) -> str:
    return " / ".join(f"{getattr(summary, s):.1f}" for s in stats)


def render_markdown(run: BenchRun) -> str:
    """llama-bench's table, then request latency (or server runs) and resources per model."""
    lines = []
    if any(r.micro for r in run.results):
        lines += [
            "| model | size | params | backend | threads | test | t/s |",
            "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
        ]
    for r in run.results:
        for stat in r.micro:
            lines.append(
                f"| {model_label(r)} | {size_text(r.model.size_bytes or 0)} | "
                f"{params_text(r.model.n_params)} | {r.fingerprint.name} | "
                f"{r.fingerprint.hardware.threads} | {stat.test} | "
                f"{stat.mean_ts:.2f} ± {stat.sd_ts:.2f} |"
            )
    with_latency = [r for r in run.results if r.latency is not None]
    if with_latency:
        out = run.options.output_len
        lines += [
            "",
            f"Requests: {len(run.options.prompts)} prompts ({run.options.prompt_source}) x "
            f"{run.options.runs}, {out} output tokens each (EOS ignored), one at a time. "
            "Milliseconds, vLLM's definitions.",
            "",
            "| model | TTFT mean / p50 / p99 | TPOT mean / p50 / p99 | ITL mean / p99 | "
            "E2EL mean / p50 / p95 / p99 | output tok/s |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in with_latency:
            lat = r.latency
            assert lat is not None
            lines.append(
                f"| {r.model.ref} | {_ms(lat.ttft, 'mean', 'p50', 'p99')} | "
                f"{_ms(lat.tpot, 'mean', 'p50', 'p99')} | {_ms(lat.itl, 'mean', 'p99')} | "
                f"{_ms(lat.e2el, 'mean', 'p50', 'p95', 'p99')} | {lat.output_throughput:.2f} |"
            )
    lines += _serving_lines(run)
    lines += _engine_lines(run)
    lines += [
        "",
        "| model | load s | RSS at start | peak RSS | CPU % (of N cores) | GPU | sampler |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in run.results:
        res = r.resources
        gpu = res.gpu_note
        if res.gpu is not None:
            gpu = f"{size_text(res.gpu.peak_memory_bytes)}, {res.gpu.mean_util_percent:.0f}%"
        lines.append(
            f"| {r.model.ref} | {_load(r)} | {size_text(res.start_rss_bytes)} | "
            f"{size_text(res.peak_rss_bytes)} | {res.cpu_percent_mean:.0f} ({res.cpu_count}) | "
            f"{gpu} | every {1000 * res.mean_interval_s:.1f} ms "
            f"(max gap {1000 * res.max_gap_s:.1f}) |"
        )
    systems = sorted({str(r.fingerprint.build.get("system_info", "")) for r in run.results})
    lines += ["", *(f"System info: `{s.strip()}`" for s in systems if s)]
    # Blocks open with a blank line; the first needs none.
    return "\n".join(lines).lstrip("\n").rstrip("\n") + "\n"


def _load(r: ModelBench) -> str:
    return "-" if r.load_s is None else f"{r.load_s:.2f}"


def _serving_lines(run: BenchRun) -> list[str]:
    """vLLM's serving figures, one row per model and concurrency level."""
    served = [(r, level) for r in run.results for level in r.serving]
    if not served:
        return []
    o = run.options
    rate = "all sent at once" if math.isinf(o.request_rate) else f"{o.request_rate:g} req/s"
    # Ollama cannot ignore the end of sequence: its requests stop there or at the limit.
    each = "at most" if o.backend == "ollama" else "each"
    lines = [
        "",
        f"Server: {o.num_requests} requests per level over {len(o.prompts)} prompts, "
        f"{o.output_len} output tokens {each}, {rate}. Milliseconds, vLLM's definitions.",
        "",
        "| model | concurrency | done | failed | req/s | output tok/s | goodput req/s | "
        "TTFT p50 / p99 | TPOT mean / p99 | ITL p99 | E2EL p50 / p99 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, level in served:
        lat = level.latency
        goodput = "-" if level.goodput is None else f"{level.goodput:.2f}"
        lines.append(
            f"| {r.model.ref} | {level.concurrency} | {len(lat.requests)} | {level.failed} | "
            f"{lat.request_throughput:.2f} | {lat.output_throughput:.2f} | {goodput} | "
            f"{_ms(lat.ttft, 'p50', 'p99')} | {_ms(lat.tpot, 'mean', 'p99')} | "
            f"{_ms(lat.itl, 'p99')} | {_ms(lat.e2el, 'p50', 'p99')} |"
        )
    flagged = sum(level.usage_flagged for _, level in served)
    if flagged:
        lines += [
            "",
            f"{flagged} request(s) reported output token counts that disagree with the tokens "
            "they streamed; the streamed counts were used.",
        ]
    return lines


def _engine_lines(run: BenchRun) -> list[str]:
    """Ollama's own timings of the same requests, one row per model and concurrency level."""
    timed = [(r, r.engine) for r in run.results if r.engine is not None]
    if not timed:
        return []
    lines = [
        "",
        "As Ollama timed them (its final object's nanoseconds; tokens/s per request, mean ± "
        "sd over requests: `eval_count / eval_duration * 10^9`, the prompt's likewise):",
        "",
        "| model | Ollama | first load ms | concurrency | requests | prompt tok/s | "
        "eval tok/s | prompt tokens | eval tokens |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, engine in timed:
        for level in engine.levels:
            prompt, evals = level.prompt_ts, level.eval_ts
            lines.append(
                f"| {r.model.ref} | {engine.version} | {engine.first_load_ms:.1f} | "
                f"{level.concurrency} | {len(level.requests)} | "
                f"{prompt.mean:.2f} ± {prompt.sd:.2f} | {evals.mean:.2f} ± {evals.sd:.2f} | "
                f"{sum(t.prompt_eval_count for t in level.requests)} | "
                f"{sum(t.eval_count for t in level.requests)} |"
            )
    return lines


def _base(run: BenchRun, r: ModelBench) -> dict[str, Any]:
    return {
        "schema": run.schema,
        "created": run.created,
        "model": r.model.ref,
        "model_sha256": r.model.sha256,
        "quantization": r.model.quantization,
        "fingerprint": r.fingerprint.to_dict(),
    }


def jsonl_rows(run: BenchRun) -> Iterator[dict[str, Any]]:
    """One row per measurement, each carrying the model's sha256 and runtime fingerprint."""
    for r in run.results:
        base = _base(run, r)
        yield {**base, "measurement": "load", "unit": "s", "value": r.load_s}
        for stat in r.micro:
            yield {
                **base,
                "measurement": stat.test,
                "unit": "tokens/s",
                "mean": stat.mean_ts,
                "sd": stat.sd_ts,
                "samples": list(stat.samples_ts),
                "samples_ns": list(stat.samples_ns),
            }
        if r.latency is not None:
            for name in ("ttft", "tpot", "itl", "e2el"):
                summary: Summary = getattr(r.latency, name)
                yield {**base, "measurement": name, "unit": "ms", **vars(summary)}
            yield {
                **base,
                "measurement": "output_throughput",
                "unit": "tokens/s",
                "value": r.latency.output_throughput,
            }
        for level in r.serving:
            lat = level.latency
            yield {
                **base,
                "measurement": "serving",
                "concurrency": level.concurrency,
                "request_rate": level.request_rate,
                "completed": len(lat.requests),
                "failed": level.failed,
                "request_throughput": lat.request_throughput,
                "output_throughput": lat.output_throughput,
                "goodput": level.goodput,
                **{name: vars(getattr(lat, name)) for name in ("ttft", "tpot", "itl", "e2el")},
            }
        for engine_level in r.engine.levels if r.engine is not None else ():
            for name in ("prompt_ts", "eval_ts"):
                yield {
                    **base,
                    "measurement": f"ollama_{name}",
                    "unit": "tokens/s",
                    "concurrency": engine_level.concurrency,
                    **vars(getattr(engine_level, name)),
                }
        res = r.resources
        yield {**base, "measurement": "peak_rss", "unit": "bytes", "value": res.peak_rss_bytes}
        yield {**base, "measurement": "cpu", "unit": "percent", "value": res.cpu_percent_mean}
        gpu = None if res.gpu is None else vars(res.gpu)
        yield {**base, "measurement": "gpu", "unit": "", "value": gpu, "note": res.gpu_note}


def render_jsonl(run: BenchRun) -> str:
    """`jsonl_rows` as text, one JSON object per line."""
    rows = (json.dumps(json_safe(row), allow_nan=False) for row in jsonl_rows(run))
    return "".join(row + "\n" for row in rows)


def render_json(run: BenchRun) -> str:
    """The whole run, indented, with per-request timings and the resource timeline."""
    return json.dumps(run.to_dict(), indent=1, allow_nan=False) + "\n"


def render_speed_gate(result: SpeedGateResult) -> str:
    """The latency gate's verdict as Markdown: the ratio, its bound, the A/A floor, why."""
    d = result.decision
    icon = {"PASS": "✅", "SLOWER": "❌", "INCONCLUSIVE": "⚠️"}[d.verdict.value]
    n_a = sum(1 for side, _, _ in result.order if side == "A")
    return (
        f"## regress speed: {icon} {d.verdict.value}\n\n"
        f"| | model | sha256 | threads |\n| --- | --- | --- | ---: |\n"
        f"| A (baseline) | {result.baseline.ref} | {result.baseline.sha256[:12]} | "
        f"{result.baseline_fingerprint.hardware.threads} |\n"
        f"| B (candidate) | {result.candidate.ref} | {result.candidate.sha256[:12]} | "
        f"{result.candidate_fingerprint.hardware.threads} |\n\n"
        f"| end-to-end latency | ratio (Hodges-Lehmann) | "
        f"one-sided {1 - d.ratio.alpha:.0%} bounds | pairs |\n| --- | ---: | ---: | ---: |\n"
        f"| B / A | {d.ratio.ratio:.3f} | {d.ratio.low:.3f} – {d.ratio.high:.3f} | "
        f"{d.ratio.n_pairs} |\n"
        f"| A / A (noise floor {d.noise_floor:.1%}) | {d.noise.ratio:.3f} | "
        f"{d.noise.low:.3f} – {d.noise.high:.3f} | {d.noise.n_pairs} |\n\n"
        f"{d.reason}. Timed interleaved A B A B, {n_a // 2} quadruples (prompts x rounds); "
        f"max_slowdown {result.max_slowdown:.0%}.\n"
    )
