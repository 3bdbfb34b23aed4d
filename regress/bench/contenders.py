"""Measure the models `regress compare` chooses between: accuracy from a stored run of the same
file or from an evaluation now, speed and memory from a bench of the same file or one now."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from regress.backends.models import model_info
from regress.bench.choose import Contender
from regress.bench.run import BenchOptions, ModelBench, bench_model
from regress.bench.summaries import AccuracyRun, BenchModel, accuracy_run
from regress.core.manifest import Run
from regress.run.runner import RunPlan, execute


@dataclass(frozen=True)
class ContenderOptions:
    """How to fill in what stored runs and bench files do not already hold."""

    bench: BenchOptions
    """Settings of a bench run now (its `models` are ignored)."""
    eval_plan: RunPlan | None
    """An evaluation to run for a model without a stored run (`model` is replaced); None:
    accuracy stays unknown for it."""


def _from_bench(result: ModelBench) -> tuple[float, float, float, int]:
    rates = {s.test: s.mean_ts for s in result.micro}
    tg = max((v for k, v in rates.items() if k.startswith("tg")), default=float("nan"))
    pp = max((v for k, v in rates.items() if k.startswith("pp")), default=float("nan"))
    ttft = result.latency.ttft.p50 if result.latency else float("nan")
    return tg, pp, ttft, result.resources.peak_rss_bytes


def _from_file(model: BenchModel) -> tuple[float, float, float, int]:
    return model.rate("tg"), model.rate("pp"), model.ttft_p50, model.peak_rss_bytes


def measure_contenders(
    models: Sequence[str],
    runs: Sequence[Run],
    benches: Sequence[BenchModel],
    options: ContenderOptions,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Contender]:
    """One Contender per model, measuring only what is not given."""
    stored = {r.manifest.model.sha256: accuracy_run(r) for r in runs}
    benched = {b.sha256: b for b in benches}
    contenders = []
    for ref in models:
        info = model_info(ref)
        acc: AccuracyRun | None = stored.get(info.sha256)
        if acc is None and options.eval_plan is not None:
            progress(f"{ref}: evaluating accuracy")
            outcome = execute(replace(options.eval_plan, model=ref, name=f"compare-{ref}"))
            acc = accuracy_run(outcome.run)
        if info.sha256 in benched:
            figures = _from_file(benched[info.sha256])
        else:
            figures = _from_bench(bench_model(ref, options.bench, progress))
        tg, pp, ttft, rss = figures
        contenders.append(
            Contender(
                model=ref,
                sha256=info.sha256,
                quantization=info.quantization,
                accuracy=acc.accuracy if acc else None,
                accuracy_low=acc.low if acc else None,
                accuracy_high=acc.high if acc else None,
                accuracy_from=acc.name if acc else "",
                tg_tps=tg,
                pp_tps=pp,
                ttft_p50_ms=ttft,
                peak_rss_bytes=rss,
            )
        )
    return contenders
