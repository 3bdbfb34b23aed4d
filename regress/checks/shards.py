"""How many CI jobs a gate needs: a baseline's examples cut into `--shard i/n` blocks that each
fit a job's time budget, as the matrix a GitHub workflow reads (`regress plan --shards`).

Each job pays a fixed cost (installing regress, loading the model) before its first example,
then runs its block. A block's time is the sum of its examples' costs at a rate: a measured
`Throughput` prices each example by the tokens it holds in the baseline's records (a 5-shot
example costs more than a 0-shot one); a given examples/s prices them alike. The blocks are
the engine's own (`Shard.bounds` over the baseline's examples in the order a rerun sends them),
so the plan's block sizes are the ones the jobs will run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from regress.checks.timing import Throughput
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.run.engine import Shard

MAX_JOBS = 256
"""GitHub Actions runs at most 256 jobs from one matrix."""


@dataclass(frozen=True)
class ShardOptions:
    """A CI job's time budget and what it spends before its first example."""

    job_seconds: float
    setup_seconds: float = 0.0
    """Per job, before regress runs: checkout, Python, installing regress and the model."""
    max_jobs: int = MAX_JOBS


@dataclass(frozen=True)
class ShardPlan:
    """The fewest shards whose every job fits the budget, and what each is expected to take."""

    count: int
    examples: tuple[int, ...]
    """Examples per shard, shard 0 first."""
    seconds: tuple[float, ...]
    """Expected seconds of each shard's examples at the rate, the fixed costs excluded."""
    overhead_seconds: float
    """Per job: the setup the caller stated plus the model load (measured, else 0)."""
    job_seconds: float
    rate: str
    """Where the rate comes from, for a line beside the matrix."""

    def matrix(self) -> dict[str, list[dict[str, int]]]:
        """The `strategy.matrix` a workflow reads with `fromJSON`: one entry per shard."""
        return {"include": [{"shard": i, "of": self.count} for i in range(self.count)]}

    def describe(self) -> str:
        """One line: the shards, the longest job and the budget."""
        longest = max(self.seconds) + self.overhead_seconds
        return (
            f"{self.count} shard(s) of {min(self.examples)}-{max(self.examples)} examples; "
            f"longest job {longest / 60:.1f} min of {self.job_seconds / 60:.1f} "
            f"(fixed {self.overhead_seconds / 60:.1f} min per job) at {self.rate}"
        )


def example_seconds(baseline: Run, rate: Throughput | float) -> list[float]:
    """Each of the baseline's examples' expected seconds, in the order a rerun sends them
    (tasks by name, each task's records in order: regress.run.runner.baseline_specs)."""
    records = [r for task in sorted(baseline.manifest.tasks) for r in baseline.records[task]]
    if isinstance(rate, Throughput):
        per_token = 1 / rate.tokens_per_second
        return [
            (r.tokens.get("prompt", 0) + r.tokens.get("completion", 0)) * per_token for r in records
        ]
    return [1 / rate] * len(records)


def plan_shards(baseline: Run, rate: Throughput | float, options: ShardOptions) -> ShardPlan:
    """The fewest shards (at most `options.max_jobs`) whose jobs each fit `options.job_seconds`,
    at a measured throughput or a given rate in examples per second."""
    if not isinstance(rate, Throughput) and not (math.isfinite(rate) and rate > 0):
        raise BadInput(f"--examples-per-second must be a positive number, got {rate}")
    costs = example_seconds(baseline, rate)
    if not costs:
        raise BadInput(f"baseline {baseline.manifest.name!r} holds no examples to shard")
    load = rate.load_seconds if isinstance(rate, Throughput) else 0.0
    overhead = options.setup_seconds + load
    described = rate.describe() if isinstance(rate, Throughput) else f"{rate:g} examples/s (given)"
    available = options.job_seconds - overhead
    if available <= 0:
        raise BadInput(
            f"a job's fixed cost ({overhead / 60:.1f} min) leaves nothing of its "
            f"{options.job_seconds / 60:.1f}-minute budget: raise --job-minutes"
        )
    starts = [0.0]
    for cost in costs:
        starts.append(starts[-1] + cost)
    # Counted up from one, so the first that fits is the fewest; at most one shard per example,
    # so no job runs an empty shard.
    for count in range(1, min(options.max_jobs, len(costs)) + 1):
        bounds = [Shard(i, count).bounds(len(costs)) for i in range(count)]
        seconds = tuple(starts[hi] - starts[lo] for lo, hi in bounds)
        if max(seconds) <= available:
            return ShardPlan(
                count=count,
                examples=tuple(hi - lo for lo, hi in bounds),
                seconds=seconds,
                overhead_seconds=overhead,
                job_seconds=options.job_seconds,
                rate=described,
            )
    if max(costs) > available:
        raise BadInput(
            f"an example at {described} takes longer than the {available / 60:.1f} min a job "
            "has left after its fixed cost: raise --job-minutes"
        )
    needed = math.ceil(starts[-1] / available)
    raise BadInput(
        f"{len(costs):,} examples at {described} need about {needed:,} jobs of "
        f"{options.job_seconds / 60:.1f} min, over the {options.max_jobs} a matrix may run: "
        "raise --job-minutes or gate a proxy baseline (docs/proxies.md)"
    )
