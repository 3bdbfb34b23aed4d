"""How long a gate takes here: a timed sample of a baseline's examples, scaled by tokens.

A gate's cost on a CPU is the tokens it evaluates. `measure_throughput` runs a seeded sample of
a baseline's examples on a model (no result cache), times them from the first request to the
last (rendering and the model load are timed apart), and divides the tokens those examples
hold in the baseline's records by that time. `Throughput.seconds` then prices any number of
examples of any unit at that unit's own mean tokens per example, so a 5-shot unit costs more
than a 0-shot one. The figure holds for the machine, threads and contention it was measured
under: `regress plan --time` and `regress selftest --time` print it beside the CPU flags.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from regress.checks.plan import UnitPlan
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.gate.pairing import units_of
from regress.run.engine import TaskSpec
from regress.run.runner import execute, plan_rerun
from regress.tasks.base import DataSource
from regress.tasks.catalog import BUILTIN, TaskCatalog

SAMPLE = 40
"""Examples timed by default: a few seconds on 2 cores, and enough that one long prompt does
not set the rate."""


@dataclass(frozen=True)
class TimingOptions:
    """What to time a baseline's examples on."""

    model: str
    backend: str | None = None
    """Default: the baseline's backend."""
    model_args: Mapping[str, Any] = field(default_factory=dict)
    examples: int = SAMPLE
    seed: int = 0
    source: DataSource = field(default_factory=DataSource)
    tasks: TaskCatalog = BUILTIN


@dataclass(frozen=True)
class Throughput:
    """Tokens per second measured on a sample of a baseline, and each unit's tokens per example."""

    model: str
    backend: str
    kernels: str
    """The backend's CPU build features (llama.cpp system info), as its fingerprint names them."""
    examples: int
    tokens: int
    """Prompt and completion tokens of the timed examples, as the baseline's records count them."""
    seconds: float
    """Wall time from the first request to the last."""
    load_seconds: float
    """Model load and prompt rendering before the first request: paid once per run."""
    tokens_per_example: Mapping[str, float]
    """Gated unit -> its mean tokens per example in the baseline."""

    @property
    def tokens_per_second(self) -> float:
        """The measured rate."""
        return self.tokens / self.seconds

    def describe(self) -> str:
        """What the rate is and where it was measured, for a line under a plan."""
        return (
            f"{self.tokens_per_second:,.0f} tokens/s, measured on {self.examples} examples of "
            f"{self.model} ({self.backend}, {self.kernels}; model load {self.load_seconds:.1f} s, "
            "not included)"
        )

    def unit_seconds(self, unit: str, examples: float) -> float:
        """Wall time of `examples` of `unit` at the measured rate (the load excluded)."""
        return examples * self.tokens_per_example[unit] / self.tokens_per_second


def unit_tokens(baseline: Run) -> dict[str, float]:
    """Each unit's mean prompt + completion tokens per example, from the baseline's records."""
    manifest = baseline.manifest
    found = {}
    for unit, tasks in units_of([manifest.tasks[t] for t in sorted(manifest.tasks)]).items():
        records = [r for t in tasks for r in baseline.records[t.name]]
        total = sum(r.tokens.get("prompt", 0) + r.tokens.get("completion", 0) for r in records)
        found[unit] = total / len(records) if records else 0.0
    return found


def measure_throughput(baseline: Run, options: TimingOptions) -> Throughput:
    """Time a seeded sample of `baseline`'s examples on `options.model`, without the cache."""
    examples = [(t, r.doc_id) for t, records in baseline.records.items() for r in records]
    if not examples:
        raise BadInput(f"baseline {baseline.manifest.name!r} holds no examples to time")
    chosen = set(random.Random(options.seed).sample(examples, min(options.examples, len(examples))))
    backend = options.backend or baseline.manifest.backend.name
    plan = plan_rerun(
        baseline,
        options.model,
        backend,
        tasks=options.tasks,
        model_args=options.model_args,
        source=options.source,
        name="timing",
    )
    specs = []
    for spec in plan.specs:
        ids = tuple(i for i in spec.doc_ids or () if (spec.task.name, i) in chosen)
        if ids:
            specs.append(TaskSpec(spec.task, spec.num_fewshot, spec.limit, ids))
    first: list[float] = []

    def tick(_done: int, _total: int, _examples: int) -> None:
        # The engine's first call comes once the model is loaded and the prompts rendered.
        if not first:
            first.append(time.perf_counter())

    start = time.perf_counter()
    outcome = execute(replace(plan, specs=tuple(specs), cache_dir=None), tick)
    end = time.perf_counter()
    begun = first[0] if first else start
    ran = [r for records in outcome.run.records.values() for r in records]
    by_key = {(r.task, r.doc_id): r for records in baseline.records.values() for r in records}
    tokens = sum(
        by_key[r.task, r.doc_id].tokens.get("prompt", 0)
        + by_key[r.task, r.doc_id].tokens.get("completion", 0)
        for r in ran
    )
    if tokens == 0 or end <= begun:
        raise BadInput(
            f"baseline {baseline.manifest.name!r} records no token counts: its throughput "
            "cannot be scaled (rebuild it with this version of regress)"
        )
    return Throughput(
        model=options.model,
        backend=backend,
        kernels=outcome.run.manifest.backend.hardware.kernels,
        examples=len(ran),
        tokens=tokens,
        seconds=end - begun,
        load_seconds=begun - start,
        tokens_per_example=unit_tokens(baseline),
    )


@dataclass(frozen=True)
class GateTime:
    """A gate's wall time at a measured throughput: every example, and the sequential design's
    expectation if the candidate is unchanged, drops the threshold, and drops twice it."""

    fixed: float
    sequential: tuple[float, float, float] | None
    load: float


def gate_time(plans: Sequence[UnitPlan], throughput: Throughput) -> GateTime:
    """Seconds of the fixed gate and of the expected sequential one over `plans`' units; a
    unit without a sequential expectation (not accuracy) is counted whole in both."""
    fixed = sum(throughput.unit_seconds(p.name, p.n) for p in plans)
    expected = None
    if any(p.expected_n is not None for p in plans):
        unchanged, at_threshold, at_twice = (
            sum(
                throughput.unit_seconds(p.name, p.n if p.expected_n is None else p.expected_n[i])
                for p in plans
            )
            for i in range(3)
        )
        expected = (unchanged, at_threshold, at_twice)
    return GateTime(fixed, expected, throughput.load_seconds)
