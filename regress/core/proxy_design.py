"""The sampling design of a proxy baseline: which examples of a parent baseline it holds, why.

A proxy keeps a stratified random sample of its parent's examples: each gated unit's examples
are cut into strata by the reference model's margin (regress.gate.margins), and each stratum gives
a simple random sample without replacement. Every sampled example therefore has a known
inclusion probability n_h / N_h, and the gate can estimate what the whole parent suite would
have shown (regress.stats.stratified). The design lives in the proxy's manifest, so a proxy cannot
be read, or gated, as if it were a plain baseline.

Every estimate is weighed by the strata's populations, so a design is refused when read unless
it is whole: it carries a digest of its contents, written with it (`regress proxy build`), and
each unit's strata hold their equal cuts of the unit's margin ranking, as the build draws them
(moving 400 examples between four strata, the sum kept, once moved a proxy's estimate from a
drop of 0.8 points to one of 9.1). The digest is public: it catches an edit that does not
recompute it; the cuts hold the populations against one that does, and `baseline verify`
checks every stratum against the parent's own margins when the parent is in the store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from regress.core.errors import BadInput


@dataclass(frozen=True)
class Calibration:
    """How often answers change by margin quantile, measured on real candidates."""

    name: str
    source: str
    """What was measured: reference model, candidates, tasks, examples."""
    points: tuple[tuple[float, float], ...]
    """(margin quantile, flip rate) pairs, quantiles ascending in [0, 1]; 0 = least sure."""

    def flip_rate(self, quantile: float) -> float:
        """The flip rate at a margin quantile, linear between the measured points."""
        xs = [q for q, _ in self.points]
        ys = [f for _, f in self.points]
        if quantile <= xs[0]:
            return ys[0]
        for (x0, y0), (x1, y1) in zip(self.points, self.points[1:], strict=False):
            if quantile <= x1:
                return y0 + (y1 - y0) * (quantile - x0) / (x1 - x0)
        return ys[-1]


@dataclass(frozen=True)
class Stratum:
    """One stratum: the parent's examples of one unit within a margin range, and the sample."""

    unit: str
    """The gated unit (a task, or a group such as mmlu)."""
    index: int
    """Margin rank within the unit: 0 holds the least sure examples."""
    margin_low: float
    margin_high: float
    """Range of the reference's log-likelihood margins in the parent, both ends included."""
    population: int
    """N_h: the parent's examples in the stratum."""
    flip_rate: float
    """The calibration's flip rate the allocation assumed for it."""
    docs: dict[str, tuple[int, ...]]
    """Sampled doc ids by task."""

    @property
    def sampled(self) -> int:
        """n_h: examples sampled from the stratum."""
        return sum(len(ids) for ids in self.docs.values())

    @property
    def inclusion_probability(self) -> float:
        """n_h / N_h: the chance that any one of the stratum's examples is in the proxy."""
        return self.sampled / self.population


@dataclass(frozen=True)
class ProxyDesign:
    """Everything that makes a proxy's estimates design-unbiased for its parent suite."""

    parent: str
    """The parent baseline's name."""
    parent_records_sha256: dict[str, str]
    """The parent's records files by task, as the proxy was drawn from them."""
    parent_n: dict[str, int]
    """The parent's examples by task."""
    seed: int
    budget: int
    calibration: Calibration
    strata: tuple[Stratum, ...] = field(default_factory=tuple)

    def unit_strata(self, unit: str) -> tuple[Stratum, ...]:
        """A unit's strata, least sure first."""
        return tuple(s for s in self.strata if s.unit == unit)

    def members(self, unit: str) -> Iterator[tuple[int, str, int]]:
        """(h, task, doc_id) of every example sampled for a unit, where h is the position of
        its stratum in `unit_strata(unit)`."""
        for h, stratum in enumerate(self.unit_strata(unit)):
            for task, ids in stratum.docs.items():
                for doc in ids:
                    yield h, task, doc

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the manifest, signed by its `digest`."""
        return {**self._body(), "digest": self.digest()}

    def _body(self) -> dict[str, Any]:
        data = asdict(self)
        for stratum in data["strata"]:
            stratum["docs"] = {task: list(ids) for task, ids in sorted(stratum["docs"].items())}
        data["calibration"]["points"] = [list(p) for p in self.calibration.points]
        return data

    def digest(self) -> str:
        """sha256 of the design's canonical JSON (keys sorted), written beside it: a design
        edited after it was written no longer matches."""
        text = json.dumps(self._body(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProxyDesign:
        """Parse the manifest's `proxy` section; malformed data is BadInput."""
        try:
            calibration = data["calibration"]
            strata = tuple(
                Stratum(
                    unit=s["unit"],
                    index=int(s["index"]),
                    margin_low=float(s["margin_low"]),
                    margin_high=float(s["margin_high"]),
                    population=int(s["population"]),
                    flip_rate=float(s["flip_rate"]),
                    docs={task: tuple(int(d) for d in ids) for task, ids in s["docs"].items()},
                )
                for s in data["strata"]
            )
            design = cls(
                parent=data["parent"],
                parent_records_sha256=dict(data["parent_records_sha256"]),
                parent_n={k: int(v) for k, v in data["parent_n"].items()},
                seed=int(data["seed"]),
                budget=int(data["budget"]),
                calibration=Calibration(
                    name=calibration["name"],
                    source=calibration["source"],
                    points=tuple((float(q), float(f)) for q, f in calibration["points"]),
                ),
                strata=strata,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput(f"proxy design: malformed ({exc})") from exc
        signed = data.get("digest")
        if signed is None:
            raise BadInput(
                "proxy design: no digest (drawn before regress signed its designs): draw it "
                "again with `regress proxy build` (no model runs)"
            )
        if signed != design.digest():
            raise BadInput(
                "proxy design: its digest does not match its contents (edited after it was "
                "drawn): draw it again with `regress proxy build`"
            )
        for stratum in design.strata:
            if not 2 <= stratum.sampled <= stratum.population:
                raise BadInput(
                    f"proxy design: stratum {stratum.unit}/{stratum.index} samples "
                    f"{stratum.sampled} of {stratum.population} examples"
                )
        design._check_cuts()
        return design

    def _check_cuts(self) -> None:
        """BadInput unless each unit's strata are numbered 0, 1, ... and hold the equal cuts of
        the unit's examples ranked by margin that the build draws (regress.proxy.build): a
        population moved from one stratum to another, the sum kept, reweighs every estimate."""
        for unit in dict.fromkeys(s.unit for s in self.strata):
            strata = self.unit_strata(unit)
            total, count = sum(s.population for s in strata), len(strata)
            for k, stratum in enumerate(strata):
                start, end = cut_bounds(total, count, k)
                if stratum.index != k or stratum.population != end - start:
                    raise BadInput(
                        f"proxy design: stratum {unit}/{stratum.index} holds "
                        f"{stratum.population} of the unit's {total} examples; stratum {k} of "
                        f"{count} equal cuts of their margin ranking holds {end - start}"
                    )


def cut_bounds(total: int, count: int, k: int) -> tuple[int, int]:
    """The bounds [start, end) of cut k of `count` equal cuts of `total` ranked examples: how
    a proxy's build cuts a unit into strata, and how its design is checked."""
    return k * total // count, (k + 1) * total // count
