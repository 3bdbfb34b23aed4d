"""Pareto analysis: dominance, the non-dominated set, hypervolume, and dominance that the
measurements' uncertainty supports. Pure functions of arrays; no model, no files.

Points are rows of an (n x k) array, one column per objective, each with a direction (to be
minimised or maximised). `a` dominates `b` when it is at least as good in every objective
and strictly better in at least one: irreflexive (nothing dominates itself) and transitive.
Equal points do not dominate each other, so duplicates are both kept on the front.

The hypervolume is the volume of objective space dominated by the front and bounded by a
reference point that every counted point must beat in every objective; it is computed by
moocore (Lopez-Ibanez et al.'s C implementation) after maximised objectives are negated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from regress.core.errors import BadInput, pip_install


class Direction(StrEnum):
    """Whether an objective is better smaller or larger."""

    MIN = "min"
    MAX = "max"


@dataclass(frozen=True)
class Objective:
    """A column of the points: its name (for messages) and direction."""

    name: str
    direction: Direction


def _as_minimised(points: np.ndarray, directions: Sequence[Direction]) -> np.ndarray:
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != len(directions):
        raise BadInput(f"expected {len(directions)} objective values per point")
    if not np.all(np.isfinite(points)):
        raise BadInput("objective values must be finite numbers")
    signs = np.array([1.0 if Direction(d) is Direction.MIN else -1.0 for d in directions])
    return points * signs


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[Direction]) -> bool:
    """Whether `a` is at least as good as `b` in every objective and better in one."""
    if len(a) != len(b):
        raise BadInput(f"points of {len(a)} and {len(b)} objectives cannot be compared")
    pa, pb = _as_minimised(np.array([a, b], dtype=float), directions)
    return bool(np.all(pa <= pb) and np.any(pa < pb))


def non_dominated(points: np.ndarray, directions: Sequence[Direction]) -> np.ndarray:
    """Boolean mask of the points no other point dominates (equal points all kept)."""
    p = _as_minimised(points, directions)
    # dominated[i, j]: row j dominates row i.
    le = np.all(p[None, :, :] <= p[:, None, :], axis=2)
    lt = np.any(p[None, :, :] < p[:, None, :], axis=2)
    return ~np.any(le & lt, axis=1)


def default_reference(
    points: np.ndarray, directions: Sequence[Direction], margin: float = 0.1
) -> np.ndarray:
    """The worst value of each objective over `points`, moved `margin` of its range (or of its
    magnitude, when all values are equal) further towards worse, so every point counts."""
    p = np.asarray(points, dtype=float)
    out = []
    for column, direction in zip(p.T, directions, strict=True):
        span = float(column.max() - column.min()) or abs(float(column.max())) or 1.0
        if Direction(direction) is Direction.MIN:
            out.append(float(column.max()) + margin * span)
        else:
            out.append(float(column.min()) - margin * span)
    return np.array(out)


def hypervolume(
    points: np.ndarray, directions: Sequence[Direction], reference: Sequence[float]
) -> float:
    """Volume dominated by `points` and bounded by `reference` (points that do not beat the
    reference in every objective add nothing)."""
    try:
        import moocore
    except ImportError as exc:
        raise BadInput(
            f"hypervolume needs moocore: {pip_install('bench')} (or pip install moocore)"
        ) from exc
    p = _as_minimised(points, directions)
    ref = _as_minimised(np.array([reference]), directions)[0]
    inside = p[np.all(p < ref, axis=1)]
    if not len(inside):
        return 0.0
    return float(moocore.hypervolume(inside, ref=ref))


class Judgement(StrEnum):
    """What a test says of one objective between two configurations."""

    BETTER = "better"
    WORSE = "worse"
    NOT_SEPARABLE = "not separable"


Judge = Callable[[int, int, int], Judgement]
"""judge(i, j, objective index): is point i significantly better than j in that objective?"""


@dataclass(frozen=True)
class Standing:
    """A point's place relative to the others."""

    on_front: bool
    """No point dominates it on the estimates."""
    dominated_by: tuple[int, ...]
    """Points that dominate it on the estimates and are significantly better in at least one
    objective (so the dominance is supported by the data)."""
    unsupported_by: tuple[int, ...]
    """Points that dominate it on the estimates where no objective's difference is
    significant: the data cannot separate them."""

    @property
    def label(self) -> str:
        """front, dominated, or not separable (from the front)."""
        if self.on_front:
            return "front"
        return "dominated" if self.dominated_by else "not separable"


def standings(points: np.ndarray, directions: Sequence[Direction], judge: Judge) -> list[Standing]:
    """Each point's standing: on the front, dominated (supported by a test), or dominated
    only on estimates the tests cannot separate ("not separable")."""
    p = np.asarray(points, dtype=float)
    front = non_dominated(p, directions)
    out = []
    for j in range(len(p)):
        supported: list[int] = []
        unsupported: list[int] = []
        for i in range(len(p)):
            if i == j or not dominates(p[i], p[j], directions):
                continue
            significant = any(judge(i, j, k) is Judgement.BETTER for k in range(len(directions)))
            (supported if significant else unsupported).append(i)
        out.append(Standing(bool(front[j]), tuple(supported), tuple(unsupported)))
    return out
