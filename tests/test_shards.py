"""`regress plan --shards`: the fewest CI jobs that fit a budget, in the engine's own blocks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.checks import MAX_JOBS, ShardOptions, Throughput, example_seconds, plan_shards
from regress.cli import cli
from regress.core.errors import BadInput
from regress.core.store import Store
from regress.run.engine import Shard, prepare
from regress.run.runner import baseline_specs
from regress.tasks.base import DataSource

ROOT = Path(__file__).resolve().parents[1]
MAIN = Store(ROOT / "baselines").load("main")
TOTAL = sum(len(r) for r in MAIN.records.values())


def _throughput(tokens_per_second: float, load: float) -> Throughput:
    return Throughput(
        model="m", backend="llama_cpp", kernels="AVX2", examples=40, tokens=int(tokens_per_second),
        seconds=1.0, load_seconds=load, tokens_per_example={},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rate", "job", "setup"), [(5.0, 600.0, 0.0), (0.5, 300.0, 120.0), (2.0, 120.0, 30.0)]
)
def test_the_plan_is_the_fewest_shards_that_fit(rate: float, job: float, setup: float) -> None:
    options = ShardOptions(job_seconds=job, setup_seconds=setup)
    planned = plan_shards(MAIN, rate, options)
    assert sum(planned.examples) == TOTAL
    assert max(planned.seconds) + setup <= job
    assert planned.seconds == pytest.approx([n / rate for n in planned.examples])
    if planned.count > 1:  # one shard fewer does not fit
        with pytest.raises(BadInput, match="over the"):
            plan_shards(MAIN, rate, dataclasses.replace(options, max_jobs=planned.count - 1))
    assert planned.matrix() == {
        "include": [{"shard": i, "of": planned.count} for i in range(planned.count)]
    }


def test_the_blocks_are_the_ones_the_engine_runs() -> None:
    planned = plan_shards(MAIN, 1.0, ShardOptions(job_seconds=60.0))
    assert planned.count > 2
    specs = baseline_specs(MAIN)
    for i, size in enumerate(planned.examples):
        ran = prepare(specs, DataSource(), Shard(i, planned.count))
        assert sum(len(examples) for _, examples in ran) == size


def test_a_measured_rate_prices_each_example_by_its_tokens() -> None:
    rate = _throughput(tokens_per_second=400.0, load=3.0)
    planned = plan_shards(MAIN, rate, ShardOptions(job_seconds=60.0, setup_seconds=20.0))
    assert planned.overhead_seconds == 23.0  # the stated setup and the measured load
    costs = example_seconds(MAIN, rate)
    records = [r for task in sorted(MAIN.records) for r in MAIN.records[task]]
    tokens = [r.tokens["prompt"] + r.tokens.get("completion", 0) for r in records]
    assert costs == pytest.approx([t / 400.0 for t in tokens])
    assert len(set(costs)) > 1  # examples differ, so their prices do
    bounds = [Shard(i, planned.count).bounds(TOTAL) for i in range(planned.count)]
    assert planned.seconds == pytest.approx([sum(costs[lo:hi]) for lo, hi in bounds])
    assert max(planned.seconds) <= 60.0 - 23.0


def test_a_plan_over_256_jobs_or_without_room_is_refused() -> None:
    assert MAX_JOBS == 256
    # 100 s an example, one per 150-second job: 500 jobs.
    with pytest.raises(BadInput, match=r"need about 334 jobs .* over the 256"):
        plan_shards(MAIN, 0.01, ShardOptions(job_seconds=150.0))
    with pytest.raises(BadInput, match="an example .* takes longer than"):
        plan_shards(MAIN, 0.001, ShardOptions(job_seconds=300.0))
    with pytest.raises(BadInput, match="leaves nothing"):
        plan_shards(MAIN, 1.0, ShardOptions(job_seconds=60.0, setup_seconds=60.0))
    with pytest.raises(BadInput, match="positive"):
        plan_shards(MAIN, float("nan"), ShardOptions(job_seconds=60.0))


def test_no_job_runs_an_empty_shard() -> None:
    """A budget of one example per job over five examples: five shards, not 256."""
    task = sorted(MAIN.records)[0]
    small = dataclasses.replace(
        MAIN,
        manifest=dataclasses.replace(MAIN.manifest, tasks={task: MAIN.manifest.tasks[task]}),
        records={task: MAIN.records[task][:5]},
    )
    planned = plan_shards(small, 1.0, ShardOptions(job_seconds=1.5))
    assert planned.examples == (1, 1, 1, 1, 1)
    with pytest.raises(BadInput, match="an example .* takes longer than"):
        plan_shards(small, 1.0, ShardOptions(job_seconds=0.5))


def test_cli_prints_the_matrix_alone_on_stdout() -> None:
    store = str(ROOT / "baselines")
    args = ["plan", "--baseline", "main", "--store", store, "--shards"]
    done = CliRunner().invoke(
        cli, [*args, "--examples-per-second", "0.5", "--job-minutes", "5", "--setup-minutes", "2"]
    )
    assert done.exit_code == 0, done.output
    matrix = json.loads(done.stdout)
    count = len(matrix["include"])
    assert matrix["include"][-1] == {"shard": count - 1, "of": count}
    expected = plan_shards(MAIN, 0.5, ShardOptions(job_seconds=300.0, setup_seconds=120.0))
    assert count == expected.count
    assert f"{count} shard(s)" in done.stderr and "longest job" in done.stderr
    for wrong, says in [
        ([], "exactly one of --time MODEL or --examples-per-second"),
        (["--examples-per-second", "1", "--time", "smollm2-135m"], "exactly one"),
    ]:
        done = CliRunner().invoke(cli, [*args, *wrong])
        assert done.exit_code == 2 and says in done.output, done.output
    done = CliRunner().invoke(cli, ["plan", "--shards", "--examples-per-second", "1"])
    assert done.exit_code == 2 and "give --baseline" in done.output
    done = CliRunner().invoke(cli, [*args, "--examples-per-second", "0.01", "--job-minutes", "2.5"])
    assert done.exit_code == 2 and "over the 256 a matrix may run" in done.output
