"""The gate on generation units: per-document pass@1 for repeated sampling, and failure-class
rates (max_failure_increase); cost and Token Efficiency from records. Pure logic on crafted
records; tests/test_generation_model.py runs the real model."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_compare import run

from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import Run, TaskInfo
from regress.core.records import Record
from regress.gate.compare import compare
from regress.gate.policy import Policy, parse_policy
from regress.gate.results import UnitKind, Verdict
from regress.report.markdown import render_markdown
from regress.run.cost import Prices, load_prices, task_cost


def _record(doc_id: int, failures: list[str], correct: list[int] | int) -> Record:
    repeated = isinstance(correct, list)
    return Record(
        task="gsm8k",
        doc_id=doc_id,
        doc_hash=f"d{doc_id}",
        prompt_hash="p",
        target="4",
        pred="4",
        correct=None if repeated else correct,
        metrics={"pass@1": sum(correct) / len(correct)} if repeated else {"exact_match": correct},
        scores={"failure": failures, "finish": ["stop"] * len(failures)}
        | ({"correct": correct} if repeated else {}),
        tokens={"prompt": 100, "completion": 50 * len(failures)},
    )


def _run(name: str, records: list[Record], metric: str) -> Run:
    info = TaskInfo("gsm8k", None, len(records), 0, metric, "generate_until", "d", "p")
    return run(name, {"gsm8k": records}, [info])


def _truncating(n: int, truncated: int) -> list[Record]:
    """Greedy records, every one right; the first `truncated` cut at the token limit."""
    return [_record(i, ["truncated" if i < truncated else "answered"], 1) for i in range(n)]


def test_a_rise_in_truncation_fails_the_gate_when_the_policy_says_so() -> None:
    base = _run("base", _truncating(200, 10), "exact_match")
    cand = _run("cand", _truncating(200, 60), "exact_match")
    reported = compare(base, cand, Policy())
    # Accuracy did not move, and without max_failure_increase the rates are only shown.
    assert reported.verdict is Verdict.PASS and reported.units[0].delta == 0
    [rate] = [f for f in reported.failures if f.failure == "truncated"]
    assert (rate.baseline, rate.candidate) == (0.05, 0.30) and not rate.regressed
    gated = compare(base, cand, parse_policy({"max_failure_increase": 0.05}))
    [rate] = [f for f in gated.failures if f.failure == "truncated"]
    assert rate.regressed and rate.pvalue < 0.05
    assert gated.verdict is Verdict.REGRESSION and gated.exit_code is ExitCode.REGRESSION
    text = render_markdown(gated)
    assert "REGRESSION in failure rates: gsm8k (truncated)" in text
    assert "Generation failure classes" in text


def test_a_small_rise_within_the_limit_passes() -> None:
    base = _run("base", _truncating(200, 10), "exact_match")
    cand = _run("cand", _truncating(200, 14), "exact_match")
    gated = compare(base, cand, parse_policy({"max_failure_increase": 0.05}))
    assert gated.verdict is Verdict.PASS and not any(f.regressed for f in gated.failures)


def test_repeated_units_pair_per_document_success_rates() -> None:
    ones = [1, 1, 1, 1]
    base = [_record(i, ["answered"] * 4, ones if i % 2 else [1, 0, 1, 0]) for i in range(200)]
    cand = [
        _record(i, ["answered"] * 4, [0, 0, 0, 1] if i < 60 else r.scores["correct"])
        for i, r in enumerate(base)
    ]
    result = compare(_run("base", base, "pass@1"), _run("cand", cand, "pass@1"), Policy())
    [unit] = result.units
    assert unit.kind is UnitKind.SCORE and unit.metric == "pass@1"
    expected = (
        sum(
            sum(c.scores["correct"]) / 4 - sum(b.scores["correct"]) / 4
            for b, c in zip(base, cand, strict=True)
        )
        / 200
    )
    assert unit.delta == pytest.approx(expected)
    assert result.verdict is Verdict.REGRESSION


def test_cost_per_success_and_token_efficiency() -> None:
    records = [_record(i, ["answered"] * 2, [1, 0] if i else [0, 0]) for i in range(4)]
    cost = task_cost("gsm8k", records, Prices(input_per_1k=1.0, output_per_1k=2.0), seconds=0)
    assert cost.samples == 8 and cost.successes == 3
    assert cost.cost == pytest.approx(400 / 1000 * 1.0 + 400 / 1000 * 2.0)
    assert cost.cost_per_success == pytest.approx(cost.cost / 3)
    # Success rate 3/8 over 50 generated tokens per sample, per 1,000 tokens.
    assert cost.tes == pytest.approx(3 / 8 / 50 * 1000)


def test_a_bad_price_table_is_one_line_of_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("input_per_1k: -1\n")
    with pytest.raises(BadInput, match="input_per_1k"):
        load_prices(path)
    path.write_text("per_token: 1\n")
    with pytest.raises(BadInput):
        load_prices(path)
    # The judge's own block: per-token prices only (it has no wall time of its own).
    path.write_text("judge: {per_second: 1}\n")
    with pytest.raises(BadInput, match="judge is a mapping of input_per_1k, output_per_1k"):
        load_prices(path)
    path.write_text("judge: {output_per_1k: -2}\n")
    with pytest.raises(BadInput, match="judge: output_per_1k must be a number >= 0, got -2"):
        load_prices(path)
    path.write_text("output_per_1k: 1\njudge: {output_per_1k: 3}\n")
    assert load_prices(path) == Prices(output_per_1k=1.0, judge=Prices(output_per_1k=3.0))
