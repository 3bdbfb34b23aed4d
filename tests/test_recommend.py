"""regress recommend: the choice always meets the limits, ties go by the paired test, and the
relaxations say what loosening one limit admits."""

from __future__ import annotations

import numpy as np
import pytest

from regress.core.errors import BadInput
from regress.sweep.recommend import (
    Limits,
    Option,
    Prefer,
    parse_latency_ms,
    recommend,
    render,
    violations,
)

MIB = 2**20


def _option(name: str, acc: float, latency: float, rss_mib: float, size_mib: float = 100) -> Option:
    return Option(
        name, acc, acc - 0.05, acc + 0.05, latency, int(rss_mib * MIB), int(size_mib * MIB)
    )


OPTIONS = [
    _option("q8", 0.60, 30.0, 450),
    _option("q6", 0.59, 27.0, 420),
    _option("q4", 0.55, 20.0, 350),
    _option("q2", 0.45, 15.0, 300),
]


def _never_separable(a: str, b: str) -> float:
    return 1.0


def _always_separable(a: str, b: str) -> float:
    acc = {o.name: o.accuracy for o in OPTIONS}
    return 0.001 if acc[a] < acc[b] else 1.0


def test_the_most_accurate_when_the_test_separates_it() -> None:
    rec = recommend(OPTIONS, Limits(max_latency_ms=28), _always_separable)
    assert rec.chosen is not None and rec.chosen.name == "q6"
    assert rec.rejected == {"q8": "30.0 ms/token > 28 ms"}
    # Allowing 30 ms admits q8: one relaxation, with what it buys.
    (relax,) = rec.relaxations
    assert (relax.flag, relax.to, relax.admits) == ("--max-latency", "30.0ms", "q8")
    assert "accuracy 0.600 instead of 0.590" in relax.buys


def test_ties_under_the_paired_test_go_to_the_preferred_resource() -> None:
    rec = recommend(OPTIONS, Limits(), _never_separable)
    assert rec.chosen is not None and rec.chosen.name == "q2"  # fastest of all, none separable
    assert "not show less accurate than the most accurate, q8" in rec.why
    rec = recommend(OPTIONS, Limits(), _never_separable, prefer=Prefer.MEMORY)
    assert rec.chosen is not None and rec.chosen.name == "q2"


def test_an_accuracy_floor_and_its_relaxation() -> None:
    rec = recommend(OPTIONS, Limits(min_accuracy=0.58), _always_separable)
    assert rec.chosen is not None and rec.chosen.name == "q8"
    floors = {r.flag: r for r in rec.relaxations}
    assert floors["--min-accuracy"].admits == "q4"  # the fastest of those below the floor
    assert floors["--min-accuracy"].to == "0.550"


def test_nothing_fits() -> None:
    rec = recommend(OPTIONS, Limits(max_memory_bytes=200 * MIB), _always_separable)
    assert rec.chosen is None
    text = render(rec, "--max-memory 200MiB")
    assert "Recommended: none: no configuration meets the limits." in text
    assert "Relaxing --max-memory to 300MiB would admit q2: accuracy 0.450." in text


def test_randomized_recommendations_always_meet_the_limits() -> None:
    rng = np.random.default_rng(20261201)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        options = [
            _option(f"c{i}", *rng.uniform([0.2, 5, 100], [0.8, 60, 900]).tolist()) for i in range(n)
        ]
        limits = Limits(
            max_latency_ms=float(rng.uniform(5, 60)) if rng.random() < 0.7 else None,
            max_memory_bytes=int(rng.uniform(100, 900) * MIB) if rng.random() < 0.7 else None,
            min_accuracy=float(rng.uniform(0.2, 0.8)) if rng.random() < 0.5 else None,
        )
        p_values = {(a.name, b.name): float(rng.random()) for a in options for b in options}
        rec = recommend(options, limits, lambda a, b, p=p_values: p[(a, b)])
        fitting = [o for o in options if not violations(o, limits)]
        if rec.chosen is None:
            assert not fitting
            continue
        assert not violations(rec.chosen, limits)
        # Never a configuration the test shows less accurate than the best that fits.
        top = max(fitting, key=lambda o: (o.accuracy, -o.latency_ms))
        assert rec.chosen is top or p_values[(rec.chosen.name, top.name)] >= 0.05
        for relax in rec.relaxations:
            admitted = next(o for o in options if o.name == relax.admits)
            assert list(violations(admitted, limits)) == [relax.flag]


def test_latency_text() -> None:
    assert parse_latency_ms("50ms") == 50.0
    assert parse_latency_ms("0.05s") == 50.0
    assert parse_latency_ms("40") == 40.0
    with pytest.raises(BadInput, match="--max-latency"):
        parse_latency_ms("fast")
    with pytest.raises(BadInput):
        recommend([], Limits(), _never_separable)


def test_paired_accuracy_p_has_the_right_direction() -> None:
    from regress.sweep.frontier import paired_accuracy_p

    # The second is right on 12 examples the first gets wrong, and wrong on 1 it gets right.
    outcomes = [(False, True)] * 12 + [(True, False)] + [(True, True)] * 30 + [(False, False)] * 7
    p_better, p_worse = paired_accuracy_p(outcomes)
    assert p_better < 0.01 < 0.99 < p_worse
    assert paired_accuracy_p([(a, b) for b, a in outcomes]) == (p_worse, p_better)
    assert paired_accuracy_p([(True, True)] * 5) == (1.0, 1.0)
