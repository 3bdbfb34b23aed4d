"""What makes a run unfit to store, and what makes a stored record inconsistent."""

from __future__ import annotations

import dataclasses

import pytest
from test_store import make_manifest, make_records

from regress.core.errors import BadInput, ExitCode, RunFailed
from regress.core.manifest import Run
from regress.core.records import Status
from regress.gate.integrity import check_fit_to_store, record_problems


def run_of(records: dict[str, list], shard: str | None = None) -> Run:
    manifest = make_manifest(tasks={task: len(recs) for task, recs in records.items()})
    return Run(dataclasses.replace(manifest, shard=shard), records)


def failed(record, status: Status = Status.ERROR):
    return dataclasses.replace(
        record, status=status, error="llama_decode returned -1", pred=None, correct=None
    )


def test_a_healthy_run_is_fit() -> None:
    check_fit_to_store(run_of({"arc_easy": make_records(n=40)}))


def test_no_examples_is_bad_input() -> None:
    with pytest.raises(BadInput, match="the run has no examples") as err:
        check_fit_to_store(run_of({"arc_easy": []}))
    assert err.value.exit_code == ExitCode.BAD_INPUT
    with pytest.raises(BadInput, match="task piqa has no examples"):
        check_fit_to_store(run_of({"arc_easy": make_records(n=3), "piqa": []}))
    # A shard may hold no example of a task: its neighbours do.
    check_fit_to_store(run_of({"arc_easy": make_records(n=3), "piqa": []}, shard="0/2"))


def test_error_rate_above_the_policy_default_fails_the_run() -> None:
    records = make_records(n=40)
    records[:2] = [failed(r) for r in records[:2]]  # 5%: at the limit, still a result
    check_fit_to_store(run_of({"arc_easy": records}))
    records[2] = failed(records[2], Status.TIMEOUT)  # 7.5%
    with pytest.raises(RunFailed) as err:
        check_fit_to_store(run_of({"arc_easy": records}))
    assert str(err.value) == (
        "task arc_easy: 3 of 40 examples failed (> max_error_rate 0.05), first: doc 0 error: "
        "llama_decode returned -1; not stored"
    )
    assert err.value.exit_code == ExitCode.RUN_FAILED


def test_a_generation_that_could_not_start_counts_as_failed() -> None:
    records = make_records(n=10)
    records[0] = dataclasses.replace(
        failed(records[0], Status.TRUNCATED), error="prompt of 900 tokens + 256 new exceeds n_ctx"
    )
    with pytest.raises(RunFailed, match="1 of 10 examples failed .* doc 0 truncated: prompt"):
        check_fit_to_store(run_of({"arc_easy": records}))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scores_fail_the_run(value: float) -> None:
    records = make_records(n=5)
    records[3] = dataclasses.replace(records[3], scores={"loglik": [value, -1.0]})
    with pytest.raises(RunFailed, match="task arc_easy doc 3: non-finite score"):
        check_fit_to_store(run_of({"arc_easy": records}))


def test_consistent_records_have_no_problems() -> None:
    info = make_manifest().tasks["arc_easy"]
    for record in [*make_records(acc=1), *make_records(acc=0), failed(make_records()[0])]:
        assert record_problems(record, info) == []


def test_a_flipped_correct_is_found() -> None:
    info = make_manifest().tasks["arc_easy"]
    [record] = make_records(n=1, acc=1)
    flipped = dataclasses.replace(record, correct=0)
    assert record_problems(flipped, info) == [
        "arc_easy doc 0: correct=0 but acc=1",
        "arc_easy doc 0: correct=0 but pred 0 vs target 0",
    ]
    # Editing the metric too is not enough: the answer still matches the target.
    both = dataclasses.replace(flipped, metrics={"acc": 0.0})
    assert record_problems(both, info) == ["arc_easy doc 0: correct=0 but pred 0 vs target 0"]
    # Nor is moving the answer: it is no longer the best-scored choice.
    moved = dataclasses.replace(both, pred=1)
    assert record_problems(moved, info) == [
        "arc_easy doc 0: pred 1 is not the best-scored choice 0"
    ]
    answered = dataclasses.replace(failed(record), pred=1)
    assert record_problems(answered, info) == ["arc_easy doc 0: failed (error) but has an answer"]
