"""Calibration of multiple-choice answers: ECE (both binnings) and Brier score against hand
computations, and the bootstrap interval of the change in ECE on seeded simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from regress.core.fingerprint import RuntimeFingerprint
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record
from regress.gate.choice_calibration import (
    CalibrationResult,
    brier,
    compare_calibration,
    ece,
    outcomes,
    reliability_diagram,
)
from regress.gate.pairing import pair


def mc_record(doc_id: int, probs: list[float], target: int, task: str = "arc_easy") -> Record:
    loglik = [math.log(p) for p in probs]
    pred = int(np.argmax(loglik))
    return Record(
        task=task,
        doc_id=doc_id,
        doc_hash=f"h{doc_id}",
        prompt_hash="p",
        target=target,
        pred=pred,
        correct=int(pred == target),
        metrics={"acc": float(pred == target)},
        scores={"loglik": loglik},
    )


# confidence (the max probability), right? -- by hand:
HAND = [
    ([0.95, 0.05], 0),  # 0.95 right
    ([0.85, 0.15], 1),  # 0.85 wrong
    ([0.6, 0.4], 0),  # 0.60 right
    ([0.55, 0.45], 1),  # 0.55 wrong
    ([0.7, 0.2, 0.1], 0),  # 0.70 right
]


def test_ece_equal_width_by_hand() -> None:
    data = outcomes([mc_record(i, p, t) for i, (p, t) in enumerate(HAND)])
    np.testing.assert_allclose(data.confidence, [0.95, 0.85, 0.6, 0.55, 0.7])
    np.testing.assert_allclose(data.correct, [1, 0, 1, 0, 1])
    # 10 equal-width bins: [0.5,0.6): 0.55 wrong -> |0 - 0.55| ; [0.6,0.7): 0.6 right -> 0.4;
    # [0.7,0.8): 0.7 right -> 0.3; [0.8,0.9): 0.85 wrong -> 0.85; [0.9,1]: 0.95 right -> 0.05.
    assert ece(data.confidence, data.correct) == pytest.approx((0.55 + 0.4 + 0.3 + 0.85 + 0.05) / 5)
    # 2 equal-width bins: everything lands in [0.5, 1]: |3/5 - 3.65/5|.
    assert ece(data.confidence, data.correct, bins=2) == pytest.approx(abs(0.6 - 0.73))


def test_ece_equal_mass_by_hand() -> None:
    data = outcomes([mc_record(i, p, t) for i, (p, t) in enumerate(HAND)])
    # Sorted confidences 0.55 0.6 0.7 | 0.85 0.95 (5 into 2 bins: the first one larger):
    # bin 1: accuracy 2/3, confidence 1.85/3; bin 2: accuracy 1/2, confidence 0.9.
    expected = 3 / 5 * abs(2 / 3 - 1.85 / 3) + 2 / 5 * abs(1 / 2 - 0.9)
    assert ece(data.confidence, data.correct, bins=2, binning="mass") == pytest.approx(expected)
    bars = reliability_diagram([mc_record(i, p, t) for i, (p, t) in enumerate(HAND)], 2, "mass")
    assert [(b.n, b.lower, b.upper) for b in bars] == [
        (3, pytest.approx(0.55), pytest.approx(0.7)),
        (2, pytest.approx(0.85), pytest.approx(0.95)),
    ]
    assert bars[1].accuracy == 0.5 and bars[1].confidence == pytest.approx(0.9)


def test_brier_by_hand() -> None:
    data = outcomes([mc_record(i, p, t) for i, (p, t) in enumerate(HAND)])
    by_hand = [
        0.05**2 + 0.05**2,
        0.85**2 + 0.85**2,
        0.4**2 + 0.4**2,
        0.55**2 + 0.55**2,
        0.3**2 + 0.2**2 + 0.1**2,
    ]
    assert brier(data.probs, data.target) == pytest.approx(sum(by_hand) / 5)


def make_run(name: str, records: list[Record]) -> Run:
    manifest = Manifest(
        name=name,
        created="2026-01-01T00:00:00Z",
        regress_version="0.1.0",
        model=ModelInfo(ref=f"{name}.gguf", sha256=name[0] * 64),
        backend=RuntimeFingerprint("llama_cpp", "0.3.36", {}),
        suite_name="test",
        tasks={
            "arc_easy": TaskInfo(
                "arc_easy", None, len(records), 0, "acc", "loglikelihood", "d", "p"
            )
        },
    )
    return Run(manifest, {"arc_easy": records})


def simulated(
    rng: np.random.Generator, n: int, sharpen: float
) -> tuple[list[Record], list[Record]]:
    """A calibrated baseline (the answer is right with its stated confidence) and a candidate
    with the same answers whose log-likelihoods are multiplied by `sharpen`."""
    base, cand = [], []
    for i in range(n):
        confidence = rng.uniform(0.3, 0.95)
        rest = (1 - confidence) / 3
        probs = [confidence, rest, rest, rest]
        target = 0 if rng.random() < confidence else int(rng.integers(1, 4))
        base.append(mc_record(i, probs, target))
        sharp = np.exp(sharpen * np.log(probs))
        cand.append(mc_record(i, list(sharp / sharp.sum()), target))
    return base, cand


def calibration(baseline: Run, candidate: Run, unit: str) -> tuple[CalibrationResult, ...]:
    """compare_calibration of the runs' one task, paired as the gate pairs it."""
    paired = pair(baseline, candidate)
    return compare_calibration({unit: list(paired.tasks)}, paired.pairs)


def test_delta_ece_interval_covers_zero_when_nothing_changed() -> None:
    rng = np.random.default_rng(1)
    base, _ = simulated(rng, 400, 1.0)
    [result] = calibration(make_run("b", base), make_run("c", base), "arc_easy")
    assert result.delta_ece == 0.0 and result.delta_ece_ci == (0.0, 0.0)


def test_an_overconfident_candidate_gets_a_positive_delta_ece() -> None:
    """Seeded: sharpening a calibrated model's probabilities (x3 log-likelihoods) leaves every
    answer but makes it overconfident; over 10 simulated suites the interval excludes 0 in
    at least 9 and ECE rises in all."""
    rng = np.random.default_rng(7)
    excluded = 0
    for _ in range(10):
        base, cand = simulated(rng, 300, 3.0)
        [result] = calibration(make_run("b", base), make_run("c", cand), "u")
        assert result.delta_ece > 0 and result.candidate_brier > result.baseline_brier
        excluded += result.delta_ece_ci[0] > 0
    assert excluded >= 9
