"""How much a model's accuracy moves with the prompt's format (`--formats K`, and the user's own
instructions, each counted as a format): per unit, the accuracy in each format on the same
examples, the range over formats (FormatSpread's
"spread", max minus min) and its 95% interval by a paired bootstrap over examples; in a
gate, both sides' figures and the change in spread, resampling the same examples on both.

Only examples present in every format are compared, so the formats differ in wording alone.
The spread of K sample means is biased upwards (a maximum minus a minimum of noisy figures),
more so with few examples; the interval shows how far: a spread whose interval reaches 0
cannot be told from sampling noise. Reported, never gated: the gate tests each format as a
unit of its own (regress.tasks.formats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.tasks.variants import label_order, variant_of

RESAMPLES = 2000
SEED = 0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class FormatSpread:
    """One unit across its prompt formats."""

    unit: str
    formats: tuple[str, ...]
    """Each format's label (regress.tasks.variants): `fmt2`, `ins1a2b3c4d`,
    `ins1a2b3c4d@fmt2`, or `` for the task as it is."""
    accuracy: tuple[float, ...]
    """Per format, in `formats` order, over the examples every format has."""
    n: int
    """Examples in every format."""
    spread: float
    """Largest minus smallest accuracy."""
    low: float
    high: float
    """95% percentile-bootstrap interval of the spread."""

    @property
    def worst(self) -> float:
        return min(self.accuracy)

    @property
    def median(self) -> float:
        return float(np.median(self.accuracy))

    @property
    def best(self) -> float:
        return max(self.accuracy)


def _rates(
    tasks: Mapping[str, TaskInfo], records: Mapping[str, Sequence[Record]]
) -> dict[str, dict[str, dict[tuple[str, int], float]]]:
    """unit -> format label -> (base task, doc_id) -> the example's pass rate, for every unit
    in two or more formats."""
    variants = {}  # task -> (its base task, its unit, its label)
    labels: dict[str, set[str]] = {}
    for name, info in tasks.items():
        base, label = variant_of(name)
        unit = variant_of(info.group)[0] if info.group else base
        variants[name] = base, unit, label
        labels.setdefault(unit, set()).add(label)
    rates: dict[str, dict[str, dict[tuple[str, int], float]]] = {}
    for name, (base, unit, label) in variants.items():
        if len(labels[unit]) < 2:
            continue
        by_doc = rates.setdefault(unit, {}).setdefault(label, {})
        for r in records.get(name, ()):
            if r.correct is None and r.ok and not isinstance(r.scores.get("correct"), list):
                continue  # no 0/1 outcome (perplexity)
            outcomes = r.outcomes
            by_doc[(base, r.doc_id)] = sum(outcomes) / len(outcomes)
    return rates


def _table(
    sides: Sequence[dict[str, dict[tuple[str, int], float]]],
) -> tuple[tuple[str, ...], list[np.ndarray]]:
    """The formats every side has, and per side an examples x formats table over the examples
    every format of every side has (empty when fewer than two formats)."""
    formats = tuple(sorted(set.intersection(*(set(side) for side in sides)), key=label_order))
    if len(formats) < 2:
        return formats, []
    common = set.intersection(*(set(side[f]) for side in sides for f in formats))
    keys = sorted(common)
    return formats, [np.array([[side[f][k] for f in formats] for k in keys]) for side in sides]


def _spread(
    unit: str, formats: tuple[str, ...], table: np.ndarray, draws: np.ndarray
) -> FormatSpread:
    means = table.mean(axis=0)
    tail = (1 - CONFIDENCE) / 2
    return FormatSpread(
        unit=unit,
        formats=formats,
        accuracy=tuple(float(m) for m in means),
        n=len(table),
        spread=float(means.max() - means.min()),
        low=float(np.quantile(draws, tail)),
        high=float(np.quantile(draws, 1 - tail)),
    )


def _resampled(
    tables: Sequence[np.ndarray], rng: np.random.Generator, resamples: int
) -> list[np.ndarray]:
    """Each table's spread under the same resamples of examples (paired across tables)."""
    n = len(tables[0])
    draws: list[list[np.ndarray]] = [[] for _ in tables]
    for size in _chunks(resamples):
        picks = rng.integers(0, n, size=(size, n))
        for out, table in zip(draws, tables, strict=True):
            out.append(_spreads(table, picks))
    return [np.concatenate(d) for d in draws]


def format_spreads(
    tasks: Mapping[str, TaskInfo],
    records: Mapping[str, Sequence[Record]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[FormatSpread]:
    """Every unit run in two or more formats (tasks named `TASK@fmtI` or `TASK@insKEY`), by
    unit name."""
    rng = np.random.default_rng(seed)
    spreads = []
    for unit, by_format in sorted(_rates(tasks, records).items()):
        formats, tables = _table([by_format])
        if not tables or not len(tables[0]):
            continue
        [draws] = _resampled(tables, rng, resamples)
        spreads.append(_spread(unit, formats, tables[0], draws))
    return spreads


@dataclass(frozen=True)
class SpreadChange:
    """One unit's formats on both sides of a gate, over the examples both have in every
    format: reported, never gated (a minimum over K formats is biased)."""

    unit: str
    baseline: FormatSpread
    candidate: FormatSpread
    change: float
    """Candidate's spread minus the baseline's."""
    low: float
    high: float
    """95% paired-bootstrap interval of the change."""


def spread_changes(
    tasks: Mapping[str, TaskInfo],
    baseline: Mapping[str, Sequence[Record]],
    candidate: Mapping[str, Sequence[Record]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[SpreadChange, ...]:
    """Every unit in two or more formats: each side's accuracy per format and spread, and
    the change in spread with an interval that resamples the same examples on both sides."""
    rng = np.random.default_rng(seed)
    before, after = _rates(tasks, baseline), _rates(tasks, candidate)
    changes = []
    for unit in sorted(set(before) & set(after)):
        formats, tables = _table([before[unit], after[unit]])
        if not tables or not len(tables[0]):
            continue
        draws = _resampled(tables, rng, resamples)
        sides = [_spread(unit, formats, t, d) for t, d in zip(tables, draws, strict=True)]
        delta = draws[1] - draws[0]
        tail = (1 - CONFIDENCE) / 2
        changes.append(
            SpreadChange(
                unit=unit,
                baseline=sides[0],
                candidate=sides[1],
                change=sides[1].spread - sides[0].spread,
                low=float(np.quantile(delta, tail)),
                high=float(np.quantile(delta, 1 - tail)),
            )
        )
    return tuple(changes)


CHUNK = 64
"""Resamples drawn at once: an MMLU run in 8 formats is 14,042 x 8 figures per resample."""


def _chunks(total: int) -> list[int]:
    return [min(CHUNK, total - start) for start in range(0, total, CHUNK)]


def _spreads(table: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The spread of each resample (rows of `picks` index the examples)."""
    means = table[picks].mean(axis=1)  # resamples x formats
    spread: np.ndarray = means.max(axis=1) - means.min(axis=1)
    return spread
