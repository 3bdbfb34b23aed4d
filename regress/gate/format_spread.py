"""How much a model's accuracy moves with the prompt's format (`--formats K`): per unit, the
accuracy in each format on the same examples, the range over formats (FormatSpread's
"spread", max minus min) and its 95% interval by a paired bootstrap over examples.

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
from regress.tasks.formats import split_name

RESAMPLES = 2000
SEED = 0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class FormatSpread:
    """One unit across its prompt formats."""

    unit: str
    formats: tuple[int, ...]
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


def format_spreads(
    tasks: Mapping[str, TaskInfo],
    records: Mapping[str, Sequence[Record]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[FormatSpread]:
    """Every unit run in two or more formats (tasks named `TASK@fmtI`), by unit name."""
    # unit -> format -> (base task, doc_id) -> pass rate
    rates: dict[str, dict[int, dict[tuple[str, int], float]]] = {}
    for name, info in tasks.items():
        split = split_name(name)
        group = split_name(info.group) if info.group else None
        if split is None:
            continue
        base, index = split
        unit = group[0] if group else base
        by_doc = rates.setdefault(unit, {}).setdefault(index, {})
        for r in records.get(name, ()):
            if r.correct is None and r.ok and not isinstance(r.scores.get("correct"), list):
                continue  # no 0/1 outcome (perplexity)
            outcomes = r.outcomes
            by_doc[(base, r.doc_id)] = sum(outcomes) / len(outcomes)
    rng = np.random.default_rng(seed)
    spreads = []
    for unit, by_format in sorted(rates.items()):
        formats = tuple(sorted(by_format))
        common = set.intersection(*(set(by_format[f]) for f in formats))
        if len(formats) < 2 or not common:
            continue
        keys = sorted(common)
        table = np.array([[by_format[f][k] for f in formats] for k in keys])
        means = table.mean(axis=0)
        spread_b = np.concatenate([
            _spreads(table, rng.integers(0, len(keys), size=(size, len(keys))))
            for size in _chunks(resamples)
        ])  # fmt: skip
        tail = (1 - CONFIDENCE) / 2
        spreads.append(
            FormatSpread(
                unit=unit,
                formats=formats,
                accuracy=tuple(float(m) for m in means),
                n=len(keys),
                spread=float(means.max() - means.min()),
                low=float(np.quantile(spread_b, tail)),
                high=float(np.quantile(spread_b, 1 - tail)),
            )
        )
    return spreads


CHUNK = 64
"""Resamples drawn at once: an MMLU run in 8 formats is 14,042 x 8 figures per resample."""


def _chunks(total: int) -> list[int]:
    return [min(CHUNK, total - start) for start in range(0, total, CHUNK)]


def _spreads(table: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The spread of each resample (rows of `picks` index the examples)."""
    means = table[picks].mean(axis=1)  # resamples x formats
    return means.max(axis=1) - means.min(axis=1)
