"""Build a proxy baseline: a margin-stratified sample of a full baseline, with its design.

A proxy answers "how would the full suite have moved?" from a fraction of its examples. Each
gated unit's examples are ranked by the reference model's margin (regress.gate.margins) and cut
into strata of equal size; the budget goes to the strata in proportion to N_h·√f_h (Neyman
allocation, f_h the calibration's flip rate there: the standard deviation of a paired 0/±1
outcome is about √f), never below a floor, never above the stratum. Examples the reference
was sure of rarely flip, so few of them are needed to say so. Each stratum is then a seeded
simple random sample, and the design (strata, inclusion probabilities, seed, calibration,
parent) is written to the proxy's manifest, where `regress check` reads it to estimate the
parent suite's change (regress.stats.stratified).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.proxy_design import Calibration, ProxyDesign, Stratum
from regress.gate.margins import margin_cuts, margin_units, record_margin
from regress.proxy import flip_rates
from regress.stats import SEED

MIN_PER_STRATUM = 10
"""The floor of every stratum's sample: enough for its variance to be estimated."""
DEFENSIVE_SHARE = 0.25
"""The lowest flip rate the allocation assumes for a stratum, as a share of the mean rate."""


@dataclass(frozen=True)
class ProxyOptions:
    """How to draw a proxy from a full baseline."""

    budget: int
    """Examples in the proxy, over all units."""
    strata: int = 10
    """Margin strata per unit: deciles, as calibrations are measured (fewer when a unit is too
    small to give each the floor)."""
    seed: int = SEED
    calibration: Calibration = flip_rates.DEFAULT
    min_per_stratum: int = MIN_PER_STRATUM


def build_proxy(parent: Run, name: str, options: ProxyOptions) -> Run:
    """A proxy baseline named `name` holding a stratified sample of `parent`'s examples."""
    _check_parent(parent)
    members = _strata_members(parent, options)
    total = sum(len(m) for _, m in members)
    if options.budget >= total:
        raise BadInput(
            f"a budget of {options.budget} covers all {total} examples of {parent.manifest.name}:"
            " gate against it directly"
        )
    rates = [options.calibration.flip_rate(q) for q, _ in members]
    # Defensive allocation: no stratum is assumed to flip less than a share of the mean rate,
    # so a candidate whose changes spread further than the calibration's still gets measured
    # where the calibration saw none (a Q8_0-only calibration made Q4_0's proxy worse than
    # a uniform sample; experiments/proxy_efficiency.py).
    assumed = np.maximum(rates, DEFENSIVE_SHARE * float(np.mean(rates)))
    sizes = allocate(
        [len(m) for _, m in members],
        [len(m) * math.sqrt(rate) for rate, (_, m) in zip(assumed, members, strict=True)],
        options.budget,
        options.min_per_stratum,
    )
    rng = np.random.default_rng(options.seed)
    strata = []
    index: dict[str, int] = defaultdict(int)
    for (_, stratum_members), rate, size in zip(members, rates, sizes, strict=True):
        unit = stratum_members[0][0]
        chosen = sorted(
            stratum_members[i] for i in rng.choice(len(stratum_members), size, replace=False)
        )
        docs: dict[str, list[int]] = defaultdict(list)
        for _, task, doc, _ in chosen:
            docs[task].append(doc)
        margins = [m for *_, m in stratum_members]
        strata.append(
            Stratum(
                unit=unit,
                index=index[unit],
                margin_low=min(margins),
                margin_high=max(margins),
                population=len(stratum_members),
                flip_rate=rate,
                docs={task: tuple(ids) for task, ids in sorted(docs.items())},
            )
        )
        index[unit] += 1
    design = ProxyDesign(
        parent=parent.manifest.name,
        parent_records_sha256=dict(parent.manifest.records_sha256),
        parent_n={task: len(records) for task, records in parent.records.items()},
        seed=options.seed,
        budget=options.budget,
        calibration=options.calibration,
        strata=tuple(strata),
    )
    return _subset(parent, name, design)


