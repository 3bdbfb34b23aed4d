"""`regress check --continue RUN`: a sequential check stopped at a budget takes its remaining
looks later, refusing another baseline, policy, design or model, and a continued check is the
check it continues (issue 50). The candidate is scripted (its records come from a stored run,
not a model) except in the model test at the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from regress.checks import CandidateModel, CheckOptions, check
from regress.checks import sequential as sequential_check
from regress.cli import cli
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.store import Store, read_run, write_run
from regress.gate.policy import Policy
from regress.gate.results import Verdict
from regress.report.markdown import render_markdown
from regress.run.engine import TaskSpec
from regress.run.runner import Outcome, RunPlan, execute
from regress.stats import SequentialDesign, Side, cut, rejection_edges, stopping_law
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks
from regress.tasks.base import DataSource

DATA = Path("/work/shared/data")
DESIGN = SequentialDesign(looks=(0.25, 0.5, 0.75, 1.0))
POLICY = Policy(min_examples=20, sequential=DESIGN)


def _flipped(base: Run, every: int, sha256: str = "c" * 64) -> Run:
    """`base` with every `every`-th example's answer flipped, as a candidate on `sha256`."""
    records = {}
    for task, recs in base.records.items():
        records[task] = [
            dataclasses.replace(r, correct=1 - r.correct, pred=-1)
            if r.doc_id % every == 0 and r.correct is not None
            else r
            for r in recs
        ]
    model = dataclasses.replace(base.manifest.model, sha256=sha256)
    return Run(manifest=dataclasses.replace(base.manifest, model=model), records=records)


class Scripted:
    """Stands in for the model: each look's examples answered from a stored run."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.looks = 0

    def __call__(self, plan, label, progress, chunk) -> Outcome:  # noqa: ANN001
        self.looks += 1
        records = {}
        for spec, _ in chunk:
            wanted = set(spec.doc_ids or ())
            records[spec.task.name] = [
                r for r in self.run.records[spec.task.name] if r.doc_id in wanted
            ]
        return Outcome(Run(manifest=self.run.manifest, records=records), [], 0.0)


@pytest.fixture
def baseline() -> Run:
    return Store(Path(__file__).resolve().parents[1] / "baselines").load("main")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, baseline: Run) -> Iterator[Scripted]:
    fake = Scripted(_flipped(baseline, 9))
    monkeypatch.setattr(sequential_check, "run_plan", fake)
    yield fake


def _check(baseline: Run, policy: Policy = POLICY, **more: object):
    options = CheckOptions(policy, source=DataSource(data_dir=DATA), **more)  # type: ignore[arg-type]
    return check(baseline, CandidateModel("scripted.gguf"), options)


def _settled(result) -> tuple:  # noqa: ANN001
    """What a check decided: verdict, exit code, each unit's counts and verdict, the looks."""
    run = result.comparison.sequential
    return (
        result.comparison.verdict,
        result.comparison.exit_code,
        [(u.name, u.n, u.b, u.c, u.verdict, u.pvalue) for u in result.comparison.units],
        run.taken,
        run.examples_run,
        run.decided_at,
    )


def _saved(result, folder: Path) -> Run:  # noqa: ANN001
    write_run(result.candidate, folder)
    return read_run(folder)


def test_a_continued_check_is_the_check_it_continues(
    tmp_path: Path, baseline: Run, scripted: Scripted
) -> None:
    whole = _check(baseline)
    assert len(whole.comparison.sequential.taken) > 2  # the budgets below cut it
    scripted.looks = 0
    first = _check(baseline, max_looks=1)
    assert first.comparison.verdict is Verdict.INCONCLUSIVE
    assert "regress check --continue RUN" in first.comparison.sequential.stopped
    # The report says how to go on legally, not "about N examples would show it".
    report = render_markdown(first.comparison)
    assert "continue with `regress check --continue RUN`" in report
    assert "examples would" not in report
    assert all("examples would" not in u.reason for u in first.comparison.units)
    state = first.candidate.manifest.sequential
    assert state["taken"] == 1 and state["open"]
    second = _check(baseline, max_looks=1, resume=_saved(first, tmp_path / "first"))
    assert second.candidate.manifest.sequential["taken"] == 2
    third = _check(baseline, resume=_saved(second, tmp_path / "second"))
    assert _settled(third) == _settled(whole)
    # Each look ran once: the continuations replayed the looks before them.
    assert scripted.looks == len(whole.comparison.sequential.taken)
    assert not third.candidate.manifest.sequential["open"]


