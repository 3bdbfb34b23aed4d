"""The creep guard's rule: the candidate also gated against an older anchor baseline.

Each gated accuracy or score unit is measured on the candidate's pairing with the anchor
(`policy.anchor`) and held to the margin rule at `policy.max_cumulative_drop`, in the same
family as every other test, so a chain of small accepted drops cannot add up unseen
(docs/gate.md, "Creep guard").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.gate.judged import needs_judge
from regress.gate.outcomes import unit_kind
from regress.gate.pairing import Paired, pair
from regress.gate.policy import Policy, UnitPolicy
from regress.gate.results import UnitKind
from regress.gate.rule import Context
from regress.gate.units import Units, measure_unit
from regress.stats import Rule


@dataclass(frozen=True)
class Since:
    """The creep guard's pairing: the candidate matched with the policy's anchor baseline."""

    anchor: Run
    paired: Paired

    @property
    def label(self) -> str:
        return self.anchor.manifest.name


def pair_anchor(anchor: Run, candidate: Run, allow_mismatch: bool = False) -> Since:
    """Pair `candidate` with the anchor baseline, as `pair` does with the checked baseline.

    Raises BadInput (naming the anchor) for a proxy anchor, whose estimate needs its own
    sampled examples, or for examples that differ from the candidate's.
    """
    name = anchor.manifest.name
    if anchor.manifest.proxy is not None:
        raise BadInput(f"anchor {name!r} is a proxy: anchor the creep guard on a full baseline")
    try:
        return Since(anchor, pair(anchor, candidate, allow_mismatch))
    except BadInput as exc:
        raise BadInput(f"anchor {name!r}: {exc}") from exc


def creep_policies(since: Since, policy: Policy) -> dict[str, UnitPolicy]:
    """The creep guard's units: every gated accuracy or score unit the anchor pairs, held to
    the margin rule at max_cumulative_drop (a perplexity unit's budget is not an absolute
    drop, so it has none; a judged unit is judged against the checked baseline only)."""
    pairs = since.paired.pairs
    found = {}
    judged = needs_judge(since.paired.units, policy.judge.units if policy.judge else ())
    for name, members in since.paired.units.items():
        if name in judged:
            continue  # verdicts are made per pairing: the anchor's pairing was never judged
        own = policy.for_unit(name)
        records = {t.name: [base for base, _ in pairs[t.name]] for t in members}
        if own.gate and unit_kind(name, members, records) is not UnitKind.PERPLEXITY:
            found[name] = replace(own, max_drop=policy.max_cumulative_drop, rule=Rule.MARGIN)
    return found


def measure(context: Context, since: Since, creep: dict[str, UnitPolicy]) -> Units:
    """The creep guard's units (`creep`, from `creep_policies`) measured on the anchor's
    pairing, each named `<unit> since <anchor>`."""
    units, drops = [], []
    for name, unit_policy in creep.items():
        members = since.paired.units[name]
        unit, _, test = measure_unit(
            name, members, since.paired.pairs, context.policy, unit_policy, context.k
        )
        units.append(replace(unit, name=f"{name} since {since.label}", since=since.label))
        drops.append(test)
    return Units(tuple(units), tuple(drops))
