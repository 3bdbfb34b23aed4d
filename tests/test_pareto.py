"""Pareto analysis: dominance properties, the front, hypervolume by hand, separability."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from regress.core.errors import BadInput
from regress.sweep.pareto import (
    Direction,
    Judgement,
    default_reference,
    dominates,
    hypervolume,
    non_dominated,
    standings,
)

MIN, MAX = Direction.MIN, Direction.MAX
# accuracy (max), latency ms (min), memory MB (min)
DIRS = (MAX, MIN, MIN)
TABLE = np.array(
    [
        [0.60, 30.0, 400.0],  # 0 front: most accurate
        [0.55, 20.0, 300.0],  # 1 front
        [0.55, 25.0, 300.0],  # 2 dominated by 1 (slower, same otherwise)
        [0.50, 20.0, 350.0],  # 3 dominated by 1
        [0.40, 15.0, 500.0],  # 4 front: fastest
        [0.55, 20.0, 300.0],  # 5 equal to 1: neither dominates, both on the front
    ]
)


def _grid_points(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    # A coarse grid makes ties common, where dominance is easiest to get wrong.
    return rng.integers(0, 3, size=(n, k)).astype(float)


def test_dominance_is_irreflexive_asymmetric_and_transitive() -> None:
    rng = np.random.default_rng(7)
    dirs = (MAX, MIN, MIN)
    points = _grid_points(rng, 40, 3)
    dom = np.array([[dominates(a, b, dirs) for b in points] for a in points])
    assert not dom.diagonal().any()
    assert not (dom & dom.T).any()
    checked = 0
    for i, j, m in itertools.product(range(len(points)), repeat=3):
        if dom[i, j] and dom[j, m]:
            assert dom[i, m]
            checked += 1
    assert checked > 100  # the property was exercised, not vacuous


def test_dominance_respects_directions() -> None:
    assert dominates([0.6, 10], [0.5, 20], (MAX, MIN))
    assert not dominates([0.6, 10], [0.5, 20], (MIN, MIN))
    assert not dominates([0.6, 30], [0.5, 20], (MAX, MIN))  # a trade-off


def test_front_on_a_fixed_table() -> None:
    assert non_dominated(TABLE, DIRS).tolist() == [True, True, False, False, True, True]


def test_front_agrees_with_moocore_on_random_points() -> None:
    import moocore  # a declared dependency (the bench extra): never skipped

    rng = np.random.default_rng(3)
    points = _grid_points(rng, 60, 3)
    ours = non_dominated(points, (MIN, MIN, MIN))
    assert ours.tolist() == moocore.is_nondominated(points, keep_weakly=True).tolist()
    # The front's points are mutually non-dominated and every other point is dominated.
    front = points[ours]
    assert not any(dominates(a, b, (MIN,) * 3) for a in front for b in front)
    for p in points[~ours]:
        assert any(dominates(f, p, (MIN,) * 3) for f in front)


def test_hypervolume_against_hand_computed_staircases() -> None:
    # Minimise both: the staircase under (1,3), (2,2), (3,1) up to (4,4) is 3 + 2 + 1.
    pts = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]])
    assert hypervolume(pts, (MIN, MIN), [4.0, 4.0]) == pytest.approx(6.0)
    # A dominated point and a point beyond the reference add nothing.
    more = np.vstack([pts, [[3.0, 3.0], [5.0, 0.5]]])
    assert hypervolume(more, (MIN, MIN), [4.0, 4.0]) == pytest.approx(6.0)
    # Accuracy maximised, latency minimised, reference (0.4, 4):
    # 0.1 * 3 + 0.1 * 2 + 0.1 * 1.
    acc_lat = np.array([[0.5, 1.0], [0.6, 2.0], [0.7, 3.0]])
    assert hypervolume(acc_lat, (MAX, MIN), [0.4, 4.0]) == pytest.approx(0.6)


def test_default_reference_is_beaten_by_every_point() -> None:
    ref = default_reference(TABLE, DIRS)
    assert ref.tolist() == pytest.approx([0.38, 31.5, 520.0])
    assert hypervolume(TABLE[[4]], DIRS, ref) > 0


def test_bad_points_are_refused() -> None:
    with pytest.raises(BadInput):
        non_dominated(np.array([[1.0, np.nan]]), (MIN, MIN))
    with pytest.raises(BadInput):
        dominates([1.0], [2.0, 3.0], (MIN, MIN))


def test_standings_need_a_significant_difference() -> None:
    def never(i: int, j: int, k: int) -> Judgement:
        return Judgement.NOT_SEPARABLE

    def latency_only(i: int, j: int, k: int) -> Judgement:
        if k != 1 or TABLE[i, 1] == TABLE[j, 1]:
            return Judgement.NOT_SEPARABLE
        return Judgement.BETTER if TABLE[i, 1] < TABLE[j, 1] else Judgement.WORSE

    labels = [s.label for s in standings(TABLE, DIRS, never)]
    assert labels == ["front", "front", "not separable", "not separable", "front", "front"]
    result = standings(TABLE, DIRS, latency_only)
    assert [s.label for s in result] == [
        "front",
        "front",
        "dominated",
        "not separable",
        "front",
        "front",
    ]
    assert result[2].dominated_by == (1, 5) and result[3].unsupported_by == (1, 5)