@pytest.mark.parametrize("change", ["policy", "design", "baseline", "model", "ended", "plain"])
def test_a_continuation_of_another_check_is_refused(
    tmp_path: Path,
    baseline: Run,
    scripted: Scripted,
    change: str,
) -> None:
    first = _check(baseline, max_looks=1)
    resume = _saved(first, tmp_path / "first")
    policy, base = POLICY, baseline
    if change == "policy":
        policy = dataclasses.replace(POLICY, max_drop=0.03)
    elif change == "design":
        policy = dataclasses.replace(POLICY, sequential=dataclasses.replace(DESIGN, seed=1))
    elif change == "baseline":
        base = dataclasses.replace(
            baseline, manifest=dataclasses.replace(baseline.manifest, name="other")
        )
    elif change == "model":
        scripted.run = _flipped(baseline, 9, sha256="d" * 64)
    elif change == "ended":
        resume = _saved(_check(baseline), tmp_path / "ended")
    else:
        resume = baseline
    looks = scripted.looks
    with pytest.raises(BadInput, match="^cannot continue") as refused:
        _check(base, policy, resume=resume)
    assert "\n" not in str(refused.value)
    # Refused before any look ran, except the model's, known once the candidate ran.
    assert scripted.looks == looks + (change == "model")


def test_stopping_and_continuing_holds_the_size_a_second_fixed_test_breaks() -> None:
    """Seeded simulation at the margin (n = 200, 15% of answers flipping, true drop 2 points):
    checks stopped at a random budget and continued from their stored counts REGRESS as often
    as the design's exact law says, within alpha; reading a fixed test at 100 and again at 200
    (the "rerun with more" the report no longer suggests) does not hold alpha."""
    n, margin, alpha, flips, runs = 200, 0.02, 0.05, 0.15, 3000
    design = SequentialDesign()
    rng = np.random.default_rng(50)
    sizes = [cut(n, t) for t in design.looks]
    share = (flips + margin) / (2 * flips)
    probs = [flips * share, flips * (1 - share), 1 - flips]
    steps = np.diff([0, *sizes])
    counts = np.cumsum(
        np.stack([rng.multinomial(s, probs, size=runs)[:, :2] for s in steps], axis=1), axis=1
    )
    edges = {
        k: rejection_edges(size, margin, design.nominal_level(alpha, k), Side.BEYOND)
        for k, size in enumerate(sizes)
    }
    budgets = rng.integers(1, len(sizes) + 1, size=runs)

    def regressed(run: np.ndarray, looks: range) -> bool:
        return any(run[k, 0] >= edges[k][run[k, 0] + run[k, 1]] for k in looks)

    continued = 0
    for run, budget in zip(counts, budgets, strict=True):
        # The stopped check keeps its counts at the looks it took; its continuation judges
        # only the looks after them.
        stored = run[:budget]
        continued += regressed(stored, range(budget)) or regressed(run, range(budget, len(sizes)))
    rate = continued / runs
    se = np.sqrt(alpha * (1 - alpha) / runs)
    exact = stopping_law(n, margin, flips, design, alpha, margin).regression
    assert exact <= alpha and rate <= alpha + 3 * se
    assert abs(rate - exact) < 4 * se
    fixed = {size: rejection_edges(size, margin, alpha, Side.BEYOND) for size in (100, 200)}
    half = np.cumsum(rng.multinomial(1, probs, size=(runs, n))[:, :, :2], axis=1)
    twice = np.mean(
        [
            any(run[size - 1, 0] >= fixed[size][run[size - 1].sum()] for size in fixed)
            for run in half
        ]
    )
    assert twice > alpha + 3 * se