def allocate(populations: list[int], weights: list[float], budget: int, floor: int) -> list[int]:
    """Integer sample sizes summing to `budget`, proportional to `weights` within bounds.

    Each stratum gets at least min(floor, N_h) and at most N_h; strata that hit a bound are
    fixed and the rest of the budget is shared again among the others.
    """
    pop = np.asarray(populations, dtype=float)
    low = np.minimum(pop, floor)
    if budget < low.sum():
        raise BadInput(
            f"a budget of {budget} is below the {int(low.sum())} examples the strata's floor "
            f"of {floor} needs: raise it or use fewer strata"
        )
    size = np.zeros_like(pop)
    fixed = np.zeros(len(pop), dtype=bool)
    weight = np.asarray(weights, dtype=float)
    while True:
        free = budget - size[fixed].sum()
        share = np.where(fixed, 0.0, weight)
        if share.sum() <= 0:
            share = np.where(fixed, 0.0, pop)
        if share.sum() <= 0:  # every stratum is at a bound already
            break
        target = np.where(fixed, size, free * share / share.sum())
        under, over = ~fixed & (target < low), ~fixed & (target > pop)
        if not (under.any() or over.any()):
            size = target
            break
        size = np.where(under, low, np.where(over, pop, size))
        fixed |= under | over
    return _round_to(size, budget, low, pop)


def _round_to(size: np.ndarray, budget: int, low: np.ndarray, high: np.ndarray) -> list[int]:
    """Largest-remainder rounding that keeps the sum and the bounds."""
    whole = np.clip(np.floor(size), low, high).astype(int)
    order = np.argsort(-(size - np.floor(size)), kind="stable")
    i = 0
    while whole.sum() < budget:
        k = order[i % len(order)]
        if whole[k] < high[k]:
            whole[k] += 1
        i += 1
    return [int(x) for x in whole]


def _check_parent(parent: Run) -> None:
    manifest = parent.manifest
    if manifest.proxy is not None:
        raise BadInput(f"{manifest.name} is itself a proxy: build proxies from a full baseline")
    if manifest.shard is not None:
        raise BadInput(f"{manifest.name} is one shard ({manifest.shard}): merge the shards first")
    for task, records in sorted(parent.records.items()):
        info = manifest.tasks[task]
        if info.output_type in ("generate_until", "loglikelihood_rolling") or any(
            r.ok and (r.correct is None or record_margin(r, info.metric) is None) for r in records
        ):
            raise BadInput(
                f"task {task}: a proxy needs right/wrong multiple-choice units with per-choice "
                f"scores ({info.output_type} examples without them); leave it out of the parent"
            )


Member = tuple[str, str, int, float]
"""(unit, task, doc_id, margin), a failed example's margin as -inf."""


def _strata_members(parent: Run, options: ProxyOptions) -> list[tuple[float, list[Member]]]:
    """Per stratum, in unit then margin order: (mid margin quantile, its examples)."""
    strata = []
    for unit, tasks in margin_units(parent).items():
        n = sum(len(parent.records[task]) for task in tasks)
        count = max(1, min(options.strata, n // max(1, options.min_per_stratum)))
        for k, chunk in enumerate(margin_cuts(parent, tasks, count)):
            members = [(unit, t, doc, margin) for margin, t, doc in chunk]
            strata.append(((k + 0.5) / count, members))
    return strata


def _subset(parent: Run, name: str, design: ProxyDesign) -> Run:
    """The parent's manifest and records cut to the design's examples."""
    keep: dict[str, set[int]] = defaultdict(set)
    for unit in {s.unit for s in design.strata}:
        for _, task, doc in design.members(unit):
            keep[task].add(doc)
    subset = parent.restricted(keep)
    manifest = replace(
        subset.manifest,
        name=name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        proxy=design,
    )
    return Run(manifest=manifest, records=subset.records)