def test_the_cli_refuses_a_continuation_under_another_policy_with_exit_2(
    tmp_path: Path, baseline: Run, scripted: Scripted
) -> None:
    store = Path(__file__).resolve().parents[1] / "baselines"
    policy = tmp_path / "policy.yaml"
    policy.write_text("min_examples: 20\nsequential:\n  looks: 4\n")
    args = ["check", "-b", "main", "--store", str(store), "-m", "scripted.gguf"]
    args += ["--data-dir", str(DATA), "--policy", str(policy)]
    first = CliRunner().invoke(cli, [*args, "--max-looks", "1", "--save-run", str(tmp_path / "r")])
    assert first.exit_code == 0, first.output
    assert "continue with `regress check --continue RUN`" in first.output
    policy.write_text("min_examples: 20\nmax_drop: 0.03\nsequential:\n  looks: 4\n")
    refused = CliRunner().invoke(cli, [*args, "--continue", str(tmp_path / "r")])
    assert refused.exit_code == 2
    assert "cannot continue" in refused.output and "another policy" in refused.output
    assert scripted.looks == 1


def test_a_run_stopped_before_its_last_look_is_never_promoted(
    tmp_path: Path, baseline: Run, scripted: Scripted
) -> None:
    """Promoting a sequential check's run that holds only its first look's examples would
    shrink the pool every later check draws from: refused (exit 2), nothing stored."""
    store = tmp_path / "store"
    first = _check(baseline, max_looks=1)
    write_run(first.candidate, tmp_path / "r")
    held = sum(len(r) for r in first.candidate.records.values())
    assert held < sum(len(r) for r in baseline.records.values())
    args = ["baseline", "promote", "--run", str(tmp_path / "r"), "--name", "next"]
    refused = CliRunner().invoke(cli, [*args, "--store", str(store)])
    assert refused.exit_code == 2, refused.output
    assert f"stopped at look 1 of {len(POLICY.sequential.looks)}" in refused.output
    assert f"holds {held:,} examples" in refused.output
    assert not (store / "next").exists()
    # A run that took its last look holds the whole pool: promoted as a plain baseline.
    state = {**first.candidate.manifest.sequential, "taken": len(DESIGN.looks), "open": False}
    last = replace(scripted.run, manifest=replace(scripted.run.manifest, sequential=state))
    write_run(last, tmp_path / "whole")
    args[3] = str(tmp_path / "whole")
    promoted = CliRunner().invoke(cli, [*args, "--store", str(store)])
    assert promoted.exit_code == 0, promoted.output
    stored = Store(store).load("next")
    assert stored.manifest.sequential is None and stored.records == last.records


@pytest.mark.model
def test_a_continued_check_of_a_real_candidate_equals_the_whole_check(
    tmp_path: Path, smollm2_path: Path
) -> None:
    """SmolLM2 against its Q4_0 on 40 arithmetic questions, in four looks: a check stopped
    after one look and continued gives the uninterrupted check's verdict, counts and looks."""
    [task] = get_tasks(["builtin_arithmetic"])
    candidate = tmp_path / "q4_0.gguf"
    quantize_file(smollm2_path, "Q4_0", candidate)
    plan = RunPlan((TaskSpec(task, limit=40),), str(smollm2_path), "llama_cpp", {}, name="b")
    store = Store(tmp_path / "store")
    store.save(execute(plan).run)
    base = store.load("b")
    policy = Policy(min_examples=5, sequential=DESIGN)
    model = CandidateModel(str(candidate))
    cache = tmp_path / "cache"  # the continuation computes only its new looks
    whole = check(base, model, CheckOptions(policy))
    first = check(base, model, CheckOptions(policy, cache_dir=cache, max_looks=1))
    resume = _saved(first, tmp_path / "first")
    rest = check(base, model, CheckOptions(policy, cache_dir=cache, resume=resume))
    assert _settled(rest) == _settled(whole)
    assert rest.comparison.to_dict()["units"] == whole.comparison.to_dict()["units"]
    assert rest.candidate.records == whole.candidate.records
